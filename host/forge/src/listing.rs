//! [`ListingCache`]: the persisted tools (agent tier, then the shared tools
//! it does not shadow) each agent can call, as [`Forge::agent_tools`] lists
//! them, so that a `tools/list` or a caller limited to some tiers does not
//! read the registry per request.
//!
//! Kept current as the name cache is (see the `names` module): every
//! listing carries the tiers epoch read before the registry was, and is
//! used only while the registry's lease holds and under the same epoch. A
//! change this process makes moves the epoch at once; one another host
//! makes is seen within the registry watch's poll interval; without a
//! watch nothing cached is used.
//!
//! Bounded: at most [`MAX_AGENTS`] agents' listings (each bounded by the
//! agent's tier and the shared tier), the least recently used evicted; a
//! names capacity of 0 turns it off too.
//!
//! [`Forge::agent_tools`]: super::Forge::agent_tools

use std::sync::{Arc, Mutex};

use hashlink::LruCache;

use super::manifest::ToolInfo;

/// How many agents' listings are kept at most.
pub(super) const MAX_AGENTS: usize = 64;

/// One agent's listing and the tiers epoch it was read under.
type Entry = (u64, Arc<Vec<ToolInfo>>);

/// The cache (see the module docs): agent → its entry.
pub(super) struct ListingCache {
    map: Option<Mutex<LruCache<String, Entry>>>,
}

impl ListingCache {
    /// A cache of at most `agents` listings (0: none).
    pub(super) fn new(agents: usize) -> Self {
        Self {
            map: (agents > 0).then(|| Mutex::new(LruCache::new(agents))),
        }
    }

    /// `agent`'s listing read under `epoch` (the leased epoch now), if
    /// cached; one of another epoch is dropped.
    pub(super) fn get(&self, agent: &str, epoch: u64) -> Option<Arc<Vec<ToolInfo>>> {
        let mut map = self.map.as_ref()?.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(agent) {
            Some((e, listing)) if *e == epoch => Some(listing.clone()),
            Some(_) => {
                map.remove(agent);
                None
            }
            None => None,
        }
    }

    /// Keeps `listing` for `agent`, read after `epoch` was read.
    pub(super) fn put(&self, agent: &str, epoch: u64, listing: Arc<Vec<ToolInfo>>) {
        if let Some(map) = &self.map {
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            map.insert(agent.to_owned(), (epoch, listing));
        }
    }

    /// Listings held now (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map
            .as_ref()
            .map_or(0, |m| m.lock().unwrap_or_else(|e| e.into_inner()).len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> Arc<Vec<ToolInfo>> {
        Arc::new(Vec::new())
    }

    #[test]
    fn a_listing_serves_its_own_agent_and_epoch_only() {
        let cache = ListingCache::new(4);
        cache.put("alice", 3, listing());
        assert!(cache.get("alice", 3).is_some());
        assert!(cache.get("bob", 3).is_none(), "another agent");
        assert!(cache.get("alice", 4).is_none(), "the epoch moved");
        assert_eq!(cache.len(), 0, "a stale listing is dropped");
        assert!(cache.get("alice", 3).is_none());
    }

    #[test]
    fn bounded_and_zero_turns_it_off() {
        let cache = ListingCache::new(2);
        for agent in ["a", "b", "c"] {
            cache.put(agent, 0, listing());
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.get("a", 0).is_none(), "least recently used");
        let off = ListingCache::new(0);
        off.put("a", 0, listing());
        assert!(off.get("a", 0).is_none());
    }
}
