//! Opening a [`Forge`] from plain options, the way `temper` does: the store
//! location, the forge config, the judges, the trust policy, the session
//! tier an older `temper` kept on disk, and the tools file's hub.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use temper_forge::judge::{Judge, LlmJudge, LlmJudgeConfig, NoJudge, ReviewFocus, RulesJudge};
use temper_forge::session::SessionSnapshot;
use temper_forge::{
    CallerGrant, DisabledTool, Forge, ForgeConfig, ForgeContext, HubNarrowing, NarrowedBy,
};
use temper_policy::{HostPolicy, LimitsConfig, ToolAllow};
use temper_runtime::limits::{CacheLimits, Limits};
use temper_runtime::{Runtime, RuntimeBuilder};
use temper_sign::TrustPolicy;
use temper_store::StoreLocation;

/// Why a forge (or its runtime) could not be opened. Each variant names
/// what was being read.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The store location does not parse or the store does not open.
    #[error("store: {0}")]
    Store(#[from] temper_store::LocationError),
    /// A PostgreSQL store without `state_dir` on a host with no platform
    /// data directory.
    #[error("no platform data directory for this host's state: pass a state dir")]
    NoStateDir,
    /// The host policy file cannot be read or is not valid.
    #[error("policy: {0}")]
    Policy(#[from] temper_policy::PolicyError),
    /// The runtime could not be built (engine, shim).
    #[error("runtime: {0}")]
    Runtime(#[from] temper_runtime::BuildError),
    /// The forge config file cannot be read or is not valid JSON.
    #[error("forge config {path}: {message}")]
    ForgeConfig {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The trust policy file cannot be read or is not valid.
    #[error("trust policy: {0}")]
    Trust(String),
    /// A judge name that is not `none`, `rules` or `llm`, or an LLM judge
    /// without its URL or model.
    #[error("judge: {0}")]
    Judge(String),
    /// The session tier an older `temper` kept on disk could not be moved
    /// into the store.
    #[error("session file {path} {message}")]
    SessionFile {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The tools file cannot be read, or its sources do not start.
    #[error("tools file {path}: {message}")]
    ToolsFile {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// Checking the agent's tiers under the trust policy failed.
    #[error("trust check: {0}")]
    TrustCheck(#[source] temper_store::StoreError),
}

/// Which judge reviews forges and promotions.
#[derive(Debug, Clone, Default)]
pub enum JudgeChoice {
    /// No judge: every forge and promotion is refused (fail closed).
    #[default]
    None,
    /// The offline rules judge ([`RulesJudge::standard`]).
    Rules,
    /// An OpenAI-compatible chat-completions endpoint, one reviewer per
    /// focus (creation, safety, correctness).
    Llm(LlmJudgeConfig),
}

impl JudgeChoice {
    /// `None` or `"none"` → [`JudgeChoice::None`], `"rules"` →
    /// [`JudgeChoice::Rules`]; anything else is an error (an LLM judge
    /// needs its URL and model: build [`JudgeChoice::Llm`] directly).
    pub fn from_name(name: Option<&str>) -> Result<Self, OpenError> {
        match name {
            None | Some("none") => Ok(JudgeChoice::None),
            Some("rules") => Ok(JudgeChoice::Rules),
            Some(other) => Err(OpenError::Judge(format!(
                "unknown judge {other:?} (known: \"rules\", or none to refuse every forge)"
            ))),
        }
    }

    /// The creation judge, and the promotion panel's safety and
    /// correctness reviewers.
    #[allow(clippy::type_complexity)]
    pub fn judges(&self) -> Result<(Arc<dyn Judge>, Arc<dyn Judge>, Arc<dyn Judge>), OpenError> {
        Ok(match self {
            JudgeChoice::None => (Arc::new(NoJudge), Arc::new(NoJudge), Arc::new(NoJudge)),
            JudgeChoice::Rules => {
                let j: Arc<dyn Judge> = Arc::new(RulesJudge::standard());
                (j.clone(), j.clone(), j)
            }
            JudgeChoice::Llm(cfg) => {
                let make = |focus| {
                    LlmJudge::new(cfg.clone())
                        .map(|j| Arc::new(j.with_focus(focus)) as Arc<dyn Judge>)
                        .map_err(|e| OpenError::Judge(e.to_string()))
                };
                (
                    make(ReviewFocus::Creation)?,
                    make(ReviewFocus::Safety)?,
                    make(ReviewFocus::Correctness)?,
                )
            }
        })
    }
}

/// The host policy in `path`, or deny-all without one.
pub fn load_policy(path: Option<&Path>) -> Result<HostPolicy, OpenError> {
    Ok(match path {
        Some(p) => HostPolicy::from_file(p)?,
        None => HostPolicy::deny_all(),
    })
}

/// What the runtime is built from, as `temper` builds it.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// The host policy (its `[limits]` apply under [`RuntimeOptions::limits`]).
    pub policy: HostPolicy,
    /// Limits that override the policy's `[limits]` (the CLI's flags).
    pub limits: LimitsConfig,
    /// The compiled-component cache directory (default: the platform's).
    pub cache_dir: Option<PathBuf>,
    /// Calls after which a hot tool gets its own compiled snapshot
    /// (default: the library's).
    pub promote_after: Option<u64>,
}

impl RuntimeOptions {
    /// The runtime's builder: the defaults, the policy's `[limits]`, then
    /// [`RuntimeOptions::limits`]. Add what only the caller has (a fetch
    /// cassette) and build it.
    pub fn builder(self) -> RuntimeBuilder {
        let limits = Limits::default()
            .with_policy(&self.policy.limits)
            .with_policy(&self.limits);
        let mut builder = Runtime::builder().limits(limits).policy(self.policy);
        if let Some(dir) = self.cache_dir {
            builder = builder.cache_dir(Some(dir));
        }
        if let Some(calls) = self.promote_after {
            builder = builder.cache_limits(CacheLimits {
                promote_after_calls: calls,
                ..Default::default()
            });
        }
        builder
    }
}

/// Where the registry lives, who is asking, and who judges.
#[derive(Debug, Clone)]
pub struct ForgeOptions {
    /// A store directory or a PostgreSQL URL (`None`: the platform data
    /// dir, e.g. ~/.local/share/temper).
    pub store: Option<String>,
    /// This host's local state (default: the store directory; for a
    /// PostgreSQL store, a directory per database under the platform data
    /// dir).
    pub state_dir: Option<PathBuf>,
    /// The agent acting.
    pub agent: String,
    /// The session (its tools last until it ends).
    pub session: String,
    /// The judge; `None` leaves the forge's default, which refuses every
    /// forge (the CLI's commands that never forge).
    pub judge: Option<JudgeChoice>,
    /// Forge settings as JSON with the seed's `emergentConfig` names.
    pub forge_config: Option<PathBuf>,
    /// Overrides the forge config's `statsFlushMs`.
    pub stats_flush_ms: Option<u64>,
    /// Idle seconds after which implicit sessions expire (0: never); used
    /// only without [`ForgeOptions::forge_config`].
    pub session_idle_secs: u64,
    /// The trust policy file (default: `level = "off"`).
    pub trust: Option<PathBuf>,
    /// How often the forge's registry watch reads the audit trail (default
    /// [`temper_forge::watch::DEFAULT_POLL`]); `None`: no watch, every
    /// lookup reads the store (a one-shot command). See
    /// `ForgeBuilder::registry_poll`.
    pub registry_poll: Option<std::time::Duration>,
    /// Names or globs of the hub tools the caller may reach, directly or
    /// through any tool at any depth, on top of the host policy's
    /// `[tools] allow` (as a token's `tools` narrows them over HTTP):
    /// part of the context's grant ([`temper_forge::grant`]); `None`: the
    /// policy's.
    pub allow_tools: Option<Vec<String>>,
    /// The embedder of `search_tools`' semantic ranking (fused with the
    /// lexical one); `None`: lexical only. See `temper_embedding`.
    pub embedder: Option<SharedEmbedder>,
}

/// An embedder shared by the forges opened with it (its `Debug` is its
/// model id: a key or an endpoint's credentials never print).
#[derive(Clone)]
pub struct SharedEmbedder(pub Arc<dyn temper_forge::discovery::Embedder>);

impl std::fmt::Debug for SharedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SharedEmbedder")
            .field(&self.0.model_id())
            .finish()
    }
}

impl Default for ForgeOptions {
    fn default() -> Self {
        Self {
            store: None,
            state_dir: None,
            agent: "default".into(),
            session: "default".into(),
            judge: None,
            forge_config: None,
            stats_flush_ms: None,
            session_idle_secs: 0,
            trust: None,
            registry_poll: Some(temper_forge::watch::DEFAULT_POLL),
            allow_tools: None,
            embedder: None,
        }
    }
}

/// An opened registry: the engine, the caller's context, and the tools
/// file's hub once attached.
pub struct Opened {
    /// The engine.
    pub forge: Forge,
    /// The agent and session acting.
    pub ctx: ForgeContext,
    /// The started tool hub (its upstream children live as long as it).
    pub hub: Option<Arc<temper_hub::Hub>>,
}

/// The trust policy in `path`, or `level = "off"` without one.
pub fn trust_policy(path: Option<&Path>) -> Result<TrustPolicy, OpenError> {
    match path {
        None => Ok(TrustPolicy::off()),
        Some(p) => TrustPolicy::load(p).map_err(|e| OpenError::Trust(e.to_string())),
    }
}

impl Opened {
    /// Opens the store and builds the engine on `runtime`, as `temper`
    /// does: a forge opened here and `temper forge` of the same request
    /// register the same artifact id.
    pub fn open(options: &ForgeOptions, runtime: Runtime) -> Result<Self, OpenError> {
        let location = StoreLocation::from_arg(options.store.as_deref())?;
        let state_dir = match &options.state_dir {
            Some(d) => d.clone(),
            None => location.default_state_dir().ok_or(OpenError::NoStateDir)?,
        };
        let store = location.open()?;
        let mut config = match &options.forge_config {
            None => ForgeConfig::default(),
            Some(path) => {
                let bad = |message: String| OpenError::ForgeConfig {
                    path: path.clone(),
                    message,
                };
                let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
                serde_json::from_str(&text).map_err(|e| bad(format!("bad forge config: {e}")))?
            }
        };
        if let Some(ms) = options.stats_flush_ms {
            config.stats_flush_ms = ms;
        }
        if options.forge_config.is_none() {
            config.session_idle_secs = options.session_idle_secs;
        }
        let trust = trust_policy(options.trust.as_deref())?;
        let mut builder = Forge::builder(runtime, Arc::new(store))
            .config(config)
            .trust(trust)
            .registry_poll(options.registry_poll);
        if let Some(judge) = &options.judge {
            let (creation, safety, correctness) = judge.judges()?;
            builder = builder.judge(creation).panel(safety, correctness);
        }
        if let Some(SharedEmbedder(embedder)) = &options.embedder {
            builder = builder.embedder(embedder.clone());
        }
        let forge = builder.build();
        let narrowing = match &options.allow_tools {
            Some(globs) => Some(HubNarrowing::new(
                ToolAllow::for_key("allow_tools", "a tool name", globs.clone())?,
                NarrowedBy::Context,
            )),
            None => None,
        };
        let ctx = ForgeContext::new(options.agent.clone(), options.session.clone())
            .with_grant(CallerGrant::unrestricted().narrowed(narrowing));
        SessionFile::new(&state_dir, &ctx).migrate(&forge)?;
        Ok(Self {
            forge,
            ctx,
            hub: None,
        })
    }

    /// Starts the tools file's sources and registers the hub tools the host
    /// policy allows as host tools. Returns how many of the hub's tools
    /// were registered, and how many it offered.
    pub async fn attach_hub(&mut self, tools: &Path) -> Result<(usize, usize), OpenError> {
        let bad = |message: String| OpenError::ToolsFile {
            path: tools.to_path_buf(),
            message,
        };
        let file = temper_hub::ToolsFile::load(tools).map_err(|e| bad(e.to_string()))?;
        let hub = Arc::new(
            temper_hub::Hub::start(&file)
                .await
                .map_err(|e| bad(e.to_string()))?,
        );
        let registered = self
            .forge
            .attach_hub(hub.clone())
            .map_err(|e| bad(e.to_string()))?;
        let offered = hub.tools().len();
        if registered.len() < offered {
            tracing::info!(
                "tools file {}: {} of {offered} hub tools allowed by the host policy's [tools] allow",
                tools.display(),
                registered.len()
            );
        }
        self.hub = Some(hub);
        Ok((registered.len(), offered))
    }

    /// Checks `agents`' agent tiers and the shared tier under the trust
    /// policy (nothing to do with `level = "off"`): the tools it disables.
    pub async fn check_tiers(&self, agents: &[&str]) -> Result<Vec<DisabledTool>, OpenError> {
        if self.forge.trust().level == temper_sign::Level::Off {
            return Ok(Vec::new());
        }
        let mut disabled = Vec::new();
        for agent in agents {
            disabled.extend(
                self.forge
                    .check_tiers(agent)
                    .await
                    .map_err(OpenError::TrustCheck)?,
            );
        }
        Ok(disabled)
    }

    /// Writes the calls counted in memory to the store (the session tier
    /// itself is stored as it changes).
    pub fn save(&self) -> Result<(), temper_store::StoreError> {
        self.forge.store().flush_stats()
    }
}

/// A session tier an older `temper` kept on disk:
/// `STATE_DIR/sessions/<blake3(agent, session)>.json`. Opening the session
/// moves its tools into the store (each with a `forge_decision` entry
/// marked `restored`) and removes the file, under the file's lock
/// (`<file>.lock`) so that two processes do not both move it.
struct SessionFile {
    path: PathBuf,
}

impl SessionFile {
    fn new(state_dir: &Path, ctx: &ForgeContext) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(ctx.agent_id.as_bytes());
        h.update(b"\0");
        h.update(ctx.session_id.as_bytes());
        let name = format!("{}.json", &h.finalize().to_hex()[..32]);
        Self {
            path: state_dir.join("sessions").join(name),
        }
    }

    fn err(&self, message: String) -> OpenError {
        OpenError::SessionFile {
            path: self.path.clone(),
            message,
        }
    }

    /// The saved snapshot, if there is one.
    fn read(&self) -> Result<Option<SessionSnapshot>, OpenError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.err(format!("cannot be read: {e}"))),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| self.err(format!("is damaged: {e}")))
    }

    /// Moves a saved tier into the store, if there is one.
    fn migrate(&self, forge: &Forge) -> Result<(), OpenError> {
        if !self.path.exists() {
            return Ok(());
        }
        let _lock = self.lock()?;
        if let Some(snapshot) = self.read()? {
            forge
                .restore_session(snapshot)
                .map_err(|e| self.err(format!("could not be moved into the store: {e}")))?;
        }
        self.remove_locked()
    }

    /// Holds the session's lock file, exclusively, until dropped.
    fn lock(&self) -> Result<std::fs::File, OpenError> {
        let dir = self.path.parent().expect("has a parent");
        std::fs::create_dir_all(dir)
            .map_err(|e| self.err(format!("(cannot create {}: {e})", dir.display())))?;
        let lock_path = self.path.with_extension("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| self.err(format!("(cannot open {}: {e})", lock_path.display())))?;
        file.lock()
            .map_err(|e| self.err(format!("(cannot lock {}: {e})", lock_path.display())))?;
        Ok(file)
    }

    fn remove_locked(&self) -> Result<(), OpenError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.err(format!("cannot be removed: {e}"))),
        }
    }
}
