//! Answering a stdio request on the reader thread itself, when that is
//! safe, instead of waking a tokio worker for it.
//!
//! Handing each request to a task costs a futex wake and a worker's
//! wake-up per call, most of the server's own time with one call in
//! flight. So when the client has nothing more waiting in the input (it
//! waits for this answer) and the request is a short one (`ping`, a
//! `tools/call` of a registered or hub tool: no forge, no promotion), the
//! reader polls the request's future once, on its own thread, inside the
//! runtime ([`run_here_or_spawn`]):
//! - a sandbox call is CPU-bound and yields at the engine's epoch ticks
//!   (at most [`EPOCH_TICK`](temper_runtime::engine::EPOCH_TICK) of guest
//!   time); registry reads, compiles and hub calls wait on the blocking pool
//!   or the network. Any of these makes the future pending: it is then
//!   spawned as a task (the runtime polls it again with its own waker) and
//!   the reader goes back to reading, so `ping` and other requests are not
//!   held up longer than one poll;
//! - the answer is written by the reader only when that cannot block
//!   ([`Writable`]: the output has room for it now); else, or when other
//!   answers are queued behind it, the write goes to the blocking pool, so a
//!   client that sends requests without reading its answers never stalls
//!   the reading.

use std::cell::RefCell;
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::mpsc;

/// The largest write the reader makes itself: POSIX `PIPE_BUF`, what a
/// pipe with room (`POLLOUT`) takes whole without blocking.
pub(crate) const MAX_INLINE_WRITE: usize = 4096;

thread_local! {
    /// Set while the reader polls a request: the reader's in-flight guard,
    /// which a write handed to the blocking pool holds until done.
    static ON_READER: RefCell<Option<mpsc::Sender<()>>> = const { RefCell::new(None) };
}

/// Whether the current thread is the reader polling a request: its
/// in-flight guard (cloned) if so.
pub(crate) fn reader_guard() -> Option<mpsc::Sender<()>> {
    ON_READER.with(|r| r.borrow().clone())
}

/// Whether request `method` (`params`) is a short one the reader may poll
/// itself: `ping`, or a `tools/call` of a registered or hub tool (not a
/// meta-tool: a forge, promotion, stats read or code run is not short).
pub(crate) fn is_short(method: &str, params: Option<&serde_json::Value>) -> bool {
    use crate::handler::run_code::{DESCRIBE_TOOLS, RUN_CODE};
    use crate::tools::{FORGE_TOOL, PROMOTE_TOOL, STATS_TOOL};
    match method {
        "ping" => true,
        "tools/call" => params
            .and_then(|p| p.get("name"))
            .and_then(serde_json::Value::as_str)
            .is_some_and(|name| {
                ![
                    FORGE_TOOL,
                    PROMOTE_TOOL,
                    STATS_TOOL,
                    RUN_CODE,
                    DESCRIBE_TOOLS,
                ]
                .contains(&name)
            }),
        _ => false,
    }
}

/// Polls `future` once on this thread, inside `handle`'s runtime; if it is
/// not done, spawns it on `handle` (see the module docs). `held` is the
/// reader's in-flight guard. A panic escaping `future` ends it (the
/// request's own handler panics are caught and answered inside it).
pub(crate) fn run_here_or_spawn<F>(
    handle: &tokio::runtime::Handle,
    future: F,
    held: &mpsc::Sender<()>,
) where
    F: Future<Output = ()> + Send + 'static,
{
    let mut future = Box::pin(future);
    // The used store of a call answered in this poll is dropped here after
    // the answer is written, not handed to the reaper on the answer's path,
    // and its pre-warm refill is spawned then, not before the answer (see
    // `RetireAfter`), unless `TEMPER_MCP_RETIRE_AFTER=0`.
    let retire_after = retire_after().then(temper_runtime::Runtime::retire_after);
    let polled = {
        let _rt = handle.enter();
        ON_READER.with(|r| *r.borrow_mut() = Some(held.clone()));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
        ON_READER.with(|r| *r.borrow_mut() = None);
        polled
    };
    drop(retire_after);
    match polled {
        Ok(Poll::Ready(())) => {}
        // Polled again by the runtime at once, with its own waker: what
        // the first poll registered its wakers with sees the new one.
        Ok(Poll::Pending) => {
            handle.spawn(future as Pin<Box<dyn Future<Output = ()> + Send>>);
        }
        Err(_) => tracing::error!("a request failed on the reader thread (panicked)"),
    }
}

/// Whether the reader drops the stores of the calls it answers itself,
/// after the answer (see `run_here_or_spawn`): yes unless
/// `TEMPER_MCP_RETIRE_AFTER=0` (a switch for measuring the difference;
/// read once).
fn retire_after() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("TEMPER_MCP_RETIRE_AFTER").map_or(true, |v| v != "0"))
}

/// Whether the output can take [`MAX_INLINE_WRITE`] bytes now without
/// blocking: `poll(2)` for `POLLOUT` with no wait on the output's
/// descriptor.
pub(crate) struct Writable {
    fd: RawFd,
}

impl Writable {
    /// A probe of `output`'s descriptor. It must not outlive `output` (the
    /// connection's output owns both).
    pub(crate) fn of(output: &impl AsFd) -> Self {
        Self {
            fd: output.as_fd().as_raw_fd(),
        }
    }

    /// Whether a write of up to [`MAX_INLINE_WRITE`] bytes would not block.
    pub(crate) fn now(&self) -> bool {
        // SAFETY: the descriptor is open while the output that owns it
        // lives, and the probe lives inside that output.
        let fd = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let ready = unsafe { libc::poll(&mut pfd, 1, 0) };
        ready == 1 && pfd.revents & libc::POLLOUT != 0 && pfd.revents & libc::POLLERR == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_full_pipe_is_not_writable() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let probe = Writable::of(&writer);
        assert!(probe.now());
        // Fill the pipe without blocking: write while it has room.
        let chunk = [b'x'; MAX_INLINE_WRITE];
        while probe.now() {
            writer.write_all(&chunk).unwrap();
        }
        assert!(!probe.now(), "full");
        drop(reader);
    }

    #[test]
    fn a_ready_future_runs_here_and_a_pending_one_is_spawned() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let (held, mut done) = mpsc::channel::<()>(1);
        let here = std::thread::current().id();
        let ran_here = Arc::new(AtomicBool::new(false));
        let flag = ran_here.clone();
        run_here_or_spawn(
            rt.handle(),
            async move {
                flag.store(std::thread::current().id() == here, Ordering::SeqCst);
                assert!(reader_guard().is_some(), "the reader's guard is set");
            },
            &held,
        );
        assert!(ran_here.load(Ordering::SeqCst));
        assert!(reader_guard().is_none(), "cleared after the poll");
        // Pending (a timer): finished by the runtime, on a worker.
        let (tx, rx) = std::sync::mpsc::channel();
        let guard = held.clone();
        run_here_or_spawn(
            rt.handle(),
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                let _ = tx.send(std::thread::current().id());
                drop(guard);
            },
            &held,
        );
        let finished_on = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the spawned rest ran");
        assert_ne!(finished_on, here);
        drop(held);
        assert!(rt.block_on(done.recv()).is_none(), "every guard dropped");
    }
}
