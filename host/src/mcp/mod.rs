//! An MCP (Model Context Protocol) server over stdio: any MCP client can
//! forge tools with `forge_tool` and call the tools it forged, with the
//! engine's validation, tests, judge, grants and limits (`temper mcp`).
//!
//! **Transport: our own JSON-RPC 2.0 layer on `serde_json`, not the official
//! Rust SDK `rmcp`.** `rmcp` 3.9 builds with our toolchain (rustc 1.95), but its stdio
//! transport deliberately drops lines that are not JSON without an answer
//! and discards oversized lines silently, where Temper answers both
//! (`-32700` with id `null`, and an error for messages over
//! [`jsonrpc::MAX_MESSAGE_BYTES`]); it would also add about twenty crates
//! (schemars, darling, chrono, uuid, a second sha2/digest generation, ...)
//! for the five methods this server needs.
//!
//! - [`jsonrpc`]: framing (newline-delimited, size-capped), message
//!   classification, error codes.
//! - [`tools`]: the `forge_tool` definition and schema, registered tools as
//!   MCP tools, `tools/call` results.
//! - [`server`]: the connection: `initialize` (version negotiation), `ping`,
//!   `tools/list`, `tools/call`, `notifications/tools/list_changed` after a
//!   forge, progress notifications, the connection's session tier.

pub mod jsonrpc;
pub mod server;
pub mod tools;

pub use server::{
    McpError, SUPPORTED_PROTOCOL_VERSIONS, connection_context, negotiate_version, serve,
    serve_stdio,
};
