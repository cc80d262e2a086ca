//! Moving tools between hosts as `.wasm` artifacts: [`Forge::import`]
//! (through TEST, JUDGE and REGISTER like a forge), [`Forge::export`] (with
//! its provenance, optionally its source), and compose bundles
//! ([`Forge::export_bundle`], [`Forge::load_bundle`]).

use std::sync::Arc;

use serde_json::{Value, json};

use super::error::{ExportError, ForgeError, ImportError, ValidateError};
use super::invoke::{MAX_COMPOSE_DEPTH, NativeStep};
use super::manifest::ToolInfo;
use super::outcome::{Exported, Forged};
use super::pipeline::{Admission, Runnable};
use super::schema::ToolSchemas;
use super::validate;
use super::{Forge, ForgeContext, lock};
use temper_compose::run::StepCall;
use temper_runtime::artifact::{self, ArtifactManifest, Mode};
use temper_runtime::id::{ArtifactId, blake3_hex};
use temper_runtime::runtime::Tool;
use temper_store::{StoreError, Tier};

impl Forge {
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
        self.import_from(bytes, ctx, tier, None).await
    }

    /// [`Forge::import`] of an artifact pulled from `reference`
    /// (`oci://host/repo:tag`), which the trust policy's rules may scope.
    /// The trust policy is checked first; an admitted artifact's audit
    /// entry records its signers.
    pub async fn import_from(
        &self,
        bytes: Vec<u8>,
        ctx: &ForgeContext,
        tier: Tier,
        reference: Option<&str>,
    ) -> Result<Forged, ForgeError> {
        let outcome = self.import_inner(bytes, ctx, tier, reference).await;
        if let Err(e) = &outcome
            && !matches!(e, ForgeError::Register(_) | ForgeError::Busy(_))
        {
            self.audit_rejection("(import)", ctx, e);
        }
        outcome
    }

    pub(super) async fn import_inner(
        &self,
        bytes: Vec<u8>,
        ctx: &ForgeContext,
        tier: Tier,
        reference: Option<&str>,
    ) -> Result<Forged, ForgeError> {
        super::bounded::check_size(bytes.len() as u64, self.inner.config.max_artifact_bytes)?;
        let _slot = self.inner.forges.enter().await.map_err(ForgeError::Busy)?;
        let deadline = self.forge_deadline();
        let manifest = artifact::read_manifest(&bytes).map_err(ImportError::Artifact)?;
        let trust = self.trust_check(&bytes, &manifest.name, reference)?;
        if manifest.mode == Mode::Compose {
            return Err(ValidateError::ComposeImport(manifest.name).into());
        }
        validate::check_name(&manifest.name)?;
        if manifest.description.trim().is_empty() {
            return Err(ValidateError::Description("is empty".into()).into());
        }
        let schemas = ToolSchemas::compile(&manifest.input_schema, &manifest.output_schema)
            .map_err(ValidateError::from)?;
        let policy = self.inner.runtime.policy();
        self.check_callees(&manifest).await?;
        let refused: Vec<String> = manifest
            .capabilities
            .iter()
            .filter(|name| temper_runtime::capabilities::tool_calls::tool_grant(name).is_none())
            .filter_map(|name| match name.parse::<temper_policy::Capability>() {
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
            let hash = blake3_hex(source.as_bytes());
            if hash != manifest.source_blake3 {
                return Err(ImportError::SourceMismatch {
                    recorded: manifest.source_blake3.clone(),
                    actual: hash,
                }
                .into());
            }
            temper_runtime::static_check::check(source).map_err(ValidateError::from)?;
        }
        let session = self.session_tier(ctx).map_err(ValidateError::from)?;
        self.check_occupancy(&session, &manifest.name, ctx, tier)?;
        let base = if manifest.mode == Mode::Bundle {
            self.bundle_tool(bytes.clone(), None).await?
        } else {
            self.inner
                .runtime
                // The trust policy was checked as the import began.
                .load_admitted(bytes.clone())
                .await
                .map_err(ImportError::Load)?
        };
        let tool = self
            .inner
            .runtime
            .grant(&base, &manifest.capabilities)
            .map_err(ValidateError::from)?;
        let tool = self.with_tool_calls(tool, &manifest);
        let source = manifest.source.clone();
        self.admit(
            Admission {
                manifest,
                bytes: Arc::new(bytes),
                runnable: Runnable::Sandbox(tool),
                schemas,
                source,
                imported: true,
                trust: Self::trust_record(&trust),
            },
            ctx,
            tier,
            deadline,
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
        if with_source && info.mode != Mode::Compose {
            // A signature covers the bytes without the source: the file
            // with the source is another artifact, so it leaves the old
            // signature out (`temper sign` signs the new file).
            let plain = temper_runtime::id::unsigned(&bytes).into_owned();
            let (mut manifest, component) = artifact::split(&plain)?;
            if manifest.source.is_none() {
                let kept = (info.tier == Tier::Session)
                    .then(|| self.inner.sessions.source(&id))
                    .flatten();
                let given = match (source, kept) {
                    (Some(s), _) => s.to_string(),
                    (None, Some(k)) => k,
                    (None, None) => return Err(ExportError::NoSource(info.name.clone())),
                };
                let hash = blake3_hex(given.as_bytes());
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
        self.exported(bytes, info)
    }

    /// `bytes` of the tool `info` as exported, with its provenance.
    fn exported(&self, bytes: Vec<u8>, info: ToolInfo) -> Result<Exported, ExportError> {
        let provenance = self.provenance(&info.name)?;
        Ok(Exported {
            id: temper_runtime::id::ArtifactId::of(&bytes).to_string(),
            bytes,
            tool: info,
            provenance,
        })
    }

    /// The tool `name_or_id` (a name, else an artifact id) as `ctx` sees it.
    pub(super) fn find_visible(
        &self,
        name_or_id: &str,
        ctx: &ForgeContext,
    ) -> Result<ToolInfo, ExportError> {
        let visible = self.visible_tools(ctx)?;
        visible
            .iter()
            .find(|t| t.name == name_or_id)
            .or_else(|| visible.iter().find(|t| t.id == name_or_id))
            .cloned()
            .ok_or_else(|| ExportError::NotFound(name_or_id.to_string()))
    }

    /// A compose tool as one self-contained component (see
    /// [`temper_compose::bundle`]): its adapter composed with its component
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
        if info.mode != Mode::Compose {
            return Err(ExportError::NotCompose(info.name));
        }
        let bytes = self
            .inner
            .store
            .get_artifact(&ArtifactId::from_hex(&info.id)?)?;
        let (bundle, manifest) = self.bundle_of(&bytes, 0)?;
        let bytes = artifact::embed(&bundle, &manifest)?;
        self.exported(bytes, info)
    }

    /// The bundle of the compose artifact `bytes` (without a manifest
    /// section) and the manifest it gets.
    pub(super) fn bundle_of(
        &self,
        bytes: &[u8],
        depth: usize,
    ) -> Result<(Vec<u8>, ArtifactManifest), ExportError> {
        use temper_compose::bundle::{BundleError, BundleStep, bundle, bundle_capabilities};
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
                    if !step_manifest.calls.is_empty() {
                        return Err(ExportError::CodeModeStep {
                            step: step.tool.clone(),
                        });
                    }
                    if step_manifest.mode == Mode::Compose {
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
        manifest.mode = Mode::Bundle;
        manifest.capabilities = bundle_capabilities(&steps);
        Ok((bundled, manifest))
    }

    /// Refuses an artifact that calls tools (code mode) this host cannot
    /// give it: every `tool:NAME` grant must be pinned in its manifest, a
    /// forged callee's artifact must be in this store (by its blake3: the
    /// very tool it was forged against), a hub or host-native one registered
    /// here. A plain export records the callees' ids; it does not carry
    /// them.
    pub(super) async fn check_callees(
        &self,
        manifest: &temper_runtime::artifact::ArtifactManifest,
    ) -> Result<(), ImportError> {
        use temper_runtime::capabilities::tool_calls::tool_grant;
        let missing = |tool: &str, reason: &str| ImportError::MissingCallee {
            tool: tool.to_string(),
            reason: reason.to_string(),
        };
        for name in manifest.capabilities.iter().filter_map(|c| tool_grant(c)) {
            if !manifest.calls.iter().any(|c| c.tool == name) {
                return Err(missing(name, "its manifest grants but does not pin"));
            }
        }
        for call in &manifest.calls {
            match &call.blake3 {
                Some(hex) => {
                    let id = ArtifactId::from_hex(hex)
                        .map_err(|_| missing(&call.tool, "is pinned by a malformed id"))?;
                    let key = id.clone();
                    let found = self
                        .with_store("get_artifact", move |s| s.get_stored(&key).map(|_| ()))
                        .await;
                    match found {
                        Ok(()) => {}
                        Err(StoreError::MissingArtifact { .. }) => {
                            return Err(missing(
                                &call.tool,
                                &format!("is pinned to artifact {id}, not in this store"),
                            ));
                        }
                        Err(e) => return Err(missing(&call.tool, &e.to_string())),
                    }
                }
                None => {
                    if !lock(&self.inner.natives).contains_key(&call.tool) {
                        return Err(missing(
                            &call.tool,
                            "is a hub or host-native tool not registered on this host",
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A bundle (from [`Forge::export_bundle`]) ready to call without the
    /// registry: its host-native imports linked to this host's native tools
    /// (each missing one is an error naming it), granted its manifest's
    /// capabilities ∩ this host's policy.
    ///
    /// Its host-native steps are called under `ctx`'s grant (within the
    /// grant of the call it runs in, if any): a hub tool outside it is
    /// refused ([`crate::grant`]).
    pub async fn load_bundle(
        &self,
        bytes: Vec<u8>,
        ctx: &ForgeContext,
    ) -> Result<Tool, ImportError> {
        let manifest = artifact::read_manifest(&bytes).map_err(ImportError::Artifact)?;
        let base = self.bundle_tool(bytes, Some(ctx.grant().clone())).await?;
        self.inner
            .runtime
            .grant(&base, &manifest.capabilities)
            .map_err(|e| ImportError::Capabilities(vec![e.to_string()]))
    }

    /// A bundle's component with its native imports linked (no grants):
    /// every import outside the `tool` world must be a host-native tool of
    /// this host, by its import name. They are called under `grant`
    /// (`None`: the grant of the call in scope, none refused).
    pub(super) async fn bundle_tool(
        &self,
        bytes: Vec<u8>,
        grant: Option<crate::grant::CallerGrant>,
    ) -> Result<Tool, ImportError> {
        let imports = temper_compose::adapter::component_imports(&bytes)
            .map_err(|e| ImportError::Load(temper_runtime::error::LoadError::Invalid(e)))?;
        let timeout = self.inner.runtime.limits().timeout;
        let mut natives: Vec<(String, Arc<dyn StepCall>)> = Vec::new();
        for (name, _) in imports {
            if temper_runtime::runtime::ALLOWED_IMPORT_PREFIXES
                .iter()
                .any(|p| name.starts_with(p))
            {
                continue;
            }
            let native = lock(&self.inner.natives)
                .values()
                .find(|n| {
                    temper_compose::adapter::import_name(&n.spec.name).as_deref() == Some(&name)
                })
                .cloned()
                .ok_or_else(|| {
                    ImportError::Load(temper_runtime::error::LoadError::ImportNotAllowed(format!(
                        "{name} (not a host-native tool registered on this host)"
                    )))
                })?;
            natives.push((
                native.spec.name.clone(),
                Arc::new(NativeStep {
                    tool: native,
                    timeout,
                    grant: grant.clone(),
                }),
            ));
        }
        temper_compose::bundle::load_bundle(&self.inner.runtime, bytes, natives)
            .await
            .map_err(ImportError::Load)
    }

    pub(super) fn provenance(&self, name: &str) -> Result<Vec<Value>, StoreError> {
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
}
