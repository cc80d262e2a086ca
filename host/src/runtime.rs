//! The runtime: builds JS tools into component artifacts and runs tools,
//! each call in a fresh store under hard limits.
//!
//! Two ways to run a tool, the same guest code and state either way:
//! - **compiled**: the artifact (a Wizer snapshot of the shim after loading
//!   the tool) compiled by Cranelift, instantiated per call from an
//!   `InstancePre` (copy-on-write memory image; tens of microseconds);
//! - **warm-up**: right after a build, before the artifact is compiled, a
//!   call instantiates the already-compiled shim and replays the snapshot's
//!   `load(prelude, bytecode)` before calling. QuickJS is never recompiled on
//!   the path from forge to first call; the artifact compiles in the
//!   background and later calls switch to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

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
use crate::limits::Limits;
use crate::policy::{Capability, Grants, HostPolicy, PolicyError};
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
    /// The tool's QuickJS bytecode (kept for the warm-up path).
    pub bytecode: Arc<Vec<u8>>,
}

/// What a successful call returns.
#[derive(Debug, Clone, Serialize)]
pub struct CallOutput {
    /// The tool's result as JSON text.
    pub output: String,
    /// Console lines the tool printed.
    pub logs: Vec<LogLine>,
    /// Whether the call ran on the compiled artifact (`false`: warm-up path).
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
    id: String,
    artifact: Arc<Vec<u8>>,
    /// Present for tools built in this process: enables the warm-up path.
    bytecode: Option<Arc<Vec<u8>>>,
    compiled: OnceCell<Result<Compiled, LoadError>>,
    compiling: AtomicBool,
}

struct Compiled {
    pre: InstancePre<HostState>,
    run: RunIndices,
}

impl Tool {
    /// blake3 of the artifact, hex: the tool's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }
    /// The artifact's bytes.
    pub fn artifact(&self) -> &[u8] {
        &self.inner.artifact
    }
    /// What this tool is granted (nothing unless [`Runtime::grant`] said so).
    pub fn grants(&self) -> &Grants {
        &self.grants
    }
    /// Whether calls now run on the compiled artifact.
    pub fn is_compiled(&self) -> bool {
        matches!(self.inner.compiled.get(), Some(Ok(_)))
    }
}

/// The compiled shim (Wizer-instrumented), shared by builds and warm-up calls.
struct ShimRuntime {
    pre: InstancePre<HostState>,
    run: RunIndices,
    shim: ShimIndices,
    wizer: Wizer,
    context: ComponentContext<'static>,
    prelude: Vec<u8>,
}

/// Builder for [`Runtime`].
#[derive(Debug, Clone, Default)]
pub struct RuntimeBuilder {
    limits: Limits,
    engine: EngineOptions,
    policy: HostPolicy,
    transport: TransportOptions,
    cassette: Option<Cassette>,
}

impl RuntimeBuilder {
    /// Per-call limits (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
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
    /// How many calls may run at once (the instance pool's size).
    pub fn max_concurrent_instances(mut self, n: u32) -> Self {
        self.engine.max_concurrent_instances = n;
        self
    }
    /// Creates the runtime (starts the epoch ticker; compiles nothing yet).
    pub fn build(mut self) -> Result<Runtime, BuildError> {
        self.engine.max_memory_bytes = self.engine.max_memory_bytes.max(self.limits.memory_bytes);
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
                limits: self.limits,
                shim: OnceCell::new(),
                policy: self.policy,
                fetch,
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
    shim: OnceCell<ShimRuntime>,
    policy: HostPolicy,
    fetch: Option<Arc<FetchTransport>>,
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

    /// Compiles (or loads from cache) the shim; later builds reuse it.
    pub async fn warm_up(&self) -> Result<(), BuildError> {
        self.shim().await.map(|_| ())
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
                let run = RunIndices::new(&pre).map_err(internal("link shim"))?;
                let shim_indices = ShimIndices::new(&pre).map_err(internal("link shim"))?;
                let mut runtime = ShimRuntime {
                    pre,
                    run,
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
        let shim = self.shim().await?;

        // Compile in a throw-away instance (the only place eval exists).
        let bytecode = {
            let (mut store, _instance, exports) = self.shim_instance(shim).await?;
            match exports.call_compile(&mut store, source).await {
                Ok(Ok(bytecode)) => bytecode,
                Ok(Err(ToolError::Compile(js))) => return Err(BuildError::Compile(js.into())),
                Ok(Err(other)) => return Err(top_level_error(other)),
                Err(trap) => {
                    return Err(BuildError::TopLevel(describe_trap(
                        &store,
                        &trap,
                        &self.inner.limits,
                    )));
                }
            }
        };

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
        Ok(Artifact {
            bytes: Arc::new(bytes),
            id,
            bytecode: Arc::new(bytecode),
        })
    }

    /// A tool from an artifact built by this runtime: callable at once (warm-up
    /// path), compiled in the background on first call.
    pub fn tool(&self, artifact: &Artifact) -> Tool {
        Tool {
            inner: Arc::new(ToolInner {
                id: artifact.id.clone(),
                artifact: artifact.bytes.clone(),
                bytecode: Some(artifact.bytecode.clone()),
                compiled: OnceCell::new(),
                compiling: AtomicBool::new(false),
            }),
            grants: Grants::default(),
        }
    }

    /// A tool from component bytes (e.g. a `.wasm` file): validates the
    /// imports against the `tool` world and compiles it (cached on disk).
    pub async fn load(&self, bytes: Vec<u8>) -> Result<Tool, LoadError> {
        let id = blake3::hash(&bytes).to_hex().to_string();
        let tool = Tool {
            inner: Arc::new(ToolInner {
                id,
                artifact: Arc::new(bytes),
                bytecode: None,
                compiled: OnceCell::new(),
                compiling: AtomicBool::new(true),
            }),
            grants: Grants::default(),
        };
        match self.compiled(&tool).await {
            Ok(_) => Ok(tool),
            Err(e) => Err(e.clone()),
        }
    }

    async fn compiled<'t>(&self, tool: &'t Tool) -> &'t Result<Compiled, LoadError> {
        let rt = self.clone();
        let bytes = tool.inner.artifact.clone();
        tool.inner
            .compiled
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || rt.compile_tool(&bytes))
                    .await
                    .unwrap_or_else(|e| Err(LoadError::Invalid(e.to_string())))
            })
            .await
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

    /// A tool from a bundle (see [`crate::compose::bundle`]): a `tool`-world
    /// component that may also import host-native tools, each an instance
    /// named after the tool (`web-search`) with one `call`, linked here to
    /// `natives` (tool name, what runs it). Any other import is refused.
    /// Grants are given as for any tool ([`Runtime::grant`]).
    pub async fn load_bundle(
        &self,
        bytes: Vec<u8>,
        natives: Vec<(String, Arc<dyn crate::compose::run::StepCall>)>,
    ) -> Result<Tool, LoadError> {
        let mut linker = self.inner.linker.clone();
        let mut names = Vec::with_capacity(natives.len());
        for (tool, call) in natives {
            let name = crate::compose::adapter::import_name(&tool)
                .ok_or_else(|| LoadError::Invalid(format!("no import name for tool {tool:?}")))?;
            linker
                .instance(&name)
                .and_then(|mut i| {
                    i.func_wrap_async(
                        crate::compose::adapter::STEP_FUNC,
                        move |_store, (input,): (String,)| {
                            let call = call.clone();
                            Box::new(async move {
                                let out = call.call(input).await;
                                Ok((out.map(|o| o.output).map_err(ToolError::Internal),))
                            })
                        },
                    )
                })
                .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
            names.push(name);
        }
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
                id: blake3::hash(&artifact).to_hex().to_string(),
                artifact,
                bytecode: None,
                compiled: OnceCell::new_with(Some(Ok(compiled))),
                compiling: AtomicBool::new(true),
            }),
            grants: Grants::default(),
        })
    }

    /// Calls `tool` with a JSON `input` in a fresh store under the limits.
    pub async fn call(&self, tool: &Tool, input: &str) -> Result<CallOutput, CallFailure> {
        let limits = &self.inner.limits;
        let fail = |error| CallFailure {
            error,
            logs: Vec::new(),
        };
        self.check_input(input).map_err(fail)?;

        let ready = match tool.inner.compiled.get() {
            Some(Ok(compiled)) => Some(compiled),
            Some(Err(e)) => {
                return Err(fail(RunError::Instantiate {
                    message: e.to_string(),
                }));
            }
            None => None,
        };
        let compiled_path = ready.is_some() || tool.inner.bytecode.is_none();
        // The warm-up path replays the snapshot's `load` under the same fixed
        // clocks and random the build used, then switches to the call's
        // (real ones, or deterministic mode's).
        let granted = self.granted(&tool.grants, Instant::now() + limits.timeout);
        let mut store = match self.new_store_granted(self.call_clocks(), !compiled_path, granted) {
            Ok(store) => store,
            Err(message) => return Err(fail(RunError::Instantiate { message })),
        };
        let outcome = tokio::time::timeout(limits.timeout, async {
            if compiled_path {
                let compiled = match ready {
                    Some(c) => c,
                    None => match self.compiled(tool).await {
                        Ok(c) => c,
                        Err(e) => {
                            return Ok(Err(RunError::Instantiate {
                                message: e.to_string(),
                            }));
                        }
                    },
                };
                let instance = compiled.pre.instantiate_async(&mut store).await?;
                let run = compiled.run.load(&mut store, &instance)?;
                run.call_call(&mut store, input)
                    .await
                    .map(|r| r.map_err(RunError::from))
            } else {
                self.start_background_compile(tool);
                let shim = self.shim().await.map_err(wasmtime::Error::msg)?;
                let instance = shim.pre.instantiate_async(&mut store).await?;
                let exports = shim.shim.load(&mut store, &instance)?;
                let bytecode = tool
                    .inner
                    .bytecode
                    .as_deref()
                    .expect("warm-up path has bytecode");
                if let Err(e) = exports
                    .call_load(&mut store, &shim.prelude, bytecode)
                    .await?
                {
                    return Ok(Err(RunError::from(e)));
                }
                store.data().fixed.set_fixed(false);
                let run = shim.run.load(&mut store, &instance)?;
                run.call_call(&mut store, input)
                    .await
                    .map(|r| r.map_err(RunError::from))
            }
        })
        .await;

        let result = match outcome {
            Err(_elapsed) => Err(RunError::Timeout {
                limit_ms: limits.timeout.as_millis() as u64,
            }),
            Ok(Err(trap)) => Err(classify_trap(&store, &trap, limits)),
            Ok(Ok(result)) => result,
        };
        let state = store.into_data();
        let logs = state.console.into_lines();
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
                compiled: compiled_path,
            }),
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

    fn start_background_compile(&self, tool: &Tool) {
        if tool.inner.compiling.swap(true, Ordering::AcqRel) {
            return;
        }
        let rt = self.clone();
        let tool = tool.clone();
        tokio::spawn(async move {
            let _ = rt.compiled(&tool).await;
        });
    }
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
        }
    }
}
