//! `elicitation/v1`: MCP-compatible structured questions. The agent may attach a
//! `requestedSchema` to a request for input; it must be MCP's flat shape (an object of
//! primitive properties). An answer given as a data part in MCP's result shape
//! (`{action: accept|decline|cancel, content}`) is checked against it. A leaf (it knows
//! only JSON and [`FieldError`]): the plane checks schemas and answers with it, and the
//! agent's tools build the question it describes.

use serde_json::{Map, Value};

use crate::field_error::FieldError;

/// A schema or answer that does not fit; its field is a JSON path.
fn mismatch(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError::new(field, message)
}

const PRIMITIVES: [&str; 4] = ["string", "number", "integer", "boolean"];

/// Checks that `schema` is an MCP elicitation `requestedSchema`: `{"type": "object",
/// "properties": {name: {"type": string|number|integer|boolean, ...}}, "required"?: [...]}`
/// with no nesting.
pub fn check_requested_schema(schema: &Value) -> Result<(), FieldError> {
    let object = schema
        .as_object()
        .ok_or_else(|| mismatch("requestedSchema", "must be a JSON object"))?;
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Err(mismatch("requestedSchema.type", "must be \"object\""));
    }
    let properties = object
        .get("properties")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            mismatch(
                "requestedSchema.properties",
                "must be an object of properties",
            )
        })?;
    if properties.is_empty() {
        return Err(mismatch(
            "requestedSchema.properties",
            "must declare at least one property",
        ));
    }
    for (name, property) in properties {
        let at = format!("requestedSchema.properties.{name}");
        let property = property
            .as_object()
            .ok_or_else(|| mismatch(&at, "must be an object"))?;
        let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
        if !PRIMITIVES.contains(&kind) {
            return Err(mismatch(
                format!("{at}.type"),
                "must be string, number, integer or boolean (MCP elicitation schemas are flat)",
            ));
        }
        if let Some(options) = property.get("enum") {
            let ok = options
                .as_array()
                .is_some_and(|o| !o.is_empty() && o.iter().all(Value::is_string));
            if !ok || kind != "string" {
                return Err(mismatch(
                    format!("{at}.enum"),
                    "must be a non-empty list of strings on a string property",
                ));
            }
        }
    }
    if let Some(required) = object.get("required") {
        let names = required.as_array().ok_or_else(|| {
            mismatch(
                "requestedSchema.required",
                "must be a list of property names",
            )
        })?;
        for name in names {
            let known = name.as_str().is_some_and(|n| properties.contains_key(n));
            if !known {
                return Err(mismatch(
                    "requestedSchema.required",
                    format!("names {name}, which is not a property"),
                ));
            }
        }
    }
    Ok(())
}

/// Whether a data value is an answer in MCP's result shape.
pub fn is_answer(value: &Value) -> bool {
    value.as_object().is_some_and(|o| o.contains_key("action"))
}

/// Checks an answer (`{action, content}`) against the requested schema; `at` is the JSON
/// path of the answer in the caller's message.
pub fn check_answer(schema: &Value, answer: &Value, at: &str) -> Result<(), FieldError> {
    let answer = answer
        .as_object()
        .ok_or_else(|| mismatch(at, "must be an object {action, content}"))?;
    match answer.get("action").and_then(Value::as_str) {
        Some("decline") | Some("cancel") => return Ok(()),
        Some("accept") => {}
        _ => {
            return Err(mismatch(
                format!("{at}.action"),
                "must be accept, decline or cancel",
            ))
        }
    }
    let empty = Map::new();
    let content = match answer.get("content") {
        Some(Value::Object(content)) => content,
        None => &empty,
        Some(_) => return Err(mismatch(format!("{at}.content"), "must be an object")),
    };
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !content.contains_key(name) {
            return Err(mismatch(
                format!("{at}.content.{name}"),
                "is required by the requested schema",
            ));
        }
    }
    for (name, value) in content {
        let field = format!("{at}.content.{name}");
        let property = properties
            .get(name)
            .ok_or_else(|| mismatch(&field, "is not a property of the requested schema"))?;
        let kind = property.get("type").and_then(Value::as_str).unwrap_or("");
        let fits = match kind {
            "string" => value.is_string(),
            "number" => value.is_number(),
            "integer" => value.as_f64().is_some_and(|n| n.fract() == 0.0),
            "boolean" => value.is_boolean(),
            _ => false,
        };
        if !fits {
            return Err(mismatch(&field, format!("must be a {kind}")));
        }
        if let Some(options) = property.get("enum").and_then(Value::as_array) {
            if !options.contains(value) {
                return Err(mismatch(
                    &field,
                    format!("must be one of {}", Value::Array(options.clone())),
                ));
            }
        }
        if let (Some(n), Some(min)) = (
            value.as_f64(),
            property.get("minimum").and_then(Value::as_f64),
        ) {
            if n < min {
                return Err(mismatch(&field, format!("must be at least {min}")));
            }
        }
        if let (Some(n), Some(max)) = (
            value.as_f64(),
            property.get("maximum").and_then(Value::as_f64),
        ) {
            if n > max {
                return Err(mismatch(&field, format!("must be at most {max}")));
            }
        }
        if let Some(s) = value.as_str() {
            let len = s.chars().count() as u64;
            if property
                .get("minLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| len < m)
            {
                return Err(mismatch(&field, "is shorter than minLength"));
            }
            if property
                .get("maxLength")
                .and_then(Value::as_u64)
                .is_some_and(|m| len > m)
            {
                return Err(mismatch(&field, "is longer than maxLength"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "blue"]}, "count": {"type": "integer", "minimum": 1}}, "required": ["color"]})
    }

    #[test]
    fn requested_schemas_must_be_flat_mcp_objects() {
        assert!(check_requested_schema(&schema()).is_ok());
        let nested = json!({"type": "object", "properties": {"a": {"type": "object"}}});
        assert_eq!(
            check_requested_schema(&nested).unwrap_err().field,
            "requestedSchema.properties.a.type"
        );
        let unknown_required =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]});
        assert_eq!(
            check_requested_schema(&unknown_required).unwrap_err().field,
            "requestedSchema.required"
        );
        assert!(check_requested_schema(&json!({"type": "array"})).is_err());
    }

    #[test]
    fn answers_are_checked_against_the_requested_schema_naming_the_field() {
        let ok = json!({"action": "accept", "content": {"color": "red", "count": 2}});
        assert!(check_answer(&schema(), &ok, "a").is_ok());
        assert!(check_answer(&schema(), &json!({"action": "decline"}), "a").is_ok());
        let cases = [
            (
                json!({"action": "accept", "content": {"count": 2}}),
                "a.content.color",
            ),
            (
                json!({"action": "accept", "content": {"color": "green"}}),
                "a.content.color",
            ),
            (
                json!({"action": "accept", "content": {"color": "red", "count": 1.5}}),
                "a.content.count",
            ),
            (
                json!({"action": "accept", "content": {"color": "red", "count": 0}}),
                "a.content.count",
            ),
            (
                json!({"action": "accept", "content": {"color": "red", "size": 1}}),
                "a.content.size",
            ),
            (json!({"action": "maybe"}), "a.action"),
        ];
        for (answer, field) in cases {
            assert_eq!(
                check_answer(&schema(), &answer, "a").unwrap_err().field,
                field,
                "{answer}"
            );
        }
    }
}
