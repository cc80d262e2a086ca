//! The `temper` CLI end to end: forge, call, stats, promote, approve and
//! audit, and processes sharing a session.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::json;
use temper::request::Implementation;

use super::seed;

/// `temper` with the registry flags, in a scratch store.
fn cli(store: &Path, args: &[&str]) -> (bool, serde_json::Value, String) {
    let mut all: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    all.push("--store".into());
    all.push(store.into());
    support::temper_json(store, &[], all)
}

#[test]
fn cli_forge_call_stats_promote_approve_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    let seed_file = |name: &str| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/seeds")
            .join(format!("{name}.json"))
            .to_string_lossy()
            .into_owned()
    };
    let slugify = seed_file("slugify");

    // No judge configured: refused, and the reason says so.
    let (ok, doc, _) = cli(store, &["forge", &slugify]);
    assert!(!ok);
    assert_eq!(doc["success"], false);
    assert_eq!(doc["stage"], "judge");
    assert!(
        doc["errors"][0]
            .as_str()
            .unwrap()
            .contains("no judge configured"),
        "{doc}"
    );

    let (ok, doc, err) = cli(store, &["forge", &slugify, "--judge", "rules"]);
    assert!(ok, "{doc} {err}");
    assert_eq!(
        (doc["success"].clone(), doc["verdict"]["approved"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(doc["tool"]["tier"], "session");

    // The session tier outlives the process (until `session end`).
    let (ok, doc, _) = cli(store, &["tools"]);
    assert!(ok);
    assert_eq!(doc["tools"][0]["name"], "slugify");
    for text in ["Hello World", "A  b", "x", "Temper!", "Forge it"] {
        let input = json!({ "text": text }).to_string();
        let (ok, doc, err) = cli(store, &["call", "slugify", "--input", &input]);
        assert!(ok, "{doc} {err}");
        assert!(doc["output"]["slug"].is_string());
    }
    let (ok, doc, err) = cli(store, &["call", "slugify", "--input", "{\"txt\": 1}"]);
    assert!(!ok && doc["ok"] == false, "{doc}");
    assert!(err.contains("does not match inputSchema"), "{err}");
    let (ok, doc, _) = cli(store, &["stats", "slugify"]);
    assert!(ok);
    assert_eq!(
        (doc["totalCalls"].clone(), doc["successes"].clone()),
        (json!(6), json!(5))
    );

    // The store does not keep the source (only the process that forged
    // the tool had it): promotion asks for it.
    let (ok, _, err) = cli(store, &["promote", "slugify", "--judge", "rules"]);
    assert!(!ok && err.contains("pass it again"), "{err}");
    let source = dir.path().join("slugify.js");
    let Implementation::Sandbox { code, .. } = seed("slugify").implementation else {
        unreachable!()
    };
    std::fs::write(&source, code).unwrap();
    let (ok, doc, err) = cli(
        store,
        &[
            "promote",
            "slugify",
            "--judge",
            "rules",
            "--source",
            source.to_str().unwrap(),
        ],
    );
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["tool"]["tier"], "agent");
    let (ok, doc, err) = cli(
        store,
        &["approve", "slugify", "--by", "alice", "--note", "ok"],
    );
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["tool"]["tier"], "shared");
    let (ok, doc, _) = cli(
        store,
        &[
            "call",
            "slugify",
            "--input",
            "{\"text\": \"B C\"}",
            "--agent",
            "other",
        ],
    );
    assert!(ok);
    assert_eq!(doc["output"]["slug"], "b-c");

    let (ok, doc, _) = cli(store, &["audit", "verify"]);
    assert!(ok, "{doc}");
    let entries = doc["entries"].as_u64().unwrap();
    assert!(entries >= 6, "{doc}");

    // Edit one entry's payload behind the store's back (dropping the
    // append-only trigger first, as an attacker with the file would):
    // verify fails and names the entry.
    let db = rusqlite::Connection::open(store.join("temper.db")).unwrap();
    db.execute("DROP TRIGGER audit_no_update", []).unwrap();
    db.execute(
        "UPDATE audit SET payload = '{\"approved\":true}' WHERE seq = 1",
        [],
    )
    .unwrap();
    drop(db);
    let (ok, doc, err) = cli(store, &["audit", "verify"]);
    assert!(!ok && doc["ok"] == false, "{doc}");
    assert!(err.contains("seq 1"), "{err}");
}

/// Two `temper` processes on one session at once: neither loses the
/// other's tools or calls (the session tier is in the store).
#[test]
fn cli_processes_sharing_a_session_keep_each_others_tools_and_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().to_path_buf();
    let seed_file = |name: &str| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/seeds")
            .join(format!("{name}.json"))
            .to_string_lossy()
            .into_owned()
    };
    let forges: Vec<_> = ["slugify", "add_numbers"]
        .into_iter()
        .map(|name| {
            let (store, file) = (store.clone(), seed_file(name));
            std::thread::spawn(move || cli(&store, &["forge", &file, "--judge", "rules"]))
        })
        .collect();
    for f in forges {
        let (ok, doc, err) = f.join().unwrap();
        assert!(ok, "{doc} {err}");
    }
    let (ok, doc, _) = cli(&store, &["tools"]);
    assert!(ok);
    let mut names: Vec<&str> = doc["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["add_numbers", "slugify"], "{doc}");

    let callers: Vec<_> = (0..3)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                let input = json!({"a": i, "b": 1}).to_string();
                for _ in 0..2 {
                    let (ok, doc, err) = cli(&store, &["call", "add_numbers", "--input", &input]);
                    assert!(ok, "{doc} {err}");
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    let (ok, doc, err) = cli(&store, &["stats", "add_numbers"]);
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["totalCalls"], 6, "{doc}");
}
