//! The session tier: tools of one (agent, session), discarded with it,
//! with their call statistics.
//!
//! The tier lives in the store (`temper_store`'s sessions: a tool's row and
//! its `forge_decision` entry commit together), so any host on the store
//! serves any session. This host keeps a bounded cache of the tiers it read
//! ([`SessionCache`]), each under the registry's sessions epoch read before
//! the read: an entry is used only while the registry's lease holds and
//! under the same epoch, as the name cache does for the agent and shared
//! tiers; a name a cached tier lacks is looked up again in the store before
//! a call fails (a tool forged on another host a moment ago).
//!
//! A [`SessionSnapshot`] is a copy of one tier (save and restore). It
//! carries raw source only when the tool's manifest does
//! (`persistSandboxSource`); source kept in memory stays on the host that
//! forged the tool ([`SessionCache::source`]) and must be handed back for a
//! promotion panel elsewhere.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard};

use hashlink::LruCache;
use serde::{Deserialize, Serialize};

use super::manifest::ToolManifest;
use temper_store::ArtifactId;
pub use temper_store::CallCounters;

/// One session's tier as this host knows it: read from the store under the
/// session's epoch read before the read, and updated in place by this
/// host's own changes (a forge adds its tool, a promotion removes one)
/// without a re-read, so that neither a forge nor the call after it reads
/// the whole tier.
pub(super) struct CachedTier {
    agent: String,
    session: String,
    /// The session's epoch the tools are current under.
    epoch: AtomicU64,
    /// The tools, by name.
    tools: RwLock<BTreeMap<String, Arc<SessionTool>>>,
}

impl CachedTier {
    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, Arc<SessionTool>>> {
        self.tools.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The tool `name`, if the tier holds it.
    pub(super) fn get(&self, name: &str) -> Option<Arc<SessionTool>> {
        self.read().get(name).cloned()
    }

    /// Whether the tier holds `name`.
    pub(super) fn contains(&self, name: &str) -> bool {
        self.read().contains_key(name)
    }

    /// How many tools the tier holds.
    pub(super) fn len(&self) -> usize {
        self.read().len()
    }

    /// Every tool, by name.
    pub(super) fn tools(&self) -> Vec<(String, Arc<SessionTool>)> {
        self.read()
            .iter()
            .map(|(n, t)| (n.clone(), t.clone()))
            .collect()
    }
}

/// What a change made on this host does to a cached tier
/// ([`SessionCache::apply`]).
pub(super) enum TierChange {
    /// A tool was added.
    Added(String, Arc<SessionTool>),
    /// A tool left the tier.
    Removed(String),
}

/// The bounded caches of session tiers read and of source kept in memory
/// (see the module docs).
pub(super) struct SessionCache {
    tiers: Mutex<LruCache<u64, Arc<CachedTier>>>,
    sources: Mutex<LruCache<ArtifactId, String>>,
}

/// A fixed hash of (agent, session) (a collision only costs a read).
fn key(agent: &str, session: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    agent.hash(&mut h);
    session.hash(&mut h);
    h.finish()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SessionCache {
    /// At most `capacity` tiers and as many sources (at least one each).
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            tiers: Mutex::new(LruCache::new(capacity.max(1))),
            sources: Mutex::new(LruCache::new(capacity.max(1))),
        }
    }

    /// The tier of (agent, session) cached under `epoch`, if any.
    pub(super) fn get(&self, agent: &str, session: &str, epoch: u64) -> Option<Arc<CachedTier>> {
        let mut tiers = lock(&self.tiers);
        let k = key(agent, session);
        match tiers.get(&k) {
            Some(t)
                if t.epoch.load(Ordering::SeqCst) == epoch
                    && t.agent == agent
                    && t.session == session =>
            {
                Some(t.clone())
            }
            Some(_) => {
                tiers.remove(&k);
                None
            }
            None => None,
        }
    }

    /// Keeps `tools`, read after `epoch` was read.
    pub(super) fn put(
        &self,
        agent: &str,
        session: &str,
        epoch: u64,
        tools: BTreeMap<String, Arc<SessionTool>>,
    ) -> Arc<CachedTier> {
        let tier = Arc::new(CachedTier {
            agent: agent.to_owned(),
            session: session.to_owned(),
            epoch: AtomicU64::new(epoch),
            tools: RwLock::new(tools),
        });
        lock(&self.tiers).insert(key(agent, session), tier.clone());
        tier
    }

    /// Applies `change`, which this host made between reading the
    /// session's epoch `before` and reading it again as `after`, to the
    /// cached tier in place, so it stays current without a re-read. Only
    /// when nothing else changed the session meanwhile (`after` is
    /// `before` + 1, the change's own move) and the cached tier was
    /// current at `before`; otherwise the tier is forgotten (the next use
    /// reads it). Returns whether it was applied.
    pub(super) fn apply(
        &self,
        agent: &str,
        session: &str,
        before: u64,
        after: u64,
        change: TierChange,
    ) -> bool {
        let mut tiers = lock(&self.tiers);
        let k = key(agent, session);
        let Some(tier) = tiers.get(&k).cloned() else {
            return false;
        };
        let mut tools = tier.tools.write().unwrap_or_else(|e| e.into_inner());
        let current = tier.epoch.load(Ordering::SeqCst) == before
            && after == before + 1
            && tier.agent == agent
            && tier.session == session;
        if !current {
            drop(tools);
            tiers.remove(&k);
            return false;
        }
        match change {
            TierChange::Added(name, tool) => {
                tools.insert(name, tool);
            }
            TierChange::Removed(name) => {
                tools.remove(&name);
            }
        }
        tier.epoch.store(after, Ordering::SeqCst);
        true
    }

    /// Forgets the tier of (agent, session).
    pub(super) fn forget(&self, agent: &str, session: &str) {
        lock(&self.tiers).remove(&key(agent, session));
    }

    /// Keeps the source of the tool this host built as `artifact`.
    pub(super) fn keep_source(&self, artifact: &ArtifactId, source: String) {
        lock(&self.sources).insert(artifact.clone(), source);
    }

    /// The source kept for `artifact`, if this host built it lately.
    pub(super) fn source(&self, artifact: &ArtifactId) -> Option<String> {
        lock(&self.sources).get(artifact).cloned()
    }

    /// Tiers held now (the metrics' scrape-time gauges, tests).
    pub(super) fn len(&self) -> usize {
        lock(&self.tiers).len()
    }
}

/// One session-tier tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionTool {
    /// Its artifact (already in the store's artifact directory).
    pub artifact: ArtifactId,
    /// Its manifest (source only with `persistSandboxSource`).
    pub manifest: ToolManifest,
    /// Source kept in memory for the promotion panel; never serialized.
    #[serde(skip)]
    pub source_in_memory: Option<String>,
    /// Its calls.
    pub counters: CallCounters,
}

/// The tools of one (agent, session), by name.
pub type SessionTools = BTreeMap<String, SessionTool>;

/// A saved session tier (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSnapshot {
    /// The agent.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
    /// Its tools, by name.
    pub tools: SessionTools,
}

impl SessionSnapshot {
    /// Merges the changes `mine` made since `base` (the snapshot it started
    /// from) into `current` (what is saved now, possibly changed by another
    /// holder of the same session since `base`): tools `mine` added are
    /// added, tools it removed (promoted, discarded) are removed, and the
    /// calls it recorded are added to the saved counters. Tools another
    /// holder added or changed stay. Each tool is keyed by name and artifact:
    /// a name that now holds another artifact is the other holder's.
    pub fn merged(
        base: &SessionSnapshot,
        current: SessionSnapshot,
        mine: &SessionSnapshot,
    ) -> Self {
        let same = |a: &SessionTool, b: &SessionTool| a.artifact == b.artifact;
        let mut out = current;
        for (name, was) in &base.tools {
            if !mine.tools.contains_key(name)
                && out.tools.get(name).is_some_and(|now| same(now, was))
            {
                out.tools.remove(name);
            }
        }
        for (name, tool) in &mine.tools {
            match (base.tools.get(name), out.tools.get_mut(name)) {
                (Some(was), Some(now)) if same(was, tool) && same(now, tool) => {
                    now.counters.add_since(&was.counters, &tool.counters);
                }
                (None, None) => {
                    out.tools.insert(name.clone(), tool.clone());
                }
                // Removed by the other holder since `base` (promoted or
                // discarded there), or replaced: theirs stands.
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use temper_store::LATENCY_WINDOW;

    fn tool(artifact: u8, calls: u64) -> SessionTool {
        let mut counters = CallCounters::default();
        for i in 0..calls {
            counters.record(true, 1000 + i);
        }
        let m = temper_runtime::artifact::ArtifactManifest::sandbox(
            "t",
            "d",
            &serde_json::json!({}),
            &serde_json::json!({}),
            &[],
            &[],
            "function execute() { return {}; }",
            false,
        );
        SessionTool {
            artifact: ArtifactId::of(&[artifact]),
            manifest: super::super::manifest::ToolManifest {
                artifact: m,
                verdict: super::super::judge::Verdict::new(
                    true,
                    super::super::judge::Scores {
                        safety: 1.0,
                        correctness: 1.0,
                        determinism: 1.0,
                        confidence: 0.9,
                    },
                    vec![],
                    "test",
                ),
                test_results: vec![],
                repeat_run: None,
            },
            source_in_memory: None,
            counters,
        }
    }

    fn snapshot(tools: &[(&str, SessionTool)]) -> SessionSnapshot {
        SessionSnapshot {
            agent_id: "a".into(),
            session_id: "s".into(),
            tools: tools
                .iter()
                .map(|(n, t)| (n.to_string(), t.clone()))
                .collect(),
        }
    }

    #[test]
    fn two_holders_of_a_session_lose_neither_tools_nor_calls() {
        let base = snapshot(&[("x", tool(1, 2))]);
        // The other holder forged `y` and called `x` 3 times, and saved.
        let current = snapshot(&[("x", tool(1, 5)), ("y", tool(2, 0))]);
        // This holder forged `z` and called `x` once.
        let mine = snapshot(&[("x", tool(1, 3)), ("z", tool(3, 1))]);
        let merged = SessionSnapshot::merged(&base, current, &mine);
        let names: Vec<&str> = merged.tools.keys().map(String::as_str).collect();
        assert_eq!(names, ["x", "y", "z"]);
        assert_eq!(merged.tools["x"].counters.total, 6);
        assert_eq!(merged.tools["x"].counters.recent_us.len(), 6);
        assert_eq!(merged.tools["z"].counters.total, 1);
    }

    #[test]
    fn removals_are_merged_and_a_replaced_name_is_left_alone() {
        let base = snapshot(&[("x", tool(1, 0)), ("y", tool(2, 0))]);
        // The other holder promoted `y` (gone) and re-forged `x` as another
        // artifact; this holder promoted `x` (its old artifact).
        let current = snapshot(&[("x", tool(9, 0))]);
        let mine = snapshot(&[("y", tool(2, 4))]);
        let merged = SessionSnapshot::merged(&base, current, &mine);
        assert_eq!(merged.tools.len(), 1);
        assert_eq!(merged.tools["x"].artifact, ArtifactId::of(&[9]));
        // A tool this holder removed that the other did not touch goes.
        let base = snapshot(&[("x", tool(1, 0))]);
        let merged = SessionSnapshot::merged(&base, base.clone(), &snapshot(&[]));
        assert!(merged.tools.is_empty());
    }

    #[test]
    fn counters_give_rate_mean_and_p95() {
        let mut c = CallCounters::default();
        for ms in 1..=100u64 {
            c.record(ms % 10 != 0, ms * 1000);
        }
        let s = c.stats();
        assert_eq!(s.total_calls, 100);
        assert_eq!(s.successes, 90);
        assert!((s.success_rate - 0.9).abs() < 1e-12);
        assert!((s.avg_latency_ms - 50.5).abs() < 1e-9);
        assert_eq!(s.p95_latency_ms, 95.0);
        assert_eq!(CallCounters::default().stats().p95_latency_ms, 0.0);
    }

    #[test]
    fn latency_window_is_bounded() {
        let mut c = CallCounters::default();
        for i in 0..(LATENCY_WINDOW as u64 + 10) {
            c.record(true, i);
        }
        assert_eq!(c.recent_us.len(), LATENCY_WINDOW);
        assert_eq!(c.recent_us.front(), Some(&10));
        assert_eq!(c.total, LATENCY_WINDOW as u64 + 10);
    }
}
