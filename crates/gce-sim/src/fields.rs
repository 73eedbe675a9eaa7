//! The `fields` query parameter (partial responses), as Google's APIs define it:
//!
//! * `a,b` selects several fields; `a/b` a field inside another; `a(b,c)` several fields inside one
//!   (inside an array, of every element: `items(name,status)`);
//! * `*` selects every member of an object, so `items/*/instances(name,status)` reaches into the
//!   scopes of an aggregated list whatever their keys (`zones/us-central1-a`, ...).
//!
//! Each selected name is checked against the method's response schema in the discovery document:
//! an unknown field, a sub-selection of a scalar, a map key named literally (the keys of aggregated
//! lists contain `/`, so only `*` can reach them) or broken syntax is a 400 naming it, as GCE answers
//! "Invalid field selection ...".

use super::error::ApiError;
use super::schema;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A parsed selection: field name (or `*`) → what to keep inside it (empty: all of it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fields {
    children: BTreeMap<String, Fields>,
    /// Everything below this point is kept.
    all: bool,
}

impl Fields {
    /// Parses `fields` and checks it against the response schema of `method_id` (if it has one).
    pub fn parse(text: &str, method_id: &str) -> Result<Fields, ApiError> {
        let chars: Vec<char> = text.chars().collect();
        let mut pos = 0;
        let mut f = Fields::default();
        parse_list(&chars, &mut pos, &mut f).map_err(|e| invalid(text, &e))?;
        if pos != chars.len() {
            return Err(invalid(text, &format!("unexpected '{}' at position {pos}", chars[pos])));
        }
        if let Some(name) = schema::response_schema(method_id) {
            f.check(&serde_json::json!({"$ref": name}), "").map_err(|e| invalid(text, &e))?;
        }
        Ok(f)
    }

    fn merge(&mut self, path: &[String], sub: Fields) {
        match path.split_first() {
            None => {
                if sub.children.is_empty() {
                    self.all = true;
                    self.children.clear();
                } else if !self.all {
                    for (k, v) in sub.children {
                        self.children.entry(k.clone()).or_default().merge(&[], v);
                    }
                }
            }
            Some((first, rest)) => {
                if !self.all {
                    self.children.entry(first.clone()).or_default().merge(rest, sub);
                }
            }
        }
    }

    /// Walks the selection along the schema; `at` names the path so far.
    fn check(&self, spec: &Value, at: &str) -> Result<(), String> {
        if self.all || self.children.is_empty() {
            return Ok(());
        }
        let spec = schema::resolve_spec(spec);
        // Arrays are transparent: a selection applies to every element.
        if spec.get("type").and_then(Value::as_str) == Some("array") {
            return self.check(spec.get("items").unwrap_or(&Value::Null), at);
        }
        let props = spec.get("properties").and_then(Value::as_object);
        let additional = spec.get("additionalProperties");
        if props.is_none() && additional.is_none() {
            return Err(format!("{at} has no fields to select"));
        }
        for (name, sub) in &self.children {
            let path = if at.is_empty() { name.clone() } else { format!("{at}/{name}") };
            if name == "*" {
                // `*` over a message's fields (not a map): any of them; what follows is not checked.
                if let Some(a) = additional {
                    sub.check(a, &path)?;
                }
                continue;
            }
            match props.and_then(|p| p.get(name)) {
                Some(p) => sub.check(p, &path)?,
                None if additional.is_some() => {
                    return Err(format!("{path}: a map key cannot be selected by name; use '*'"))
                }
                None => return Err(format!("unknown field {path}")),
            }
        }
        Ok(())
    }

    /// Keeps only the selected parts of `v`.
    pub fn apply(&self, v: Value) -> Value {
        if self.all || self.children.is_empty() {
            return v;
        }
        match v {
            Value::Array(items) => Value::Array(items.into_iter().map(|i| self.apply(i)).collect()),
            Value::Object(obj) => {
                let star = self.children.get("*");
                let mut out = Map::new();
                for (k, val) in obj {
                    let sub = self.children.get(&k).or(star);
                    if let Some(sub) = sub {
                        out.insert(k, sub.apply(val));
                    }
                }
                Value::Object(out)
            }
            scalar => scalar,
        }
    }
}

fn invalid(text: &str, why: &str) -> ApiError {
    let mut e = ApiError::new(400, "invalidParameter", format!("Invalid field selection {text}: {why}"));
    e.location = Some(Box::new(("fields".into(), "parameter".into())));
    e
}

/// `list := item (',' item)*`
fn parse_list(c: &[char], pos: &mut usize, into: &mut Fields) -> Result<(), String> {
    loop {
        skip_ws(c, pos);
        parse_item(c, pos, into)?;
        skip_ws(c, pos);
        if c.get(*pos) == Some(&',') {
            *pos += 1;
        } else {
            return Ok(());
        }
    }
}

/// `item := path ['(' list ')']`, `path := name ('/' name)*`, `name := [A-Za-z0-9_]+ | '*'`
fn parse_item(c: &[char], pos: &mut usize, into: &mut Fields) -> Result<(), String> {
    let mut path = Vec::new();
    loop {
        let start = *pos;
        if c.get(*pos) == Some(&'*') {
            *pos += 1;
        } else {
            while c.get(*pos).is_some_and(|ch| ch.is_ascii_alphanumeric() || *ch == '_') {
                *pos += 1;
            }
        }
        if *pos == start {
            return Err(match c.get(*pos) {
                Some(ch) => format!("expected a field name at position {start}, found '{ch}'"),
                None => "expected a field name at the end".to_string(),
            });
        }
        path.push(c[start..*pos].iter().collect::<String>());
        if c.get(*pos) == Some(&'/') {
            *pos += 1;
        } else {
            break;
        }
    }
    let mut sub = Fields::default();
    skip_ws(c, pos);
    if c.get(*pos) == Some(&'(') {
        *pos += 1;
        parse_list(c, pos, &mut sub)?;
        skip_ws(c, pos);
        if c.get(*pos) != Some(&')') {
            return Err(format!("missing ')' at position {pos}"));
        }
        *pos += 1;
    }
    into.merge(&path, sub);
    Ok(())
}

fn skip_ws(c: &[char], pos: &mut usize) {
    while c.get(*pos).is_some_and(|ch| ch.is_whitespace()) {
        *pos += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selections_keep_what_they_name() {
        let list = json!({"kind": "compute#instanceList", "nextPageToken": "t",
                          "items": [{"name": "a", "status": "RUNNING", "zone": "z", "labels": {"k": "v"}},
                                    {"name": "b", "status": "STAGING", "zone": "z"}]});
        let f = Fields::parse("items(name,status),nextPageToken", "instances.list").unwrap();
        assert_eq!(
            f.apply(list.clone()),
            json!({"nextPageToken": "t", "items": [{"name": "a", "status": "RUNNING"}, {"name": "b", "status": "STAGING"}]})
        );
        let f = Fields::parse("items/name", "instances.list").unwrap();
        assert_eq!(f.apply(list.clone()), json!({"items": [{"name": "a"}, {"name": "b"}]}));
        let f = Fields::parse("items/labels,items(name)", "instances.list").unwrap();
        assert_eq!(f.apply(list), json!({"items": [{"name": "a", "labels": {"k": "v"}}, {"name": "b"}]}));
        let agg = json!({"items": {"zones/z": {"instances": [{"name": "a", "status": "RUNNING"}]},
                                   "zones/y": {"warning": {"code": "UNREACHABLE"}}},
                         "unreachables": ["zones/y"], "kind": "k"});
        let f = Fields::parse(
            "items/*/instances(name),items/*/warning/code,unreachables",
            "instances.aggregatedList",
        )
        .unwrap();
        assert_eq!(
            f.apply(agg),
            json!({"items": {"zones/z": {"instances": [{"name": "a"}]}, "zones/y": {"warning": {"code": "UNREACHABLE"}}},
                   "unreachables": ["zones/y"]})
        );
    }

    #[test]
    fn bad_selections_are_400s_naming_them() {
        let cases = [
            ("items(name,stauts)", "items/stauts"),
            ("nextPagToken", "nextPagToken"),
            ("items(name", "missing ')'"),
            ("items/name/x", "items/name"),
            ("items/zones~us", "unexpected '~'"),
            ("items/zones/instances", "map key"),
            ("items/labels/env", "map key"),
            ("", "expected a field name"),
            ("items(,name)", "expected a field name"),
        ];
        for (text, mentions) in cases {
            let method =
                if text.starts_with("items/zones") { "instances.aggregatedList" } else { "instances.list" };
            let e = Fields::parse(text, method).unwrap_err();
            assert_eq!((e.code, e.reason.as_str()), (400, "invalidParameter"), "{text}");
            assert!(e.messages[0].contains(mentions), "{text}: {:?}", e.messages);
        }
    }
}
