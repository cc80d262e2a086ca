//! The trust policy in the forge (`temper_sign`): every import is checked
//! before anything else runs ([`Forge::import_from`]), and the agent and
//! shared tiers are re-checked when a host starts or the policy changes
//! ([`Forge::check_tiers`], [`Forge::set_trust`]). A registered tool that
//! fails is disabled, not deleted: its calls are refused naming why, an
//! audit entry (`trust_disabled`) records it, and it comes back when a
//! policy trusts it again.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use temper_runtime::id::ArtifactId;
use temper_sign::{Date, Subject, TrustPolicy, Verdict};
use temper_store::{AuditKind, StoreError, Tier, ToolRecord};

use super::error::{ImportError, InvokeError};
use super::{Forge, lock};

/// The trust policy as a runtime's admission gate
/// ([`temper_runtime::RuntimeBuilder::admission`]): [`Runtime::load`] of
/// outside bytes is refused unless they meet the policy, as `temper run
/// FILE.wasm --trust` does. Rules match the manifest's tool name (the
/// artifact id when the bytes carry no manifest).
///
/// [`Runtime::load`]: temper_runtime::Runtime::load
#[derive(Debug, Clone)]
pub struct TrustAdmission {
    policy: Arc<TrustPolicy>,
}

impl TrustAdmission {
    /// A gate enforcing `policy`.
    pub fn new(policy: TrustPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl temper_runtime::ArtifactAdmission for TrustAdmission {
    fn admit(&self, bytes: &[u8]) -> Result<(), String> {
        let id = ArtifactId::of(bytes);
        let name = temper_runtime::artifact::read_manifest(bytes)
            .map(|m| m.name)
            .unwrap_or_else(|_| id.to_string());
        let subject = Subject {
            id: id.as_str(),
            name: &name,
            reference: None,
        };
        self.policy
            .check(&subject, bytes, None, Date::today())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// A registered tool the trust policy disabled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DisabledTool {
    /// The tool's name.
    pub name: String,
    /// Its tier (`agent` or `shared`).
    pub tier: String,
    /// Its owner, for an agent-tier tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Its artifact id.
    pub artifact: String,
    /// The refusal, naming the rule and what is missing.
    pub reason: String,
}

impl Forge {
    /// The trust policy in force (the default is `level = "off"`).
    pub fn trust(&self) -> Arc<TrustPolicy> {
        self.inner
            .trust
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Checks `bytes` (tool `name`, pulled from `reference` if any) against
    /// the trust policy: the verdict to record, or the refusal.
    pub(super) fn trust_check(
        &self,
        bytes: &[u8],
        name: &str,
        reference: Option<&str>,
    ) -> Result<Verdict, ImportError> {
        let policy = self.trust();
        let id = ArtifactId::of(bytes);
        let subject = Subject {
            id: id.as_str(),
            name,
            reference,
        };
        Ok(policy.check(&subject, bytes, None, Date::today())?)
    }

    /// The audit record of an admitted artifact's trust check (`None`
    /// without a policy).
    pub(super) fn trust_record(verdict: &Verdict) -> Option<Value> {
        (verdict.level != temper_sign::Level::Off).then(|| verdict.audit_json())
    }

    /// Refuses a call of a disabled tool (its artifact `id`).
    pub(super) fn refuse_disabled(&self, id: &ArtifactId, tool: &str) -> Result<(), InvokeError> {
        match lock(&self.inner.disabled).get(id.as_str()) {
            Some(d) => Err(InvokeError::Load {
                tool: tool.to_string(),
                message: format!("disabled by the trust policy: {}", d.reason),
            }),
            None => Ok(()),
        }
    }

    /// The tools the trust policy disabled, by artifact id.
    pub fn disabled_tools(&self) -> Vec<DisabledTool> {
        lock(&self.inner.disabled).values().cloned().collect()
    }

    /// Replaces the trust policy and re-checks `agent`'s tier and the
    /// shared tier under it ([`Forge::check_tiers`]).
    pub async fn set_trust(
        &self,
        policy: TrustPolicy,
        agent: &str,
    ) -> Result<Vec<DisabledTool>, StoreError> {
        *self.inner.trust.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(policy);
        self.check_tiers(agent).await
    }

    /// Checks every tool of `agent`'s tier and of the shared tier against
    /// the trust policy (what a host does on start). Tools that fail are
    /// disabled, each with a `trust_disabled` audit entry the first time;
    /// tools that pass (again) are enabled. Under `audit` nothing is
    /// disabled (refusals are logged); under `off` everything is enabled.
    /// Returns the tools disabled now.
    pub async fn check_tiers(&self, agent: &str) -> Result<Vec<DisabledTool>, StoreError> {
        let policy = self.trust();
        let owner = agent.to_string();
        let mut records: Vec<ToolRecord> = self
            .with_store("tools", move |s| {
                let mut all = s.tools_for_agent(&owner)?;
                all.extend(s.shared_tools()?);
                Ok(all)
            })
            .await?;
        records.sort_by(|a, b| (a.tier.as_str(), &a.name).cmp(&(b.tier.as_str(), &b.name)));
        let mut failing: BTreeMap<String, DisabledTool> = BTreeMap::new();
        if policy.level != temper_sign::Level::Off {
            for record in records {
                let bytes = self.stored_artifact(&record.artifact).await?;
                let subject = Subject {
                    id: record.artifact.as_str(),
                    name: &record.name,
                    reference: None,
                };
                if let Err(e) = policy.check(&subject, &bytes, None, Date::today()) {
                    failing.insert(
                        record.artifact.to_string(),
                        DisabledTool {
                            name: record.name.clone(),
                            tier: record.tier.as_str().to_string(),
                            agent: (record.tier == Tier::Agent)
                                .then(|| record.agent_id.clone())
                                .flatten(),
                            artifact: record.artifact.to_string(),
                            reason: e.to_string(),
                        },
                    );
                }
            }
        }
        let newly: Vec<DisabledTool> = {
            let mut disabled = lock(&self.inner.disabled);
            let newly = failing
                .values()
                .filter(|d| disabled.get(&d.artifact) != Some(d))
                .cloned()
                .collect();
            // This check covers the shared tier and `agent`'s: other
            // agents' disabled tools stay as their own checks left them.
            disabled.retain(|_, d| d.tier != "shared" && d.agent.as_deref() != Some(agent));
            disabled.extend(failing.clone());
            newly
        };
        for d in &newly {
            tracing::warn!(tool = %d.name, artifact = %d.artifact, "disabled: {}", d.reason);
            let payload = json!({
                "tier": d.tier,
                "owner": d.agent,
                "artifact": d.artifact,
                "reason": d.reason,
                "trust": policy.file.as_ref().map(|p| p.display().to_string()),
            });
            let (kind, name, agent) = (AuditKind::TrustDisabled, d.name.clone(), d.agent.clone());
            self.with_store("append_audit", move |s| {
                s.append_audit(kind, &name, agent.as_deref(), &payload)
                    .map(|_| ())
            })
            .await?;
        }
        Ok(failing.into_values().collect())
    }
}
