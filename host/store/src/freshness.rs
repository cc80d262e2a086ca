//! How current this process's view of the tiers is: what a cache of the
//! registry (the forge's resolved names, listings and session tiers)
//! checks before it trusts an entry.
//!
//! Two things make a cached entry stale: a change this process makes (a
//! registration, deletion or promotion through this
//! [`Registry`](super::Registry)), and a change another process or host
//! makes on the same database. The first is known at once: the registry
//! moves an **epoch** after every such change. The second is known only by
//! reading the audit trail, which a registry watch does every poll
//! interval; the watch moves the epoch when it reads a change, and after
//! every complete read it renews a **lease**: cached entries may be used
//! until one poll interval after the *start* of that read.
//!
//! So a change committed elsewhere at time T stops cached entries here by
//! T + the poll interval at the latest: the first read that starts after T
//! sees it, and every read that started before T has a lease that ends
//! before T + the interval. When the watch stops, or its reads fail or lag,
//! the lease runs out and every lookup goes to the database. Without a
//! watch there is never a lease: nothing is cached.
//!
//! **Scoped epochs.** A change moves only the epochs of what it concerns,
//! so that forging one tool does not make every cached entry stale (which
//! made each call after a forge re-read a whole tier, a cost that grew
//! with the number of tools):
//! - a resolved name depends on its name only: a registration, deletion or
//!   promotion of tool `n` (in any agent's tier or the shared one) moves
//!   the epoch of `n` ([`TierClock::name_epoch`]);
//! - an agent's listing (its agent tier and the shared tier) moves with a
//!   change of that agent's tier or of the shared tier
//!   ([`TierClock::listing_epoch`]);
//! - a session tier moves with a change of that session
//!   ([`TierClock::session_epoch`]).
//!
//! Each scope is a counter in a fixed table of [`STRIPES`], chosen by a
//! fixed hash of the scope's key: memory does not grow with names, agents
//! or sessions, and two keys that share a stripe only make each other's
//! entries stale more often (a cache miss, never a stale hit). Every epoch
//! also adds a counter for changes of unknown scope
//! ([`TierClock::changed`], [`TierClock::sessions_changed`]). Counters only
//! grow, so a sum of them moves whenever one of its terms does.
//!
//! **Changes this process made** are read back by the watch too. Their
//! epochs moved when they were made, and the forge updated its caches in
//! place; moving them again would drop those updates. So the registry
//! remembers the audit seqs its own changes appended (a bounded set,
//! [`OwnEntries`]) and the watch leaves those epochs alone.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Counters per scope table (names, agents, sessions): 1,024 × 8 bytes
/// each, whatever the number of tools.
pub const STRIPES: usize = 1024;

/// The stripe of `key` (std's SipHash with its fixed keys: the same in
/// every process).
fn stripe<K: Hash + ?Sized>(key: &K) -> usize {
    let mut h = std::hash::DefaultHasher::new();
    key.hash(&mut h);
    (h.finish() % STRIPES as u64) as usize
}

fn table() -> Box<[AtomicU64]> {
    (0..STRIPES).map(|_| AtomicU64::new(0)).collect()
}

/// The epochs and the lease (see the module docs).
#[derive(Debug)]
pub(crate) struct TierClock {
    /// Changes of unknown scope in the agent and shared tiers.
    all: AtomicU64,
    /// Changes of the shared tier.
    shared: AtomicU64,
    /// Changes of a tool name, by stripe.
    names: Box<[AtomicU64]>,
    /// Changes of an agent's tier, by stripe.
    agents: Box<[AtomicU64]>,
    /// Changes of unknown scope in the session tiers.
    all_sessions: AtomicU64,
    /// Changes of a session tier, by stripe of (agent, session).
    sessions: Box<[AtomicU64]>,
    /// Where lease times are counted from.
    base: Instant,
    /// The lease's end, in µs since `base`; 0: no lease.
    lease_until_us: AtomicU64,
    /// The audit seqs of this process's own changes (module docs).
    own: OwnEntries,
}

impl TierClock {
    pub(crate) fn new() -> Self {
        Self {
            all: AtomicU64::new(0),
            shared: AtomicU64::new(0),
            names: table(),
            agents: table(),
            all_sessions: AtomicU64::new(0),
            sessions: table(),
            base: Instant::now(),
            lease_until_us: AtomicU64::new(0),
            own: OwnEntries::default(),
        }
    }

    fn us_since_base(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(u64::MAX)
    }

    /// Whether the lease holds now.
    pub(crate) fn leased(&self) -> bool {
        let until = self.lease_until_us.load(Ordering::SeqCst);
        until > 0 && self.us_since_base(Instant::now()) < until
    }

    /// The epoch of what tool `name` resolves to (in any agent's view).
    /// Read it *before* the database read whose result is cached under it.
    pub(crate) fn name_epoch(&self, name: &str) -> u64 {
        self.all.load(Ordering::SeqCst) + self.names[stripe(name)].load(Ordering::SeqCst)
    }

    /// The epoch of `agent`'s listing: its agent tier and the shared tier.
    pub(crate) fn listing_epoch(&self, agent: &str) -> u64 {
        self.all.load(Ordering::SeqCst)
            + self.shared.load(Ordering::SeqCst)
            + self.agents[stripe(agent)].load(Ordering::SeqCst)
    }

    /// The epoch of the session tier of (agent, session).
    pub(crate) fn session_epoch(&self, agent: &str, session: &str) -> u64 {
        self.all_sessions.load(Ordering::SeqCst)
            + self.sessions[stripe(&(agent, session))].load(Ordering::SeqCst)
    }

    /// The agent or shared tier changed in a way whose scope is unknown:
    /// every cached name and listing is stale.
    pub(crate) fn changed(&self) {
        self.all.fetch_add(1, Ordering::SeqCst);
    }

    /// Tool `name` changed in `agent`'s tier (`Some`) or the shared tier
    /// (`None`).
    pub(crate) fn tool_changed(&self, name: &str, agent: Option<&str>) {
        self.names[stripe(name)].fetch_add(1, Ordering::SeqCst);
        match agent {
            Some(agent) => self.agents[stripe(agent)].fetch_add(1, Ordering::SeqCst),
            None => self.shared.fetch_add(1, Ordering::SeqCst),
        };
    }

    /// The session tier of (agent, session) changed.
    pub(crate) fn session_changed(&self, agent: &str, session: &str) {
        self.sessions[stripe(&(agent, session))].fetch_add(1, Ordering::SeqCst);
    }

    /// Some session tier changed (or may have): every cached one is stale.
    pub(crate) fn sessions_changed(&self) {
        self.all_sessions.fetch_add(1, Ordering::SeqCst);
    }

    /// A watch that reads the audit trail every `every` completed a read
    /// that started at `started`, and reported every change it found:
    /// cached entries may be used until `started + every`. A lease never
    /// moves back (several watches may share one registry).
    pub(crate) fn trail_read(&self, started: Instant, every: Duration) {
        let until = self.us_since_base(started + every).max(1);
        self.lease_until_us.fetch_max(until, Ordering::SeqCst);
    }

    /// The set of this process's own audit seqs.
    pub(crate) fn own(&self) -> &OwnEntries {
        &self.own
    }
}

/// The audit seqs this process's changes appended and no watch has read
/// back yet (see the module docs). Bounded: past [`OwnEntries::CAPACITY`]
/// the lowest are forgotten, and a watch then moves their epochs again (a
/// cache miss, never a stale hit).
#[derive(Debug, Default)]
pub(crate) struct OwnEntries(Mutex<BTreeSet<i64>>);

impl OwnEntries {
    /// Most seqs remembered.
    pub(crate) const CAPACITY: usize = 4096;

    /// Remembers `seqs` as this process's own.
    pub(crate) fn mark(&self, seqs: impl IntoIterator<Item = i64>) {
        let mut set = self.0.lock().unwrap_or_else(|e| e.into_inner());
        set.extend(seqs);
        while set.len() > Self::CAPACITY {
            set.pop_first();
        }
    }

    /// Whether `seq` is this process's own (forgotten once asked).
    pub(crate) fn take(&self, seq: i64) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_moves_the_epochs_it_concerns_only() {
        let clock = TierClock::new();
        let (n, m) = (clock.name_epoch("slugify"), clock.name_epoch("other"));
        let (a, b) = (clock.listing_epoch("alice"), clock.listing_epoch("bob"));
        clock.tool_changed("slugify", Some("alice"));
        assert_eq!(clock.name_epoch("slugify"), n + 1);
        assert_eq!(clock.listing_epoch("alice"), a + 1);
        // Another name or agent moves only if it shares a stripe.
        if stripe("other") != stripe("slugify") {
            assert_eq!(clock.name_epoch("other"), m);
        }
        if stripe("bob") != stripe("alice") {
            assert_eq!(clock.listing_epoch("bob"), b);
        }
        // The shared tier: every listing, and the name.
        clock.tool_changed("slugify", None);
        assert!(clock.listing_epoch("bob") > b);
        assert_eq!(clock.name_epoch("slugify"), n + 2);
        // Unknown scope: everything.
        let before = clock.name_epoch("other");
        clock.changed();
        assert_eq!(clock.name_epoch("other"), before + 1);

        let s = clock.session_epoch("alice", "s1");
        clock.session_changed("alice", "s1");
        assert_eq!(clock.session_epoch("alice", "s1"), s + 1);
        let t = clock.session_epoch("alice", "s2");
        clock.sessions_changed();
        assert_eq!(clock.session_epoch("alice", "s2"), t + 1);
    }

    #[test]
    fn no_lease_without_a_read() {
        let clock = TierClock::new();
        assert!(!clock.leased(), "no watch, no lease");
        clock.trail_read(Instant::now(), Duration::from_secs(60));
        assert!(clock.leased());
    }

    #[test]
    fn the_lease_ends_one_interval_after_the_read_started() {
        let clock = TierClock::new();
        let every = Duration::from_millis(30);
        let started = Instant::now();
        clock.trail_read(started, every);
        // An older read does not shorten it.
        clock.trail_read(started - Duration::from_secs(1), every);
        while started.elapsed() < every {
            if !clock.leased() {
                // Only past the end may it be gone. Lease times are kept
                // in whole µs since the clock's base, truncated: the lease
                // may end up to 1 µs early (the safe side), never late.
                assert!(started.elapsed() + Duration::from_micros(1) >= every);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
        assert!(!clock.leased(), "expired");
    }

    #[test]
    fn own_entries_are_bounded_and_read_once() {
        let own = OwnEntries::default();
        own.mark([5, 6]);
        assert!(own.take(5));
        assert!(!own.take(5), "once");
        own.mark(0..(OwnEntries::CAPACITY as i64 + 10));
        assert!(!own.take(0), "the lowest are forgotten past the bound");
        assert!(own.take(OwnEntries::CAPACITY as i64 + 9));
    }
}
