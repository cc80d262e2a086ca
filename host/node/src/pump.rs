//! The call pump: how `forge.call` and `runtime.execute` go from the JS
//! thread to the guest and back with as few thread wake-ups as it takes.
//!
//! On this kind of machine (a VM with few cores) waking a sleeping thread
//! on another core costs ~15 µs (`perf bench sched pipe`: ~32 µs a round
//! trip), as much as the sandboxed call itself. A napi `async fn` costs
//! several per call: two tokio tasks spawned from the JS thread (the
//! call and a panic watcher), a thread-safe function created and released
//! per call to settle the promise, the used store handed to the reaper
//! thread and the pre-warm refill spawned before the answer, then the JS
//! thread woken from its event loop's `epoll_wait`. The pump replaces that
//! path (the `async fn`s stay, for the generated types and a direct path):
//!
//! - **In**: the JS thread hands the call over with a sync napi method
//!   ([`submit`]) to one executor thread, which after each call keeps
//!   polling its queue for [`spin`] before it parks: in a run of calls
//!   (each made soon after the last answer) the next one finds it awake,
//!   with no futex wake. It yields its core between polls, so any other
//!   runnable thread there goes first, and parks at once when a yield
//!   shows the core busy with other work. A call the executor cannot start
//!   at once (it runs another, or it is parked and the call is not part of
//!   a run, or it parked for a busy core less than [`CONTENDED_FOR`] ago)
//!   goes to tokio's workers as one task: one wake-up, what napi's
//!   `async fn` costs at best.
//! - **The call** is polled once on the executor, inside napi's tokio
//!   runtime, as the MCP server's stdio reader does (`temper-mcp`'s
//!   `inline` module): a sandbox call is CPU-bound and finishes in that
//!   poll, or yields at an epoch tick (at most 5 ms of guest time), waits
//!   on the blocking pool or the network; a pending call is then spawned on
//!   tokio and finishes there. When more calls are queued, the executor
//!   spawns them on tokio without polling, so concurrent calls run in
//!   parallel. The guest never runs on the JS thread.
//! - **Its store** goes to the runtime's reaper thread as for any call, so
//!   that the executor is free for the next call at once (see
//!   [`retire_after`] for the other way, measured slower here).
//! - **Out**: the answer goes to the JS environment's [`Channel`] queue.
//!   In a run of calls the JS side polls that queue from `setImmediate`
//!   callbacks ([`pump_poll`]) for up to the same [`spin`] after the last
//!   call started or ended: the event loop keeps running its timers and
//!   I/O between polls (it is never blocked), and an answer costs no
//!   wake-up. Past that, when a poll finds the core busy, and for a call
//!   out of a run, the JS side sleeps ([`pump_sleep`]) and the next answer
//!   wakes it through the channel's thread-safe function (created once per
//!   environment, not per call).
//!
//! `TEMPER_NODE_SPIN_US` sets the spin (default [`DEFAULT_SPIN`]; `0`: park
//! and sleep at once, every call then costs the two wake-ups).

use std::collections::VecDeque;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use napi::Env;
use napi::bindgen_prelude::{External, Function};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

/// What a call answers: its output's JSON text, or the error `index.cjs`
/// translates.
pub type Answer = napi::Result<String>;

/// A call as the executor runs it.
pub type Job = Pin<Box<dyn Future<Output = Answer> + Send>>;

/// How long each side polls before it sleeps, by default.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(200);

/// The most a spin can be set to (`TEMPER_NODE_SPIN_US`).
pub const MAX_SPIN: Duration = Duration::from_millis(10);

/// The spin (`TEMPER_NODE_SPIN_US`, read once; default [`DEFAULT_SPIN`],
/// at most [`MAX_SPIN`]).
pub fn spin() -> Duration {
    static SPIN: OnceLock<Duration> = OnceLock::new();
    *SPIN.get_or_init(|| {
        std::env::var("TEMPER_NODE_SPIN_US")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(DEFAULT_SPIN, Duration::from_micros)
            .min(MAX_SPIN)
    })
}

/// The spin in µs, as the JS side reads it.
#[napi(skip_typescript)]
pub fn spin_us() -> u32 {
    spin().as_micros() as u32
}

/// Whether the executor drops the store of a call it answers itself after
/// the answer, and spawns its refill then (`RetireAfter`, as the MCP
/// server's stdio reader does), instead of handing the store to the reaper
/// thread and spawning the refill before the answer: no unless
/// `TEMPER_NODE_RETIRE_AFTER=1` (read once). Measured with bench/calls.js on
/// the 2-core machine, the reaper's way is faster here: the executor is
/// free for the next call at once, while the store's drop (its memory
/// slot's reset, about as long as the call) runs on the reaper's core;
/// dropped by the executor, it delays the next call by that much.
pub fn retire_after() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("TEMPER_NODE_RETIRE_AFTER").is_ok_and(|v| v == "1"))
}

/// The waker's thread-safe function: no arguments; referenced (keeping
/// the event loop alive) only while the JS side sleeps with calls pending
/// ([`pump_sleep`]).
type Wake = ThreadsafeFunction<(), (), (), napi::Status, false, true>;

/// A JS environment's side of the pump: the finished calls not taken yet,
/// and how to wake the environment when it sleeps.
pub struct Inbox {
    state: Mutex<InboxState>,
    wake: Wake,
}

/// A finished call as JavaScript takes it: its ticket, whether it
/// succeeded, and its output's JSON text or the error's message.
pub type Done = (u32, bool, String);

struct InboxState {
    done: Vec<Done>,
    /// The JS side polls no more: the next answer wakes it.
    asleep: bool,
    /// When the last answer came in.
    answered: Option<Instant>,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `answer` over, waking the JS side if it sleeps.
    fn deliver(&self, ticket: u32, answer: Answer) {
        let done = match answer {
            Ok(text) => (ticket, true, text),
            Err(e) => (ticket, false, e.reason),
        };
        let wake = {
            let mut s = self.lock();
            s.done.push(done);
            s.answered = Some(Instant::now());
            std::mem::replace(&mut s.asleep, false)
        };
        if wake {
            // Closing (the environment is going away): nobody to answer.
            let _ = self.wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// A JS environment's pump channel (`index.cjs` makes one per environment
/// with [`pump_channel`]): the calls it submits answer into it.
pub struct Channel {
    inbox: Arc<Inbox>,
    /// The waker is referenced (JS thread only).
    referenced: std::cell::Cell<bool>,
}

/// A channel whose sleeping JS side `wake` wakes (called with no
/// arguments on the JS thread; it should take what is done).
#[napi(skip_typescript)]
pub fn pump_channel(wake: Function<(), ()>) -> napi::Result<External<Channel>> {
    let wake = wake
        .build_threadsafe_function::<()>()
        .callee_handled::<false>()
        .weak::<true>()
        .max_queue_size::<0>()
        .build()?;
    Ok(External::new(Channel {
        inbox: Arc::new(Inbox {
            state: Mutex::new(InboxState {
                done: Vec::new(),
                asleep: true,
                answered: None,
            }),
            wake,
        }),
        referenced: std::cell::Cell::new(false),
    }))
}

/// Takes the calls finished on `channel` since the last take.
fn take(channel: &Channel, sleep: bool) -> Vec<Done> {
    let mut s = channel.inbox.lock();
    let done = std::mem::take(&mut s.done);
    s.asleep = sleep && done.is_empty();
    done
}

/// The calls finished since the last take on `channel`: `[ticket, ok,
/// text]` each. When none has, this yields the JS thread's core to any
/// other runnable thread there (the executor, a refill) and looks again;
/// `null` when still none has and the yield found the core busy (see
/// [`yield_until`]): the JS side should sleep.
#[napi(skip_typescript)]
pub fn pump_poll(channel: &External<Channel>) -> Option<Vec<Done>> {
    let done = take(channel, false);
    if !done.is_empty() {
        return Some(done);
    }
    let contended = yield_until(Instant::now() + MAX_SPIN) == Some(SpinEnd::Contended);
    let done = take(channel, false);
    (!done.is_empty() || !contended).then_some(done)
}

/// The calls finished since the last take on `channel`, as
/// [`pump_poll`]; when none has, the JS side sleeps: the next answer wakes
/// it, and with `keep_alive` (calls are pending) the waker keeps the event
/// loop alive until then; without, it does not.
#[napi(skip_typescript)]
pub fn pump_sleep(
    env: Env,
    channel: &External<Channel>,
    keep_alive: bool,
) -> napi::Result<Vec<Done>> {
    let channel: &Channel = channel;
    let done = take(channel, true);
    if keep_alive != channel.referenced.get() {
        let raw = channel.inbox.wake.raw();
        // SAFETY: on the JS thread of the environment that made the waker,
        // which lives as long as this channel.
        let status = unsafe {
            if keep_alive {
                napi::sys::napi_ref_threadsafe_function(env.raw(), raw)
            } else {
                napi::sys::napi_unref_threadsafe_function(env.raw(), raw)
            }
        };
        napi::check_status!(status, "the call pump's waker: (un)ref")?;
        channel.referenced.set(keep_alive);
    }
    Ok(done)
}

impl Channel {
    /// Marks the JS side awake (it polls from now on) and submits `job`
    /// ([`submit`]); the calls are in a run when an answer came in less
    /// than [`spin`] ago.
    pub fn submit(&self, ticket: u32, job: Job) {
        let in_a_run = {
            let mut s = self.inbox.lock();
            s.asleep = false;
            s.answered.is_some_and(|t| t.elapsed() < spin())
        };
        submit(
            Task {
                job,
                inbox: self.inbox.clone(),
                ticket,
            },
            in_a_run,
        );
    }
}

/// A submitted call.
struct Task {
    job: Job,
    inbox: Arc<Inbox>,
    ticket: u32,
}

/// The executor's queue.
struct Executor {
    queue: Mutex<Queue>,
    /// Tasks queued (read without the lock while spinning).
    queued: AtomicUsize,
    wake: Condvar,
}

struct Queue {
    tasks: VecDeque<Task>,
    /// What the executor does.
    state: State,
    /// When it last parked because its core was busy with other work.
    contended: Option<Instant>,
}

/// What the executor does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Runs a call.
    Busy,
    /// Polls its queue (a call queued now starts at once).
    Spinning,
    /// Waits on its condition variable.
    Parked,
}

fn executor() -> &'static Executor {
    static EXECUTOR: OnceLock<&'static Executor> = OnceLock::new();
    EXECUTOR.get_or_init(|| {
        let ex: &'static Executor = Box::leak(Box::new(Executor {
            queue: Mutex::new(Queue {
                tasks: VecDeque::new(),
                state: State::Spinning,
                contended: None,
            }),
            queued: AtomicUsize::new(0),
            wake: Condvar::new(),
        }));
        // Without its thread every call would hang: a process that cannot
        // start one thread cannot run a call either.
        std::thread::Builder::new()
            .name("temper-node-call".into())
            .spawn(move || ex.run())
            .expect("cannot start the temper-node-call thread");
        ex
    })
}

/// A yield that took longer than this found the core busy with other work.
pub const CONTENDED: Duration = Duration::from_micros(30);

/// How long the executor is left out after it parked because its core was
/// busy with other work: calls meanwhile go to tokio's workers.
pub const CONTENDED_FOR: Duration = Duration::from_millis(10);

/// Why a spin ended.
#[derive(Debug, PartialEq, Eq)]
pub enum SpinEnd {
    /// Its time is up.
    Over,
    /// A yield took longer than [`CONTENDED`]: another thread needed the
    /// core (on a busy machine a spinning thread only delays the one it
    /// waits for, and a sleeping one is woken sooner than a spinning one
    /// is scheduled).
    Contended,
}

/// Yields this thread's core to any other runnable thread there; why the
/// spin should end, if it should.
pub fn yield_until(until: Instant) -> Option<SpinEnd> {
    let before = Instant::now();
    if before >= until {
        return Some(SpinEnd::Over);
    }
    std::thread::yield_now();
    (before.elapsed() > CONTENDED).then_some(SpinEnd::Contended)
}

/// Hands `task` to the executor when it can start it at once: it spins,
/// or it is parked and the calls are in a run (`in_a_run`: an answer came
/// in less than a spin ago) and it was not left out for a busy core in
/// the last [`CONTENDED_FOR`] (then it is woken); else the call goes to
/// tokio's workers as a task of its own (one wake-up, as napi's `async fn`
/// would cost: a call out of a run, a call while the executor runs
/// another, every call on a busy machine).
fn submit(task: Task, in_a_run: bool) {
    let ex = executor();
    let mut q = ex.lock();
    let queue = match q.state {
        State::Spinning => true,
        State::Parked => in_a_run && q.contended.is_none_or(|t| t.elapsed() > CONTENDED_FOR),
        State::Busy => false,
    };
    if queue {
        q.tasks.push_back(task);
        ex.queued.fetch_add(1, Ordering::SeqCst);
        if q.state == State::Parked {
            ex.wake.notify_one();
        }
        return;
    }
    drop(q);
    napi::bindgen_prelude::within_runtime_if_available(|| spawn(task.job, task.inbox, task.ticket));
}

impl Executor {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next task: at once if one is queued, else after polling for it
    /// for [`spin`] (unless the core is wanted elsewhere), else after
    /// parking until one comes.
    fn next(&self) -> Task {
        self.lock().state = State::Spinning;
        let spin = spin();
        let mut end = Some(SpinEnd::Over);
        if !spin.is_zero() {
            let until = Instant::now() + spin;
            end = None;
            while self.queued.load(Ordering::SeqCst) == 0 && end.is_none() {
                end = yield_until(until);
            }
        }
        let mut q = self.lock();
        loop {
            if let Some(task) = q.tasks.pop_front() {
                self.queued.fetch_sub(1, Ordering::SeqCst);
                q.state = State::Busy;
                return task;
            }
            q.state = State::Parked;
            if end == Some(SpinEnd::Contended) {
                q.contended = Some(Instant::now());
            }
            q = self.wake.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Marks the executor spinning (it looks at its queue next).
    fn spinning(&self) {
        self.lock().state = State::Spinning;
    }

    fn run(&self) {
        loop {
            let task = self.next();
            // More calls wait: this one goes to tokio's workers at once, so
            // that they run in parallel.
            if self.queued.load(Ordering::SeqCst) > 0 {
                napi::bindgen_prelude::within_runtime_if_available(|| {
                    spawn(task.job, task.inbox, task.ticket)
                });
                continue;
            }
            napi::bindgen_prelude::within_runtime_if_available(|| run_here_or_spawn(task));
        }
    }
}

/// Finishes `job` on tokio and delivers its answer.
fn spawn(mut job: Job, inbox: Arc<Inbox>, ticket: u32) {
    tokio::spawn(async move {
        let answer = match catch_panic(&mut job).await {
            Ok(answer) => answer,
            Err(()) => Err(napi::Error::from_reason("Panic in a call")),
        };
        inbox.deliver(ticket, answer);
    });
}

/// `job`, with a panic in it turned into `Err`.
async fn catch_panic(job: &mut Job) -> Result<Answer, ()> {
    std::future::poll_fn(|cx| {
        match std::panic::catch_unwind(AssertUnwindSafe(|| job.as_mut().poll(cx))) {
            Ok(Poll::Ready(answer)) => Poll::Ready(Ok(answer)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(())),
        }
    })
    .await
}

/// Polls the task's call once on this thread (inside the runtime): done,
/// its answer is delivered, then its store dropped and its refill spawned;
/// pending, it is spawned on tokio, which polls it again with its own
/// waker (what the first poll registered with sees the new one).
fn run_here_or_spawn(task: Task) {
    let Task {
        mut job,
        inbox,
        ticket,
    } = task;
    let scope = retire_after().then(temper_runtime::Runtime::retire_after);
    let mut cx = Context::from_waker(std::task::Waker::noop());
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| job.as_mut().poll(&mut cx)));
    match polled {
        Ok(Poll::Ready(answer)) => {
            inbox.deliver(ticket, answer);
            // The next call (the JS side's answer to this one) is queued
            // for this thread from now on.
            executor().spinning();
            drop(scope);
        }
        Ok(Poll::Pending) => {
            drop(scope);
            spawn(job, inbox, ticket);
        }
        Err(_) => {
            drop(scope);
            inbox.deliver(ticket, Err(napi::Error::from_reason("Panic in a call")));
        }
    }
}
