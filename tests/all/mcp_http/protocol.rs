//! The Streamable HTTP protocol of `temper mcp --http`: sessions, JSON and
//! SSE answers, the GET stream, DELETE, idle sessions ending, and the
//! server refusing to start unsafely.

use std::process::{Command, Stdio};

use serde_json::json;

use super::{HANG, Server, eventually, root, seed, session_deletions, text_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streamable_http_protocol() {
    let store = tempfile::tempdir().unwrap();
    let server = Server::start(store.path(), &[]);
    let mut c = server.client(None);

    // Requests before initialize, or with an unknown session.
    let a = c.rpc("tools/list", json!({})).await;
    assert_eq!(a.status, 400, "{a:?}");
    c.session = Some("0".repeat(32));
    let a = c.rpc("tools/list", json!({})).await;
    assert_eq!(a.status, 404, "{a:?}");
    c.session = None;

    let init = c.open().await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["capabilities"]["tools"]["listChanged"], true);
    assert_eq!(
        c.tool_names().await,
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
    let mut stream = c.open_stream().await;

    // A forge with a progress token: an SSE answer with the progress steps
    // (list_changed goes to the GET stream).
    let forge = c.message(
        "tools/call",
        json!({"name": "forge_tool", "arguments": seed("slugify"), "_meta": {"progressToken": 7}}),
    );
    let a = c.post(&forge).await;
    assert!(a.is_sse(), "{a:?}");
    let forge_answer_headers = a.headers.clone();
    let r = a.result();
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["tool"]["name"], "slugify");
    let steps: Vec<u64> = a
        .notes()
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "notifications/progress", "{n}");
            assert_eq!(n["params"]["progressToken"], 7);
            n["params"]["progress"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(steps, [0, 1, 2, 3, 4, 5]);
    let note = tokio::time::timeout(HANG, stream.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");

    // JSON answers when the client accepts only JSON.
    let m = c.message(
        "tools/call",
        json!({"name": "slugify", "arguments": {"text": "Über HTTP"}}),
    );
    let a = c.post_as(&m, "application/json").await;
    assert!(!a.is_sse());
    assert_eq!(a.result()["structuredContent"], json!({"slug": "ber-http"}));
    // A JSON answer is sent whole: its length in `content-length`, not
    // chunked (a client reads it in one go); an SSE answer streams.
    assert_eq!(
        a.headers.get("content-length").map(|v| v.to_str().unwrap()),
        Some(a.body.len().to_string().as_str()),
        "{:?}",
        a.headers
    );
    assert!(
        a.headers.get("transfer-encoding").is_none(),
        "{:?}",
        a.headers
    );
    assert!(forge_answer_headers.get("content-length").is_none());

    // The defect: an error result carries no structuredContent.
    let a = c.call("slugify", json!({"words": 3})).await;
    let r = a.result();
    assert_eq!(r["isError"], true, "{r}");
    assert!(r.get("structuredContent").is_none(), "{r}");
    assert_eq!(text_json(r)["stage"], "invoke");

    // Protocol errors.
    let bad = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.response()["error"]["code"], -32700);
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "text/plain")
                .body("{}"),
        )
        .await;
    assert_eq!(a.status, 415);
    let a = c
        .send(
            c.request(reqwest::Method::GET)
                .header("accept", "application/json"),
        )
        .await;
    assert_eq!(a.status, 406);
    let a = c.send(c.request(reqwest::Method::PUT)).await;
    assert_eq!(a.status, 405);
    let a = c
        .send(c.client.get(format!("http://{}/other", server.addr)))
        .await;
    assert_eq!(a.status, 404);
    let a = c
        .send(
            c.request(reqwest::Method::POST)
                .header("content-type", "application/json")
                .header("mcp-protocol-version", "1999-01-01")
                .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string()),
        )
        .await;
    assert_eq!(a.status, 400);
    // resources/list is served (the hub's upstream resources; none here),
    // an unknown method is not.
    let a = c.rpc("resources/list", json!({})).await;
    assert_eq!(a.response()["result"]["resources"], json!([]));
    let a = c.rpc("no/such/method", json!({})).await;
    assert_eq!(a.response()["error"]["code"], -32601);

    // DNS rebinding: a foreign Origin or Host is refused; loopback origins pass.
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    for (name, value, status) in [
        ("origin", "http://evil.example", 403),
        ("origin", "null", 403),
        ("host", "evil.example:80", 403),
        ("origin", "http://localhost:3000", 200),
        ("origin", "http://127.0.0.1", 200),
    ] {
        let a = c
            .send(
                c.request(reqwest::Method::POST)
                    .header("content-type", "application/json")
                    .header(name, value)
                    .body(ping.to_string()),
            )
            .await;
        assert_eq!(a.status, status, "{name}: {value}: {a:?}");
    }

    // DELETE ends the session and discards its tier.
    let a = c.send(c.request(reqwest::Method::DELETE)).await;
    assert_eq!(a.status, 204);
    let a = c.rpc("tools/list", json!({})).await;
    assert_eq!(a.status, 404);
    // The GET stream ends with it.
    assert!(
        tokio::time::timeout(HANG, stream.recv())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        session_deletions(store.path()),
        [("default".to_string(), "slugify".to_string())]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_end() {
    let store = tempfile::tempdir().unwrap();
    let server = Server::start(store.path(), &["--session-idle-secs", "3"]);
    let mut c = server.client(None);
    c.open().await;
    c.forge(seed("slugify")).await;
    // Nothing more: the session idles out and its tier is discarded.
    let path = store.path().to_path_buf();
    eventually("the idle session's tier is discarded", || {
        !session_deletions(&path).is_empty()
    })
    .await;
    assert_eq!(c.rpc("ping", json!({})).await.status, 404);
    assert_eq!(
        session_deletions(store.path()),
        [("default".to_string(), "slugify".to_string())]
    );
}

#[test]
fn refuses_to_start_unsafely() {
    let store = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--store"])
            .arg(store.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // A non-loopback address without tokens: refused before binding.
    let (ok, err) = run(&["--http", "0.0.0.0:0"]);
    assert!(!ok);
    assert!(
        err.contains("refusing to listen on 0.0.0.0:0 without --tokens"),
        "{err}"
    );
    // A tokens file that stores a plain token: refused, naming the entry.
    let bad = root().join("host/mcp/testdata/tokens/bad_plain_token.toml");
    let (ok, err) = run(&["--http", "127.0.0.1:0", "--tokens", bad.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("bad key \"alice-token\""), "{err}");
}
