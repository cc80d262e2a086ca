//! A tool's input and output JSON Schemas, compiled once and reused for the
//! test stage and every later invocation (reuse validation).
//!
//! Built on the `jsonschema` crate without its default features: schemas are
//! checked against their meta-schema, and no `$ref` is ever fetched from the
//! network or the file system (an external `$ref` fails to compile).

use serde_json::Value;

/// Most schema violations listed in one error message.
const MAX_LISTED: usize = 5;

/// Which of a tool's two schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SchemaRole {
    /// `inputSchema`.
    Input,
    /// `outputSchema`.
    Output,
}

impl SchemaRole {
    /// The request field name (`inputSchema`, `outputSchema`).
    pub fn field(self) -> &'static str {
        match self {
            SchemaRole::Input => "inputSchema",
            SchemaRole::Output => "outputSchema",
        }
    }
}

/// A schema that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} is not a valid JSON Schema: {message}", role.field())]
pub struct SchemaError {
    /// Which schema.
    pub role: SchemaRole,
    /// The compiler's message.
    pub message: String,
}

/// A value that does not match a schema: every violation (the first few in
/// the message) with its JSON-pointer location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("does not match {}: {}", role.field(), summary(.violations))]
pub struct SchemaMismatch {
    /// Which schema.
    pub role: SchemaRole,
    /// `"<pointer>: <message>"` per violation (pointer `""` is the root).
    pub violations: Vec<String>,
}

fn summary(violations: &[String]) -> String {
    let mut text = violations
        .iter()
        .take(MAX_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if violations.len() > MAX_LISTED {
        text.push_str(&format!("; and {} more", violations.len() - MAX_LISTED));
    }
    text
}

/// One compiled schema.
pub struct CompiledSchema {
    role: SchemaRole,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema")
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl CompiledSchema {
    /// Compiles `schema`; it must be a JSON object or a boolean.
    pub fn compile(role: SchemaRole, schema: &Value) -> Result<Self, SchemaError> {
        let err = |message: String| SchemaError { role, message };
        match schema {
            Value::Object(_) | Value::Bool(_) => {}
            Value::Null => return Err(err("missing (a JSON Schema object is required)".into())),
            other => {
                return Err(err(format!(
                    "expected an object or a boolean, got {}",
                    json_type(other)
                )));
            }
        }
        let validator = jsonschema::validator_for(schema).map_err(|e| err(e.to_string()))?;
        Ok(Self { role, validator })
    }

    /// Checks `value`, listing every violation.
    pub fn check(&self, value: &Value) -> Result<(), SchemaMismatch> {
        // The common case first: listing violations walks the value in the
        // validator's slower error-collecting mode.
        if self.validator.is_valid(value) {
            return Ok(());
        }
        let violations: Vec<String> = self
            .validator
            .iter_errors(value)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() {
                    "(root)".to_string()
                } else {
                    at
                };
                format!("{at}: {e}")
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(SchemaMismatch {
                role: self.role,
                violations,
            })
        }
    }
}

/// A tool's two compiled schemas.
#[derive(Debug)]
pub struct ToolSchemas {
    /// `inputSchema`.
    pub input: CompiledSchema,
    /// `outputSchema`.
    pub output: CompiledSchema,
}

impl ToolSchemas {
    /// Compiles both; the first that fails is the error. `outputSchema` is
    /// optional (as in the seed's request format): absent (`null`), the
    /// output is only checked to be JSON (the schema `true`).
    pub fn compile(input: &Value, output: &Value) -> Result<Self, SchemaError> {
        let output = match output {
            Value::Null => &Value::Bool(true),
            given => given,
        };
        Ok(Self {
            input: CompiledSchema::compile(SchemaRole::Input, input)?,
            output: CompiledSchema::compile(SchemaRole::Output, output)?,
        })
    }
}

/// `object`, `array`, `string`, ... for messages.
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compiles_and_checks_with_pointers() {
        let s = CompiledSchema::compile(
            SchemaRole::Input,
            &json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}),
        )
        .unwrap();
        assert!(s.check(&json!({"a": 1})).is_ok());
        let err = s.check(&json!({"a": "x"})).unwrap_err();
        assert_eq!(err.violations.len(), 1);
        assert!(err.violations[0].starts_with("/a: "), "{err}");
        let err = s.check(&json!({})).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("does not match inputSchema: (root): "),
            "{err}"
        );
    }

    #[test]
    fn invalid_schemas_are_refused_with_their_field() {
        let err =
            CompiledSchema::compile(SchemaRole::Output, &json!({"type": "strnig"})).unwrap_err();
        assert_eq!(err.role, SchemaRole::Output);
        assert!(
            err.to_string()
                .starts_with("outputSchema is not a valid JSON Schema"),
            "{err}"
        );
        let err = CompiledSchema::compile(SchemaRole::Input, &json!("object")).unwrap_err();
        assert!(
            err.message.contains("expected an object or a boolean"),
            "{err}"
        );
        let err = CompiledSchema::compile(SchemaRole::Input, &Value::Null).unwrap_err();
        assert!(err.message.contains("missing"), "{err}");
        assert!(CompiledSchema::compile(SchemaRole::Input, &json!(true)).is_ok());
    }

    #[test]
    fn external_refs_are_never_fetched() {
        let schema = json!({"$ref": "http://127.0.0.1:9/schema.json"});
        assert!(CompiledSchema::compile(SchemaRole::Input, &schema).is_err());
        let schema = json!({"$ref": "file:///etc/passwd"});
        assert!(CompiledSchema::compile(SchemaRole::Input, &schema).is_err());
    }

    #[test]
    fn long_violation_lists_are_cut_in_the_message() {
        let s = CompiledSchema::compile(
            SchemaRole::Output,
            &json!({"type": "array", "items": {"type": "string"}}),
        )
        .unwrap();
        let err = s.check(&json!([1, 2, 3, 4, 5, 6, 7])).unwrap_err();
        assert_eq!(err.violations.len(), 7);
        assert!(err.to_string().ends_with("and 2 more"), "{err}");
    }

    #[test]
    fn an_absent_output_schema_takes_any_json() {
        let s = ToolSchemas::compile(&json!({"type": "object"}), &Value::Null).unwrap();
        assert!(s.output.check(&json!([1, "two", null])).is_ok());
        assert!(s.output.check(&json!("text")).is_ok());
        let err = ToolSchemas::compile(&Value::Null, &Value::Null).unwrap_err();
        assert_eq!(
            err.to_string(),
            "inputSchema is not a valid JSON Schema: missing (a JSON Schema object is required)"
        );
    }
}
