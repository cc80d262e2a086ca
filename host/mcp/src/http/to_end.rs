//! Running a request's handling in the connection's own task, to its end
//! even when the client goes away.
//!
//! hyper drops a request's service future when its connection closes. A
//! forge or a tool call must still run to its end (its audit trail stays
//! whole, its stats count it), which a task of its own per request gave,
//! at the price of a hop per request: the task scheduled, then the
//! connection's task woken by its end (a futex wake when the other worker
//! takes it, and under load the wait behind whatever else is queued).
//! [`to_end`] runs the handling in the connection's task instead and hands
//! it to a task of its own only if that future is dropped before it ends
//! ([`handle`] picks the way, and says why it yields once after).
//!
//! Hand-written (a few lines): no maintained crate offers "spawn the rest
//! of this future when dropped" (`tokio_util`'s guards cancel, they do not
//! detach).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::FutureExt;

/// How [`handle`] runs a request (`TEMPER_MCP_HTTP_INLINE`, read once).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Mode {
    /// `0`: in a task of its own, awaited here (one hop per request).
    Spawned,
    /// `1`: in place, the answer handed on at once.
    InPlace,
    /// `2`, the default: in place, then the connection's task yields once
    /// before handing the answer on.
    InPlaceThenYield,
}

impl Mode {
    /// The mode a `TEMPER_MCP_HTTP_INLINE` value asks for (anything but
    /// `0` and `1`: the default).
    pub(super) fn of(value: Option<&str>) -> Self {
        match value {
            Some("0") => Mode::Spawned,
            Some("1") => Mode::InPlace,
            _ => Mode::InPlaceThenYield,
        }
    }
}

/// Handles a request's `future` to its end, a panic returned as its
/// payload, by default in place ([`to_end`]) and then yielding once.
///
/// Why the yield: a call queues its pre-warm refill (a tokio task) in the
/// worker's LIFO slot, which no other worker can steal. Handled in place
/// without yielding (mode `1`), the refill waited there until the
/// connection's task had written its answer, then ran on the same worker
/// while the other idled, and the next call often found no pre-warmed
/// instance; a task of its own per request (mode `0`, the default before)
/// avoided that only because the connection's task, woken by its end,
/// pushed the refill out of the slot. A task that wakes itself goes to the
/// back of the worker's queue, where the other worker may take it: the
/// refill runs on one worker while the answer is written on the other.
/// Measured back to back (the performance chapter): a lone request's
/// server-side time as in place, and less CPU per call and more calls/s
/// than a task of its own.
pub(super) async fn handle<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> std::thread::Result<T> {
    static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();
    let mode =
        *MODE.get_or_init(|| Mode::of(std::env::var("TEMPER_MCP_HTTP_INLINE").ok().as_deref()));
    match mode {
        Mode::InPlace => return to_end(future).await,
        Mode::InPlaceThenYield => {
            let out = to_end(future).await;
            YieldOnce(false).await;
            return out;
        }
        Mode::Spawned => {}
    }
    tokio::spawn(future)
        .await
        .map_err(|e| match e.try_into_panic() {
            Ok(panic) => panic,
            Err(e) => Box::new(e.to_string()) as Box<dyn std::any::Any + Send>,
        })
}

/// Pending once (its task woken first), then ready: tokio puts a task that
/// woke itself while running at the back of the worker's run queue (which
/// other workers steal from), not in its LIFO slot, and wakes a parked
/// worker (tokio 1.54: `Harness::poll` sees the task notified and calls
/// `yield_now`, which schedules it with `is_yield`; `schedule_local` then
/// pushes it to the back and notifies).
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A boxed handling future.
type Handling<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// `future`, polled in place, its panic caught (`Err` with the payload);
/// dropped before its end, the rest of it runs in a task of its own (its
/// output then discarded: nobody waits for it).
pub(super) fn to_end<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> ToEnd<T> {
    ToEnd {
        inner: Some(Box::pin(future)),
    }
}

/// See [`to_end`].
pub(super) struct ToEnd<T: Send + 'static> {
    inner: Option<Handling<T>>,
}

impl<T: Send + 'static> Future for ToEnd<T> {
    type Output = std::thread::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.inner.as_mut() else {
            panic!("ToEnd polled after its end");
        };
        let polled = AssertUnwindSafe(inner.as_mut())
            .catch_unwind()
            .poll_unpin(cx);
        if polled.is_ready() {
            self.inner = None;
        }
        polled
    }
}

impl<T: Send + 'static> Drop for ToEnd<T> {
    fn drop(&mut self) {
        let Some(rest) = self.inner.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async move {
                    if AssertUnwindSafe(rest).catch_unwind().await.is_err() {
                        tracing::error!("a request whose client had gone failed (panicked)");
                    }
                });
            }
            // No runtime (it is shutting down): nothing can run it.
            Err(_) => drop(rest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[tokio::test]
    async fn finishes_in_place_and_catches_a_panic() {
        assert_eq!(to_end(async { 7 }).await.unwrap(), 7);
        let failed = to_end(async {
            if true {
                panic!("boom");
            }
            1
        })
        .await;
        assert!(failed.is_err());
    }

    #[test]
    fn the_mode_switch() {
        assert_eq!(Mode::of(None), Mode::InPlaceThenYield);
        assert_eq!(Mode::of(Some("0")), Mode::Spawned);
        assert_eq!(Mode::of(Some("1")), Mode::InPlace);
        assert_eq!(Mode::of(Some("2")), Mode::InPlaceThenYield);
        assert_eq!(Mode::of(Some("yes")), Mode::InPlaceThenYield);
    }

    #[tokio::test]
    async fn handled_in_place_it_yields_once_then_answers() {
        let mut f = Box::pin(async {
            let out = to_end(async { 7 }).await;
            YieldOnce(false).await;
            out
        });
        assert!(futures_util::poll!(f.as_mut()).is_pending(), "yields once");
        assert_eq!(f.await.unwrap(), 7);
        // And through `handle` with the default mode: the answer, and a
        // panic as its payload.
        assert_eq!(handle(async { 9 }).await.unwrap(), 9);
        let failed = handle(async {
            if true {
                panic!("boom");
            }
            1
        })
        .await;
        assert!(failed.is_err());
    }

    #[tokio::test]
    async fn a_dropped_handling_runs_to_its_end() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let handling = to_end(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            flag.store(true, Ordering::SeqCst);
        });
        // The client goes away while the handling waits.
        let cut = tokio::time::timeout(Duration::from_millis(5), handling).await;
        assert!(cut.is_err(), "dropped before its end");
        assert!(!done.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            done.load(Ordering::SeqCst),
            "the rest ran in a task of its own"
        );
    }
}
