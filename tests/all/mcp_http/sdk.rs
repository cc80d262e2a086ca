//! The official TypeScript and Python SDK clients against `temper mcp`,
//! over stdio and Streamable HTTP.

use crate::support;

use std::process::Command;

use support::cache_dir;

use super::{has_ts_sdk, python, root, sdk_server, session_deletions};

#[test]
fn official_typescript_sdk_client_stdio() {
    if !has_ts_sdk() {
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let status = Command::new("node")
        .arg(root().join("tests/mcp-ts/client.mjs"))
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_temper"))
        .arg(store.path())
        .arg(cache_dir())
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run node");
    assert!(
        status.success(),
        "tests/mcp-ts/client.mjs stdio failed: {status}"
    );
    assert_eq!(
        session_deletions(store.path()),
        [("default".to_string(), "slugify".to_string())]
    );
}

#[test]
fn official_typescript_sdk_client_http() {
    if !has_ts_sdk() {
        return;
    }
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = sdk_server(store.path(), dir.path());
    let status = Command::new("node")
        .arg(root().join("tests/mcp-ts/client.mjs"))
        .arg("http")
        .arg(server.url())
        .arg("sdk-token-1")
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run node");
    assert!(
        status.success(),
        "tests/mcp-ts/client.mjs http failed: {status}"
    );
    // The client ended its session (DELETE): the tier is gone.
    assert_eq!(
        session_deletions(store.path()),
        [("sdk".to_string(), "slugify".to_string())]
    );
}

#[test]
fn official_python_sdk_client_http() {
    let Some(python) = python() else { return };
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let server = sdk_server(store.path(), dir.path());
    let status = Command::new(python)
        .arg(root().join("tests/mcp_client.py"))
        .arg("http")
        .arg(server.url())
        .arg("sdk-token-1")
        .arg(root().join("tests/fixtures/seeds/slugify.json"))
        .status()
        .expect("run tests/mcp_client.py");
    assert!(
        status.success(),
        "tests/mcp_client.py http failed: {status}"
    );
    let path = store.path().to_path_buf();
    let deleted = session_deletions(&path);
    assert_eq!(deleted, [("sdk".to_string(), "slugify".to_string())]);
}
