//! The span of each MCP request (OpenTelemetry MCP semantic conventions):
//! named `{method} {tool}` for `tools/call` (else `{method}`), with
//! `mcp.method.name`, `mcp.session.id` (hashed: on HTTP the id authorizes
//! the session's requests), `mcp.protocol.version` where the request says
//! it, and `jsonrpc.request.id`. A `traceparent` in `params._meta` (any
//! protocol revision) is its parent, and is logged. Tool inputs and
//! outputs are never attributes. Disabled, and free, unless the binary
//! exports traces (`temper_observe::trace`).

use serde_json::Value;
use temper_observe::trace::{hashed_session_id, set_parent};

/// Where the 2026-07-28 revision puts the protocol version of a request.
const VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// The span of request `id` (`method`, `params`) in session `session`,
/// parented on the request's `traceparent`.
pub(crate) fn request_span(
    session: &str,
    id: &Value,
    method: &str,
    params: Option<&Value>,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: "temper_mcp::trace",
        "mcp_request",
        otel.name = tracing::field::Empty,
        otel.kind = "server",
        mcp.method.name = tracing::field::Empty,
        mcp.session.id = tracing::field::Empty,
        mcp.protocol.version = tracing::field::Empty,
        jsonrpc.request.id = tracing::field::Empty,
        gen_ai.tool.name = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    // Everything is formatted only when the span is enabled.
    if span.is_disabled() {
        return span;
    }
    let tool = (method == "tools/call")
        .then(|| params.and_then(|p| p.get("name")).and_then(Value::as_str))
        .flatten();
    let name = match tool {
        Some(tool) => format!("{method} {tool}"),
        None => method.to_string(),
    };
    span.record("otel.name", name.as_str());
    span.record("mcp.method.name", method);
    span.record("mcp.session.id", hashed_session_id(session).as_str());
    span.record("jsonrpc.request.id", id.to_string().as_str());
    if let Some(tool) = tool {
        span.record("gen_ai.tool.name", tool);
    }
    let version = params.and_then(|p| {
        p.pointer("/_meta")
            .and_then(|m| m.get(VERSION_META_KEY))
            .or_else(|| {
                (method == "initialize")
                    .then(|| p.get("protocolVersion"))
                    .flatten()
            })
            .and_then(Value::as_str)
    });
    if let Some(version) = version {
        span.record("mcp.protocol.version", version);
    }
    if let Some(traceparent) = set_parent(&span, params) {
        tracing::info!(target: "temper_mcp", "request {id} ({method}) continues trace {traceparent}");
    }
    span
}

/// Marks `span` failed with the JSON-RPC error `code`.
pub(crate) fn record_rpc_error(span: &tracing::Span, code: i64) {
    if !span.is_disabled() {
        span.record("error.type", code);
        span.record("otel.status_code", "error");
    }
}
