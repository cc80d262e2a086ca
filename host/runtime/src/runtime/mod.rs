//! The runtime: builds JS tools into component artifacts and runs tools,
//! each call in a fresh instance under hard limits.
//!
//! Two ways to run a tool, the same guest code and state either way:
//! - **engine** (every JS tool this host built, or whose bytecode it
//!   recorded): one *shared engine* — the shim with the prelude already
//!   evaluated, snapshotted and Cranelift-compiled once per shim version
//!   (cached on disk) — is instantiated per call from an `InstancePre`
//!   (copy-on-write memory image), the tool's bytecode is loaded into it
//!   (its module top level runs under the build's fixed clocks, as in the
//!   build's snapshot), then `execute` runs. No per-tool component is ever
//!   compiled: a tool costs its bytecode. For hot tools a few such instances
//!   are made ahead of time, off the request path (`crate::pool`), so a
//!   call only runs `execute`; each is used once and dropped.
//! - **compiled**: an artifact the engine cannot run (built elsewhere, or a
//!   Rust/Python tool) is compiled by Cranelift (cached on disk) and
//!   instantiated per call; compiled components are kept in a bounded LRU.
//!
//! Either way every call starts from a state no earlier call touched: a
//! fresh store and instance per call, never reused, so a trap cannot poison
//! anything shared.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use hashlink::LruCache;

use serde::Serialize;
use tokio::sync::OnceCell;
use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};
use wasmtime_wizer::{ComponentContext, Wizer};

use crate::bindings::{JsShim, RunIndices, ShimIndices, ToolError};
use crate::capabilities::cassette::Cassette;
use crate::capabilities::fetch::{FetchTransport, TransportOptions};
use crate::capabilities::tool_calls::{self, CallContext, ToolCaller, ToolCalls};
use crate::engine::{EngineOptions, TemperEngine};
use crate::error::{BuildError, JsLocation, LoadError, RunError};
use crate::host_state::Granted;
use crate::host_state::{Clocks, HostState, LogLine};
use crate::limits::{CacheLimits, Limits};
use crate::pool::{WarmKey, WarmPool};
use temper_policy::{Capability, Grants, HostPolicy, PolicyError};

mod admission;
mod build;
mod call;
mod compact;
mod load;
mod observer;
mod promote;
mod reaper;
mod shared;

pub use admission::ArtifactAdmission;
use call::describe_trap;
pub use call::{CallOutcome, arm_deadline, deliver, instantiate_failed, settle};
pub use compact::{ArtifactCodec, CompactError};
pub use observer::{PoolStats, RuntimeObserver};
use reaper::Reaper;
pub use reaper::RetireAfter;

/// The export every tool provides.
pub const RUN_EXPORT: &str = "temper:tool/run@0.1.0";

/// Interfaces a tool may import: the `tool` world's own, and the WASI
/// interfaces the host provides locked down (no sockets, no HTTP).
pub const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "temper:tool/types@0.1.",
    "temper:tool/log@0.1.",
    "temper:tool/fetch@0.1.",
    "temper:tool/crypto@0.1.",
    "temper:tool/tools@0.1.",
    "wasi:cli/environment@0.2.",
    "wasi:cli/exit@0.2.",
    "wasi:cli/stdin@0.2.",
    "wasi:cli/stdout@0.2.",
    "wasi:cli/stderr@0.2.",
    "wasi:cli/terminal-input@0.2.",
    "wasi:cli/terminal-output@0.2.",
    "wasi:cli/terminal-stdin@0.2.",
    "wasi:cli/terminal-stdout@0.2.",
    "wasi:cli/terminal-stderr@0.2.",
    "wasi:io/error@0.2.",
    "wasi:io/poll@0.2.",
    "wasi:io/streams@0.2.",
    "wasi:clocks/wall-clock@0.2.",
    "wasi:clocks/monotonic-clock@0.2.",
    "wasi:random/random@0.2.",
    "wasi:random/insecure@0.2.",
    "wasi:random/insecure-seed@0.2.",
    "wasi:filesystem/types@0.2.",
    "wasi:filesystem/preopens@0.2.",
];

/// Largest JS source the build accepts.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;

/// A built tool: the component artifact and what produced it.
#[derive(Clone)]
pub struct Artifact {
    /// The component's bytes (self-contained: shim + snapshot of the tool).
    pub bytes: Arc<Vec<u8>>,
    /// blake3 of `bytes`, hex.
    pub id: String,
    /// The tool's QuickJS bytecode: what the shared engine runs.
    pub bytecode: Arc<Vec<u8>>,
}

/// What a successful call returns.
#[derive(Debug, Clone, Serialize)]
pub struct CallOutput {
    /// The tool's result as JSON text.
    pub output: String,
    /// Console lines the tool printed.
    pub logs: Vec<LogLine>,
    /// Whether the call ran on the tool's own compiled component (`false`:
    /// on the shared engine).
    pub compiled: bool,
}

/// A failed call: the error, plus the console lines printed before it.
#[derive(Debug, Clone, thiserror::Error, Serialize)]
#[error("{error}")]
pub struct CallFailure {
    /// What went wrong.
    #[source]
    pub error: RunError,
    /// Console lines printed before the failure.
    pub logs: Vec<LogLine>,
}

/// A tool ready to call. Cheap to clone.
#[derive(Clone)]
pub struct Tool {
    inner: Arc<ToolInner>,
    grants: Grants,
    /// The tools it may call (`tool:NAME` grants) and who runs them.
    calls: ToolCalls,
}

struct ToolInner {
    /// blake3 of the artifact, hex.
    id: Arc<str>,
    form: ToolForm,
    /// Run once and dropped (a code-mode run): no instances are pre-warmed
    /// for it.
    one_shot: bool,
    /// Its calls on the shared engine, and whether it has been promoted to
    /// its own compiled snapshot (`promote`).
    heat: promote::Heat,
}

/// What a tool is run from.
enum ToolForm {
    /// Its QuickJS bytecode, on the shared engine.
    Engine { bytecode: Arc<Vec<u8>> },
    /// Its own component, compiled on demand into the runtime's bounded
    /// cache of compiled components.
    Component { artifact: Arc<Vec<u8>> },
    /// Its own component, compiled and linked once (bundles, whose linker is
    /// their own), held by the tool.
    Pinned {
        artifact: Arc<Vec<u8>>,
        compiled: Arc<Compiled>,
    },
}

struct Compiled {
    pre: InstancePre<HostState>,
    run: RunIndices,
}

/// One compiled component, compiled once however many calls wait for it.
type CompiledCell = Arc<OnceCell<Result<Arc<Compiled>, LoadError>>>;

impl Tool {
    /// blake3 of the artifact, hex: the tool's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }
    /// The artifact's bytes, for a tool run from its own component (`None`
    /// for a tool the shared engine runs: it holds only its bytecode).
    pub fn artifact(&self) -> Option<&[u8]> {
        match &self.inner.form {
            ToolForm::Engine { .. } => None,
            ToolForm::Component { artifact } | ToolForm::Pinned { artifact, .. } => Some(artifact),
        }
    }
    /// What this tool is granted (nothing unless [`Runtime::grant`] said so).
    pub fn grants(&self) -> &Grants {
        &self.grants
    }
    /// The tools it may call (its `tool:NAME` grants).
    pub fn tool_calls(&self) -> &ToolCalls {
        &self.calls
    }
    /// This tool with its tool calls run by `caller` (the embedder's: the
    /// runtime checks grants and bounds, `caller` runs the callee). Without
    /// one, a granted tool call fails with a tool error saying so.
    pub fn with_tool_caller(&self, caller: Arc<dyn ToolCaller>) -> Tool {
        Tool {
            inner: self.inner.clone(),
            grants: self.grants,
            calls: self.calls.clone().with_caller(caller),
        }
    }
    /// Whether calls run on the shared engine (from bytecode) rather than on
    /// the tool's own compiled component.
    pub fn runs_on_engine(&self) -> bool {
        matches!(self.inner.form, ToolForm::Engine { .. })
    }
    /// The tool's bytecode, for a tool the shared engine runs.
    pub fn bytecode(&self) -> Option<&[u8]> {
        match &self.inner.form {
            ToolForm::Engine { bytecode } => Some(bytecode),
            _ => None,
        }
    }
    fn warm_key(&self) -> WarmKey {
        WarmKey::new(self.inner.id.clone(), &self.grants)
    }
}

/// The shared engine: the engine guest snapshotted with the prelude
/// evaluated, compiled once per shim version.
struct EngineRuntime {
    pre: InstancePre<HostState>,
    run: RunIndices,
    shim: ShimIndices,
}

/// The compiled shim (Wizer-instrumented): what builds run in.
struct ShimRuntime {
    pre: InstancePre<HostState>,
    shim: ShimIndices,
    wizer: Wizer,
    context: ComponentContext<'static>,
    prelude: Vec<u8>,
}

/// Builder for [`Runtime`]. Secure defaults: deny every capability
/// ([`HostPolicy::deny_all`]), [`Limits::default`] overridden by the
/// policy's `[limits]`, no fetch cassette, the default compile cache.
#[derive(Debug, Clone, Default)]
pub struct RuntimeBuilder {
    /// Set explicitly with [`RuntimeBuilder::limits`]; else the defaults
    /// with the policy's `[limits]`.
    limits: Option<Limits>,
    engine: EngineOptions,
    policy: HostPolicy,
    transport: TransportOptions,
    cassette: Option<Cassette>,
    caches: CacheLimits,
    admission: admission::Admission,
}

impl RuntimeBuilder {
    /// Per-call limits, used as given (default: [`Limits::default`] with
    /// the policy's `[limits]` applied, see [`Limits::with_policy`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = Some(limits);
        self
    }
    /// The host policy: which capabilities tools may be granted at all, which
    /// domains, which readable directories (default: deny everything).
    pub fn policy(mut self, policy: HostPolicy) -> Self {
        self.policy = policy;
        self
    }
    /// Transport settings for `fetch` that are not policy (test resolver
    /// overrides, extra TLS roots).
    pub fn transport(mut self, options: TransportOptions) -> Self {
        self.transport = options;
        self
    }
    /// A fetch cassette: record every exchange that passes the policy, or
    /// serve `fetch` from the cassette only, with no network (see
    /// [`crate::capabilities::cassette`]). Has an effect only when the
    /// policy allows `fetch`.
    pub fn cassette(mut self, cassette: Cassette) -> Self {
        self.cassette = Some(cassette);
        self
    }
    /// A gate [`Runtime::load`] asks before it loads component bytes from
    /// outside, e.g. a trust policy (default: none, every valid component
    /// loads). Bytes the embedder already admitted load through
    /// [`Runtime::load_admitted`].
    pub fn admission(mut self, gate: Arc<dyn ArtifactAdmission>) -> Self {
        self.admission = admission::Admission(Some(gate));
        self
    }
    /// Where compiled components are cached; `None` disables the cache.
    pub fn cache_dir(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.engine.cache_dir = dir;
        self
    }
    /// How many calls may run at once (the instance pool's size, besides
    /// the slots of pre-warmed instances).
    pub fn max_concurrent_instances(mut self, n: u32) -> Self {
        self.engine.max_concurrent_instances = n;
        self
    }
    /// The memory the runtime's caches may hold, in bytes: sets every cap of
    /// [`CacheLimits`] from it ([`CacheLimits::for_budget`]; default
    /// [`crate::limits::DEFAULT_MEMORY_BUDGET`]).
    pub fn memory_budget(mut self, bytes: usize) -> Self {
        self.caches = CacheLimits::for_budget(bytes);
        self
    }
    /// Sets each cache's cap explicitly.
    pub fn cache_limits(mut self, caches: CacheLimits) -> Self {
        self.caches = caches;
        self
    }
    /// Cap on the on-disk compile cache in bytes (least recently used files
    /// are removed past it).
    pub fn cache_max_bytes(mut self, bytes: u64) -> Self {
        self.engine.cache_max_bytes = bytes;
        self
    }
    /// Creates the runtime (starts the epoch ticker; compiles nothing yet).
    pub fn build(mut self) -> Result<Runtime, BuildError> {
        let limits = self
            .limits
            .take()
            .unwrap_or_else(|| Limits::default().with_policy(&self.policy.limits));
        self.engine.max_memory_bytes = self.engine.max_memory_bytes.max(limits.memory_bytes);
        self.engine.warm_instances =
            u32::try_from(self.caches.warm_instances()).unwrap_or(u32::MAX);
        self.engine.keep_resident_bytes = self.caches.keep_resident_bytes;
        let engine = TemperEngine::new(&self.engine).map_err(internal("engine"))?;
        let mut linker = Linker::new(engine.engine());
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(internal("linker"))?;
        JsShim::add_to_linker::<HostState, wasmtime::component::HasSelf<HostState>>(
            &mut linker,
            |state| state,
        )
        .map_err(internal("linker"))?;
        let fetch = if self.policy.allowed.contains(&Capability::Fetch) {
            let mut transport = FetchTransport::new(self.policy.fetch.clone(), &self.transport)
                .map_err(|message| BuildError::Internal {
                    stage: "fetch transport",
                    message,
                })?;
            if let Some(cassette) = self.cassette.take() {
                transport = transport.with_cassette(cassette);
            }
            Some(Arc::new(transport))
        } else {
            None
        };
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                engine,
                linker,
                limits,
                shim: OnceCell::new(),
                engine_rt: OnceCell::new(),
                warm: WarmPool::new(self.caches.warm_tools, self.caches.warm_per_tool),
                compiled: Mutex::new(LruCache::new(self.caches.compiled_tools.max(1))),
                bytecodes: Mutex::new(LruCache::new(self.caches.bytecode_records.max(1))),
                compacted: Mutex::new(LruCache::new(self.caches.bytecode_records.max(1))),
                caches: self.caches,
                policy: self.policy,
                fetch,
                admission: self.admission,
                reaper: Reaper::spawn()?,
                observer: std::sync::OnceLock::new(),
                promotions: promote::Promotions::default(),
            }),
        })
    }
}

/// Builds and runs tools. Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<RuntimeInner>,
}

struct RuntimeInner {
    engine: TemperEngine,
    linker: Linker<HostState>,
    limits: Limits,
    /// The instrumented shim: builds (compile, load, snapshot).
    shim: OnceCell<ShimRuntime>,
    /// The shared engine: calls of JS tools.
    engine_rt: OnceCell<EngineRuntime>,
    /// Pre-warmed engine instances of hot tools.
    warm: WarmPool,
    /// Compiled components of tools run from their own component, by id.
    compiled: Mutex<LruCache<Arc<str>, CompiledCell>>,
    /// Bytecode records (built artifact id → bytecode), the in-memory tier.
    bytecodes: Mutex<LruCache<String, Arc<Vec<u8>>>>,
    /// Compact records this process made or checked (blake3 of the record
    /// → the artifact id it rebuilds to): loaded without rebuilding.
    compacted: Mutex<LruCache<[u8; 32], Arc<str>>>,
    caches: CacheLimits,
    policy: HostPolicy,
    fetch: Option<Arc<FetchTransport>>,
    /// What [`Runtime::load`] asks before loading outside bytes.
    admission: admission::Admission,
    /// Used stores on their way to the reaper thread, which drops them.
    reaper: Arc<Reaper>,
    /// Who hears of refused capabilities (metrics), once set.
    observer: std::sync::OnceLock<Arc<dyn RuntimeObserver>>,
    /// Hot tools promoted to their own compiled snapshot (`promote`).
    promotions: promote::Promotions,
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        self.reaper.close();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn internal<E: std::fmt::Display>(stage: &'static str) -> impl Fn(E) -> BuildError {
    move |e| BuildError::Internal {
        stage,
        message: e.to_string(),
    }
}

impl Runtime {
    /// A builder with the secure defaults.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// The limits every call runs under.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Compiles (or loads from cache) the shim and the shared engine; later
    /// builds and calls reuse them.
    pub async fn warm_up(&self) -> Result<(), BuildError> {
        self.shim().await?;
        self.engine_rt().await.map(|_| ())
    }

    /// The caps of this runtime's caches.
    pub fn cache_limits(&self) -> &CacheLimits {
        &self.inner.caches
    }

    /// How many pre-warmed instances wait for `tool` (with its grants) now.
    pub fn warm_ready(&self, tool: &Tool) -> usize {
        self.inner.warm.ready(&tool.warm_key())
    }

    /// What the caches hold now: hot tools, pre-warmed instances, compiled
    /// components, bytecode records in memory.
    pub fn cache_stats(&self) -> CacheStats {
        let (warm_tools, warm_instances, warm_hits, warm_misses) = self.inner.warm.stats();
        CacheStats {
            warm_tools,
            warm_instances,
            warm_hits,
            warm_misses,
            compiled_tools: lock(&self.inner.compiled).len(),
            bytecode_records: lock(&self.inner.bytecodes).len(),
            promoted_tools: self.inner.promotions.made.load(Ordering::Relaxed),
            promotion_failures: self.inner.promotions.failed.load(Ordering::Relaxed),
        }
    }

    /// Drops every pre-warmed instance (e.g. to free pool slots).
    pub fn clear_warm(&self) {
        self.inner.warm.clear();
    }

    /// The host policy tools are granted from.
    pub fn policy(&self) -> &HostPolicy {
        &self.inner.policy
    }

    /// Grants `tool` the capabilities in `allowlist` that the host policy
    /// allows; a listed capability the policy does not allow is an error
    /// naming it. The result is the intersection, never more. Entries
    /// `tool:NAME` grant calling tool `NAME` (code mode; run by the caller
    /// set with [`Tool::with_tool_caller`]); an empty name is refused.
    pub fn grant(&self, tool: &Tool, allowlist: &[String]) -> Result<Tool, PolicyError> {
        let mut capabilities = Vec::with_capacity(allowlist.len());
        let mut names = std::collections::BTreeSet::new();
        for entry in allowlist {
            match tool_calls::tool_grant(entry) {
                Some("") => return Err(PolicyError::UnknownCapability(entry.clone())),
                Some(name) => {
                    names.insert(name.to_string());
                }
                None => capabilities.push(entry.clone()),
            }
        }
        let grants = self.inner.policy.grants(&capabilities)?;
        Ok(Tool {
            inner: tool.inner.clone(),
            grants,
            calls: ToolCalls::new(names),
        })
    }

    /// The call context of a call of `tool` at `depth` (none when it may
    /// call no tool).
    fn call_context(&self, tool: &Tool, depth: usize) -> Option<CallContext> {
        if tool.calls.is_empty() {
            return None;
        }
        Some(CallContext {
            calls: tool.calls.clone(),
            caller: tool.inner.id.clone(),
            depth,
            input_bytes: self.inner.limits.input_bytes,
            output_bytes: self.inner.limits.output_bytes,
        })
    }

    fn granted(&self, grants: &Grants, deadline: Instant) -> Granted {
        let policy = &self.inner.policy;
        Granted {
            fetch: if grants.fetch {
                self.inner.fetch.clone()
            } else {
                None
            },
            crypto: grants.crypto,
            read_dirs: if grants.fs_read {
                policy
                    .read_dirs
                    .iter()
                    .map(|d| (d.host.clone(), d.guest.clone()))
                    .collect()
            } else {
                Vec::new()
            },
            deadline: Some(deadline),
            calls: None,
        }
    }

    fn new_store(&self, clocks: Clocks) -> Store<HostState> {
        self.new_store_granted(clocks, false, Granted::default())
            .expect("a store without grants opens no directories")
    }

    /// The clocks and random a call's guest reads: the host's, or
    /// deterministic mode's when the policy turns it on.
    fn call_clocks(&self) -> Clocks {
        match self.inner.policy.determinism {
            Some(d) => Clocks::Deterministic(d),
            None => Clocks::Real,
        }
    }

    /// A store whose guest reads `clocks`; with `start_fixed`, the build's
    /// fixed clocks and random until `fixed` is switched off.
    fn new_store_granted(
        &self,
        clocks: Clocks,
        start_fixed: bool,
        granted: Granted,
    ) -> Result<Store<HostState>, String> {
        let limits = &self.inner.limits;
        let state = if start_fixed {
            HostState::starting_fixed(limits.memory_bytes, limits.console_bytes, clocks, granted)?
        } else {
            HostState::new(limits.memory_bytes, limits.console_bytes, clocks, granted)?
        };
        let mut store = Store::new(self.inner.engine.engine(), state);
        store.limiter(|state| &mut state.memory);
        arm_deadline(&mut store, limits.timeout);
        Ok(store)
    }

    /// The shared engine: for a crate that links its own components into
    /// calls with a store type of its own (`temper-compose`'s adapters).
    pub fn engine(&self) -> &TemperEngine {
        &self.inner.engine
    }

    /// Checks a call's input against the input cap and that it is JSON
    /// (every call path runs this first, `temper-compose`'s too).
    pub fn check_input(&self, input: &str) -> Result<(), RunError> {
        let limit = self.inner.limits.input_bytes;
        if input.len() > limit {
            return Err(RunError::BadInput {
                message: format!(
                    "input is {} bytes, over the {limit}-byte limit",
                    input.len()
                ),
            });
        }
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(input) {
            return Err(RunError::BadInput {
                message: format!("input is not valid JSON: {e}"),
            });
        }
        Ok(())
    }
}

/// What a runtime's caches hold ([`Runtime::cache_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Hot tools with pre-warmed instances.
    pub warm_tools: usize,
    /// Pre-warmed instances waiting.
    pub warm_instances: usize,
    /// Engine calls so far that took a pre-warmed instance.
    pub warm_hits: u64,
    /// Engine calls so far that found none and made their own.
    pub warm_misses: u64,
    /// Compiled components held.
    pub compiled_tools: usize,
    /// Bytecode records held in memory.
    pub bytecode_records: usize,
    /// Promotions so far: hot tools given their own compiled snapshot
    /// ([`CacheLimits::promote_after_calls`]).
    pub promoted_tools: u64,
    /// Promotions that failed (the tool stays on the shared engine).
    pub promotion_failures: u64,
}

impl From<crate::bindings::JsError> for JsLocation {
    fn from(e: crate::bindings::JsError) -> Self {
        // QuickJS's stack positions count columns from 0 on a source's
        // first line only (from 1 on every other line); the first line's
        // are made 1-based like the rest. Compile errors carry no stack
        // and their own positions.
        let column = match (e.line, e.column, &e.stack) {
            (Some(1), Some(c), Some(_)) => Some(c.saturating_add(1)),
            _ => e.column,
        };
        Self {
            message: e.message,
            line: e.line,
            column,
            stack: e.stack,
        }
    }
}

/// What the JS shim reports for a result JSON cannot represent: a js-error
/// with this message prefix and no position or stack (a thrown error always
/// has a stack). See `result_json` in `guest-js-shim/src/lib.rs`.
const BAD_OUTPUT_PREFIX: &str = "execute() returned ";

/// What was returned, when `js` is the shim's bad-output report.
fn bad_output(js: &crate::bindings::JsError) -> Option<String> {
    if js.line.is_some() || js.column.is_some() || js.stack.is_some() {
        return None;
    }
    js.message
        .strip_prefix(BAD_OUTPUT_PREFIX)
        .map(str::to_string)
}

impl From<ToolError> for RunError {
    fn from(e: ToolError) -> Self {
        match e {
            ToolError::BadInput(message) => RunError::BadInput { message },
            ToolError::Js(js) => match bad_output(&js) {
                Some(returned) => RunError::BadOutput { returned },
                None => RunError::Js { error: js.into() },
            },
            ToolError::Compile(js) => RunError::Js { error: js.into() },
            ToolError::Timeout(limit_ms) => RunError::Timeout { limit_ms },
            ToolError::Memory(detail) => RunError::Memory {
                limit_bytes: 0,
                detail,
            },
            ToolError::OutputTooLarge(limit) => RunError::OutputTooLarge {
                actual_bytes: 0,
                limit_bytes: limit as usize,
            },
            ToolError::CapabilityDenied(capability) => RunError::CapabilityDenied { capability },
            ToolError::Internal(message) => RunError::Internal { message },
            ToolError::ToolFailed(f) => RunError::ToolCall {
                tool: f.tool,
                message: f.message,
            },
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod promote_tests;
