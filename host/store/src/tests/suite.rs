//! The backend-independent store suite: every case is a function of a
//! [`Fixture`] and runs twice, as `store::tests::suite::sqlite::<case>` on a
//! temp-dir SQLite store and as `store::tests::suite::postgres::<case>` on a
//! fresh database of the test cluster (skipped without
//! `TEMPER_TEST_PG_URL`, failing instead with `TEMPER_REQUIRE_PG=1`).
//! Tampering goes through each database's own SQL, with the audit
//! triggers dropped or disabled the way an attacker with write access would.

use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use super::super::postgres::testing::TestDb;
use super::super::*;
use super::record;

mod audit_cases;
mod quota_cases;
mod search_cases;
mod session_cases;
use audit_cases::{
    audit_is_append_only_through_sql_triggers, verify_detects_edited_fields,
    verify_detects_removed_reordered_and_truncated, verify_spans_pages,
};
use quota_cases::{
    quota_leases_stop_at_the_limit_across_hosts, racing_quota_leases_hand_out_exactly_the_limit,
};
use search_cases::{
    most_used_orders_by_calls, search_finds_visible_tools_only,
    working_set_is_kept_with_the_session,
};
use session_cases::{
    ending_a_session_discards_its_tools_with_entries, expiry_is_reaped_once_when_hosts_race,
    promotion_takes_the_tool_out_of_its_session, session_tool_and_its_decision_commit_together,
    session_uses_are_written_behind,
};

/// A database to run a case on.
pub(super) enum Fixture {
    Sqlite(TempDir),
    Postgres(TestDb),
}

impl Fixture {
    fn sqlite() -> Fixture {
        Fixture::Sqlite(tempfile::tempdir().unwrap())
    }

    fn postgres(test: &str) -> Option<Fixture> {
        TestDb::create(test).map(Fixture::Postgres)
    }

    /// A new registry (a new connection, or pool) on this database.
    fn open(&self) -> Registry {
        match self {
            Fixture::Sqlite(dir) => Registry::open(dir.path()).unwrap(),
            Fixture::Postgres(db) => Registry::open_postgres(&db.url).unwrap(),
        }
    }

    /// Runs raw SQL as-is (the triggers in place); the database's error text.
    fn try_exec(&self, sql: &str) -> Result<(), String> {
        match self {
            Fixture::Sqlite(dir) => {
                let c = rusqlite::Connection::open(dir.path().join("temper.db")).unwrap();
                c.busy_timeout(Duration::from_secs(10)).unwrap();
                c.execute_batch(sql).map_err(|e| e.to_string())
            }
            Fixture::Postgres(db) => super::super::postgres::testing::try_exec(&db.url, sql),
        }
    }

    /// Runs raw SQL with the audit table's triggers out of the way.
    fn tamper(&self, sql: &str) {
        match self {
            Fixture::Sqlite(_) => self
                .try_exec(&format!(
                    "DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete; {sql}"
                ))
                .unwrap(),
            Fixture::Postgres(db) => db.tamper(sql),
        }
    }

    fn scalar(&self, sql: &str) -> i64 {
        match self {
            Fixture::Sqlite(dir) => {
                let c = rusqlite::Connection::open(dir.path().join("temper.db")).unwrap();
                c.query_row(sql, [], |r| r.get(0)).unwrap()
            }
            Fixture::Postgres(db) => db.scalar(sql),
        }
    }

    /// SQL that rewrites the head record's hash.
    fn forge_head_sql(&self) -> &'static str {
        match self {
            Fixture::Sqlite(_) => "UPDATE meta SET value = 'ff' WHERE key = 'audit_head_hash'",
            Fixture::Postgres(_) => "UPDATE audit_head SET head_hash = 'ff'",
        }
    }

    /// Overwrites the stored wasm bytes of `id` with `bytes`.
    fn corrupt_wasm(&self, id: &ArtifactId, bytes: &[u8]) {
        match self {
            Fixture::Sqlite(dir) => {
                std::fs::write(dir.path().join("artifacts").join(id.file_name()), bytes).unwrap()
            }
            Fixture::Postgres(db) => {
                let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                db.exec(&format!(
                    "UPDATE artifacts SET bytes = '\\x{hex}'::bytea WHERE id = '{id}' AND form = 'wasm'"
                ));
            }
        }
    }

    fn kind(&self) -> BackendKind {
        match self {
            Fixture::Sqlite(_) => BackendKind::Sqlite,
            Fixture::Postgres(_) => BackendKind::Postgres,
        }
    }
}

macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $case() {
                    super::$case(&super::Fixture::sqlite());
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $case() {
                    let test = concat!("store::tests::suite::postgres::", stringify!($case));
                    if let Some(fx) = super::Fixture::postgres(test) {
                        super::$case(&fx);
                    }
                }
            )*
        }
    };
}

suite!(
    quota_leases_stop_at_the_limit_across_hosts,
    racing_quota_leases_hand_out_exactly_the_limit,
    search_finds_visible_tools_only,
    working_set_is_kept_with_the_session,
    most_used_orders_by_calls,
    session_tool_and_its_decision_commit_together,
    ending_a_session_discards_its_tools_with_entries,
    expiry_is_reaped_once_when_hosts_race,
    session_uses_are_written_behind,
    promotion_takes_the_tool_out_of_its_session,
    artifact_roundtrip_and_missing,
    corrupt_artifact_is_detected_and_repaired_by_put,
    register_requires_artifact_and_audits_in_same_transaction,
    queries_resolve_agent_tier_before_shared,
    promote_moves_tool_and_stats_and_audits,
    approve_and_promote_is_one_transaction,
    register_promoted_carries_session_stats,
    delete_removes_row_and_appends_audit,
    audit_head_seq_is_the_last_entry,
    stats_counts_rate_avg_and_windowed_p95,
    canonical_json_hash_ignores_key_order,
    audit_is_append_only_through_sql_triggers,
    verify_detects_edited_fields,
    verify_detects_removed_reordered_and_truncated,
    verify_spans_pages,
    concurrent_connections_register_record_and_append,
    stats_are_written_behind_and_exact_after_flush_or_drop,
    stats_zero_interval_writes_each_call,
    two_hosts_stats_sums_exact_after_an_interval,
);

fn artifact_roundtrip_and_missing(fx: &Fixture) {
    let store = fx.open();
    assert_eq!(store.backend().kind(), fx.kind());
    let bytes = b"\0asm\x01\0\0\0 component".to_vec();
    let id = store.put_artifact(&bytes).unwrap();
    assert_eq!(id.as_str(), blake3::hash(&bytes).to_hex().as_str());
    assert_eq!(store.put_artifact(&bytes).unwrap(), id);
    assert_eq!(store.get_artifact(&id).unwrap(), bytes);
    assert!(store.has_artifact(&id).unwrap());
    assert_eq!(store.artifact_ids().unwrap(), vec![id.clone()]);
    // Another handle on the same database sees it.
    assert_eq!(fx.open().get_artifact(&id).unwrap(), bytes);
    let missing = ArtifactId::of(b"never stored");
    assert!(!store.has_artifact(&missing).unwrap());
    assert!(matches!(
        store.get_artifact(&missing),
        Err(StoreError::MissingArtifact {
            op: "get_artifact",
            ..
        })
    ));
    // Without a codec, a compact record cannot be read back as a component.
    let compact_id = ArtifactId::of(b"some component");
    store
        .backend()
        .put_blob(&compact_id, ArtifactForm::Compact, b"compact record")
        .unwrap();
    assert!(store.has_artifact(&compact_id).unwrap());
    assert_eq!(
        store.get_compact(&compact_id).unwrap().as_deref(),
        Some(&b"compact record"[..])
    );
    assert!(matches!(
        store.get_artifact(&compact_id),
        Err(StoreError::NoCodec { .. })
    ));
    let mut ids = vec![id, compact_id];
    ids.sort();
    assert_eq!(store.artifact_ids().unwrap(), ids);
}

fn corrupt_artifact_is_detected_and_repaired_by_put(fx: &Fixture) {
    let store = fx.open();
    let bytes = vec![7u8; 4096];
    let id = store.put_artifact(&bytes).unwrap();
    let mut evil = bytes.clone();
    evil[100] ^= 1;
    fx.corrupt_wasm(&id, &evil);
    match store.get_artifact(&id) {
        Err(e @ StoreError::Corrupt { .. }) => {
            assert!(e.to_string().contains(id.as_str()), "{e}");
            assert!(e.to_string().contains("get_artifact"), "{e}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Registering against a corrupt artifact is refused, and nothing is audited.
    let err = store
        .register(record("t", Some("a"), Tier::Agent, &id))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { op: "register", .. }),
        "{err}"
    );
    assert_eq!(store.verify_audit().unwrap().entries, 0);
    // Putting the right bytes again repairs it.
    assert_eq!(store.put_artifact(&bytes).unwrap(), id);
    assert_eq!(store.get_artifact(&id).unwrap(), bytes);
    store
        .register(record("t", Some("a"), Tier::Agent, &id))
        .unwrap();
}

fn register_requires_artifact_and_audits_in_same_transaction(fx: &Fixture) {
    let store = fx.open();
    let missing = ArtifactId::of(b"not there");
    let err = store
        .register(record("t", Some("a"), Tier::Agent, &missing))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::MissingArtifact { op: "register", .. }),
        "{err}"
    );
    assert_eq!(
        store.verify_audit().unwrap().entries,
        0,
        "no audit entry for a refused register"
    );
    assert!(store.tools_for_agent("a").unwrap().is_empty());

    let id = store.put_artifact(b"tool").unwrap();
    let rec = store
        .register(record("t", Some("a"), Tier::Agent, &id))
        .unwrap();
    assert_eq!(rec.created_seq, 1);
    let entries = store.audit_entries(0, 10).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].kind, AuditKind::Registration);
    assert_eq!(entries[0].subject, "t");
    assert_eq!(entries[0].agent.as_deref(), Some("a"));
    assert_eq!(entries[0].payload["artifact"], id.as_str());
    assert_eq!(store.agent_tool_count("a").unwrap(), 1);

    // Duplicate: conflict, and the audit entry of the failed attempt is rolled back.
    let err = store
        .register(record("t", Some("a"), Tier::Agent, &id))
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Conflict {
                op: "register",
                tier: "agent",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(store.verify_audit().unwrap().entries, 1);
    // An entry registered with a first entry: both, in order, in one go.
    let rec = store
        .register_with_entry(
            record("u", Some("a"), Tier::Agent, &id),
            AuditKind::ForgeDecision,
            &json!({"accepted": true}),
        )
        .unwrap();
    assert_eq!(rec.created_seq, 3);
    let kinds: Vec<_> = store
        .audit_entries(1, 10)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(
        kinds,
        [(2, AuditKind::ForgeDecision), (3, AuditKind::Registration)]
    );
    let err = store
        .register_with_entry(
            record("u", Some("a"), Tier::Agent, &id),
            AuditKind::ForgeDecision,
            &json!({"accepted": true}),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
    assert_eq!(store.verify_audit().unwrap().entries, 3);

    let err = store
        .register(record("s", Some("a"), Tier::Session, &id))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Invalid { op: "register", .. }),
        "{err}"
    );
    let err = store
        .register(record("n", None, Tier::Agent, &id))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Invalid { op: "register", .. }),
        "{err}"
    );
}

fn queries_resolve_agent_tier_before_shared(fx: &Fixture) {
    let store = fx.open();
    let a1 = store.put_artifact(b"one").unwrap();
    let a2 = store.put_artifact(b"two").unwrap();
    store
        .register(record("fmt", Some("alice"), Tier::Agent, &a1))
        .unwrap();
    store
        .register(record("fmt", None, Tier::Shared, &a2))
        .unwrap();
    store
        .register(record("zip", Some("bob"), Tier::Shared, &a2))
        .unwrap();
    store
        .register(record("fmt", Some("bob"), Tier::Agent, &a2))
        .unwrap();

    let alice = store.tools_for_agent("alice").unwrap();
    assert_eq!(alice.len(), 1);
    assert_eq!(alice[0].manifest["allowlist"][0], "api.example.com");
    assert_eq!(alice[0], store.get("fmt", "alice").unwrap().unwrap());
    let shared: Vec<_> = store
        .shared_tools()
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(shared, ["fmt", "zip"]);
    assert_eq!(store.get("fmt", "alice").unwrap().unwrap().artifact, a1);
    assert_eq!(
        store.get("fmt", "carol").unwrap().unwrap().tier,
        Tier::Shared
    );
    assert_eq!(
        store
            .get("zip", "alice")
            .unwrap()
            .unwrap()
            .agent_id
            .as_deref(),
        Some("bob")
    );
    assert!(store.get("nope", "alice").unwrap().is_none());
    assert_eq!(store.agent_tool_count("bob").unwrap(), 1);
    assert_eq!(store.agent_tool_count("carol").unwrap(), 0);
}

fn promote_moves_tool_and_stats_and_audits(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"p").unwrap();
    store
        .register(record("p", Some("alice"), Tier::Agent, &id))
        .unwrap();
    store.record_invocation("p", "alice", true, 1500).unwrap();
    store
        .append_audit(
            AuditKind::Approval,
            "p",
            Some("reviewer"),
            &json!({"ok": true}),
        )
        .unwrap();
    let err = store.promote("p", "alice", Tier::Agent).unwrap_err();
    assert!(
        matches!(err, StoreError::Invalid { op: "promote", .. }),
        "{err}"
    );
    let rec = store.promote("p", "alice", Tier::Shared).unwrap();
    assert_eq!(rec.tier, Tier::Shared);
    assert!(store.tools_for_agent("alice").unwrap().is_empty());
    assert_eq!(store.get("p", "bob").unwrap().unwrap().tier, Tier::Shared);
    assert_eq!(store.stats("p", "bob").unwrap().total_calls, 1);
    let last = store.audit_entries(0, 100).unwrap().pop().unwrap();
    assert_eq!((last.kind, last.seq), (AuditKind::Promotion, 3));
    assert_eq!(last.payload["created_seq"], 1);
    assert!(matches!(
        store.promote("p", "alice", Tier::Shared),
        Err(StoreError::NotFound { op: "promote", .. })
    ));
    // Conflict with an existing shared tool: nothing moves, nothing is audited.
    store
        .register(record("p", Some("bob"), Tier::Agent, &id))
        .unwrap();
    let err = store.promote("p", "bob", Tier::Shared).unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { op: "promote", .. }),
        "{err}"
    );
    assert_eq!(store.verify_audit().unwrap().entries, 4);
    assert_eq!(store.tools_for_agent("bob").unwrap().len(), 1);
}

fn approve_and_promote_is_one_transaction(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"ap").unwrap();
    store
        .register(record("x", Some("alice"), Tier::Agent, &id))
        .unwrap();
    store
        .register(record("x", Some("bob"), Tier::Agent, &id))
        .unwrap();
    let rec = store
        .approve_and_promote("x", "alice", &json!({"by": "human"}))
        .unwrap();
    assert_eq!(rec.tier, Tier::Shared);
    let tail: Vec<_> = store
        .audit_entries(2, 10)
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.kind))
        .collect();
    assert_eq!(tail, [(3, AuditKind::Approval), (4, AuditKind::Promotion)]);
    // Bob's approval cannot commit without its promotion (name taken).
    let err = store
        .approve_and_promote("x", "bob", &json!({"by": "human"}))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { op: "promote", .. }),
        "{err}"
    );
    assert_eq!(store.verify_audit().unwrap().entries, 4);
}

fn register_promoted_carries_session_stats(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"carried").unwrap();
    let mut counters = CallCounters::default();
    for i in 1..=(LATENCY_WINDOW as u64 + 20) {
        counters.record(i % 10 != 0, i * 10);
    }
    let rec = store
        .register_promoted(
            record("c", Some("alice"), Tier::Agent, &id),
            &json!({"panel": ["ok"]}),
            &counters,
        )
        .unwrap();
    assert_eq!(rec.created_seq, 2);
    let entries = store.audit_entries(0, 10).unwrap();
    assert_eq!(entries[0].kind, AuditKind::Promotion);
    assert_eq!(entries[1].kind, AuditKind::Registration);
    assert_eq!(store.stats("c", "alice").unwrap(), counters.stats());
    // New calls go on from the carried window.
    store.record_invocation("c", "alice", true, 1).unwrap();
    counters.record(true, 1);
    assert_eq!(store.stats("c", "alice").unwrap(), counters.stats());
}

fn delete_removes_row_and_appends_audit(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"d").unwrap();
    store
        .register(record("d", Some("alice"), Tier::Agent, &id))
        .unwrap();
    store.record_invocation("d", "alice", false, 10).unwrap();
    let gone = store.delete("d", "alice").unwrap();
    assert_eq!(gone.artifact, id);
    assert!(store.get("d", "alice").unwrap().is_none());
    assert!(store.has_artifact(&id).unwrap(), "artifacts are kept");
    let last = store.audit_entries(1, 10).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].kind, AuditKind::Deletion);
    assert_eq!(last[0].payload["tier"], "agent");
    assert_eq!(last[0].payload["owner"], "alice");
    assert!(matches!(
        store.delete("d", "alice"),
        Err(StoreError::NotFound { op: "delete", .. })
    ));
    assert!(matches!(
        store.stats("d", "alice"),
        Err(StoreError::NotFound { op: "stats", .. })
    ));
    // A call counted for a deleted tool is dropped when written.
    store.record_invocation("d", "alice", true, 1).unwrap();
    store.flush_stats().unwrap();
    assert_eq!(store.verify_audit().unwrap().entries, 2);
    // Its stats went with it: a new tool of that name starts from zero.
    store
        .register(record("d", Some("alice"), Tier::Agent, &id))
        .unwrap();
    assert_eq!(store.stats("d", "alice").unwrap().total_calls, 0);
    assert_eq!(fx.scalar("SELECT count(*) FROM invocations"), 0);
}

fn audit_head_seq_is_the_last_entry(fx: &Fixture) {
    let store = fx.open();
    assert_eq!(store.audit_head_seq().unwrap(), 0, "an empty chain");
    let id = store.put_artifact(b"h").unwrap();
    store
        .register(record("h", Some("alice"), Tier::Agent, &id))
        .unwrap();
    store
        .append_audit(AuditKind::Approval, "h", Some("alice"), &json!({}))
        .unwrap();
    store.delete("h", "alice").unwrap();
    let entries = store.audit_entries(0, 100).unwrap();
    assert_eq!(entries.len(), 3);
    assert_eq!(store.audit_head_seq().unwrap(), entries[2].seq);
    // Another connection (another host) reads the same head.
    assert_eq!(fx.open().audit_head_seq().unwrap(), 3);
}

fn stats_counts_rate_avg_and_windowed_p95(fx: &Fixture) {
    let store = fx.open();
    let id = store.put_artifact(b"s").unwrap();
    store
        .register(record("s", Some("a"), Tier::Agent, &id))
        .unwrap();
    let empty = store.stats("s", "a").unwrap();
    assert_eq!(
        (empty.total_calls, empty.success_rate, empty.p95_latency_ms),
        (0, 0.0, 0.0)
    );
    // 100 calls: latencies 1..=100 ms, every 4th fails.
    for i in 1..=100u64 {
        store
            .record_invocation("s", "a", i % 4 != 0, i * 1000)
            .unwrap();
    }
    let s = store.stats("s", "a").unwrap();
    assert_eq!(s.total_calls, 100);
    assert_eq!(s.successes, 75);
    assert!((s.success_rate - 0.75).abs() < 1e-9);
    assert!((s.avg_latency_ms - 50.5).abs() < 1e-9);
    assert!(
        (s.p95_latency_ms - 95.0).abs() < 1e-9,
        "{}",
        s.p95_latency_ms
    );
    // 1100 more calls at 1 ms: counters stay exact, the window is bounded.
    for _ in 0..1100 {
        store.record_invocation("s", "a", true, 1000).unwrap();
    }
    let s = store.stats("s", "a").unwrap();
    assert_eq!(s.total_calls, 1200);
    assert_eq!(s.successes, 1175);
    assert!((s.p95_latency_ms - 1.0).abs() < 1e-9);
    assert_eq!(
        fx.scalar("SELECT count(*) FROM invocations"),
        LATENCY_WINDOW as i64
    );
}

fn canonical_json_hash_ignores_key_order(fx: &Fixture) {
    let a = json!({"b": 1, "a": {"z": [1, {"y": null, "x": "é\n"}], "c": 1.5}});
    let b: Value =
        serde_json::from_str(r#"{"a":{"c":1.5,"z":[1,{"x":"é\n","y":null}]},"b":1}"#).unwrap();
    let store = fx.open();
    let e = store
        .append_audit(AuditKind::ForgeDecision, "t", Some("a"), &a)
        .unwrap();
    assert_eq!(e.prev_hash, GENESIS_HASH);
    let h = |p: &Value| {
        audit::entry_hash(
            1,
            "forge_decision",
            "t",
            Some("a"),
            e.ts_ms,
            &canonical_json(p),
            GENESIS_HASH,
        )
    };
    assert_eq!(h(&a), e.hash);
    assert_eq!(h(&b), e.hash);
    // What is read back is what was appended.
    assert_eq!(store.audit_entries(0, 1).unwrap(), vec![e]);
}

fn concurrent_connections_register_record_and_append(fx: &Fixture) {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 15;
    const CALLS: usize = 3;
    let barrier = std::sync::Barrier::new(THREADS);
    let start = Instant::now();
    let shared_wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let store = fx.open();
                    let agent = format!("agent{t}");
                    let common = store.put_artifact(b"common artifact").unwrap();
                    let won =
                        match store.register(record("common", Some(&agent), Tier::Shared, &common))
                        {
                            Ok(_) => 1,
                            Err(StoreError::Conflict { .. }) => 0,
                            Err(e) => panic!("{e}"),
                        };
                    for i in 0..PER_THREAD {
                        let id = store
                            .put_artifact(format!("artifact {t} {i}").as_bytes())
                            .unwrap();
                        let name = format!("tool{i}");
                        store
                            .register(record(&name, Some(&agent), Tier::Agent, &id))
                            .unwrap();
                        for c in 0..CALLS {
                            store
                                .record_invocation(&name, &agent, c != 0, 100 * c as u64)
                                .unwrap();
                            store.record_invocation("common", &agent, true, 50).unwrap();
                        }
                        store
                            .append_audit(
                                AuditKind::ForgeDecision,
                                &name,
                                Some(&agent),
                                &json!({"i": i}),
                            )
                            .unwrap();
                    }
                    won
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    eprintln!(
        "concurrency ({:?}): {THREADS} threads done in {:?}",
        fx.kind(),
        start.elapsed()
    );
    assert_eq!(shared_wins, 1, "exactly one shared registration wins");
    let store = fx.open();
    let report = store.verify_audit().unwrap();
    assert_eq!(report.entries as usize, 1 + THREADS * PER_THREAD * 2);
    for t in 0..THREADS {
        let agent = format!("agent{t}");
        let tools = store.tools_for_agent(&agent).unwrap();
        assert_eq!(tools.len(), PER_THREAD);
        for tool in tools {
            let s = store.stats(&tool.name, &agent).unwrap();
            assert_eq!(
                (s.total_calls, s.successes),
                (CALLS as u64, CALLS as u64 - 1)
            );
            store.get_artifact(&tool.artifact).unwrap();
        }
    }
    let common = store.stats("common", "anyone").unwrap();
    assert_eq!(common.total_calls as usize, THREADS * PER_THREAD * CALLS);
    // Registration seqs are unique and all present in the chain.
    let mut seqs: Vec<i64> = (0..THREADS)
        .flat_map(|t| store.tools_for_agent(&format!("agent{t}")).unwrap())
        .map(|r| r.created_seq)
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), THREADS * PER_THREAD);
}

/// Total calls of `name` as stored, read through a registry that has
/// counted nothing itself (another host).
fn stored_total(fx: &Fixture, name: &str, agent: &str) -> u64 {
    fx.open().stats(name, agent).unwrap().total_calls
}

fn stats_are_written_behind_and_exact_after_flush_or_drop(fx: &Fixture) {
    let store = fx.open();
    store.set_stats_flush(Duration::from_secs(3600));
    let id = store.put_artifact(b"wb").unwrap();
    store
        .register(record("wb", Some("a"), Tier::Agent, &id))
        .unwrap();
    for i in 0..100u64 {
        store
            .record_invocation("wb", "a", i % 10 != 0, 100)
            .unwrap();
    }
    // Nothing is written yet: another host reads zero ...
    assert_eq!(stored_total(fx, "wb", "a"), 0);
    // ... and this one reads its own calls (stats flush first).
    let s = store.stats("wb", "a").unwrap();
    assert_eq!((s.total_calls, s.successes), (100, 90));
    assert_eq!(stored_total(fx, "wb", "a"), 100);
    // An explicit flush writes them; a flush with nothing pending is free.
    store.record_invocation("wb", "a", true, 100).unwrap();
    store.flush_stats().unwrap();
    store.flush_stats().unwrap();
    assert_eq!(stored_total(fx, "wb", "a"), 101);
    // Dropping the registry (a clean shutdown) writes what is pending.
    for _ in 0..7 {
        store.record_invocation("wb", "a", false, 100).unwrap();
    }
    drop(store);
    let s = fx.open().stats("wb", "a").unwrap();
    assert_eq!((s.total_calls, s.successes), (108, 91));
    assert!((s.avg_latency_ms - 0.1).abs() < 1e-9);
    // A promotion moves the pending calls with the tool.
    let store = fx.open();
    store.set_stats_flush(Duration::from_secs(3600));
    store.record_invocation("wb", "a", true, 100).unwrap();
    store.promote("wb", "a", Tier::Shared).unwrap();
    assert_eq!(stored_total(fx, "wb", "anyone"), 109);
}

fn stats_zero_interval_writes_each_call(fx: &Fixture) {
    let store = fx.open();
    store.set_stats_flush(Duration::ZERO);
    assert_eq!(store.stats_flush(), Duration::ZERO);
    let id = store.put_artifact(b"z").unwrap();
    store
        .register(record("z", Some("a"), Tier::Agent, &id))
        .unwrap();
    store.record_invocation("z", "a", true, 5).unwrap();
    assert_eq!(stored_total(fx, "z", "a"), 1);
    // Written at once, so a tool that is gone is not an error either.
    store.record_invocation("nope", "a", true, 5).unwrap();
}

fn two_hosts_stats_sums_exact_after_an_interval(fx: &Fixture) {
    const INTERVAL: Duration = Duration::from_millis(200);
    let (a, b) = (fx.open(), fx.open());
    let id = a.put_artifact(b"two").unwrap();
    a.register(record("two", Some("x"), Tier::Shared, &id))
        .unwrap();
    for host in [&a, &b] {
        host.set_stats_flush(INTERVAL);
    }
    std::thread::scope(|s| {
        for (h, host) in [&a, &b].into_iter().enumerate() {
            s.spawn(move || {
                for i in 0..500u64 {
                    let agent = format!("agent{}", (i + h as u64) % 3);
                    host.record_invocation("two", &agent, true, 10).unwrap();
                }
            });
        }
    });
    // Both hosts keep running (nothing dropped, nothing read through
    // them): their flushers write the sums within an interval or so.
    let deadline = Instant::now() + INTERVAL * 25;
    let mut total = stored_total(fx, "two", "y");
    while total < 1000 && Instant::now() < deadline {
        std::thread::sleep(INTERVAL / 4);
        total = stored_total(fx, "two", "y");
    }
    assert_eq!(total, 1000);
    drop((a, b));
    assert_eq!(stored_total(fx, "two", "y"), 1000, "nothing counted twice");
}
