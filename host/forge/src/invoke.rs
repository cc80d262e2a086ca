//! Calling a registered tool: [`Forge::invoke`] resolves the name as the
//! caller sees it, checks the input against the tool's `inputSchema`, runs
//! it with its grants and the runtime's limits (a compose tool with its
//! steps linked per call, each step through this same path), checks the
//! output against its `outputSchema`, and counts the call in the tool's
//! stats. Agent- and shared-tier names are resolved through the name cache
//! (`names`) while a registry watch keeps it current.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use temper_compose::ComposeRuntime;

use serde_json::{Value, json};

use super::error::InvokeError;
use super::manifest::ToolManifest;
use super::native::NativeTool;
use super::observe::{
    callee_span, execute_tool_span, invoke_error_kind, record_error, record_target, tier_label,
};
use super::outcome::Invocation;
use super::schema::ToolSchemas;
use super::session::CachedTier;
use super::{Forge, ForgeContext, lock};
use temper_compose::run::{ComposeTool, LinkedStep, StepCall, StepFuture, StepOutput};
use temper_runtime::artifact::{self, ArtifactManifest, Mode};
use temper_runtime::host_state::LogLine;
use temper_runtime::id::ArtifactId;
use temper_runtime::runtime::Tool;
use temper_store::{StoreError, StoredArtifact, Tier};
use tracing::Instrument;

/// What [`Forge::call_artifact`] returns: the output, its console lines and
/// the call's latency (µs).
type CallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(Value, Vec<LogLine>, u64), InvokeError>> + Send + 'a>>;

/// How deep compose tools may nest (a compose step that is itself a
/// compose tool is one level). Cycles are refused at forge time; this
/// bounds the run even so.
pub const MAX_COMPOSE_DEPTH: usize = 8;

/// The kind a failure is counted under in an `invocation_failure`
/// summary.
fn failure_kind(e: &InvokeError) -> &'static str {
    match e {
        InvokeError::Busy(_) => "busy",
        InvokeError::NotFound { .. } => "not_found",
        InvokeError::Input { .. } => "input",
        InvokeError::Run { .. } => "run",
        InvokeError::Output { .. } => "output",
        InvokeError::Capability { .. } => "capability",
        InvokeError::Grant { .. } => "grant",
        InvokeError::Load { .. } => "load",
        InvokeError::Store(_) => "store",
        #[allow(unreachable_patterns)]
        _ => "other",
    }
}

/// A resolved tool: where it lives and what it is.
#[derive(Clone)]
pub(super) struct Target {
    pub(super) tier: Tier,
    pub(super) artifact: ArtifactId,
    /// The artifact's manifest (the part of the tool's a call needs).
    pub(super) manifest: Arc<ArtifactManifest>,
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
            let span = callee_span("compose_step", &self.manifest.name);
            let (output, logs, _) = self
                .forge
                .call_artifact(&self.id, &self.manifest, &input, self.depth)
                .instrument(span.clone())
                .await
                .map_err(|e| {
                    record_error(
                        &span,
                        invoke_error_kind(&e).map_or("internal", |k| k.as_str()),
                    );
                    e.to_string()
                })?;
            Ok(StepOutput {
                output: output.to_string(),
                logs,
            })
        })
    }
}

/// A compose step that is a host-native tool.
pub(super) struct NativeStep {
    pub(super) tool: Arc<NativeTool>,
    pub(super) timeout: std::time::Duration,
}

impl StepCall for NativeStep {
    fn call(&self, input: String) -> StepFuture<'_> {
        Box::pin(async move {
            let span = callee_span("compose_step", &self.tool.spec.name);
            let output = self
                .tool
                .invoke(&input, self.timeout)
                .instrument(span.clone())
                .await
                .inspect_err(|_| record_error(&span, "upstream"))?;
            Ok(StepOutput {
                output,
                logs: Vec::new(),
            })
        })
    }

    /// A hub tool's own limit extends the compose run's deadline.
    fn own_timeout(&self) -> Option<std::time::Duration> {
        self.tool
            .own_timeout
            .map(|_| self.tool.call_timeout(self.timeout))
    }
}

impl Forge {
    /// Calls the tool `name` as `ctx` sees it (session tier first, then the
    /// agent's, then shared) with `input`, under the runtime's limits and
    /// the tool's grants (its allowlist ∩ the host policy, as of now). The
    /// input must match `inputSchema` and the output `outputSchema`. Every
    /// call is counted in the tool's stats; failures are also audited as
    /// `invocation_failure` entries: the first of a window per tool with its
    /// error, the rest as one summary ([`Registry::record_failure`]).
    ///
    /// [`Registry::record_failure`]: temper_store::Registry::record_failure
    pub async fn invoke(
        &self,
        name: &str,
        input: &Value,
        ctx: &ForgeContext,
    ) -> Result<Invocation, InvokeError> {
        let started = Instant::now();
        let span = execute_tool_span(name);
        let result = self
            .invoke_counted(name, input, ctx)
            .instrument(span.clone())
            .await;
        if let Err((_, e)) = &result {
            let kind = invoke_error_kind(e).map_or("not_found", |k| k.as_str());
            record_error(&span, kind);
        }
        if let Some(metrics) = self.metrics() {
            let counted = match &result {
                Ok(i) => Some((Some(i.tier), None)),
                // A name that is no tool is not counted (no label for it).
                Err((tier, e)) => invoke_error_kind(e).map(|kind| (*tier, Some(kind))),
            };
            if let Some((tier, error)) = counted {
                let tier = tier.map_or(temper_observe::Tier::Unresolved, tier_label);
                metrics.record_call(&metrics.tool(name), tier, error, started.elapsed());
            }
        }
        result.map_err(|(_, e)| e)
    }

    /// [`Forge::invoke`] without the metrics; a failure comes with the tier
    /// the tool was found in (`None`: not resolved).
    async fn invoke_counted(
        &self,
        name: &str,
        input: &Value,
        ctx: &ForgeContext,
    ) -> Result<Invocation, (Option<Tier>, InvokeError)> {
        let _slot = self
            .inner
            .calls
            .enter()
            .await
            .map_err(|b| (None, InvokeError::Busy(b)))?;
        let target = self
            .resolve_for_call(name, ctx)
            .await
            .map_err(|e| (None, e))?;
        let tier = Some(target.tier);
        record_target(target.tier, target.artifact.as_str());
        let outcome = self
            .call_artifact(&target.artifact, &target.manifest, input, 0)
            .await;
        let (ok, latency_us) = match &outcome {
            Ok((_, _, latency_us)) => (true, *latency_us),
            Err(_) => (false, 0),
        };
        match target.tier {
            // Counted in memory with the session's use, written behind.
            Tier::Session => match if self.inner.store.stats_flush().is_zero() {
                let (agent, session, key) = (
                    ctx.agent_id.clone(),
                    ctx.session_id.clone(),
                    name.to_owned(),
                );
                self.with_store("record_session_invocation", move |s| {
                    s.record_session_invocation(&agent, &session, &key, ok, latency_us)
                })
                .await
            } else {
                self.inner.store.record_session_invocation(
                    &ctx.agent_id,
                    &ctx.session_id,
                    name,
                    ok,
                    latency_us,
                )
            } {
                Ok(()) => {}
                Err(e) => return Err((tier, e.into())),
            },
            // Counted in memory and written behind; with a zero flush
            // interval it is a transaction, off the async workers.
            _ => match if self.inner.store.stats_flush().is_zero() {
                let (key, agent) = (name.to_owned(), ctx.agent_id.clone());
                self.with_store("record_invocation", move |s| {
                    s.record_invocation(&key, &agent, ok, latency_us)
                })
                .await
            } else {
                self.inner
                    .store
                    .record_invocation(name, &ctx.agent_id, ok, latency_us)
            } {
                // Deleted (here or on another host on the same store)
                // while it ran: the call happened before the deletion,
                // and its stats went with the tool.
                Ok(()) | Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err((tier, e.into())),
            },
        }
        match outcome {
            Ok((output, logs, _)) => Ok(Invocation {
                output,
                logs,
                latency_ms: latency_us as f64 / 1000.0,
                tier: target.tier,
                tool_id: target.artifact.to_string(),
            }),
            Err(e) => {
                let payload = json!({
                    "session": ctx.session_id,
                    "tier": target.tier.as_str(),
                    "artifact": target.artifact.as_str(),
                    "error": e.to_string(),
                });
                let (key, agent) = (name.to_owned(), ctx.agent_id.clone());
                let kind = failure_kind(&e);
                // The first failure of a window is audited with its error;
                // later ones are summarized when the window closes.
                self.with_store("append_audit", move |s| {
                    s.record_failure(&key, &agent, kind, &payload)
                })
                .await
                .map_err(|s| (tier, s.into()))?;
                Err((tier, e))
            }
        }
    }

    /// Calls artifact `id` (manifest `m`): input checked against its
    /// `inputSchema`, run with its grants (its capabilities ∩ the host
    /// policy) or, for a compose tool, with its steps linked, output checked
    /// against its `outputSchema`. Also returns the call's latency (µs; the
    /// call itself, not the one-time load and compile). `depth` counts the
    /// compose tools around this call.
    pub(super) fn call_artifact<'a>(
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
            let (out, started) = if m.mode == Mode::Compose {
                let tool = self.loaded_compose(id, m).await?;
                let steps = self.link_steps(m, depth).await?;
                let started = Instant::now();
                (
                    runtime.call_compose(&tool, steps, &input.to_string()).await,
                    started,
                )
            } else {
                let tool = self.loaded(id, m).await?;
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
    pub(super) async fn link_steps(
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
        let mut linked = Vec::with_capacity(m.steps.len());
        for step in &m.steps {
            let call: Arc<dyn StepCall> = match &step.blake3 {
                Some(hex) => {
                    let id = ArtifactId::from_hex(hex)
                        .map_err(|e| load_err(format!("step {:?}: {e}", step.name)))?;
                    let manifest = self.step_manifest(&id, &step.tool).await?;
                    Arc::new(ArtifactStep {
                        forge: self.clone(),
                        id,
                        manifest,
                        depth: depth + 1,
                    })
                }
                None => {
                    let native = lock(&self.inner.natives)
                        .get(&step.tool)
                        .cloned()
                        .ok_or_else(|| {
                            load_err(format!(
                                "step {:?}: host-native tool {:?} is not registered on this host",
                                step.name, step.tool
                            ))
                        })?;
                    Arc::new(NativeStep {
                        tool: native,
                        timeout: self.inner.runtime.limits().timeout,
                    })
                }
            };
            linked.push(LinkedStep {
                name: step.name.clone(),
                tool: step.tool.clone(),
                call,
            });
        }
        Ok(linked)
    }

    /// `name` in `tier` (a session tier as read), if it is there.
    fn session_target(&self, name: &str, tier: &CachedTier) -> Option<Arc<Target>> {
        tier.get(name).map(|t| {
            let manifest = self
                .inner
                .names
                .session_manifest(&t.artifact, || t.manifest.artifact.clone());
            Arc::new(Target {
                tier: Tier::Session,
                artifact: t.artifact.clone(),
                manifest,
            })
        })
    }

    /// `name` as `ctx` sees it, for a call: the session tier first (as
    /// cached while current, else read), then the agent and shared tiers
    /// (see [`Forge::resolve_persisted`]). A name that neither the cached
    /// session tier nor the persisted tiers know is looked up in the
    /// stored session tier once more: another host may have forged it a
    /// moment ago.
    pub(super) async fn resolve_for_call(
        &self,
        name: &str,
        ctx: &ForgeContext,
    ) -> Result<Arc<Target>, InvokeError> {
        let cached = self.cached_session(ctx);
        let fresh = match &cached {
            Some(tier) => {
                if let Some(t) = self.session_target(name, tier) {
                    return Ok(t);
                }
                false
            }
            None => {
                let tier = self.load_session_async(ctx).await?;
                if let Some(t) = self.session_target(name, &tier) {
                    return Ok(t);
                }
                true
            }
        };
        match self.resolve_persisted(name, ctx).await {
            Err(InvokeError::NotFound { .. }) if !fresh => {
                let tier = self.load_session_async(ctx).await?;
                self.session_target(name, &tier)
                    .ok_or_else(|| InvokeError::NotFound {
                        name: name.to_string(),
                        agent: ctx.agent_id.clone(),
                        session: ctx.session_id.clone(),
                    })
            }
            other => other,
        }
    }

    /// `name` in `ctx`'s agent or shared tier: from the name cache while
    /// the registry's lease holds (see the `names` module), else read on
    /// the blocking pool and cached under the epoch read before it.
    async fn resolve_persisted(
        &self,
        name: &str,
        ctx: &ForgeContext,
    ) -> Result<Arc<Target>, InvokeError> {
        let store = &self.inner.store;
        let names = &self.inner.names;
        if let Some(epoch) = store.leased_name_epoch(name)
            && let Some(target) = names.get(&ctx.agent_id, name, epoch)
        {
            return Ok(target);
        }
        let epoch = store.name_epoch(name);
        let (key, agent) = (name.to_owned(), ctx.agent_id.clone());
        let record = self.with_store("get", move |s| s.get(&key, &agent)).await?;
        let target = Arc::new(Self::target_of(name, ctx, record)?);
        names.put(&ctx.agent_id, name, epoch, target.clone());
        Ok(target)
    }

    /// `name` as `ctx` sees it, the registry read on the calling thread
    /// (for the forge's synchronous checks; [`Forge::invoke`] reads it on
    /// the blocking pool). Never cached: a forge checks the registry.
    pub(super) fn resolve(&self, name: &str, ctx: &ForgeContext) -> Result<Target, InvokeError> {
        let tier = self.session_tier(ctx)?;
        if let Some(t) = self.session_target(name, &tier) {
            return Ok(Arc::unwrap_or_clone(t));
        }
        let record = self.inner.store.get(name, &ctx.agent_id)?;
        Self::target_of(name, ctx, record)
    }

    /// The target of a registry row `name` read for `ctx`.
    fn target_of(
        name: &str,
        ctx: &ForgeContext,
        record: Option<temper_store::ToolRecord>,
    ) -> Result<Target, InvokeError> {
        let record = record.ok_or_else(|| InvokeError::NotFound {
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
            manifest: Arc::new(manifest.artifact),
        })
    }

    /// A load failure of `tool`.
    pub(super) fn load_error(tool: &str) -> impl Fn(String) -> InvokeError + '_ {
        move |message| InvokeError::Load {
            tool: tool.to_string(),
            message,
        }
    }

    /// The bytes of artifact `id` from the store, checked against the id (a
    /// failure names `tool`).
    pub(super) async fn artifact_bytes(
        &self,
        id: &ArtifactId,
        tool: &str,
    ) -> Result<Vec<u8>, InvokeError> {
        self.stored_artifact(id)
            .await
            .map_err(|e| Self::load_error(tool)(e.to_string()))
    }

    /// The compiled schemas of artifact `id` (manifest `m`): compiled once
    /// per artifact (its manifest, schemas included, is part of its bytes).
    pub(super) fn schemas_for(
        &self,
        id: &ArtifactId,
        m: &ArtifactManifest,
    ) -> Result<Arc<ToolSchemas>, InvokeError> {
        let cache = &self.inner.cache.schemas;
        if let Some(s) = cache.get(id) {
            return Ok(s);
        }
        let compiled = ToolSchemas::compile(&m.input_schema, &m.output_schema)
            .map_err(|e| Self::load_error(&m.name)(e.to_string()))?;
        let compiled = Arc::new(compiled);
        cache.put(id.clone(), compiled.clone());
        Ok(compiled)
    }

    /// The sandbox (or bundle) tool of artifact `id` (manifest `m`), loaded
    /// and granted its capabilities ∩ the host policy once.
    pub(super) async fn loaded(
        &self,
        id: &ArtifactId,
        m: &ArtifactManifest,
    ) -> Result<Tool, InvokeError> {
        self.refuse_disabled(id, &m.name)?;
        let cache = &self.inner.cache.tools;
        if let Some(tool) = cache.get(id) {
            return Ok(tool);
        }
        let load_err = Self::load_error(&m.name);
        let runtime = &self.inner.runtime;
        let key = id.clone();
        let stored = self
            .with_store("get_artifact", move |s| s.get_stored(&key))
            .await
            .map_err(|e| load_err(e.to_string()))?;
        let base = match stored {
            StoredArtifact::Wasm(bytes) => runtime
                .load_admitted(bytes)
                .await
                .map_err(|e| e.to_string()),
            StoredArtifact::Compact(record) => runtime
                .load_compact(&record, id.as_str())
                .await
                .map_err(|e| format!("artifact {id}: {e}")),
        }
        .map_err(&load_err)?;
        let tool = self.granted(&base, m)?;
        cache.put(id.clone(), tool.clone());
        Ok(tool)
    }

    /// `base` granted manifest `m`'s capabilities ∩ the host policy.
    pub(super) fn granted(&self, base: &Tool, m: &ArtifactManifest) -> Result<Tool, InvokeError> {
        self.inner
            .runtime
            .grant(base, &m.capabilities)
            .map(|tool| self.with_tool_calls(tool, m))
            .map_err(|error| InvokeError::Capability {
                tool: m.name.clone(),
                error,
            })
    }

    /// The compose adapter of artifact `id`, compiled and linked once.
    pub(super) async fn loaded_compose(
        &self,
        id: &ArtifactId,
        m: &ArtifactManifest,
    ) -> Result<ComposeTool, InvokeError> {
        self.refuse_disabled(id, &m.name)?;
        let cache = &self.inner.cache.compose;
        if let Some(tool) = cache.get(id) {
            return Ok(tool);
        }
        let bytes = self.artifact_bytes(id, &m.name).await?;
        let steps = m.steps.iter().map(|s| s.name.clone()).collect();
        let tool = self
            .inner
            .runtime
            .load_compose(Arc::new(bytes), steps)
            .await
            .map_err(|e| Self::load_error(&m.name)(e.to_string()))?;
        cache.put(id.clone(), tool.clone());
        Ok(tool)
    }

    /// The manifest of the artifact `id` (a compose step), read from the
    /// artifact once.
    pub(super) async fn step_manifest(
        &self,
        id: &ArtifactId,
        tool: &str,
    ) -> Result<Arc<ArtifactManifest>, InvokeError> {
        let cache = &self.inner.cache.manifests;
        if let Some(m) = cache.get(id) {
            return Ok(m);
        }
        let bytes = self.artifact_bytes(id, tool).await?;
        let manifest =
            artifact::read_manifest(&bytes).map_err(|e| Self::load_error(tool)(e.to_string()))?;
        let manifest = Arc::new(manifest);
        cache.put(id.clone(), manifest.clone());
        Ok(manifest)
    }
}
