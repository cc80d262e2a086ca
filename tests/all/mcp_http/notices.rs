//! Notifications between sessions over HTTP: the shared tier and
//! promotions announced to the sessions that see them.

use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::{HANG, Server, seed, token_entry};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shared_tier_and_promotion_notices() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        [
            token_entry("alice-t", "alice", ""),
            token_entry("bob-t", "bob", "tiers = [\"session\", \"agent\"]"),
            token_entry("carol-t", "carol", ""),
        ]
        .concat(),
    )
    .unwrap();
    let config = dir.path().join("forge.json");
    std::fs::write(
        &config,
        r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
    )
    .unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--forge-config",
            config.to_str().unwrap(),
        ],
    );

    // Two sessions of Alice: a promotion in one is announced in the other
    // (the tool is now in the agent tier both see).
    let mut a1 = server.client(Some("alice-t"));
    let mut a2 = server.client(Some("alice-t"));
    a1.open().await;
    a2.open().await;
    let mut a2_stream = a2.open_stream().await;
    a1.forge(seed("slugify")).await;
    assert_eq!(
        a2.tool_names().await.len(),
        7,
        "a session tool is not shared"
    );
    let r = a1.call("slugify", json!({"text": "x y"})).await;
    assert_eq!(r.result()["isError"], false);
    let p = a1.call("promote_tool", json!({"name": "slugify"})).await;
    assert_eq!(p.result()["isError"], false, "{:?}", p.result());
    let note = tokio::time::timeout(HANG, a2_stream.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    assert!(a2.tool_names().await.contains(&"slugify".to_string()));

    // A person approves it for every agent (the shared tier).
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args([
            "approve", "slugify", "--by", "reviewer", "--agent", "alice", "--store",
        ])
        .arg(store.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The approval ran in another process: the server's poll of the audit
    // trail (every second by default) announces it to Alice's session.
    let note = tokio::time::timeout(Duration::from_secs(30), a2_stream.recv())
        .await
        .expect("list_changed after an approval made by another process")
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");

    // Carol may use the shared tier: she sees and calls it.
    let mut carol = server.client(Some("carol-t"));
    carol.open().await;
    assert!(carol.tool_names().await.contains(&"slugify".to_string()));
    let r = carol.call("slugify", json!({"text": "Shared Tool"})).await;
    assert_eq!(
        r.result()["structuredContent"],
        json!({"slug": "shared-tool"})
    );
    // Bob's token excludes the shared tier: not listed, not callable, not
    // reachable through a pipeline, no stats.
    let mut bob = server.client(Some("bob-t"));
    bob.open().await;
    assert_eq!(
        bob.tool_names().await,
        [
            "forge_tool",
            "delete_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "search_tools"
        ]
    );
    let r = bob.call("slugify", json!({"text": "x"})).await;
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    let s = bob.call("tool_stats", json!({"name": "slugify"})).await;
    assert_eq!(s.result()["isError"], true);
    let pipeline = json!({
        "name": "via_shared",
        "description": "Reaches slugify through a pipeline",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [{"name": "s", "tool": "slugify", "inputMapping": {"text": "$input.text"}}]},
        "testCases": [{"input": {"text": "A B"}, "expectedOutput": {"slug": "a-b"}}],
    });
    let r = bob.call("forge_tool", pipeline).await;
    assert_eq!(r.result()["isError"], true);
    assert_eq!(r.result()["structuredContent"]["stage"], "validate");
}
