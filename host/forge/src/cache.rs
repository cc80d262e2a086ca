//! [`ToolCache`]: what the forge keeps in memory between calls, each map
//! bounded and evicting its least recently used entry.
//!
//! Everything here can be rebuilt from the registry (an artifact's bytes
//! carry its manifest and schemas), so an eviction costs a reload, never
//! a result: the caps bound a long-running host's memory however many tools
//! it has seen. Capacities come from [`CacheCapacity`] (in
//! [`ForgeConfig`](super::ForgeConfig) as `cache`).
//!
//! Several hosts may share one registry (a PostgreSQL store, or one store
//! directory opened by several processes). That is why every map here is
//! keyed by content, the artifact's blake3, and none by name: an
//! artifact's bytes never change, so an entry can never be stale. Names
//! are resolved against the registry, or through the name cache
//! ([`names`](super::names)), which a registry watch keeps current within
//! its poll interval; what a change of a name leaves behind in these
//! caches is only an entry no name leads to, evicted in its turn.

use std::sync::{Arc, Mutex};

use hashlink::LruCache;
use serde::{Deserialize, Serialize};

use super::schema::ToolSchemas;
use temper_compose::run::ComposeTool;
use temper_runtime::artifact::ArtifactManifest;
use temper_runtime::id::ArtifactId;
use temper_runtime::runtime::Tool;

/// Default number of loaded tools kept ([`CacheCapacity::tools`]).
pub const DEFAULT_TOOLS: usize = 256;
/// Default number of compose adapters kept.
pub const DEFAULT_COMPOSE: usize = 64;
/// Default number of step manifests and of compiled schema pairs kept.
pub const DEFAULT_SMALL: usize = 4096;
/// Default number of resolved names kept ([`CacheCapacity::names`]).
pub const DEFAULT_NAMES: usize = 4096;

/// How many entries each of the forge's caches keeps (each at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct CacheCapacity {
    /// Loaded sandbox (or bundle) tools, granted, by artifact id.
    pub tools: usize,
    /// Compose adapters, compiled and linked, by artifact id.
    pub compose: usize,
    /// Manifests of artifacts used as compose steps.
    pub manifests: usize,
    /// Compiled input/output schema pairs.
    pub schemas: usize,
    /// Agent- and shared-tier names resolved, by (agent, name); used only
    /// while a registry watch keeps them current (see the forge's `names`
    /// module). 0 turns this cache off: every call reads the registry.
    pub names: usize,
}

impl Default for CacheCapacity {
    fn default() -> Self {
        Self {
            tools: DEFAULT_TOOLS,
            compose: DEFAULT_COMPOSE,
            manifests: DEFAULT_SMALL,
            schemas: DEFAULT_SMALL,
            names: DEFAULT_NAMES,
        }
    }
}

/// One bounded map from artifact id to a cheaply cloned value.
pub(super) struct Bounded<V> {
    map: Mutex<LruCache<ArtifactId, V>>,
}

impl<V: Clone> Bounded<V> {
    fn new(capacity: usize) -> Self {
        Self {
            map: Mutex::new(LruCache::new(capacity.max(1))),
        }
    }

    /// The value for `id`, marked as most recently used.
    pub(super) fn get(&self, id: &ArtifactId) -> Option<V> {
        self.lock().get(id).cloned()
    }

    /// Keeps `value` for `id`, evicting the least recently used entry when
    /// full.
    pub(super) fn put(&self, id: ArtifactId, value: V) {
        self.lock().insert(id, value);
    }

    /// Entries held now (tests, and the metrics' scrape-time gauges).
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LruCache<ArtifactId, V>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The forge's caches, by artifact id.
pub(super) struct ToolCache {
    /// Sandbox and bundle tools, loaded and granted (grants depend only on
    /// the artifact's manifest and the runtime's fixed policy).
    pub(super) tools: Bounded<Tool>,
    /// Compose adapters, compiled and linked.
    pub(super) compose: Bounded<ComposeTool>,
    /// Manifests of artifacts used as compose steps.
    pub(super) manifests: Bounded<Arc<ArtifactManifest>>,
    /// Compiled schemas.
    pub(super) schemas: Bounded<Arc<ToolSchemas>>,
}

impl ToolCache {
    pub(super) fn new(capacity: CacheCapacity) -> Self {
        Self {
            tools: Bounded::new(capacity.tools),
            compose: Bounded::new(capacity.compose),
            manifests: Bounded::new(capacity.manifests),
            schemas: Bounded::new(capacity.schemas),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> ArtifactId {
        ArtifactId::of(&[n])
    }

    #[test]
    fn evicts_the_least_recently_used_entry_at_the_cap() {
        let cache: Bounded<u32> = Bounded::new(2);
        cache.put(id(1), 1);
        cache.put(id(2), 2);
        // Touch 1: 2 becomes the least recently used.
        assert_eq!(cache.get(&id(1)), Some(1));
        cache.put(id(3), 3);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&id(2)), None, "2 was evicted");
        assert_eq!(cache.get(&id(1)), Some(1));
        assert_eq!(cache.get(&id(3)), Some(3));
    }

    #[test]
    fn a_zero_capacity_still_holds_one_entry() {
        let cache: Bounded<u32> = Bounded::new(0);
        cache.put(id(1), 1);
        cache.put(id(2), 2);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.get(&id(2)), Some(2));
    }

    #[test]
    fn capacity_parses_with_defaults() {
        let c: CacheCapacity = serde_json::from_str(r#"{"tools": 8}"#).unwrap();
        assert_eq!(c.tools, 8);
        assert_eq!(c.schemas, DEFAULT_SMALL);
        assert!(serde_json::from_str::<CacheCapacity>(r#"{"tool": 8}"#).is_err());
    }
}
