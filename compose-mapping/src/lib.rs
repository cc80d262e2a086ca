//! Temper's compose mode, the pure part: parsing a compose request's steps
//! ([`spec`]), the `inputMapping` expression language ([`expr`]), compiling
//! and evaluating mappings ([`mapping`]) and cycle checks between compose
//! tools ([`deps`]).
//!
//! Plain data in, plain data out (`serde_json` values, no I/O), so the same
//! code runs in the host (forge-time checks, re-exported as
//! `temper::compose`, which documents the rules with examples) and inside
//! the compose core, the wasm component that runs a compose tool's
//! pipeline (`components/compose-core`).

pub mod deps;
pub mod expr;
pub mod mapping;
pub mod spec;
