//! The forge: validate → build → test → judge → register, and [`Forge`],
//! the one type an embedder drives to forge, call and move tools between
//! tiers. Every decision lands in the registry's hash-chained audit trail.
//!
//! One module per concern:
//! - [`validate`] (VALIDATE): every check that can refuse a request before a
//!   build, including those that read the registry (compose steps, cycles,
//!   occupancy) through a read-only view;
//! - `pipeline`: the request's path through BUILD, TEST ([`crate::testcase`],
//!   [`schema`]), JUDGE ([`judge`]) and REGISTER;
//! - `invoke`: calling a registered tool with its grants, limits and schema
//!   checks (compose steps linked per call);
//! - [`grant`]: what a caller may reach ([`CallerGrant`]: its tiers and
//!   its narrowings of the hub tools), carried by its [`ForgeContext`] and
//!   checked at every depth of a call;
//! - `transfer`: import, export and bundles of `.wasm` artifacts;
//! - [`bounded`]: reading an artifact to import under `maxArtifactBytes`;
//! - [`agentos`]: import and export of AgentOS tool packages;
//! - `tiers`: listing, stats, promotion (session → agent → shared) and the
//!   session tier's lifetime ([`session`]);
//! - `delete`: removing a tool from the caller's session tier;
//! - [`builtins`]: the built-in tools' names, reserved for them;
//! - [`native`]: host-native tools the embedder registers;
//! - [`hub`]: the tool hub's tools (upstream MCP servers, built-ins) as
//!   host-native tools, filtered by the host policy's `[tools] allow`;
//! - `cache`: the bounded caches of loaded tools, schemas and manifests;
//! - `nested`: counting a session tool's uses through compose steps and
//!   code mode;
//! - `names`: the bounded cache of resolved agent- and shared-tier names,
//!   current within the registry watch's poll interval;
//! - `listing`: the bounded cache of each agent's persisted tools (a
//!   `tools/list`), current as the names are;
//! - [`watch`]: the forge's registry watch, which keeps those caches and
//!   the session tiers' current when other hosts share the store (a
//!   thread of its own polling the audit trail, [`ForgeBuilder::registry_poll`]);
//! - [`test_calls`]: what the TEST stage may call (a hub tool that may act
//!   on its upstream is answered from the request's recorded answers);
//! - [`request_shape`]: a request read and refused in `forge_tool`'s schema
//!   terms;
//! - [`verify`]: rebuilding an artifact from its manifest and comparing bytes.
//!
//! Errors are typed per stage ([`error`]).
//!
//! Every tier lives in the [`Registry`] (the session tier with an idle
//! expiry, so any host on the store serves any session: [`session`]),
//! with artifacts, stats and audit. Registry calls are synchronous (SQLite transactions with
//! fsync, or PostgreSQL round trips): on the call path ([`Forge::invoke`])
//! each runs on tokio's blocking pool ([`Forge::with_store`]), so a slow
//! disk or database never holds an async worker; call counts are written
//! behind by the registry.

// Libraries report through `tracing` (the embedder routes it), never by
// printing: the `temper` binary is the one that prints.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod agentos;
pub mod bounded;
pub mod build;
pub mod builtins;
mod cache;
pub mod code_mode;
pub mod config;
mod delete;
pub mod discovery;
pub mod error;
mod gate;
pub mod grant;
pub mod hub;
mod invoke;
pub mod judge;
mod listing;
pub mod manifest;
mod names;
pub mod native;
mod nested;
pub mod observe;
mod outcome;
mod pipeline;
pub mod request_shape;
pub mod schema;
pub mod session;
mod session_tier;
pub mod test_calls;
pub mod testcase;
mod tiers;
mod transfer;
mod trust;
pub mod validate;
pub mod verify;
pub mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

pub use cache::CacheCapacity;
pub use config::{ForgeConfig, PromotionThreshold};
pub use discovery::{
    FoundTier, FoundTool, SEMANTIC_SCAN_MAX, SearchRequest, SearchScope, Searched,
};
pub use error::{
    DeleteError, ExportError, ForgeError, ImportError, InvokeError, PromoteError, Stage,
    ValidateError,
};
pub use grant::{Access, CallerGrant, GrantError, HubNarrowing, NarrowedBy};
pub use invoke::MAX_COMPOSE_DEPTH;
pub use manifest::{ToolInfo, ToolManifest};
pub use native::{NativeTool, NativeToolSpec};
pub use outcome::{Exported, ForgeResult, Forged, Invocation};
pub use temper_hub::CallOutput;
pub use trust::{DisabledTool, TrustAdmission};

use cache::ToolCache;
use gate::Gate;
use judge::{Judge, NoJudge};
use temper_runtime::runtime::Runtime;
use temper_store::{ArtifactId, Registry, StoreError, StoredArtifact};

/// Who is asking: the agent, its current session, and its grant (what it
/// may reach, at any depth: [`grant`]).
///
/// A context's identity is its agent and session: two contexts of the
/// same (agent, session) are equal and hash alike whatever their grants
/// (it keys sessions and caches; the grant travels with the call).
#[derive(Debug, Clone)]
pub struct ForgeContext {
    /// The agent (owner of agent-tier tools).
    pub agent_id: String,
    /// The session (scope of session-tier tools).
    pub session_id: String,
    /// What the caller may reach (default: unrestricted).
    grant: CallerGrant,
}

impl PartialEq for ForgeContext {
    fn eq(&self, other: &Self) -> bool {
        self.agent_id == other.agent_id && self.session_id == other.session_id
    }
}

impl Eq for ForgeContext {}

impl std::hash::Hash for ForgeContext {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.agent_id.hash(state);
        self.session_id.hash(state);
    }
}

impl ForgeContext {
    /// A context for `agent_id` in `session_id`, unrestricted (every tier,
    /// the hub tools the host policy allows).
    pub fn new(agent_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        Self {
            agent_id: agent_id.into(),
            session_id: session_id.into(),
            grant: CallerGrant::unrestricted(),
        }
    }

    /// This context with `grant` (replacing its grant).
    pub fn with_grant(mut self, grant: CallerGrant) -> Self {
        self.grant = grant;
        self
    }

    /// What the caller may reach.
    pub fn grant(&self) -> &CallerGrant {
        &self.grant
    }
}

/// A codec that rebuilds compact records but makes none
/// ([`ForgeConfig::compact_artifacts`] off).
#[derive(Debug)]
struct ExpandOnly(Arc<dyn temper_store::ArtifactCodec>);

impl temper_store::ArtifactCodec for ExpandOnly {
    fn compact(&self, _id: &temper_runtime::ArtifactId, _artifact: &[u8]) -> Option<Vec<u8>> {
        None
    }

    fn expand(&self, compact: &[u8]) -> Result<Vec<u8>, String> {
        self.0.expand(compact)
    }
}

/// Builder for [`Forge`]. Secure defaults: no judge ([`NoJudge`], every forge
/// is rejected), the promotion panel is the configured judge twice, limits
/// from [`ForgeConfig::default`].
pub struct ForgeBuilder {
    runtime: Runtime,
    store: Arc<Registry>,
    config: ForgeConfig,
    judge: Arc<dyn Judge>,
    panel: Option<(Arc<dyn Judge>, Arc<dyn Judge>)>,
    trust: temper_sign::TrustPolicy,
    registry_poll: Option<std::time::Duration>,
    embedder: Option<Arc<dyn discovery::Embedder>>,
}

impl ForgeBuilder {
    /// How often the forge's registry watch reads the audit trail
    /// (default [`watch::DEFAULT_POLL`], 1 s): the staleness bound of its
    /// caches when other processes or hosts share the store (a change one
    /// of them commits is seen here within it). `None`: no watch, and no
    /// cache of the registry is trusted: every call, listing and forge
    /// reads the tiers it needs from the store (correct on any number of
    /// hosts, but the cost of reading a session tier grows with its tools).
    pub fn registry_poll(mut self, every: Option<std::time::Duration>) -> Self {
        self.registry_poll = every.filter(|d| !d.is_zero());
        self
    }

    /// Sets the forge configuration.
    pub fn config(mut self, config: ForgeConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the embedder whose semantic ranking `search_tools` fuses with
    /// the lexical one (default: none, lexical only).
    pub fn embedder(mut self, embedder: Arc<dyn discovery::Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Sets the creation judge.
    pub fn judge(mut self, judge: Arc<dyn Judge>) -> Self {
        self.judge = judge;
        self
    }

    /// Sets the promotion panel's safety and correctness reviewers (default:
    /// the creation judge for both).
    pub fn panel(mut self, safety: Arc<dyn Judge>, correctness: Arc<dyn Judge>) -> Self {
        self.panel = Some((safety, correctness));
        self
    }

    /// Sets the trust policy imports must meet (default: `level = "off"`,
    /// nothing checked). Check the tiers under it with
    /// [`Forge::check_tiers`] once the forge is built.
    pub fn trust(mut self, policy: temper_sign::TrustPolicy) -> Self {
        self.trust = policy;
        self
    }

    /// Builds the forge. The runtime becomes the store's artifact codec: it
    /// rebuilds compact records, and makes them for new artifacts with
    /// [`ForgeConfig::compact_artifacts`] (the default).
    pub fn build(self) -> Forge {
        // Compact records already in the store are expanded either way.
        let codec = self.runtime.artifact_codec();
        self.store
            .set_stats_flush(std::time::Duration::from_millis(self.config.stats_flush_ms));
        self.store.attach_codec(if self.config.compact_artifacts {
            codec
        } else {
            Arc::new(ExpandOnly(codec))
        });
        let panel = self
            .panel
            .unwrap_or_else(|| (self.judge.clone(), self.judge.clone()));
        let cache = ToolCache::new(self.config.cache);
        let names = names::NameCache::new(self.config.cache.names);
        let listings = listing::ListingCache::new(if self.config.cache.names == 0 {
            0
        } else {
            listing::MAX_AGENTS
        });
        let sessions = session::SessionCache::new(self.config.cache.names);
        let forges = Gate::new(
            "forges",
            self.config.max_in_flight_forges,
            self.config.max_queued,
        );
        let calls = Gate::new(
            "calls",
            self.config.max_in_flight_calls,
            self.config.max_queued,
        );
        let forge = Forge {
            inner: Arc::new(Inner {
                runtime: self.runtime,
                store: self.store,
                config: self.config,
                judge: self.judge,
                panel,
                trust: std::sync::RwLock::new(Arc::new(self.trust)),
                disabled: Mutex::new(std::collections::BTreeMap::new()),
                sessions,
                cache,
                names,
                listings,
                forges,
                calls,
                natives: Mutex::new(HashMap::new()),
                hub: Mutex::new(None),
                hub_synced: std::sync::atomic::AtomicU64::new(u64::MAX),
                hub_unshadowed: hub::Unshadowed::default(),
                run_code_stats: code_mode::RunCodeCounters::default(),
                metrics: std::sync::OnceLock::new(),
                watch: Mutex::new(None),
                embedder: self.embedder,
                hub_index: Default::default(),
            }),
        };
        if let Some(every) = self.registry_poll
            && let Err(e) = forge.start_watch(every)
        {
            // Without a watch nothing cached is trusted: slower, never stale.
            tracing::warn!(
                "the registry watch cannot start ({e}): the forge reads the store for every lookup"
            );
        }
        forge
    }
}

/// The forge: forges, calls and moves tools between tiers. Cheap to clone;
/// safe to share between tasks.
#[derive(Clone)]
pub struct Forge {
    inner: Arc<Inner>,
}

/// What every clone of a [`Forge`] shares.
struct Inner {
    runtime: Runtime,
    store: Arc<Registry>,
    config: ForgeConfig,
    judge: Arc<dyn Judge>,
    panel: (Arc<dyn Judge>, Arc<dyn Judge>),
    /// The trust policy imports must meet.
    trust: std::sync::RwLock<Arc<temper_sign::TrustPolicy>>,
    /// Registered tools the trust policy disabled, by artifact id (at most
    /// one per registered tool of the checked tiers).
    disabled: Mutex<std::collections::BTreeMap<String, trust::DisabledTool>>,
    /// Session tiers read from the store, bounded, kept current by the
    /// registry's sessions epoch and lease; source kept in memory.
    sessions: session::SessionCache,
    /// Loaded tools, adapters, manifests and schemas, bounded.
    cache: ToolCache,
    /// Agent- and shared-tier names resolved, bounded, kept current by
    /// the registry's tiers epoch and lease.
    names: names::NameCache,
    /// The persisted tools each agent can call, bounded, kept current as
    /// `names` is.
    listings: listing::ListingCache,
    /// The bound on forges and imports in flight.
    forges: Gate,
    /// The bound on top-level calls in flight.
    calls: Gate,
    /// Host-native tools by name.
    natives: Mutex<HashMap<String, Arc<NativeTool>>>,
    /// The attached tool hub, whose tools that appear later (an upstream's
    /// `list_changed`) are registered when next looked up.
    hub: Mutex<Option<Arc<temper_hub::Hub>>>,
    /// The hub's [`temper_hub::Hub::generation`] its tools were last
    /// registered at (`u64::MAX`: never).
    hub_synced: std::sync::atomic::AtomicU64,
    /// Hub tool names known to be no agent- or shared-tier tool of an
    /// agent, under a tiers epoch (`hub::Unshadowed`).
    hub_unshadowed: hub::Unshadowed,
    /// `run_code` runs counted.
    run_code_stats: code_mode::RunCodeCounters,
    /// Prometheus metrics, once set (`observe`): off by default.
    metrics: std::sync::OnceLock<Arc<temper_observe::Metrics>>,
    /// The registry watch and its polling thread, once started.
    watch: Mutex<Option<Arc<watch::Polling>>>,
    /// The embedder for semantic ranking, if configured (`discovery`).
    embedder: Option<Arc<dyn discovery::Embedder>>,
    /// The search index of the hub's tools (`discovery::search`).
    hub_index: discovery::search::HubIndex,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The polling thread sees the forge gone at its next wake-up: wake
        // it now.
        if let Some(polling) = lock(&self.watch).take() {
            polling.stop();
        }
    }
}

/// Locks `m`, recovering the data of a poisoned lock (every critical
/// section leaves its map consistent).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Forge {
    /// A builder over `runtime` (its policy and limits apply to every test
    /// and call) and `store`.
    pub fn builder(runtime: Runtime, store: Arc<Registry>) -> ForgeBuilder {
        ForgeBuilder {
            runtime,
            store,
            config: ForgeConfig::default(),
            judge: Arc::new(NoJudge),
            panel: None,
            trust: temper_sign::TrustPolicy::off(),
            registry_poll: Some(watch::DEFAULT_POLL),
            embedder: None,
        }
    }

    /// Starts the forge's registry watch polling every `every` (see
    /// [`ForgeBuilder::registry_poll`]) unless it runs already (then its
    /// own interval stays), and returns it. The watch reads the trail's
    /// head on this thread (a store read).
    pub fn start_watch(
        &self,
        every: std::time::Duration,
    ) -> Result<watch::RegistryWatch, StoreError> {
        let mut slot = lock(&self.inner.watch);
        if let Some(polling) = slot.as_ref() {
            return Ok(polling.watch().clone());
        }
        let polling = watch::Polling::start(self.inner.store.clone(), every)?;
        let watch = polling.watch().clone();
        *slot = Some(polling);
        Ok(watch)
    }

    /// The forge's registry watch, if it runs ([`Forge::start_watch`]).
    pub fn registry_watch(&self) -> Option<watch::RegistryWatch> {
        lock(&self.inner.watch).as_ref().map(|p| p.watch().clone())
    }

    /// The registry changes the forge's watch finds made by other
    /// processes or hosts (whom they concern), as they are found; `None`
    /// without a watch. A receiver that falls behind gets
    /// [`tokio::sync::broadcast::error::RecvError::Lagged`]: it should take
    /// everything as changed.
    pub fn subscribe_changes(&self) -> Option<tokio::sync::broadcast::Receiver<watch::Changes>> {
        lock(&self.inner.watch).as_ref().map(|p| p.subscribe())
    }

    /// Reads the audit trail now, so that every change committed by any
    /// host before this call is seen by the lookups after it (instead of
    /// within the poll interval). Without a watch nothing is cached, and
    /// this does nothing.
    pub async fn refresh(&self) -> Result<watch::Changes, StoreError> {
        let polling = lock(&self.inner.watch).clone();
        match polling {
            Some(p) => p.refresh().await,
            None => Ok(watch::Changes::default()),
        }
    }

    /// The runtime tools run on.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The registry (agent and shared tiers, artifacts, stats, audit).
    pub fn store(&self) -> &Registry {
        &self.inner.store
    }

    /// The registry as a shared handle, for work that outlives a borrow of
    /// the forge (a registry watch, a blocking task).
    pub fn store_handle(&self) -> Arc<Registry> {
        self.inner.store.clone()
    }

    /// Runs `f` with the registry on tokio's blocking pool and waits for
    /// it without holding an async worker (as the registry watch does): a
    /// slow disk or database delays only the calls that need it. A panic
    /// in `f` is resumed here.
    pub async fn with_store<T, F>(&self, op: &'static str, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Registry) -> Result<T, StoreError> + Send + 'static,
    {
        let store = self.inner.store.clone();
        match tokio::task::spawn_blocking(move || f(&store)).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(StoreError::Blocking {
                op,
                detail: e.to_string(),
            }),
        }
    }

    /// The embedder configured for semantic ranking, if any.
    pub fn embedder(&self) -> Option<&Arc<dyn discovery::Embedder>> {
        self.inner.embedder.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &ForgeConfig {
        &self.inner.config
    }

    /// The artifact `id` from the store, checked against its id: a compact
    /// record is rebuilt on this runtime (asynchronously, unlike
    /// [`Registry::get_artifact`]'s codec, which needs a thread of its own).
    pub async fn stored_artifact(&self, id: &ArtifactId) -> Result<Vec<u8>, StoreError> {
        let key = id.clone();
        let stored = self
            .with_store("get_artifact", move |s| s.get_stored(&key))
            .await?;
        match stored {
            StoredArtifact::Wasm(bytes) => Ok(bytes),
            StoredArtifact::Compact(record) => {
                let bytes = self
                    .inner
                    .runtime
                    .expand_compact(&record)
                    .await
                    .map_err(|e| StoreError::Compact {
                        op: "get_artifact",
                        id: id.clone(),
                        detail: e.to_string(),
                    })?;
                temper_store::check_expanded(id, bytes)
            }
        }
    }
}
