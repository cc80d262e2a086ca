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
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// The case expects the call to fail: `true` (any error) or a
    /// substring of the error message; given in place of
    /// `expectedOutput`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_error: Option<Value>,
    /// Answers recorded for the tools the case's run calls (hub tools an
    /// upstream does not mark `readOnlyHint: true`): the forge serves
    /// these instead of calling the upstream while it tests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recorded_calls: Vec<RecordedCall>,
    /// The HTTP exchanges the case's `fetch` calls are served from, in the
    /// fetch cassette's format (`temper_runtime::capabilities::cassette`):
    /// the case runs with no network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cassette: Option<Value>,
}

/// A tool call's answer recorded in a forge request: when the case's run
/// calls `tool` with `input` (compared as JSON values), `output` is the
/// answer, or, with `error`, the call fails with that message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordedCall {
    /// The tool called (a hub tool's exposed name).
    pub tool: String,
    /// The input it is called with.
    #[serde(default)]
    pub input: Value,
    /// Its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Or the error it answers with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
