//! A YAML document as a tree whose every value knows its line, so an import error can point at it.
//!
//! slurm-gcp's config.yaml is written by PyYAML (`yaml.dump`) on the controller and by
//! terraform's `yamlencode` in the bucket; both write plain YAML 1.1 scalars, block or flow
//! collections, and PyYAML writes an object met twice once with an anchor (`&id001`) and then as
//! an alias (`*id001`). Scalars are typed as PyYAML reads them back: `null`/`~`/empty, booleans
//! (including YAML 1.1's `yes`/`no`/`on`/`off`), integers and floats when plain, strings otherwise.

use std::collections::HashMap;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// A value and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Yaml {
    pub line: usize,
    pub value: Value,
}

/// A YAML value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Yaml>),
    /// In file order; keys are the scalars' text.
    Map(Vec<(String, Yaml)>),
}

impl Yaml {
    /// The value under `key`, when this is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// What the value is, in words, for error messages.
    pub fn kind(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// Why a text is not one YAML document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct YamlError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Parse `text` as one YAML document (an empty text is `null`).
pub fn parse(text: &str) -> Result<Yaml, YamlError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    parser.load(&mut builder, true).map_err(|e| YamlError {
        line: e.marker().line(),
        column: e.marker().col() + 1,
        message: e.info().to_string(),
    })?;
    if let Some(message) = builder.error {
        return Err(message);
    }
    Ok(builder.root.unwrap_or(Yaml { line: 1, value: Value::Null }))
}

/// An open collection: its line, its anchor, and what it holds so far.
enum Open {
    Seq { line: usize, anchor: usize, items: Vec<Yaml> },
    Map { line: usize, anchor: usize, entries: Vec<(String, Yaml)>, key: Option<String> },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Open>,
    anchors: HashMap<usize, Yaml>,
    root: Option<Yaml>,
    error: Option<YamlError>,
}

impl Builder {
    fn fail(&mut self, mark: Marker, message: String) {
        if self.error.is_none() {
            self.error = Some(YamlError { line: mark.line(), column: mark.col() + 1, message });
        }
    }

    /// A finished value goes into the collection that is open (as a key or a value), or is the root.
    fn push(&mut self, value: Yaml, anchor: usize, mark: Marker) {
        if anchor > 0 {
            self.anchors.insert(anchor, value.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Open::Seq { items, .. }) => items.push(value),
            Some(Open::Map { entries, key, .. }) => match key.take() {
                Some(k) => entries.push((k, value)),
                None => match value.value {
                    Value::Str(s) => *key = Some(s),
                    Value::Int(n) => *key = Some(n.to_string()),
                    Value::Bool(b) => *key = Some(b.to_string()),
                    Value::Null => *key = Some(String::new()),
                    _ => {
                        *key = Some(String::new());
                        let what = value.kind();
                        self.fail(mark, format!("a mapping key is {what}; only scalar keys are read"));
                    }
                },
            },
        }
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line();
        match ev {
            Event::Scalar(text, style, anchor, _tag) => {
                let value = if style == TScalarStyle::Plain { plain(&text) } else { Value::Str(text) };
                self.push(Yaml { line, value }, anchor, mark);
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Open::Seq { line, anchor, items: Vec::new() }),
            Event::MappingStart(anchor, _) => {
                self.stack.push(Open::Map { line, anchor, entries: Vec::new(), key: None })
            }
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Open::Seq { line, anchor, items }) => {
                    self.push(Yaml { line, value: Value::Seq(items) }, anchor, mark)
                }
                Some(Open::Map { line, anchor, entries, .. }) => {
                    self.push(Yaml { line, value: Value::Map(entries) }, anchor, mark)
                }
                None => {}
            },
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(value) => self.push(value, 0, mark),
                None => self.fail(mark, "an alias to an unknown anchor".into()),
            },
            Event::DocumentStart if self.root.is_some() => {
                self.fail(mark, "more than one YAML document; config.yaml holds one".into())
            }
            _ => {}
        }
    }
}

/// A plain scalar typed as PyYAML's SafeLoader types it.
fn plain(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => return Value::Bool(true),
        "false" | "False" | "FALSE" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => {
            return Value::Bool(false)
        }
        _ => {}
    }
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let negative = s.starts_with('-');
    let int = if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(&hex.replace('_', ""), 16).ok()
    } else if let Some(oct) = digits.strip_prefix("0o") {
        i64::from_str_radix(&oct.replace('_', ""), 8).ok()
    } else if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit() || c == '_') {
        digits.replace('_', "").parse::<i64>().ok()
    } else {
        None
    };
    if let Some(n) = int {
        return Value::Int(if negative { -n } else { n });
    }
    let looks_numeric = digits.chars().next().is_some_and(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-' | '_'));
    if looks_numeric {
        if let Ok(f) = s.replace('_', "").parse::<f64>() {
            return Value::Float(f);
        }
    }
    Value::Str(s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_typed_as_pyyaml_reads_them() {
        for (text, want) in [
            ("a: 604800", Value::Int(604800)),
            ("a: -3", Value::Int(-3)),
            ("a: 0x1f", Value::Int(31)),
            ("a: 1.5", Value::Float(1.5)),
            ("a: true", Value::Bool(true)),
            ("a: 'true'", Value::Str("true".into())),
            ("a: 'YES'", Value::Str("YES".into())),
            ("a: no", Value::Bool(false)),
            ("a: null", Value::Null),
            ("a: ~", Value::Null),
            ("a:", Value::Null),
            ("a: ''", Value::Str(String::new())),
            ("a: 2-00:00:00", Value::Str("2-00:00:00".into())),
            ("a: 6820-6830", Value::Str("6820-6830".into())),
            ("a: \"604800\"", Value::Str("604800".into())),
            ("a: 2.14.0", Value::Str("2.14.0".into())),
        ] {
            let doc = parse(text).unwrap();
            assert_eq!(doc.get("a").map(|v| &v.value), Some(&want), "{text}");
        }
    }

    #[test]
    fn lines_anchors_and_flow_collections() {
        let text = "x:\n  - &id001\n    k: 1\n  - *id001\ny: {\"q\": [1, 2]}\n";
        let doc = parse(text).unwrap();
        let Some(Yaml { value: Value::Seq(items), line }) = doc.get("x") else { panic!("{doc:?}") };
        assert_eq!(*line, 2);
        assert_eq!(items[0], items[1]);
        assert_eq!(items[0].get("k").unwrap().line, 3);
        let q = doc.get("y").unwrap().get("q").unwrap();
        assert_eq!(
            q.value,
            Value::Seq(vec![Yaml { line: 5, value: Value::Int(1) }, Yaml { line: 5, value: Value::Int(2) }])
        );
    }

    #[test]
    fn errors_say_where() {
        let e = parse("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(e.line >= 1 && !e.message.is_empty(), "{e}");
        let e = parse("a: *nope\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        let e = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("more than one"), "{e}");
    }
}
