//! [`Forge`]: the engine an agent drives. `forge` runs a request through
//! validate → build → test → judge → register; `invoke` calls a registered
//! tool with its grants and limits and validates its output (reuse
//! validation); `promote` (session → agent, with a two-reviewer panel) and
//! `approve` (agent → shared, a human's call) move tools between tiers;
//! `cleanup_session` discards a session's tools. Every decision lands in the
//! store's hash-chained audit trail.
//!
//! The session tier lives in this engine's memory ([`super::session`]); the
//! agent and shared tiers, artifacts, stats and audit live in the [`Store`].
//! Store calls are synchronous SQLite transactions (with fsync); they run on
//! the calling task.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use serde::Serialize;
use serde_json::{Value, json};

use super::config::ForgeConfig;
use super::error::{
    ExportError, ForgeError, ImportError, InvokeError, PromoteError, Stage, ValidateError,
};
use super::judge::{
    Judge, NoJudge, PanelVerdict, TestResultSummary, ToolCandidate, Verdict, panel,
};
use super::manifest::{ToolInfo, ToolManifest};
use super::native::{NativeFuture, NativeTool, NativeToolSpec};
use super::schema::ToolSchemas;
use super::session::{CallCounters, SessionSnapshot, SessionTool, SessionTools};
use super::validate::{self, Checked, Occupancy, ValidatedCompose};
use crate::artifact::{self, ArtifactManifest, StepRef};
use crate::compose::run::{ComposeTool, LinkedStep, StepCall, StepFuture, StepOutput};
use crate::error::BuildError;
use crate::host_state::LogLine;
use crate::request::{ForgeRequest, Implementation};
use crate::runtime::{Artifact, CallFailure, CallOutput, Runtime, Tool};
use crate::store::{ArtifactId, AuditKind, Store, StoreError, Tier, ToolRecord, ToolStats};
use crate::testcase::{CaseResult, run_cases, run_cases_with};

/// What [`Forge::call_artifact`] returns: the output, its console lines and
/// the call's latency (µs).
type CallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(Value, Vec<LogLine>, u64), InvokeError>> + Send + 'a>>;

/// How deep compose tools may nest (a compose step that is itself a
/// compose tool is one level). Cycles are refused at forge time; this
/// bounds the run even so.
pub const MAX_COMPOSE_DEPTH: usize = 8;

/// Who is asking: the agent and its current session.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ForgeContext {
    /// The agent (owner of agent-tier tools).
    pub agent_id: String,
    /// The session (scope of session-tier tools).
    pub session_id: String,
}

impl ForgeContext {
    /// A context for `agent_id` in `session_id`.
    pub fn new(agent_id: impl Into<String>, session_id: impl Into<String>) -> Self {
        Self {
            agent_id: agent_id.into(),
            session_id: session_id.into(),
        }
    }

    fn key(&self) -> (String, String) {
        (self.agent_id.clone(), self.session_id.clone())
    }
}

/// A successful forge: the registered tool, the verdict and the test results.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forged {
    /// The tool, in the session tier.
    pub tool: ToolInfo,
    /// The judge's verdict.
    pub verdict: Verdict,
    /// The test results (first run).
    pub test_results: Vec<CaseResult>,
}

/// The seed's `ForgeResult` shape: `success`, `tool`, `verdict`, `errors`,
/// plus the refusing `stage` and the test results when there are some.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForgeResult {
    /// Whether the tool was registered.
    pub success: bool,
    /// The tool, when registered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolInfo>,
    /// The judge's verdict, when the judge ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// Why it was refused (empty on success).
    pub errors: Vec<String>,
    /// The stage that refused it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<Stage>,
    /// Test results, when the tests ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub test_results: Vec<CaseResult>,
}

impl From<&Result<Forged, ForgeError>> for ForgeResult {
    fn from(outcome: &Result<Forged, ForgeError>) -> Self {
        match outcome {
            Ok(f) => ForgeResult {
                success: true,
                tool: Some(f.tool.clone()),
                verdict: Some(f.verdict.clone()),
                errors: Vec::new(),
                stage: None,
                test_results: f.test_results.clone(),
            },
            Err(e) => {
                let (verdict, results) = match e {
                    ForgeError::Judge { verdict, results } => {
                        (Some(verdict.clone()), results.clone())
                    }
                    ForgeError::Test { results, .. } => (None, results.clone()),
                    _ => (None, Vec::new()),
                };
                ForgeResult {
                    success: false,
                    tool: None,
                    verdict,
                    errors: vec![e.to_string()],
                    stage: Some(e.stage()),
                    test_results: results,
                }
            }
        }
    }
}

/// A successful invocation.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Invocation {
    /// The tool's output (matched its `outputSchema`).
    pub output: Value,
    /// Console lines it printed.
    pub logs: Vec<LogLine>,
    /// Wall-clock time of the call, ms.
    pub latency_ms: f64,
    /// The tier it was found in.
    pub tier: Tier,
    /// Its artifact's blake3.
    pub tool_id: String,
}

/// Builder for [`Forge`]. Secure defaults: no judge ([`NoJudge`], every forge
/// is rejected), the promotion panel is the configured judge twice, limits
/// from [`ForgeConfig::default`].
pub struct ForgeBuilder {
    runtime: Runtime,
    store: Arc<Store>,
    config: ForgeConfig,
    judge: Arc<dyn Judge>,
    panel: Option<(Arc<dyn Judge>, Arc<dyn Judge>)>,
}

impl ForgeBuilder {
    /// Sets the forge configuration.
    pub fn config(mut self, config: ForgeConfig) -> Self {
        self.config = config;
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

    /// Builds the engine.
    pub fn build(self) -> Forge {
        let panel = self
            .panel
            .unwrap_or_else(|| (self.judge.clone(), self.judge.clone()));
        Forge {
            inner: Arc::new(Inner {
                runtime: self.runtime,
                store: self.store,
                config: self.config,
                judge: self.judge,
                panel,
                sessions: Mutex::new(HashMap::new()),
                loaded: Mutex::new(HashMap::new()),
                composed: Mutex::new(HashMap::new()),
                step_manifests: Mutex::new(HashMap::new()),
                schemas: Mutex::new(HashMap::new()),
                natives: Mutex::new(HashMap::new()),
            }),
        }
    }
}

/// The forge engine. Cheap to clone; safe to share between tasks.
#[derive(Clone)]
pub struct Forge {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Runtime,
    store: Arc<Store>,
    config: ForgeConfig,
    judge: Arc<dyn Judge>,
    panel: (Arc<dyn Judge>, Arc<dyn Judge>),
    sessions: Mutex<HashMap<(String, String), SessionTools>>,
    /// Tools by artifact id, without grants (granted per call).
    loaded: Mutex<HashMap<ArtifactId, Tool>>,
    /// Compose adapters by artifact id, compiled and linked.
    composed: Mutex<HashMap<ArtifactId, ComposeTool>>,
    /// Manifests of artifacts used as compose steps, by artifact id.
    step_manifests: Mutex<HashMap<ArtifactId, Arc<ArtifactManifest>>>,
    /// Compiled schemas by artifact id.
    schemas: Mutex<HashMap<ArtifactId, Arc<ToolSchemas>>>,
    /// Host-native tools by name.
    natives: Mutex<HashMap<String, Arc<NativeTool>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What runs a tool on its way through TEST, JUDGE and REGISTER.
enum Runnable {
    /// A sandbox (or other `tool`-world) component, without grants.
    Sandbox(Tool),
    /// A compose adapter.
    Compose(ComposeTool),
}

/// An artifact on its way through TEST, JUDGE and REGISTER.
struct Admission {
    manifest: ArtifactManifest,
    bytes: Arc<Vec<u8>>,
    runnable: Runnable,
    schemas: ToolSchemas,
    /// Source for the judge (kept in memory for the session tier).
    source: Option<String>,
    imported: bool,
}

/// An exported artifact and its provenance.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The `.wasm` bytes.
    pub bytes: Vec<u8>,
    /// Their blake3 (the tool's id as a file).
    pub id: String,
    /// The tool as registered.
    pub tool: ToolInfo,
    /// Its audit entries (forge decision, registration, promotions,
    /// approvals...), for a sidecar file: who and when stay out of the
    /// artifact's bytes.
    pub provenance: Vec<Value>,
}

/// A resolved tool: where it lives and what it is.
struct Target {
    tier: Tier,
    artifact: ArtifactId,
    manifest: ToolManifest,
}

fn summaries(results: &[CaseResult]) -> Vec<TestResultSummary> {
    results
        .iter()
        .map(|r| TestResultSummary {
            index: r.index,
            passed: r.passed,
            input: r.input.clone(),
            output: r.output.clone(),
            failure: r.failure.clone(),
        })
        .collect()
}

/// `built` with `manifest` embedded: the registered (and exported) bytes.
fn with_manifest(built: &Artifact, manifest: &ArtifactManifest) -> Result<Artifact, ForgeError> {
    let bytes = artifact::embed(&built.bytes, manifest).map_err(|e| {
        ForgeError::Build(crate::error::BuildError::Internal {
            stage: "embed manifest",
            message: e.to_string(),
        })
    })?;
    Ok(Artifact {
        id: blake3::hash(&bytes).to_hex().to_string(),
        bytes: Arc::new(bytes),
        bytecode: built.bytecode.clone(),
    })
}

/// What the judge sees of a compose tool: its steps with their tools
/// (pinned) and mappings.
fn composition_of(m: &ArtifactManifest) -> Option<Value> {
    (m.mode == "compose").then(|| json!({ "steps": m.steps }))
}

/// A compose step that is a registered artifact.
struct ArtifactStep {
    forge: Forge,
    id: ArtifactId,
    manifest: Arc<ArtifactManifest>,
    depth: usize,
}

impl StepCall for ArtifactStep {
    fn call(&self, input: String) -> StepFuture<'_> {
        Box::pin(async move {
            let input: Value = serde_json::from_str(&input)
                .map_err(|e| format!("{}: input is not JSON: {e}", self.manifest.name))?;
            let (output, logs, _) = self
                .forge
                .call_artifact(&self.id, &self.manifest, &input, self.depth)
                .await
                .map_err(|e| e.to_string())?;
            Ok(StepOutput {
                output: output.to_string(),
                logs,
            })
        })
    }
}

/// A compose step that is a host-native tool.
struct NativeStep {
    tool: Arc<NativeTool>,
    timeout: std::time::Duration,
}

impl StepCall for NativeStep {
    fn call(&self, input: String) -> StepFuture<'_> {
        Box::pin(async move {
            let output = self.tool.invoke(&input, self.timeout).await?;
            Ok(StepOutput {
                output,
                logs: Vec::new(),
            })
        })
    }
}

fn used_apis(source: &str) -> Vec<String> {
    crate::static_check::used_capabilities(source)
        .into_iter()
        .map(|c| c.as_str().to_string())
        .collect()
}

impl Forge {
    /// A builder over `runtime` (its policy and limits apply to every test
    /// and call) and `store`.
    pub fn builder(runtime: Runtime, store: Arc<Store>) -> ForgeBuilder {
        ForgeBuilder {
            runtime,
            store,
            config: ForgeConfig::default(),
            judge: Arc::new(NoJudge),
            panel: None,
        }
    }

    /// The runtime tools run on.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// The configuration.
    pub fn config(&self) -> &ForgeConfig {
        &self.inner.config
    }

    // ---- forge -----------------------------------------------------------

    /// Parses `json` as a forge request and forges it; a document that is
    /// not a forge request is refused at the validate stage.
    pub async fn forge_json(&self, json: &str, ctx: &ForgeContext) -> Result<Forged, ForgeError> {
        self.forge_json_with_progress(json, ctx, &|_| {}).await
    }

    /// [`Forge::forge_json`], calling `progress` as each stage starts
    /// (validate, build, test, judge, register), e.g. to report progress to
    /// a client.
    pub async fn forge_json_with_progress(
        &self,
        json: &str,
        ctx: &ForgeContext,
        progress: &(dyn Fn(Stage) + Send + Sync),
    ) -> Result<Forged, ForgeError> {
        match ForgeRequest::from_json(json) {
            Ok(request) => self.forge_with_progress(&request, ctx, progress).await,
            Err(e) => {
                let err = ForgeError::Validate(ValidateError::Request(e.to_string()));
                self.audit_rejection("(invalid request)", ctx, &err);
                Err(err)
            }
        }
    }

    /// Runs `request` through validate → build → test → judge → register.
    /// On success the tool is in `ctx`'s session tier. Every outcome,
    /// approval or refusal, is appended to the audit trail as a
    /// `forge_decision` (a refusal whose entry cannot be written is still
    /// returned as that refusal).
    pub async fn forge(
        &self,
        request: &ForgeRequest,
        ctx: &ForgeContext,
    ) -> Result<Forged, ForgeError> {
        self.forge_with_progress(request, ctx, &|_| {}).await
    }

    /// [`Forge::forge`], calling `progress` as each stage starts.
    pub async fn forge_with_progress(
        &self,
        request: &ForgeRequest,
        ctx: &ForgeContext,
        progress: &(dyn Fn(Stage) + Send + Sync),
    ) -> Result<Forged, ForgeError> {
        let outcome = self.pipeline(request, ctx, progress).await;
        if let Err(e) = &outcome
            && !matches!(e, ForgeError::Register(_))
        {
            self.audit_rejection(&request.name, ctx, e);
        }
        outcome
    }

    fn audit_rejection(&self, name: &str, ctx: &ForgeContext, e: &ForgeError) {
        let verdict = match e {
            ForgeError::Judge { verdict, .. } => Some(verdict),
            _ => None,
        };
        let payload = json!({
            "approved": false,
            "session": ctx.session_id,
            "stage": e.stage().as_str(),
            "reasons": [e.to_string()],
            "verdict": verdict,
        });
        let _ = self.inner.store.append_audit(
            AuditKind::ForgeDecision,
            name,
            Some(&ctx.agent_id),
            &payload,
        );
    }

    fn occupancy(
        &self,
        sessions: &HashMap<(String, String), SessionTools>,
        name: &str,
        ctx: &ForgeContext,
    ) -> Result<Occupancy, StoreError> {
        let session = sessions.get(&ctx.key());
        let name_taken = if session.is_some_and(|s| s.contains_key(name)) {
            Some(Tier::Session)
        } else {
            self.inner.store.get(name, &ctx.agent_id)?.map(|r| r.tier)
        };
        Ok(Occupancy {
            session_tools: session.map_or(0, |s| s.len()),
            agent_tools: self.inner.store.agent_tool_count(&ctx.agent_id)?,
            name_taken,
        })
    }

    /// The name is free and `tier` has room: the session limit applies to
    /// the session tier, the agent limit to the session and agent tiers.
    fn check_occupancy(
        &self,
        sessions: &HashMap<(String, String), SessionTools>,
        name: &str,
        ctx: &ForgeContext,
        tier: Tier,
    ) -> Result<(), ValidateError> {
        let occupancy = self.occupancy(sessions, name, ctx)?;
        validate::check_occupancy(
            name,
            &ctx.agent_id,
            &ctx.session_id,
            tier,
            occupancy,
            &self.inner.config,
        )
    }

    /// A compose request without an `outputSchema` takes its last step's
    /// (the last step's output is the tool's output, already checked
    /// against that schema); any other request is returned as is.
    fn with_inherited_output_schema<'r>(
        &self,
        request: &'r ForgeRequest,
        ctx: &ForgeContext,
    ) -> std::borrow::Cow<'r, ForgeRequest> {
        let Implementation::Compose { steps } = &request.implementation else {
            return std::borrow::Cow::Borrowed(request);
        };
        if !request.output_schema.is_null() {
            return std::borrow::Cow::Borrowed(request);
        }
        let Some(tool) = steps
            .last()
            .and_then(|s| s.get("tool"))
            .and_then(Value::as_str)
        else {
            return std::borrow::Cow::Borrowed(request);
        };
        let schema = match self.resolve(tool, ctx) {
            Ok(target) => Some(target.manifest.artifact.output_schema),
            Err(_) => lock(&self.inner.natives)
                .get(tool)
                .map(|n| n.spec.output_schema.clone()),
        };
        match schema {
            Some(schema) => {
                let mut owned = request.clone();
                owned.output_schema = schema;
                std::borrow::Cow::Owned(owned)
            }
            None => std::borrow::Cow::Borrowed(request),
        }
    }

    async fn pipeline(
        &self,
        request: &ForgeRequest,
        ctx: &ForgeContext,
        progress: &(dyn Fn(Stage) + Send + Sync),
    ) -> Result<Forged, ForgeError> {
        let inner = &self.inner;
        let runtime = &inner.runtime;

        // VALIDATE
        progress(Stage::Validate);
        let request = &*self.with_inherited_output_schema(request, ctx);
        let v = match validate::check(request, runtime.policy())? {
            Checked::Sandbox(v) => v,
            Checked::Compose(v) => {
                self.check_occupancy(&lock(&inner.sessions), &request.name, ctx, Tier::Session)?;
                return self.compose_pipeline(request, v, ctx, progress).await;
            }
        };
        self.check_occupancy(&lock(&inner.sessions), &request.name, ctx, Tier::Session)?;

        // BUILD: the component, then its manifest section.
        progress(Stage::Build);
        let built = runtime.build(v.code).await?;
        let manifest = ArtifactManifest::sandbox(
            &request.name,
            &request.description,
            &request.input_schema,
            &request.output_schema,
            v.allowlist,
            &request.test_cases,
            v.code,
            inner.config.persist_sandbox_source,
        );
        let artifact = with_manifest(&built, &manifest)?;
        let base = runtime.tool(&artifact);
        self.admit(
            Admission {
                manifest,
                bytes: artifact.bytes.clone(),
                runnable: Runnable::Sandbox(base),
                schemas: v.schemas,
                source: Some(v.code.to_string()),
                imported: false,
            },
            ctx,
            Tier::Session,
            progress,
        )
        .await
    }

    /// TEST, JUDGE and REGISTER for a built (or imported) artifact.
    async fn admit(
        &self,
        a: Admission,
        ctx: &ForgeContext,
        tier: Tier,
        progress: &(dyn Fn(Stage) + Send + Sync),
    ) -> Result<Forged, ForgeError> {
        let inner = &self.inner;
        let m = &a.manifest;

        // TEST (twice: the repeat run is the determinism evidence)
        progress(Stage::Test);
        let results = self.test_run(&a).await?;
        let failed: Vec<&CaseResult> = results.iter().filter(|r| !r.passed).collect();
        if let Some(first) = failed.first() {
            return Err(ForgeError::Test {
                failed: failed.len(),
                total: results.len(),
                first: format!(
                    "case #{}: {}",
                    first.index,
                    first.failure.as_deref().unwrap_or("failed")
                ),
                results: results.clone(),
            });
        }
        let repeat = self.test_run(&a).await?;

        // JUDGE
        let test_results = summaries(&results);
        let repeat_run = Some(summaries(&repeat));
        let candidate = ToolCandidate {
            name: m.name.clone(),
            description: m.description.clone(),
            input_schema: m.input_schema.clone(),
            output_schema: Some(m.output_schema.clone()),
            source: a.source.clone(),
            composition: composition_of(m),
            allowlist: m.capabilities.clone(),
            test_results: test_results.clone(),
            used_apis: match &a.source {
                Some(src) => used_apis(src),
                None => m.capabilities.clone(),
            },
            repeat_run: repeat_run.clone(),
            bytecode_only: a.source.is_none() && m.mode != "compose",
        };
        progress(Stage::Judge);
        let verdict = inner.judge.review(&candidate).await;
        if !verdict.approved {
            return Err(ForgeError::Judge { verdict, results });
        }

        // REGISTER
        progress(Stage::Register);
        let id = inner
            .store
            .put_artifact(&a.bytes)
            .map_err(ForgeError::Register)?;
        let manifest = ToolManifest {
            artifact: a.manifest.clone(),
            verdict: verdict.clone(),
            test_results,
            repeat_run,
        };
        let decision = json!({
            "approved": true,
            "imported": a.imported,
            "session": ctx.session_id,
            "tier": tier.as_str(),
            "artifact": id.as_str(),
            "sourceBlake3": manifest.artifact.source_blake3,
            "verdict": verdict,
        });
        let info = {
            let mut sessions = lock(&inner.sessions);
            // Re-checked under the lock: a concurrent forge may have taken
            // the name or the last slot.
            self.check_occupancy(&sessions, &m.name, ctx, tier)?;
            if tier == Tier::Session {
                inner
                    .store
                    .append_audit(
                        AuditKind::ForgeDecision,
                        &m.name,
                        Some(&ctx.agent_id),
                        &decision,
                    )
                    .map_err(ForgeError::Register)?;
                sessions.entry(ctx.key()).or_default().insert(
                    m.name.clone(),
                    SessionTool {
                        artifact: id.clone(),
                        manifest: manifest.clone(),
                        source_in_memory: a.source.clone(),
                        counters: CallCounters::default(),
                    },
                );
                ToolInfo::new(
                    &manifest,
                    Tier::Session,
                    id.as_str(),
                    Some(ctx.agent_id.clone()),
                    Some(ctx.session_id.clone()),
                )
            } else {
                let record = ToolRecord {
                    name: m.name.clone(),
                    agent_id: Some(ctx.agent_id.clone()),
                    session_id: Some(ctx.session_id.clone()),
                    tier,
                    artifact: id.clone(),
                    manifest: serde_json::to_value(&manifest).expect("a manifest serializes"),
                    created_seq: 0,
                };
                let record = inner
                    .store
                    .register_with_entry(record, AuditKind::ForgeDecision, &decision)
                    .map_err(ForgeError::Register)?;
                Self::info_of(record).map_err(ForgeError::Register)?
            }
        };
        lock(&inner.schemas).insert(id.clone(), Arc::new(a.schemas));
        match a.runnable {
            Runnable::Sandbox(base) => {
                lock(&inner.loaded).insert(id, base);
            }
            Runnable::Compose(tool) => {
                lock(&inner.composed).insert(id, tool);
            }
        }
        Ok(Forged {
            tool: info,
            verdict,
            test_results: results,
        })
    }

    /// Imports a `.wasm` artifact into `tier` for `ctx`: the file must be a
    /// `tool`-world component with a well-formed manifest whose requested
    /// capabilities all fit this host's policy (refused naming each one
    /// that does not); then its test cases run under this host's limits, the
    /// judge reviews it (a bytecode-only artifact is marked so), and it is
    /// registered. Grants are always the manifest's capabilities ∩ this
    /// host's policy. Nothing is stored unless every step passes.
    pub async fn import(
        &self,
        bytes: Vec<u8>,
        ctx: &ForgeContext,
        tier: Tier,
    ) -> Result<Forged, ForgeError> {
        let outcome = self.import_inner(bytes, ctx, tier).await;
        if let Err(e) = &outcome
            && !matches!(e, ForgeError::Register(_))
        {
            self.audit_rejection("(import)", ctx, e);
        }
        outcome
    }

    async fn import_inner(
        &self,
        bytes: Vec<u8>,
        ctx: &ForgeContext,
        tier: Tier,
    ) -> Result<Forged, ForgeError> {
        let manifest = artifact::read_manifest(&bytes).map_err(ImportError::Artifact)?;
        if manifest.mode == "compose" {
            return Err(ValidateError::ComposeImport(manifest.name).into());
        }
        validate::check_name(&manifest.name)?;
        if manifest.description.trim().is_empty() {
            return Err(ValidateError::Description("is empty".into()).into());
        }
        let schemas = ToolSchemas::compile(&manifest.input_schema, &manifest.output_schema)
            .map_err(ValidateError::from)?;
        let policy = self.inner.runtime.policy();
        let refused: Vec<String> = manifest
            .capabilities
            .iter()
            .filter_map(|name| match name.parse::<crate::policy::Capability>() {
                Err(_) => Some(format!("{name} (unknown capability)")),
                Ok(cap) if !policy.allowed.contains(&cap) => {
                    Some(format!("{name} (not allowed by this host's policy)"))
                }
                Ok(_) => None,
            })
            .collect();
        if !refused.is_empty() {
            return Err(ImportError::Capabilities(refused).into());
        }
        if let Some(source) = &manifest.source {
            let hash = blake3::hash(source.as_bytes()).to_hex().to_string();
            if hash != manifest.source_blake3 {
                return Err(ImportError::SourceMismatch {
                    recorded: manifest.source_blake3.clone(),
                    actual: hash,
                }
                .into());
            }
            crate::static_check::check(source).map_err(ValidateError::from)?;
        }
        self.check_occupancy(&lock(&self.inner.sessions), &manifest.name, ctx, tier)?;
        let base = if manifest.mode == "bundle" {
            self.bundle_tool(bytes.clone()).await?
        } else {
            self.inner
                .runtime
                .load(bytes.clone())
                .await
                .map_err(ImportError::Load)?
        };
        let source = manifest.source.clone();
        self.admit(
            Admission {
                manifest,
                bytes: Arc::new(bytes),
                runnable: Runnable::Sandbox(base),
                schemas,
                source,
                imported: true,
            },
            ctx,
            tier,
            &|_| {},
        )
        .await
    }

    /// The artifact of the tool `name_or_id` (a name, or an artifact id, as
    /// `ctx` sees it). With `with_source`, the artifact carries the source
    /// for review: the persisted or in-memory one, or `source` (checked
    /// against the recorded blake3); that is a different file, with its own
    /// id. Also returns the tool's provenance (its audit entries) for an
    /// optional sidecar file.
    pub fn export(
        &self,
        name_or_id: &str,
        ctx: &ForgeContext,
        with_source: bool,
        source: Option<&str>,
    ) -> Result<Exported, ExportError> {
        let info = self.find_visible(name_or_id, ctx)?;
        let id = ArtifactId::from_hex(&info.id)?;
        let mut bytes = self.inner.store.get_artifact(&id)?;
        // A compose tool's manifest carries its whole pipeline already.
        if with_source && info.mode != "compose" {
            let (mut manifest, component) = artifact::split(&bytes)?;
            if manifest.source.is_none() {
                let kept = lock(&self.inner.sessions)
                    .get(&ctx.key())
                    .and_then(|s| s.get(&info.name))
                    .and_then(|t| t.source_in_memory.clone());
                let given = match (source, kept) {
                    (Some(s), _) => s.to_string(),
                    (None, Some(k)) => k,
                    (None, None) => return Err(ExportError::NoSource(info.name.clone())),
                };
                let hash = blake3::hash(given.as_bytes()).to_hex().to_string();
                if hash != manifest.source_blake3 {
                    return Err(ExportError::SourceMismatch {
                        recorded: manifest.source_blake3.clone(),
                        actual: hash,
                    });
                }
                manifest.source = Some(given);
                bytes = artifact::embed(component, &manifest)?;
            }
        }
        let provenance = self.provenance(&info.name)?;
        Ok(Exported {
            id: blake3::hash(&bytes).to_hex().to_string(),
            bytes,
            tool: info,
            provenance,
        })
    }

    /// The tool `name_or_id` (a name, else an artifact id) as `ctx` sees it.
    fn find_visible(&self, name_or_id: &str, ctx: &ForgeContext) -> Result<ToolInfo, ExportError> {
        let visible = self.visible_tools(ctx)?;
        visible
            .iter()
            .find(|t| t.name == name_or_id)
            .or_else(|| visible.iter().find(|t| t.id == name_or_id))
            .cloned()
            .ok_or_else(|| ExportError::NotFound(name_or_id.to_string()))
    }

    /// A compose tool as one self-contained component (see
    /// [`crate::compose::bundle`]): its adapter composed with its component
    /// steps (nested compose steps bundled first), host-native steps left
    /// as imports named after their tools. The bundle carries a manifest of
    /// mode `bundle` whose capabilities are the union of its steps' (steps
    /// not granted `fetch`/`crypto` get a deny instance instead). Same tool,
    /// same bytes.
    pub fn export_bundle(
        &self,
        name_or_id: &str,
        ctx: &ForgeContext,
    ) -> Result<Exported, ExportError> {
        let info = self.find_visible(name_or_id, ctx)?;
        if info.mode != "compose" {
            return Err(ExportError::NotCompose(info.name));
        }
        let bytes = self
            .inner
            .store
            .get_artifact(&ArtifactId::from_hex(&info.id)?)?;
        let (bundle, manifest) = self.bundle_of(&bytes, 0)?;
        let bytes = artifact::embed(&bundle, &manifest)?;
        let provenance = self.provenance(&info.name)?;
        Ok(Exported {
            id: blake3::hash(&bytes).to_hex().to_string(),
            bytes,
            tool: info,
            provenance,
        })
    }

    /// The bundle of the compose artifact `bytes` (without a manifest
    /// section) and the manifest it gets.
    fn bundle_of(
        &self,
        bytes: &[u8],
        depth: usize,
    ) -> Result<(Vec<u8>, ArtifactManifest), ExportError> {
        use crate::compose::bundle::{BundleError, BundleStep, bundle, bundle_capabilities};
        let (manifest, adapter) = artifact::split(bytes)?;
        if depth >= MAX_COMPOSE_DEPTH {
            return Err(ExportError::Bundle(BundleError::Compose {
                stage: "nest",
                message: format!("compose tools nest more than {MAX_COMPOSE_DEPTH} levels deep"),
            }));
        }
        let mut steps = Vec::with_capacity(manifest.steps.len());
        for step in &manifest.steps {
            let part = match &step.blake3 {
                None => BundleStep::Native {
                    tool: step.tool.clone(),
                },
                Some(hex) => {
                    let step_bytes = self.inner.store.get_artifact(&ArtifactId::from_hex(hex)?)?;
                    let (step_manifest, component) = artifact::split(&step_bytes)?;
                    if step_manifest.mode == "compose" {
                        let (nested, nested_manifest) = self.bundle_of(&step_bytes, depth + 1)?;
                        BundleStep::Component {
                            bytes: nested,
                            capabilities: nested_manifest.capabilities,
                        }
                    } else {
                        BundleStep::Component {
                            bytes: component.to_vec(),
                            capabilities: step_manifest.capabilities.clone(),
                        }
                    }
                }
            };
            steps.push((step.name.clone(), part));
        }
        let bundled = bundle(adapter, &steps)?;
        let mut manifest = manifest;
        manifest.mode = "bundle".into();
        manifest.capabilities = bundle_capabilities(&steps);
        Ok((bundled, manifest))
    }

    /// A bundle (from [`Forge::export_bundle`]) ready to call without the
    /// registry: its host-native imports linked to this host's native tools
    /// (each missing one is an error naming it), granted its manifest's
    /// capabilities ∩ this host's policy.
    pub async fn load_bundle(&self, bytes: Vec<u8>) -> Result<Tool, ImportError> {
        let manifest = artifact::read_manifest(&bytes).map_err(ImportError::Artifact)?;
        let base = self.bundle_tool(bytes).await?;
        self.inner
            .runtime
            .grant(&base, &manifest.capabilities)
            .map_err(|e| ImportError::Capabilities(vec![e.to_string()]))
    }

    /// A bundle's component with its native imports linked (no grants):
    /// every import outside the `tool` world must be a host-native tool of
    /// this host, by its import name.
    async fn bundle_tool(&self, bytes: Vec<u8>) -> Result<Tool, ImportError> {
        let imports = crate::compose::adapter::component_imports(&bytes)
            .map_err(|e| ImportError::Load(crate::error::LoadError::Invalid(e)))?;
        let timeout = self.inner.runtime.limits().timeout;
        let mut natives: Vec<(String, Arc<dyn StepCall>)> = Vec::new();
        for (name, _) in imports {
            if crate::runtime::ALLOWED_IMPORT_PREFIXES
                .iter()
                .any(|p| name.starts_with(p))
            {
                continue;
            }
            let native = lock(&self.inner.natives)
                .values()
                .find(|n| {
                    crate::compose::adapter::import_name(&n.spec.name).as_deref() == Some(&name)
                })
                .cloned()
                .ok_or_else(|| {
                    ImportError::Load(crate::error::LoadError::ImportNotAllowed(format!(
                        "{name} (not a host-native tool registered on this host)"
                    )))
                })?;
            natives.push((
                native.spec.name.clone(),
                Arc::new(NativeStep {
                    tool: native,
                    timeout,
                }),
            ));
        }
        self.inner
            .runtime
            .load_bundle(bytes, natives)
            .await
            .map_err(ImportError::Load)
    }

    fn provenance(&self, name: &str) -> Result<Vec<Value>, StoreError> {
        Ok(self
            .inner
            .store
            .audit_entries(0, usize::MAX)?
            .into_iter()
            .filter(|e| e.subject == name)
            .map(|e| {
                json!({"seq": e.seq, "kind": e.kind, "agent": e.agent, "tsMs": e.ts_ms,
                       "hash": e.hash, "payload": e.payload})
            })
            .collect())
    }

    // ---- invoke ----------------------------------------------------------

    /// The compiled schemas of artifact `id` (manifest `m`): compiled once
    /// per artifact (its manifest, schemas included, is part of its bytes).
    fn schemas_for(
        &self,
        id: &ArtifactId,
        m: &ArtifactManifest,
    ) -> Result<Arc<ToolSchemas>, InvokeError> {
        if let Some(s) = lock(&self.inner.schemas).get(id) {
            return Ok(s.clone());
        }
        let compiled = ToolSchemas::compile(&m.input_schema, &m.output_schema).map_err(|e| {
            InvokeError::Load {
                tool: m.name.clone(),
                message: e.to_string(),
            }
        })?;
        let compiled = Arc::new(compiled);
        lock(&self.inner.schemas).insert(id.clone(), compiled.clone());
        Ok(compiled)
    }

    fn resolve(&self, name: &str, ctx: &ForgeContext) -> Result<Target, InvokeError> {
        if let Some(t) = lock(&self.inner.sessions)
            .get(&ctx.key())
            .and_then(|s| s.get(name))
        {
            return Ok(Target {
                tier: Tier::Session,
                artifact: t.artifact.clone(),
                manifest: t.manifest.clone(),
            });
        }
        let record =
            self.inner
                .store
                .get(name, &ctx.agent_id)?
                .ok_or_else(|| InvokeError::NotFound {
                    name: name.to_string(),
                    agent: ctx.agent_id.clone(),
                    session: ctx.session_id.clone(),
                })?;
        let manifest: ToolManifest =
            serde_json::from_value(record.manifest).map_err(|e| InvokeError::Load {
                tool: name.to_string(),
                message: format!("unreadable manifest: {e}"),
            })?;
        Ok(Target {
            tier: record.tier,
            artifact: record.artifact,
            manifest,
        })
    }

    fn load_error(tool: &str) -> impl Fn(String) -> InvokeError + '_ {
        move |message| InvokeError::Load {
            tool: tool.to_string(),
            message,
        }
    }

    /// The bytes of artifact `id` from the store (a failure names `tool`).
    fn artifact_bytes(&self, id: &ArtifactId, tool: &str) -> Result<Vec<u8>, InvokeError> {
        self.inner
            .store
            .get_artifact(id)
            .map_err(|e| Self::load_error(tool)(e.to_string()))
    }

    async fn loaded(&self, id: &ArtifactId, name: &str) -> Result<Tool, InvokeError> {
        if let Some(tool) = lock(&self.inner.loaded).get(id) {
            return Ok(tool.clone());
        }
        let load_err = Self::load_error(name);
        let bytes = self.artifact_bytes(id, name)?;
        let tool = self
            .inner
            .runtime
            .load(bytes)
            .await
            .map_err(|e| load_err(e.to_string()))?;
        lock(&self.inner.loaded).insert(id.clone(), tool.clone());
        Ok(tool)
    }

    /// The compose adapter of artifact `id`, compiled and linked once.
    async fn loaded_compose(
        &self,
        id: &ArtifactId,
        m: &ArtifactManifest,
    ) -> Result<ComposeTool, InvokeError> {
        if let Some(tool) = lock(&self.inner.composed).get(id) {
            return Ok(tool.clone());
        }
        let load_err = Self::load_error(&m.name);
        let bytes = self.artifact_bytes(id, &m.name)?;
        let steps = m.steps.iter().map(|s| s.name.clone()).collect();
        let tool = self
            .inner
            .runtime
            .load_compose(Arc::new(bytes), steps)
            .await
            .map_err(|e| load_err(e.to_string()))?;
        lock(&self.inner.composed).insert(id.clone(), tool.clone());
        Ok(tool)
    }

    /// The manifest of the artifact `id` (a compose step), read from the
    /// artifact once.
    fn step_manifest(
        &self,
        id: &ArtifactId,
        tool: &str,
    ) -> Result<Arc<ArtifactManifest>, InvokeError> {
        if let Some(m) = lock(&self.inner.step_manifests).get(id) {
            return Ok(m.clone());
        }
        let load_err = Self::load_error(tool);
        let bytes = self.artifact_bytes(id, tool)?;
        let manifest =
            Arc::new(artifact::read_manifest(&bytes).map_err(|e| load_err(e.to_string()))?);
        lock(&self.inner.step_manifests).insert(id.clone(), manifest.clone());
        Ok(manifest)
    }

    /// Calls the tool `name` as `ctx` sees it (session tier first, then the
    /// agent's, then shared) with `input`, under the runtime's limits and
    /// the tool's grants (its allowlist ∩ the host policy, as of now). The
    /// input must match `inputSchema` and the output `outputSchema`. Every
    /// call is counted in the tool's stats; every failure is also appended
    /// to the audit trail as an `invocation_failure`.
    pub async fn invoke(
        &self,
        name: &str,
        input: &Value,
        ctx: &ForgeContext,
    ) -> Result<Invocation, InvokeError> {
        let target = self.resolve(name, ctx)?;
        let mut latency_us = 0;
        let outcome = self.call_target(&target, input, &mut latency_us).await;
        let ok = outcome.is_ok();
        match target.tier {
            Tier::Session => {
                if let Some(t) = lock(&self.inner.sessions)
                    .get_mut(&ctx.key())
                    .and_then(|s| s.get_mut(name))
                {
                    t.counters.record(ok, latency_us);
                }
            }
            _ => self
                .inner
                .store
                .record_invocation(name, &ctx.agent_id, ok, latency_us)?,
        }
        match outcome {
            Ok((output, logs)) => Ok(Invocation {
                output,
                logs,
                latency_ms: latency_us as f64 / 1000.0,
                tier: target.tier,
                tool_id: target.artifact.to_string(),
            }),
            Err(e) => {
                self.inner.store.append_audit(
                    AuditKind::InvocationFailure,
                    name,
                    Some(&ctx.agent_id),
                    &json!({
                        "session": ctx.session_id,
                        "tier": target.tier.as_str(),
                        "artifact": target.artifact.as_str(),
                        "error": e.to_string(),
                    }),
                )?;
                Err(e)
            }
        }
    }

    async fn call_target(
        &self,
        target: &Target,
        input: &Value,
        latency_us: &mut u64,
    ) -> Result<(Value, Vec<LogLine>), InvokeError> {
        let (output, logs, latency) = self
            .call_artifact(&target.artifact, &target.manifest.artifact, input, 0)
            .await?;
        *latency_us = latency;
        Ok((output, logs))
    }

    /// Calls artifact `id` (manifest `m`): input checked against its
    /// `inputSchema`, run with its grants (its capabilities ∩ the host
    /// policy) or, for a compose tool, with its steps linked, output checked
    /// against its `outputSchema`. Also returns the call's latency (µs; the
    /// call itself, not the one-time load and compile). `depth` counts the
    /// compose tools around this call.
    fn call_artifact<'a>(
        &'a self,
        id: &'a ArtifactId,
        m: &'a ArtifactManifest,
        input: &'a Value,
        depth: usize,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            let name = &m.name;
            let schemas = self.schemas_for(id, m)?;
            schemas.input.check(input).map_err(|m| InvokeError::Input {
                tool: name.clone(),
                message: m.to_string(),
            })?;
            let runtime = &self.inner.runtime;
            let (out, started) = if m.mode == "compose" {
                let tool = self.loaded_compose(id, m).await?;
                let steps = self.link_steps(m, depth)?;
                let started = Instant::now();
                (
                    runtime.call_compose(&tool, steps, &input.to_string()).await,
                    started,
                )
            } else {
                let base = self.loaded(id, name).await?;
                let tool = runtime.grant(&base, &m.capabilities).map_err(|error| {
                    InvokeError::Capability {
                        tool: name.clone(),
                        error,
                    }
                })?;
                let started = Instant::now();
                (runtime.call(&tool, &input.to_string()).await, started)
            };
            let latency_us = started.elapsed().as_micros() as u64;
            let out = out.map_err(|failure| InvokeError::Run {
                tool: name.clone(),
                failure,
            })?;
            let output: Value =
                serde_json::from_str(&out.output).map_err(|e| InvokeError::Output {
                    tool: name.clone(),
                    mismatch: super::schema::SchemaMismatch {
                        role: super::schema::SchemaRole::Output,
                        violations: vec![format!("(root): not JSON: {e}")],
                    },
                })?;
            schemas
                .output
                .check(&output)
                .map_err(|mismatch| InvokeError::Output {
                    tool: name.clone(),
                    mismatch,
                })?;
            Ok((output, out.logs, latency_us))
        })
    }

    /// Links a compose tool's steps for one call: a pinned artifact runs
    /// through [`Forge::call_artifact`] (its own instance, grants, limits
    /// and schema checks; a compose step nests one level deeper), a native
    /// step through its registered function.
    fn link_steps(
        &self,
        m: &ArtifactManifest,
        depth: usize,
    ) -> Result<Vec<LinkedStep>, InvokeError> {
        let load_err = Self::load_error(&m.name);
        if depth >= MAX_COMPOSE_DEPTH {
            return Err(load_err(format!(
                "compose tools nest more than {MAX_COMPOSE_DEPTH} levels deep"
            )));
        }
        m.steps
            .iter()
            .map(|step| {
                let call: Arc<dyn StepCall> = match &step.blake3 {
                    Some(hex) => {
                        let id = ArtifactId::from_hex(hex).map_err(|e| {
                            load_err(format!("step {:?}: {e}", step.name))
                        })?;
                        let manifest = self.step_manifest(&id, &step.tool)?;
                        Arc::new(ArtifactStep {
                            forge: self.clone(),
                            id,
                            manifest,
                            depth: depth + 1,
                        })
                    }
                    None => {
                        let native = lock(&self.inner.natives).get(&step.tool).cloned().ok_or_else(
                            || {
                                load_err(format!(
                                    "step {:?}: host-native tool {:?} is not registered on this host",
                                    step.name, step.tool
                                ))
                            },
                        )?;
                        Arc::new(NativeStep {
                            tool: native,
                            timeout: self.inner.runtime.limits().timeout,
                        })
                    }
                };
                Ok(LinkedStep {
                    name: step.name.clone(),
                    tool: step.tool.clone(),
                    call,
                })
            })
            .collect()
    }

    /// Runs a compose adapter with its steps linked: what TEST calls.
    async fn call_compose_text(
        &self,
        tool: &ComposeTool,
        m: &ArtifactManifest,
        input: String,
    ) -> Result<CallOutput, CallFailure> {
        let steps = self.link_steps(m, 0).map_err(|e| CallFailure {
            error: crate::RunError::Instantiate {
                message: e.to_string(),
            },
            logs: Vec::new(),
        })?;
        self.inner.runtime.call_compose(tool, steps, &input).await
    }

    /// The TEST stage's run of every test case, under the real limits and
    /// grants (compose tools with their steps linked).
    async fn test_run(&self, a: &Admission) -> Result<Vec<CaseResult>, ForgeError> {
        let runtime = &self.inner.runtime;
        let m = &a.manifest;
        Ok(match &a.runnable {
            Runnable::Sandbox(base) => {
                let tool = runtime
                    .grant(base, &m.capabilities)
                    .map_err(ValidateError::from)?;
                run_cases(runtime, &tool, Some(&a.schemas), &m.test_cases).await
            }
            Runnable::Compose(tool) => {
                run_cases_with(Some(&a.schemas), &m.test_cases, |input| async move {
                    self.call_compose_text(tool, m, input)
                        .await
                        .map(|out| out.output)
                        .map_err(|f| f.to_string())
                })
                .await
            }
        })
    }

    // ---- compose -----------------------------------------------------------

    /// Registers a host-native tool: `call` runs with the input checked
    /// against `spec.input_schema`, and its output is checked against
    /// `spec.output_schema`. Native tools are compose steps every agent of
    /// this host may use (see [`super::native`]). The name follows the
    /// forged-tool rules and must not be a native tool already.
    pub fn register_native<F, Fut>(
        &self,
        spec: NativeToolSpec,
        call: F,
    ) -> Result<(), ValidateError>
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, String>> + Send + 'static,
    {
        validate::check_name(&spec.name)?;
        let schemas = ToolSchemas::compile(&spec.input_schema, &spec.output_schema)?;
        let mut natives = lock(&self.inner.natives);
        if natives.contains_key(&spec.name) {
            return Err(ValidateError::Name {
                name: spec.name,
                reason: "is already a host-native tool".into(),
            });
        }
        let call = Arc::new(move |input: Value| -> NativeFuture { Box::pin(call(input)) });
        natives.insert(
            spec.name.clone(),
            Arc::new(NativeTool {
                spec,
                schemas,
                call,
            }),
        );
        Ok(())
    }

    /// The host-native tools, by name.
    pub fn native_tools(&self) -> Vec<NativeToolSpec> {
        let mut out: Vec<NativeToolSpec> = lock(&self.inner.natives)
            .values()
            .map(|n| n.spec.clone())
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// VALIDATE (stateful part), BUILD, then TEST, JUDGE and REGISTER for a
    /// compose request: every step's tool must be callable by `ctx` (its
    /// session, agent or shared tiers, or a host-native tool) and is pinned
    /// by its artifact's blake3; no compose cycle; the adapter is generated
    /// and checked to import nothing but its steps.
    async fn compose_pipeline(
        &self,
        request: &ForgeRequest,
        v: ValidatedCompose<'_>,
        ctx: &ForgeContext,
        progress: &(dyn Fn(Stage) + Send + Sync),
    ) -> Result<Forged, ForgeError> {
        let mut refs = Vec::with_capacity(v.spec.steps.len());
        for (index, step) in v.spec.steps.iter().enumerate() {
            let blake3 = match self.resolve(&step.tool, ctx) {
                Ok(target) => Some(target.artifact.to_string()),
                Err(InvokeError::NotFound { .. })
                    if lock(&self.inner.natives).contains_key(&step.tool) =>
                {
                    None
                }
                Err(e) => {
                    let message = match e {
                        InvokeError::NotFound { .. } => format!(
                            "tool {:?} is not callable by agent {:?} in session {:?} (not in its session, its agent tier, the shared tier, nor a host-native tool)",
                            step.tool, ctx.agent_id, ctx.session_id
                        ),
                        other => other.to_string(),
                    };
                    return Err(ValidateError::Step {
                        step: format!("steps[{index}] ({:?})", step.name),
                        message,
                    }
                    .into());
                }
            };
            refs.push(StepRef {
                name: step.name.clone(),
                tool: step.tool.clone(),
                blake3,
                input_mapping: v.steps[index]
                    .get("inputMapping")
                    .cloned()
                    .unwrap_or(Value::Null),
            });
        }
        crate::compose::check_cycles(&request.name, &v.spec.tools(), |tool| {
            let target = self.resolve(tool, ctx).ok()?;
            let m = &target.manifest.artifact;
            (m.mode == "compose").then(|| m.steps.iter().map(|s| s.tool.clone()).collect())
        })
        .map_err(ValidateError::from)?;

        // BUILD: the adapter, checked, then its manifest section.
        progress(Stage::Build);
        let build_err = |e: crate::compose::adapter::AdapterError| {
            ForgeError::Build(BuildError::Internal {
                stage: "compose adapter",
                message: e.to_string(),
            })
        };
        let adapter = crate::compose::adapter::generate(v.steps).map_err(build_err)?;
        let names: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
        let imports = crate::compose::adapter::import_names(&names).map_err(build_err)?;
        crate::compose::adapter::check_adapter_imports(&adapter, &imports).map_err(build_err)?;
        let pipeline = serde_json::to_string(v.steps).expect("JSON values serialize");
        let manifest = ArtifactManifest::compose(request, &pipeline, refs);
        let bytes = artifact::embed(&adapter, &manifest).map_err(|e| {
            ForgeError::Build(BuildError::Internal {
                stage: "embed manifest",
                message: e.to_string(),
            })
        })?;
        let bytes = Arc::new(bytes);
        let steps = manifest.steps.iter().map(|s| s.name.clone()).collect();
        let tool = self
            .inner
            .runtime
            .load_compose(bytes.clone(), steps)
            .await
            .map_err(|e| {
                ForgeError::Build(BuildError::Internal {
                    stage: "load compose adapter",
                    message: e.to_string(),
                })
            })?;
        self.admit(
            Admission {
                manifest,
                bytes,
                runnable: Runnable::Compose(tool),
                schemas: v.schemas,
                source: None,
                imported: false,
            },
            ctx,
            Tier::Session,
            progress,
        )
        .await
    }

    // ---- listing and stats -------------------------------------------------

    /// The tools of `ctx`'s session, by name.
    pub fn session_tools(&self, ctx: &ForgeContext) -> Vec<ToolInfo> {
        lock(&self.inner.sessions)
            .get(&ctx.key())
            .map(|s| {
                s.values()
                    .map(|t| {
                        ToolInfo::new(
                            &t.manifest,
                            Tier::Session,
                            t.artifact.as_str(),
                            Some(ctx.agent_id.clone()),
                            Some(ctx.session_id.clone()),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn info_of(record: ToolRecord) -> Result<ToolInfo, StoreError> {
        let manifest: ToolManifest =
            serde_json::from_value(record.manifest).map_err(|source| StoreError::Json {
                op: "manifest",
                source,
            })?;
        Ok(ToolInfo::new(
            &manifest,
            record.tier,
            record.artifact.as_str(),
            record.agent_id,
            record.session_id,
        ))
    }

    /// The persisted tools `agent` can call: its own agent-tier tools, then
    /// the shared tools it does not shadow, by name within each tier.
    pub fn agent_tools(&self, agent: &str) -> Result<Vec<ToolInfo>, StoreError> {
        let own = self.inner.store.tools_for_agent(agent)?;
        let shared = self.inner.store.shared_tools()?;
        let mut out = Vec::with_capacity(own.len() + shared.len());
        for r in own {
            out.push(Self::info_of(r)?);
        }
        for r in shared {
            if !out.iter().any(|t| t.name == r.name) {
                out.push(Self::info_of(r)?);
            }
        }
        Ok(out)
    }

    /// Every tool `ctx` can call (session, agent, shared), each name once, as
    /// [`Forge::invoke`] resolves it.
    pub fn visible_tools(&self, ctx: &ForgeContext) -> Result<Vec<ToolInfo>, StoreError> {
        let mut out = self.session_tools(ctx);
        for t in self.agent_tools(&ctx.agent_id)? {
            if !out.iter().any(|s| s.name == t.name) {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// Call statistics of the tool `name` as `ctx` sees it.
    pub fn tool_stats(&self, name: &str, ctx: &ForgeContext) -> Result<ToolStats, InvokeError> {
        if let Some(t) = lock(&self.inner.sessions)
            .get(&ctx.key())
            .and_then(|s| s.get(name))
        {
            return Ok(t.counters.stats());
        }
        match self.inner.store.stats(name, &ctx.agent_id) {
            Ok(s) => Ok(s),
            Err(StoreError::NotFound { .. }) => Err(InvokeError::NotFound {
                name: name.to_string(),
                agent: ctx.agent_id.clone(),
                session: ctx.session_id.clone(),
            }),
            Err(e) => Err(e.into()),
        }
    }

    // ---- tiers -------------------------------------------------------------

    /// Promotes the session tool `name` to `ctx.agent_id`'s agent tier. Needs
    /// at least `promotionThreshold.uses` successful calls, a forge verdict
    /// confidence above `promotionThreshold.confidence`, room under
    /// `maxAgentTools`, and both panel reviewers (safety, correctness)
    /// approving. The panel sees the source: the one kept in memory, or
    /// `source` when given (it must hash to the recorded `sourceBlake3`).
    /// The panel's decision is audited either way; on approval the tool
    /// leaves the session tier and is registered for the agent (its session
    /// stats stay behind: the agent-tier record starts its own).
    pub async fn promote(
        &self,
        name: &str,
        ctx: &ForgeContext,
        source: Option<&str>,
    ) -> Result<ToolInfo, PromoteError> {
        let store_err = |source| PromoteError::Store {
            stage: Stage::Promote,
            source,
        };
        let tool = lock(&self.inner.sessions)
            .get(&ctx.key())
            .and_then(|s| s.get(name))
            .cloned()
            .ok_or_else(|| PromoteError::NotFound {
                stage: Stage::Promote,
                tier: Tier::Session,
                name: name.to_string(),
                owner: ctx.session_id.clone(),
            })?;
        let threshold = self.inner.config.promotion_threshold;
        if tool.counters.successes < threshold.uses {
            return Err(PromoteError::NotEnoughUses {
                name: name.to_string(),
                have: tool.counters.successes,
                need: threshold.uses,
            });
        }
        let confidence = tool.manifest.verdict.confidence;
        if confidence.is_nan() || confidence <= threshold.confidence {
            return Err(PromoteError::LowConfidence {
                name: name.to_string(),
                have: confidence,
                need: threshold.confidence,
            });
        }
        let owned = self
            .inner
            .store
            .agent_tool_count(&ctx.agent_id)
            .map_err(store_err)?;
        if owned >= self.inner.config.max_agent_tools {
            return Err(PromoteError::AgentFull {
                agent: ctx.agent_id.clone(),
                limit: self.inner.config.max_agent_tools,
            });
        }
        let compose = tool.manifest.artifact.mode == "compose";
        let source = match (
            source,
            &tool.source_in_memory,
            &tool.manifest.artifact.source,
        ) {
            // A compose tool's pipeline is in its manifest: nothing to pass.
            _ if compose => None,
            (Some(given), _, _) => {
                let hash = blake3::hash(given.as_bytes()).to_hex().to_string();
                if hash != tool.manifest.artifact.source_blake3 {
                    return Err(PromoteError::Source(format!(
                        "the given source hashes to {hash}, but {name:?} was built from {}",
                        tool.manifest.artifact.source_blake3
                    )));
                }
                Some(given.to_string())
            }
            (None, Some(kept), _) | (None, None, Some(kept)) => Some(kept.clone()),
            (None, None, None) => {
                return Err(PromoteError::Source(format!(
                    "the panel needs {name:?}'s source, which was not kept (persistSandboxSource is off): pass it again"
                )));
            }
        };
        let m = &tool.manifest;
        let candidate = ToolCandidate {
            name: m.artifact.name.clone(),
            description: m.artifact.description.clone(),
            input_schema: m.artifact.input_schema.clone(),
            output_schema: Some(m.artifact.output_schema.clone()),
            used_apis: source.as_deref().map(used_apis).unwrap_or_default(),
            source,
            composition: composition_of(&m.artifact),
            allowlist: m.artifact.capabilities.clone(),
            test_results: m.test_results.clone(),
            repeat_run: m.repeat_run.clone(),
            bytecode_only: false,
        };
        let (safety, correctness) = &self.inner.panel;
        let verdict: PanelVerdict = panel(safety.as_ref(), correctness.as_ref(), &candidate).await;
        let payload = json!({
            "from": "session",
            "to": "agent",
            "session": ctx.session_id,
            "approved": verdict.approved,
            "artifact": tool.artifact.as_str(),
            "uses": tool.counters.successes,
            "panel": verdict,
        });
        if !verdict.approved {
            self.inner
                .store
                .append_audit(AuditKind::Promotion, name, Some(&ctx.agent_id), &payload)
                .map_err(store_err)?;
            return Err(PromoteError::PanelRejected {
                name: name.to_string(),
                panel: Box::new(verdict),
            });
        }
        let record = ToolRecord {
            name: name.to_string(),
            agent_id: Some(ctx.agent_id.clone()),
            session_id: Some(ctx.session_id.clone()),
            tier: Tier::Agent,
            artifact: tool.artifact.clone(),
            manifest: serde_json::to_value(&tool.manifest).expect("a manifest serializes"),
            created_seq: 0,
        };
        let mut sessions = lock(&self.inner.sessions);
        let record = self
            .inner
            .store
            .register_promoted(record, &payload)
            .map_err(store_err)?;
        if let Some(s) = sessions.get_mut(&ctx.key()) {
            s.remove(name);
        }
        drop(sessions);
        Self::info_of(record).map_err(store_err)
    }

    /// A human's approval: moves `agent`'s agent-tier tool `name` to the
    /// shared tier. The `approval` (with `approver` and `note`) and the
    /// promotion are audited in one transaction.
    pub fn approve(
        &self,
        name: &str,
        agent: &str,
        approver: &str,
        note: Option<&str>,
    ) -> Result<ToolInfo, PromoteError> {
        let store_err = |source| PromoteError::Store {
            stage: Stage::Approve,
            source,
        };
        if approver.trim().is_empty() {
            return Err(PromoteError::NoApprover);
        }
        let payload = json!({"approver": approver, "note": note, "to": "shared"});
        match self.inner.store.approve_and_promote(name, agent, &payload) {
            Ok(record) => Self::info_of(record).map_err(store_err),
            Err(StoreError::NotFound { .. }) => Err(PromoteError::NotFound {
                stage: Stage::Approve,
                tier: Tier::Agent,
                name: name.to_string(),
                owner: agent.to_string(),
            }),
            Err(e) => Err(store_err(e)),
        }
    }

    /// Discards `ctx`'s session tier, appending a `deletion` audit entry per
    /// tool; returns how many tools were discarded.
    pub fn cleanup_session(&self, ctx: &ForgeContext) -> Result<usize, StoreError> {
        let Some(tools) = lock(&self.inner.sessions).remove(&ctx.key()) else {
            return Ok(0);
        };
        for (name, t) in &tools {
            self.inner.store.append_audit(
                AuditKind::Deletion,
                name,
                Some(&ctx.agent_id),
                &json!({
                    "tier": "session",
                    "session": ctx.session_id,
                    "artifact": t.artifact.as_str(),
                    "reason": "session ended",
                }),
            )?;
        }
        Ok(tools.len())
    }

    /// A copy of `ctx`'s session tier (see [`SessionSnapshot`]).
    pub fn snapshot_session(&self, ctx: &ForgeContext) -> SessionSnapshot {
        SessionSnapshot {
            agent_id: ctx.agent_id.clone(),
            session_id: ctx.session_id.clone(),
            tools: lock(&self.inner.sessions)
                .get(&ctx.key())
                .cloned()
                .unwrap_or_default(),
        }
    }

    /// Replaces a session tier with `snapshot`. Every artifact it names must
    /// be in the store (its hash is checked when the tool is loaded);
    /// nothing changes otherwise.
    pub fn restore_session(&self, snapshot: SessionSnapshot) -> Result<(), StoreError> {
        if let Some(t) = snapshot
            .tools
            .values()
            .find(|t| !self.inner.store.has_artifact(&t.artifact))
        {
            return Err(StoreError::Invalid {
                op: "restore_session",
                detail: format!(
                    "artifact {} of {:?} is not in the store",
                    t.artifact, t.manifest.artifact.name
                ),
            });
        }
        let key = (snapshot.agent_id, snapshot.session_id);
        lock(&self.inner.sessions).insert(key, snapshot.tools);
        Ok(())
    }
}
