//! Principals never share what is theirs, against a real `temper mcp
//! --http` process (issue 44): `tool_stats run_code` counts the caller's
//! agent's runs only; a 2026-07-28 session is its opener's (a JWT naming a
//! static token's session, and the reverse, are refused on every request,
//! not only the first; a JWT of the same agent without a session gets a
//! default session of its own); the per-token session cap counts both
//! revisions' sessions; a per-tool quota refuses its tool past the limit
//! while other tools answer, with `429`, `Retry-After` and `-32023` over
//! 2026-07-28 (`-32000` over the legacy revisions).
//!
//! Quota assertions that count calls hold within one minute window: a
//! test that would straddle a window's end waits for the next window
//! first ([`fresh_window`]).

use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_http::{Server, seed, token_entry};
use crate::mcp_jwt::{auth_config, file_jwks, good};
use crate::support::sse::sse_messages;

const V: &str = "2026-07-28";
const LEGACY: &str = "2025-06-18";

/// What the server answered.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) retry_after: Option<u64>,
    pub(crate) session: Option<String>,
    /// The JSON-RPC response (the last message), `Null` without one.
    pub(crate) body: Value,
}

impl Reply {
    pub(crate) fn result(&self) -> &Value {
        assert_eq!(self.status, 200, "{self:?}");
        assert!(self.body.get("error").is_none(), "{self:?}");
        &self.body["result"]
    }

    pub(crate) fn code(&self) -> Option<i64> {
        self.body["error"]["code"].as_i64()
    }
}

/// POSTs `message` as `token` to `url`: a 2026-07-28 request (routing
/// headers, `_meta`, in `session` when given) when `legacy_session` is
/// `None`, else a legacy one in that `Mcp-Session-Id` (`""`: none, for
/// `initialize`).
pub(crate) async fn post(
    url: &str,
    token: &str,
    method: &str,
    mut params: Value,
    session: Option<&str>,
    legacy_session: Option<&str>,
) -> Reply {
    let mut r = reqwest::Client::new()
        .post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    match legacy_session {
        None => {
            let mut meta = json!({
                "io.modelcontextprotocol/protocolVersion": V,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            });
            if let Some(s) = session {
                meta["dev.temper/session"] = json!(s);
            }
            params["_meta"] = meta;
            r = r
                .header("mcp-protocol-version", V)
                .header("mcp-method", method);
            if let Some(name) = params["name"].as_str() {
                r = r.header("mcp-name", name);
            }
        }
        Some("") => {}
        Some(sid) => {
            r = r
                .header("mcp-session-id", sid)
                .header("mcp-protocol-version", LEGACY);
        }
    }
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let resp = r.body(message.to_string()).send().await.expect("send");
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
    };
    let retry_after = header("retry-after").map(|v| v.parse().expect("Retry-After in seconds"));
    let session = header("mcp-session-id");
    let sse = header("content-type").is_some_and(|c| c.starts_with("text/event-stream"));
    let text = resp.text().await.unwrap();
    let body = if sse {
        sse_messages(&text).pop().unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    Reply {
        status,
        retry_after,
        session,
        body,
    }
}

/// Opens a legacy session as `token`; its id.
pub(crate) async fn initialize(url: &str, token: &str) -> Reply {
    let params = json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}});
    post(url, token, "initialize", params, None, Some("")).await
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

/// Waits, if need be, so that at least `secs` seconds of the current
/// minute window remain.
pub(crate) async fn fresh_window(secs: u64) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    let into = now.as_millis() % 60_000;
    if into + u128::from(secs) * 1000 > 60_000 {
        tokio::time::sleep(Duration::from_millis((60_000 - into) as u64 + 200)).await;
    }
}

/// The current minute window.
pub(crate) fn window() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        / 60_000
}

/// Asserts `r` is a quota refusal: `429`, `Retry-After` in 1..=60, the
/// error `code` with `data.retryAfterSeconds` equal to the header.
pub(crate) fn assert_rate_limited(r: &Reply, code: i64) {
    assert_eq!(r.status, 429, "{r:?}");
    let retry = r.retry_after.expect("Retry-After");
    assert!((1..=60).contains(&retry), "{r:?}");
    assert_eq!(r.code(), Some(code), "{r:?}");
    assert_eq!(r.body["error"]["data"]["retryAfterSeconds"], retry, "{r:?}");
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("quota exceeded"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_code_stats_are_the_callers_agents_only() {
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        token_entry("tok-a", "alice", "") + &token_entry("tok-b", "bob", ""),
    )
    .unwrap();
    let server = Server::start(store.path(), &["--tokens", tokens.to_str().unwrap()]);
    let url = server.url();
    let stats = || call("tool_stats", json!({"name": "run_code"}));

    let bob = initialize(&url, "tok-b").await.session.unwrap();
    let before = post(&url, "tok-b", "tools/call", stats(), None, Some(&bob)).await;
    let before = before.result()["structuredContent"].clone();
    assert_eq!(before["total_calls"], 0, "{before}");

    // Alice runs code over both revisions: two runs that work, one that
    // throws.
    let alice = initialize(&url, "tok-a").await.session.unwrap();
    for code in ["return 1;", "throw new Error('no');"] {
        let r = post(
            &url,
            "tok-a",
            "tools/call",
            call("run_code", json!({"code": code})),
            None,
            Some(&alice),
        )
        .await;
        r.result();
    }
    post(
        &url,
        "tok-a",
        "tools/call",
        call("run_code", json!({"code": "return 2;"})),
        None,
        None,
    )
    .await
    .result();

    let mine = post(&url, "tok-a", "tools/call", stats(), None, Some(&alice)).await;
    let mine = &mine.result()["structuredContent"];
    assert_eq!(mine["total_calls"], 3, "{mine}");
    assert_eq!(mine["successes"], 2, "{mine}");
    // The shape of a registered tool's stats.
    for field in ["success_rate", "avg_latency_ms", "p95_latency_ms"] {
        assert!(mine[field].is_number(), "{field}: {mine}");
    }

    // Bob's did not move, over either revision.
    let after = post(&url, "tok-b", "tools/call", stats(), None, Some(&bob)).await;
    assert_eq!(after.result()["structuredContent"], before);
    let modern = post(&url, "tok-b", "tools/call", stats(), None, None).await;
    assert_eq!(modern.result()["structuredContent"], before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jwt_and_a_static_token_never_share_a_2026_session() {
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let config = auth_config(dir.path(), &file_jwks(), "");
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(&tokens, token_entry("alice-static", "alice", "")).unwrap();
    let server = Server::start(
        store.path(),
        &[
            "--auth",
            "jwt",
            "--auth-config",
            config.to_str().unwrap(),
            "--tokens",
            tokens.to_str().unwrap(),
        ],
    );
    let url = server.url();
    let jwt = good("RS256", "alice");
    let list = |token: &str, session: &'static str| {
        let (url, token) = (url.clone(), token.to_string());
        async move { post(&url, &token, "tools/list", json!({}), Some(session), None).await }
    };
    let refused = |r: &Reply| {
        assert_eq!(r.status, 404, "{r:?}");
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("no such session"), "{message}");
        assert!(
            !message.contains("sha256") && !message.contains("jwt:"),
            "{message}"
        );
    };

    // The static token opens "s-static" and forges in it.
    let forged = post(
        &url,
        "alice-static",
        "tools/call",
        call("forge_tool", seed("slugify")),
        Some("s-static"),
        None,
    )
    .await;
    assert_eq!(forged.result()["isError"], false, "{forged:?}");
    // The JWT of the same agent naming it is refused, on every request
    // and every method (the session's tool is never reached).
    for _ in 0..3 {
        refused(&list(&jwt, "s-static").await);
        let r = post(
            &url,
            &jwt,
            "tools/call",
            call("slugify", json!({"text": "Stolen Tier"})),
            Some("s-static"),
            None,
        )
        .await;
        refused(&r);
        // Its opener still gets in, between the refusals.
        let mine = list("alice-static", "s-static").await;
        let names = mine.result()["tools"].to_string();
        assert!(names.contains("slugify"), "{names}");
    }

    // The reverse: the JWT's session, named by the static token.
    list(&jwt, "s-jwt").await.result();
    for _ in 0..3 {
        refused(&list("alice-static", "s-jwt").await);
        list(&jwt, "s-jwt").await.result();
    }

    // No session named: the static token forges in the agent's default
    // session; the JWT gets a default session of its own, without it.
    let forged = post(
        &url,
        "alice-static",
        "tools/call",
        call("forge_tool", seed("slugify")),
        None,
        None,
    )
    .await;
    assert_eq!(
        forged.result()["_meta"]["dev.temper/session"],
        "default",
        "{forged:?}"
    );
    for _ in 0..2 {
        let theirs = post(&url, &jwt, "tools/list", json!({}), None, None).await;
        let names = theirs.result()["tools"].to_string();
        assert!(!names.contains("slugify"), "{names}");
        refused(&list(&jwt, "default").await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_session_cap_counts_both_revisions() {
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        token_entry("tok-a", "alice", "") + &token_entry("tok-b", "bob", ""),
    )
    .unwrap();
    let server = Server::start(
        store.path(),
        &["--tokens", tokens.to_str().unwrap(), "--max-sessions", "4"],
    );
    let url = server.url();
    let list = |token: &'static str, session: String| {
        let url = url.clone();
        async move { post(&url, token, "tools/list", json!({}), Some(&session), None).await }
    };
    // Two legacy sessions, then two 2026-07-28 ones: the cap of 4.
    for _ in 0..2 {
        assert_eq!(initialize(&url, "tok-a").await.status, 200);
    }
    for i in 0..2 {
        list("tok-a", format!("m{i}")).await.result();
    }
    // A fifth of either revision is refused; those open still answer.
    let r = list("tok-a", "m-over".into()).await;
    assert_eq!(r.status, 429, "{r:?}");
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("every protocol revision's together"),
        "{r:?}"
    );
    let r = initialize(&url, "tok-a").await;
    assert_eq!(r.status, 429, "{r:?}");
    assert!(r.session.is_none());
    list("tok-a", "m1".into()).await.result();
    // Another token has a cap of its own.
    list("tok-b", "m0".into()).await.result();
    assert_eq!(initialize(&url, "tok-b").await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tool_quota_refuses_its_tool_while_others_answer() {
    let (store, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let tokens = dir.path().join("tokens.toml");
    let limits = "calls_per_minute = 8\ntool_calls_per_minute = { \"tool_stats\" = 2 }";
    std::fs::write(
        &tokens,
        token_entry("tok-a", "alice", limits) + &token_entry("tok-b", "bob", limits),
    )
    .unwrap();
    let server = Server::start(store.path(), &["--tokens", tokens.to_str().unwrap()]);
    let url = server.url();
    let stats = || call("tool_stats", json!({"name": "run_code"}));
    let run = || call("run_code", json!({"code": "return 1;"}));

    loop {
        fresh_window(40).await;
        let started = window();
        let legacy = initialize(&url, "tok-a").await.session.unwrap();
        // tool_stats: 2 a minute.
        for _ in 0..2 {
            post(&url, "tok-a", "tools/call", stats(), None, None)
                .await
                .result();
        }
        let r = post(&url, "tok-a", "tools/call", stats(), None, None).await;
        assert_rate_limited(&r, -32023);
        assert!(
            r.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("tool_stats 2 times per minute"),
            "{r:?}"
        );
        // Legacy: the same quota, the legacy error code.
        let r = post(&url, "tok-a", "tools/call", stats(), None, Some(&legacy)).await;
        assert_rate_limited(&r, -32000);
        // Another tool still answers, up to the token's 8 calls in all (the
        // refused calls used none).
        let mut ran = 0;
        let last = loop {
            let r = post(&url, "tok-a", "tools/call", run(), None, None).await;
            if r.status != 200 {
                break r;
            }
            r.result();
            ran += 1;
            assert!(ran <= 20, "never refused");
        };
        assert_rate_limited(&last, -32023);
        assert!(
            last.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("8 tools/call requests per minute"),
            "{last:?}"
        );
        if window() != started {
            continue;
        }
        assert_eq!(ran, 6, "8 calls in all, 2 of them tool_stats");
        // Other methods are not counted; another token's quota is its own.
        post(&url, "tok-a", "tools/list", json!({}), None, None)
            .await
            .result();
        post(&url, "tok-b", "tools/call", stats(), None, None)
            .await
            .result();
        break;
    }
}

#[test]
fn a_bad_tool_quota_names_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.toml");
    std::fs::write(
        &tokens,
        token_entry(
            "tok-a",
            "alice",
            "tool_calls_per_minute = { \"web.fetch\" = 0 }",
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_temper"))
        .args(["mcp", "--http", "127.0.0.1:0", "--store"])
        .arg(dir.path().join("store"))
        .arg("--tokens")
        .arg(&tokens)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tool_calls_per_minute.\"web.fetch\"") && err.contains("at least 1"),
        "{err}"
    );
}
