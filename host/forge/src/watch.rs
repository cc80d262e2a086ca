//! The registry watch: what keeps a [`Forge`](crate::Forge)'s caches
//! current when other processes or hosts share its store, and what tells
//! MCP transports whom a registry change concerns.
//!
//! Several hosts (or several `temper` processes) may share one store. The
//! audit trail is the record of every registry change, in commit order and
//! without gaps (each backend appends a change's entry in the change's own
//! transaction), so a [`RegistryWatch`] keeps a cursor into it: every poll
//! reads the entries after the cursor, moves the registry's epochs of what
//! each concerns (a name, an agent's listing, a session tier; see
//! `temper_store`'s `freshness`), and says whom they concern ([`Changes`]).
//! Entries this process appended are skipped for the epochs (they moved
//! when the change was made, and the forge updated its caches in place) but
//! still reported.
//!
//! One cursor per forge serves every path, so no change is announced twice:
//! - a change a transport's request makes ([`RegistryWatch::local_change`])
//!   holds the cursor from before the change until the request has read it
//!   back, and announces it on the request;
//! - the forge's poll (a thread of its own, every
//!   [`ForgeBuilder::registry_poll`](crate::ForgeBuilder::registry_poll),
//!   [`DEFAULT_POLL`] by default) finds the changes other processes made,
//!   and hands them to [`Forge::subscribe_changes`](crate::Forge::subscribe_changes).
//!
//! Each complete poll renews the registry's lease on cached entries until
//! one interval after the poll started ([`Registry::trail_read`]). So a
//! change another process commits stops cached entries here within the
//! poll interval (the **staleness bound**); without polls (or while they
//! fail) nothing cached is used. [`Forge::refresh`](crate::Forge::refresh)
//! reads the trail at once, for a caller that must see another host's
//! change now.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{Mutex, OwnedMutexGuard, broadcast};

use crate::session_tier::blocking;
use temper_store::{AuditEntry, AuditKind, Registry, StoreError};

/// How often a forge polls the audit trail by default: the staleness bound
/// of its caches when other hosts share the store.
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

    /// Whether a session of `agent` that may use the agent tier
    /// (`agent_tier`) and the shared tier (`shared_tier`) can list
    /// something different now.
    pub fn reaches_tiers(&self, agent: &str, agent_tier: bool, shared_tier: bool) -> bool {
        (self.shared && shared_tier) || (agent_tier && self.agents.contains(agent))
    }

    /// Everything `other` changed, added to these.
    pub fn merge(&mut self, other: Changes) {
        self.shared |= other.shared;
        self.agents.extend(other.agents);
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

/// Moves the registry's epochs of what `entry` (another process's change)
/// concerns; what it cannot place makes everything of its kind stale.
fn apply(store: &Registry, entry: &AuditEntry) {
    let field = |key: &str| entry.payload.get(key).and_then(Value::as_str);
    let name = entry.subject.as_str();
    let agent = entry.agent.as_deref();
    let session_changed = || match (agent, field("session")) {
        (Some(a), Some(s)) => store.session_changed(a, s),
        _ => store.sessions_changed(),
    };
    match entry.kind {
        AuditKind::Registration | AuditKind::Deletion => match field("tier") {
            Some("shared") => store.tool_changed(name, None),
            Some("agent") => match field("owner").or(agent) {
                Some(owner) => store.tool_changed(name, Some(owner)),
                None => store.tiers_changed(),
            },
            Some("session") => session_changed(),
            _ => store.tiers_changed(),
        },
        AuditKind::Promotion => {
            if field("from") == Some("session") {
                session_changed();
            }
            match (field("to"), agent) {
                (Some("shared"), Some(a)) => {
                    store.tool_changed(name, Some(a));
                    store.tool_changed(name, None);
                }
                // The registration entry that follows places it.
                (Some("agent"), _) => {}
                _ => store.tiers_changed(),
            }
        }
        AuditKind::ForgeDecision if field("tier") == Some("session") => session_changed(),
        _ => {}
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
    /// A watch on `store` starting at the trail's current head: what
    /// happened before it started is not announced.
    pub async fn start(store: Arc<Registry>) -> Result<Self, StoreError> {
        let reader = store.clone();
        blocking("audit_head_seq", move || Self::start_blocking(reader)).await
    }

    /// [`RegistryWatch::start`] on the calling thread (a store read).
    pub fn start_blocking(store: Arc<Registry>) -> Result<Self, StoreError> {
        let head = store.audit_head_seq()?;
        // What changed before the head is never read back: entries cached
        // before now are not to be trusted.
        store.tiers_changed();
        store.sessions_changed();
        Ok(Self {
            store,
            cursor: Arc::new(Mutex::new(head)),
        })
    }

    /// The registry it reads.
    pub fn store(&self) -> &Arc<Registry> {
        &self.store
    }

    /// The changes committed since the last read, by anyone. On an error
    /// the cursor stays where it was: the next poll reads the same entries
    /// again, so nothing is lost.
    pub async fn poll(&self) -> Result<Changes, StoreError> {
        let mut cursor = self.cursor.clone().lock_owned().await;
        let watch = self.clone();
        blocking("audit_entries", move || watch.read(&mut cursor)).await
    }

    /// [`RegistryWatch::poll`] on the calling thread, which must not be an
    /// async worker (it waits for the cursor and reads the store).
    pub fn poll_blocking(&self) -> Result<Changes, StoreError> {
        let mut cursor = self.cursor.blocking_lock();
        self.read(&mut cursor)
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
    fn read(&self, cursor: &mut i64) -> Result<Changes, StoreError> {
        let mut changes = Changes::default();
        let mut last = *cursor;
        loop {
            let page = self.store.audit_entries(last, PAGE)?;
            for entry in &page {
                changes.add(entry);
                if !self.store.is_own_entry(entry.seq) {
                    apply(&self.store, entry);
                }
                last = entry.seq;
            }
            if page.len() < PAGE {
                *cursor = last;
                return Ok(changes);
            }
        }
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
    pub async fn finish(self) -> Result<Changes, StoreError> {
        let Self { watch, mut cursor } = self;
        blocking("audit_entries", move || watch.read(&mut cursor)).await
    }
}

/// One poll of the loop: reads the trail, renews the lease from the read's
/// start on success. A failure is reported once per run of failures
/// (`failing`), and the cursor does not move, so nothing is lost.
fn poll_once(watch: &RegistryWatch, every: Duration, failing: &mut bool) -> Option<Changes> {
    let started = Instant::now();
    match watch.poll_blocking() {
        Ok(changes) => {
            // Every change the read found moved its epochs: cached entries
            // may be used for one interval from the read's start.
            watch.store.trail_read(started, every);
            if *failing {
                tracing::info!("the registry watch reads the store again");
                *failing = false;
            }
            Some(changes)
        }
        Err(e) => {
            if !*failing {
                tracing::warn!("the registry watch cannot read the audit trail: {e}");
                *failing = true;
            }
            None
        }
    }
}

/// Changes kept for a subscriber that has not read them yet
/// ([`Polling::subscribe`]); one that falls further behind is told it
/// lagged.
const CHANGES_BACKLOG: usize = 64;

/// A forge's registry watch and the thread that polls it (see the module
/// docs). The thread polls twice per interval, so that each lease (one
/// interval from its read's start) is renewed before it ends.
pub(crate) struct Polling {
    watch: RegistryWatch,
    every: Duration,
    changes: broadcast::Sender<Changes>,
    thread: std::thread::Thread,
    stopped: Arc<AtomicBool>,
}

impl Polling {
    /// Starts a watch at the trail's head (read on this thread) and its
    /// polling thread.
    pub(crate) fn start(store: Arc<Registry>, every: Duration) -> Result<Arc<Self>, StoreError> {
        let watch = RegistryWatch::start_blocking(store)?;
        let (changes, _) = broadcast::channel(CHANGES_BACKLOG);
        let stopped = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name("temper-registry-watch".into())
            .spawn({
                let (watch, changes, stopped) = (watch.clone(), changes.clone(), stopped.clone());
                move || {
                    let mut failing = false;
                    while !stopped.load(Ordering::SeqCst) {
                        let started = Instant::now();
                        if let Some(found) = poll_once(&watch, every, &mut failing)
                            && !found.is_empty()
                        {
                            // No subscriber is no error.
                            let _ = changes.send(found);
                        }
                        std::thread::park_timeout((every / 2).saturating_sub(started.elapsed()));
                    }
                }
            })
            .map_err(|e| StoreError::Blocking {
                op: "registry_watch",
                detail: format!("cannot start the registry watch's thread: {e}"),
            })?;
        Ok(Arc::new(Self {
            watch,
            every,
            changes,
            thread: thread.thread().clone(),
            stopped,
        }))
    }

    /// The watch.
    pub(crate) fn watch(&self) -> &RegistryWatch {
        &self.watch
    }

    /// A receiver of the changes the polls find.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Changes> {
        self.changes.subscribe()
    }

    /// Polls now (see [`crate::Forge::refresh`]); what it finds goes to the
    /// subscribers too.
    pub(crate) async fn refresh(&self) -> Result<Changes, StoreError> {
        let started = Instant::now();
        let found = self.watch.poll().await?;
        self.watch.store.trail_read(started, self.every);
        if !found.is_empty() {
            let _ = self.changes.send(found.clone());
        }
        Ok(found)
    }

    /// Ends the polling thread (at once, or after the read under way).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.thread.unpark();
    }
}

#[cfg(test)]
mod tests;
