//! Pre-warmed instances: for each hot tool, a few fresh instances of the
//! shared engine with the tool's bytecode already loaded (or, for a tool
//! promoted to its own compiled snapshot, of that snapshot), made off the
//! request path, so a call only runs `execute`.
//!
//! Isolation is that of a fresh instance per call: an instance here has
//! run nothing but the tool's module top level (the state a build's
//! snapshot holds); a call takes it out, uses it once and drops it. Nothing
//! is ever put back. The hot tools are bounded by an LRU (evicting a tool
//! drops its instances, freeing their pool slots), and so is the number of
//! instances per tool.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hashlink::LruCache;
use wasmtime::Store;

use crate::host_state::HostState;
use temper_policy::Grants;

/// A fresh engine instance with a tool loaded, never called.
pub(crate) struct Ready {
    /// Its store (fixed clocks still on: the call switches them).
    pub store: Store<HostState>,
    /// Its `run` export, looked up when it was made (not on the call).
    pub run: crate::bindings::exports::temper::tool::run::Guest,
    /// Whether it is an instance of the tool's own compiled snapshot (a
    /// promoted tool's) rather than of the shared engine.
    pub compiled: bool,
}

/// Which instances fit a call: the tool (its bytecode's blake3) and what it
/// is granted (a store's grants are fixed when it is made).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct WarmKey {
    id: Arc<str>,
    grants: u8,
}

impl WarmKey {
    pub(crate) fn new(id: Arc<str>, grants: &Grants) -> Self {
        let grants =
            u8::from(grants.fetch) | u8::from(grants.fs_read) << 1 | u8::from(grants.crypto) << 2;
        Self { id, grants }
    }
}

#[derive(Default)]
struct Slot {
    ready: VecDeque<Ready>,
    /// Instances being made for this slot right now.
    making: usize,
    /// Whether a refill task is running for this slot.
    refilling: bool,
}

/// The pre-warmed instances of the hot tools.
pub(crate) struct WarmPool {
    per_tool: usize,
    slots: Mutex<LruCache<WarmKey, Slot>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl WarmPool {
    /// Up to `per_tool` instances for each of `tools` hot tools.
    pub(crate) fn new(tools: usize, per_tool: usize) -> Self {
        Self {
            per_tool: if tools == 0 { 0 } else { per_tool },
            slots: Mutex::new(LruCache::new(tools.max(1))),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, LruCache<WarmKey, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a ready instance for `key`, if one is waiting (marks the tool
    /// recently used).
    pub(crate) fn take(&self, key: &WarmKey) -> Option<Ready> {
        if self.per_tool == 0 {
            return None;
        }
        let ready = self.lock().get_mut(key).and_then(|s| s.ready.pop_front());
        let counter = if ready.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        ready
    }

    /// Makes `key` hot (evicting the least recently used tool when full) and
    /// says whether the caller should start a refill task for it (none is
    /// running and instances are missing).
    pub(crate) fn start_refill(&self, key: &WarmKey) -> bool {
        if self.per_tool == 0 {
            return false;
        }
        let mut slots = self.lock();
        if !slots.contains_key(key) {
            // Dropping an evicted slot drops its stores: cheap, and it frees
            // their pool slots for the tool that replaces it.
            slots.insert(key.clone(), Slot::default());
        }
        let slot = slots.get_mut(key).expect("just inserted");
        if slot.refilling || slot.ready.len() + slot.making >= self.per_tool {
            return false;
        }
        slot.refilling = true;
        true
    }

    /// For the refill task: whether to make one more instance (reserving
    /// its place); `false` ends the task.
    pub(crate) fn reserve(&self, key: &WarmKey) -> bool {
        let mut slots = self.lock();
        let Some(slot) = slots.peek_mut(key) else {
            return false;
        };
        if slot.ready.len() + slot.making >= self.per_tool {
            slot.refilling = false;
            return false;
        }
        slot.making += 1;
        true
    }

    /// Hands in an instance made after [`WarmPool::reserve`]; dropped if the
    /// tool was evicted meanwhile.
    pub(crate) fn put(&self, key: &WarmKey, ready: Ready) {
        let mut slots = self.lock();
        if let Some(slot) = slots.peek_mut(key) {
            slot.making = slot.making.saturating_sub(1);
            slot.ready.push_back(ready);
        }
    }

    /// Ends a refill task early (making an instance failed).
    pub(crate) fn abort(&self, key: &WarmKey) {
        let mut slots = self.lock();
        if let Some(slot) = slots.peek_mut(key) {
            slot.making = slot.making.saturating_sub(1);
            slot.refilling = false;
        }
    }

    /// Instances ready for `key` now.
    pub(crate) fn ready(&self, key: &WarmKey) -> usize {
        self.lock().peek(key).map_or(0, |s| s.ready.len())
    }

    /// Hot tools, ready instances, calls that took one and calls that
    /// found none, for reports.
    pub(crate) fn stats(&self) -> (usize, usize, u64, u64) {
        let slots = self.lock();
        (
            slots.len(),
            slots.iter().map(|(_, s)| s.ready.len()).sum(),
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        )
    }

    /// Drops the ready instances of tool `id`, whatever its grants, and
    /// forgets it (a refill task running for it stops at its next
    /// [`WarmPool::reserve`]). For when the tool changes form (promoted or
    /// demoted): rare, so a scan of the bounded pool is fine.
    pub(crate) fn forget(&self, id: &str) {
        self.lock().retain(|key, _| &*key.id != id);
    }

    /// Drops every ready instance and forgets the hot tools.
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }
}
