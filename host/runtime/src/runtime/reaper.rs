//! The reaper: used stores are dropped on a thread of their own, off the
//! request path, while a core is free for it; when every core is busy with
//! calls, a store is dropped where it was used.

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
    /// Stores handed to the thread so far.
    handed: std::sync::atomic::AtomicU64,
    /// Top-level calls running now (see [`Reaper::busy`]).
    busy: std::sync::atomic::AtomicUsize,
    /// The cores this process may run on: with as many calls running, no
    /// core is free for the reaper.
    cores: usize,
}

/// Work a [`RetireAfter`] scope starts when it ends (a pre-warm refill's
/// spawn).
type Deferred = Box<dyn FnOnce() + Send>;

/// What an open [`RetireAfter`] scope holds until it ends.
#[derive(Default)]
struct Scope {
    /// The stores this thread's calls retired (at most [`MAX_HELD`]).
    held: Vec<Store<HostState>>,
    /// The refills they started (at most [`MAX_DEFERRED`]).
    deferred: Vec<Deferred>,
}

thread_local! {
    /// This thread's open [`RetireAfter`] scope (`None`: no scope).
    static SCOPE: std::cell::RefCell<Option<Scope>> = const { std::cell::RefCell::new(None) };
}

/// A scope in which the stores this thread's calls retire are held, and
/// dropped by this thread when the scope ends, instead of going to the
/// reaper (see [`super::Runtime::retire_after`]); the pre-warm refills its
/// calls start are spawned then too, not on the answer's path (a spawn
/// from a thread outside the runtime wakes a parked worker: a system call
/// and an idle core's wake-up).
///
/// For a thread that answers a call itself and then waits for the next
/// request (the stdio reader with one call in flight): handing the store
/// to an idle reaper wakes it, a system call and an idle core's wake-up on
/// the answer's path; dropped after the answer is written, the store costs
/// the answer nothing and the reaper is not woken. The drop is the same as
/// the reaper's (the instance's memory slot reset for the next instance):
/// isolation does not change, only the thread and the moment.
pub struct RetireAfter {
    /// Not `Send`: the scope belongs to the thread that opened it.
    _thread: std::marker::PhantomData<*const ()>,
}

impl RetireAfter {
    pub(super) fn open() -> Self {
        SCOPE.with(|s| {
            s.borrow_mut().get_or_insert_with(Scope::default);
        });
        Self {
            _thread: std::marker::PhantomData,
        }
    }
}

impl Drop for RetireAfter {
    fn drop(&mut self) {
        // Taken out first: a store's drop must not find the scope open.
        let Some(scope) = SCOPE.with(|s| s.borrow_mut().take()) else {
            return;
        };
        // The refills start first, so that another core makes the next
        // instances while this thread drops the used stores.
        for start in scope.deferred {
            start();
        }
        drop(scope.held);
    }
}

/// Refills a [`RetireAfter`] scope defers at most; past this, they start
/// at once.
pub(super) const MAX_DEFERRED: usize = 4;

/// Runs `start` when this thread's [`RetireAfter`] scope ends, if one is
/// open and not full; else now (no allocation then).
pub(super) fn run_after_scope(start: impl FnOnce() + Send + 'static) {
    let deferred = SCOPE.with(|s| match s.borrow_mut().as_mut() {
        Some(scope) if scope.deferred.len() < MAX_DEFERRED => {
            scope.deferred.push(Box::new(start));
            None
        }
        _ => Some(start),
    });
    if let Some(start) = deferred {
        start();
    }
}

/// Stores a [`RetireAfter`] scope holds at most: each holds a pool slot,
/// and a tool that calls other tools in a loop retires one per callee; past
/// this, stores take the usual way.
pub(super) const MAX_HELD: usize = 2;

/// Holds `store` in this thread's [`RetireAfter`] scope, if one is open and
/// not full; else gives it back.
fn hold(store: Store<HostState>) -> Option<Store<HostState>> {
    SCOPE.with(|s| match s.borrow_mut().as_mut() {
        Some(scope) if scope.held.len() < MAX_HELD => {
            scope.held.push(store);
            None
        }
        _ => Some(store),
    })
}

/// Marks one top-level call as running while it lives (see
/// [`Reaper::busy`]).
pub(super) struct Busy<'a>(&'a Reaper);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0
            .busy
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
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
        Self::spawn_for(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// [`Reaper::spawn`] for a process with `cores` cores.
    fn spawn_for(cores: usize) -> Result<Arc<Self>, BuildError> {
        let reaper = Arc::new(Self {
            queue: Mutex::new(Vec::with_capacity(REAPER_BACKLOG)),
            held: std::sync::atomic::AtomicUsize::new(0),
            wake: std::sync::Condvar::new(),
            idle: std::sync::atomic::AtomicBool::new(false),
            closed: std::sync::atomic::AtomicBool::new(false),
            handed: std::sync::atomic::AtomicU64::new(0),
            busy: std::sync::atomic::AtomicUsize::new(0),
            cores,
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

    /// Counts a top-level call as running until the guard drops. Pre-warm
    /// loads are not counted: they run beside a call that just took an
    /// instance, and counting them made a lone call drop its store in place
    /// before answering (the drop then delays the answer).
    pub(super) fn busy(&self) -> Busy<'_> {
        self.busy.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Busy(self)
    }

    /// Whether a store retired now is dropped by its caller: when calls
    /// already keep every core busy, the reaper thread would only take
    /// turns with them, and a store costs less to drop on the core that
    /// used it (its memory slot is still in that core's cache, and the
    /// pool hands the same slot to the next instance). Measured with the
    /// scale bench's profile mode on 2 cores: 45–53 µs of process CPU per
    /// fresh call dropped in place against 67–72 µs through the reaper,
    /// while one call alone answers ~14 µs sooner through the reaper.
    fn all_cores_busy(&self) -> bool {
        self.busy.load(std::sync::atomic::Ordering::Relaxed) >= self.cores
    }

    /// Hands a used store in, or drops it here when the backlog is full or
    /// every core is busy ([`Reaper::all_cores_busy`]), or holds it for
    /// this thread to drop when its [`RetireAfter`] scope ends.
    pub(super) fn retire(&self, store: Store<HostState>) {
        use std::sync::atomic::Ordering::{AcqRel, Acquire};
        let Some(store) = hold(store) else {
            return;
        };
        if self.all_cores_busy() {
            drop(store);
            return;
        }
        let mut queue = lock(&self.queue);
        if self.held.load(Acquire) >= REAPER_BACKLOG {
            drop(queue);
            drop(store);
            return;
        }
        self.held.fetch_add(1, AcqRel);
        self.handed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_state::{Clocks, Granted};
    use std::sync::atomic::Ordering::Acquire;

    fn store(engine: &wasmtime::Engine) -> Store<HostState> {
        let state = HostState::new(1 << 20, 1 << 10, Clocks::Real, Granted::default())
            .expect("state without grants");
        Store::new(engine, state)
    }

    #[test]
    fn busy_guards_count_running_calls() {
        let reaper = Reaper::spawn_for(2).expect("reaper");
        assert!(!reaper.all_cores_busy());
        let one = reaper.busy();
        assert!(!reaper.all_cores_busy(), "one call of two cores");
        let two = reaper.busy();
        assert!(reaper.all_cores_busy(), "two calls on two cores");
        drop(one);
        assert!(!reaper.all_cores_busy(), "a guard gives its core back");
        drop(two);
        assert_eq!(reaper.busy.load(Acquire), 0);
        reaper.close();
    }

    #[test]
    fn a_retire_after_scope_holds_stores_until_it_ends() {
        let engine = wasmtime::Engine::default();
        let reaper = Reaper::spawn_for(2).expect("reaper");
        let scope = RetireAfter::open();
        for _ in 0..MAX_HELD {
            reaper.retire(store(&engine));
        }
        assert_eq!(reaper.handed.load(Acquire), 0, "held, not handed in");
        assert_eq!(
            SCOPE.with(|s| s.borrow().as_ref().map(|s| s.held.len())),
            Some(MAX_HELD)
        );
        // Past the bound, the usual way.
        reaper.retire(store(&engine));
        assert_eq!(reaper.handed.load(Acquire), 1, "handed to the reaper");
        drop(scope);
        assert!(
            SCOPE.with(|s| s.borrow().is_none()),
            "dropped, scope closed"
        );
        // Another thread's stores are not held by this thread's scope.
        let _scope = RetireAfter::open();
        let r = reaper.clone();
        let e = engine.clone();
        std::thread::spawn(move || r.retire(store(&e)))
            .join()
            .unwrap();
        assert_eq!(reaper.handed.load(Acquire), 2, "handed to the reaper");
        reaper.close();
    }

    #[test]
    fn a_retire_after_scope_starts_deferred_refills_when_it_ends() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let started = Arc::new(AtomicUsize::new(0));
        let job = |n: &Arc<AtomicUsize>| {
            let n = n.clone();
            move || {
                n.fetch_add(1, SeqCst);
            }
        };
        // No scope: run now.
        run_after_scope(job(&started));
        assert_eq!(started.load(SeqCst), 1, "run at once without a scope");
        let scope = RetireAfter::open();
        for _ in 0..MAX_DEFERRED {
            run_after_scope(job(&started));
        }
        assert_eq!(started.load(SeqCst), 1, "nothing started inside the scope");
        // Past the bound: run now.
        run_after_scope(job(&started));
        assert_eq!(started.load(SeqCst), 2, "past the bound, run at once");
        drop(scope);
        assert_eq!(
            started.load(SeqCst),
            2 + MAX_DEFERRED,
            "all started at its end"
        );
        // Closed: run now again.
        run_after_scope(job(&started));
        assert_eq!(started.load(SeqCst), 3 + MAX_DEFERRED);
    }

    #[test]
    fn every_core_busy_drops_in_place() {
        let engine = wasmtime::Engine::default();
        let reaper = Reaper::spawn_for(1).expect("reaper");
        let busy = reaper.busy();
        reaper.retire(store(&engine));
        assert_eq!(reaper.handed.load(Acquire), 0, "dropped by the caller");
        drop(busy);
        // With a core free the store goes to the reaper thread, which drops
        // it soon.
        reaper.retire(store(&engine));
        assert_eq!(reaper.handed.load(Acquire), 1, "handed to the reaper");
        let start = std::time::Instant::now();
        while reaper.held.load(Acquire) > 0 {
            assert!(start.elapsed() < std::time::Duration::from_secs(10));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        reaper.close();
    }
}
