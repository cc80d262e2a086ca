//! What the runtime tells an embedder that watches it (metrics): refused
//! capabilities as they happen, and the pool's instances when asked. The
//! runtime depends on no metrics library: the embedder implements
//! [`RuntimeObserver`] (`temper-observe` counts into Prometheus).

use std::sync::Arc;

use super::{Runtime, RuntimeInner};

/// Receives the runtime's events. Called on the call's thread: keep it
/// cheap (an atomic add).
pub trait RuntimeObserver: Send + Sync {
    /// A call used `capability` (`fetch`, `fs.readFile`, `crypto`,
    /// `tool:NAME`) without the grant.
    fn capability_denied(&self, capability: &str);
}

/// The pool's instances now ([`Runtime::pool_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Pre-warmed instances waiting for a call.
    pub warm: usize,
    /// Instances in the pooling allocator besides those: running a call, or
    /// used and on their way to the reaper.
    pub live: usize,
}

impl Runtime {
    /// Sends this runtime's events to `observer` (once: a second observer
    /// is ignored and `false` returned).
    pub fn set_observer(&self, observer: Arc<dyn RuntimeObserver>) -> bool {
        self.inner.observer.set(observer).is_ok()
    }

    /// The pool's instances now: read from the pooling allocator's own
    /// counts, nothing kept on the call path.
    pub fn pool_stats(&self) -> PoolStats {
        let (_, warm, _, _) = self.inner.warm.stats();
        let allocated = self
            .inner
            .engine
            .engine()
            .pooling_allocator_metrics()
            .map_or(0, |m| m.component_instances() as usize);
        PoolStats {
            warm,
            live: allocated.saturating_sub(warm),
        }
    }
}

impl RuntimeInner {
    /// Tells the observer, if any, of a refused capability.
    pub(super) fn observe_denial(&self, error: &crate::error::RunError) {
        if let crate::error::RunError::CapabilityDenied { capability } = error
            && let Some(observer) = self.observer.get()
        {
            observer.capability_denied(capability);
        }
    }
}
