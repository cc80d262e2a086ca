//! Bearer JWTs already verified: a client sends the same token on every
//! request, and its signature check (tens of microseconds for RS256 or
//! ES256) and claims parse need not be repeated while nothing they depend
//! on has changed.
//!
//! An entry is keyed by the SHA-256 of the token (the token itself is never
//! kept) and holds the grant, the `kid` and the key that verified it, and
//! the time its `exp` stops being accepted (`exp` plus the clock skew, as
//! the full check allows). [`super::jwt::JwtVerifier::verify`] uses an
//! entry only while that time has not passed and the key set still gives
//! the same key for the `kid` (a key removed or replaced by a refetch ends
//! it); anything else is checked in full, so a refusal always has its
//! reason. Only accepted tokens are kept; the cache holds at most
//! [`CAPACITY`] entries (full: the expired ones go, then all of them).
//!
//! Hand-written (a map behind a mutex): entries are cheap to remake and
//! expire on their own, so no eviction order is needed that would justify
//! a cache crate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use sha2::Digest;

use super::Grant;
use super::jwks::Key;

/// Most tokens held.
pub const CAPACITY: usize = 4096;

/// What one accepted token was granted, and what keeps it valid.
pub(super) struct Entry {
    pub(super) grant: Grant,
    pub(super) kid: String,
    pub(super) key: Arc<Key>,
    /// Unix seconds after which the token is no longer accepted.
    pub(super) until: i64,
}

/// See the module docs.
#[derive(Default)]
pub(super) struct Verified {
    entries: Mutex<HashMap<[u8; 32], Entry>>,
    /// Full verifications (tests).
    pub(super) misses: AtomicU64,
}

/// The cache key of `token`.
pub(super) fn digest(token: &str) -> [u8; 32] {
    sha2::Sha256::digest(token.as_bytes()).into()
}

impl Verified {
    fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 32], Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The grant, `kid` and key held for `digest` while `now` (Unix
    /// seconds) is within its time; an expired entry is dropped.
    pub(super) fn get(&self, digest: &[u8; 32], now: i64) -> Option<(Grant, String, Arc<Key>)> {
        let mut all = self.lock();
        let e = all.get(digest)?;
        if now > e.until {
            all.remove(digest);
            return None;
        }
        Some((e.grant.clone(), e.kid.clone(), e.key.clone()))
    }

    /// Drops the entry of `digest`.
    pub(super) fn forget(&self, digest: &[u8; 32]) {
        self.lock().remove(digest);
    }

    /// Keeps `entry` for `digest`.
    pub(super) fn put(&self, digest: [u8; 32], entry: Entry, now: i64) {
        let mut all = self.lock();
        if all.len() >= CAPACITY && !all.contains_key(&digest) {
            all.retain(|_, e| now <= e.until);
            if all.len() >= CAPACITY {
                all.clear();
            }
        }
        all.insert(digest, entry);
    }

    /// Counts a full verification.
    pub(super) fn missed(&self) {
        self.misses.fetch_add(1, Ordering::Relaxed);
    }

    /// How many tokens are held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}
