//! The built-in hub tools, each off until its `[builtin.NAME]` table is in
//! the tools file:
//!
//! - [`http_request`]: `{method, url, headers?, body?}` → `{status,
//!   headers, body}`, through the `fetch` capability's own transport and
//!   policy code (`temper_runtime::capabilities::fetch`), with its own
//!   domain rules;
//! - [`generate_text`]: `{prompt, system?, max_tokens?}` → `{output}`, one
//!   OpenAI-compatible chat completion through [`crate::chat`], the client
//!   the forge's LLM judge uses too.
//!
//! They are hub tools like an upstream's: listed by [`crate::Hub::tools`]
//! (source `built-in`), called by [`crate::Hub::call`], clash-checked,
//! allowed by the host policy's `[tools] allow` like any other. Their input
//! is checked against their input schema before anything is sent; errors
//! name the tool.

pub mod generate_text;
pub mod http_request;

use std::time::Duration;

use serde_json::Value;

use crate::config::ToolsFile;
use crate::hub::HubTool;

pub use generate_text::GenerateText;
pub use http_request::HttpRequest;

/// The source a built-in's [`HubTool`] names.
pub const SOURCE: &str = "built-in";

/// Why a built-in could not start, or a call to it failed. Every message
/// starts with the tool's name; none holds a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuiltinError {
    /// The tools file's table could not be turned into a working tool.
    #[error("{tool}: cannot start: {reason}")]
    Start {
        /// `http_request` or `generate_text`.
        tool: &'static str,
        /// Why.
        reason: String,
    },
    /// The input does not match the tool's input schema (nothing was sent).
    #[error("{tool}: input does not match inputSchema: {message}")]
    Input {
        /// The tool.
        tool: &'static str,
        /// The violations.
        message: String,
    },
    /// `http_request`: the fetch policy refused the request or a redirect
    /// hop (the message names the domain or address), a cap was hit, or
    /// the exchange failed.
    #[error("http_request: {0}")]
    Fetch(String),
    /// `generate_text`: the endpoint failed (its status, a timeout, a
    /// connection error, a malformed answer).
    #[error("generate_text: {0}")]
    Generate(String),
}

/// A started built-in tool.
#[derive(Debug)]
pub enum Builtin {
    /// `http_request`.
    HttpRequest(HttpRequest),
    /// `generate_text`.
    GenerateText(GenerateText),
}

impl Builtin {
    /// The built-ins `file` turns on, in name order.
    pub fn start_all(file: &ToolsFile) -> Result<Vec<Builtin>, BuiltinError> {
        let mut out = Vec::new();
        if let Some(cfg) = &file.generate_text {
            out.push(Builtin::GenerateText(GenerateText::new(cfg)?));
        }
        if let Some(cfg) = &file.http_request {
            out.push(Builtin::HttpRequest(HttpRequest::new(cfg)?));
        }
        Ok(out)
    }

    /// Its name.
    pub fn name(&self) -> &'static str {
        match self {
            Builtin::HttpRequest(_) => http_request::NAME,
            Builtin::GenerateText(_) => generate_text::NAME,
        }
    }

    /// How long one call may take (the table's `timeout_ms`).
    pub fn timeout(&self) -> Duration {
        match self {
            Builtin::HttpRequest(t) => t.timeout(),
            Builtin::GenerateText(t) => t.timeout(),
        }
    }

    /// Its description as a hub tool.
    pub fn tool(&self) -> HubTool {
        let (description, input, output) = match self {
            Builtin::HttpRequest(_) => (
                http_request::DESCRIPTION,
                http_request::input_schema(),
                http_request::output_schema(),
            ),
            Builtin::GenerateText(t) => (
                generate_text::DESCRIPTION,
                t.input_schema(),
                generate_text::output_schema(),
            ),
        };
        HubTool {
            name: self.name().to_string(),
            description: description.to_string(),
            input_schema: input,
            output_schema: Some(output),
            source: SOURCE.to_string(),
            timeout: self.timeout(),
            checks_output: false,
            checks_input: false,
            definition: None,
            // A built-in is the operator's own: called live as any call.
            live_in_tests: true,
        }
    }

    /// Calls it: the input is checked first.
    pub async fn call(&self, input: Value) -> Result<Value, BuiltinError> {
        match self {
            Builtin::HttpRequest(t) => t.call(input).await,
            Builtin::GenerateText(t) => t.call(input).await,
        }
    }
}

/// A compiled input schema that reports violations like the upstreams do.
#[derive(Debug)]
pub(crate) struct InputCheck {
    tool: &'static str,
    validator: jsonschema::Validator,
}

impl InputCheck {
    /// Compiles `schema` (a constant of the tool: a failure is a bug).
    pub(crate) fn new(tool: &'static str, schema: &Value) -> Result<Self, BuiltinError> {
        let validator = jsonschema::validator_for(schema).map_err(|e| BuiltinError::Start {
            tool,
            reason: format!("inputSchema does not compile: {e}"),
        })?;
        Ok(Self { tool, validator })
    }

    /// Up to five violations, `path: message`, or nothing.
    pub(crate) fn check(&self, value: &Value) -> Result<(), BuiltinError> {
        let violations: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "(root)".into() } else { at };
                format!("{at}: {e}")
            })
            .collect();
        if violations.is_empty() {
            Ok(())
        } else {
            Err(BuiltinError::Input {
                tool: self.tool,
                message: violations.join("; "),
            })
        }
    }
}
