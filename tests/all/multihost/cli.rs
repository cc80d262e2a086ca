//! The CLI's store URLs and state directories: values that are not a
//! store refused by name (the password never printed), and where each
//! store keeps its state.

use crate::support;

use std::path::{Path, PathBuf};

use serde_json::json;
use temper::store::StoreLocation;

use super::{shared_stores, temper_cli};

#[test]
fn cli_store_urls_and_state_dirs() {
    // Values that are not a store: refused by name, the password never
    // printed.
    let cwd = tempfile::tempdir().unwrap();
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("postgres://temper:hunter2@127.0.0.1:{closed_port}/temper");
    for (store, expect) in [
        (
            "mysql://temper:hunter2@127.0.0.1/x",
            "unsupported URL scheme \"mysql\"",
        ),
        ("postgres://temper:hunter2@127.0.0.1", "no database name"),
        (
            "postgresql://temper:hunter2@127.0.0.1:notaport/x",
            "bad PostgreSQL URL",
        ),
        (
            unreachable.as_str(),
            &*format!("server 127.0.0.1:{closed_port}"),
        ),
    ] {
        for args in [
            vec!["tools", "--store", store],
            vec!["mcp", "--store", store],
        ] {
            let (ok, _, stderr) = support::temper_json(cwd.path(), &[], &args);
            assert!(!ok, "{args:?}");
            assert!(stderr.contains(expect), "{args:?}: {stderr}");
            assert!(!stderr.contains("hunter2"), "{args:?} leaks: {stderr}");
        }
        // $TEMPER_STORE is read the same way.
        let (ok, _, stderr) =
            support::temper_json(cwd.path(), &[("TEMPER_STORE", store.as_ref())], ["tools"]);
        assert!(!ok && stderr.contains(expect), "{stderr}");
    }

    // Two hosts on one store, each with its state dir: a session tool is
    // in the store (both hosts see the session); an imported agent tool is
    // everyone's.
    for shared in shared_stores("cli_store_urls_and_state_dirs") {
        let label = shared.label;
        let (host_a, host_b) = (shared.scratch().join("a"), shared.scratch().join("b"));
        let on = |host: &Path, args: &[&str]| {
            let mut all = args.to_vec();
            all.extend(["--state-dir", host.to_str().unwrap()]);
            temper_cli(&shared, &all)
        };
        let request = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/seeds/slugify.json");
        let (ok, doc, stderr) = on(
            &host_a,
            &["forge", request.to_str().unwrap(), "--judge", "rules"],
        );
        assert!(ok, "{label}: {doc} {stderr}");
        assert!(
            !host_a.join("sessions").exists(),
            "{label}: no session file: the session is in the store"
        );
        let listed = |host: &Path| -> Vec<(String, String)> {
            let (ok, doc, stderr) = on(host, &["tools"]);
            assert!(ok, "{stderr}");
            doc["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    (
                        t["name"].as_str().unwrap().to_string(),
                        t["tier"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        };
        assert_eq!(listed(&host_a), [("slugify".into(), "session".into())]);
        assert_eq!(
            listed(&host_b),
            [("slugify".into(), "session".into())],
            "{label}: the session is in the store"
        );
        // Exported from A's session, imported on B into the agent tier:
        // both hosts list and call it.
        let file = shared.scratch().join("slugify.wasm");
        let (ok, _, stderr) = on(
            &host_a,
            &["export", "slugify", "-o", file.to_str().unwrap()],
        );
        assert!(ok, "{stderr}");
        let (ok, _, stderr) = on(
            &host_b,
            &[
                "import",
                file.to_str().unwrap(),
                "--tier",
                "agent",
                "--judge",
                "rules",
                "--session",
                "other",
            ],
        );
        assert!(ok, "{label}: {stderr}");
        // The session tool still comes first (each name once).
        assert_eq!(listed(&host_b), [("slugify".into(), "session".into())]);
        assert_eq!(listed(&host_a), [("slugify".into(), "session".into())]);
        for host in [&host_a, &host_b] {
            let (ok, doc, stderr) = on(host, &["call", "slugify", "--input", r#"{"text": "X Y"}"#]);
            assert!(ok, "{label}: {stderr}");
            assert_eq!(doc["output"], json!({"slug": "x-y"}));
        }
        let (ok, _, stderr) = on(&host_a, &["session", "end"]);
        assert!(ok, "{stderr}");
        assert_eq!(listed(&host_a), [("slugify".into(), "agent".into())]);

        // Without --state-dir: the store directory, or for a database a
        // directory per database under the platform data dir. That is where
        // a session file an older `temper` wrote is looked for (and moved
        // into the store): a damaged one there is reported.
        let xdg = shared.scratch().join("xdg");
        let expected = StoreLocation::parse(&shared.location)
            .unwrap()
            .default_state_dir()
            .unwrap();
        let expected = match shared.label {
            "sqlite" => expected,
            _ => xdg.join(expected.strip_prefix(dirs_data_dir()).unwrap()),
        };
        let mut h = blake3::Hasher::new();
        h.update(b"default\0default-dir");
        let legacy = expected
            .join("sessions")
            .join(format!("{}.json", &h.finalize().to_hex()[..32]));
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        std::fs::write(&legacy, "{ not a session").unwrap();
        let (ok, _, stderr) = support::temper_json(
            shared.scratch(),
            &[("XDG_DATA_HOME", xdg.as_os_str())],
            [
                "forge",
                request.with_file_name("add_numbers.json").to_str().unwrap(),
                "--judge",
                "rules",
                "--session",
                "default-dir",
                "--store",
                &shared.location,
            ],
        );
        assert!(
            !ok && stderr.contains("is damaged") && stderr.contains(&legacy.display().to_string()),
            "{label}: the legacy session file in {} is read: {stderr}",
            expected.display()
        );
    }
}

/// This process's platform data dir (the test's child gets another one
/// through `XDG_DATA_HOME`).
fn dirs_data_dir() -> PathBuf {
    StoreLocation::parse("postgres://u@h/x")
        .unwrap()
        .default_state_dir()
        .unwrap()
        .ancestors()
        .nth(3)
        .unwrap()
        .to_path_buf()
}
