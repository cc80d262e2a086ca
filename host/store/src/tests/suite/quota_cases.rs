//! The shared call quota cases of the store suite (`store::quotas`), on
//! each backend: leases taken by several registries (hosts) on one
//! database never hand out more than the limit in a window, racing or not;
//! a new window starts afresh and deletes the key's older rows; keys are
//! independent.

use std::sync::{Arc, Barrier};

use super::*;

fn lease(key: &str, window: i64, want: u32, limit: u32) -> QuotaLease {
    QuotaLease {
        key: key.into(),
        window,
        want,
        limit,
    }
}

pub(super) fn quota_leases_stop_at_the_limit_across_hosts(fx: &Fixture) {
    let (a, b) = (fx.open(), fx.open());
    let key = "sha256:quota-a";
    // Limit 10, leases of 3: 3 + 3 + 3 + 1, then nothing, whichever host
    // asks.
    assert_eq!(a.lease_quota(&lease(key, 100, 3, 10)).unwrap(), 3);
    assert_eq!(b.lease_quota(&lease(key, 100, 3, 10)).unwrap(), 3);
    assert_eq!(a.lease_quota(&lease(key, 100, 3, 10)).unwrap(), 3);
    assert_eq!(b.lease_quota(&lease(key, 100, 3, 10)).unwrap(), 1);
    assert_eq!(a.lease_quota(&lease(key, 100, 3, 10)).unwrap(), 0);
    assert_eq!(b.lease_quota(&lease(key, 100, 1, 10)).unwrap(), 0);
    // A lowered limit grants nothing more; another key is untouched.
    assert_eq!(a.lease_quota(&lease(key, 100, 3, 5)).unwrap(), 0);
    assert_eq!(
        b.lease_quota(&lease("sha256:quota-b", 100, 4, 10)).unwrap(),
        4
    );
    // The next window starts afresh, and the key's older row goes.
    assert_eq!(
        fx.scalar("SELECT COUNT(*) FROM quota_leases WHERE key = 'sha256:quota-a'"),
        1
    );
    assert_eq!(b.lease_quota(&lease(key, 101, 3, 10)).unwrap(), 3);
    assert_eq!(
        fx.scalar("SELECT COUNT(*) FROM quota_leases WHERE key = 'sha256:quota-a'"),
        1,
        "window 100's row is deleted"
    );
    assert_eq!(
        fx.scalar("SELECT used FROM quota_leases WHERE key = 'sha256:quota-a'"),
        3
    );
    // No key, no lease.
    assert!(matches!(
        a.lease_quota(&lease("", 100, 1, 10)),
        Err(StoreError::Invalid { .. })
    ));
}

pub(super) fn racing_quota_leases_hand_out_exactly_the_limit(fx: &Fixture) {
    const HOSTS: usize = 4;
    const LIMIT: u32 = 37;
    let barrier = Arc::new(Barrier::new(HOSTS));
    let threads: Vec<_> = (0..HOSTS)
        .map(|_| {
            let (store, barrier) = (fx.open(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut got = 0;
                loop {
                    match store
                        .lease_quota(&lease("sha256:race", 7, 2, LIMIT))
                        .unwrap()
                    {
                        0 => return got,
                        n => got += n,
                    }
                }
            })
        })
        .collect();
    let total: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(total, LIMIT, "the hosts together got exactly the limit");
}
