//! Promotion: a tool the shared engine has run often gets its own compiled
//! snapshot.
//!
//! On the shared engine every instance of a tool first loads its bytecode
//! and runs its module top level (off the request path when an instance is
//! pre-warmed, but on a core all the same). The tool's own component, its
//! artifact, is the shim's snapshot *after* that load, so an instance of it
//! only runs the call: about 9 µs of CPU less per call for a small tool on
//! this project's 2-core machine (`cargo bench --bench foundation`: 42.7k
//! against 53.3k calls/s). Compiling that component costs about half a
//! second of one core (Cranelift; then cached on disk, so a restart pays a
//! few milliseconds to load it), which pays for itself after some 60,000
//! calls — so only tools that prove hot are promoted:
//!
//! - After [`CacheLimits::promote_after_calls`] calls on the shared engine
//!   (0: never), the tool's artifact is rebuilt from its bytecode (the same
//!   deterministic build that made it) and compiled, in the background, one
//!   tool at a time per runtime, and taking at most about a tenth of one
//!   core over time (after a compile of `t`, the next waits `9t`). Calls
//!   meanwhile run on the engine as before.
//! - Once compiled, the tool's calls run on its component: a fresh instance
//!   per call, as every call. The same guest state either way (the
//!   component *is* the snapshot the engine path reproduces per call), so
//!   outputs, errors and limits do not change; [`crate::CallOutput::compiled`]
//!   says which form ran.
//! - The component takes a place in the runtime's bounded cache of compiled
//!   components ([`CacheLimits::compiled_tools`]). When the cache evicts
//!   it, the tool runs on the engine again and counts anew.
//! - A failed promotion (a rebuild or compile error) leaves the tool on the
//!   engine for good, counted in [`crate::CacheStats::promotion_failures`].
//!
//! [`CacheLimits::promote_after_calls`]: crate::CacheLimits::promote_after_calls
//! [`CacheLimits::compiled_tools`]: crate::CacheLimits::compiled_tools

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Instant;

use super::call::Source;
use super::{Compiled, Runtime, Tool, ToolInner, lock};

const COLD: u8 = 0;
const PROMOTING: u8 = 1;
const PROMOTED: u8 = 2;
const FAILED: u8 = 3;

/// How often the shared engine has run a tool, and whether it has its own
/// compiled snapshot.
#[derive(Default)]
pub(super) struct Heat {
    calls: AtomicU64,
    state: AtomicU8,
}

/// A promotion's compile may take at most this share of one core over
/// time: after a compile that took `t`, the next starts no sooner than
/// `t * (1 / DUTY - 1)` later. Promotion turns calls into compile work
/// (1,000 calls of ~40 µs can start ~0.5 s of Cranelift), so without this
/// a client forging and calling many tools could keep a core compiling.
const DUTY: u32 = 10;

/// Promotions made and failed so far ([`crate::CacheStats`]), and when the
/// next may start.
pub(super) struct Promotions {
    /// Whether a promotion is compiling now (one at a time).
    busy: std::sync::atomic::AtomicBool,
    /// When the next promotion may start (see [`DUTY`]).
    next: std::sync::Mutex<Instant>,
    pub(super) made: AtomicU64,
    pub(super) failed: AtomicU64,
}

impl Default for Promotions {
    fn default() -> Self {
        Self {
            busy: Default::default(),
            next: std::sync::Mutex::new(Instant::now()),
            made: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }
}

impl Runtime {
    /// The compiled snapshot `tool` runs on now, if it has been promoted
    /// (and the cache still holds it). Otherwise counts the call and, when
    /// the tool is due, starts its promotion in the background.
    pub(super) fn promoted(&self, tool: &Tool, bytecode: &Arc<Vec<u8>>) -> Option<Arc<Compiled>> {
        let after = self.inner.caches.promote_after_calls;
        let heat = &tool.inner.heat;
        if after == 0 || tool.inner.one_shot {
            return None;
        }
        match heat.state.load(Ordering::Acquire) {
            PROMOTED => {
                let compiled = lock(&self.inner.compiled)
                    .get(&tool.inner.id)
                    .and_then(|cell| cell.get().and_then(|c| c.as_ref().ok().cloned()));
                if compiled.is_none() {
                    // Evicted: back on the engine, counting anew; its
                    // pre-warmed instances of the snapshot go too.
                    self.inner.warm.forget(&tool.inner.id);
                    heat.calls.store(0, Ordering::Relaxed);
                    heat.state.store(COLD, Ordering::Release);
                }
                compiled
            }
            COLD => {
                if heat.calls.fetch_add(1, Ordering::Relaxed) + 1 >= after {
                    self.start_promotion(tool, bytecode);
                }
                None
            }
            _ => None,
        }
    }

    /// Starts compiling `tool`'s own snapshot, unless another promotion is
    /// compiling (the next call tries again) or there is no tokio runtime.
    fn start_promotion(&self, tool: &Tool, bytecode: &Arc<Vec<u8>>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let promotions = &self.inner.promotions;
        // Every call of a due tool comes here until its promotion starts:
        // an atomic read first, the clock and the lock only when free.
        if promotions.busy.load(Ordering::Relaxed)
            || Instant::now() < *lock(&promotions.next)
            || promotions
                .busy
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let heat = &tool.inner.heat;
        if heat
            .state
            .compare_exchange(COLD, PROMOTING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            promotions.busy.store(false, Ordering::Release);
            return;
        }
        let rt = self.clone();
        let inner: Arc<ToolInner> = tool.inner.clone();
        let (key, grants) = (tool.warm_key(), tool.grants);
        let bytecode = bytecode.clone();
        handle.spawn(async move {
            let promotions = &rt.inner.promotions;
            let started = Instant::now();
            let compiled = rt.compile_promoted(&inner.id, &bytecode).await;
            let took = started.elapsed();
            *lock(&promotions.next) = Instant::now() + took * (DUTY - 1);
            let state = match compiled {
                Ok(compiled) => {
                    promotions.made.fetch_add(1, Ordering::Relaxed);
                    // Its engine instances will not be called any more;
                    // instances of the snapshot are made at once.
                    rt.inner.warm.forget(&inner.id);
                    rt.refill(key, Source::Promoted(compiled), grants);
                    PROMOTED
                }
                Err(_) => {
                    promotions.failed.fetch_add(1, Ordering::Relaxed);
                    FAILED
                }
            };
            inner.heat.state.store(state, Ordering::Release);
            promotions.busy.store(false, Ordering::Release);
        });
    }

    /// Rebuilds the artifact `id` from its bytecode and compiles it into the
    /// cache of compiled components.
    async fn compile_promoted(
        &self,
        id: &Arc<str>,
        bytecode: &[u8],
    ) -> Result<Arc<Compiled>, String> {
        let artifact = self
            .artifact_from_bytecode(bytecode.to_vec())
            .await
            .map_err(|e| e.to_string())?;
        self.compiled(id, &artifact.bytes)
            .await
            .map_err(|e| e.to_string())
    }
}
