//! [`Gate`]: a bound on work in flight with a bounded queue, so one client
//! cannot pile up unbounded forges or calls on a host. Past the queue the
//! caller is refused at once with [`Busy`].

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Semaphore, SemaphorePermit};

use super::error::Busy;

/// At most `in_flight` holders at once, at most `queued` waiting.
pub(super) struct Gate {
    what: &'static str,
    permits: Semaphore,
    in_flight: usize,
    queued: usize,
    waiting: AtomicUsize,
}

impl Gate {
    /// A gate for `what` (`forges`, `calls`); bounds of 0 are taken as 1
    /// in flight, 0 queued.
    pub(super) fn new(what: &'static str, in_flight: usize, queued: usize) -> Self {
        let in_flight = in_flight.max(1);
        Self {
            what,
            permits: Semaphore::new(in_flight),
            in_flight,
            queued,
            waiting: AtomicUsize::new(0),
        }
    }

    /// A slot: at once when one is free, after waiting in the queue when
    /// the queue has room, else [`Busy`].
    pub(super) async fn enter(&self) -> Result<SemaphorePermit<'_>, Busy> {
        if let Ok(permit) = self.permits.try_acquire() {
            return Ok(permit);
        }
        let busy = || Busy {
            what: self.what,
            in_flight: self.in_flight,
            queued: self.queued,
        };
        let waiting = self.waiting.fetch_add(1, Ordering::AcqRel);
        if waiting >= self.queued {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(busy());
        }
        let permit = self.permits.acquire().await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        // The semaphore is never closed.
        permit.map_err(|_| busy())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refuses_past_the_queue_and_admits_when_a_slot_frees() {
        let gate = std::sync::Arc::new(Gate::new("calls", 1, 1));
        let first = gate.enter().await.unwrap();
        // One may wait...
        let waiter = {
            let gate = gate.clone();
            tokio::spawn(async move { gate.enter().await.map(|_| ()) })
        };
        while gate.waiting.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        // ...a second is refused at once, naming the bounds.
        let busy = gate.enter().await.unwrap_err();
        assert_eq!(
            busy.to_string(),
            "busy: 1 calls in flight and 1 queued (the most this host takes); try again later"
        );
        drop(first);
        waiter.await.unwrap().unwrap();
        // Everything released: a slot is free again.
        drop(gate.enter().await.unwrap());
    }

    #[tokio::test]
    async fn zero_bounds_still_admit_one() {
        let gate = Gate::new("forges", 0, 0);
        let held = gate.enter().await.unwrap();
        assert!(gate.enter().await.is_err());
        drop(held);
        assert!(gate.enter().await.is_ok());
    }
}
