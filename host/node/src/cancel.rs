//! Cancellation by id: `index.cjs` gives each call that has an
//! `AbortSignal` a fresh id and calls [`cancel`] with it on `abort`; the
//! call races its future against the cancellation, and dropping the
//! future stops the guest at its next epoch yield. Entries exist only
//! while their call runs (at most [`MAX_PENDING`]; a cancel of an id no
//! call holds is recorded so that a call starting after it stops at once).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use napi_derive::napi;
use tokio::sync::Notify;

/// The most cancellable calls (and early cancels) tracked at once; past it
/// a call runs without cancellation rather than growing the table.
pub const MAX_PENDING: usize = 65_536;

#[derive(Default)]
struct Token {
    cancelled: AtomicBool,
    notify: Notify,
}

fn table() -> &'static Mutex<HashMap<u32, Arc<Token>>> {
    static TABLE: OnceLock<Mutex<HashMap<u32, Arc<Token>>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

fn lock() -> std::sync::MutexGuard<'static, HashMap<u32, Arc<Token>>> {
    table().lock().unwrap_or_else(|p| p.into_inner())
}

/// Cancels the call holding `id` (from JS, on the signal's `abort`).
#[napi]
pub fn cancel(id: u32) {
    let mut t = lock();
    if let Some(token) = t.get(&id) {
        token.cancelled.store(true, Ordering::Release);
        token.notify.notify_waiters();
    } else if t.len() < MAX_PENDING {
        let token = Token::default();
        token.cancelled.store(true, Ordering::Release);
        t.insert(id, Arc::new(token));
    }
}

/// Why a call ended without its result.
#[derive(Debug, PartialEq, Eq)]
pub struct Cancelled;

/// Runs `fut`, unless the call `id` is cancelled first (then `fut` is
/// dropped). Without an id, runs `fut` as is.
pub async fn run<F: Future>(id: Option<u32>, fut: F) -> Result<F::Output, Cancelled> {
    let Some(id) = id else {
        return Ok(fut.await);
    };
    let token = {
        let mut t = lock();
        if t.len() >= MAX_PENDING && !t.contains_key(&id) {
            None
        } else {
            Some(t.entry(id).or_default().clone())
        }
    };
    let Some(token) = token else {
        return Ok(fut.await);
    };
    let outcome = {
        let notified = token.notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if token.cancelled.load(Ordering::Acquire) {
            Err(Cancelled)
        } else {
            tokio::select! {
                out = fut => Ok(out),
                _ = notified => Err(Cancelled),
            }
        }
    };
    lock().remove(&id);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_cancel_stops_a_pending_call_and_an_early_cancel_stops_it_at_once() {
        let pending = tokio::spawn(run(Some(7), std::future::pending::<()>()));
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        cancel(7);
        assert_eq!(pending.await.unwrap(), Err(Cancelled));
        cancel(8);
        assert_eq!(run(Some(8), async { 1 }).await, Err(Cancelled));
        assert_eq!(run(Some(9), async { 2 }).await, Ok(2));
        assert_eq!(run(None, async { 3 }).await, Ok(3));
        assert!(lock().is_empty(), "entries outlived their calls");
    }
}
