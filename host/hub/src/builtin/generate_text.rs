//! The built-in `generate_text`: `{prompt, system?, max_tokens?}` →
//! `{output}`, one chat completion from an OpenAI-compatible endpoint
//! (`POST {url}/chat/completions`), configured like the LLM judge: `url`,
//! `model`, `api_key = "env:NAME"`. Air-gapped, the endpoint is a local
//! llama.cpp server or Ollama (`http://127.0.0.1:11434/v1`).
//!
//! The request carries the system message (when given), the prompt as the
//! user message, `max_tokens` (the call's, else the table's, never more
//! than the table's) and `temperature: 0`, so that the forge's repeat run
//! agrees with the first as far as the model allows. The key goes only in
//! the `Authorization` header: an error quoting the endpoint's answer has
//! it cut out.

use std::time::Duration;

use serde_json::{Value, json};

use super::{BuiltinError, InputCheck};
use crate::chat::{ChatClient, ChatError, excerpt};
use crate::config::{GenerateTextConfig, Secret};

/// The tool's name.
pub const NAME: &str = "generate_text";

/// What it does, as listed.
pub const DESCRIPTION: &str = "Generates text with the host's language model from a prompt (and an optional system message); returns {output}.";

/// Its input schema, with `max_tokens` bounded by `max`.
pub fn input_schema_with(max: u32) -> Value {
    json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "minLength": 1},
            "system": {"type": "string"},
            "max_tokens": {"type": "integer", "minimum": 1, "maximum": max}
        },
        "required": ["prompt"],
        "additionalProperties": false
    })
}

/// Its output schema.
pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"output": {"type": "string"}},
        "required": ["output"]
    })
}

/// The started tool: the endpoint's client and the table's settings.
#[derive(Debug)]
pub struct GenerateText {
    client: ChatClient,
    model: String,
    api_key: Option<Secret>,
    timeout: Duration,
    max_tokens: u32,
    input: InputCheck,
}

impl GenerateText {
    /// Builds the client for `[builtin.generate_text]`.
    pub fn new(cfg: &GenerateTextConfig) -> Result<Self, BuiltinError> {
        let client = ChatClient::new(
            &cfg.url,
            concat!("temper-generate-text/", env!("CARGO_PKG_VERSION")),
            true,
        )
        .map_err(|e| BuiltinError::Start {
            tool: NAME,
            reason: e.to_string(),
        })?;
        Ok(Self {
            client,
            model: cfg.model.clone(),
            api_key: cfg.api_key.clone(),
            timeout: cfg.timeout,
            max_tokens: cfg.max_tokens,
            input: InputCheck::new(NAME, &input_schema_with(cfg.max_tokens))?,
        })
    }

    /// Its input schema.
    pub fn input_schema(&self) -> Value {
        input_schema_with(self.max_tokens)
    }

    /// The limit of one generation.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        self.client.endpoint()
    }

    /// The request body for a checked `input`.
    pub fn request_body(&self, input: &Value) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = input.get("system").and_then(Value::as_str) {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.push(json!({"role": "user", "content": input["prompt"]}));
        let max_tokens = input
            .get("max_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(u64::from(self.max_tokens))
            .min(u64::from(self.max_tokens));
        json!({
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": 0,
        })
    }

    /// Checks the input, asks the endpoint, returns `{output}`.
    pub async fn call(&self, input: Value) -> Result<Value, BuiltinError> {
        self.input.check(&input)?;
        let body = self.request_body(&input);
        let key = self.api_key.as_ref().map(Secret::expose);
        let output = self
            .client
            .complete(&body, key, self.timeout)
            .await
            .map_err(|e| BuiltinError::Generate(self.describe(e)))?;
        Ok(json!({ "output": output }))
    }

    /// The error's message; for an error status, the start of the body
    /// too, with the key cut out (an endpoint may echo it back).
    fn describe(&self, e: ChatError) -> String {
        let key = self.api_key.as_ref().map(Secret::expose);
        let redact = |s: &str| match key {
            Some(k) if !k.is_empty() => s.replace(k, "[redacted]"),
            _ => s.to_string(),
        };
        let message = match &e {
            ChatError::Status { body, .. } if !body.trim().is_empty() => {
                format!("{e}: {}", excerpt(&redact(body.trim())))
            }
            _ => e.to_string(),
        };
        redact(&message)
    }
}
