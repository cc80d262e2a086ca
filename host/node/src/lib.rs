//! The native addon of the `temper-forge` npm package (napi-rs 3): a thin
//! translation over `temper-forge` and `temper-runtime` through
//! `temper-embed`, with the CLI's ids and defaults.
//!
//! - [`forge::Forge`]: `Forge.open(options)`, `forge`, `call`, `tools`,
//!   `runCode`, `promote`, AgentOS package import and export.
//! - [`runtime::Runtime`]: code run without a registry, with a bounded
//!   cache of built tools by the content hash of code and allowlist (what
//!   `temper-forge/agentos`'s `TemperSandboxForge` runs on).
//!
//! Every call is an `async` method: napi-rs runs it on its tokio runtime,
//! so a guest never runs on the JS thread and a call never blocks the
//! event loop. Values cross as JSON. A failure rejects with an error whose
//! message is a JSON report (`code`, `message` and the kind's fields);
//! `index.cjs` turns it into an `Error` with those properties
//! ([`errors`]). Calls take a cancel id that `index.cjs` ties to an
//! `AbortSignal` ([`cancel`]).
//!
//! The addon keeps the system allocator: mimalloc (the `temper` binary's)
//! uses initial-exec thread-local storage, which a library loaded with
//! `dlopen` cannot get ("cannot allocate memory in static TLS block"), and
//! its `local_dynamic_tls` feature would unify into the binary's build.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod cancel;
pub mod errors;
pub mod forge;
pub mod pump;
pub mod runtime;
