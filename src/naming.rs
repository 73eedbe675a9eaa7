//! (in progress) minimal stand-in until the config branch lands; same API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub nodeset: String,
    pub index: u32,
    pub is_static: bool,
}
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotOurs(pub String);
