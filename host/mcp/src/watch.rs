//! Registry changes made elsewhere, for `notifications/tools/list_changed`.
//!
//! Several hosts (or several `temper mcp` processes) may share one store.
//! A promotion or deletion on one of them changes what the sessions of the
//! others may list, and MCP clients re-list only when told. The audit trail
//! is the record of every registry change, in commit order and without gaps
//! (each backend appends a change's entry in the change's own transaction),
//! so a [`RegistryWatch`] keeps a cursor into it: every poll reads the
//! entries after the cursor and says whom they concern ([`Changes`]).
//!
//! One cursor per process (per HTTP server, per stdio connection) serves
//! both paths, so no change is announced twice:
//! - a change this process makes ([`RegistryWatch::local_change`]) holds the
//!   cursor from before the change until the handler has read it back, and
//!   the handler announces it on the request (with the transport's
//!   fallbacks);
//! - a poll every [`DEFAULT_POLL`] ([`RegistryWatch::poll`]) finds the
//!   changes other processes made.
//!
//! The same reads keep the forge's cache of resolved names current: a read
//! that finds a registration, deletion or promotion moves the registry's
//! tiers epoch ([`Registry::tiers_changed`]), and every complete poll
//! renews the registry's lease on cached resolutions until one interval
//! after the poll started ([`Registry::trail_read`]). So a change another
//! process commits stops cached resolutions here within the poll interval;
//! without polls (or while they fail) nothing cached is used.
//!
//! What counts: registrations and deletions in the agent tier (they concern
//! that agent's sessions) and in the shared tier (everyone's), and
//! promotions to the shared tier. Session tiers belong to one connection
//! and are announced there; invocation failures and approvals change no
//! list.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Mutex, OwnedMutexGuard};

use super::access::Access;
use temper_store::{AuditEntry, AuditKind, Registry, StoreError};

/// How often a watch polls the audit trail by default.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// Audit entries read per query while catching up (fewer under test, so
/// a catch-up spans pages).
const PAGE: usize = if cfg!(test) { 4 } else { 512 };

/// Whom a run of registry changes concerns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// The shared tier changed: every session may list something new.
    pub shared: bool,
    /// Agents whose agent tier changed.
    pub agents: BTreeSet<String>,
}

impl Changes {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        !self.shared && self.agents.is_empty()
    }

    /// Whether a session of `agent`, using the tiers `access` allows, can
    /// list something different now.
    pub fn reaches(&self, agent: &str, access: Access) -> bool {
        (self.shared && access.shared) || (access.agent && self.agents.contains(agent))
    }

    /// Adds what `entry` changed, if it changed a list.
    pub fn add(&mut self, entry: &AuditEntry) {
        let tier = |key: &str| entry.payload.get(key).and_then(Value::as_str);
        match entry.kind {
            AuditKind::Registration | AuditKind::Deletion => match tier("tier") {
                Some("shared") => self.shared = true,
                Some("agent") => {
                    let owner = tier("owner").or(entry.agent.as_deref());
                    if let Some(owner) = owner {
                        self.agents.insert(owner.to_string());
                    }
                }
                _ => {}
            },
            AuditKind::Promotion if tier("to") == Some("shared") => self.shared = true,
            _ => {}
        }
    }
}

/// A cursor into the audit trail (see the module docs). Cheap to share.
#[derive(Clone)]
pub struct RegistryWatch {
    store: Arc<Registry>,
    /// The last audit seq read.
    cursor: Arc<Mutex<i64>>,
}

impl RegistryWatch {
    /// A watch on `store` (e.g. [`Forge::store_handle`](temper_forge::Forge::store_handle))
    /// starting at the trail's current head: what happened before it
    /// started is not announced.
    pub async fn start(store: Arc<Registry>) -> Result<Self, StoreError> {
        let reader = store.clone();
        let head = blocking("audit_head_seq", move || reader.audit_head_seq()).await?;
        // What changed before the head is never read back: resolutions
        // cached before now are not to be trusted.
        store.tiers_changed();
        Ok(Self {
            store,
            cursor: Arc::new(Mutex::new(head)),
        })
    }

    /// The changes committed since the last read, by anyone. On an error
    /// the cursor stays where it was: the next poll reads the same entries
    /// again, so nothing is lost.
    pub async fn poll(&self) -> Result<Changes, StoreError> {
        let mut cursor = self.cursor.clone().lock_owned().await;
        self.read(&mut cursor).await
    }

    /// Holds the cursor while this process makes a change: no poll reads
    /// the change before [`LocalChange::finish`] does, so it is announced
    /// once, by the request that made it.
    pub async fn local_change(&self) -> LocalChange {
        LocalChange {
            watch: self.clone(),
            cursor: self.cursor.clone().lock_owned().await,
        }
    }

    /// Reads every entry after `cursor`, page by page; moves `cursor` to
    /// the last one only when every page was read.
    async fn read(&self, cursor: &mut i64) -> Result<Changes, StoreError> {
        let mut changes = Changes::default();
        let mut last = *cursor;
        loop {
            let reader = self.store.clone();
            let after = last;
            let page = blocking("audit_entries", move || reader.audit_entries(after, PAGE)).await?;
            for entry in &page {
                changes.add(entry);
                last = entry.seq;
            }
            // Any change of a tool row makes cached resolutions stale
            // (the forge's name cache), whomever it concerns.
            if page.iter().any(|e| {
                matches!(
                    e.kind,
                    AuditKind::Registration | AuditKind::Deletion | AuditKind::Promotion
                )
            }) {
                self.store.tiers_changed();
            }
            // A session tier changed (on any host): cached session tiers
            // are stale.
            if page.iter().any(concerns_a_session) {
                self.store.sessions_changed();
            }
            if page.len() < PAGE {
                *cursor = last;
                return Ok(changes);
            }
        }
    }
}

/// Whether `entry` records a change of a session tier: a session tool
/// forged or imported, discarded, or promoted out of it.
fn concerns_a_session(entry: &AuditEntry) -> bool {
    let field = |key: &str| entry.payload.get(key).and_then(Value::as_str);
    match entry.kind {
        AuditKind::ForgeDecision | AuditKind::Deletion => field("tier") == Some("session"),
        AuditKind::Promotion => field("from") == Some("session"),
        _ => false,
    }
}

/// A change in progress (see [`RegistryWatch::local_change`]).
pub struct LocalChange {
    watch: RegistryWatch,
    cursor: OwnedMutexGuard<i64>,
}

impl LocalChange {
    /// Reads the trail up to now (the change, and whatever else committed
    /// meanwhile) and lets polls go on.
    pub async fn finish(mut self) -> Result<Changes, StoreError> {
        self.watch.read(&mut self.cursor).await
    }
}

/// Runs the store call `op` off the async workers.
async fn blocking<T: Send + 'static>(
    op: &'static str,
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(StoreError::Invalid {
            op,
            detail: format!("the registry watch's read failed: {e}"),
        })
    })
}

/// Polls `watch` every `every` (the first poll at once) and hands each
/// non-empty [`Changes`] to `deliver`, until `deliver` returns false. A
/// failed poll is reported on stderr once per run of failures and retried
/// at the next tick (the cursor does not move, so nothing is lost).
///
/// Each complete poll also renews the store's lease on cached name
/// resolutions ([`Registry::trail_read`]) until one `every` after the
/// poll started: a change another host commits stops cached resolutions
/// here within `every`, and while polls fail or lag nothing cached is
/// used.
pub async fn poll_loop(
    watch: RegistryWatch,
    every: Duration,
    mut deliver: impl FnMut(Changes) -> bool,
) {
    let mut failing = false;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        // The first tick is at once: the lease starts with the loop.
        tick.tick().await;
        let started = std::time::Instant::now();
        match watch.poll().await {
            Ok(changes) => {
                // Every change the read found moved the tiers' epoch:
                // cached resolutions may be used for one interval from
                // the read's start.
                watch.store.trail_read(started, every);
                if failing {
                    tracing::info!("the registry watch reads the store again");
                    failing = false;
                }
                if !changes.is_empty() && !deliver(changes) {
                    return;
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!("the registry watch cannot read the audit trail: {e}");
                    failing = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(kind: AuditKind, agent: Option<&str>, payload: Value) -> AuditEntry {
        AuditEntry {
            seq: 1,
            kind,
            subject: "t".into(),
            agent: agent.map(str::to_string),
            payload,
            ts_ms: 0,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    fn of(entries: &[AuditEntry]) -> Changes {
        let mut c = Changes::default();
        for e in entries {
            c.add(e);
        }
        c
    }

    /// Appends `n` entries that change no list, then an agent-tier
    /// registration for `agent`.
    fn append(store: &Registry, n: usize, agent: &str) {
        for i in 0..n {
            store
                .append_audit(
                    AuditKind::InvocationFailure,
                    &format!("t{i}"),
                    Some(agent),
                    &json!({}),
                )
                .unwrap();
        }
        store
            .append_audit(
                AuditKind::Registration,
                "t",
                Some(agent),
                &json!({"tier": "agent"}),
            )
            .unwrap();
    }

    #[tokio::test]
    async fn a_poll_reads_every_page_and_a_failed_one_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Registry::open(dir.path()).unwrap());
        append(&store, 2, "before");
        let watch = RegistryWatch::start(store.clone()).await.unwrap();
        assert!(watch.poll().await.unwrap().is_empty(), "starts at the head");

        // Three pages of noise, then the change: found across the pages.
        append(&store, 3 * PAGE, "alice");
        let changes = watch.poll().await.unwrap();
        assert_eq!(changes.agents, BTreeSet::from(["alice".to_string()]));
        assert!(watch.poll().await.unwrap().is_empty(), "read once");

        // The trail cannot be read: the poll fails, the cursor stays, and
        // the change is found once the trail is back.
        append(&store, PAGE + 1, "bob");
        let sql = rusqlite::Connection::open(dir.path().join("temper.db")).unwrap();
        sql.execute_batch("ALTER TABLE audit RENAME TO audit_away")
            .unwrap();
        assert!(watch.poll().await.is_err());
        sql.execute_batch("ALTER TABLE audit_away RENAME TO audit")
            .unwrap();
        let changes = watch.poll().await.unwrap();
        assert_eq!(changes.agents, BTreeSet::from(["bob".to_string()]));

        // A local change holds the cursor: a poll waits for it, and the
        // change is read by the holder only.
        let change = watch.local_change().await;
        append(&store, 0, "carol");
        let polled = tokio::spawn({
            let watch = watch.clone();
            async move { watch.poll().await.unwrap() }
        });
        tokio::task::yield_now().await;
        assert!(!polled.is_finished());
        let mine = change.finish().await.unwrap();
        assert_eq!(mine.agents, BTreeSet::from(["carol".to_string()]));
        assert!(polled.await.unwrap().is_empty());
    }

    #[test]
    fn agent_tier_changes_concern_their_agent_only() {
        let c = of(&[
            entry(
                AuditKind::Registration,
                Some("alice"),
                json!({"tier": "agent"}),
            ),
            entry(
                AuditKind::Deletion,
                Some("root"),
                json!({"tier": "agent", "owner": "bob"}),
            ),
        ]);
        assert_eq!(
            c.agents,
            BTreeSet::from(["alice".to_string(), "bob".to_string()])
        );
        assert!(!c.shared);
        assert!(c.reaches("alice", Access::ALL));
        assert!(c.reaches("bob", Access::ALL));
        assert!(!c.reaches("carol", Access::ALL));
        // A session that may not use the agent tier lists nothing new.
        let shared_only = Access {
            session: true,
            agent: false,
            shared: true,
        };
        assert!(!c.reaches("alice", shared_only));
    }

    #[test]
    fn shared_tier_changes_concern_everyone_with_shared_access() {
        for e in [
            entry(
                AuditKind::Promotion,
                Some("a"),
                json!({"from": "agent", "to": "shared"}),
            ),
            entry(AuditKind::Registration, None, json!({"tier": "shared"})),
            entry(AuditKind::Deletion, Some("a"), json!({"tier": "shared"})),
        ] {
            let c = of(std::slice::from_ref(&e));
            assert!(c.shared, "{e:?}");
            assert!(c.reaches("anyone", Access::ALL));
            let agent_only = Access {
                session: true,
                agent: true,
                shared: false,
            };
            assert!(!c.reaches("anyone", agent_only));
        }
    }

    #[test]
    fn session_tiers_decisions_and_failures_change_no_list() {
        let c = of(&[
            entry(
                AuditKind::Registration,
                Some("a"),
                json!({"tier": "session"}),
            ),
            entry(AuditKind::Deletion, Some("a"), json!({"tier": "session"})),
            // Session -> agent: the registration that follows is what counts.
            entry(
                AuditKind::Promotion,
                Some("a"),
                json!({"from": "session", "to": "agent"}),
            ),
            entry(
                AuditKind::ForgeDecision,
                Some("a"),
                json!({"tier": "agent"}),
            ),
            entry(AuditKind::InvocationFailure, Some("a"), json!({})),
            entry(AuditKind::Approval, Some("a"), json!({})),
        ]);
        assert!(c.is_empty(), "{c:?}");
    }
}
