//! Call quotas shared by every host on the store: a quota key (a token's
//! or agent's key, hashed by the caller, never a secret) has a counter of
//! calls handed out per fixed minute window, and a host *leases* a block of
//! calls from it at a time ([`Registry::lease_quota`]), spending the block
//! locally without a round trip per call. The store never hands out more
//! than the limit in one window, whatever the number of hosts: what the
//! hosts spend in a window is at most the limit. What a host leased and
//! did not spend is lost when the window ends (so an agent may be refused
//! early, by at most `(hosts − 1) × (lease − 1)` calls in a window).
//!
//! One row per (key, window); a key's older windows are deleted when its
//! first lease of a new window is taken, so the table holds at most about
//! one row per key.

use crate::Registry;
use crate::error::StoreError;

/// The length of a quota window, milliseconds (one minute).
pub const QUOTA_WINDOW_MS: i64 = 60_000;

/// The window `now_ms` (milliseconds since the epoch) falls in.
pub fn quota_window(now_ms: i64) -> i64 {
    now_ms.div_euclid(QUOTA_WINDOW_MS)
}

/// What [`Registry::lease_quota`] asks for: `want` calls of key `key` in
/// window `window`, within `limit` calls per window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaLease {
    /// The quota's key: a hash (`sha256:…`), never a token.
    pub key: String,
    /// The window ([`quota_window`]).
    pub window: i64,
    /// Calls wanted (the lease size).
    pub want: u32,
    /// Calls allowed in the window, by all hosts together.
    pub limit: u32,
}

impl Registry {
    /// Takes up to `lease.want` calls of `lease.key`'s quota in
    /// `lease.window` (atomically, across every host on the store): returns
    /// how many were granted, 0 when the window's `lease.limit` is spent.
    pub fn lease_quota(&self, lease: &QuotaLease) -> Result<u32, StoreError> {
        if lease.key.is_empty() {
            return Err(StoreError::Invalid {
                op: "lease_quota",
                detail: "a quota key is required".into(),
            });
        }
        self.backend.lease_quota(lease)
    }
}
