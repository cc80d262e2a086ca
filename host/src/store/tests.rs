//! Store tests, including a real SIGKILL crash test and a multi-connection
//! concurrency test.
//!
//! The crash test re-executes this test binary as a child:
//! `<test-binary> --exact store::tests::crash_safety_sigkill_child_rounds
//! --nocapture --test-threads=1` with `TEMPER_STORE_CRASH_CHILD_DIR=<dir>`
//! set. With that variable set, the same test runs the writer loop instead of
//! the parent. The test name is derived from `module_path!()`, so this works
//! wherever the module lives in a library crate's unit tests.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use tempfile::TempDir;

use super::*;

fn store() -> (TempDir, Registry) {
    let dir = tempfile::tempdir().unwrap();
    let store = Registry::open(dir.path()).unwrap();
    (dir, store)
}

fn record(name: &str, agent: Option<&str>, tier: Tier, artifact: &ArtifactId) -> ToolRecord {
    ToolRecord {
        name: name.to_owned(),
        agent_id: agent.map(str::to_owned),
        session_id: Some("s1".into()),
        tier,
        artifact: artifact.clone(),
        manifest: json!({
            "input_schema": {"type": "object"},
            "allowlist": ["api.example.com"],
            "tests": [{"input": {"a": 1}, "expect": {"b": 2}}],
            "sourceBlake3": "ab".repeat(32),
        }),
        created_seq: 0,
    }
}

fn raw(dir: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(dir.join("temper.db")).unwrap();
    c.busy_timeout(Duration::from_secs(10)).unwrap();
    c.execute_batch(
        "DROP TRIGGER IF EXISTS audit_no_update; DROP TRIGGER IF EXISTS audit_no_delete;",
    )
    .unwrap();
    c
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join("artifacts"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with(sqlite::artifacts::TEMP_PREFIX))
        .collect()
}

#[test]
fn artifact_roundtrip_idempotent_and_atomic_layout() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Registry>();
    let (dir, store) = store();
    let bytes = b"\0asm\x01\0\0\0 component".to_vec();
    let id = store.put_artifact(&bytes).unwrap();
    assert_eq!(id.as_str(), blake3::hash(&bytes).to_hex().as_str());
    assert_eq!(store.put_artifact(&bytes).unwrap(), id);
    assert_eq!(store.get_artifact(&id).unwrap(), bytes);
    assert!(
        dir.path()
            .join("artifacts")
            .join(format!("{id}.wasm"))
            .is_file()
    );
    assert_eq!(store.artifact_ids().unwrap(), vec![id]);
    assert!(temp_files(dir.path()).is_empty());
    let missing = ArtifactId::of(b"never stored");
    assert!(matches!(
        store.get_artifact(&missing),
        Err(StoreError::MissingArtifact {
            op: "get_artifact",
            ..
        })
    ));
}

#[test]
fn artifact_id_parsing_rejects_non_hex() {
    assert!(ArtifactId::from_hex(&"a".repeat(64)).is_ok());
    for bad in [
        "",
        "../etc/passwd",
        &"A".repeat(64),
        &"a".repeat(63),
        &format!("{}.wasm", "a".repeat(59)),
    ] {
        assert!(
            matches!(
                ArtifactId::from_hex(bad),
                Err(crate::id::InvalidArtifactId(_))
            ),
            "{bad}"
        );
    }
    let id: ArtifactId = serde_json::from_str(&format!("\"{}\"", "0".repeat(64))).unwrap();
    assert_eq!(
        serde_json::to_string(&id).unwrap(),
        format!("\"{}\"", "0".repeat(64))
    );
    assert!(serde_json::from_str::<ArtifactId>("\"zz\"").is_err());
}

#[test]
fn corrupt_artifact_is_detected_and_repaired_by_put() {
    let (dir, store) = store();
    let bytes = vec![7u8; 4096];
    let id = store.put_artifact(&bytes).unwrap();
    let path = dir.path().join("artifacts").join(id.file_name());
    let mut evil = bytes.clone();
    evil[100] ^= 1;
    std::fs::write(&path, &evil).unwrap();
    match store.get_artifact(&id) {
        Err(e @ StoreError::Corrupt { .. }) => {
            assert!(e.to_string().contains(id.as_str()), "{e}");
            assert!(e.to_string().contains("get_artifact"), "{e}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // Registering against a corrupt artifact is refused.
    let err = store
        .register(record("t", Some("a"), Tier::Agent, &id))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Corrupt { op: "register", .. }),
        "{err}"
    );
    // Putting the right bytes again repairs the file.
    assert_eq!(store.put_artifact(&bytes).unwrap(), id);
    assert_eq!(store.get_artifact(&id).unwrap(), bytes);
}

#[test]
fn open_removes_stale_temp_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let store = Registry::open(dir.path()).unwrap();
    let id = store.put_artifact(b"real").unwrap();
    drop(store);
    let art = dir.path().join("artifacts");
    let stale = art.join(".tmp-1-2-3.partial");
    let fresh = art.join(".tmp-4-5-6.partial");
    // A temp whose content would even hash right must never be served.
    std::fs::write(&stale, b"real").unwrap();
    std::fs::write(&fresh, b"half-writ").unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(old)
        .unwrap();

    let store = Registry::open(dir.path()).unwrap();
    assert_eq!(store.removed_temp_files(), 1);
    assert!(!stale.exists());
    assert!(fresh.exists(), "a young temp file may be a live writer's");
    assert_eq!(store.artifact_ids().unwrap(), vec![id.clone()]);
    assert_eq!(store.get_artifact(&id).unwrap(), b"real");
    drop(store);

    let store = Registry::open_with(
        dir.path(),
        RegistryOptions {
            stale_temp_age: Duration::ZERO,
            ..RegistryOptions::default()
        },
    )
    .unwrap();
    assert_eq!(store.removed_temp_files(), 1);
    assert!(temp_files(dir.path()).is_empty());
}

#[test]
fn migrations_set_user_version_and_refuse_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    drop(Registry::open(dir.path()).unwrap());
    let c = rusqlite::Connection::open(dir.path().join("temper.db")).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // Reopening is a no-op migration.
    let s = Registry::open(dir.path()).unwrap();
    s.append_audit(AuditKind::Approval, "t", None, &json!({}))
        .unwrap();
    drop(s);
    drop(Registry::open(dir.path()).unwrap());
    c.execute_batch(&format!("PRAGMA user_version = {}", SCHEMA_VERSION + 1))
        .unwrap();
    let err = Registry::open(dir.path()).unwrap_err();
    assert!(matches!(err, StoreError::SchemaTooNew { .. }), "{err}");
}

#[test]
fn register_requires_durable_artifact_and_audits_in_same_transaction() {
    let (_dir, store) = store();
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

#[test]
fn queries_resolve_agent_tier_before_shared() {
    let (_dir, store) = store();
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
}

#[test]
fn promote_moves_tool_and_stats_and_audits() {
    let (_dir, store) = store();
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
    assert!(matches!(
        store.promote("p", "alice", Tier::Shared),
        Err(StoreError::NotFound { op: "promote", .. })
    ));
    // Conflict with an existing shared tool.
    store
        .register(record("p", Some("bob"), Tier::Agent, &id))
        .unwrap();
    let err = store.promote("p", "bob", Tier::Shared).unwrap_err();
    assert!(
        matches!(err, StoreError::Conflict { op: "promote", .. }),
        "{err}"
    );
    assert_eq!(store.verify_audit().unwrap().entries, 4);
}

#[test]
fn delete_removes_row_and_appends_audit() {
    let (_dir, store) = store();
    let id = store.put_artifact(b"d").unwrap();
    store
        .register(record("d", Some("alice"), Tier::Agent, &id))
        .unwrap();
    store.record_invocation("d", "alice", false, 10).unwrap();
    let gone = store.delete("d", "alice").unwrap();
    assert_eq!(gone.artifact, id);
    assert!(store.get("d", "alice").unwrap().is_none());
    assert!(store.has_artifact(&id), "artifact files are kept");
    let last = store.audit_entries(1, 10).unwrap();
    assert_eq!(last.len(), 1);
    assert_eq!(last[0].kind, AuditKind::Deletion);
    assert_eq!(last[0].payload["tier"], "agent");
    assert!(matches!(
        store.delete("d", "alice"),
        Err(StoreError::NotFound { op: "delete", .. })
    ));
    assert!(matches!(
        store.stats("d", "alice"),
        Err(StoreError::NotFound { op: "stats", .. })
    ));
    assert_eq!(store.verify_audit().unwrap().entries, 2);
}

#[test]
fn stats_counts_rate_avg_and_windowed_p95() {
    let (dir, store) = store();
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
    let kept: i64 = raw(dir.path())
        .query_row("SELECT count(*) FROM invocations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, LATENCY_WINDOW as i64);
}

#[test]
fn canonical_json_sorts_keys_and_hash_ignores_key_order() {
    let a = json!({"b": 1, "a": {"z": [1, {"y": null, "x": "é\n"}], "c": 1.5}});
    let b: Value =
        serde_json::from_str(r#"{"a":{"c":1.5,"z":[1,{"x":"é\n","y":null}]},"b":1}"#).unwrap();
    assert_eq!(
        canonical_json(&a),
        r#"{"a":{"c":1.5,"z":[1,{"x":"é\n","y":null}]},"b":1}"#
    );
    assert_eq!(canonical_json(&a), canonical_json(&b));
    let (_d1, s1) = store();
    let e = s1
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
}

fn chain(n: usize) -> (TempDir, Registry) {
    let (dir, store) = store();
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
    (dir, store)
}

fn tampered(sql: &str) -> AuditError {
    let (dir, store) = chain(5);
    raw(dir.path()).execute_batch(sql).unwrap();
    store.verify_audit().unwrap_err()
}

#[test]
fn audit_is_append_only_through_sql_triggers() {
    let (dir, _store) = chain(2);
    let c = rusqlite::Connection::open(dir.path().join("temper.db")).unwrap();
    assert!(
        c.execute("UPDATE audit SET subject = 'x' WHERE seq = 1", [])
            .is_err()
    );
    assert!(c.execute("DELETE FROM audit WHERE seq = 2", []).is_err());
}

#[test]
fn verify_detects_edited_fields() {
    for sql in [
        "UPDATE audit SET kind = 'approval' WHERE seq = 3",
        "UPDATE audit SET subject = 'other' WHERE seq = 3",
        "UPDATE audit SET agent = NULL WHERE seq = 3",
        "UPDATE audit SET agent = 'mallory' WHERE seq = 3",
        r#"UPDATE audit SET payload = '{"accepted":true,"reasons":[]}' WHERE seq = 3"#,
        "UPDATE audit SET ts_ms = ts_ms + 1 WHERE seq = 3",
        "UPDATE audit SET hash = prev_hash WHERE seq = 3",
    ] {
        let err = tampered(sql);
        assert!(
            matches!(err, AuditError::HashMismatch { seq: 3 }),
            "{sql}: {err}"
        );
        assert!(err.to_string().contains("seq 3"), "{err}");
    }
    let err = tampered(&format!(
        "UPDATE audit SET prev_hash = '{GENESIS_HASH}' WHERE seq = 3"
    ));
    assert!(
        matches!(err, AuditError::PrevHashMismatch { seq: 3 }),
        "{err}"
    );
}

#[test]
fn verify_detects_removed_reordered_and_truncated() {
    let err = tampered("DELETE FROM audit WHERE seq = 3");
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
    let err =
        tampered("DELETE FROM audit WHERE seq = 3; UPDATE audit SET seq = seq - 1 WHERE seq > 3;");
    assert!(
        matches!(err, AuditError::PrevHashMismatch { seq: 3 }),
        "{err}"
    );

    // Swapped entries 3 and 4 (whole rows, seq included).
    let err = tampered(
        "UPDATE audit SET seq = -1 WHERE seq = 3; UPDATE audit SET seq = 3 WHERE seq = 4;
         UPDATE audit SET seq = 4 WHERE seq = -1;",
    );
    assert!(
        matches!(err, AuditError::PrevHashMismatch { seq: 3 }),
        "{err}"
    );

    // Swapped contents, seq kept in place.
    let err = tampered(
        "UPDATE audit SET subject = 'tmp' WHERE seq = 3;
         UPDATE audit SET subject = 'tool2' WHERE seq = 4;
         UPDATE audit SET subject = 'tool3' WHERE seq = 3;",
    );
    assert!(matches!(err, AuditError::HashMismatch { seq: 3 }), "{err}");

    let err = tampered("DELETE FROM audit WHERE seq = 5");
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
    let err = tampered("DELETE FROM audit WHERE seq >= 2");
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
    let (dir, store) = chain(5);
    let c = raw(dir.path());
    let prev: String = c
        .query_row("SELECT hash FROM audit WHERE seq = 5", [], |r| r.get(0))
        .unwrap();
    let hash = audit::entry_hash(6, "approval", "x", None, 0, "{}", &prev);
    c.execute(
        "INSERT INTO audit VALUES (6, 'approval', 'x', NULL, '{}', 0, ?1, ?2)",
        rusqlite::params![prev, hash],
    )
    .unwrap();
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
    let err = tampered("UPDATE meta SET value = 'ff' WHERE key = 'audit_head_hash'");
    assert!(
        matches!(err, AuditError::HeadMismatch { seq: 5, .. }),
        "{err}"
    );
}

#[test]
fn concurrent_connections_register_record_and_append() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 15;
    const CALLS: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let barrier = std::sync::Barrier::new(THREADS);
    let start = Instant::now();
    let shared_wins: usize = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (dir, barrier) = (dir.path(), &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let store = Registry::open(dir).unwrap();
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
        "concurrency: {THREADS} threads done in {:?}",
        start.elapsed()
    );
    assert_eq!(shared_wins, 1, "exactly one shared registration wins");
    let store = Registry::open(dir.path()).unwrap();
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

// ---- crash safety: a real SIGKILL of a child writer -----------------------

const CHILD_DIR_ENV: &str = "TEMPER_STORE_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "TEMPER_STORE_CRASH_ROUND";
const READY: &str = "TEMPER_STORE_CHILD_READY";
const CRASH_ROUNDS: u64 = 60;

fn xorshift(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    for _ in 0..4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// This test's name as libtest knows it (module path without the crate).
fn this_test_name() -> String {
    let module = module_path!();
    let module = module.split_once("::").map_or("", |(_, rest)| rest);
    format!("{module}::crash_safety_sigkill_child_rounds")
}

/// The child: write forever (bounded at 30 s) until killed.
fn child_writer(dir: &Path, round: u64) {
    let store = Registry::open(dir).unwrap();
    // libtest prints "test <name> ... " without a newline first.
    println!("\n{READY}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rng = xorshift(round + 1);
    let mut i = 0u64;
    while Instant::now() < deadline {
        rng = xorshift(rng);
        let len = 256 + (rng % 8192) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|k| (xorshift(rng ^ k as u64) & 0xff) as u8)
            .collect();
        let id = store.put_artifact(&bytes).unwrap();
        let name = format!("r{round}-t{i}");
        store
            .register(record(&name, Some("crash"), Tier::Agent, &id))
            .unwrap();
        store
            .append_audit(
                AuditKind::ForgeDecision,
                &name,
                Some("judge"),
                &json!({"round": round, "i": i}),
            )
            .unwrap();
        store
            .record_invocation(&name, "crash", !rng.is_multiple_of(3), rng % 5000)
            .unwrap();
        match rng % 7 {
            0 => drop(store.promote(&name, "crash", Tier::Shared).unwrap()),
            1 => drop(store.delete(&name, "crash").unwrap()),
            _ => {}
        }
        i += 1;
    }
    std::process::exit(0);
}

#[test]
fn crash_safety_sigkill_child_rounds() {
    if let Ok(dir) = std::env::var(CHILD_DIR_ENV) {
        let round = std::env::var(CHILD_ROUND_ENV)
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        child_writer(Path::new(&dir), round);
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let exe = std::env::current_exe().unwrap();
    let name = this_test_name();
    let start = Instant::now();
    let (mut last_entries, mut rounds_with_temps, mut tools_seen) = (0u64, 0, 0);
    for round in 0..CRASH_ROUNDS {
        let mut child = Command::new(&exe)
            .args(["--exact", &name, "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR_ENV, dir)
            .env(CHILD_ROUND_ENV, round.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let ready = lines
            .by_ref()
            .any(|l| l.map(|l| l.contains(READY)).unwrap_or(false));
        assert!(ready, "round {round}: child exited before it was ready");
        let delay = Duration::from_micros(xorshift(round) % 100_000);
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "round {round}: child was not killed ({status})"
        );
        drop(lines);

        if !temp_files(dir).is_empty() {
            rounds_with_temps += 1;
        }
        let store = Registry::open_with(
            dir,
            RegistryOptions {
                stale_temp_age: Duration::ZERO,
                ..RegistryOptions::default()
            },
        )
        .unwrap();
        let report = store
            .verify_audit()
            .unwrap_or_else(|e| panic!("round {round}: audit chain broken after kill: {e}"));
        assert!(
            report.entries >= last_entries,
            "round {round}: committed audit entries lost"
        );
        last_entries = report.entries;
        let mut tools = store.tools_for_agent("crash").unwrap();
        tools.extend(store.shared_tools().unwrap());
        tools_seen = tools.len();
        for tool in &tools {
            assert!(
                store.has_artifact(&tool.artifact),
                "round {round}: {} has no artifact",
                tool.name
            );
            store
                .get_artifact(&tool.artifact)
                .unwrap_or_else(|e| panic!("round {round}: tool {}: {e}", tool.name));
            // The registration entry is in the chain.
            assert!(tool.created_seq >= 1 && tool.created_seq as u64 <= report.entries);
        }
        for id in store.artifact_ids().unwrap() {
            store
                .get_artifact(&id)
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
        }
        assert!(
            temp_files(dir).is_empty(),
            "round {round}: temp files survived open cleanup"
        );
    }
    eprintln!(
        "crash test: {CRASH_ROUNDS} SIGKILL rounds in {:?}; {last_entries} audit entries, {tools_seen} tools, temp files left by {rounds_with_temps} kills",
        start.elapsed()
    );
    assert!(
        last_entries > CRASH_ROUNDS,
        "the child made too little progress to test anything"
    );
}
