//! [`NameCache`]: the agent- and shared-tier names [`Forge::invoke`]
//! resolved, so that a call of a known name makes no registry round trip.
//!
//! Unlike the caches of [`cache`](super::cache), keyed by content, this one
//! is keyed by name, (agent, tool name), and a name can change meaning: a
//! deletion, a promotion, a registration that shadows a shared tool, here or
//! on another host sharing the store. So every entry carries the registry's
//! tiers epoch read before the registry was ([`Registry::tiers_epoch`]), and
//! is used only while the registry's lease holds and under the same epoch
//! ([`Registry::leased_epoch`]):
//! - a change this process makes moves the epoch when it commits: the next
//!   call resolves against the registry;
//! - a change another host makes is read back by the registry watch
//!   (`temper mcp`'s `--registry-poll-ms`), which moves the epoch; its lease
//!   ends one poll interval after the start of its last complete read, so
//!   a call that starts more than one poll interval after the change
//!   committed never uses the old resolution;
//! - without a watch (a library host, `--registry-poll-ms 0`) there is no
//!   lease and nothing cached is used: every call reads the registry.
//!
//! Bounded: at most [`CacheCapacity::names`](super::CacheCapacity::names)
//! entries, the least recently used evicted; 0 turns the cache off.
//! Unknown names are not cached.
//!
//! [`Forge::invoke`]: super::Forge::invoke
//! [`Registry::tiers_epoch`]: temper_store::Registry::tiers_epoch
//! [`Registry::leased_epoch`]: temper_store::Registry::leased_epoch

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use hashlink::LruCache;

use super::invoke::Target;
use temper_runtime::artifact::ArtifactManifest;
use temper_store::ArtifactId;

/// One resolution: for whom, under which epoch, to what.
struct Entry {
    agent: String,
    name: String,
    epoch: u64,
    target: Arc<Target>,
}

/// The cache (see the module docs). Keyed by a hash of (agent, name) so a
/// lookup allocates nothing; the entry keeps both to rule out a collision.
pub(super) struct NameCache {
    map: Option<Mutex<LruCache<u64, Entry>>>,
    /// The manifests of session-tier tools a call needs, by artifact id
    /// (a session tool's manifest is its artifact's, so an entry is never
    /// stale): a session-tier call shares one instead of copying the
    /// manifest, test cases and schemas included. As many entries as
    /// names (at least one).
    session_manifests: Mutex<LruCache<ArtifactId, Arc<ArtifactManifest>>>,
}

/// A fixed hash of (agent, name): std's SipHash with its fixed keys (a
/// collision only costs a registry read).
fn key(agent: &str, name: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    agent.hash(&mut h);
    name.hash(&mut h);
    h.finish()
}

impl NameCache {
    /// A cache of at most `capacity` names (0: none).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            map: (capacity > 0).then(|| Mutex::new(LruCache::new(capacity))),
            session_manifests: Mutex::new(LruCache::new(capacity.max(1))),
        }
    }

    /// The shared manifest of the session tool whose artifact is `id`,
    /// made by `make` the first time.
    pub(super) fn session_manifest(
        &self,
        id: &ArtifactId,
        make: impl FnOnce() -> ArtifactManifest,
    ) -> Arc<ArtifactManifest> {
        let mut map = self
            .session_manifests
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(m) = map.get(id) {
            return m.clone();
        }
        let m = Arc::new(make());
        map.insert(id.clone(), m.clone());
        m
    }

    fn lock(&self) -> Option<MutexGuard<'_, LruCache<u64, Entry>>> {
        self.map
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// `name` as `agent` resolved it under `epoch` (the registry's leased
    /// epoch now), if cached. An entry of another epoch is dropped.
    pub(super) fn get(&self, agent: &str, name: &str, epoch: u64) -> Option<Arc<Target>> {
        let mut map = self.lock()?;
        let k = key(agent, name);
        match map.get(&k) {
            Some(e) if e.epoch == epoch && e.agent == agent && e.name == name => {
                Some(e.target.clone())
            }
            Some(_) => {
                map.remove(&k);
                None
            }
            None => None,
        }
    }

    /// Keeps `target` as `name` for `agent`, read from the registry after
    /// `epoch` was read.
    pub(super) fn put(&self, agent: &str, name: &str, epoch: u64, target: Arc<Target>) {
        if let Some(mut map) = self.lock() {
            map.insert(
                key(agent, name),
                Entry {
                    agent: agent.to_owned(),
                    name: name.to_owned(),
                    epoch,
                    target,
                },
            );
        }
    }

    /// Entries held now (tests, and the metrics' scrape-time gauges).
    pub(super) fn len(&self) -> usize {
        self.lock().map_or(0, |m| m.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temper_store::Tier;

    fn target(n: u8) -> Arc<Target> {
        Arc::new(Target {
            tier: Tier::Agent,
            artifact: ArtifactId::of(&[n]),
            manifest: Arc::new(ArtifactManifest::sandbox(
                "t",
                "d",
                &serde_json::json!({}),
                &serde_json::json!({}),
                &[],
                &[],
                "function execute() { return {}; }",
                false,
            )),
        })
    }

    #[test]
    fn an_entry_serves_its_own_agent_name_and_epoch_only() {
        let cache = NameCache::new(8);
        cache.put("alice", "t", 3, target(1));
        let hit = cache.get("alice", "t", 3).expect("cached");
        assert_eq!(hit.artifact, ArtifactId::of(&[1]));
        assert!(cache.get("bob", "t", 3).is_none(), "another agent");
        assert!(cache.get("alice", "u", 3).is_none(), "another name");
        // The epoch moved: stale, and dropped.
        assert!(cache.get("alice", "t", 4).is_none());
        assert_eq!(cache.len(), 0);
        assert!(cache.get("alice", "t", 3).is_none(), "gone for good");
    }

    #[test]
    fn bounded_by_its_capacity_and_zero_turns_it_off() {
        let cache = NameCache::new(2);
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            cache.put("x", name, 0, target(i as u8));
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get("x", "a", 0).is_none(), "least recently used");
        assert!(cache.get("x", "c", 0).is_some());
        let off = NameCache::new(0);
        off.put("x", "a", 0, target(0));
        assert!(off.get("x", "a", 0).is_none());
        assert_eq!(off.len(), 0);
    }
}
