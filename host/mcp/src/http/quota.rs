//! `tools/call` quotas that hold across hosts: a principal's
//! `calls_per_minute` and its per-tool `tool_calls_per_minute`
//! ([`crate::tool_quotas`]) are counted in the store
//! ([`temper_store::Registry::lease_quota`]), which every host behind a
//! balancer shares, in fixed one-minute windows (UTC minutes as each
//! host's clock reads them).
//!
//! **Leasing.** A host does not ask the store per call: it leases a block
//! of [`lease_size`] calls (`max(1, limit / divisor)`, the divisor
//! [`HttpConfig::quota_lease_divisor`](super::HttpConfig), 10 by default)
//! and spends it locally; it asks again when the block is spent, and once
//! the store says the window is spent it refuses without asking until the
//! window ends. The store never grants more than the limit in a window,
//! so **the overshoot is zero**: in each window the hosts together admit
//! at most `limit` calls of a quota key, however many hosts there are.
//! The price is an *undershoot*: calls leased by a host and not spent
//! when the window ends are lost, so an agent may be refused after
//! `limit − (hosts − 1) × (lease − 1)` calls in a window at worst. One
//! round trip per `lease` calls per host, i.e. at most
//! `hosts × ⌈limit / lease⌉ + hosts` round trips per key and minute.
//! As with any fixed window, a burst straddling a window's end may see up
//! to `2 × limit` calls within 60 seconds (the token bucket this replaces
//! allowed the same); hosts' clocks skewed by `s` seconds move a host's
//! windows by `s`.
//!
//! **Keys**: `sha256:` of the principal's key (a static token's *hash*,
//! `jwt:<agent>`, or `local`), with the tool's name for a per-tool quota:
//! never a token. A refusal is `429` with `Retry-After` (seconds to the
//! window's end); over 2026-07-28 its JSON-RPC error is SEP-3304's
//! `-32023` with `data.retryAfterSeconds`, over the legacy revisions
//! `-32000` (as before) with the same `data`. A store that cannot answer
//! refuses the call (`503`, `Retry-After: 1`): quotas fail closed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::Digest;
use temper_store::{QUOTA_WINDOW_MS, QuotaLease, Registry, StoreError, quota_window};

use super::lock;

/// Quota keys a host holds leases of, at most; past it, leases of past
/// windows are dropped, then (all current) every idle one (an undershoot,
/// never an overshoot).
const MAX_HELD: usize = 4096;

/// The calls a host leases at a time for a quota of `limit` calls per
/// minute: `max(1, limit / divisor)`.
pub fn lease_size(limit: u32, divisor: u32) -> u32 {
    (limit / divisor.max(1)).max(1)
}

/// The store key of principal `key`'s quota: its `calls_per_minute`
/// (`tool` `None`) or tool `tool`'s.
pub(super) fn quota_key(key: &str, tool: Option<&str>) -> String {
    let mut h = sha2::Sha256::new();
    h.update(b"temper-quota\0");
    h.update(key.as_bytes());
    if let Some(tool) = tool {
        h.update(b"\0tool\0");
        h.update(tool.as_bytes());
    }
    let digest: [u8; 32] = h.finalize().into();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Why a call was not admitted.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    /// The window's calls are spent (by any host).
    #[error("the quota's calls of this minute are spent; retry in {retry_after} s")]
    Spent {
        /// Seconds to the window's end.
        retry_after: u64,
    },
    /// The store did not answer the lease.
    #[error("the quota store cannot be reached: {0}")]
    Store(#[from] StoreError),
}

/// What a host holds of one quota key's lease.
#[derive(Default)]
struct Held {
    window: i64,
    /// Calls leased and not spent.
    left: u32,
    /// The store said the window is spent.
    spent: bool,
}

/// One host's leases.
pub(super) struct Quotas {
    held: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Held>>>>,
    divisor: u32,
}

impl Quotas {
    /// Leases of `max(1, limit / divisor)` calls.
    pub(super) fn new(divisor: u32) -> Self {
        Self {
            held: Mutex::new(HashMap::new()),
            divisor: divisor.max(1),
        }
    }

    /// Takes one call of quota `key` (`limit` per minute): from this host's
    /// lease, else from a new lease of the store.
    pub(super) async fn take(
        &self,
        store: &Arc<Registry>,
        key: &str,
        limit: u32,
    ) -> Result<(), Refused> {
        let now = temper_store::now_ms();
        let window = quota_window(now);
        let spent = || Refused::Spent {
            retry_after: retry_after(now, window),
        };
        let slot = self.slot(key, window);
        // Held across the store's answer: one lease at a time per key.
        let mut held = slot.lock().await;
        if held.window == window {
            if held.left > 0 {
                held.left -= 1;
                return Ok(());
            }
            if held.spent {
                return Err(spent());
            }
        }
        let lease = QuotaLease {
            key: key.to_owned(),
            window,
            want: lease_size(limit, self.divisor),
            limit,
        };
        let store = store.clone();
        let granted = tokio::task::spawn_blocking(move || store.lease_quota(&lease))
            .await
            .map_err(|e| {
                Refused::Store(StoreError::Invalid {
                    op: "lease_quota",
                    detail: format!("the lease task failed: {e}"),
                })
            })??;
        *held = Held {
            window,
            left: granted.saturating_sub(1),
            spent: granted == 0,
        };
        if granted == 0 { Err(spent()) } else { Ok(()) }
    }

    fn slot(&self, key: &str, window: i64) -> Arc<tokio::sync::Mutex<Held>> {
        let mut all = lock(&self.held);
        if let Some(s) = all.get(key) {
            return s.clone();
        }
        if all.len() >= MAX_HELD {
            all.retain(|_, s| s.try_lock().map_or(true, |h| h.window >= window));
            if all.len() >= MAX_HELD {
                all.retain(|_, s| Arc::strong_count(s) > 1);
            }
        }
        all.entry(key.to_owned()).or_default().clone()
    }
}

/// Seconds from `now_ms` to the end of `window` (at least 1).
fn retry_after(now_ms: i64, window: i64) -> u64 {
    let left_ms = (window + 1) * QUOTA_WINDOW_MS - now_ms;
    u64::try_from((left_ms + 999) / 1000).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_sizes_and_retry_times() {
        assert_eq!(lease_size(5, 10), 1);
        assert_eq!(lease_size(60, 10), 6);
        assert_eq!(lease_size(600, 10), 60);
        assert_eq!(lease_size(60, 0), 60, "a zero divisor is taken as 1");
        assert_eq!(retry_after(120_000, 2), 60);
        assert_eq!(retry_after(179_001, 2), 1);
        assert_eq!(retry_after(179_999, 2), 1);
        assert_eq!(retry_after(150_500, 2), 30);
    }

    #[test]
    fn keys_are_hashes_apart_per_tool() {
        let token_hash = "sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8";
        let calls = quota_key(token_hash, None);
        let fetch = quota_key(token_hash, Some("web.fetch"));
        assert!(calls.starts_with("sha256:") && calls.len() == 71, "{calls}");
        assert_ne!(calls, fetch);
        assert_ne!(fetch, quota_key(token_hash, Some("web.fetcg")));
        assert!(!calls.contains(&token_hash[7..]));
        assert_eq!(calls, quota_key(token_hash, None), "stable across hosts");
    }

    #[tokio::test]
    async fn two_hosts_on_one_store_admit_the_limit_together() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Registry::open(dir.path()).unwrap());
        let (a, b) = (Quotas::new(10), Quotas::new(10));
        let key = quota_key("sha256:k", None);
        let first = quota_window(temper_store::now_ms());
        let mut admitted = 0;
        let mut refused = Vec::new();
        for i in 0..80 {
            let host = if i % 2 == 0 { &a } else { &b };
            match host.take(&store, &key, 30).await {
                Ok(()) => admitted += 1,
                Err(Refused::Spent { retry_after }) => refused.push(retry_after),
                Err(e) => panic!("{e}"),
            }
        }
        // Exactly the limit, unless the minute turned during the loop.
        if quota_window(temper_store::now_ms()) == first {
            assert_eq!(admitted, 30);
            assert_eq!(refused.len(), 50);
        } else {
            assert!((30..=60).contains(&admitted), "{admitted}");
        }
        assert!(refused.iter().all(|r| (1..=60).contains(r)), "{refused:?}");
        // Another key (another tool) is untouched.
        let other = quota_key("sha256:k", Some("web.fetch"));
        assert!(a.take(&store, &other, 1).await.is_ok());
        assert!(matches!(
            b.take(&store, &other, 1).await,
            Err(Refused::Spent { .. })
        ));
    }
}
