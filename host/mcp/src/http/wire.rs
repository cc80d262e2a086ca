//! The bytes on the wire: response bodies (JSON or SSE), small response
//! helpers, and the I/O wrapper that times out slow clients.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Frame;
use serde_json::Value;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// A response body: a whole buffer, or an SSE stream fed by a channel.
pub enum Body {
    /// All of it.
    Full(Full<Bytes>),
    /// Events as they come; ends when the sender is dropped.
    Stream(mpsc::Receiver<Bytes>),
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(f) => Pin::new(f).poll_frame(cx),
            Body::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    /// A whole buffer says when it is done, so hyper sends it with a
    /// `content-length` and no second poll, not chunked; a stream has no
    /// end to tell.
    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(f) => hyper::body::Body::is_end_stream(f),
            Body::Stream(_) => false,
        }
    }

    /// A whole buffer's exact length (hyper writes it as `content-length`);
    /// a stream's is unknown (chunked).
    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            Body::Full(f) => hyper::body::Body::size_hint(f),
            Body::Stream(_) => hyper::body::SizeHint::default(),
        }
    }
}

pub(super) fn sse_event(message: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {message}\n\n"))
}

pub(super) fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(Bytes::from_static(text.as_bytes()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub(super) fn empty(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(Bytes::new())));
    *r.status_mut() = status;
    r
}

pub(super) fn json_response(status: StatusCode, message: &Value) -> Response<Body> {
    let mut r = Response::new(Body::Full(Full::new(Bytes::from(message.to_string()))));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(super) fn sse_response(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut r = Response::new(Body::Stream(rx));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

pub(super) fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|v| v.split(';').next().unwrap_or("").trim())
        .any(|v| v.eq_ignore_ascii_case(kind) || v == "*/*")
}

/// A TCP stream whose writes fail once one has been blocked for `timeout`
/// (the client stopped reading): hyper then closes the connection.
pub(super) struct TimedIo {
    pub(super) inner: TcpStream,
    pub(super) timeout: Duration,
    pub(super) blocked: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl TimedIo {
    pub(super) fn new(inner: TcpStream, timeout: Duration) -> Self {
        Self {
            inner,
            timeout,
            blocked: None,
        }
    }

    pub(super) fn on_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.blocked = None;
            return r;
        }
        let timeout = self.timeout;
        let deadline = self
            .blocked
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for TimedIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for TimedIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.on_write(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.on_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_flush(cx);
        this.on_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
