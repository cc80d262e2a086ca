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
//!   are made ahead of time, off the request path ([`crate::pool`]), so a
//!   call only runs `execute`; each is used once and dropped.
//! - **compiled**: an artifact the engine cannot run (built elsewhere, or a
//!   Rust/Python tool) is compiled by Cranelift (cached on disk) and
//!   instantiated per call; compiled components are kept in a bounded LRU.
//!
//! Either way every call starts from a state no earlier call touched: a
//! fresh store and instance per call, never reused, so a trap cannot poison
//! anything shared.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use hashlink::LruCache;

use serde::Serialize;
use tokio::sync::OnceCell;
use wasmtime::component::{Component, InstancePre, Linker, types::ComponentItem};
use wasmtime::{Store, Trap, UpdateDeadline};
use wasmtime_wizer::{ComponentContext, Wizer};

use crate::bindings::{JsShim, RunIndices, ShimIndices, ToolError};
use crate::capabilities::cassette::Cassette;
use crate::capabilities::fetch::{FetchTransport, TransportOptions};
use crate::engine::{EngineOptions, TemperEngine};
use crate::error::{BuildError, JsLocation, LoadError, RunError};
use crate::host_state::Granted;
use crate::host_state::{Clocks, HostState, LogLine};
use crate::limits::{CacheLimits, Limits};
use crate::policy::{Capability, Grants, HostPolicy, PolicyError};
use crate::pool::{Ready, WarmKey, WarmPool};
use crate::shim;
use crate::static_check;

/// The export every tool provides.
pub const RUN_EXPORT: &str = "temper:tool/run@0.1.0";

/// Interfaces a tool may import: the `tool` world's own, and the WASI
/// interfaces the host provides locked down (no sockets, no HTTP).
pub const ALLOWED_IMPORT_PREFIXES: &[&str] = &[
    "temper:tool/types@0.1.",
    "temper:tool/log@0.1.",
    "temper:tool/fetch@0.1.",
    "temper:tool/crypto@0.1.",
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
}

struct ToolInner {
    /// blake3 of the artifact, hex.
    id: Arc<str>,
    form: ToolForm,
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
                caches: self.caches,
                policy: self.policy,
                fetch,
                reaper: Reaper::spawn()?,
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
    caches: CacheLimits,
    policy: HostPolicy,
    fetch: Option<Arc<FetchTransport>>,
    /// Used stores on their way to the reaper thread, which drops them.
    reaper: Arc<Reaper>,
}

/// Drops used stores on a thread of its own: resetting an instance's memory
/// slot costs about as much as a call, and need not delay its answer. Calls
/// hand stores in without a wake-up (a system call) unless a batch is
/// full; while busy the thread wakes on its own every [`REAPER_TICK`], and
/// after a tick with nothing to do it sleeps until the next store comes.
struct Reaper {
    queue: Mutex<Vec<Store<HostState>>>,
    wake: std::sync::Condvar,
    /// Set (under the queue's lock) while the thread sleeps without a tick.
    idle: std::sync::atomic::AtomicBool,
    closed: std::sync::atomic::AtomicBool,
}

/// Stores handed in before the reaper is woken.
const REAPER_BATCH: usize = 8;
/// Stores waiting at most; past it, calls drop their own.
const REAPER_BACKLOG: usize = 32;
/// How often the reaper wakes on its own.
const REAPER_TICK: std::time::Duration = std::time::Duration::from_millis(1);

impl Reaper {
    /// Starts the thread; it ends once [`Reaper::close`] is called.
    fn spawn() -> Result<Arc<Self>, BuildError> {
        let reaper = Arc::new(Self {
            queue: Mutex::new(Vec::with_capacity(REAPER_BACKLOG)),
            wake: std::sync::Condvar::new(),
            idle: std::sync::atomic::AtomicBool::new(false),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        let r = reaper.clone();
        std::thread::Builder::new()
            .name("temper-reaper".into())
            .spawn(move || {
                use std::sync::atomic::Ordering::{Acquire, Relaxed};
                loop {
                    let batch = {
                        let mut queue = lock(&r.queue);
                        if queue.is_empty() && !r.closed.load(Acquire) {
                            queue = r
                                .wake
                                .wait_timeout_while(queue, REAPER_TICK, |q| q.is_empty())
                                .map(|(q, _)| q)
                                .unwrap_or_else(|e| e.into_inner().0);
                        }
                        if queue.is_empty() && !r.closed.load(Acquire) {
                            r.idle.store(true, Relaxed);
                            queue = r
                                .wake
                                .wait_while(queue, |q| q.is_empty() && !r.closed.load(Acquire))
                                .unwrap_or_else(|e| e.into_inner());
                            r.idle.store(false, Relaxed);
                        }
                        std::mem::take(&mut *queue)
                    };
                    drop(batch);
                    if r.closed.load(Acquire) && lock(&r.queue).is_empty() {
                        break;
                    }
                }
            })
            .map_err(internal("reaper thread"))?;
        Ok(reaper)
    }

    /// Hands a used store in, or drops it here when the backlog is full.
    fn retire(&self, store: Store<HostState>) {
        let mut queue = lock(&self.queue);
        if queue.len() >= REAPER_BACKLOG {
            drop(queue);
            drop(store);
            return;
        }
        queue.push(store);
        if queue.len() >= REAPER_BATCH || self.idle.load(std::sync::atomic::Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }

    fn close(&self) {
        let _queue = lock(&self.queue);
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify_one();
    }
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
        }
    }

    /// Drops every pre-warmed instance (e.g. to free pool slots).
    pub fn clear_warm(&self) {
        self.inner.warm.clear();
    }

    /// The shared engine: its snapshot from the cache (or made now: the
    /// engine guest instrumented, its prelude run under the build's fixed
    /// clocks, snapshotted), compiled once (or loaded from the cache).
    async fn engine_rt(&self) -> Result<&EngineRuntime, BuildError> {
        self.inner
            .engine_rt
            .get_or_try_init(|| async {
                let name = format!("engine-{}.wasm", shim::engine_id());
                let cached = self.inner.engine.cache_get(&name);
                let from_cache = cached.is_some();
                let snapshot = match cached {
                    Some(bytes) => bytes,
                    None => self.snapshot_engine().await?,
                };
                let rt = self.inner.clone();
                let bytes = snapshot.clone();
                let component = tokio::task::spawn_blocking(move || rt.engine.compile(&bytes))
                    .await
                    .map_err(internal("compile engine"))?;
                let component = match component {
                    Ok(c) => c,
                    // A damaged cache file: make the snapshot again.
                    Err(_) if from_cache => {
                        let fresh = self.snapshot_engine().await?;
                        let rt = self.inner.clone();
                        let component =
                            tokio::task::spawn_blocking(move || rt.engine.compile(&fresh))
                                .await
                                .map_err(internal("compile engine"))?
                                .map_err(internal("compile engine"))?;
                        component
                    }
                    Err(e) => return Err(internal("compile engine")(e)),
                };
                if !from_cache {
                    self.inner.engine.cache_put(&name, &snapshot);
                }
                let pre = self
                    .inner
                    .linker
                    .instantiate_pre(&component)
                    .map_err(internal("link engine"))?;
                Ok(EngineRuntime {
                    run: RunIndices::new(&pre).map_err(internal("link engine"))?,
                    shim: ShimIndices::new(&pre).map_err(internal("link engine"))?,
                    pre,
                })
            })
            .await
    }

    /// The engine snapshot: the engine guest after `load(prelude, [])` under
    /// the build's fixed clocks and random. Deterministic.
    async fn snapshot_engine(&self) -> Result<Vec<u8>, BuildError> {
        let mut wizer = Wizer::new();
        wizer
            .init_func("temper:tool/shim@0.1.0#load".to_string())
            .keep_init_func(true);
        let (context, instrumented) = wizer
            .instrument_component(shim::ENGINE_WASM)
            .map_err(internal("instrument engine"))?;
        let engine = self.inner.engine.engine().clone();
        // Used once: not worth a place in the compile cache.
        let component = tokio::task::spawn_blocking(move || Component::new(&engine, &instrumented))
            .await
            .map_err(internal("compile engine"))?
            .map_err(internal("compile engine"))?;
        let pre = self
            .inner
            .linker
            .instantiate_pre(&component)
            .map_err(internal("link engine"))?;
        let indices = ShimIndices::new(&pre).map_err(internal("link engine"))?;
        let prelude = {
            let mut store = self.new_store(Clocks::Fixed);
            let instance = pre
                .instantiate_async(&mut store)
                .await
                .map_err(internal("instantiate engine"))?;
            let exports = indices
                .load(&mut store, &instance)
                .map_err(internal("instantiate engine"))?;
            exports
                .call_compile_prelude(&mut store, shim::PRELUDE_JS)
                .await
                .map_err(internal("compile prelude"))?
                .map_err(|e| BuildError::Internal {
                    stage: "compile prelude",
                    message: format!("{e:?}"),
                })?
        };
        let mut store = self.new_store(Clocks::Fixed);
        let instance = pre
            .instantiate_async(&mut store)
            .await
            .map_err(internal("instantiate engine"))?;
        let exports = indices
            .load(&mut store, &instance)
            .map_err(internal("instantiate engine"))?;
        exports
            .call_load(&mut store, &prelude, &[])
            .await
            .map_err(internal("engine prelude"))?
            .map_err(|e| BuildError::Internal {
                stage: "engine prelude",
                message: format!("{e:?}"),
            })?;
        wizer
            .snapshot_component(
                &context,
                &mut crate::snapshot::InstanceSnapshot {
                    store: &mut store,
                    instance,
                },
            )
            .await
            .map_err(internal("snapshot engine"))
    }

    /// The name of the on-disk bytecode record of built artifact `id`
    /// (this shim's: bytecode only runs on the QuickJS that compiled it).
    fn record_name(id: &str) -> String {
        format!("bytecode-{id}-{}.qjsbc", &shim::shim_id()[..16])
    }

    /// Remembers that built artifact `id` is the snapshot of `bytecode`, so
    /// [`Runtime::load`] can run that artifact on the engine: in memory
    /// (bounded) and in the cache directory (blake3-checked on read).
    fn record_bytecode(&self, id: &str, bytecode: &Arc<Vec<u8>>) {
        lock(&self.inner.bytecodes).insert(id.to_string(), bytecode.clone());
        let mut record = Vec::with_capacity(32 + bytecode.len());
        record.extend_from_slice(blake3::hash(bytecode).as_bytes());
        record.extend_from_slice(bytecode);
        self.inner.engine.cache_put(&Self::record_name(id), &record);
    }

    /// The bytecode `bytes` is the snapshot of, if this host (this shim)
    /// built it: looked up by the blake3 of the component without its
    /// manifest section.
    fn recorded_bytecode(&self, bytes: &[u8]) -> Option<Arc<Vec<u8>>> {
        let component = crate::artifact::split(bytes).map_or(bytes, |(_, c)| c);
        let id = blake3::hash(component).to_hex().to_string();
        if let Some(b) = lock(&self.inner.bytecodes).get(&id) {
            return Some(b.clone());
        }
        let record = self.inner.engine.cache_get(&Self::record_name(&id))?;
        let (hash, body) = record.split_at_checked(32)?;
        if blake3::hash(body).as_bytes() != hash {
            return None;
        }
        let bytecode = Arc::new(body.to_vec());
        lock(&self.inner.bytecodes).insert(id, bytecode.clone());
        Some(bytecode)
    }

    async fn shim(&self) -> Result<&ShimRuntime, BuildError> {
        self.inner
            .shim
            .get_or_try_init(|| async {
                let mut wizer = Wizer::new();
                wizer
                    .init_func("temper:tool/shim@0.1.0#load".to_string())
                    .keep_init_func(true);
                let (context, instrumented) = wizer
                    .instrument_component(shim::SHIM_WASM)
                    .map_err(internal("instrument shim"))?;
                let rt = self.inner.clone();
                let component =
                    tokio::task::spawn_blocking(move || rt.engine.compile(&instrumented))
                        .await
                        .map_err(internal("compile shim"))?
                        .map_err(internal("compile shim"))?;
                let pre = self
                    .inner
                    .linker
                    .instantiate_pre(&component)
                    .map_err(internal("link shim"))?;
                let shim_indices = ShimIndices::new(&pre).map_err(internal("link shim"))?;
                let mut runtime = ShimRuntime {
                    pre,
                    shim: shim_indices,
                    wizer,
                    context,
                    prelude: Vec::new(),
                };
                runtime.prelude = self.compile_prelude(&runtime).await?;
                Ok(runtime)
            })
            .await
    }

    /// The host policy tools are granted from.
    pub fn policy(&self) -> &HostPolicy {
        &self.inner.policy
    }

    /// Grants `tool` the capabilities in `allowlist` that the host policy
    /// allows; a listed capability the policy does not allow is an error
    /// naming it. The result is the intersection, never more.
    pub fn grant(&self, tool: &Tool, allowlist: &[String]) -> Result<Tool, PolicyError> {
        let grants = self.inner.policy.grants(allowlist)?;
        Ok(Tool {
            inner: tool.inner.clone(),
            grants,
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

    /// The shared engine (for the compose runtime, which has its own store
    /// type).
    pub(crate) fn engine(&self) -> &TemperEngine {
        &self.inner.engine
    }

    /// Checks a call's input against the input cap and that it is JSON.
    pub(crate) fn check_input(&self, input: &str) -> Result<(), RunError> {
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

    /// A fresh store with fixed clocks and random, and a shim instance in it:
    /// what every build step (and the snapshot) runs in.
    async fn shim_instance(
        &self,
        shim: &ShimRuntime,
    ) -> Result<
        (
            Store<HostState>,
            wasmtime::component::Instance,
            crate::bindings::exports::temper::tool::shim::Guest,
        ),
        BuildError,
    > {
        let mut store = self.new_store(Clocks::Fixed);
        let instance = shim
            .pre
            .instantiate_async(&mut store)
            .await
            .map_err(internal("instantiate shim"))?;
        let exports = shim
            .shim
            .load(&mut store, &instance)
            .map_err(internal("instantiate shim"))?;
        Ok((store, instance, exports))
    }

    async fn compile_prelude(&self, shim: &ShimRuntime) -> Result<Vec<u8>, BuildError> {
        let (mut store, _instance, exports) = self.shim_instance(shim).await?;
        exports
            .call_compile_prelude(&mut store, shim::PRELUDE_JS)
            .await
            .map_err(internal("compile prelude"))?
            .map_err(|e| BuildError::Internal {
                stage: "compile prelude",
                message: format!("{e:?}"),
            })
    }

    /// Builds JS source into a component artifact: static check, compile to
    /// QuickJS bytecode, load in a fresh shim instance with fixed clocks and
    /// random, and snapshot it. Same source, same shim: same bytes.
    pub async fn build(&self, source: &str) -> Result<Artifact, BuildError> {
        if source.len() > MAX_SOURCE_BYTES {
            return Err(BuildError::SourceTooLarge {
                actual: source.len(),
                limit: MAX_SOURCE_BYTES,
            });
        }
        static_check::check(source)?;
        let bytecode = self.compile_source(source).await?;
        self.artifact_from_bytecode(bytecode).await
    }

    /// Compiles `source` to QuickJS bytecode in a throw-away shim instance
    /// (the only place `eval` exists): the syntax check. A syntax error
    /// comes back as [`BuildError::Compile`] with its line and column.
    pub async fn compile_source(&self, source: &str) -> Result<Vec<u8>, BuildError> {
        if source.len() > MAX_SOURCE_BYTES {
            return Err(BuildError::SourceTooLarge {
                actual: source.len(),
                limit: MAX_SOURCE_BYTES,
            });
        }
        let shim = self.shim().await?;
        let (mut store, _instance, exports) = self.shim_instance(shim).await?;
        match exports.call_compile(&mut store, source).await {
            Ok(Ok(bytecode)) => Ok(bytecode),
            Ok(Err(ToolError::Compile(js))) => Err(BuildError::Compile(js.into())),
            Ok(Err(other)) => Err(top_level_error(other)),
            Err(trap) => Err(BuildError::TopLevel(describe_trap(
                &store,
                &trap,
                &self.inner.limits,
            ))),
        }
    }

    /// The self-contained artifact of a tool's `bytecode` (from
    /// [`Runtime::compile_source`]; the second half of [`Runtime::build`]):
    /// load it in a fresh shim instance under the build's fixed clocks and
    /// random, and snapshot it. The artifact depends only on the shim, the
    /// prelude and the bytecode, so a store that keeps the compact form
    /// (bytecode + manifest) rebuilds the very same bytes (the same id).
    pub async fn artifact_from_bytecode(&self, bytecode: Vec<u8>) -> Result<Artifact, BuildError> {
        let shim = self.shim().await?;
        // Load (run the top level) and snapshot.
        let (mut store, instance, exports) = self.shim_instance(shim).await?;
        match exports
            .call_load(&mut store, &shim.prelude, &bytecode)
            .await
        {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(top_level_error(err)),
            Err(trap) => {
                return Err(BuildError::TopLevel(describe_trap(
                    &store,
                    &trap,
                    &self.inner.limits,
                )));
            }
        }
        let bytes = shim
            .wizer
            .snapshot_component(
                &shim.context,
                &mut crate::snapshot::InstanceSnapshot {
                    store: &mut store,
                    instance,
                },
            )
            .await
            .map_err(internal("snapshot"))?;
        let id = blake3::hash(&bytes).to_hex().to_string();
        let bytecode = Arc::new(bytecode);
        self.record_bytecode(&id, &bytecode);
        Ok(Artifact {
            bytes: Arc::new(bytes),
            id,
            bytecode,
        })
    }

    /// A tool from an artifact built by this runtime: runs on the shared
    /// engine from its bytecode (no compile; callable at once).
    pub fn tool(&self, artifact: &Artifact) -> Tool {
        self.engine_tool(&artifact.id, artifact.bytecode.clone())
    }

    fn engine_tool(&self, id: &str, bytecode: Arc<Vec<u8>>) -> Tool {
        Tool {
            inner: Arc::new(ToolInner {
                id: id.into(),
                form: ToolForm::Engine { bytecode },
            }),
            grants: Grants::default(),
        }
    }

    /// A tool from component bytes (e.g. a `.wasm` file). An artifact this
    /// host built (its bytecode recorded, with or without a manifest
    /// section) runs on the shared engine; any other component is checked
    /// against the `tool` world and compiled (cached on disk, and kept in a
    /// bounded cache in memory).
    pub async fn load(&self, bytes: Vec<u8>) -> Result<Tool, LoadError> {
        if let Some(bytecode) = self.recorded_bytecode(&bytes) {
            let id = blake3::hash(&bytes).to_hex().to_string();
            return Ok(self.engine_tool(&id, bytecode));
        }
        self.load_compiled(bytes).await
    }

    /// A tool that runs on its own compiled component, even when the engine
    /// could run it (e.g. to compare the two, or to run exactly what an
    /// exported file holds).
    pub async fn load_compiled(&self, bytes: Vec<u8>) -> Result<Tool, LoadError> {
        let id: Arc<str> = blake3::hash(&bytes).to_hex().to_string().into();
        let artifact = Arc::new(bytes);
        self.compiled(&id, &artifact).await?;
        Ok(Tool {
            inner: Arc::new(ToolInner {
                id,
                form: ToolForm::Component { artifact },
            }),
            grants: Grants::default(),
        })
    }

    /// The compiled component of artifact `id`: from the bounded cache, or
    /// compiled now (from the on-disk cache when it was compiled before).
    async fn compiled(
        &self,
        id: &Arc<str>,
        artifact: &Arc<Vec<u8>>,
    ) -> Result<Arc<Compiled>, LoadError> {
        let cell = {
            let mut cache = lock(&self.inner.compiled);
            match cache.get(id) {
                Some(cell) => cell.clone(),
                None => {
                    let cell = CompiledCell::default();
                    cache.insert(id.clone(), cell.clone());
                    cell
                }
            }
        };
        let rt = self.clone();
        let bytes = artifact.clone();
        cell.get_or_init(|| async move {
            tokio::task::spawn_blocking(move || rt.compile_tool(&bytes).map(Arc::new))
                .await
                .unwrap_or_else(|e| Err(LoadError::Invalid(e.to_string())))
        })
        .await
        .clone()
    }

    fn compile_tool(&self, bytes: &[u8]) -> Result<Compiled, LoadError> {
        self.compile_tool_with(bytes, &self.inner.linker, &[])
    }

    /// Compiles `bytes` and links it with `linker`; besides the `tool`
    /// world's imports, it may import the plain names in `extra`.
    fn compile_tool_with(
        &self,
        bytes: &[u8],
        linker: &Linker<HostState>,
        extra: &[String],
    ) -> Result<Compiled, LoadError> {
        let component = self
            .inner
            .engine
            .compile(bytes)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        check_tool_world(&component, self.inner.engine.engine(), extra)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let run = RunIndices::new(&pre).map_err(|_| LoadError::MissingExport(RUN_EXPORT.into()))?;
        Ok(Compiled { pre, run })
    }

    /// A tool whose component may import more than the `tool` world:
    /// `link` adds those imports to a copy of the runtime's linker and
    /// returns their names; any other import is refused. Grants are given
    /// as for any tool ([`Runtime::grant`]). Used for bundles
    /// ([`crate::compose::bundle`]), whose host-native steps are imports.
    pub(crate) async fn load_linked(
        &self,
        bytes: Vec<u8>,
        link: impl FnOnce(&mut Linker<HostState>) -> Result<Vec<String>, LoadError>,
    ) -> Result<Tool, LoadError> {
        let mut linker = self.inner.linker.clone();
        let names = link(&mut linker)?;
        let rt = self.clone();
        let artifact = Arc::new(bytes);
        let compile_bytes = artifact.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            rt.compile_tool_with(&compile_bytes, &linker, &names)
        })
        .await
        .map_err(|e| LoadError::Invalid(e.to_string()))??;
        Ok(Tool {
            inner: Arc::new(ToolInner {
                id: crate::id::blake3_hex(&artifact).into(),
                form: ToolForm::Pinned {
                    artifact,
                    compiled: Arc::new(compiled),
                },
            }),
            grants: Grants::default(),
        })
    }

    /// Calls `tool` with a JSON `input` in a fresh instance under the limits:
    /// a pre-warmed one when the tool is hot, else one made now.
    pub async fn call(&self, tool: &Tool, input: &str) -> Result<CallOutput, CallFailure> {
        let limits = &self.inner.limits;
        let fail = |error| CallFailure {
            error,
            logs: Vec::new(),
        };
        self.check_input(input).map_err(fail)?;
        let deadline = Instant::now() + limits.timeout;
        match &tool.inner.form {
            ToolForm::Engine { bytecode } => {
                self.call_engine(tool, bytecode, input, deadline).await
            }
            ToolForm::Component { artifact } => {
                let compiled = self.compiled(&tool.inner.id, artifact).await.map_err(|e| {
                    fail(RunError::Instantiate {
                        message: e.to_string(),
                    })
                })?;
                self.call_compiled(tool, &compiled, input, deadline).await
            }
            ToolForm::Pinned { compiled, .. } => {
                self.call_compiled(tool, compiled, input, deadline).await
            }
        }
    }

    async fn call_compiled(
        &self,
        tool: &Tool,
        compiled: &Compiled,
        input: &str,
        deadline: Instant,
    ) -> Result<CallOutput, CallFailure> {
        let limits = &self.inner.limits;
        let granted = self.granted(&tool.grants, deadline);
        let mut store = self
            .new_store_granted(self.call_clocks(), false, granted)
            .map_err(|message| CallFailure {
                error: RunError::Instantiate { message },
                logs: Vec::new(),
            })?;
        let outcome = tokio::time::timeout(limits.timeout, async {
            let instance = compiled.pre.instantiate_async(&mut store).await?;
            let run = compiled.run.load(&mut store, &instance)?;
            run.call_call(&mut store, input)
                .await
                .map(|r| r.map_err(RunError::from))
        })
        .await;
        self.finish(store, outcome, true)
    }

    /// A call on the shared engine: a pre-warmed instance of the tool if one
    /// waits, else a fresh engine instance into which the bytecode is loaded
    /// now (under the build's fixed clocks, as the build's snapshot was);
    /// then `execute`, on the call's clocks. Afterwards the tool's
    /// pre-warmed instances are topped up in the background.
    async fn call_engine(
        &self,
        tool: &Tool,
        bytecode: &Arc<Vec<u8>>,
        input: &str,
        deadline: Instant,
    ) -> Result<CallOutput, CallFailure> {
        let limits = &self.inner.limits;
        let engine = self.engine_rt().await.map_err(|e| CallFailure {
            error: RunError::Instantiate {
                message: e.to_string(),
            },
            logs: Vec::new(),
        })?;
        let key = tool.warm_key();
        let (mut store, ready) = match self.inner.warm.take(&key) {
            Some(Ready {
                mut store,
                instance,
            }) => {
                arm_deadline(&mut store, limits.timeout);
                store.data_mut().set_deadline(deadline);
                (store, Some(instance))
            }
            None => {
                let granted = self.granted(&tool.grants, deadline);
                let store = self
                    .new_store_granted(self.call_clocks(), true, granted)
                    .map_err(|message| CallFailure {
                        error: RunError::Instantiate { message },
                        logs: Vec::new(),
                    })?;
                (store, None)
            }
        };
        let outcome = tokio::time::timeout(limits.timeout, async {
            let instance = match ready {
                Some(instance) => instance,
                None => {
                    let instance = engine.pre.instantiate_async(&mut store).await?;
                    let shim = engine.shim.load(&mut store, &instance)?;
                    if let Err(e) = shim.call_load(&mut store, &[], bytecode).await? {
                        return Ok(Err(RunError::from(e)));
                    }
                    store.data_mut().reset_after_load();
                    instance
                }
            };
            store.data().fixed.set_fixed(false);
            let run = engine.run.load(&mut store, &instance)?;
            run.call_call(&mut store, input)
                .await
                .map(|r| r.map_err(RunError::from))
        })
        .await;
        let result = self.finish(store, outcome, false);
        self.refill(key, bytecode.clone(), tool.grants);
        result
    }

    /// Tops up the pre-warmed instances of a tool (making it hot), in a
    /// background task, unless one runs already or the pool is off.
    fn refill(&self, key: WarmKey, bytecode: Arc<Vec<u8>>, grants: Grants) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if !self.inner.warm.start_refill(&key) {
            return;
        }
        let rt = self.clone();
        handle.spawn(async move {
            while rt.inner.warm.reserve(&key) {
                match rt.prepare(&bytecode, &grants).await {
                    Some(ready) => rt.inner.warm.put(&key, ready),
                    None => {
                        rt.inner.warm.abort(&key);
                        break;
                    }
                }
            }
        });
    }

    /// One pre-warmed instance: a fresh engine instance with the bytecode
    /// loaded under the build's fixed clocks (still on; the call switches
    /// them), never called. `None` when it cannot be made (no pool slot
    /// free, or the load failed): calls then make their own.
    async fn prepare(&self, bytecode: &[u8], grants: &Grants) -> Option<Ready> {
        let engine = self.engine_rt().await.ok()?;
        let limits = &self.inner.limits;
        let granted = self.granted(grants, Instant::now() + limits.timeout);
        let mut store = self
            .new_store_granted(self.call_clocks(), true, granted)
            .ok()?;
        let loaded = tokio::time::timeout(limits.timeout, async {
            let instance = engine.pre.instantiate_async(&mut store).await?;
            let shim = engine.shim.load(&mut store, &instance)?;
            let loaded = shim.call_load(&mut store, &[], bytecode).await?;
            Ok::<_, wasmtime::Error>(loaded.ok().map(|()| instance))
        })
        .await;
        let Ok(Ok(Some(instance))) = loaded else {
            return None;
        };
        store.data_mut().reset_after_load();
        Some(Ready { store, instance })
    }

    /// Drops a used store off the request path (resetting its instance's
    /// memory slot costs about as much as the call): on the reaper thread,
    /// or here when the reaper is behind.
    fn retire(&self, store: Store<HostState>) {
        self.inner.reaper.retire(store);
    }

    /// Turns a call's outcome and its store into what the caller gets.
    fn finish(
        &self,
        mut store: Store<HostState>,
        outcome: Result<
            Result<Result<String, RunError>, wasmtime::Error>,
            tokio::time::error::Elapsed,
        >,
        compiled: bool,
    ) -> Result<CallOutput, CallFailure> {
        let limits = &self.inner.limits;
        let result = match outcome {
            Err(_elapsed) => Err(RunError::Timeout {
                limit_ms: limits.timeout.as_millis() as u64,
            }),
            Ok(Err(trap)) => Err(classify_trap(&store, &trap, limits)),
            Ok(Ok(result)) => result,
        };
        let state = store.data_mut();
        let denied = state.denied.take();
        let logs = std::mem::take(&mut state.console).into_lines();
        self.retire(store);
        match result {
            Ok(output) if output.len() > limits.output_bytes => Err(CallFailure {
                error: RunError::OutputTooLarge {
                    actual_bytes: output.len(),
                    limit_bytes: limits.output_bytes,
                },
                logs,
            }),
            Ok(output) => Ok(CallOutput {
                output,
                logs,
                compiled,
            }),
            Err(RunError::Js { error })
                if denied.is_some() && error.message.contains("capability not granted") =>
            {
                Err(CallFailure {
                    error: RunError::CapabilityDenied {
                        capability: denied.unwrap_or_default(),
                    },
                    logs,
                })
            }
            Err(RunError::Memory { detail, .. }) => Err(CallFailure {
                error: RunError::Memory {
                    limit_bytes: limits.memory_bytes,
                    detail,
                },
                logs,
            }),
            Err(error) => Err(CallFailure { error, logs }),
        }
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
}

/// Refuses components that import anything outside the `tool` world or do
/// not export `temper:tool/run`.
fn check_tool_world(
    component: &Component,
    engine: &wasmtime::Engine,
    extra: &[String],
) -> Result<(), LoadError> {
    let ty = component.component_type();
    for (name, _) in ty.imports(engine) {
        if !ALLOWED_IMPORT_PREFIXES.iter().any(|p| name.starts_with(p))
            && !extra.iter().any(|e| e == name)
        {
            return Err(LoadError::ImportNotAllowed(name.to_string()));
        }
    }
    let exports_run = ty.exports(engine).any(|(name, item)| {
        name == RUN_EXPORT && matches!(item.ty, ComponentItem::ComponentInstance(_))
    });
    if !exports_run {
        return Err(LoadError::MissingExport(RUN_EXPORT.into()));
    }
    Ok(())
}

/// Interrupts the store's guest once `timeout` has passed (the engine's
/// epoch ticker drives the check; the guest yields between ticks).
pub(crate) fn arm_deadline<T>(store: &mut Store<T>, timeout: std::time::Duration) {
    let deadline = Instant::now() + timeout;
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
}

fn classify_trap(store: &Store<HostState>, err: &wasmtime::Error, limits: &Limits) -> RunError {
    classify_trap_with(store.data().memory.hit, err, limits)
}

/// What a trap means: the timeout, the memory cap (when `memory_hit`), or
/// a plain trap.
pub(crate) fn classify_trap_with(
    memory_hit: bool,
    err: &wasmtime::Error,
    limits: &Limits,
) -> RunError {
    if matches!(err.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return RunError::Timeout {
            limit_ms: limits.timeout.as_millis() as u64,
        };
    }
    if memory_hit {
        return RunError::Memory {
            limit_bytes: limits.memory_bytes,
            detail: "linear memory growth refused at the cap".into(),
        };
    }
    let message = match err.downcast_ref::<Trap>() {
        Some(trap) => trap.to_string(),
        None => format!("{err:#}"),
    };
    RunError::Trap { message }
}

fn describe_trap(store: &Store<HostState>, err: &wasmtime::Error, limits: &Limits) -> String {
    match classify_trap(store, err, limits) {
        RunError::Timeout { limit_ms } => format!("ran past the {limit_ms} ms limit"),
        RunError::Memory { limit_bytes, .. } => format!("ran out of memory ({limit_bytes} bytes)"),
        other => format!("trapped: {other}"),
    }
}

fn top_level_error(err: ToolError) -> BuildError {
    match err {
        ToolError::Compile(js) | ToolError::Js(js) => BuildError::Load(js.into()),
        other => BuildError::TopLevel(RunError::from(other).to_string()),
    }
}

impl From<crate::bindings::JsError> for JsLocation {
    fn from(e: crate::bindings::JsError) -> Self {
        Self {
            message: e.message,
            line: e.line,
            column: e.column,
            stack: e.stack,
        }
    }
}

impl From<ToolError> for RunError {
    fn from(e: ToolError) -> Self {
        match e {
            ToolError::BadInput(message) => RunError::BadInput { message },
            ToolError::Js(js) | ToolError::Compile(js) => RunError::Js { error: js.into() },
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
        }
    }
}

#[cfg(test)]
#[path = "runtime_tests.rs"]
mod tests;
