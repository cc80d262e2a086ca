//! Observability for Temper: Prometheus metrics for every call and forge
//! ([`Metrics`]), served on their own listener ([`serve`]).
//!
//! **`prometheus-client`, not the OpenTelemetry Prometheus exporter.** A
//! counter here is an atomic add and a histogram a short mutex; the
//! OpenTelemetry SDK's metrics pipeline hashes an attribute set per
//! measurement and brings the SDK and the `prometheus` crate (protobuf)
//! into every build. Calls record through per-tool handles
//! ([`ToolMetrics`]) looked up once per call, so metrics on cost well under
//! the 1 µs per call budget (see `benches/observe.rs` in `temper-cli`), and
//! metrics off is an `Option` that is `None`.
//!
//! - [`metrics`]: the families, their fixed names and bounded labels.
//! - [`kinds`]: the label values (error kinds, tiers).
//! - [`serve`]: `GET /metrics`, loopback or token-protected.
//! - [`trace`]: OTLP/HTTP export of the spans, `traceparent` parents,
//!   the semantic-convention names.

// Libraries report through `tracing`, never by printing.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod kinds;
pub mod metrics;
pub mod serve;
pub mod trace;

pub use kinds::{ErrorKind, Tier};
pub use metrics::{
    DEFAULT_MAX_TOOLS, Metrics, OTHER_TOOL, Sampler, ToolMetrics, capability_label,
    mcp_method_label,
};
pub use serve::{MetricsServeError, MetricsServer, ScrapeToken};
