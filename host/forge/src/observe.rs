//! The forge's metrics (`temper-observe`), off unless
//! [`Forge::set_metrics`] was called: every top-level call by tool, tier,
//! outcome and error kind with its latency ([`Forge::invoke`], hub tools
//! in [`Forge::call_native`]), forges by outcome and stage, refused
//! capabilities (through the runtime's observer), and at scrape time the
//! pool's instances and the caches' entries.
//!
//! [`Forge::call_native`]: crate::Forge::call_native

use std::sync::{Arc, Weak};
use std::time::Duration;

use temper_observe::{ErrorKind, Metrics};
use temper_runtime::error::RunError;
use temper_runtime::runtime::RuntimeObserver;
use temper_store::Tier;

use super::error::{ForgeError, InvokeError, Stage};
use super::{Forge, Inner, lock};

/// The metric kind of a runtime error.
pub fn run_error_kind(e: &RunError) -> ErrorKind {
    match e {
        RunError::BadInput { .. } => ErrorKind::BadInput,
        RunError::Js { .. } => ErrorKind::Js,
        RunError::Timeout { .. } => ErrorKind::Timeout,
        RunError::Memory { .. } => ErrorKind::Memory,
        RunError::OutputTooLarge { .. } => ErrorKind::OutputTooLarge,
        RunError::CapabilityDenied { .. } => ErrorKind::CapabilityDenied,
        RunError::BadOutput { .. } => ErrorKind::BadOutput,
        RunError::Trap { .. } => ErrorKind::Trap,
        RunError::Step { .. } | RunError::ToolCall { .. } => ErrorKind::Callee,
        RunError::Instantiate { .. } | RunError::Internal { .. } => ErrorKind::Internal,
    }
}

/// The metric kind of a failed call; `None` for a name that is no tool
/// (not counted: a caller could otherwise fill the `tool` label).
pub fn invoke_error_kind(e: &InvokeError) -> Option<ErrorKind> {
    Some(match e {
        InvokeError::NotFound { .. } => return None,
        InvokeError::Busy(_) => ErrorKind::Busy,
        InvokeError::Input { .. } => ErrorKind::BadInput,
        InvokeError::Output { .. } => ErrorKind::BadOutput,
        InvokeError::Run { failure, .. } => run_error_kind(&failure.error),
        InvokeError::Capability { .. } | InvokeError::Grant { .. } => ErrorKind::CapabilityDenied,
        InvokeError::Load { .. } | InvokeError::Store(_) => ErrorKind::Internal,
    })
}

/// The `tier` label of a registry tier.
pub fn tier_label(tier: Tier) -> temper_observe::Tier {
    match tier {
        Tier::Session => temper_observe::Tier::Session,
        Tier::Agent => temper_observe::Tier::Agent,
        Tier::Shared => temper_observe::Tier::Shared,
    }
}

/// Counts the runtime's refused capabilities.
struct Denials(Arc<Metrics>);

impl RuntimeObserver for Denials {
    fn capability_denied(&self, capability: &str) {
        self.0.capability_denied(capability);
    }
}

impl Forge {
    /// Records this forge's calls and forges, and its runtime's refused
    /// capabilities, in `metrics`; its pool and caches are read at each
    /// scrape. Once: `false` when metrics were set before.
    pub fn set_metrics(&self, metrics: Arc<Metrics>) -> bool {
        if self.inner.metrics.set(metrics.clone()).is_err() {
            return false;
        }
        self.inner
            .runtime
            .set_observer(Arc::new(Denials(metrics.clone())));
        if let Some(hub) = lock(&self.inner.hub).clone() {
            self.observe_hub(&hub);
        }
        // Weak: the metrics outlive no forge through their sampler.
        let inner: Weak<Inner> = Arc::downgrade(&self.inner);
        metrics.add_sampler(Box::new(move |m| {
            if let Some(inner) = inner.upgrade() {
                sample(&inner, m);
            }
        }));
        true
    }

    /// The metrics set with [`Forge::set_metrics`].
    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.inner.metrics.get()
    }

    /// Counts `hub`'s upstream calls, when metrics are on.
    pub(super) fn observe_hub(&self, hub: &temper_hub::Hub) {
        if let Some(m) = self.inner.metrics.get() {
            let m = m.clone();
            hub.set_observer(Arc::new(move |upstream, ok| m.upstream_call(upstream, ok)));
        }
    }

    /// Counts a forge that ended `outcome` after `elapsed`.
    pub(super) fn observe_forge<T>(&self, outcome: &Result<T, ForgeError>, elapsed: Duration) {
        if let Some(m) = self.inner.metrics.get() {
            m.record_forge(outcome.as_ref().err().map(|e| e.stage().as_str()), elapsed);
        }
    }
}

/// The `execute_tool {tool}` span of one call (OpenTelemetry GenAI
/// conventions: `gen_ai.operation.name`, `gen_ai.tool.name`), with
/// `temper.tool.id`, `temper.tier` and `error.type` recorded as they are
/// known. Disabled (free) unless a subscriber exports spans. Never the
/// input or output.
pub(super) fn execute_tool_span(tool: &str) -> tracing::Span {
    let span = tracing::info_span!(
        target: "temper_forge::trace",
        "execute_tool",
        otel.name = tracing::field::Empty,
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tracing::field::Empty,
        temper.tool.id = tracing::field::Empty,
        temper.tier = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    named(span, || format!("execute_tool {tool}"), tool)
}

/// Records `span`'s name and tool when it is enabled: formatted only then
/// (a disabled span's fields can still be evaluated, e.g. for the `log`
/// fallback when no subscriber is installed).
fn named(span: tracing::Span, name: impl FnOnce() -> String, tool: &str) -> tracing::Span {
    if !span.is_disabled() {
        span.record("otel.name", name().as_str());
        span.record("gen_ai.tool.name", tool);
    }
    span
}

/// Records where the current call's tool was found.
pub(super) fn record_target(tier: Tier, artifact: &str) {
    let span = tracing::Span::current();
    if !span.is_disabled() {
        span.record("temper.tier", tier.as_str());
        span.record("temper.tool.id", artifact);
    }
}

/// Records a failed call's kind (`error.type`) on `span`.
pub(super) fn record_error(span: &tracing::Span, kind: &str) {
    if !span.is_disabled() {
        span.record("error.type", kind);
        span.record("otel.status_code", "error");
    }
}

/// The span of a call a tool makes: a compose step (`compose_step`) or a
/// code-mode callee (`code_mode_call`), named after the called tool.
pub(super) fn callee_span(kind: &'static str, tool: &str) -> tracing::Span {
    let span = tracing::info_span!(
        target: "temper_forge::trace",
        "callee",
        otel.name = tracing::field::Empty,
        otel.kind = "internal",
        gen_ai.tool.name = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    named(span, || format!("{kind} {tool}"), tool)
}

/// The `forge {name}` span; each stage is a child ([`stage_span`]).
pub(super) fn forge_span(name: &str) -> tracing::Span {
    let span = tracing::info_span!(
        target: "temper_forge::trace",
        "forge",
        otel.name = tracing::field::Empty,
        otel.kind = "internal",
        temper.forge.name = tracing::field::Empty,
        temper.forge.stage = tracing::field::Empty,
        error.type = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("forge {name}").as_str());
        span.record("temper.forge.name", name);
    }
    span
}

/// A stage of the forge `parent`: open from the stage's start until the
/// next stage starts or the forge ends.
pub(super) fn stage_span(parent: &tracing::Span, stage: Stage) -> tracing::Span {
    let span = tracing::info_span!(
        target: "temper_forge::trace",
        parent: parent,
        "forge_stage",
        otel.name = tracing::field::Empty,
        otel.kind = "internal",
        temper.forge.stage = stage.as_str(),
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("forge.{stage}").as_str());
    }
    span
}

/// The gauges read at scrape time.
fn sample(inner: &Inner, m: &Metrics) {
    let pool = inner.runtime.pool_stats();
    m.set_pool("warm", pool.warm);
    m.set_pool("live", pool.live);
    let rt = inner.runtime.cache_stats();
    m.set_cache("compiled_tools", rt.compiled_tools);
    m.set_cache("bytecode_records", rt.bytecode_records);
    m.set_cache("warm_tools", rt.warm_tools);
    m.set_cache("loaded_tools", inner.cache.tools.len());
    m.set_cache("compose_adapters", inner.cache.compose.len());
    m.set_cache("step_manifests", inner.cache.manifests.len());
    m.set_cache("schemas", inner.cache.schemas.len());
    m.set_cache("names", inner.names.len());
    m.set_cache("session_tiers", inner.sessions.len());
}

#[cfg(test)]
mod tests {
    use super::*;
    use temper_runtime::runtime::CallFailure;

    fn run(error: RunError) -> InvokeError {
        InvokeError::Run {
            tool: "t".into(),
            failure: CallFailure {
                error,
                logs: Vec::new(),
            },
        }
    }

    #[test]
    fn every_run_error_has_its_kind() {
        let js = temper_runtime::JsLocation {
            message: "Error: boom".into(),
            line: Some(1),
            column: Some(1),
            stack: None,
        };
        let cases = [
            (RunError::Timeout { limit_ms: 5 }, "timeout"),
            (
                RunError::Memory {
                    limit_bytes: 1,
                    detail: "x".into(),
                },
                "memory",
            ),
            (
                RunError::OutputTooLarge {
                    actual_bytes: 2,
                    limit_bytes: 1,
                },
                "output_too_large",
            ),
            (
                RunError::CapabilityDenied {
                    capability: "fetch".into(),
                },
                "capability_denied",
            ),
            (
                RunError::BadInput {
                    message: "x".into(),
                },
                "bad_input",
            ),
            (
                RunError::BadOutput {
                    returned: "undefined".into(),
                },
                "bad_output",
            ),
            (RunError::Js { error: js }, "js"),
            (
                RunError::Trap {
                    message: "unreachable".into(),
                },
                "trap",
            ),
            (
                RunError::ToolCall {
                    tool: "b".into(),
                    message: "x".into(),
                },
                "callee",
            ),
            (
                RunError::Instantiate {
                    message: "x".into(),
                },
                "internal",
            ),
        ];
        for (error, kind) in cases {
            assert_eq!(run_error_kind(&error).as_str(), kind, "{error}");
            assert_eq!(
                invoke_error_kind(&run(error)).map(|k| k.as_str()),
                Some(kind)
            );
        }
    }

    #[test]
    fn invoke_errors_outside_the_run_have_their_kinds() {
        let busy = InvokeError::Busy(crate::error::Busy {
            what: "calls",
            in_flight: 1,
            queued: 0,
        });
        assert_eq!(invoke_error_kind(&busy), Some(ErrorKind::Busy));
        let input = InvokeError::Input {
            tool: "t".into(),
            message: "x".into(),
        };
        assert_eq!(invoke_error_kind(&input), Some(ErrorKind::BadInput));
        let load = InvokeError::Load {
            tool: "t".into(),
            message: "x".into(),
        };
        assert_eq!(invoke_error_kind(&load), Some(ErrorKind::Internal));
        // A name that is no tool is not counted at all.
        let missing = InvokeError::NotFound {
            name: "nope".into(),
            agent: "a".into(),
            session: "s".into(),
        };
        assert_eq!(invoke_error_kind(&missing), None);
    }
}
