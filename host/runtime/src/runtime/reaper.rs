//! The reaper: used stores are dropped on a thread of their own, off the
//! request path.

use crate::error::BuildError;
use crate::host_state::HostState;
use std::sync::{Arc, Mutex};
use wasmtime::Store;

use super::*;

/// Drops used stores on a thread of its own: resetting an instance's memory
/// slot costs about as much as a call, and need not delay its answer. Calls
/// hand stores in without a wake-up (a system call) unless a batch is
/// full; while busy the thread wakes on its own every [`REAPER_TICK`], and
/// after a tick with nothing to do it sleeps until the next store comes.
pub(super) struct Reaper {
    queue: Mutex<Vec<Store<HostState>>>,
    /// Stores handed in and not yet dropped (queued or in the batch being
    /// dropped): each holds a pool slot, and the pool has
    /// [`REAPER_BACKLOG`] slots for them beyond the calls' own.
    held: std::sync::atomic::AtomicUsize,
    wake: std::sync::Condvar,
    /// Set (under the queue's lock) while the thread sleeps without a tick.
    idle: std::sync::atomic::AtomicBool,
    closed: std::sync::atomic::AtomicBool,
}

/// Stores handed in before the reaper is woken.
pub(super) const REAPER_BATCH: usize = 8;

/// Stores held at most (waiting or being dropped); past it, calls drop
/// their own. The engine's pool has this many slots on top of
/// [`crate::engine::EngineOptions::max_concurrent_instances`], so stores
/// waiting here never take a slot a call needs.
pub(super) const REAPER_BACKLOG: usize = crate::engine::RETIRING_SLOTS as usize;

/// How often the reaper wakes on its own.
pub(super) const REAPER_TICK: std::time::Duration = std::time::Duration::from_millis(1);

impl Reaper {
    /// Starts the thread; it ends once [`Reaper::close`] is called.
    pub(super) fn spawn() -> Result<Arc<Self>, BuildError> {
        let reaper = Arc::new(Self {
            queue: Mutex::new(Vec::with_capacity(REAPER_BACKLOG)),
            held: std::sync::atomic::AtomicUsize::new(0),
            wake: std::sync::Condvar::new(),
            idle: std::sync::atomic::AtomicBool::new(false),
            closed: std::sync::atomic::AtomicBool::new(false),
        });
        let r = reaper.clone();
        std::thread::Builder::new()
            .name("temper-reaper".into())
            .spawn(move || {
                use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
                loop {
                    let batch = {
                        let mut queue = lock(&r.queue);
                        if queue.is_empty() && !r.closed.load(Acquire) {
                            queue = r
                                .wake
                                .wait_timeout_while(queue, REAPER_TICK, |q| q.is_empty())
                                .map(|(q, _)| q)
                                .unwrap_or_else(|e| e.into_inner().0);
                        }
                        if queue.is_empty() && !r.closed.load(Acquire) {
                            r.idle.store(true, Relaxed);
                            queue = r
                                .wake
                                .wait_while(queue, |q| q.is_empty() && !r.closed.load(Acquire))
                                .unwrap_or_else(|e| e.into_inner());
                            r.idle.store(false, Relaxed);
                        }
                        std::mem::take(&mut *queue)
                    };
                    // One by one, so each slot is free as soon as it can be.
                    for store in batch {
                        drop(store);
                        r.held.fetch_sub(1, AcqRel);
                    }
                    if r.closed.load(Acquire) && lock(&r.queue).is_empty() {
                        break;
                    }
                }
            })
            .map_err(internal("reaper thread"))?;
        Ok(reaper)
    }

    /// Hands a used store in, or drops it here when the backlog is full.
    pub(super) fn retire(&self, store: Store<HostState>) {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        let mut queue = lock(&self.queue);
        if self.held.load(Acquire) >= REAPER_BACKLOG {
            drop(queue);
            drop(store);
            return;
        }
        self.held.fetch_add(1, AcqRel);
        queue.push(store);
        if queue.len() >= REAPER_BATCH || self.idle.load(std::sync::atomic::Ordering::Relaxed) {
            self.wake.notify_one();
        }
    }

    pub(super) fn close(&self) {
        let _queue = lock(&self.queue);
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify_one();
    }
}
