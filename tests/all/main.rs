//! Temper's integration tests, one binary (as wasmtime's `tests/all`): the
//! CLI, the library through the `temper` facade, real servers on
//! 127.0.0.1, and the official MCP SDK clients. One module per area.

mod support;

mod agentos_package;
mod artifacts;
mod bounds;
mod bundle;
mod callpath;
mod capabilities;
mod code_mode;
mod compose;
mod discovery;
mod forge;
mod forge_requests;
mod foundation;
mod hardening;
mod hub;
mod hub_builtin;
mod hub_grants;
mod hub_http;
mod hub_list_changed;
mod hub_raw;
mod hub_reference;
mod hub_relay;
mod hub_shadow;
mod hub_side_effects;
mod hub_tokens;
mod import_cap;
mod interop;
mod mcp;
mod mcp_http;
mod mcp_inline;
mod mcp_jwt;
mod mcp_modern;
mod mcp_principals;
mod mcp_refusals;
mod multihost;
mod names;
mod observe;
mod oci;
mod offline;
mod properties;
mod scale_out;
mod signing;
