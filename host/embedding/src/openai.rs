//! [`OpenAiEmbedder`]: an OpenAI-compatible embeddings endpoint.
//!
//! `POST {base_url}/embeddings` with `{"model", "input": [texts],
//! "encoding_format": "float"}`; the answer's `data[].embedding` (ordered by
//! `data[].index`) are the vectors. Configured like the LLM judge: a base URL
//! (`https://api.openai.com/v1`, `http://127.0.0.1:8080/v1` for llama.cpp or
//! Ollama), a model name, and the *name* of the environment variable holding
//! the key ([`DEFAULT_API_KEY_ENV`]), read at each request. The key goes in
//! a sensitive `Authorization` header only: it is cut out of any upstream
//! text quoted in an error, and the endpoint named in errors carries no
//! URL credentials.
//!
//! The forge's [`Embedder`] is synchronous; requests run on the embedder's
//! own one-thread runtime and the caller's thread waits (at most the
//! timeout), so it works inside or outside a tokio runtime.

use std::sync::mpsc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use temper_forge::discovery::{EmbedError, Embedder};

/// Name of the environment variable holding the API key, by default.
pub const DEFAULT_API_KEY_ENV: &str = "TEMPER_EMBEDDINGS_API_KEY";

/// How long one request may take, by default (connect, request, answer).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest answer read (bytes): 64 MiB is ~2,000 vectors of 3,072 floats as JSON.
const MAX_ANSWER_BYTES: usize = 64 << 20;

/// Most characters of an upstream's answer quoted in an error.
const EXCERPT_CHARS: usize = 200;

/// Configuration of an [`OpenAiEmbedder`].
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiEmbedderConfig {
    /// Base URL of the OpenAI-compatible API; requests go to `{base_url}/embeddings`.
    pub base_url: String,
    /// Model name sent in every request (e.g. `text-embedding-3-small`).
    pub model: String,
    /// Name (not value) of the environment variable holding the API key.
    /// When unset, or the variable is absent or empty, no `Authorization`
    /// header is sent.
    pub api_key_env: Option<String>,
    /// Limit for one request; default [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
}

impl OpenAiEmbedderConfig {
    /// A configuration with the key in [`DEFAULT_API_KEY_ENV`] and [`DEFAULT_TIMEOUT`].
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: Some(DEFAULT_API_KEY_ENV.to_string()),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Why an [`OpenAiEmbedder`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiConfigError {
    /// The base URL is not an `http`/`https` URL.
    #[error("embeddings: base URL {0:?} is not an http(s) URL (e.g. http://127.0.0.1:8080/v1)")]
    InvalidBaseUrl(String),
    /// The HTTP client or its runtime could not start.
    #[error("embeddings: cannot start the HTTP client: {0}")]
    Client(String),
}

/// An [`Embedder`] over an OpenAI-compatible `/embeddings` endpoint.
pub struct OpenAiEmbedder {
    config: OpenAiEmbedderConfig,
    endpoint: reqwest::Url,
    /// The endpoint as errors name it: no user name or password.
    shown: String,
    model_id: String,
    client: reqwest::Client,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEmbedder")
            .field("endpoint", &self.shown)
            .field("model", &self.config.model)
            .finish_non_exhaustive()
    }
}

impl Drop for OpenAiEmbedder {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's context panics; this does not.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(default)]
    index: Option<usize>,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// An embedder for `config`; nothing is sent until the first embedding.
    pub fn new(config: OpenAiEmbedderConfig) -> Result<Self, OpenAiConfigError> {
        let invalid = || OpenAiConfigError::InvalidBaseUrl(config.base_url.clone());
        let base =
            reqwest::Url::parse(config.base_url.trim_end_matches('/')).map_err(|_| invalid())?;
        if !matches!(base.scheme(), "http" | "https") || base.host_str().is_none() {
            return Err(invalid());
        }
        let endpoint = reqwest::Url::parse(&format!(
            "{}/embeddings",
            base.as_str().trim_end_matches('/')
        ))
        .map_err(|_| invalid())?;
        let mut shown_url = endpoint.clone();
        let _ = shown_url.set_username("");
        let _ = shown_url.set_password(None);
        let shown = shown_url.to_string();
        let client = reqwest::Client::builder()
            .user_agent(concat!("temper-embedding/", env!("CARGO_PKG_VERSION")))
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| OpenAiConfigError::Client(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("temper-embeddings")
            .enable_all()
            .build()
            .map_err(|e| OpenAiConfigError::Client(e.to_string()))?;
        let model_id = format!("openai:{}@{}", config.model, shown);
        Ok(Self {
            config,
            endpoint,
            shown,
            model_id,
            client,
            runtime: Some(runtime),
        })
    }

    /// The endpoint requests go to (without URL credentials).
    pub fn endpoint(&self) -> &str {
        &self.shown
    }

    /// The request body for `texts` (what the endpoint receives).
    pub fn request_body(&self, texts: &[&str]) -> serde_json::Value {
        json!({"model": self.config.model, "input": texts, "encoding_format": "float"})
    }

    fn api_key(&self) -> Option<String> {
        let name = self.config.api_key_env.as_deref()?;
        let key = std::env::var(name).ok()?;
        let key = key.trim();
        (!key.is_empty()).then(|| key.to_string())
    }

    fn upstream(&self, detail: impl Into<String>) -> EmbedError {
        EmbedError::Upstream {
            upstream: self.shown.clone(),
            detail: detail.into(),
        }
    }

    /// Sends one request; the vectors in `texts`' order.
    async fn request(
        client: reqwest::Client,
        endpoint: reqwest::Url,
        body: Vec<u8>,
        key: Option<String>,
    ) -> Result<Vec<Vec<f32>>, (String, Option<String>)> {
        let mut request = client
            .post(endpoint)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(key) = &key {
            let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
                .map_err(|_| ("the API key is not a valid header value".to_string(), None))?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        let mut response = request.send().await.map_err(|e| (describe(&e), None))?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| (describe(&e), None))? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err((format!("answer larger than {MAX_ANSWER_BYTES} bytes"), None));
            }
            bytes.extend_from_slice(&chunk);
        }
        let text = String::from_utf8_lossy(&bytes);
        if !status.is_success() {
            return Err((format!("HTTP {status}"), Some(text.into_owned())));
        }
        let answer: Answer = serde_json::from_slice(&bytes).map_err(|e| {
            (
                format!("answer is not an embeddings list: {e}"),
                Some(text.into_owned()),
            )
        })?;
        let mut data = answer.data;
        if data.iter().all(|d| d.index.is_some()) {
            data.sort_by_key(|d| d.index);
        }
        Ok(data.into_iter().map(|d| d.embedding).collect())
    }
}

/// A transport error without the URL (errors name the endpoint once, clean).
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let mut detail = kind.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        detail = format!("{detail}: {s}");
        source = s.source();
    }
    detail
}

/// At most [`EXCERPT_CHARS`] of `text` with every occurrence of `key` cut out.
fn excerpt(text: &str, key: Option<&str>) -> String {
    let cleaned = match key {
        Some(k) if !k.is_empty() => text.replace(k, "[redacted]"),
        _ => text.to_string(),
    };
    let mut out: String = cleaned.chars().take(EXCERPT_CHARS).collect();
    if cleaned.chars().count() > EXCERPT_CHARS {
        out.push('…');
    }
    out
}

impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let Some(runtime) = &self.runtime else {
            return Err(self.upstream("the embedder is shut down"));
        };
        let body = serde_json::to_vec(&self.request_body(texts))
            .map_err(|e| self.upstream(e.to_string()))?;
        let key = self.api_key();
        let (tx, rx) = mpsc::channel();
        let (client, endpoint, key_for_request) =
            (self.client.clone(), self.endpoint.clone(), key.clone());
        runtime.spawn(async move {
            let _ = tx.send(Self::request(client, endpoint, body, key_for_request).await);
        });
        let outcome = rx
            .recv_timeout(self.config.timeout + Duration::from_secs(1))
            .map_err(|_| self.upstream(format!("no answer within {:?}", self.config.timeout)))?;
        let vectors = outcome.map_err(|(what, body)| match body {
            Some(body) => self.upstream(format!("{what}: {}", excerpt(&body, key.as_deref()))),
            None => self.upstream(excerpt(&what, key.as_deref())),
        })?;
        if vectors.len() != texts.len() {
            return Err(self.upstream(format!(
                "{} vectors for {} inputs",
                vectors.len(),
                texts.len()
            )));
        }
        let dimension = vectors[0].len();
        if dimension == 0 || vectors.iter().any(|v| v.len() != dimension) {
            return Err(self.upstream("vectors of unequal or zero length"));
        }
        Ok(vectors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_a_base_url_that_is_not_http() {
        for bad in ["ftp://x/v1", "not a url", "file:///etc"] {
            let err = OpenAiEmbedder::new(OpenAiEmbedderConfig::new(bad, "m")).unwrap_err();
            assert!(
                matches!(err, OpenAiConfigError::InvalidBaseUrl(_)),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn names_the_endpoint_without_url_credentials() {
        let e = OpenAiEmbedder::new(OpenAiEmbedderConfig::new(
            "http://user:hunter2@127.0.0.1:9/v1/",
            "m",
        ))
        .unwrap();
        assert_eq!(e.endpoint(), "http://127.0.0.1:9/v1/embeddings");
        assert!(!e.model_id().contains("hunter2"));
        assert!(!format!("{e:?}").contains("hunter2"));
    }

    #[test]
    fn excerpts_cut_the_key_out_and_stay_short() {
        let text = format!("echo: Bearer sk-secret {}", "x".repeat(500));
        let cut = excerpt(&text, Some("sk-secret"));
        assert!(!cut.contains("sk-secret"));
        assert!(cut.chars().count() <= EXCERPT_CHARS + 1);
    }
}
