//! JSON Schemas as TypeScript types: what `run_code`'s declarations,
//! `describe_tools` and `search_tools`' one-line signatures show.

use std::fmt::Write as _;

use serde_json::Value;

/// How deep a schema is rendered before it becomes `any`.
const MAX_SCHEMA_DEPTH: usize = 6;

/// Whether `name` can be written as `tools.NAME` in JavaScript.
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// The TypeScript type of a JSON Schema (a readable approximation:
/// objects, arrays, scalars, enums, unions; anything else `any`).
pub fn ts_type(schema: &Value) -> String {
    ts_type_at(schema, 0)
}

fn ts_type_at(schema: &Value, depth: usize) -> String {
    if depth > MAX_SCHEMA_DEPTH {
        return "any".into();
    }
    let Value::Object(s) = schema else {
        return if schema == &Value::Bool(false) {
            "never".into()
        } else {
            "any".into()
        };
    };
    if let Some(Value::Array(values)) = s.get("enum") {
        let parts: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        return if parts.is_empty() {
            "never".into()
        } else {
            parts.join(" | ")
        };
    }
    if let Some(c) = s.get("const") {
        return c.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = s.get(key) {
            let parts: Vec<String> = options.iter().map(|o| ts_type_at(o, depth + 1)).collect();
            return format!("({})", parts.join(" | "));
        }
    }
    match s.get("type") {
        Some(Value::String(t)) => ts_of_type(t, s, depth),
        Some(Value::Array(types)) => {
            let parts: Vec<String> = types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| ts_of_type(t, s, depth))
                .collect();
            format!("({})", parts.join(" | "))
        }
        _ if s.contains_key("properties") => ts_of_type("object", s, depth),
        _ => "any".into(),
    }
}

fn ts_of_type(t: &str, s: &serde_json::Map<String, Value>, depth: usize) -> String {
    match t {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match s.get("items") {
            Some(items) => format!("Array<{}>", ts_type_at(items, depth + 1)),
            None => "any[]".into(),
        },
        "object" => {
            let required: Vec<&str> = s
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let Some(Value::Object(props)) = s.get("properties") else {
                return "Record<string, any>".into();
            };
            let mut out = String::from("{ ");
            // Sorted by name: the same schema gives the same declaration
            // whether or not serde_json keeps insertion order (a feature
            // another crate in the build may turn on).
            let mut props: Vec<(&String, &Value)> = props.iter().collect();
            props.sort_by(|a, b| a.0.cmp(b.0));
            for (name, prop) in props {
                let key = if is_identifier(name) {
                    name.clone()
                } else {
                    Value::String(name.clone()).to_string()
                };
                let optional = if required.contains(&name.as_str()) {
                    ""
                } else {
                    "?"
                };
                let _ = write!(out, "{key}{optional}: {}; ", ts_type_at(prop, depth + 1));
            }
            out.push('}');
            out
        }
        _ => "any".into(),
    }
}

/// One line of TypeScript for tool `name`:
/// `name(input: {…}): Promise<…>` (a name that is no identifier quoted).
pub fn signature(name: &str, input: &Value, output: &Value) -> String {
    let name = if is_identifier(name) {
        name.to_owned()
    } else {
        Value::String(name.to_owned()).to_string()
    };
    format!(
        "{name}(input: {}): Promise<{}>",
        ts_type(input),
        ts_type(output)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_signature_is_one_line() {
        let sig = signature(
            "parse_csv",
            &json!({"type": "object", "properties": {"text": {"type": "string"}, "sep": {"type": "string"}}, "required": ["text"]}),
            &json!({"type": "array", "items": {"type": "string"}}),
        );
        assert_eq!(
            sig,
            "parse_csv(input: { sep?: string; text: string; }): Promise<Array<string>>"
        );
        assert!(signature("a-b", &json!({}), &json!({})).starts_with("\"a-b\"(input: any)"));
    }
}
