//! Call statistics written behind: [`Registry::record_invocation`] counts a
//! call in memory, and a flusher thread adds what was counted to the
//! database in one transaction ([`RegistryBackend::record_calls`]) at most
//! every flush interval ([`DEFAULT_STATS_FLUSH`] unless set). No call waits
//! on a disk flush or a database round trip for its stats.
//!
//! Guarantees:
//! - the counts are exact after [`Registry::flush_stats`] and when the
//!   [`Registry`] is dropped (both flush what is pending);
//! - a crash loses the calls counted since the last batch that committed:
//!   at most one interval, plus the duration of the write in progress if it
//!   falls during one. Batches are taken at a fixed rate (one interval
//!   after the previous one was due, not after its write ended), so a slow
//!   write does not stretch the next interval. Exactly one interval cannot
//!   be promised: counts taken at a tick are durable only once their
//!   transaction commits, one write later, and taking them more often would
//!   break the batching the interval sets;
//! - reads and changes through this [`Registry`] see this host's unflushed
//!   calls: [`Registry::stats`], registration, deletion and promotion flush
//!   first, so a promotion threshold counts every call and a deleted tool's
//!   calls go with it;
//! - several hosts on one database each add their own counts, so the sums
//!   are exact once each host has flushed (one interval).
//!
//! Memory is bounded by the tools called in one interval: one
//! [`CallCounters`] per (agent, tool name) called, each with at most
//! [`LATENCY_WINDOW`](super::LATENCY_WINDOW) latencies.
//!
//! [`Registry`]: super::Registry
//! [`Registry::record_invocation`]: super::Registry::record_invocation
//! [`Registry::flush_stats`]: super::Registry::flush_stats
//! [`Registry::stats`]: super::Registry::stats

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use serde_json::{Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::audit::AuditKind;
use super::backend::{CallBatch, RegistryBackend};
use super::error::StoreError;
use super::sessions::{SessionTouch, now_ms};
use super::stats::CallCounters;

/// How often counted calls are written to the database unless set
/// otherwise ([`Registry::set_stats_flush`](super::Registry::set_stats_flush)).
pub const DEFAULT_STATS_FLUSH: Duration = Duration::from_millis(1000);

/// Calls counted and not yet written, by agent, then tool name.
type Pending = HashMap<String, HashMap<String, CallCounters>>;

/// Session-tier calls counted and not yet written, by agent, session, then
/// tool name (nested so that a lookup by `&str` allocates nothing).
type SessionPending = HashMap<String, HashMap<String, HashMap<String, CallCounters>>>;

/// Session uses not yet written: the latest, by agent, then session.
type Touches = HashMap<String, HashMap<String, i64>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the registry and its flusher thread share.
#[derive(Debug)]
pub(crate) struct WriteBehind {
    backend: Arc<dyn RegistryBackend>,
    pending: Mutex<Pending>,
    /// Session-tier calls counted, not yet written.
    session_pending: Mutex<SessionPending>,
    /// Session uses, not yet written.
    touches: Mutex<Touches>,
    /// Held while a batch is taken and written, so flushes do not overlap
    /// (and a caller that flushes knows earlier calls are written).
    flushing: Mutex<()>,
    /// The flush interval in ms; 0 writes every call at once.
    interval_ms: AtomicU64,
    /// Set when the registry is dropped; the flusher's wake-up.
    stop: Mutex<bool>,
    wake: Condvar,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// Open failure windows, by (agent, tool name).
    failures: Mutex<HashMap<(String, String), FailureWindow>>,
}

/// One tool's failures since its window opened with an audited failure.
#[derive(Debug)]
struct FailureWindow {
    opened: Instant,
    /// Failures after the first, by kind.
    kinds: BTreeMap<String, u64>,
}

impl FailureWindow {
    fn later(&self) -> u64 {
        self.kinds.values().sum()
    }
}

impl WriteBehind {
    pub(crate) fn new(backend: Arc<dyn RegistryBackend>) -> Arc<WriteBehind> {
        Arc::new(WriteBehind {
            backend,
            pending: Mutex::new(HashMap::new()),
            session_pending: Mutex::new(HashMap::new()),
            touches: Mutex::new(HashMap::new()),
            flushing: Mutex::new(()),
            interval_ms: AtomicU64::new(DEFAULT_STATS_FLUSH.as_millis() as u64),
            stop: Mutex::new(false),
            wake: Condvar::new(),
            flusher: Mutex::new(None),
            failures: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn set_interval(&self, interval: Duration) {
        let ms = u64::try_from(interval.as_millis()).unwrap_or(u64::MAX);
        self.interval_ms.store(ms, Ordering::Relaxed);
        // The flusher re-reads the interval when it wakes.
        self.wake.notify_all();
    }

    pub(crate) fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms.load(Ordering::Relaxed))
    }

    /// The flusher's period: the interval; with a zero interval (calls
    /// written at once) it only picks up what an error kept, every second.
    fn flusher_interval(&self) -> Duration {
        match self.interval_ms.load(Ordering::Relaxed) {
            0 => Duration::from_secs(1),
            ms => Duration::from_millis(ms),
        }
    }

    /// Counts one call; with a zero interval, writes it at once.
    pub(crate) fn record(
        self: &Arc<Self>,
        name: &str,
        agent: &str,
        ok: bool,
        latency_us: u64,
    ) -> Result<(), StoreError> {
        if self.interval_ms.load(Ordering::Relaxed) == 0 {
            let mut counters = CallCounters::default();
            counters.record(ok, latency_us);
            let batch = [CallBatch {
                name: name.to_owned(),
                agent: agent.to_owned(),
                session: None,
                counters,
            }];
            return self.backend.record_calls(&batch).map(drop);
        }
        {
            let mut pending = lock(&self.pending);
            let by_name = match pending.get_mut(agent) {
                Some(m) => m,
                None => pending.entry(agent.to_owned()).or_default(),
            };
            match by_name.get_mut(name) {
                Some(c) => c.record(ok, latency_us),
                None => by_name
                    .entry(name.to_owned())
                    .or_default()
                    .record(ok, latency_us),
            }
        }
        self.ensure_flusher();
        Ok(())
    }

    /// Counts one call of the session tool `name` of (agent, session), and
    /// the session's use; with a zero interval, writes both at once.
    pub(crate) fn record_session(
        self: &Arc<Self>,
        agent: &str,
        session: &str,
        name: &str,
        ok: bool,
        latency_us: u64,
    ) -> Result<(), StoreError> {
        if self.interval_ms.load(Ordering::Relaxed) == 0 {
            let mut counters = CallCounters::default();
            counters.record(ok, latency_us);
            let batch = [CallBatch {
                name: name.to_owned(),
                agent: agent.to_owned(),
                session: Some(session.to_owned()),
                counters,
            }];
            self.backend.record_calls(&batch)?;
            return self.backend.touch_sessions(&[SessionTouch {
                agent: agent.to_owned(),
                session: session.to_owned(),
                at_ms: now_ms(),
            }]);
        }
        {
            let mut pending = lock(&self.session_pending);
            let by_session = match pending.get_mut(agent) {
                Some(m) => m,
                None => pending.entry(agent.to_owned()).or_default(),
            };
            let by_name = match by_session.get_mut(session) {
                Some(m) => m,
                None => by_session.entry(session.to_owned()).or_default(),
            };
            match by_name.get_mut(name) {
                Some(c) => c.record(ok, latency_us),
                None => by_name
                    .entry(name.to_owned())
                    .or_default()
                    .record(ok, latency_us),
            }
        }
        self.touch(agent, session)
    }

    /// Records a use of (agent, session), written with the next batch (with
    /// a zero interval, at once).
    pub(crate) fn touch(self: &Arc<Self>, agent: &str, session: &str) -> Result<(), StoreError> {
        let at_ms = now_ms();
        if self.interval_ms.load(Ordering::Relaxed) == 0 {
            return self.backend.touch_sessions(&[SessionTouch {
                agent: agent.to_owned(),
                session: session.to_owned(),
                at_ms,
            }]);
        }
        {
            let mut touches = lock(&self.touches);
            let by_session = match touches.get_mut(agent) {
                Some(m) => m,
                None => touches.entry(agent.to_owned()).or_default(),
            };
            match by_session.get_mut(session) {
                Some(t) => *t = (*t).max(at_ms),
                None => {
                    by_session.insert(session.to_owned(), at_ms);
                }
            }
        }
        self.ensure_flusher();
        Ok(())
    }

    /// Starts the flusher thread on the first counted call.
    fn ensure_flusher(self: &Arc<Self>) {
        let mut slot = lock(&self.flusher);
        if slot.is_some() {
            return;
        }
        let weak = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name("temper-stats-flush".into())
            .spawn(move || flusher_loop(weak));
        match spawned {
            Ok(handle) => *slot = Some(handle),
            // Without a thread the counts still reach the database at the
            // next read, change or drop.
            Err(e) => tracing::warn!(error = %e, "stats flusher thread did not start"),
        }
    }

    /// Writes every pending count and session use. On a database error
    /// what was taken is kept (merged back) for the next flush and the
    /// error returned.
    pub(crate) fn flush(&self) -> Result<(), StoreError> {
        let _one = lock(&self.flushing);
        let taken = std::mem::take(&mut *lock(&self.pending));
        let sessions = std::mem::take(&mut *lock(&self.session_pending));
        let touches = std::mem::take(&mut *lock(&self.touches));
        let mut batch: Vec<CallBatch> = taken
            .into_iter()
            .flat_map(|(agent, by_name)| {
                by_name.into_iter().map(move |(name, counters)| CallBatch {
                    name,
                    agent: agent.clone(),
                    session: None,
                    counters,
                })
            })
            .collect();
        for (agent, by_session) in sessions {
            for (session, by_name) in by_session {
                for (name, counters) in by_name {
                    batch.push(CallBatch {
                        name,
                        agent: agent.clone(),
                        session: Some(session.clone()),
                        counters,
                    });
                }
            }
        }
        let touches: Vec<SessionTouch> = touches
            .into_iter()
            .flat_map(|(agent, by_session)| {
                by_session
                    .into_iter()
                    .map(move |(session, at_ms)| SessionTouch {
                        agent: agent.clone(),
                        session,
                        at_ms,
                    })
            })
            .collect();
        if !batch.is_empty() {
            match self.backend.record_calls(&batch) {
                Ok(dropped) => {
                    if dropped > 0 {
                        tracing::debug!(dropped, "stats flush: calls of tools deleted meanwhile");
                    }
                }
                Err(e) => {
                    self.keep(batch);
                    self.keep_touches(touches);
                    return Err(e);
                }
            }
        }
        if !touches.is_empty()
            && let Err(e) = self.backend.touch_sessions(&touches)
        {
            self.keep_touches(touches);
            return Err(e);
        }
        Ok(())
    }

    /// Merges a batch that could not be written back into what is pending.
    fn keep(&self, batch: Vec<CallBatch>) {
        let mut pending = lock(&self.pending);
        let mut sessions = lock(&self.session_pending);
        for entry in batch {
            let slot = match entry.session {
                None => pending
                    .entry(entry.agent)
                    .or_default()
                    .entry(entry.name)
                    .or_default(),
                Some(session) => sessions
                    .entry(entry.agent)
                    .or_default()
                    .entry(session)
                    .or_default()
                    .entry(entry.name)
                    .or_default(),
            };
            // The kept batch is older than what was counted since.
            let newer = std::mem::replace(slot, entry.counters);
            slot.add_since(&CallCounters::default(), &newer);
        }
    }

    /// Merges uses that could not be written back into what is pending.
    fn keep_touches(&self, touches: Vec<SessionTouch>) {
        let mut pending = lock(&self.touches);
        for t in touches {
            let slot = pending
                .entry(t.agent)
                .or_default()
                .entry(t.session)
                .or_default();
            *slot = (*slot).max(t.at_ms);
        }
    }

    /// Audits a failed call of `name` by `agent`: the first failure of a
    /// window (one flush interval) gets its own entry (`payload`) now;
    /// later ones are counted by `kind` into one summary entry written
    /// when the window closes. A zero interval audits every failure.
    pub(crate) fn record_failure(
        self: &Arc<Self>,
        name: &str,
        agent: &str,
        kind: &str,
        payload: &Value,
    ) -> Result<(), StoreError> {
        let interval = self.interval();
        let expired = {
            let mut open = lock(&self.failures);
            let key = (agent.to_owned(), name.to_owned());
            match open.get_mut(&key) {
                Some(w) if !interval.is_zero() && w.opened.elapsed() < interval => {
                    *w.kinds.entry(kind.to_owned()).or_default() += 1;
                    return Ok(());
                }
                _ => {}
            }
            let fresh = FailureWindow {
                opened: Instant::now(),
                kinds: BTreeMap::new(),
            };
            if interval.is_zero() {
                open.remove(&key).map(|w| (key, w))
            } else {
                open.insert(key.clone(), fresh).map(|w| (key, w))
            }
        };
        if let Some((key, w)) = expired {
            self.append_summary(&key, &w)?;
        }
        self.backend
            .append_audit(AuditKind::InvocationFailure, name, Some(agent), payload)?;
        if !interval.is_zero() {
            self.ensure_flusher();
        }
        Ok(())
    }

    fn append_summary(&self, key: &(String, String), w: &FailureWindow) -> Result<(), StoreError> {
        if w.later() == 0 {
            return Ok(());
        }
        self.backend
            .append_audit(
                AuditKind::InvocationFailure,
                &key.1,
                Some(&key.0),
                &json!({
                    "failures": w.later(),
                    "kinds": w.kinds,
                    "window_ms": w.opened.elapsed().as_millis() as u64,
                }),
            )
            .map(drop)
    }

    /// Closes the failure windows older than the interval (all of them
    /// with `all`), appending their summaries. A summary that cannot be
    /// appended is kept for the next try.
    pub(crate) fn close_windows(&self, all: bool) -> Result<(), StoreError> {
        let interval = self.interval();
        let closing: Vec<_> = {
            let mut open = lock(&self.failures);
            let keys: Vec<_> = open
                .iter()
                .filter(|(_, w)| all || w.opened.elapsed() >= interval)
                .map(|(k, _)| k.clone())
                .collect();
            keys.into_iter()
                .filter_map(|k| open.remove(&k).map(|w| (k, w)))
                .collect()
        };
        let mut result = Ok(());
        for (key, w) in closing {
            if let Err(e) = self.append_summary(&key, &w) {
                lock(&self.failures).entry(key).or_insert(w);
                result = Err(e);
            }
        }
        result
    }

    /// Stops the flusher (if any) and writes what is pending.
    pub(crate) fn shutdown(&self) {
        *lock(&self.stop) = true;
        self.wake.notify_all();
        if let Some(handle) = lock(&self.flusher).take() {
            let _ = handle.join();
        }
        if let Err(e) = self.flush() {
            tracing::warn!(error = %e, "final stats flush failed: counted calls are lost");
        }
        if let Err(e) = self.close_windows(true) {
            tracing::warn!(error = %e, "final failure summaries not audited");
        }
    }
}

/// The flusher: takes and writes the pending counts at a fixed rate, one
/// batch every interval counted from when the previous batch was due (not
/// from when its write ended), so a slow write does not push later
/// batches back. Behind by a whole interval or more (writes slower than
/// the interval, a stalled machine), it starts counting again from now.
fn flusher_loop(weak: std::sync::Weak<WriteBehind>) {
    let mut due_last = Instant::now();
    loop {
        let Some(shared) = weak.upgrade() else { return };
        {
            let mut stop = lock(&shared.stop);
            loop {
                if *stop {
                    return;
                }
                let every = shared.flusher_interval();
                let due = due_last + every;
                let now = Instant::now();
                if now >= due {
                    due_last = if now - due >= every { now } else { due };
                    break;
                }
                // Woken early by a new interval or the stop: look again.
                stop = shared
                    .wake
                    .wait_timeout(stop, due - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        if let Err(e) = shared.flush() {
            tracing::warn!(error = %e, "stats flush failed; retrying at the next interval");
        }
        if let Err(e) = shared.close_windows(false) {
            tracing::warn!(error = %e, "failure summary not audited; retrying at the next interval");
        }
    }
}
