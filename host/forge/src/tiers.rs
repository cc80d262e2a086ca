//! The tiers: what a caller sees (session, agent, shared), call stats,
//! promotion (session → agent with a panel's review, agent → shared with a
//! human's approval), and the session tier's lifetime.

use serde_json::json;

use super::error::{InvokeError, PromoteError, Stage, ValidateError, conflict_tier};
use super::judge::{PanelVerdict, ToolCandidate, panel};
use super::manifest::{ToolInfo, ToolManifest};
use super::pipeline::{composition_of, used_apis};
use super::session::{CachedTier, TierChange};
use super::validate::{self, Occupancy};
use super::{Forge, ForgeContext};
use std::sync::Arc;
use temper_runtime::artifact::Mode;
use temper_runtime::id::blake3_hex;
use temper_store::{AuditKind, StoreError, Tier, ToolRecord, ToolStats};

impl Forge {
    pub(super) fn info_of(record: ToolRecord) -> Result<ToolInfo, StoreError> {
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
        let mut out = self.session_tools(ctx)?;
        for t in self.agent_tools(&ctx.agent_id)? {
            if !out.iter().any(|s| s.name == t.name) {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// [`Forge::visible_tools`] without a registry read on the calling
    /// thread (an async worker): the session tier from its cache while
    /// current, the agent and shared tiers from the listing cache while the
    /// registry's lease holds (see the `listing` module); otherwise read on
    /// tokio's blocking pool. Tiers as [`Forge::invoke`] resolves them.
    pub async fn visible_tools_async(
        &self,
        ctx: &ForgeContext,
    ) -> Result<Vec<ToolInfo>, StoreError> {
        let session = match self.cached_session(ctx) {
            Some(tier) => tier,
            None => self.load_session_async(ctx).await?,
        };
        let persisted = self.persisted_listing(&ctx.agent_id).await?;
        let held = session.tools();
        let mut out = Vec::with_capacity(held.len() + persisted.len());
        out.extend(
            held.iter()
                .map(|(_, t)| crate::session_tier::session_info(t, ctx)),
        );
        for t in persisted.iter() {
            if !session.contains(&t.name) {
                out.push(t.clone());
            }
        }
        Ok(out)
    }

    /// What `ctx` sees of each of `names` (as [`Forge::visible_tools_async`]
    /// resolves it), in their order; a name it does not see is left out.
    /// Read from the caches while current, without copying the listing.
    pub(crate) async fn infos_of(
        &self,
        ctx: &ForgeContext,
        names: &[String],
    ) -> Result<Vec<ToolInfo>, StoreError> {
        let session = match self.cached_session(ctx) {
            Some(tier) => tier,
            None => self.load_session_async(ctx).await?,
        };
        let persisted = self.persisted_listing(&ctx.agent_id).await?;
        Ok(names
            .iter()
            .filter_map(|name| match session.get(name) {
                Some(tool) => Some(crate::session_tier::session_info(&tool, ctx)),
                None => persisted.iter().find(|t| &t.name == name).cloned(),
            })
            .collect())
    }

    /// `agent`'s [`Forge::agent_tools`]: cached while the lease holds, else
    /// read on the blocking pool (and cached under the epoch read before).
    async fn persisted_listing(
        &self,
        agent: &str,
    ) -> Result<std::sync::Arc<Vec<ToolInfo>>, StoreError> {
        let store = &self.inner.store;
        if let Some(epoch) = store.leased_listing_epoch(agent)
            && let Some(listing) = self.inner.listings.get(agent, epoch)
        {
            return Ok(listing);
        }
        let epoch = store.listing_epoch(agent);
        let (forge, owner) = (self.clone(), agent.to_owned());
        let listing = self
            .with_store("tools", move |_| forge.agent_tools(&owner))
            .await?;
        let listing = std::sync::Arc::new(listing);
        self.inner.listings.put(agent, epoch, listing.clone());
        Ok(listing)
    }

    /// Call statistics of the tool `name` as `ctx` sees it.
    pub fn tool_stats(&self, name: &str, ctx: &ForgeContext) -> Result<ToolStats, InvokeError> {
        if let Some(c) =
            self.inner
                .store
                .session_tool_counters(&ctx.agent_id, &ctx.session_id, name)?
        {
            return Ok(c.stats());
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

    /// Promotes the session tool `name` to `ctx.agent_id`'s agent tier. Needs
    /// at least `promotionThreshold.uses` successful calls, a forge verdict
    /// confidence above `promotionThreshold.confidence`, room under
    /// `maxAgentTools`, and both panel reviewers (safety, correctness)
    /// approving. The panel sees the source: the one kept in memory, or
    /// `source` when given (it must hash to the recorded `sourceBlake3`).
    /// The panel's decision is audited either way; on approval the tool
    /// leaves the session tier and is registered for the agent with the
    /// call statistics it had there (counted up to the moment it moves).
    pub async fn promote(
        &self,
        name: &str,
        ctx: &ForgeContext,
        source: Option<&str>,
    ) -> Result<ToolInfo, PromoteError> {
        let (info, ()) = self.promote_with(name, ctx, source, async {}).await?;
        Ok(info)
    }

    /// [`Forge::promote`], awaiting `before_register` once the panel has
    /// approved, right before the registration, and returning its output
    /// with the result (e.g. a lock that must cover the registration but
    /// not the review). On a refusal before that point it is never awaited.
    pub async fn promote_with<G>(
        &self,
        name: &str,
        ctx: &ForgeContext,
        source: Option<&str>,
        before_register: impl Future<Output = G>,
    ) -> Result<(ToolInfo, G), PromoteError> {
        let store_err = |source| PromoteError::Store {
            stage: Stage::Promote,
            source,
        };
        let not_found = || PromoteError::NotFound {
            stage: Stage::Promote,
            tier: Tier::Session,
            name: name.to_string(),
            owner: ctx.session_id.clone(),
        };
        let mut tool = self
            .load_session(ctx)
            .map_err(store_err)?
            .get(name)
            .map(Arc::unwrap_or_clone)
            .ok_or_else(not_found)?;
        // Every call counted so far, on any host that has flushed.
        if let Some(c) = self
            .inner
            .store
            .session_tool_counters(&ctx.agent_id, &ctx.session_id, name)
            .map_err(store_err)?
        {
            tool.counters = c;
        }
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
        let compose = tool.manifest.artifact.mode == Mode::Compose;
        let source = match (
            source,
            &tool.source_in_memory,
            &tool.manifest.artifact.source,
        ) {
            // A compose tool's pipeline is in its manifest: nothing to pass.
            _ if compose => None,
            (Some(given), _, _) => {
                let hash = blake3_hex(given.as_bytes());
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
        let hooked = before_register.await;
        // The session tool leaves its tier in the registration's
        // transaction, its stored calls carried over.
        // This host's cached tier loses the tool in place.
        let promoted = self.change_session(
            ctx,
            || {
                self.inner
                    .store
                    .promote_from_session(record, &payload, &ctx.session_id)
            },
            |_| TierChange::Removed(name.to_string()),
        );
        let record = match promoted {
            Ok(record) => record,
            // Another host registered the name for this agent first.
            Err(StoreError::Conflict { tier, .. }) => {
                return Err(PromoteError::NameTaken {
                    stage: Stage::Promote,
                    name: name.to_string(),
                    tier: conflict_tier(tier),
                });
            }
            // Promoted, or its session ended, on another host meanwhile.
            Err(StoreError::NotFound { .. }) => return Err(not_found()),
            Err(e) => return Err(store_err(e)),
        };
        // Other hosts may have filled the agent tier meanwhile: a
        // registration over the limit is withdrawn (audited as a deletion)
        // and the tool goes back to its session, with a forge decision
        // marked `restored` (its session-tier calls restart from zero).
        if self
            .withdraw_over_limit(&record, &ctx.agent_id)
            .map_err(store_err)?
        {
            let manifest = serde_json::to_value(&tool.manifest).expect("a manifest serializes");
            let decision = json!({
                "approved": true,
                "restored": true,
                "reason": "promotion withdrawn: maxAgentTools",
                "session": ctx.session_id,
                "tier": "session",
                "artifact": tool.artifact.as_str(),
                "sourceBlake3": tool.manifest.artifact.source_blake3,
            });
            self.inner
                .store
                .add_session_tool(
                    &self.implicit_session(ctx),
                    name,
                    &tool.artifact,
                    &manifest,
                    &decision,
                    usize::MAX,
                )
                .map_err(store_err)?;
            return Err(PromoteError::AgentFull {
                agent: ctx.agent_id.clone(),
                limit: self.inner.config.max_agent_tools,
            });
        }
        Ok((Self::info_of(record).map_err(store_err)?, hooked))
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
            Err(StoreError::Conflict { tier, .. }) => Err(PromoteError::NameTaken {
                stage: Stage::Approve,
                name: name.to_string(),
                tier: conflict_tier(tier),
            }),
            Err(e) => Err(store_err(e)),
        }
    }

    /// Keeps `maxAgentTools` when several hosts register for one agent at
    /// once. Each host checks the limit before registering, but two hosts
    /// can both pass that check; so, after registering `record` in
    /// `agent`'s tier, the agent's tools are counted again and, if there
    /// are more than the limit, the ones registered last (by their
    /// registration's audit seq, which orders commits across hosts) are
    /// over it. If `record` is one of them it is deleted (audited as a
    /// deletion) and `true` is returned: the caller refuses with its
    /// agent-full error. The earliest registrations always stay, so
    /// exactly the limit's worth of racing registrations survive.
    pub(super) fn withdraw_over_limit(
        &self,
        record: &ToolRecord,
        agent: &str,
    ) -> Result<bool, StoreError> {
        let limit = self.inner.config.max_agent_tools;
        let store = &self.inner.store;
        // Counted first: the tier is read only when it is over the limit
        // (a race between hosts), not at every registration.
        if store.agent_tool_count(agent)? <= limit {
            return Ok(false);
        }
        let mut tools = store.tools_for_agent(agent)?;
        if tools.len() <= limit {
            return Ok(false);
        }
        tools.sort_by_key(|t| t.created_seq);
        let rank = tools
            .iter()
            .position(|t| t.name == record.name && t.created_seq == record.created_seq);
        match rank {
            Some(rank) if rank >= limit => {
                store.delete(&record.name, agent)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// How full `ctx`'s tiers are and where `name` is taken; `session` is
    /// `ctx`'s session tier as read.
    pub(super) fn occupancy(
        &self,
        session: &CachedTier,
        name: &str,
        ctx: &ForgeContext,
    ) -> Result<Occupancy, StoreError> {
        let name_taken = if session.contains(name) {
            Some(Tier::Session)
        } else {
            self.inner.store.get(name, &ctx.agent_id)?.map(|r| r.tier)
        };
        Ok(Occupancy {
            session_tools: session.len(),
            agent_tools: self.inner.store.agent_tool_count(&ctx.agent_id)?,
            name_taken,
        })
    }

    /// The name is free and `tier` has room: the session limit applies to
    /// the session tier, the agent limit to the session and agent tiers.
    pub(super) fn check_occupancy(
        &self,
        sessions: &CachedTier,
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
        .map_err(|e| self.with_way_on(e, ctx))
    }
}
