//! The built-in `http_request`: `{method, url, headers?, body?}` →
//! `{status, headers, body}`.
//!
//! It is the `fetch` capability's transport with a policy of its own: the
//! request goes through [`FetchTransport`] (the code a sandboxed tool's
//! `fetch` runs), built for a [`FetchPolicy`] holding the table's
//! `domains` and caps. So the same code decides: the URL and every
//! redirect hop checked against the domain rules (`check_url`), names
//! resolved by the policy's resolver and refused when they land on a
//! non-public address unless `allow_private` (`check_resolved`: SSRF, DNS
//! rebinding), redirects followed one hop at a time (at most 5), request
//! and response bodies and headers capped. Nothing here re-implements a
//! check.
//!
//! The response body is text (UTF-8, invalid bytes replaced); when the
//! response says it is JSON (`application/json`, `...+json`) and parses,
//! it is the parsed value. Response headers are an object, names in lower
//! case, repeated headers joined with `, `.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use temper_policy::{DomainRule, FetchPolicy};
use temper_runtime::bindings::temper::tool::fetch::Request;
use temper_runtime::capabilities::fetch::{FetchTransport, TransportOptions};

use super::{BuiltinError, InputCheck};
use crate::config::HttpRequestConfig;

/// The tool's name.
pub const NAME: &str = "http_request";

/// What it does, as listed.
pub const DESCRIPTION: &str = "Makes one HTTP request to an allowed domain and returns {status, headers, body}; the body is parsed when the response is JSON, else text. Redirects are followed and re-checked; private addresses are refused.";

/// The methods accepted.
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Its input schema.
pub fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "method": {"type": "string", "enum": METHODS},
            "url": {"type": "string", "minLength": 1},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"description": "A string is sent as it is; any other JSON value is sent as JSON (with content-type application/json unless a header says otherwise)."}
        },
        "required": ["method", "url"],
        "additionalProperties": false
    })
}

/// Its output schema.
pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "integer"},
            "headers": {"type": "object", "additionalProperties": {"type": "string"}},
            "body": {"description": "The parsed JSON when the response is JSON, else the text."}
        },
        "required": ["status", "headers", "body"]
    })
}

/// The started tool: its transport (TLS config and connection pool, built
/// once) and limits.
pub struct HttpRequest {
    transport: FetchTransport,
    timeout: Duration,
    input: InputCheck,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRequest")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl HttpRequest {
    /// Builds the transport for `[builtin.http_request]`.
    pub fn new(cfg: &HttpRequestConfig) -> Result<Self, BuiltinError> {
        let start = |reason: String| BuiltinError::Start { tool: NAME, reason };
        let rules = cfg
            .domains
            .iter()
            .map(|d| DomainRule::parse(d))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| start(e.to_string()))?;
        let policy = FetchPolicy {
            rules,
            allow_private: cfg.allow_private,
            max_response_body: cfg.max_response_bytes as u64,
            ..FetchPolicy::default()
        };
        let options = TransportOptions {
            extra_roots_pem: cfg.ca_pem.iter().cloned().collect(),
            ..TransportOptions::default()
        };
        let addresses: HashMap<_, _> = cfg
            .resolve
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let transport =
            FetchTransport::with_addresses(policy, &options, &addresses).map_err(start)?;
        Ok(Self {
            transport,
            timeout: cfg.timeout,
            input: InputCheck::new(NAME, &input_schema())?,
        })
    }

    /// The limit of one request (redirects and body included).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Checks the input, performs the request under the policy and shapes
    /// the answer.
    pub async fn call(&self, input: Value) -> Result<Value, BuiltinError> {
        self.input.check(&input)?;
        let method = input["method"].as_str().unwrap_or("GET").to_string();
        let url = input["url"].as_str().unwrap_or_default().to_string();
        let mut headers: Vec<(String, String)> = input
            .get("headers")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let body = match input.get("body") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone().into_bytes()),
            Some(other) => {
                if !headers
                    .iter()
                    .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("content-type".into(), "application/json".into()));
                }
                Some(other.to_string().into_bytes())
            }
        };
        let request = Request {
            method,
            url,
            headers,
            body,
            redirect: "follow".into(),
        };
        let response = self
            .transport
            .fetch(request, Instant::now() + self.timeout)
            .await
            .map_err(BuiltinError::Fetch)?;
        let mut headers = Map::new();
        let mut json_body = false;
        for (name, value) in &response.headers {
            let name = name.to_ascii_lowercase();
            if name == "content-type" {
                let mime = value.split(';').next().unwrap_or("").trim();
                json_body = mime.eq_ignore_ascii_case("application/json")
                    || mime.to_ascii_lowercase().ends_with("+json");
            }
            match headers.get_mut(&name) {
                Some(Value::String(prev)) => {
                    prev.push_str(", ");
                    prev.push_str(value);
                }
                _ => {
                    headers.insert(name, Value::String(value.clone()));
                }
            }
        }
        let text = String::from_utf8_lossy(&response.body).into_owned();
        let body = if json_body {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        } else {
            Value::String(text)
        };
        Ok(json!({"status": response.status, "headers": headers, "body": body}))
    }
}
