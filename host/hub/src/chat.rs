//! [`ChatClient`]: one OpenAI-compatible chat-completions endpoint
//! (`POST {base}/chat/completions`), shared by the forge's LLM judge and
//! the built-in `generate_text`. It sends a request body, reads the answer
//! under a size cap and returns `choices[0].message.content`; what to ask
//! and what to make of the answer is the caller's.
//!
//! The API key is passed per request and is only ever put in the
//! `Authorization` header: no error variant holds it (an endpoint that
//! echoes it back in an error body is the one exception the caller must
//! handle; [`ChatError::Status`] keeps that body apart from its message).

use std::time::Duration;

use serde_json::Value;

/// Largest answer read from the endpoint, by default (1 MiB); more is a
/// malformed answer.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1 << 20;

/// Longest excerpt of an answer quoted in an error.
const MAX_EXCERPT: usize = 200;

/// Why a chat completion failed. The messages name the URL, never a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChatError {
    /// The endpoint answered with a non-success status (redirects included:
    /// they are not followed).
    #[error("HTTP {status} from {url}")]
    Status {
        /// The HTTP status code.
        status: u16,
        /// The URL requested.
        url: String,
        /// Start of the response body, possibly empty (not in the message).
        body: String,
    },
    /// No complete answer within the timeout.
    #[error("no answer within {}", human_duration(*.0))]
    Timeout(Duration),
    /// The connection could not be made (refused, DNS, TLS handshake, ...).
    #[error("cannot connect to {url}: {detail}")]
    Connect {
        /// The URL requested.
        url: String,
        /// The underlying cause.
        detail: String,
    },
    /// The request failed after connecting (reset, bad HTTP, ...).
    #[error("request to {url} failed: {detail}")]
    Transport {
        /// The URL requested.
        url: String,
        /// The underlying cause.
        detail: String,
    },
    /// The answer was not a chat completion with a message content string.
    #[error("malformed answer: {0}")]
    Malformed(String),
}

/// Why a [`ChatClient`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ChatConfigError {
    /// The base URL is not `http(s)://...`.
    #[error("invalid base URL {0:?} (want http:// or https://...)")]
    InvalidBaseUrl(String),
    /// The HTTP client could not be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// Formats a duration as `30 s` when whole seconds, else `300 ms`.
pub fn human_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// A client of one chat-completions endpoint: the connection pool and the
/// URL, built once. Redirects are not followed.
#[derive(Debug, Clone)]
pub struct ChatClient {
    client: reqwest::Client,
    url: String,
    max_response_bytes: usize,
}

impl ChatClient {
    /// A client of `{base_url}/chat/completions`; `user_agent` names the
    /// caller (`temper-judge/0.1.0`); `system_proxy` honours
    /// `HTTP_PROXY`/`HTTPS_PROXY`/`NO_PROXY`.
    pub fn new(
        base_url: &str,
        user_agent: &str,
        system_proxy: bool,
    ) -> Result<Self, ChatConfigError> {
        let base = base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://"))
            || base.len() <= "https://".len()
        {
            return Err(ChatConfigError::InvalidBaseUrl(base_url.to_string()));
        }
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(user_agent);
        if !system_proxy {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(ChatConfigError::Client)?;
        Ok(Self {
            client,
            url: format!("{base}/chat/completions"),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
    }

    /// The endpoint requests are sent to.
    pub fn endpoint(&self) -> &str {
        &self.url
    }

    /// Sends `body` (with `api_key` as a bearer token when given) and
    /// returns the answer's `choices[0].message.content`, all within
    /// `timeout`.
    pub async fn complete(
        &self,
        body: &Value,
        api_key: Option<&str>,
        timeout: Duration,
    ) -> Result<String, ChatError> {
        tokio::time::timeout(timeout, self.exchange(body, api_key))
            .await
            .map_err(|_| ChatError::Timeout(timeout))?
    }

    async fn exchange(&self, body: &Value, api_key: Option<&str>) -> Result<String, ChatError> {
        let body = serde_json::to_vec(body)
            .map_err(|e| ChatError::Malformed(format!("cannot encode the request: {e}")))?;
        let mut request = self
            .client
            .post(&self.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body);
        if let Some(key) = api_key {
            request = request.bearer_auth(key);
        }
        let mut response = request.send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
            if bytes.len() + chunk.len() > self.max_response_bytes {
                if !status.is_success() {
                    break;
                }
                return Err(ChatError::Malformed(format!(
                    "response larger than {} bytes",
                    self.max_response_bytes
                )));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(ChatError::Status {
                status: status.as_u16(),
                url: self.url.clone(),
                body: String::from_utf8_lossy(&bytes).into_owned(),
            });
        }
        message_content(&bytes)
    }

    /// Classifies a reqwest error (its innermost cause names the problem,
    /// e.g. `Connection refused (os error 111)`).
    fn transport(&self, e: reqwest::Error) -> ChatError {
        let mut cause: &(dyn std::error::Error + 'static) = &e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        let detail = cause.to_string();
        if e.is_connect() {
            ChatError::Connect {
                url: self.url.clone(),
                detail,
            }
        } else {
            ChatError::Transport {
                url: self.url.clone(),
                detail,
            }
        }
    }
}

/// Extracts `choices[0].message.content` from a chat-completions body.
fn message_content(body: &[u8]) -> Result<String, ChatError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        ChatError::Malformed(format!(
            "response is not JSON ({e}): {}",
            excerpt(&String::from_utf8_lossy(body))
        ))
    })?;
    match value.pointer("/choices/0/message/content") {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ChatError::Malformed(format!(
            "response has no choices[0].message.content string: {}",
            excerpt(&value.to_string())
        ))),
    }
}

/// `text` cut to 200 characters, for quoting in an error.
pub fn excerpt(text: &str) -> String {
    if text.chars().count() <= MAX_EXCERPT {
        text.to_string()
    } else {
        let cut: String = text.chars().take(MAX_EXCERPT).collect();
        format!("{cut}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_content_is_extracted_and_a_bad_answer_is_malformed() {
        let ok = br#"{"choices":[{"message":{"role":"assistant","content":"hi"}}]}"#;
        assert_eq!(message_content(ok).unwrap(), "hi");
        let err = message_content(b"not json").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("malformed answer: response is not JSON")
        );
        let err = message_content(br#"{"choices":[]}"#).unwrap_err();
        assert!(
            err.to_string().contains("no choices[0].message.content"),
            "{err}"
        );
    }

    #[test]
    fn a_base_url_must_be_http() {
        assert!(ChatClient::new("ftp://x", "t", false).is_err());
        assert!(ChatClient::new("https://", "t", false).is_err());
        let c = ChatClient::new("http://127.0.0.1:1/v1/", "t", false).unwrap();
        assert_eq!(c.endpoint(), "http://127.0.0.1:1/v1/chat/completions");
    }
}
