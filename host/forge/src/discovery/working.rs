//! The session's **working set**: the tools found (by `search_tools`),
//! loaded or forged in a session, most recent first. It is kept in the
//! store with the session (any host on the store serves it, it ends with
//! the session) and bounded ([`temper_store::MAX_WORKING_SET`]); what
//! `tools/list` shows beyond the built-ins starts with it.

use temper_store::StoreError;

use crate::session_tier::blocking;
use crate::{Forge, ForgeContext};

impl Forge {
    /// `ctx`'s working set, most recent first.
    pub async fn working_set(&self, ctx: &ForgeContext) -> Result<Vec<String>, StoreError> {
        let (store, agent, session) = (
            self.store_handle(),
            ctx.agent_id.clone(),
            ctx.session_id.clone(),
        );
        blocking("working_set", move || store.working_set(&agent, &session)).await
    }

    /// Puts `names` at the front of `ctx`'s working set (the session is
    /// stored, as its first tool would store it, if it is not); returns
    /// whether the set changed. Nothing is written when `names` already
    /// lead it in that order.
    pub async fn remember(&self, ctx: &ForgeContext, names: &[String]) -> Result<bool, StoreError> {
        if names.is_empty() {
            return Ok(false);
        }
        let held = self.working_set(ctx).await?;
        let merged = temper_store::merge_working_set(&held, names, temper_store::MAX_WORKING_SET);
        if merged == held {
            return Ok(false);
        }
        let (store, session, names) = (
            self.store_handle(),
            self.implicit_session(ctx),
            names.to_vec(),
        );
        blocking("add_to_working_set", move || {
            store.add_to_working_set(&session, &names)
        })
        .await?;
        Ok(true)
    }

    /// Up to `limit` of the agent- and shared-tier tools `ctx`'s agent
    /// calls most (as written so far).
    pub async fn most_used(
        &self,
        ctx: &ForgeContext,
        limit: usize,
    ) -> Result<Vec<String>, StoreError> {
        let (store, agent) = (self.store_handle(), ctx.agent_id.clone());
        blocking("most_used", move || store.most_used(&agent, limit)).await
    }
}
