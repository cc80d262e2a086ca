//! A forge request's path: VALIDATE ([`super::validate`]), BUILD
//! ([`super::build`]), TEST (twice, the repeat run being the determinism
//! evidence), JUDGE and REGISTER; imports join at TEST
//! ([`Forge::admit`]). Every outcome lands in the audit trail.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use temper_compose::ComposeRuntime;

use serde_json::{Value, json};

use super::build;
use super::error::{ForgeError, Stage, ValidateError};
use super::judge::{TestResultSummary, ToolCandidate};
use super::manifest::{ToolInfo, ToolManifest};
use super::outcome::Forged;
use super::schema::ToolSchemas;
use super::session::{SessionTool, TierChange};
use super::validate::{self, Checked, RegistryView, ViewedTool};
use super::{Forge, ForgeContext, lock};
use crate::testcase::{CaseResult, run_cases_with};
use temper_compose::run::ComposeTool;
use temper_runtime::artifact::{ArtifactManifest, Mode};
use temper_runtime::error::BuildError;
use temper_runtime::request::{ForgeRequest, Implementation};
use temper_runtime::runtime::{CallFailure, CallOutput, Tool};
use temper_store::{AuditKind, StoreError, Tier, ToolRecord};

/// What runs a tool on its way through TEST, JUDGE and REGISTER.
pub(super) enum Runnable {
    /// A sandbox (or other `tool`-world) component, granted.
    Sandbox(Tool),
    /// A compose adapter.
    Compose(ComposeTool),
}

/// An artifact on its way through TEST, JUDGE and REGISTER.
pub(super) struct Admission {
    pub(super) manifest: ArtifactManifest,
    pub(super) bytes: Arc<Vec<u8>>,
    pub(super) runnable: Runnable,
    pub(super) schemas: ToolSchemas,
    /// Source for the judge (kept in memory for the session tier).
    pub(super) source: Option<String>,
    pub(super) imported: bool,
    /// The trust check of an import, for the audit entry.
    pub(super) trust: Option<Value>,
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

/// What the judge sees of a compose tool: its steps with their tools
/// (pinned) and mappings.
pub(super) fn composition_of(m: &ArtifactManifest) -> Option<Value> {
    (m.mode == Mode::Compose).then(|| json!({ "steps": m.steps }))
}

/// What the judge sees the code use: the capability globals it references
/// and, for code mode, `tool:NAME` for every tool it calls by a literal
/// name, plus `tool:<computed>` when it calls one by a computed name (so
/// the rules judge approves only when the names used equal the `tool:`
/// grants, and never a name it cannot read).
pub(super) fn used_apis(source: &str) -> Vec<String> {
    let mut used: Vec<String> = temper_runtime::static_check::used_capabilities(source)
        .into_iter()
        .map(|c| c.as_str().to_string())
        .collect();
    let calls = temper_runtime::static_check::used_tool_calls(source);
    used.extend(calls.names.iter().map(|n| format!("tool:{n}")));
    if !calls.computed.is_empty() {
        used.push("tool:<computed>".to_string());
    }
    used
}

impl Forge {
    /// Parses `json` as a forge request and forges it; a document that is
    /// not a forge request is refused at the validate stage, in the terms
    /// of `forge_tool`'s input schema ([`super::request_shape`]).
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
        match super::request_shape::parse(json) {
            Ok(request) => self.forge_with_progress(&request, ctx, progress).await,
            Err(e) => {
                let err = ForgeError::Validate(ValidateError::Request(e));
                self.audit_rejection("(invalid request)", ctx, &err);
                let err = Err(err);
                self.observe_forge(&err, std::time::Duration::ZERO);
                err
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
        let started = std::time::Instant::now();
        let span = super::observe::forge_span(&request.name);
        // Each stage a child span, open until the next one starts.
        let stage = std::sync::Mutex::new(None::<tracing::Span>);
        let traced = |s: Stage| {
            if !span.is_disabled() {
                span.record("temper.forge.stage", s.as_str());
                *super::lock(&stage) = Some(super::observe::stage_span(&span, s));
            }
            progress(s);
        };
        let outcome =
            tracing::Instrument::instrument(self.pipeline(request, ctx, &traced), span.clone())
                .await;
        drop(super::lock(&stage).take());
        if let Err(e) = &outcome {
            super::observe::record_error(&span, e.stage().as_str());
        }
        self.observe_forge(&outcome, started.elapsed());
        if let Err(e) = &outcome
            && !matches!(e, ForgeError::Register(_) | ForgeError::Busy(_))
        {
            self.audit_rejection(&request.name, ctx, e);
        }
        outcome
    }

    /// Appends a refused forge (or import) of `name` to the audit trail; a
    /// failure to write it does not hide the refusal.
    pub(super) fn audit_rejection(&self, name: &str, ctx: &ForgeContext, e: &ForgeError) {
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

    /// VALIDATE and BUILD for `request`, then [`Forge::admit`] into `ctx`'s
    /// session tier.
    async fn pipeline(
        &self,
        request: &ForgeRequest,
        ctx: &ForgeContext,
        progress: &(dyn Fn(Stage) + Send + Sync),
    ) -> Result<Forged, ForgeError> {
        let inner = &self.inner;
        let runtime = &inner.runtime;
        let _slot = inner.forges.enter().await.map_err(ForgeError::Busy)?;
        let deadline = self.forge_deadline();

        progress(Stage::Validate);
        let view = ForgeView { forge: self, ctx };
        let valid = validate::check_request(request, runtime.policy(), &inner.config, &view)
            .map_err(|e| self.with_way_on(e, ctx))?;
        let request = &*valid.request;
        // The syntax check: compiling to bytecode (kept for BUILD).
        let bytecode = match &request.implementation {
            Implementation::Sandbox { code, .. } => {
                Some(runtime.compile_source(code).await.map_err(|e| match e {
                    BuildError::Compile(js) => ForgeError::Validate(ValidateError::Syntax(js)),
                    other => ForgeError::Build(other),
                })?)
            }
            Implementation::Compose { .. } => None,
        };

        progress(Stage::Build);
        let admission = match (valid.checked, &request.implementation) {
            (Checked::Sandbox(v), Implementation::Sandbox { code, .. }) => {
                let built = build::build_sandbox_calling(
                    runtime,
                    request,
                    bytecode,
                    inner.config.persist_sandbox_source,
                    v.call_refs,
                )
                .await?;
                let tool = runtime
                    .grant(&runtime.tool(&built.artifact), &built.manifest.capabilities)
                    .map_err(ValidateError::from)?;
                let tool = self.with_tool_calls(tool, &built.manifest);
                Admission {
                    manifest: built.manifest,
                    bytes: built.artifact.bytes,
                    runnable: Runnable::Sandbox(tool),
                    schemas: v.schemas,
                    source: Some(code.clone()),
                    imported: false,
                    trust: None,
                }
            }
            (Checked::Compose(v), Implementation::Compose { steps }) => {
                let (bytes, manifest) = build::build_compose(request, steps, v.refs)?;
                let bytes = Arc::new(bytes);
                let steps = manifest.steps.iter().map(|s| s.name.clone()).collect();
                let tool = runtime
                    .load_compose(bytes.clone(), steps)
                    .await
                    .map_err(|e| BuildError::Internal {
                        stage: "load compose adapter",
                        message: e.to_string(),
                    })?;
                Admission {
                    manifest,
                    bytes,
                    runnable: Runnable::Compose(tool),
                    schemas: v.schemas,
                    source: None,
                    imported: false,
                    trust: None,
                }
            }
            _ => unreachable!("validate checks the implementation's mode"),
        };
        self.admit(admission, ctx, Tier::Session, deadline, progress)
            .await
    }

    /// When a forge starting now must be done testing.
    pub(super) fn forge_deadline(&self) -> Instant {
        Instant::now() + Duration::from_millis(self.inner.config.forge_deadline_ms)
    }

    /// TEST, JUDGE and REGISTER for a built (or imported) artifact into
    /// `tier` for `ctx`; the test runs must end by `deadline`.
    pub(super) async fn admit(
        &self,
        a: Admission,
        ctx: &ForgeContext,
        tier: Tier,
        deadline: Instant,
        progress: &(dyn Fn(Stage) + Send + Sync),
    ) -> Result<Forged, ForgeError> {
        let inner = &self.inner;
        let m = &a.manifest;

        // TEST (twice: the repeat run is the determinism evidence), both
        // runs within the forge deadline.
        progress(Stage::Test);
        let done = AtomicUsize::new(0);
        // The tests run under the forging caller's grant: what the tool
        // calls, at any depth, is checked as in a call of it.
        let grant = super::grant::effective(ctx.grant());
        let tested = tokio::time::timeout_at(
            deadline.into(),
            super::grant::scoped(grant, async {
                let results = self.test_run(&a, &done).await;
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
                let repeat = self.test_run(&a, &done).await;
                Ok((results, repeat))
            }),
        )
        .await;
        let (results, repeat) = tested.map_err(|_elapsed| ForgeError::Deadline {
            limit_ms: inner.config.forge_deadline_ms,
            done: done.load(Ordering::Acquire),
            total: 2 * m.test_cases.len(),
        })??;

        // JUDGE
        let test_results = summaries(&results);
        let repeat_run = Some(summaries(&repeat));
        let candidate = ToolCandidate {
            name: m.name.clone(),
            description: m.description.clone(),
            input_schema: m.input_schema.clone(),
            output_schema: (!m.output_schema.is_null()).then(|| m.output_schema.clone()),
            source: a.source.clone(),
            composition: composition_of(m),
            allowlist: m.capabilities.clone(),
            test_results: test_results.clone(),
            used_apis: match &a.source {
                Some(src) => used_apis(src),
                None => m.capabilities.clone(),
            },
            repeat_run: repeat_run.clone(),
            bytecode_only: a.source.is_none() && m.mode != Mode::Compose,
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
        let mut decision = decision;
        if let Some(trust) = &a.trust {
            decision["trust"] = trust.clone();
        }
        let info = {
            // Re-checked against the stored tier: a forge that began
            // meanwhile may have taken the name or the last slot (the
            // store's transaction decides between hosts).
            let session = self.session_tier(ctx).map_err(ForgeError::Register)?;
            self.check_occupancy(&session, &m.name, ctx, tier)?;
            if tier == Tier::Session {
                let stored = serde_json::to_value(&manifest).expect("a manifest serializes");
                // The tool and its forge decision commit together; this
                // host's cached tier gains the tool in place (no re-read).
                let added = self.change_session(
                    ctx,
                    || {
                        inner.store.add_session_tool(
                            &self.implicit_session(ctx),
                            &m.name,
                            &id,
                            &stored,
                            &decision,
                            inner.config.max_session_tools,
                        )
                    },
                    |_| {
                        TierChange::Added(
                            m.name.clone(),
                            Arc::new(SessionTool {
                                artifact: id.clone(),
                                manifest: manifest.clone(),
                                source_in_memory: a.source.clone(),
                                counters: Default::default(),
                            }),
                        )
                    },
                );
                match added {
                    Ok(_) => {}
                    Err(StoreError::Conflict { .. }) => {
                        return Err(ValidateError::NameTaken {
                            name: m.name.clone(),
                            tier: Tier::Session,
                        }
                        .into());
                    }
                    Err(StoreError::SessionFull { limit, .. }) => {
                        let full = ValidateError::SessionFull {
                            session: ctx.session_id.clone(),
                            limit,
                            closest: None,
                        };
                        return Err(self.with_way_on(full, ctx).into());
                    }
                    Err(e) => return Err(ForgeError::Register(e)),
                }
                if let Some(source) = &a.source {
                    inner.sessions.keep_source(&id, source.clone());
                }
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
                let record = match inner.store.register_with_entry(
                    record,
                    AuditKind::ForgeDecision,
                    &decision,
                ) {
                    Ok(record) => record,
                    // Another host took the name between the check above
                    // and this insert: the store's uniqueness decided.
                    Err(StoreError::Conflict { tier, .. }) => {
                        return Err(ValidateError::NameTaken {
                            name: m.name.clone(),
                            tier: super::error::conflict_tier(tier),
                        }
                        .into());
                    }
                    Err(e) => return Err(ForgeError::Register(e)),
                };
                if tier == Tier::Agent
                    && self
                        .withdraw_over_limit(&record, &ctx.agent_id)
                        .map_err(ForgeError::Register)?
                {
                    return Err(ValidateError::AgentFull {
                        agent: ctx.agent_id.clone(),
                        limit: inner.config.max_agent_tools,
                    }
                    .into());
                }
                Self::info_of(record).map_err(ForgeError::Register)?
            }
        };
        inner.cache.schemas.put(id.clone(), Arc::new(a.schemas));
        match a.runnable {
            Runnable::Sandbox(tool) => inner.cache.tools.put(id, tool),
            Runnable::Compose(tool) => inner.cache.compose.put(id, tool),
        }
        Ok(Forged {
            tool: info,
            verdict,
            test_results: results,
        })
    }

    /// The TEST stage's run of every test case, under the real limits and
    /// grants (compose tools with their steps linked), counting each
    /// finished call in `done`.
    async fn test_run(&self, a: &Admission, done: &AtomicUsize) -> Vec<CaseResult> {
        let runtime = &self.inner.runtime;
        let m = &a.manifest;
        run_cases_with(Some(&a.schemas), &m.test_cases, |input| async move {
            let out = match &a.runnable {
                Runnable::Sandbox(tool) => runtime.call(tool, &input).await,
                Runnable::Compose(tool) => self.call_compose_text(tool, m, input).await,
            };
            done.fetch_add(1, Ordering::AcqRel);
            out.map(|out| out.output).map_err(|f| f.to_string())
        })
        .await
    }

    /// Runs a compose adapter with its steps linked: what TEST calls.
    async fn call_compose_text(
        &self,
        tool: &ComposeTool,
        m: &ArtifactManifest,
        input: String,
    ) -> Result<CallOutput, CallFailure> {
        let steps = self.link_steps(m, 0).await.map_err(|e| CallFailure {
            error: temper_runtime::RunError::Instantiate {
                message: e.to_string(),
            },
            logs: Vec::new(),
        })?;
        self.inner.runtime.call_compose(tool, steps, &input).await
    }
}

/// The registry as VALIDATE sees it for one caller: the session tier in
/// memory, the agent and shared tiers in the registry, the host's native
/// tools, each as the caller's grant lets it see them (a step or a
/// `tool:NAME` grant outside it is refused as an unknown tool). Reads
/// only.
struct ForgeView<'a> {
    forge: &'a Forge,
    ctx: &'a ForgeContext,
}

impl RegistryView for ForgeView<'_> {
    fn caller(&self) -> (&str, &str) {
        (&self.ctx.agent_id, &self.ctx.session_id)
    }

    fn tool(&self, name: &str) -> Result<Option<ViewedTool>, StoreError> {
        use super::error::InvokeError;
        match self.forge.resolve(name, self.ctx) {
            // A tier the caller's grant does not allow holds nothing it
            // may pin (as a tool that does not exist).
            Ok(target) if !self.ctx.grant().allows_tier(target.tier) => Ok(None),
            Ok(target) => Ok(Some(ViewedTool {
                artifact: target.artifact,
                manifest: Arc::unwrap_or_clone(target.manifest),
            })),
            Err(InvokeError::NotFound { .. }) => Ok(None),
            Err(InvokeError::Store(e)) => Err(e),
            Err(other) => Err(StoreError::Invalid {
                op: "resolve",
                detail: other.to_string(),
            }),
        }
    }

    fn native_output_schema(&self, name: &str) -> Option<Value> {
        let native = lock(&self.forge.inner.natives).get(name).cloned()?;
        // A hub tool the caller's grant does not allow is none it may pin.
        super::grant::check_native(self.ctx.grant(), name, Some(&native)).ok()?;
        Some(native.spec.output_schema.clone())
    }

    fn native_is_hub_tool(&self, name: &str) -> Option<bool> {
        lock(&self.forge.inner.natives)
            .get(name)
            .map(|n| n.hub_source.is_some())
    }

    fn occupancy(&self, name: &str) -> Result<validate::Occupancy, StoreError> {
        let session = self.forge.session_tier(self.ctx)?;
        self.forge.occupancy(&session, name, self.ctx)
    }
}
