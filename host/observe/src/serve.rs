//! `GET /metrics` on its own listener (`--metrics ADDR`), apart from the
//! MCP endpoint: a scraper needs no MCP token, and an MCP client cannot
//! read the metrics through the MCP port.
//!
//! Bound to loopback it needs no token. Bound to any other address it
//! requires one (`--metrics-token-file FILE`): scrapers send it as
//! `Authorization: Bearer TOKEN` (Prometheus' `authorization` block with
//! `credentials_file`). Binding elsewhere without a token is refused.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

use crate::Metrics;

/// The content type of the Prometheus text format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// How long a scraper may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the metrics listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsServeError {
    /// `--metrics ADDR` is not a socket address.
    #[error("metrics: {addr:?} is not an address (HOST:PORT): {message}")]
    Address {
        /// The address given.
        addr: String,
        /// Why.
        message: String,
    },
    /// A non-loopback bind without a token.
    #[error(
        "metrics: refusing to serve /metrics on non-loopback {addr} without a token (--metrics-token-file)"
    )]
    NeedsToken {
        /// The address given.
        addr: SocketAddr,
    },
    /// The token file cannot be read or is empty.
    #[error("metrics: token file {path}: {message}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why (never the token).
        message: String,
    },
    /// The listener cannot bind.
    #[error("metrics: cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A token scrapers must present, kept as its SHA-256 (compared digest to
/// digest: equal-length inputs, and the digest says nothing useful about
/// the token).
#[derive(Clone)]
pub struct ScrapeToken(Arc<[u8; 32]>);

impl std::fmt::Debug for ScrapeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScrapeToken(..)")
    }
}

impl ScrapeToken {
    /// The token in `path` (surrounding whitespace trimmed; empty refused).
    pub fn from_file(path: &Path) -> Result<Self, MetricsServeError> {
        let text = std::fs::read_to_string(path).map_err(|e| MetricsServeError::TokenFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let token = text.trim();
        if token.is_empty() {
            return Err(MetricsServeError::TokenFile {
                path: path.to_path_buf(),
                message: "the file is empty".into(),
            });
        }
        Ok(Self::new(token))
    }

    /// `token` as a scrape token.
    pub fn new(token: &str) -> Self {
        Self(Arc::new(Sha256::digest(token.as_bytes()).into()))
    }

    /// Whether an `Authorization` header value carries this token.
    fn admits(&self, header: Option<&[u8]>) -> bool {
        let Some(given) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        let digest: [u8; 32] = Sha256::digest(given).into();
        digest == *self.0
    }
}

/// A bound `/metrics` listener.
pub struct MetricsServer {
    listener: TcpListener,
    metrics: Arc<Metrics>,
    token: Option<ScrapeToken>,
}

impl MetricsServer {
    /// Binds `addr`: refused for a non-loopback address without `token`.
    pub async fn bind(
        addr: &str,
        metrics: Arc<Metrics>,
        token: Option<ScrapeToken>,
    ) -> Result<Self, MetricsServeError> {
        let parsed: SocketAddr =
            addr.parse()
                .map_err(|e: std::net::AddrParseError| MetricsServeError::Address {
                    addr: addr.to_string(),
                    message: e.to_string(),
                })?;
        if !parsed.ip().is_loopback() && token.is_none() {
            return Err(MetricsServeError::NeedsToken { addr: parsed });
        }
        let listener =
            TcpListener::bind(parsed)
                .await
                .map_err(|source| MetricsServeError::Bind {
                    addr: parsed,
                    source,
                })?;
        Ok(Self {
            listener,
            metrics,
            token,
        })
    }

    /// The bound address (port 0 resolved).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves scrapes until the task is dropped.
    pub async fn run(self) {
        loop {
            let (stream, _) = match self.listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(target: "temper_observe", "metrics: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let metrics = self.metrics.clone();
            let token = self.token.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let answer = answer(&metrics, token.as_ref(), &req);
                    async move { Ok::<_, std::convert::Infallible>(answer) }
                });
                let served = hyper::server::conn::http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_TIMEOUT)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(e) = served {
                    tracing::debug!(target: "temper_observe", "metrics connection: {e}");
                }
            });
        }
    }
}

/// The answer to one request.
fn answer(
    metrics: &Metrics,
    token: Option<&ScrapeToken>,
    req: &Request<Incoming>,
) -> Response<Full<Bytes>> {
    if req.uri().path() != "/metrics" {
        return plain(
            StatusCode::NOT_FOUND,
            "not found: the metrics are at /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
    }
    if let Some(token) = token
        && !token.admits(req.headers().get(AUTHORIZATION).map(|v| v.as_bytes()))
    {
        let mut r = plain(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
        r.headers_mut()
            .insert(WWW_AUTHENTICATE, "Bearer".parse().expect("static header"));
        return r;
    }
    let mut r = Response::new(Full::new(Bytes::from(metrics.encode())));
    r.headers_mut().insert(
        CONTENT_TYPE,
        CONTENT_TYPE_TEXT.parse().expect("static header"),
    );
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *r.status_mut() = status;
    r
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
