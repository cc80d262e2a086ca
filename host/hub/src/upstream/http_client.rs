//! The HTTP side of a Streamable HTTP upstream: rmcp's
//! [`StreamableHttpClient`] on the workspace's reqwest 0.12.
//!
//! rmcp's own backend for this trait needs reqwest 0.13, a second reqwest
//! (with its own hyper-rustls and rustls configuration) next to the 0.12
//! that the fetch capability and oci-client use. The trait is rmcp's
//! extension point for other HTTP stacks, so the session logic, the
//! protocol headers, the event-stream resumption and the session recovery
//! stay rmcp's; this module only sends the requests and reads the answers,
//! with the result cap applied before anything is parsed.
//!
//! A request that cannot reach the server, or whose answer breaks off,
//! also reports the connection lost (the upstream's supervisor then
//! reconnects with backoff). No error carries the URL (its query string
//! may hold a token) or a header value.

use std::borrow::Cow;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{BoxStream, Stream, StreamExt};
use http::{HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_LAST_EVENT_ID, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::{Sse, SseStream};
use tokio::sync::watch;

/// Bytes of an HTTP error body kept for the message.
const ERROR_BODY_KEPT: usize = 200;

/// Why a request to the upstream failed at the HTTP level. None of these
/// holds the URL or a header value.
#[derive(Debug, thiserror::Error)]
pub(super) enum HttpClientError {
    /// No connection could be made.
    #[error("is not reachable ({0})")]
    Unreachable(String),
    /// The answer broke off.
    #[error("broke off its answer ({0})")]
    Broken(String),
    /// An answer (an event, a JSON body) over the result cap.
    #[error("sent a message over the {0}-byte cap")]
    TooLarge(usize),
    /// An event whose data is not JSON (the data is not quoted).
    #[error("sent malformed JSON-RPC ({0})")]
    Malformed(String),
    /// Anything else reqwest reports.
    #[error("{0}")]
    Other(String),
}

/// A reqwest 0.12 client for one upstream, with the signal that its
/// connection is lost.
#[derive(Clone)]
pub(super) struct HttpClient {
    client: reqwest::Client,
    lost: Arc<watch::Sender<Option<String>>>,
    /// `max_result_bytes`, as errors name it (the limits applied leave room
    /// for the envelope around a result).
    result_cap: usize,
    /// Set once the first GET for the session's event stream has been
    /// answered (opened, refused or failed).
    stream_tried: Arc<watch::Sender<bool>>,
    /// Header values, cut out of everything the server sends that goes
    /// into an error (rmcp logs some errors itself, before Temper sees
    /// them).
    secrets: Arc<Vec<String>>,
}

impl HttpClient {
    /// A client that connects within `connect_timeout`, follows no
    /// redirect (a redirect would carry the headers elsewhere), reports a
    /// lost connection on `lost`, and names `result_cap` when an answer is
    /// too large.
    pub(super) fn new(
        connect_timeout: Duration,
        lost: Arc<watch::Sender<Option<String>>>,
        result_cap: usize,
        stream_tried: Arc<watch::Sender<bool>>,
        secrets: Arc<Vec<String>>,
    ) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("HTTP client: {}", root_cause(e)))?;
        Ok(Self {
            client,
            lost,
            result_cap,
            stream_tried,
            secrets,
        })
    }

    /// `text` with every header value cut out.
    fn redact(&self, text: String) -> String {
        let mut text = text;
        for s in self.secrets.iter() {
            if text.contains(s.as_str()) {
                text = text.replace(s.as_str(), "[redacted]");
            }
        }
        text
    }

    /// `HTTP 500 Internal Server Error: <the body's start>`, redacted.
    fn status_error(
        &self,
        status: StatusCode,
        body: &[u8],
    ) -> StreamableHttpError<HttpClientError> {
        StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            self.redact(http_status_text(status, body)),
        ))
    }

    /// A Content-Type that is neither JSON nor an event stream, redacted.
    fn content_type_error(&self, ct: Option<&HeaderValue>) -> StreamableHttpError<HttpClientError> {
        StreamableHttpError::UnexpectedContentType(
            ct.map(|ct| self.redact(String::from_utf8_lossy(ct.as_bytes()).into_owned())),
        )
    }

    /// Reports the connection lost, with `reason` (the first one stays).
    fn report_lost(&self, reason: String) {
        self.lost.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Maps a reqwest error, reporting the connection lost when the server
    /// could not be reached or the answer broke off.
    fn fail(&self, e: reqwest::Error) -> StreamableHttpError<HttpClientError> {
        let (connect, broken) = (
            e.is_connect(),
            e.is_body() || e.is_decode() || e.is_request(),
        );
        let cause = root_cause(e);
        let err = if connect {
            HttpClientError::Unreachable(cause)
        } else if broken {
            HttpClientError::Broken(cause)
        } else {
            HttpClientError::Other(cause)
        };
        if matches!(
            err,
            HttpClientError::Unreachable(_) | HttpClientError::Broken(_)
        ) {
            self.report_lost(err.to_string());
        }
        StreamableHttpError::Client(err)
    }

    fn request(
        &self,
        method: reqwest::Method,
        uri: &str,
        session_id: Option<&str>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> reqwest::RequestBuilder {
        let mut req = self.client.request(method, uri);
        for (name, value) in custom_headers {
            req = req.header(name, value);
        }
        if let Some(session) = session_id {
            req = req.header(HEADER_SESSION_ID, session);
        }
        req
    }
}

/// The innermost cause of `e`, or reqwest's own message without the URL
/// when it has none (reqwest's outer message names the URL).
fn root_cause(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut cause: &dyn std::error::Error = &e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Whether a `Content-Type` value is `expected` (parameters ignored).
fn media_type_is(value: &HeaderValue, expected: &str) -> bool {
    value
        .to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(expected))
}

impl StreamableHttpClient for HttpClient {
    type Error = HttpClientError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let body = serde_json::to_vec(&message)?;
        let session_attached = session_id.is_some();
        let response = self
            .request(
                reqwest::Method::POST,
                &uri,
                session_id.as_deref(),
                custom_headers,
            )
            .header(
                reqwest::header::ACCEPT,
                format!("{JSON_MIME_TYPE}, {EVENT_STREAM_MIME_TYPE}"),
            )
            .header(reqwest::header::CONTENT_TYPE, JSON_MIME_TYPE)
            .body(body)
            .send()
            .await
            .map_err(|e| self.fail(e))?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_attached {
            return Err(StreamableHttpError::SessionExpired);
        }
        let new_session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .cloned();
        let is_json = content_type
            .as_ref()
            .is_some_and(|ct| media_type_is(ct, JSON_MIME_TYPE));
        let awaits_no_response = !matches!(message, ClientJsonRpcMessage::Request(_));
        if !status.is_success() {
            // A JSON-RPC error in the body is the upstream's answer; any
            // other body is kept short, for the message.
            let limit = if is_json {
                limits.max_json_response_size
            } else {
                ERROR_BODY_KEPT
            };
            let body = self.read_prefix(response, limit).await.unwrap_or_default();
            if is_json
                && let Ok(msg @ ServerJsonRpcMessage::Error(_)) =
                    serde_json::from_slice::<ServerJsonRpcMessage>(&body)
            {
                return Ok(StreamableHttpPostResponse::Json(msg, new_session));
            }
            return Err(self.status_error(status, &body));
        }
        match content_type {
            Some(ct) if media_type_is(&ct, EVENT_STREAM_MIME_TYPE) => {
                Ok(StreamableHttpPostResponse::Sse(
                    self.events(response, limits.max_sse_event_size),
                    new_session,
                ))
            }
            Some(ct) if media_type_is(&ct, JSON_MIME_TYPE) => {
                let body = self
                    .read_bounded(response, limits.max_json_response_size)
                    .await?;
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(msg) => Ok(StreamableHttpPostResponse::Json(msg, new_session)),
                    Err(_) if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
                    Err(e) => Err(StreamableHttpError::Deserialize(e)),
                }
            }
            _ if awaits_no_response => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(self.content_type_error(other.as_ref())),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let response = self
            .request(
                reqwest::Method::DELETE,
                &uri,
                Some(&session_id),
                custom_headers,
            )
            .send()
            .await
            .map_err(|e| StreamableHttpError::Client(HttpClientError::Other(root_cause(e))))?;
        let status = response.status();
        if status.is_success() || status == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(());
        }
        Err(self.status_error(status, &[]))
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        _auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let mut req = self
            .request(
                reqwest::Method::GET,
                &uri,
                session_id.as_deref(),
                custom_headers,
            )
            .header(reqwest::header::ACCEPT, EVENT_STREAM_MIME_TYPE);
        if let Some(id) = last_event_id {
            req = req.header(HEADER_LAST_EVENT_ID, id);
        }
        let response = req.send().await.map_err(|e| self.fail(e));
        self.stream_tried.send_replace(true);
        let response = response?;
        let status = response.status();
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !status.is_success() {
            return Err(self.status_error(status, &[]));
        }
        match response.headers().get(reqwest::header::CONTENT_TYPE) {
            Some(ct) if media_type_is(ct, EVENT_STREAM_MIME_TYPE) => {}
            other => {
                return Err(self.content_type_error(other));
            }
        }
        Ok(self.events(response, max_sse_event_size))
    }
}

/// `HTTP 500 Internal Server Error: <the body's first line, shortened>`.
fn http_status_text(status: StatusCode, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(ERROR_BODY_KEPT)
        .collect::<String>();
    if line.is_empty() {
        format!("answered HTTP {status}")
    } else {
        format!("answered HTTP {status}: {line}")
    }
}

impl HttpClient {
    /// The body as a stream of chunks (reqwest's `stream` feature is not
    /// needed for this).
    fn chunks(
        &self,
        response: reqwest::Response,
    ) -> impl Stream<Item = Result<Bytes, HttpClientError>> + Send + 'static {
        let this = self.clone();
        futures_util::stream::unfold(Some(response), move |state| {
            let this = this.clone();
            async move {
                let mut response = state?;
                match response.chunk().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
                    Ok(None) => None,
                    Err(e) => {
                        let err = match this.fail(e) {
                            StreamableHttpError::Client(err) => err,
                            other => HttpClientError::Other(other.to_string()),
                        };
                        Some((Err(err), None))
                    }
                }
            }
        })
    }

    /// The whole body, refused past `max` bytes (before it is parsed).
    async fn read_bounded(
        &self,
        response: reqwest::Response,
        max: usize,
    ) -> Result<Vec<u8>, StreamableHttpError<HttpClientError>> {
        if response.content_length().is_some_and(|n| n > max as u64) {
            return Err(StreamableHttpError::Client(HttpClientError::TooLarge(
                self.result_cap,
            )));
        }
        let mut body = Vec::new();
        let chunks = self.chunks(response);
        futures_util::pin_mut!(chunks);
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(StreamableHttpError::Client)?;
            if chunk.len() > max - body.len() {
                return Err(StreamableHttpError::Client(HttpClientError::TooLarge(
                    self.result_cap,
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// At most `max` bytes of the body (for messages).
    async fn read_prefix(
        &self,
        response: reqwest::Response,
        max: usize,
    ) -> Result<Vec<u8>, HttpClientError> {
        let mut body = Vec::new();
        let chunks = self.chunks(response);
        futures_util::pin_mut!(chunks);
        while body.len() < max {
            let Some(chunk) = chunks.next().await else {
                break;
            };
            let chunk = chunk?;
            let n = chunk.len().min(max - body.len());
            body.extend_from_slice(&chunk[..n]);
        }
        Ok(body)
    }

    /// The body as server-sent events, each refused past `max` bytes.
    fn events(
        &self,
        response: reqwest::Response,
        max: usize,
    ) -> BoxStream<'static, Result<Sse, SseError>> {
        let bounded = EventCap {
            inner: Box::pin(self.chunks(response)),
            client: self.clone(),
            max,
            shown: self.result_cap,
            event_bytes: 0,
            at_line_start: true,
            failed: false,
        };
        // rmcp skips an event whose data is not JSON-RPC, which would leave
        // the call waiting for its timeout: such an event ends the stream
        // (and the session, with the reason) instead, as a malformed line
        // from a stdio upstream does. An event with empty data is a
        // server's priming event (an id to resume from, MCP 2025-11-25:
        // the everything server sends one first): passed on to rmcp.
        let client = self.clone();
        SseStream::from_bytes_stream(bounded)
            .map(move |event| {
                let sse = event?;
                let Some(data) = sse.data.as_deref().filter(|d| !d.trim().is_empty()) else {
                    return Ok(sse);
                };
                match serde_json::from_str::<serde::de::IgnoredAny>(data) {
                    Ok(_) => Ok(sse),
                    Err(e) => {
                        let err = HttpClientError::Malformed(e.to_string());
                        client.report_lost(err.to_string());
                        Err(SseError::Body(Box::new(err)))
                    }
                }
            })
            .boxed()
    }
}

/// A byte stream that fails once one event (the bytes between two blank
/// lines) passes `max` bytes, so an oversized event is never buffered.
struct EventCap {
    inner: Pin<Box<dyn Stream<Item = Result<Bytes, HttpClientError>> + Send>>,
    /// Told when the cap is passed: rmcp's worker ends the exchange with a
    /// bare "transport closed", so the connection's end carries the reason
    /// (as a stdio upstream's oversized line does).
    client: HttpClient,
    max: usize,
    /// The cap as errors name it.
    shown: usize,
    event_bytes: usize,
    at_line_start: bool,
    failed: bool,
}

impl Stream for EventCap {
    type Item = Result<Bytes, HttpClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                for &b in chunk.iter() {
                    match b {
                        b'\n' if self.at_line_start => self.event_bytes = 0,
                        b'\n' => self.at_line_start = true,
                        b'\r' => {}
                        _ => {
                            self.at_line_start = false;
                            self.event_bytes += 1;
                        }
                    }
                    if self.event_bytes > self.max {
                        self.failed = true;
                        let err = HttpClientError::TooLarge(self.shown);
                        self.client.report_lost(err.to_string());
                        return Poll::Ready(Some(Err(err)));
                    }
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.failed = true;
                Poll::Ready(Some(Err(e)))
            }
            other => other,
        }
    }
}

/// What went wrong in a Streamable HTTP exchange, found in `error`'s
/// chain, said for people (no URL, no header value).
pub(super) fn describe(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if let Some(http) = e.downcast_ref::<StreamableHttpError<HttpClientError>>() {
            return Some(describe_http(http));
        }
        cause = e.source();
    }
    None
}

fn describe_http(e: &StreamableHttpError<HttpClientError>) -> String {
    match e {
        StreamableHttpError::Client(c) => c.to_string(),
        StreamableHttpError::UnexpectedServerResponse(text) => text.to_string(),
        StreamableHttpError::HttpStatus(s) => format!("answered HTTP {}", s.status),
        StreamableHttpError::AuthRequired(_) => {
            "answered HTTP 401 Unauthorized (authentication required)".into()
        }
        StreamableHttpError::InsufficientScope(_) => {
            "answered HTTP 403 Forbidden (insufficient scope)".into()
        }
        StreamableHttpError::ResponseBodyTooLarge { max_size } => {
            format!("sent a message over the {max_size}-byte cap")
        }
        StreamableHttpError::Deserialize(e) => format!("sent malformed JSON-RPC ({e})"),
        StreamableHttpError::Sse(sse) => match sse {
            SseError::Body(body) => match body.downcast_ref::<HttpClientError>() {
                Some(c) => c.to_string(),
                None => format!("sent a malformed event stream ({body})"),
            },
            other => format!("sent a malformed event stream ({other})"),
        },
        StreamableHttpError::UnexpectedContentType(ct) => match ct {
            Some(ct) => format!("answered with Content-Type {ct:?}, not JSON or an event stream"),
            None => "answered without a Content-Type".into(),
        },
        StreamableHttpError::SessionExpired => "ended the session (HTTP 404)".into(),
        StreamableHttpError::UnexpectedEndOfStream => {
            "closed the event stream before answering".into()
        }
        other => other.to_string(),
    }
}
