//! Validation of requests (and the simulator's own responses) against the Compute discovery document.
//!
//! The simulator embeds `crates/gce-sim/data/compute.v1.trimmed.json` (written by `scripts/trim-discovery.py`)
//! and checks every request body and query parameter against it before acting, so a client that names
//! a field wrongly (`requested_run_duration`), sends the wrong JSON type or an unknown enum value is
//! refused as GCE would refuse it, instead of being silently understood.

use serde_json::Value;
use std::sync::OnceLock;

/// The trimmed discovery document: only the methods the simulator serves and the schemas they reach.
const DISCOVERY: &str = include_str!("../data/compute.v1.trimmed.json");

/// The parsed document, parsed on first use.
fn doc() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| serde_json::from_str(DISCOVERY).expect("embedded discovery document is JSON"))
}

/// Whether values are checked as a client would send them or as a server returns them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    /// A request body: int64 may be a JSON number or a string, as GCE accepts both.
    Request,
    /// A response: int64 must be a string, as GCE always sends it.
    Response,
}

/// The discovery entry of a method, by id with or without the `compute.` prefix.
pub fn method(method_id: &str) -> Option<&'static Value> {
    let id = method_id.strip_prefix("compute.").unwrap_or(method_id);
    let (resource, name) = id.split_once('.')?;
    doc().get("resources")?.get(resource)?.get("methods")?.get(name)
}

/// Validates a request body for `method_id` (e.g. `regionInstanceGroupManagerResizeRequests.insert`).
///
/// Errors are messages naming the offending field, shaped like the ones GCE's front end returns.
/// A method that takes no body accepts only an empty object.
pub fn validate_request_body(method_id: &str, body: &Value) -> Result<(), Vec<String>> {
    let Some(m) = method(method_id) else {
        return Err(vec![format!("unknown method {method_id}")]);
    };
    let mut errors = Vec::new();
    match m.get("request").and_then(|r| r.get("$ref")).and_then(Value::as_str) {
        Some(schema) => {
            check(&serde_json::json!({ "$ref": schema }), body, "resource", Direction::Request, &mut errors)
        }
        None => match body {
            Value::Null => {}
            Value::Object(o) if o.is_empty() => {}
            Value::Object(o) => {
                for k in o.keys() {
                    errors.push(unknown_name(k, "resource"));
                }
            }
            _ => errors.push("Invalid JSON payload received. Expected an object.".to_string()),
        },
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Validates a response (or any value) against a named schema such as `InstanceGroupManager`.
pub fn validate_value(schema: &str, value: &Value, direction: Direction) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    check(&serde_json::json!({ "$ref": schema }), value, schema, direction, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The response schema name of a method (`Operation`, `InstanceGroupManager`, ...).
pub fn response_schema(method_id: &str) -> Option<&'static str> {
    method(method_id)?.get("response")?.get("$ref")?.as_str()
}

/// The `kind` a schema's resources carry (its `kind` property's default), e.g. `compute#instanceList`.
pub fn kind_of(schema: &str) -> Option<&'static str> {
    doc().get("schemas")?.get(schema)?.pointer("/properties/kind/default")?.as_str()
}

/// Validates query parameters: each must be a query parameter of the method or a global one,
/// of the declared type and within its declared bounds.
pub fn validate_query(method_id: &str, query: &[(String, String)]) -> Result<(), Vec<String>> {
    let Some(m) = method(method_id) else {
        return Err(vec![format!("unknown method {method_id}")]);
    };
    let mut errors = Vec::new();
    for (name, value) in query {
        let spec = m
            .get("parameters")
            .and_then(|p| p.get(name))
            .filter(|s| s.get("location").and_then(Value::as_str) == Some("query"))
            .or_else(|| doc().get("parameters").and_then(|p| p.get(name)));
        let Some(spec) = spec else {
            errors.push(format!(
                "Invalid JSON payload received. Unknown name \"{name}\": Cannot bind query parameter. Field '{name}' could not be found in request message."
            ));
            continue;
        };
        if let Err(e) = check_query_value(name, value, spec) {
            errors.push(e);
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn check_query_value(name: &str, value: &str, spec: &Value) -> Result<(), String> {
    let invalid = || format!("Invalid value for field '{name}': '{value}'.");
    match spec.get("type").and_then(Value::as_str) {
        Some("integer") => {
            let n: i64 = value.parse().map_err(|_| invalid())?;
            let bound = |k: &str| spec.get(k).and_then(Value::as_str).and_then(|s| s.parse::<i64>().ok());
            if bound("minimum").is_some_and(|min| n < min) {
                return Err(format!(
                    "{} Must be greater than or equal to {}",
                    invalid(),
                    bound("minimum").unwrap_or(0)
                ));
            }
            if bound("maximum").is_some_and(|max| n > max) {
                return Err(invalid());
            }
            if spec.get("format").and_then(Value::as_str) == Some("uint32")
                && !(0..=u32::MAX as i64).contains(&n)
            {
                return Err(invalid());
            }
        }
        Some("boolean") if value != "true" && value != "false" => return Err(invalid()),
        _ => {}
    }
    if let Some(allowed) = spec.get("enum").and_then(Value::as_array) {
        if !allowed.iter().any(|a| a.as_str() == Some(value)) {
            return Err(invalid());
        }
    }
    Ok(())
}

fn unknown_name(name: &str, at: &str) -> String {
    format!("Invalid JSON payload received. Unknown name \"{name}\" at '{at}': Cannot find field.")
}

/// A property spec with its `$ref` (if any) resolved to the named schema.
pub fn resolve_spec(spec: &Value) -> &Value {
    resolve(spec)
}

fn resolve(spec: &Value) -> &Value {
    match spec.get("$ref").and_then(Value::as_str) {
        Some(name) => doc().get("schemas").and_then(|s| s.get(name)).unwrap_or(&Value::Null),
        None => spec,
    }
}

/// Walks `value` against the property spec `spec`, pushing one message per problem.
fn check(spec: &Value, value: &Value, path: &str, dir: Direction, errors: &mut Vec<String>) {
    let spec = resolve(spec);
    if value.is_null() {
        // proto3 JSON: null means "not set", which GCE accepts for any field.
        return;
    }
    let wrong_type = |want: &str| format!("Invalid value at '{path}' ({want}), {value}");
    match spec.get("type").and_then(Value::as_str) {
        Some("object") => {
            let Some(obj) = value.as_object() else {
                errors.push(wrong_type("type.googleapis.com/object"));
                return;
            };
            let props = spec.get("properties").and_then(Value::as_object);
            let additional = spec.get("additionalProperties");
            for (k, v) in obj {
                let child = format!("{path}.{k}");
                if let Some(p) = props.and_then(|p| p.get(k)) {
                    check(p, v, &child, dir, errors);
                } else if let Some(a) = additional {
                    check(a, v, &child, dir, errors);
                } else if props.is_some() {
                    errors.push(unknown_name(k, path));
                }
            }
        }
        Some("array") => {
            let Some(items) = value.as_array() else {
                errors.push(wrong_type("TYPE_LIST"));
                return;
            };
            let item_spec = spec.get("items").unwrap_or(&Value::Null);
            for (i, v) in items.iter().enumerate() {
                check(item_spec, v, &format!("{path}[{i}]"), dir, errors);
            }
        }
        Some("string") => {
            let format = spec.get("format").and_then(Value::as_str);
            match (value, format) {
                (Value::String(s), Some("int64")) if s.parse::<i64>().is_err() => {
                    errors.push(wrong_type("TYPE_INT64"))
                }
                (Value::String(s), Some("uint64")) if s.parse::<u64>().is_err() => {
                    errors.push(wrong_type("TYPE_UINT64"))
                }
                (Value::String(s), _) => {
                    if let Some(allowed) = spec.get("enum").and_then(Value::as_array) {
                        if !allowed.iter().any(|a| a.as_str() == Some(s)) {
                            errors.push(format!("Invalid value at '{path}' (TYPE_ENUM), \"{s}\""));
                        }
                    }
                }
                (Value::Number(n), Some("int64")) if dir == Direction::Request && n.is_i64() => {}
                (Value::Number(n), Some("uint64")) if dir == Direction::Request && n.is_u64() => {}
                _ => errors.push(wrong_type("TYPE_STRING")),
            }
        }
        Some("integer") => {
            let ok = match spec.get("format").and_then(Value::as_str) {
                Some("int32") => value.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
                Some("uint32") => value.as_u64().is_some_and(|n| u32::try_from(n).is_ok()),
                _ => value.as_i64().is_some() || value.as_u64().is_some(),
            };
            if !ok {
                errors.push(wrong_type("TYPE_INT32"));
            }
        }
        Some("number") if !value.is_number() => errors.push(wrong_type("TYPE_DOUBLE")),
        Some("boolean") if !value.is_boolean() => errors.push(wrong_type("TYPE_BOOL")),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resize_request_body_is_checked_by_name_type_and_enum() {
        let id = "regionInstanceGroupManagerResizeRequests.insert";
        let good = json!({"name": "rr-1", "instances": [{"name": "hpc-a3u-0"}],
                          "requestedRunDuration": {"seconds": "3600"}});
        assert_eq!(validate_request_body(id, &good), Ok(()));
        let snake = json!({"name": "rr-1", "requested_run_duration": {"seconds": "3600"}});
        let errs = validate_request_body(id, &snake).unwrap_err();
        assert!(errs[0].contains("requested_run_duration"), "{errs:?}");
        let wrong = json!({"name": "rr-1", "resizeBy": "2"});
        assert!(validate_request_body(id, &wrong).unwrap_err()[0].contains("resizeBy"));
        let bad_seconds = json!({"requestedRunDuration": {"seconds": "ten"}});
        assert!(validate_request_body(id, &bad_seconds).is_err());
        let mig = json!({"name": "m", "distributionPolicy": {"targetShape": "ONE_ZONE"}});
        let errs = validate_request_body("compute.regionInstanceGroupManagers.insert", &mig).unwrap_err();
        assert!(errs[0].contains("targetShape"), "{errs:?}");
    }

    #[test]
    fn bodiless_methods_accept_only_empty_bodies() {
        let id = "regionInstanceGroupManagers.listManagedInstances";
        assert_eq!(validate_request_body(id, &json!({})), Ok(()));
        assert!(validate_request_body(id, &json!({"x": 1})).is_err());
    }

    #[test]
    fn query_parameters_are_known_and_typed() {
        let id = "instances.list";
        let q = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        assert_eq!(validate_query(id, &q("maxResults", "10")), Ok(()));
        assert_eq!(validate_query(id, &q("prettyPrint", "false")), Ok(()));
        assert!(validate_query(id, &q("max_results", "10")).is_err());
        assert!(validate_query(id, &q("maxResults", "-1")).is_err());
        assert!(validate_query(id, &q("maxResults", "ten")).is_err());
        assert!(validate_query(id, &q("requestId", "x")).is_err());
    }
}
