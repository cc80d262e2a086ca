//! Temper's tool hub: the tools an agent already has (upstream MCP servers,
//! the built-in `http_request` and `generate_text`) become tools of the
//! host, usable as compose steps and through `temper mcp` as a gateway.
//!
//! - [`config`]: the tools file (`--tools FILE`).
//! - [`upstream`]: an upstream MCP server, over stdio or Streamable HTTP.
//! - [`builtin`]: the built-in tools `http_request` and `generate_text`.
//! - [`chat`]: the OpenAI-compatible chat-completions client
//!   (`generate_text`'s, and the forge's LLM judge's).
//! - [`hub`]: all of a tools file's sources as one set of tools.
//!
//! The MCP client side is the official Rust SDK, `rmcp` (client and
//! child-process transport only, no default features). Measured on the
//! 2-core build machine: it adds about ten crates (rmcp, process-wrap, nix,
//! sha2 0.11, tokio-stream, ...; chrono and futures were already in the
//! tree) and about 60 s of CPU to a cold release build, rmcp itself ~49 s.
//! Its Streamable HTTP client with the reqwest backend needs reqwest 0.13,
//! a second reqwest next to the workspace's 0.12, so that backend is not
//! enabled: rmcp's `transport-streamable-http-client` (the session logic,
//! without an HTTP backend) runs on the workspace's reqwest 0.12 through
//! rmcp's `StreamableHttpClient` trait (`upstream/http_client.rs`); it adds
//! only `sse-stream` to the tree.

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod builtin;
pub mod chat;
pub mod config;
pub mod hub;
pub mod upstream;

/// Locks a mutex, taking the data of a poisoned one (no invariant here
/// spans a panic).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub use builtin::{Builtin, BuiltinError};
pub use config::{
    GenerateTextConfig, HttpRequestConfig, Secret, ToolSelection, ToolsFile, ToolsFileError,
    Transport, UpstreamConfig,
};
pub use hub::{Hub, HubError, HubTool, UpstreamObserver};
pub use upstream::{
    AskRefused, CallNote, CallOutput, Feature, ListChange, RELAY_QUEUE, Relay, RelayRequests,
    ToolResult, Upstream, UpstreamAsk, UpstreamError, UpstreamTool, template_matches,
    value_of_content,
};
