//! OpenTelemetry traces: the libraries open `tracing` spans named and
//! attributed after the OpenTelemetry semantic conventions ([`attr`]);
//! the binary exports them over OTLP/HTTP (protobuf) when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! is set and `OTEL_SDK_DISABLED` is not `true` ([`otlp_layer`]). Off,
//! no layer asks for spans: every span callsite is disabled (an atomic
//! load per span, nothing recorded or allocated).
//!
//! A request's `params._meta.traceparent` (W3C Trace Context, as MCP
//! carries it) becomes its span's parent ([`set_parent`]).
//!
//! The exporter's HTTP client is the workspace's reqwest 0.12 on the
//! binary's tokio runtime ([`ReqwestOnRuntime`]): `opentelemetry-otlp`'s own
//! reqwest client is reqwest 0.13 (a second HTTP/TLS stack in the build),
//! and its batch processor exports from a thread of its own, so a request
//! is spawned on the runtime and awaited from there.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use serde_json::Value;
use tracing::Subscriber;
use tracing_opentelemetry::{OpenTelemetryLayer, OpenTelemetrySpanExt};
use tracing_subscriber::registry::LookupSpan;

/// The OpenTelemetry semantic conventions Temper's spans follow, pinned
/// by `opentelemetry-semantic-conventions` 0.33 (schema 1.42.0); a unit
/// test checks every name here against that crate's constants (the span
/// macros need them as literals).
pub mod attr {
    /// The semantic conventions version the names follow.
    pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.42.0";
    /// `mcp.method.name`
    pub const MCP_METHOD_NAME: &str = "mcp.method.name";
    /// `mcp.session.id` (Temper records a hash of it)
    pub const MCP_SESSION_ID: &str = "mcp.session.id";
    /// `mcp.protocol.version`
    pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
    /// `jsonrpc.request.id`
    pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
    /// `gen_ai.operation.name` (`execute_tool`)
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    /// `gen_ai.tool.name`
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    /// `error.type`
    pub const ERROR_TYPE: &str = "error.type";
}

/// Why the OTLP exporter cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The exporter refused its configuration (e.g. a bad endpoint URL).
    #[error("traces: cannot build the OTLP/HTTP exporter: {0}")]
    Exporter(String),
}

/// Whether the environment turns OTLP export on: an endpoint is set and
/// `OTEL_SDK_DISABLED` is not `true`.
pub fn otlp_enabled(env: impl Fn(&str) -> Option<String>) -> bool {
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return false;
    }
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|k| env(k).is_some_and(|v| !v.trim().is_empty()))
}

/// The exporting tracer provider: [`Traces::shutdown`] flushes what is
/// buffered (at the binary's exit).
pub struct Traces {
    provider: SdkTracerProvider,
}

impl Traces {
    /// Exports the spans still buffered and stops the exporter. Blocks: call
    /// it off the async workers (`spawn_blocking`) while the runtime runs.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(target: "temper_observe", "traces: shutdown: {e}");
        }
    }
}

/// The layer that turns spans into OTLP exports, when the environment
/// turns export on ([`otlp_enabled`]); requests go out on `runtime`.
#[allow(clippy::type_complexity)]
pub fn otlp_layer<S>(
    runtime: tokio::runtime::Handle,
) -> Result<Option<(OpenTelemetryLayer<S, SdkTracer>, Traces)>, TraceError>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    if !otlp_enabled(|k| std::env::var(k).ok()) {
        return Ok(None);
    }
    // The endpoint, headers and timeout come from the OTEL_EXPORTER_OTLP_*
    // variables (the exporter reads them).
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(ReqwestOnRuntime::new(runtime))
        .build()
        .map_err(|e| TraceError::Exporter(e.to_string()))?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("temper")
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("temper");
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false);
    Ok(Some((layer, Traces { provider })))
}

/// Reads `traceparent` and `tracestate` from a request's `_meta`.
struct MetaCarrier<'a>(&'a serde_json::Map<String, Value>);

impl Extractor for MetaCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key)?.as_str()
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

/// The remote parent a request's `params._meta` names (`traceparent`,
/// with `tracestate`), when it is a valid W3C trace context.
pub fn parent_from_meta(params: Option<&Value>) -> Option<opentelemetry::Context> {
    let meta = params?.get("_meta")?.as_object()?;
    let cx = TraceContextPropagator::new().extract(&MetaCarrier(meta));
    cx.span().span_context().is_valid().then_some(cx)
}

/// Makes the trace context in `params._meta` the parent of `span`;
/// returns the `traceparent` taken, for the log. Nothing when the span is
/// disabled (traces off) or the context is absent or malformed.
pub fn set_parent(span: &tracing::Span, params: Option<&Value>) -> Option<String> {
    if span.is_disabled() {
        return None;
    }
    let cx = parent_from_meta(params)?;
    let traceparent = params?.pointer("/_meta/traceparent")?.as_str()?.to_string();
    span.set_parent(cx).ok()?;
    Some(traceparent)
}

/// A session id as recorded in `mcp.session.id`: the first 16 hex digits
/// of its SHA-256 (a trace backend never sees the id itself,
/// which on HTTP authorizes the session's requests).
pub fn hashed_session_id(session: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(session.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The exporter's HTTP client: reqwest 0.12 on the binary's tokio runtime.
#[derive(Debug)]
pub struct ReqwestOnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl ReqwestOnRuntime {
    /// A client whose requests run on `runtime`.
    pub fn new(runtime: tokio::runtime::Handle) -> Self {
        Self {
            client: reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .build()
                .unwrap_or_default(),
            runtime,
        }
    }
}

impl HttpClient for ReqwestOnRuntime {
    // `opentelemetry-http` declares this method with `#[async_trait]`; this
    // is the signature that macro expands to.
    fn send_bytes<'a, 'b>(
        &'a self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        let client = self.client.clone();
        let task = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let mut builder = client.request(parts.method, parts.uri.to_string());
            for (name, value) in &parts.headers {
                builder = builder.header(name, value);
            }
            let answer = builder.body(body).send().await?;
            let mut response = Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                response = response.header(name, value);
            }
            let body = answer.bytes().await?;
            Ok::<_, HttpError>(response.body(body)?)
        });
        Box::pin(async move { task.await.map_err(|e| Box::new(e) as HttpError)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_semantic_conventions::attribute as semconv;

    // The gen_ai.* and mcp.* constants are deprecated in this crate as
    // "moved to the GenAI semantic conventions repository": the names are
    // unchanged, and 0.33 is the version pinned.
    #[allow(deprecated)]
    #[test]
    fn the_attribute_names_are_the_semantic_conventions() {
        assert_eq!(
            attr::SCHEMA_URL,
            opentelemetry_semantic_conventions::SCHEMA_URL
        );
        assert_eq!(attr::MCP_METHOD_NAME, semconv::MCP_METHOD_NAME);
        assert_eq!(attr::MCP_SESSION_ID, semconv::MCP_SESSION_ID);
        assert_eq!(attr::MCP_PROTOCOL_VERSION, semconv::MCP_PROTOCOL_VERSION);
        assert_eq!(attr::JSONRPC_REQUEST_ID, semconv::JSONRPC_REQUEST_ID);
        assert_eq!(attr::GEN_AI_OPERATION_NAME, semconv::GEN_AI_OPERATION_NAME);
        assert_eq!(attr::GEN_AI_TOOL_NAME, semconv::GEN_AI_TOOL_NAME);
        assert_eq!(attr::ERROR_TYPE, semconv::ERROR_TYPE);
    }

    #[test]
    fn export_is_on_only_with_an_endpoint_and_not_disabled() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(!otlp_enabled(env(&[])));
        assert!(otlp_enabled(env(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "http://127.0.0.1:4318"
        )])));
        assert!(otlp_enabled(env(&[(
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://127.0.0.1:4318/v1/traces"
        )])));
        assert!(!otlp_enabled(env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")])));
        assert!(!otlp_enabled(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ])));
        assert!(otlp_enabled(env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "false"),
        ])));
    }

    #[test]
    fn a_traceparent_in_meta_is_the_parent() {
        let params = serde_json::json!({"_meta": {
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        }});
        let cx = parent_from_meta(Some(&params)).expect("valid");
        let span = cx.span();
        let sc = span.span_context();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(sc.span_id().to_string(), "00f067aa0ba902b7");
        assert!(sc.is_remote());
        // Hostile or absent: no parent.
        for bad in [
            serde_json::json!({}),
            serde_json::json!({"_meta": {"traceparent": 5}}),
            serde_json::json!({"_meta": {"traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}),
            serde_json::json!({"_meta": {"traceparent": "garbage\r\nx"}}),
            serde_json::json!({"_meta": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
        ] {
            assert!(parent_from_meta(Some(&bad)).is_none(), "{bad}");
        }
        assert!(parent_from_meta(None).is_none());
    }

    #[test]
    fn session_ids_are_hashed() {
        let h = hashed_session_id("b3f1c0de-secret-session");
        assert_eq!(h.len(), 16);
        assert!(!h.contains("secret"));
        assert_eq!(h, hashed_session_id("b3f1c0de-secret-session"));
        assert_ne!(h, hashed_session_id("other"));
    }
}
