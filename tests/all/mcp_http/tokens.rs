//! Bearer tokens and agent isolation over HTTP (hostile: missing, wrong and
//! revoked tokens, another agent's tools, sessions and stats, quotas,
//! concurrency caps), and a token's `tools` list narrowing the hub tools.

use crate::support;
use temper::forge::builtins::BUILTIN_TOOL_NAMES;

use serde_json::json;
use support::sse::sse_messages;

use super::{Server, renamed, root, seed, sha256_hex, spin_request, token_entry};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_decide_the_agent_and_agents_are_isolated() {
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    let all = [
        token_entry("alice-secret-1", "alice", ""),
        token_entry("bob-secret-2", "bob", ""),
        token_entry("quota-secret-3", "carol", "calls_per_minute = 3"),
        token_entry(
            "single-secret-4",
            "dave",
            "max_concurrent = 1\ntiers = [\"session\"]",
        ),
        token_entry("alice-session-5", "alice", "tiers = [\"session\"]"),
    ];
    std::fs::write(&tokens, all.concat()).unwrap();
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
            "--timeout-ms",
            "3000",
            "--max-sessions",
            "1",
        ],
    );

    // No token, a wrong one, another scheme, the stored hash itself: 401,
    // all alike, with no detail.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
    let mut refusals = Vec::new();
    for auth in [
        None,
        Some("Bearer wrong".to_string()),
        Some("Basic YWxpY2U6eA==".to_string()),
        Some(format!("Bearer {}", sha256_hex("alice-secret-1"))),
        Some(format!("Bearer sha256:{}", sha256_hex("alice-secret-1"))),
        Some("Bearer ".to_string()),
    ] {
        let client = reqwest::Client::new();
        let mut r = client
            .post(server.url())
            .header("content-type", "application/json")
            .body(ping.to_string());
        if let Some(a) = &auth {
            r = r.header("authorization", a);
        }
        let resp = r.send().await.unwrap();
        let status = resp.status().as_u16();
        let www = resp.headers().get("www-authenticate").cloned();
        let body = resp.text().await.unwrap();
        assert_eq!(status, 401, "{auth:?}");
        assert_eq!(www.unwrap(), "Bearer");
        refusals.push(body);
    }
    assert!(refusals.iter().all(|b| b.is_empty()), "{refusals:?}");

    // Alice: a session tool, then an agent-tier tool (promoted), and one
    // more session tool.
    let mut alice = server.client(Some("alice-secret-1"));
    alice.open().await;
    alice.forge(seed("slugify")).await;
    let r = alice.call("slugify", json!({"text": "A B"})).await;
    assert_eq!(r.result()["isError"], false);
    let p = alice.call("promote_tool", json!({"name": "slugify"})).await;
    let p = p.result();
    assert_eq!(p["isError"], false, "{p}");
    assert_eq!(p["structuredContent"]["tier"], "agent", "{p}");
    alice.forge(renamed(seed("slugify"), "alice_private")).await;
    assert_eq!(
        alice.tool_names().await,
        [
            "forge_tool",
            "delete_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "search_tools",
            "alice_private",
            "slugify"
        ]
    );

    // Bob sees none of it and can reach none of it; every answer is the
    // one a tool that does not exist gets.
    let mut bob = server.client(Some("bob-secret-2"));
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
    // A tool out of reach is answered as an unknown one: the same
    // protocol error (-32602), the same message but for the name.
    let nothing = bob.call("no_such_tool", json!({})).await;
    let nothing = &nothing.response()["error"];
    assert_eq!(nothing["code"], -32602, "{nothing}");
    for name in ["slugify", "alice_private"] {
        let r = bob.call(name, json!({"text": "x"})).await;
        let err = &r.response()["error"];
        assert_eq!(err["code"], -32602, "{err}");
        assert_eq!(
            err["message"].as_str().unwrap().replace(name, "NAME"),
            nothing["message"]
                .as_str()
                .unwrap()
                .replace("no_such_tool", "NAME"),
            "{err}"
        );
        let s = bob.call("tool_stats", json!({"name": name})).await;
        assert_eq!(s.result()["isError"], true, "{:?}", s.result());
        assert!(!s.body.contains("total_calls"), "{}", s.body);
        let p = bob.call("promote_tool", json!({"name": name})).await;
        assert_eq!(p.result()["isError"], true, "{:?}", p.result());
    }
    // Bob cannot smuggle another identity in the messages either.
    let r = bob
        .rpc(
            "tools/call",
            json!({"name": "slugify", "arguments": {"text": "x"}, "_meta": {"agent_id": "alice"}, "agent_id": "alice"}),
        )
        .await;
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");

    // Alice's own token limited to the session tier: her agent-tier tool
    // is neither listed nor callable, and no pipeline reaches it.
    let mut limited = server.client(Some("alice-session-5"));
    limited.open().await;
    assert_eq!(
        limited.tool_names().await,
        [
            "forge_tool",
            "delete_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "search_tools"
        ]
    );
    let r = limited.call("slugify", json!({"text": "x"})).await;
    assert_eq!(r.response()["error"]["code"], -32602, "{r:?}");
    let pipeline = json!({
        "name": "via_pipeline",
        "description": "Reaches slugify through a pipeline",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [{"name": "s", "tool": "slugify", "inputMapping": {"text": "$input.text"}}]},
        "testCases": [{"input": {"text": "A B"}, "expectedOutput": {"slug": "a-b"}}],
    });
    let r = limited.call("forge_tool", pipeline.clone()).await;
    let r = r.result();
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(r["structuredContent"]["stage"], "validate", "{r}");
    // The same pipeline with every tier allowed is forged (the refusal was
    // the tier's, not the pipeline's).
    let r = alice.call("forge_tool", pipeline).await;
    assert_eq!(r.result()["isError"], false, "{:?}", r.result());

    // Alice's session id with Bob's token: as if it did not exist.
    let alice_sid = alice.session.clone().unwrap();
    let bob_sid = bob.session.replace(alice_sid.clone());
    assert_eq!(bob.rpc("tools/list", json!({})).await.status, 404);
    assert_eq!(bob.call("slugify", json!({"text": "x"})).await.status, 404);
    assert_eq!(
        bob.send(
            bob.request(reqwest::Method::GET)
                .header("accept", "text/event-stream")
        )
        .await
        .status,
        404
    );
    assert_eq!(
        bob.send(bob.request(reqwest::Method::DELETE)).await.status,
        404
    );
    bob.session = bob_sid;
    // ...and without a token at all.
    let mut anon = server.client(None);
    anon.session = Some(alice_sid);
    assert_eq!(anon.rpc("tools/list", json!({})).await.status, 401);
    // Alice's session is untouched.
    assert_eq!(alice.tool_names().await.len(), BUILTINS + 3);
    let s = alice
        .call("tool_stats", json!({"name": "alice_private"}))
        .await;
    assert_eq!(s.result()["isError"], false);

    // One session per token here: a second is refused until the first ends.
    let mut bob2 = server.client(Some("bob-secret-2"));
    let r = bob2
        .rpc("initialize", json!({"protocolVersion": "2025-06-18"}))
        .await;
    assert_eq!(r.status, 429, "{r:?}");
    assert!(
        r.response()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sessions")
    );
    bob2.open_after_delete_of(&mut bob).await;

    // Bob forging a tool of the same name gets his own, not Alice's.
    bob.forge(renamed(seed("slugify"), "alice_private")).await;
    let r = bob.call("alice_private", json!({"text": "B O B"})).await;
    assert_eq!(r.result()["structuredContent"], json!({"slug": "b-o-b"}));
    let s = alice
        .call("tool_stats", json!({"name": "alice_private"}))
        .await;
    assert_eq!(s.result()["structuredContent"]["total_calls"], 0);

    // A token limited to the session tier: no promotion offered or allowed.
    let mut dave = server.client(Some("single-secret-4"));
    dave.open().await;
    assert_eq!(
        dave.tool_names().await,
        [
            "forge_tool",
            "delete_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "search_tools"
        ]
    );
    dave.forge(spin_request()).await;
    let p = dave.call("promote_tool", json!({"name": "spin"})).await;
    assert_eq!(p.response()["error"]["code"], -32602, "{p:?}");

    // Its concurrency cap of 1: while a call is in flight (its first
    // progress event has arrived), a second request is refused with 429.
    let slow = dave.message(
        "tools/call",
        json!({"name": "spin", "arguments": {"spin": true}, "_meta": {"progressToken": "p"}}),
    );
    let mut resp = dave
        .request(reqwest::Method::POST)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(slow.to_string())
        .send()
        .await
        .unwrap();
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&first).contains("notifications/progress"),
        "{first:?}"
    );
    let refused = dave.call("spin", json!({"spin": false})).await;
    assert_eq!(refused.status, 429, "{refused:?}");
    assert!(
        refused.response()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in flight")
    );
    let mut rest = String::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    let done = sse_messages(&rest);
    assert_eq!(done.last().unwrap()["result"]["isError"], true, "{rest}");
    // Once it is done, calls go through again.
    let ok = dave.call("spin", json!({"spin": false})).await;
    assert_eq!(ok.result()["structuredContent"], json!({"spun": false}));

    // A quota of 3 calls a minute: the 4th is refused with Retry-After;
    // listing is not a call.
    let mut carol = server.client(Some("quota-secret-3"));
    carol.open().await;
    for _ in 0..3 {
        let r = carol.call("no_such_tool", json!({})).await;
        assert_eq!(r.status, 200);
    }
    let r = carol.call("no_such_tool", json!({})).await;
    assert_eq!(r.status, 429, "{r:?}");
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(
        r.response()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("quota")
    );
    assert_eq!(carol.tool_names().await.len(), BUILTINS);

    // Revocation: Alice's token leaves the file; her next request is 401,
    // Bob's still work.
    std::fs::write(
        &tokens,
        [&all[1], &all[2], &all[3]].map(|s| s.as_str()).concat(),
    )
    .unwrap();
    assert_eq!(alice.rpc("tools/list", json!({})).await.status, 401);
    let mut fresh = server.client(Some("alice-secret-1"));
    assert_eq!(
        fresh
            .rpc("initialize", json!({"protocolVersion": "2025-06-18"}))
            .await
            .status,
        401
    );
    assert_eq!(bob.tool_names().await.len(), BUILTINS + 1);
    // A broken file fails closed.
    std::fs::write(&tokens, "this is not toml [").unwrap();
    assert_eq!(bob.rpc("tools/list", json!({})).await.status, 401);
    std::fs::write(&tokens, all[1].as_str()).unwrap();
    assert_eq!(bob.tool_names().await.len(), BUILTINS + 1);

    // Alice's agent-tier tool is still hers: a new token for her sees it.
    let mut file = all[1].clone();
    file.push_str(&token_entry("alice-secret-new", "alice", ""));
    std::fs::write(&tokens, file).unwrap();
    let mut alice2 = server.client(Some("alice-secret-new"));
    alice2.open().await;
    assert_eq!(
        alice2.tool_names().await,
        [
            "forge_tool",
            "delete_tool",
            "promote_tool",
            "tool_stats",
            "run_code",
            "describe_tools",
            "search_tools",
            "slugify"
        ]
    );
}

/// A token's `tools` narrows the hub tools the host policy allows: a hub
/// tool its token does not list is invisible to that agent (not listed,
/// not callable, refused as a compose step), and visible to another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_tools_follow_the_tokens_tools_list() {
    let python = root().join("target/mcp-venv/bin/python");
    if !python.exists() {
        assert_ne!(
            std::env::var("TEMPER_REQUIRE_MCP_PY").as_deref(),
            Ok("1"),
            "TEMPER_REQUIRE_MCP_PY=1 but no {}",
            python.display()
        );
        eprintln!("SKIPPED hub_tools_follow_the_tokens_tools_list: no SDK venv");
        return;
    }
    let store = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    let all = [
        token_entry("hub-alice-1", "alice", ""),
        token_entry("hub-bob-2", "bob", "tools = [\"github.*\"]"),
    ];
    std::fs::write(&tokens, all.concat()).unwrap();
    let script = root().join("tests/fixtures/hub/upstream_server.py");
    let tools = dir.path().join("tools.toml");
    std::fs::write(
        &tools,
        format!(
            "[upstream.search]\ncommand = [{:?}, {:?}]\ntools = [\"web_search\"]\n",
            python.display().to_string(),
            script.display().to_string()
        ),
    )
    .unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[tools]\nallow = [\"web_search\"]\n").unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--tokens",
            tokens.to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    let mut alice = server.client(Some("hub-alice-1"));
    alice.open().await;
    assert!(alice.tool_names().await.contains(&"web_search".to_string()));
    let a = alice
        .call("web_search", json!({"query": "q", "limit": 1}))
        .await;
    assert_eq!(
        a.result()["structuredContent"]["results"][0]["title"],
        "q #0"
    );

    let mut bob = server.client(Some("hub-bob-2"));
    bob.open().await;
    assert!(!bob.tool_names().await.contains(&"web_search".to_string()));
    let a = bob.call("web_search", json!({"query": "q"})).await;
    assert_eq!(a.response()["error"]["code"], json!(-32602), "{a:?}");
    let request = json!({
        "name": "bob_search",
        "description": "Searches.",
        "inputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [
            {"name": "s", "tool": "web_search", "inputMapping": {"query": "$input.q"}}
        ]},
        "testCases": [{"input": {"q": "x"}}]
    });
    let a = bob.call("forge_tool", request).await;
    let text = a.body.clone();
    assert!(
        text.contains("web_search") && text.contains("is not callable by agent"),
        "{text}"
    );
}

/// The built-in tools every listing holds.
const BUILTINS: usize = BUILTIN_TOOL_NAMES.len();
