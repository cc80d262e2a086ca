//! Removing a tool from the caller's session tier
//! ([`Forge::delete_session_tool`], the `delete_tool` built-in): it frees
//! one of the session's `maxSessionTools` slots. Only session-tier tools:
//! an agent-tier or shared tool stays (an operator removes those), and a
//! built-in is never a tool of the registry. Audited as a `deletion`
//! naming the agent and the session that asked.

use serde_json::json;

use super::builtins::is_builtin;
use super::error::{DeleteError, PromotionHint, ValidateError};
use super::manifest::ToolInfo;
use super::session::TierChange;
use super::session_tier::session_info;
use super::{Forge, ForgeContext};
use temper_store::StoreError;

impl Forge {
    /// Deletes `ctx`'s session tool `name`: the tool leaves the session
    /// tier and a `deletion` entry (`"reason": "deleted by its agent"`,
    /// with the session) is appended in one transaction. Returns what was
    /// deleted. Refused, saying what to do instead, for a built-in's
    /// name, a tool of the agent or shared tier, and a name the session
    /// does not hold (the refusal lists the session's tools).
    pub fn delete_session_tool(
        &self,
        name: &str,
        ctx: &ForgeContext,
    ) -> Result<ToolInfo, DeleteError> {
        if is_builtin(name) {
            return Err(DeleteError::Builtin {
                name: name.to_string(),
            });
        }
        let store = &self.inner.store;
        let payload = json!({
            "tier": "session",
            "session": ctx.session_id,
            "agent": ctx.agent_id,
            "reason": "deleted by its agent",
        });
        let deleted = self.change_session(
            ctx,
            || store.delete_session_tool(&ctx.agent_id, &ctx.session_id, name, &payload),
            // Nothing there to remove when it was not found.
            |_| TierChange::Removed(name.to_string()),
        )?;
        if let Some((record, _entry)) = deleted {
            let manifest =
                serde_json::from_value(record.manifest).map_err(|e| StoreError::Invalid {
                    op: "delete_session_tool",
                    detail: format!("the deleted tool's manifest: {e}"),
                })?;
            let tool = super::session::SessionTool {
                artifact: record.artifact,
                manifest,
                source_in_memory: None,
                counters: record.counters,
            };
            return Ok(session_info(&tool, ctx));
        }
        if let Some(found) = store.get(name, &ctx.agent_id)? {
            return Err(DeleteError::NotSessionTier {
                name: name.to_string(),
                tier: found.tier,
                session: ctx.session_id.clone(),
            });
        }
        let tools = self
            .load_session(ctx)?
            .tools()
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        Err(DeleteError::NotFound {
            name: name.to_string(),
            session: ctx.session_id.clone(),
            tools,
        })
    }

    /// How many more tools `ctx`'s session may hold (`maxSessionTools`
    /// minus the tools it holds), as this host reads it.
    pub fn session_slots_left(&self, ctx: &ForgeContext) -> Result<usize, StoreError> {
        let held = self.session_tier(ctx)?.len();
        Ok(self.inner.config.max_session_tools.saturating_sub(held))
    }

    /// `maxSessionTools`.
    pub fn max_session_tools(&self) -> usize {
        self.inner.config.max_session_tools
    }

    /// `e` with the ways on filled in when it is a full session: the
    /// session tool closest to promotion and the successful calls it
    /// still needs (counted as stored, this host's pending calls flushed).
    pub(super) fn with_way_on(&self, e: ValidateError, ctx: &ForgeContext) -> ValidateError {
        match e {
            ValidateError::SessionFull {
                session,
                limit,
                closest: None,
            } => ValidateError::SessionFull {
                session,
                limit,
                closest: self.closest_to_promotion(ctx),
            },
            other => other,
        }
    }

    /// The session tool with the fewest successful calls still missing
    /// for promotion (ties: the first by name).
    fn closest_to_promotion(&self, ctx: &ForgeContext) -> Option<PromotionHint> {
        let store = &self.inner.store;
        store.flush_stats().ok()?;
        let need = self.inner.config.promotion_threshold.uses;
        store
            .session_tools(&ctx.agent_id, &ctx.session_id)
            .ok()?
            .into_iter()
            .map(|t| PromotionHint {
                missing: need.saturating_sub(t.counters.successes),
                name: t.name,
            })
            .min_by(|a, b| a.missing.cmp(&b.missing).then_with(|| a.name.cmp(&b.name)))
    }
}
