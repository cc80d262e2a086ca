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
//! ([`handle`] picks one way or the other).
//!
//! Hand-written (a few lines): no maintained crate offers "spawn the rest
//! of this future when dropped" (`tokio_util`'s guards cancel, they do not
//! detach).

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::FutureExt;

/// Handles a request's `future` in a task of its own awaited here or, with
/// `TEMPER_MCP_HTTP_INLINE=1` (read once), in place ([`to_end`]): either way
/// to its end, a panic returned as its payload. In place saves 15–20 µs
/// of a lone request's time but, measured back to back (see the
/// performance chapter), costs CPU per call and calls/s with 32 and 64
/// connections in flight, which the targets are about: off by default.
/// Profiled both ways (the performance chapter), inline the answer's
/// wake-up of the client and the sandbox (fewer pre-warmed instances) cost
/// more per call.
pub(super) async fn handle<T: Send + 'static>(
    future: impl Future<Output = T> + Send + 'static,
) -> std::thread::Result<T> {
    static INLINE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let inline =
        *INLINE.get_or_init(|| std::env::var("TEMPER_MCP_HTTP_INLINE").is_ok_and(|v| v == "1"));
    if inline {
        return to_end(future).await;
    }
    tokio::spawn(future)
        .await
        .map_err(|e| match e.try_into_panic() {
            Ok(panic) => panic,
            Err(e) => Box::new(e.to_string()) as Box<dyn std::any::Any + Send>,
        })
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
