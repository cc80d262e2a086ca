//! SQLite-specific store tests (artifact files, temp-file cleanup, WAL and
//! `user_version`, a real SIGKILL crash test); the backend-independent
//! cases are in [`suite`], which runs each against SQLite and PostgreSQL.
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

mod suite;

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
                Err(temper_runtime::id::InvalidArtifactId(_))
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
fn canonical_json_sorts_keys() {
    let a = json!({"b": 1, "a": {"z": [1, {"y": null, "x": "é\n"}], "c": 1.5}});
    let b: Value =
        serde_json::from_str(r#"{"a":{"c":1.5,"z":[1,{"x":"é\n","y":null}]},"b":1}"#).unwrap();
    assert_eq!(
        canonical_json(&a),
        r#"{"a":{"c":1.5,"z":[1,{"x":"é\n","y":null}]},"b":1}"#
    );
    assert_eq!(canonical_json(&a), canonical_json(&b));
}

// ---- crash safety: a real SIGKILL of a child writer -----------------------

const CHILD_DIR_ENV: &str = "TEMPER_STORE_CRASH_CHILD_DIR";
const CHILD_ROUND_ENV: &str = "TEMPER_STORE_CRASH_ROUND";
const READY: &str = "TEMPER_STORE_CHILD_READY";
const CRASH_ROUNDS: u64 = 60;

pub(super) fn xorshift(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    for _ in 0..4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// One step of a crash-test writer (SQLite and PostgreSQL alike): a
/// random artifact, the agent-tier tool `name` on it, a forge decision and
/// a call, each in its own transaction.
pub(super) fn crash_write_step(store: &Registry, name: &str, round: u64, i: u64, rng: u64) {
    let len = 256 + (rng % 8192) as usize;
    let bytes: Vec<u8> = (0..len)
        .map(|k| (xorshift(rng ^ k as u64) & 0xff) as u8)
        .collect();
    let id = store.put_artifact(&bytes).unwrap();
    store
        .register(record(name, Some("crash"), Tier::Agent, &id))
        .unwrap();
    store
        .append_audit(
            AuditKind::ForgeDecision,
            name,
            Some("judge"),
            &json!({"round": round, "i": i}),
        )
        .unwrap();
    store
        .record_invocation(name, "crash", !rng.is_multiple_of(3), rng % 5000)
        .unwrap();
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
        let name = format!("r{round}-t{i}");
        crash_write_step(&store, &name, round, i, rng);
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
                store.has_artifact(&tool.artifact).unwrap(),
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
