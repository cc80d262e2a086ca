//! The forge request an agent hands over (the seed `forge_tool` shape,
//! camelCase fields), parsed as is: checking it is the forge's VALIDATE
//! stage (`temper_forge::validate`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A forge request: a tool's name, description, schemas, implementation
/// and test cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgeRequest {
    /// snake_case tool name.
    pub name: String,
    /// What the tool does.
    pub description: String,
    /// JSON Schema of the input.
    #[serde(default)]
    pub input_schema: Value,
    /// JSON Schema of the output.
    #[serde(default)]
    pub output_schema: Value,
    /// How the tool is implemented.
    pub implementation: Implementation,
    /// Cases the tool must pass before it is registered.
    #[serde(default)]
    pub test_cases: Vec<TestCase>,
}

/// `sandbox` (agent JavaScript) or `compose` (a pipeline of tools).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "camelCase")]
pub enum Implementation {
    /// Agent JavaScript defining `execute(input)`.
    #[serde(rename_all = "camelCase")]
    Sandbox {
        /// The JavaScript source.
        code: String,
        /// Capabilities the code asks for (`fetch`, `fs.readFile`, `crypto`).
        #[serde(default)]
        allowlist: Vec<String>,
    },
    /// A pipeline of existing tools (see `temper_compose`).
    Compose {
        /// The steps, as given (parsed and compiled at VALIDATE).
        steps: Vec<Value>,
    },
}

/// One test case: an input and, optionally, the output it must produce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TestCase {
    /// The input.
    pub input: Value,
    /// The expected output (see `temper_forge::testcase::output_matches`);
    /// `None` when the field is absent. An explicit `null` expects `null`.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub expected_output: Option<Value>,
}

/// A field that is present is `Some`, even when it is `null`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl ForgeRequest {
    /// Parses a request from JSON text.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }
}
