//! Temper: a WebAssembly component-model host for forged tools, all of it
//! under one name.
//!
//! This crate only re-exports the layers, each its own crate, so that a
//! module has the same path here as in the crate that holds it:
//!
//! | path | crate | holds |
//! |---|---|---|
//! | [`policy`] | `temper-policy` | host policy, domain rules, IP checks |
//! | [`runtime`], [`artifact`], [`capabilities`], … | `temper-runtime` | engine, shim, runtime, capabilities, artifacts |
//! | [`compose`] | `temper-compose` | pipelines as generated adapter components |
//! | [`store`] | `temper-store` | registry, backends, audit, stats |
//! | [`forge`], [`testcase`], [`verify`] | `temper-forge` | the forge pipeline, tiers, invoke, transfer |
//! | [`mcp`] | `temper-mcp` | the MCP server |
//! | [`oci`] | `temper-oci` | OCI distribution |
//! | [`sign`] | `temper-sign` | signatures, keys, the trust policy |
//! | [`observe`] | `temper-observe` | Prometheus metrics, the `/metrics` listener |
//!
//! An embedder who wants only the sandbox depends on `temper-runtime`
//! (no SQLite, PostgreSQL, HTTP server, OCI client or CLI parser).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = temper::Runtime::builder().build()?;
//! let artifact = runtime
//!     .build("function execute(input) { return { sum: input.a + input.b }; }")
//!     .await?;
//! let tool = runtime.tool(&artifact);
//! let out = runtime.call(&tool, r#"{"a": 2, "b": 3}"#).await?;
//! assert_eq!(out.output, r#"{"sum":5}"#);
//! # Ok(()) }
//! ```

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub use temper_compose as compose;
pub use temper_forge as forge;
pub use temper_forge::{testcase, verify};
/// The tool hub: the tools file, upstream MCP servers, built-in tools.
pub use temper_hub as hub;
pub use temper_mcp as mcp;
/// Prometheus metrics and the `/metrics` listener.
pub use temper_observe as observe;
pub use temper_oci as oci;
pub use temper_policy as policy;
pub use temper_runtime::{
    artifact, canonical_json, capabilities, engine, error, fsutil, host_state, id, limits, request,
    runtime, shim, static_check,
};
pub use temper_sign as sign;
pub use temper_store as store;

pub use temper_runtime::{
    Artifact, ArtifactId, BuildError, CallFailure, CallOutput, JsLocation, Limits, LoadError,
    LogLine, RunError, Runtime, RuntimeBuilder, Tool,
};
