//! The audit cases of the store suite: the chain is append-only and
//! verification names every kind of tampering, on each backend.

use super::*;

/// A chain of `n` forge decisions.
fn chain(fx: &Fixture, n: usize) -> Registry {
    let store = fx.open();
    for i in 0..n {
        store
            .append_audit(
                AuditKind::ForgeDecision,
                &format!("tool{i}"),
                Some("judge"),
                &json!({"accepted": i % 2 == 0, "reasons": ["tests pass", format!("r{i}")]}),
            )
            .unwrap();
    }
    assert_eq!(store.verify_audit().unwrap().entries, n as u64);
    store
}

/// The verification error after `sql` on a fresh 5-entry chain.
fn tampered(new_fx: &dyn Fn() -> Fixture, sql: &str) -> AuditError {
    let fx = new_fx();
    let store = chain(&fx, 5);
    fx.tamper(sql);
    store.verify_audit().unwrap_err()
}

pub(super) fn audit_is_append_only_through_sql_triggers(fx: &Fixture) {
    let _store = chain(fx, 2);
    let err = fx
        .try_exec("UPDATE audit SET subject = 'x' WHERE seq = 1")
        .unwrap_err();
    assert!(err.contains("append-only"), "{err}");
    let err = fx.try_exec("DELETE FROM audit WHERE seq = 2").unwrap_err();
    assert!(err.contains("append-only"), "{err}");
    if let Fixture::Postgres(_) = fx {
        let err = fx.try_exec("TRUNCATE audit").unwrap_err();
        assert!(err.contains("append-only"), "{err}");
    }
    assert_eq!(fx.open().verify_audit().unwrap().entries, 2);
}

/// A fresh fixture of the same kind as `fx` (tamper cases need several).
fn same_kind(fx: &Fixture) -> impl Fn() -> Fixture + '_ {
    move || match fx {
        Fixture::Sqlite(_) => Fixture::sqlite(),
        Fixture::Postgres(_) => Fixture::postgres("tamper").expect("cluster vanished"),
    }
}

pub(super) fn verify_detects_edited_fields(fx: &Fixture) {
    let new_fx = same_kind(fx);
    for sql in [
        "UPDATE audit SET kind = 'approval' WHERE seq = 3",
        "UPDATE audit SET subject = 'other' WHERE seq = 3",
        "UPDATE audit SET agent = NULL WHERE seq = 3",
        "UPDATE audit SET agent = 'mallory' WHERE seq = 3",
        r#"UPDATE audit SET payload = '{"accepted":true,"reasons":[]}' WHERE seq = 3"#,
        "UPDATE audit SET ts_ms = ts_ms + 1 WHERE seq = 3",
        "UPDATE audit SET hash = prev_hash WHERE seq = 3",
    ] {
        let err = tampered(&new_fx, sql);
        assert!(
            matches!(err, AuditError::HashMismatch { seq: 3 }),
            "{sql}: {err}"
        );
        assert!(err.to_string().contains("seq 3"), "{err}");
    }
    let err = tampered(
        &new_fx,
        &format!("UPDATE audit SET prev_hash = '{GENESIS_HASH}' WHERE seq = 3"),
    );
    assert!(
        matches!(err, AuditError::PrevHashMismatch { seq: 3 }),
        "{err}"
    );
}

pub(super) fn verify_detects_removed_reordered_and_truncated(fx: &Fixture) {
    let new_fx = same_kind(fx);
    let err = tampered(&new_fx, "DELETE FROM audit WHERE seq = 3");
    assert!(
        matches!(
            err,
            AuditError::SeqGap {
                expected: 3,
                found: 4
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("seq 3"), "{err}");

    // Removed and renumbered to hide the gap: the link breaks.
    let err = tampered(
        &new_fx,
        "DELETE FROM audit WHERE seq = 3; UPDATE audit SET seq = seq - 1 WHERE seq = 4;
         UPDATE audit SET seq = seq - 1 WHERE seq = 5",
    );
    assert!(
        matches!(err, AuditError::PrevHashMismatch { seq: 3 }),
        "{err}"
    );

    // Swapped entries 3 and 4 (whole rows, seq included).
    let err = tampered(
        &new_fx,
        "UPDATE audit SET seq = -1 WHERE seq = 3; UPDATE audit SET seq = 3 WHERE seq = 4;
         UPDATE audit SET seq = 4 WHERE seq = -1",
    );
    assert!(
        matches!(err, AuditError::PrevHashMismatch { seq: 3 }),
        "{err}"
    );

    // Swapped contents, seq kept in place.
    let err = tampered(
        &new_fx,
        "UPDATE audit SET subject = 'tmp' WHERE seq = 3;
         UPDATE audit SET subject = 'tool2' WHERE seq = 4;
         UPDATE audit SET subject = 'tool3' WHERE seq = 3",
    );
    assert!(matches!(err, AuditError::HashMismatch { seq: 3 }), "{err}");

    let err = tampered(&new_fx, "DELETE FROM audit WHERE seq = 5");
    assert!(
        matches!(
            err,
            AuditError::Truncated {
                head_count: 5,
                last_seq: 4
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("seq 5"), "{err}");
    let err = tampered(&new_fx, "DELETE FROM audit WHERE seq >= 2");
    assert!(
        matches!(
            err,
            AuditError::Truncated {
                head_count: 5,
                last_seq: 1
            }
        ),
        "{err}"
    );

    // An entry added behind the store's back, or a forged head record.
    let fx2 = new_fx();
    let store = chain(&fx2, 5);
    let prev = store.audit_entries(4, 1).unwrap().pop().unwrap().hash;
    let hash = audit::entry_hash(6, "approval", "x", None, 0, "{}", &prev);
    fx2.tamper(&format!(
        "INSERT INTO audit (seq, kind, subject, agent, payload, ts_ms, prev_hash, hash)
         VALUES (6, 'approval', 'x', NULL, '{{}}', 0, '{prev}', '{hash}')"
    ));
    let err = store.verify_audit().unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::HeadMismatch {
                seq: 6,
                head_count: 5,
                ..
            }
        ),
        "{err}"
    );
    let err = tampered(&new_fx, fx.forge_head_sql());
    assert!(
        matches!(err, AuditError::HeadMismatch { seq: 5, .. }),
        "{err}"
    );
}

/// A chain longer than a verification page (the PostgreSQL backend reads 7
/// entries per page under test): verified whole, and tampering on a later
/// page, at a page's edge and at the tail is named by its seq.
pub(super) fn verify_spans_pages(fx: &Fixture) {
    let new_fx = same_kind(fx);
    let store = chain(fx, 30);
    assert_eq!(store.verify_audit().unwrap().entries, 30);
    for (sql, seq) in [
        ("UPDATE audit SET subject = 'x' WHERE seq = 23", 23),
        ("UPDATE audit SET subject = 'x' WHERE seq = 14", 14),
        ("UPDATE audit SET subject = 'x' WHERE seq = 15", 15),
    ] {
        let fx = new_fx();
        let store = chain(&fx, 30);
        fx.tamper(sql);
        let err = store.verify_audit().unwrap_err();
        assert!(
            matches!(err, AuditError::HashMismatch { seq: s } if s == seq),
            "{sql}: {err}"
        );
    }
    let fx = new_fx();
    let store = chain(&fx, 28);
    // Exactly four pages, then the head says one more.
    fx.tamper("DELETE FROM audit WHERE seq = 28");
    let err = store.verify_audit().unwrap_err();
    assert!(
        matches!(
            err,
            AuditError::Truncated {
                head_count: 28,
                last_seq: 27
            }
        ),
        "{err}"
    );
}
