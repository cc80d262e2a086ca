//! The forge's side of the stored session tier (see [`session`](super::session)):
//! reading a session's tools (cached under the registry's sessions epoch),
//! opening, using, ending and expiring sessions.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::manifest::{ToolInfo, ToolManifest};
use std::collections::BTreeMap;

use super::session::{CachedTier, SessionSnapshot, SessionTool, TierChange};
use super::{Forge, ForgeContext};
use temper_store::{EndedSession, SessionRecord, StoreError, Tier};

/// Runs the store call `f` on tokio's blocking pool, off the async
/// workers (a panic in it is resumed here).
pub(crate) async fn blocking<T: Send + 'static>(
    op: &'static str,
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(StoreError::Blocking {
            op,
            detail: e.to_string(),
        }),
    }
}

impl Forge {
    /// Reads `ctx`'s session tier from the store (on this thread) and
    /// caches it under the sessions epoch read before the read.
    pub(super) fn load_session(&self, ctx: &ForgeContext) -> Result<Arc<CachedTier>, StoreError> {
        const OP: &str = "session_tools";
        let store = &self.inner.store;
        let epoch = store.session_epoch(&ctx.agent_id, &ctx.session_id);
        let mut tools = BTreeMap::new();
        for r in store.session_tools(&ctx.agent_id, &ctx.session_id)? {
            let manifest: ToolManifest = serde_json::from_value(r.manifest)
                .map_err(|source| StoreError::Json { op: OP, source })?;
            tools.insert(
                r.name,
                Arc::new(SessionTool {
                    source_in_memory: self.inner.sessions.source(&r.artifact),
                    artifact: r.artifact,
                    manifest,
                    counters: r.counters,
                }),
            );
        }
        Ok(self
            .inner
            .sessions
            .put(&ctx.agent_id, &ctx.session_id, epoch, tools))
    }

    /// [`Forge::load_session`] on tokio's blocking pool.
    pub(super) async fn load_session_async(
        &self,
        ctx: &ForgeContext,
    ) -> Result<Arc<CachedTier>, StoreError> {
        let (forge, ctx) = (self.clone(), ctx.clone());
        blocking("session_tools", move || forge.load_session(&ctx)).await
    }

    /// `ctx`'s session tier as cached, while it is current (the registry's
    /// lease holds and the sessions epoch has not moved since it was read).
    pub(super) fn cached_session(&self, ctx: &ForgeContext) -> Option<Arc<CachedTier>> {
        let epoch = self
            .inner
            .store
            .leased_session_epoch(&ctx.agent_id, &ctx.session_id)?;
        self.inner
            .sessions
            .get(&ctx.agent_id, &ctx.session_id, epoch)
    }

    /// `ctx`'s session tier as cached while current, else read from the
    /// store on this thread (the forge's synchronous checks).
    pub(super) fn session_tier(&self, ctx: &ForgeContext) -> Result<Arc<CachedTier>, StoreError> {
        match self.cached_session(ctx) {
            Some(tier) => Ok(tier),
            None => self.load_session(ctx),
        }
    }

    /// Makes a change of `ctx`'s session tier in the store (`write`) and
    /// applies `change` to this host's cached tier in place when nothing
    /// else changed the session meanwhile ([`SessionCache::apply`]).
    ///
    /// [`SessionCache::apply`]: super::session::SessionCache::apply
    pub(super) fn change_session<T>(
        &self,
        ctx: &ForgeContext,
        write: impl FnOnce() -> Result<T, StoreError>,
        change: impl FnOnce(&T) -> TierChange,
    ) -> Result<T, StoreError> {
        let store = &self.inner.store;
        let before = store.session_epoch(&ctx.agent_id, &ctx.session_id);
        let written = write();
        let after = store.session_epoch(&ctx.agent_id, &ctx.session_id);
        match &written {
            Ok(done) => {
                self.inner.sessions.apply(
                    &ctx.agent_id,
                    &ctx.session_id,
                    before,
                    after,
                    change(done),
                );
            }
            Err(_) => self.inner.sessions.forget(&ctx.agent_id, &ctx.session_id),
        }
        written
    }

    /// What a session made implicitly (by its first tool) is stored as:
    /// no owner, the configured idle limit.
    pub(super) fn implicit_session(&self, ctx: &ForgeContext) -> SessionRecord {
        let idle_ms = i64::try_from(self.inner.config.session_idle_secs.saturating_mul(1000))
            .unwrap_or(i64::MAX);
        SessionRecord::new(&ctx.agent_id, &ctx.session_id, "", idle_ms)
    }

    /// The tools of `ctx`'s session, by name, read from the store.
    pub fn session_tools(&self, ctx: &ForgeContext) -> Result<Vec<ToolInfo>, StoreError> {
        let tier = self.load_session(ctx)?;
        Ok(tier
            .tools()
            .iter()
            .map(|(_, t)| session_info(t, ctx))
            .collect())
    }

    /// Stores `ctx`'s session for `owner` (e.g. an HTTP token's key) with
    /// the idle limit `idle` (zero: never expires) unless it is stored
    /// already; returns what is stored, whose owner the caller checks.
    pub async fn open_session(
        &self,
        ctx: &ForgeContext,
        owner: &str,
        idle: Duration,
    ) -> Result<SessionRecord, StoreError> {
        let idle_ms = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
        let record = SessionRecord::new(&ctx.agent_id, &ctx.session_id, owner, idle_ms);
        let store = self.store_handle();
        blocking("open_session", move || store.open_session(&record)).await
    }

    /// `ctx`'s stored session, if it is stored and not expired.
    pub async fn stored_session(
        &self,
        ctx: &ForgeContext,
    ) -> Result<Option<SessionRecord>, StoreError> {
        let (store, agent, session) = (
            self.store_handle(),
            ctx.agent_id.clone(),
            ctx.session_id.clone(),
        );
        let found = blocking("session", move || store.session(&agent, &session)).await?;
        let now = temper_store::now_ms();
        Ok(found.filter(|s| !s.expired_at(now)))
    }

    /// Records a use of `ctx`'s session (written behind).
    pub fn touch_session(&self, ctx: &ForgeContext) -> Result<(), StoreError> {
        self.inner
            .store
            .touch_session(&ctx.agent_id, &ctx.session_id)
    }

    /// Ends up to `limit` expired sessions of any host on the store (see
    /// [`temper_store::Registry::reap_expired_sessions`]): each is ended,
    /// and its tools audited, by exactly one host.
    pub async fn reap_expired_sessions(
        &self,
        limit: usize,
    ) -> Result<Vec<EndedSession>, StoreError> {
        let store = self.store_handle();
        let ended = blocking("reap_expired_sessions", move || {
            store.reap_expired_sessions(limit)
        })
        .await?;
        for e in &ended {
            self.inner.sessions.forget(&e.agent, &e.session);
        }
        Ok(ended)
    }

    /// Ends `ctx`'s session: discards its tier, with a `deletion` audit
    /// entry per tool, in one transaction; returns how many tools were
    /// discarded.
    pub fn cleanup_session(&self, ctx: &ForgeContext) -> Result<usize, StoreError> {
        let ended = self.inner.store.end_session(&ctx.agent_id, &ctx.session_id);
        self.inner.sessions.forget(&ctx.agent_id, &ctx.session_id);
        Ok(ended?.map_or(0, |e| e.tools.len()))
    }

    /// A copy of `ctx`'s session tier (see [`SessionSnapshot`]).
    pub fn snapshot_session(&self, ctx: &ForgeContext) -> Result<SessionSnapshot, StoreError> {
        self.inner.store.flush_stats()?;
        Ok(SessionSnapshot {
            agent_id: ctx.agent_id.clone(),
            session_id: ctx.session_id.clone(),
            tools: self
                .load_session(ctx)?
                .tools()
                .into_iter()
                .map(|(name, t)| (name, Arc::unwrap_or_clone(t)))
                .collect(),
        })
    }

    /// Stores the tools of `snapshot` its session does not hold (by name),
    /// each with a `forge_decision` entry marked `restored`. Every artifact
    /// it names must be in the store; nothing changes otherwise.
    pub fn restore_session(&self, snapshot: SessionSnapshot) -> Result<(), StoreError> {
        let store = &self.inner.store;
        for t in snapshot.tools.values() {
            if !store.has_artifact(&t.artifact)? {
                return Err(StoreError::Invalid {
                    op: "restore_session",
                    detail: format!(
                        "artifact {} of {:?} is not in the store",
                        t.artifact, t.manifest.artifact.name
                    ),
                });
            }
        }
        let ctx = ForgeContext::new(snapshot.agent_id.clone(), snapshot.session_id.clone());
        let held = self.load_session(&ctx)?;
        let session = self.implicit_session(&ctx);
        for (name, t) in &snapshot.tools {
            if held.contains(name) {
                continue;
            }
            let manifest = serde_json::to_value(&t.manifest).expect("a manifest serializes");
            let decision = json!({
                "approved": t.manifest.verdict.approved,
                "restored": true,
                "session": ctx.session_id,
                "tier": "session",
                "artifact": t.artifact.as_str(),
                "sourceBlake3": t.manifest.artifact.source_blake3,
            });
            store.add_session_tool(
                &session,
                name,
                &t.artifact,
                &manifest,
                &decision,
                usize::MAX,
            )?;
            if let Some(source) = &t.source_in_memory {
                self.inner.sessions.keep_source(&t.artifact, source.clone());
            }
        }
        self.inner.sessions.forget(&ctx.agent_id, &ctx.session_id);
        Ok(())
    }
}

/// What a listing shows of `ctx`'s session-tier tool `tool`.
pub(super) fn session_info(tool: &crate::session::SessionTool, ctx: &ForgeContext) -> ToolInfo {
    ToolInfo::new(
        &tool.manifest,
        Tier::Session,
        tool.artifact.as_str(),
        Some(ctx.agent_id.clone()),
        Some(ctx.session_id.clone()),
    )
}
