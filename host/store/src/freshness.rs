//! How current this process's view of the agent and shared tiers is: what
//! a cache of name resolutions (the forge's) checks before it trusts an
//! entry.
//!
//! Two things make a cached resolution of a name stale: a change this
//! process makes (a registration, deletion or promotion through this
//! [`Registry`](super::Registry)), and a change another process or host
//! makes on the same database. The first is known at once: the registry
//! moves its **epoch** after every such change. The second is known only
//! by reading the audit trail, which a registry watch does every poll
//! interval; the watch moves the epoch when it reads a change, and after
//! every complete read it renews a **lease**: cached resolutions may be
//! used until one poll interval after the *start* of that read.
//!
//! So a change committed elsewhere at time T stops cached resolutions here
//! by T + the poll interval at the latest: the first read that starts after
//! T sees it, and every read that started before T has a lease that ends
//! before T + the interval. When the watch stops, or its reads fail or
//! lag, the lease runs out and every lookup goes to the database. Without
//! a watch there is never a lease: nothing is cached.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The epoch and the lease (see the module docs).
#[derive(Debug)]
pub(crate) struct TierClock {
    /// Moves at every known change of the agent or shared tier.
    epoch: AtomicU64,
    /// Moves at every known change of a session tier (any session's).
    sessions_epoch: AtomicU64,
    /// Where lease times are counted from.
    base: Instant,
    /// The lease's end, in µs since `base`; 0: no lease.
    lease_until_us: AtomicU64,
}

impl TierClock {
    pub(crate) fn new() -> Self {
        Self {
            epoch: AtomicU64::new(0),
            sessions_epoch: AtomicU64::new(0),
            base: Instant::now(),
            lease_until_us: AtomicU64::new(0),
        }
    }

    fn us_since_base(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.base).as_micros()).unwrap_or(u64::MAX)
    }

    /// The current epoch, leased or not: read it *before* the database
    /// read whose result is cached under it.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// The current epoch while the lease holds, else `None`.
    pub(crate) fn leased_epoch(&self) -> Option<u64> {
        let until = self.lease_until_us.load(Ordering::SeqCst);
        (until > 0 && self.us_since_base(Instant::now()) < until).then(|| self.epoch())
    }

    /// The sessions epoch, leased or not (read it before the database read
    /// whose result is cached under it).
    pub(crate) fn sessions_epoch(&self) -> u64 {
        self.sessions_epoch.load(Ordering::SeqCst)
    }

    /// The sessions epoch while the lease holds, else `None`.
    pub(crate) fn leased_sessions_epoch(&self) -> Option<u64> {
        let until = self.lease_until_us.load(Ordering::SeqCst);
        (until > 0 && self.us_since_base(Instant::now()) < until).then(|| self.sessions_epoch())
    }

    /// A session tier changed (or may have): every cached session tier is
    /// stale.
    pub(crate) fn sessions_changed(&self) {
        self.sessions_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The tiers changed (or may have): every cached resolution is stale.
    pub(crate) fn changed(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// A watch that reads the audit trail every `every` completed a read
    /// that started at `started`, and reported every change it found
    /// through [`TierClock::changed`]: cached resolutions may be used until
    /// `started + every`. A lease never moves back (several watches may
    /// share one registry).
    pub(crate) fn trail_read(&self, started: Instant, every: Duration) {
        let until = self.us_since_base(started + every).max(1);
        self.lease_until_us.fetch_max(until, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_lease_without_a_read_and_a_change_moves_the_epoch() {
        let clock = TierClock::new();
        assert_eq!(clock.leased_epoch(), None, "no watch, no lease");
        let before = clock.epoch();
        clock.trail_read(Instant::now(), Duration::from_secs(60));
        assert_eq!(clock.leased_epoch(), Some(before));
        clock.changed();
        assert_eq!(clock.leased_epoch(), Some(before + 1));
        // The sessions epoch moves on its own.
        let sessions = clock.sessions_epoch();
        assert_eq!(clock.leased_sessions_epoch(), Some(sessions));
        clock.sessions_changed();
        assert_eq!(clock.leased_sessions_epoch(), Some(sessions + 1));
        assert_eq!(clock.leased_epoch(), Some(before + 1));
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
            if clock.leased_epoch().is_none() {
                // Only past the end may it be gone. Lease times are kept
                // in whole µs since the clock's base, truncated: the lease
                // may end up to 1 µs early (the safe side), never late.
                assert!(started.elapsed() + Duration::from_micros(1) >= every);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
        assert_eq!(clock.leased_epoch(), None, "expired");
    }
}
