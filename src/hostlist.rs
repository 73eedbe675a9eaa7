//! (in progress) minimal stand-in until the hostlist branch lands.
pub fn compress<S: AsRef<str>>(names: &[S]) -> String {
    names.iter().map(|s| s.as_ref()).collect::<Vec<_>>().join(",")
}
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone)]
#[error("bad hostlist")]
pub struct HostlistError;
pub fn expand(expr: &str) -> Result<Vec<String>, HostlistError> {
    Ok(expr.split(',').filter(|s| !s.is_empty()).map(String::from).collect())
}
