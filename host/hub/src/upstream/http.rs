//! A Streamable HTTP upstream: rmcp's Streamable HTTP client transport
//! over [`HttpClient`] (reqwest 0.12), the configured headers sent with
//! every request, the result cap applied to every JSON body and event.
//!
//! The connection ends (and the supervisor reconnects with backoff) when
//! the server cannot be reached or an answer breaks off, or when rmcp's
//! transport closes.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::service::{ClientInitializeError, RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::sync::watch;

use super::http_client::{HttpClient, describe};
use super::{Conn, Shared, UpstreamError};
use crate::config::Secret;

/// Ordinary POSTs rmcp keeps in flight on one session (its default is 16;
/// the hub is called concurrently by many agents).
const MAX_CONCURRENT_POSTS: usize = 256;
/// Longest wait for the session's event stream after the handshake.
const STREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
/// Room for the JSON-RPC envelope and the event-stream framing around a
/// result of `max_result_bytes`.
const ENVELOPE_SLACK: usize = 4096;

impl Shared {
    /// Opens a session with the upstream at `url`, sending `headers` with
    /// every request, and completes the MCP handshake.
    pub(super) async fn connect_http(
        self: &Arc<Self>,
        url: &str,
        headers: &BTreeMap<String, Secret>,
    ) -> Result<Arc<Conn>, UpstreamError> {
        let start_error = |reason: String| UpstreamError::Start {
            upstream: self.config.name.clone(),
            reason: self.redact(reason),
            stderr_tail: String::new(),
        };
        let mut custom = HashMap::new();
        for (name, value) in headers {
            // Checked when the tools file was read; the value is never quoted.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| start_error(format!("header {name:?} is not a valid name")))?;
            let mut value = HeaderValue::from_str(value.expose())
                .map_err(|_| start_error(format!("header {name} has a value HTTP refuses")))?;
            value.set_sensitive(true);
            custom.insert(name, value);
        }
        let (ended_tx, ended_rx) = watch::channel(None);
        let ended_tx = Arc::new(ended_tx);
        let (stream_tx, mut stream_rx) = watch::channel(false);
        let client = HttpClient::new(
            self.config.timeout,
            ended_tx.clone(),
            self.config.max_result_bytes,
            Arc::new(stream_tx),
            Arc::new(self.secrets.clone()),
        )
        .map_err(start_error)?;
        let cap = self.config.max_result_bytes.saturating_add(ENVELOPE_SLACK);
        let config = StreamableHttpClientTransportConfig::with_uri(url)
            .custom_headers(custom)
            .max_json_response_size(cap)
            .max_sse_event_size(cap)
            .max_concurrent_requests(MAX_CONCURRENT_POSTS);
        let transport = Watched {
            inner: StreamableHttpClientTransport::with_client(client, config),
            ended: ended_tx,
        };
        let handler = self.client_handler(false);
        let service =
            match tokio::time::timeout(self.config.start_timeout, handler.serve(transport)).await {
                Ok(Ok(service)) => service,
                Ok(Err(e)) => return Err(start_error(init_reason(&e))),
                Err(_) => {
                    return Err(start_error(format!(
                        "no MCP handshake within {} ms (start_timeout_ms)",
                        self.config.start_timeout.as_millis()
                    )));
                }
            };
        // Notifications without a request (`list_changed`) come on the
        // session's GET stream, which rmcp opens after the handshake: wait
        // for its answer so none is missed from the moment this returns.
        let _ = tokio::time::timeout(
            self.config.timeout.min(STREAM_WAIT),
            stream_rx.wait_for(|tried| *tried),
        )
        .await;
        Ok(Arc::new(Conn {
            service,
            ended: ended_rx,
            direct: None,
        }))
    }
}

/// Why the handshake failed, for people.
fn init_reason(e: &ClientInitializeError) -> String {
    let detail = match e {
        ClientInitializeError::TransportError { error, .. } => describe(error),
        other => describe(other),
    };
    match detail {
        Some(detail) => format!("MCP handshake failed: {detail}"),
        None => format!("MCP handshake failed: {e}"),
    }
}

/// rmcp's transport, watched: when it stops delivering messages the
/// connection has ended.
struct Watched<T> {
    inner: T,
    ended: Arc<watch::Sender<Option<String>>>,
}

impl<T> rmcp::transport::Transport<RoleClient> for Watched<T>
where
    T: rmcp::transport::Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let msg = self.inner.receive().await;
        if msg.is_none() {
            self.ended.send_if_modified(|r| {
                if r.is_none() {
                    *r = Some("closed the session".into());
                    true
                } else {
                    false
                }
            });
        }
        msg
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.inner.close().await
    }
}

#[cfg(test)]
mod tests;
