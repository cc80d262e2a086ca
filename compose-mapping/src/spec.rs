//! Parsing a compose request's `implementation.steps` into a [`ComposeSpec`].
//!
//! Only the shape is checked here (names, tools, that every `inputMapping`
//! is an object); the expressions inside the mappings are checked by
//! [`crate::mapping::compile`].

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

/// The most steps a compose tool may have.
pub const MAX_STEPS: usize = 32;

/// The longest step name, in bytes.
pub const MAX_STEP_NAME_LEN: usize = 64;

/// The fields a step object may have.
const STEP_FIELDS: [&str; 3] = ["name", "tool", "inputMapping"];

/// A compose tool's pipeline: the steps, in the order they run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComposeSpec {
    /// The steps, in order; never empty, at most [`MAX_STEPS`].
    pub steps: Vec<Step>,
}

/// One step of a pipeline: call `tool` with the input built from
/// `input_mapping`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// The step's name, unique in the pipeline (`$steps.NAME` refers to it).
    pub name: String,
    /// The tool the step calls.
    pub tool: String,
    /// The mapping that builds the tool's input (a JSON object, as given).
    pub input_mapping: Value,
}

/// Names a step in an error: its index in `steps` and its name when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRef {
    /// Index of the step in `implementation.steps` (0-based).
    pub index: usize,
    /// The step's name, when it has a usable one.
    pub name: Option<String>,
}

impl fmt::Display for StepRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "steps[{}] ({name:?})", self.index),
            None => write!(f, "steps[{}]", self.index),
        }
    }
}

/// Why `implementation.steps` is not a valid pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    /// `steps` is empty.
    #[error("a compose tool needs at least one step")]
    NoSteps,
    /// More than [`MAX_STEPS`] steps.
    #[error("too many steps: {count} (at most {limit})")]
    TooManySteps {
        /// How many steps were given.
        count: usize,
        /// The limit ([`MAX_STEPS`]).
        limit: usize,
    },
    /// A step is not a JSON object.
    #[error("{step}: a step must be an object {{name, tool, inputMapping}}, found {found}")]
    StepNotObject {
        /// The step.
        step: StepRef,
        /// The JSON type found.
        found: &'static str,
    },
    /// A step has a field other than `name`, `tool`, `inputMapping`.
    #[error("{step}: unknown field {field:?} (a step has name, tool, inputMapping)")]
    UnknownField {
        /// The step.
        step: StepRef,
        /// The field.
        field: String,
    },
    /// `name` is missing, empty or not a string.
    #[error("{step}: missing step name (a non-empty string)")]
    MissingName {
        /// The step.
        step: StepRef,
    },
    /// `name` has characters other than ASCII letters, digits, `_` and `-`,
    /// does not start with a letter, or is too long.
    #[error(
        "{step}: invalid step name {name:?}: use ASCII letters, digits, `_` and `-`, \
         starting with a letter, at most {MAX_STEP_NAME_LEN} bytes"
    )]
    InvalidName {
        /// The step.
        step: StepRef,
        /// The name as given.
        name: String,
    },
    /// Two steps have the same name.
    #[error("{step}: duplicate step name {name:?} (already used by steps[{first}])")]
    DuplicateName {
        /// The later step.
        step: StepRef,
        /// The name.
        name: String,
        /// Index of the first step with that name.
        first: usize,
    },
    /// `tool` is missing, empty or not a string.
    #[error("{step}: missing tool (the name of the tool this step calls)")]
    MissingTool {
        /// The step.
        step: StepRef,
    },
    /// `inputMapping` is missing.
    #[error("{step}: missing inputMapping (write {{}} for a tool without input)")]
    MissingMapping {
        /// The step.
        step: StepRef,
    },
    /// `inputMapping` is not a JSON object.
    #[error("{step} inputMapping: must be an object, found {found}")]
    MappingNotObject {
        /// The step.
        step: StepRef,
        /// The JSON type found.
        found: &'static str,
    },
}

/// The JSON type of a value, as named in error messages.
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `name` is a valid step name: ASCII letters, digits, `_` and
/// `-`, starting with a letter, at most [`MAX_STEP_NAME_LEN`] bytes.
pub fn is_valid_step_name(name: &str) -> bool {
    name.len() <= MAX_STEP_NAME_LEN
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl ComposeSpec {
    /// Parses `implementation.steps` of a compose request (the `steps`
    /// array of a compose-mode `implementation`).
    pub fn parse(steps: &[Value]) -> Result<Self, SpecError> {
        if steps.is_empty() {
            return Err(SpecError::NoSteps);
        }
        if steps.len() > MAX_STEPS {
            return Err(SpecError::TooManySteps {
                count: steps.len(),
                limit: MAX_STEPS,
            });
        }
        let mut parsed: Vec<Step> = Vec::with_capacity(steps.len());
        for (index, raw) in steps.iter().enumerate() {
            let step = parse_step(index, raw)?;
            if let Some(first) = parsed.iter().position(|s| s.name == step.name) {
                return Err(SpecError::DuplicateName {
                    step: StepRef {
                        index,
                        name: Some(step.name.clone()),
                    },
                    name: step.name,
                    first,
                });
            }
            parsed.push(step);
        }
        Ok(ComposeSpec { steps: parsed })
    }

    /// The distinct tools the steps call, in order of first use.
    pub fn tools(&self) -> Vec<String> {
        distinct_in_order(self.steps.iter().map(|s| s.tool.as_str()))
    }
}

/// The distinct names, in order of first appearance.
pub(crate) fn distinct_in_order<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

fn parse_step(index: usize, raw: &Value) -> Result<Step, SpecError> {
    let mut at = StepRef { index, name: None };
    let Some(object) = raw.as_object() else {
        return Err(SpecError::StepNotObject {
            step: at,
            found: json_type(raw),
        });
    };
    let name = match object.get("name") {
        Some(Value::String(name)) if !name.is_empty() => name.clone(),
        _ => return Err(SpecError::MissingName { step: at }),
    };
    if !is_valid_step_name(&name) {
        return Err(SpecError::InvalidName { step: at, name });
    }
    at.name = Some(name.clone());
    if let Some(field) = object.keys().find(|k| !STEP_FIELDS.contains(&k.as_str())) {
        return Err(SpecError::UnknownField {
            step: at,
            field: field.clone(),
        });
    }
    let tool = match object.get("tool") {
        Some(Value::String(tool)) if !tool.trim().is_empty() => tool.clone(),
        _ => return Err(SpecError::MissingTool { step: at }),
    };
    let input_mapping = match object.get("inputMapping") {
        None => return Err(SpecError::MissingMapping { step: at }),
        Some(mapping @ Value::Object(_)) => mapping.clone(),
        Some(other) => {
            return Err(SpecError::MappingNotObject {
                step: at,
                found: json_type(other),
            });
        }
    };
    Ok(Step {
        name,
        tool,
        input_mapping,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn steps(value: Value) -> Vec<Value> {
        value.as_array().unwrap().clone()
    }

    fn err(value: Value) -> String {
        ComposeSpec::parse(&steps(value)).unwrap_err().to_string()
    }

    #[test]
    fn parses_steps_in_order() {
        let spec = ComposeSpec::parse(&steps(json!([
            {"name": "search", "tool": "web_search", "inputMapping": {"q": "$input.topic"}},
            {"name": "sum-up_2", "tool": "generate_text", "inputMapping": {}},
        ])))
        .unwrap();
        assert_eq!(spec.steps.len(), 2);
        assert_eq!(spec.steps[0].name, "search");
        assert_eq!(spec.steps[0].tool, "web_search");
        assert_eq!(spec.steps[0].input_mapping, json!({"q": "$input.topic"}));
        assert_eq!(spec.steps[1].name, "sum-up_2");
    }

    #[test]
    fn no_steps() {
        assert_eq!(ComposeSpec::parse(&[]).unwrap_err(), SpecError::NoSteps);
    }

    #[test]
    fn too_many_steps() {
        let many: Vec<Value> = (0..=MAX_STEPS)
            .map(|i| json!({"name": format!("s{i}"), "tool": "t", "inputMapping": {}}))
            .collect();
        let e = ComposeSpec::parse(&many).unwrap_err();
        assert_eq!(
            e,
            SpecError::TooManySteps {
                count: MAX_STEPS + 1,
                limit: MAX_STEPS
            }
        );
        assert!(ComposeSpec::parse(&many[..MAX_STEPS]).is_ok());
    }

    #[test]
    fn missing_or_empty_name() {
        let e = err(json!([{"tool": "t", "inputMapping": {}}]));
        assert_eq!(e, "steps[0]: missing step name (a non-empty string)");
        let e = err(json!([
            {"name": "a", "tool": "t", "inputMapping": {}},
            {"name": "", "tool": "t", "inputMapping": {}},
        ]));
        assert!(e.starts_with("steps[1]: missing step name"), "{e}");
        let e = err(json!([{"name": 3, "tool": "t", "inputMapping": {}}]));
        assert!(e.contains("missing step name"), "{e}");
    }

    #[test]
    fn invalid_names() {
        for bad in ["has space", "1abc", "_x", "-x", "a.b", "naïve", "$x"] {
            let e = err(json!([{"name": bad, "tool": "t", "inputMapping": {}}]));
            assert!(e.contains("invalid step name"), "{bad}: {e}");
            assert!(e.starts_with("steps[0]:"), "{e}");
        }
        let long = "a".repeat(MAX_STEP_NAME_LEN + 1);
        let e = err(json!([{"name": long, "tool": "t", "inputMapping": {}}]));
        assert!(e.contains("invalid step name"), "{e}");
        for good in ["a", "fetch", "Fetch2", "sum-up", "x_1-y"] {
            assert!(is_valid_step_name(good), "{good}");
        }
    }

    #[test]
    fn duplicate_names() {
        let e = ComposeSpec::parse(&steps(json!([
            {"name": "a", "tool": "t", "inputMapping": {}},
            {"name": "b", "tool": "t", "inputMapping": {}},
            {"name": "a", "tool": "u", "inputMapping": {}},
        ])))
        .unwrap_err();
        assert!(matches!(e, SpecError::DuplicateName { first: 0, .. }));
        assert_eq!(
            e.to_string(),
            "steps[2] (\"a\"): duplicate step name \"a\" (already used by steps[0])"
        );
    }

    #[test]
    fn missing_tool() {
        let e = err(json!([{"name": "a", "inputMapping": {}}]));
        assert_eq!(
            e,
            "steps[0] (\"a\"): missing tool (the name of the tool this step calls)"
        );
        let e = err(json!([{"name": "a", "tool": " ", "inputMapping": {}}]));
        assert!(e.contains("missing tool"), "{e}");
        let e = err(json!([{"name": "a", "tool": ["x"], "inputMapping": {}}]));
        assert!(e.contains("missing tool"), "{e}");
    }

    #[test]
    fn mapping_must_be_an_object() {
        let e = err(json!([{"name": "a", "tool": "t", "inputMapping": "$input"}]));
        assert_eq!(
            e,
            "steps[0] (\"a\") inputMapping: must be an object, found string"
        );
        let e = err(json!([{"name": "a", "tool": "t", "inputMapping": [1]}]));
        assert!(e.ends_with("found array"), "{e}");
        let e = err(json!([{"name": "a", "tool": "t"}]));
        assert!(e.contains("missing inputMapping"), "{e}");
    }

    #[test]
    fn step_shape() {
        let e = err(json!(["search"]));
        assert!(e.starts_with("steps[0]: a step must be an object"), "{e}");
        let e = err(json!([{"name": "a", "tool": "t", "input_mapping": {}}]));
        assert!(e.contains("unknown field \"input_mapping\""), "{e}");
    }

    #[test]
    fn tools_are_distinct_in_order() {
        let spec = ComposeSpec::parse(&steps(json!([
            {"name": "a", "tool": "http_request", "inputMapping": {}},
            {"name": "b", "tool": "generate_text", "inputMapping": {}},
            {"name": "c", "tool": "http_request", "inputMapping": {}},
            {"name": "d", "tool": "generate_text", "inputMapping": {}},
            {"name": "e", "tool": "web_search", "inputMapping": {}},
        ])))
        .unwrap();
        assert_eq!(
            spec.tools(),
            vec!["http_request", "generate_text", "web_search"]
        );
    }
}
