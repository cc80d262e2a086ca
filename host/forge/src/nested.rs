//! Counting nested calls of session tools: a session tool called as a
//! compose step, from another tool's code (`tool:NAME`) or from a
//! `run_code` body runs through [`Forge::call_artifact`], which knows no
//! caller; the top-level call ([`Forge::invoke`], [`Forge::run_code`])
//! sets its caller for the task it runs in ([`with_caller`]), and the
//! nested call sites count a use of the caller's session tool whose
//! artifact they ran ([`Forge::count_nested`]), so promotion's
//! `promotionThreshold.uses` sees uses through compose and code mode too.
//! A nested call runs in its top-level call's task (wasmtime host calls
//! are awaited in place), so the caller is always set there.
//!
//! [`Forge::call_artifact`]: super::Forge::call_artifact
//! [`Forge::invoke`]: super::Forge::invoke
//! [`Forge::run_code`]: super::Forge::run_code

use std::future::Future;
use std::time::Duration;

use super::{Forge, ForgeContext};
use temper_store::ArtifactId;

tokio::task_local! {
    /// The agent and session of the top-level call running in this task.
    static CALLER: ForgeContext;
}

/// Runs `f` with `ctx` as the caller its nested calls are counted for.
pub(super) async fn with_caller<F: Future>(ctx: &ForgeContext, f: F) -> F::Output {
    CALLER.scope(ctx.clone(), f).await
}

impl Forge {
    /// Counts one nested call of the tool `name` (artifact `id`) as a use
    /// of the caller's session tool of that name, when the caller's
    /// session holds it with that very artifact (an agent-tier or shared
    /// tool, or another session's, is not counted here). Counted in
    /// memory and written behind, as a direct call is.
    pub(super) fn count_nested(&self, name: &str, id: &ArtifactId, ok: bool, took: Duration) {
        let _ = CALLER.try_with(|ctx| {
            // The tier as cached while current; without a registry watch
            // (no lease), as this host read it for the call moments ago,
            // if nothing changed it since.
            let tier = self.cached_session(ctx).or_else(|| {
                let epoch = self
                    .inner
                    .store
                    .session_epoch(&ctx.agent_id, &ctx.session_id);
                self.inner
                    .sessions
                    .get(&ctx.agent_id, &ctx.session_id, epoch)
            });
            let Some(tier) = tier else {
                return;
            };
            if tier.get(name).is_none_or(|t| &t.artifact != id) {
                return;
            }
            let latency_us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
            if let Err(e) = self.inner.store.record_session_invocation(
                &ctx.agent_id,
                &ctx.session_id,
                name,
                ok,
                latency_us,
            ) {
                tracing::warn!(tool = %name, error = %e, "a nested call of a session tool was not counted");
            }
        });
    }
}
