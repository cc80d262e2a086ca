//! An MCP (Model Context Protocol) server: any MCP client can forge tools
//! with `forge_tool` and call the tools it forged, with the engine's
//! validation, tests, judge, grants and limits. Two transports: stdio
//! (`temper mcp`) and Streamable HTTP with bearer tokens (`temper mcp
//! --http ADDR --tokens FILE`).
//!
//! **Transports: our own JSON-RPC 2.0 layer on `serde_json`, and hyper for
//! HTTP, not the official Rust SDK `rmcp`.** `rmcp` (3.11) builds with our
//! toolchain, but its stdio transport drops lines that are not JSON without
//! an answer and discards oversized lines silently, where Temper answers
//! both (`-32700` with id `null`, and an error for messages over
//! [`jsonrpc::MAX_MESSAGE_BYTES`]). Its Streamable HTTP server would need
//! every method written a second time against its handler model (two
//! implementations of the same five methods), and it has no notion of an
//! authenticated caller: binding a session to the token that opened it,
//! per-token quotas and concurrency caps, and discarding the session tier
//! when a session ends would all be layers around it that parse its
//! traffic. [`http`] is one module on hyper (already in the tree through
//! reqwest) sharing [`handler`] with stdio.
//!
//! - [`jsonrpc`]: framing (newline-delimited, size-capped), message
//!   classification, error codes.
//! - [`protocol`]: the revisions (legacy handshake and 2026-07-28
//!   per-request `_meta`), the `dev.temper/session` mapping, and the typed
//!   results and notifications.
//! - [`tools`]: the meta-tool definitions, registered tools as MCP tools,
//!   `tools/call` results.
//! - [`access`]: the tiers a caller may use.
//! - [`handler`]: the methods (legacy: `initialize`, `ping`,
//!   `logging/setLevel`, `tools/list`, `tools/call`; 2026-07-28:
//!   `server/discover`, `tools/list`, `tools/call`; both: the hub
//!   upstreams' `resources/*`, `prompts/*` and `completion/complete`) for
//!   one caller, transport-independent; what an upstream sends during a
//!   hub call is relayed by its `hub_relay` module.
//! - [`server`]: the stdio connection (both eras; `subscriptions/listen`).
//! - [`http`]: Streamable HTTP: sessions, SSE, authentication, limits; the
//!   2026-07-28 headers, sessions and `subscriptions/listen` streams.
//! - [`tokens`]: the tokens file.
//! - [`auth`]: OAuth 2.1 resource-server authentication (bearer JWTs,
//!   RFC 9728 metadata).
//! - [`watch`]: registry changes made by other processes sharing the store,
//!   read from the audit trail, for `notifications/tools/list_changed`.

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod access;
pub mod auth;
pub mod handler;
pub mod http;
mod inline;
pub mod jsonrpc;
mod observe;
pub mod protocol;
pub mod server;
pub mod tokens;
pub mod tool_quotas;
pub mod tools;
mod trace;
pub mod watch;

pub use access::Access;
pub use handler::{Handler, Notifier, SUPPORTED_PROTOCOL_VERSIONS, negotiate_version};
pub use http::{HttpConfig, HttpError, HttpServer};
pub use server::{McpError, TIMING_TARGET, connection_context, serve, serve_stdio};
pub use watch::{Changes, DEFAULT_POLL, RegistryWatch};
