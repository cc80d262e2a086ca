//! Hostile probes of issue 14, each a defect found on the landed code:
//! results that look like success, capability errors that hide the
//! policy, fetch policy gaps, fetch messages cut short, and a
//! `Math.random()` frozen in the snapshot. Servers run on 127.0.0.1 only.

use crate::support;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use temper::capabilities::fetch::TransportOptions;
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeContext, InvokeError};
use temper::policy::{Capability, HostPolicy, ReadDir};
use temper::request::ForgeRequest;
use temper::store::Registry;
use temper::{CallFailure, Limits, RunError, Runtime, Tool};

use support::http::TestServer;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn runtime(policy: HostPolicy) -> Runtime {
    runtime_with(policy, TransportOptions::default())
}

fn runtime_with(policy: HostPolicy, transport: TransportOptions) -> Runtime {
    support::runtime_builder()
        .policy(policy)
        .limits(Limits::default())
        .transport(transport)
        .build()
        .expect("runtime")
}

async fn tool(rt: &Runtime, source: &str, allowlist: &[&str]) -> Tool {
    let artifact = rt.build(source).await.expect("build");
    let allowlist: Vec<String> = allowlist.iter().map(|s| s.to_string()).collect();
    rt.grant(&rt.tool(&artifact), &allowlist).expect("grant")
}

async fn failure(rt: &Runtime, tool: &Tool, input: &Value) -> CallFailure {
    match rt.call(tool, &input.to_string()).await {
        Ok(out) => panic!("{input}: expected a failure, got output {}", out.output),
        Err(f) => f,
    }
}

async fn output(rt: &Runtime, tool: &Tool, input: &Value) -> Value {
    let out = rt
        .call(tool, &input.to_string())
        .await
        .unwrap_or_else(|f| panic!("{input}: {f}"));
    serde_json::from_str(&out.output).unwrap()
}

fn forge_on(rt: Runtime, dir: &Path) -> Forge {
    Forge::builder(rt, Arc::new(Registry::open(dir).expect("store")))
        .judge(Arc::new(RulesJudge::standard()))
        .build()
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-1", "session-1")
}

fn sandbox(name: &str, code: &str, output_schema: Value, cases: &[Value]) -> ForgeRequest {
    let cases: Vec<Value> = cases.iter().map(|i| json!({"input": i})).collect();
    let doc = json!({
        "name": name,
        "description": format!("sandbox tool {name} for the hardening tests"),
        "inputSchema": {"type": "object"},
        "outputSchema": output_schema,
        "implementation": {"mode": "sandbox", "code": code, "allowlist": []},
        "testCases": cases,
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

// ---- results that look like success ------------------------------------------

/// (source, what the error must name)
const NOT_JSON: &[(&str, &str)] = &[
    (
        "function execute(input) { input.a + input.b; }",
        "execute() returned undefined",
    ),
    (
        "async function execute(input) { await null; }",
        "execute() returned undefined",
    ),
    (
        "function execute() { return function helper() {}; }",
        "execute() returned a function",
    ),
    (
        "function execute() { return Symbol('s'); }",
        "execute() returned a symbol",
    ),
    (
        "function execute() { return 10n ** 20n; }",
        "execute() returned a BigInt",
    ),
    (
        "function execute() { return { total: { value: 5n } }; }",
        "execute() returned a BigInt at $.total.value",
    ),
    (
        "function execute() { const o = { list: [1] }; o.list.push(o); return o; }",
        "execute() returned a cyclic value at $.list[1]",
    ),
    (
        "function execute() { return { toJSON() { return undefined; } }; }",
        "execute() returned undefined",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_json_cannot_represent_are_errors_naming_what_was_returned() {
    let rt = runtime(HostPolicy::deny_all());
    for (source, named) in NOT_JSON {
        let t = tool(&rt, source, &[]).await;
        let f = failure(&rt, &t, &json!({"a": 1, "b": 2})).await;
        assert!(
            matches!(&f.error, RunError::BadOutput { .. }),
            "{source}: {:?}",
            f.error
        );
        assert!(f.error.to_string().contains(named), "{source}: {}", f.error);
    }
    // JSON-representable results, including the ones JSON.stringify
    // shapes (dropped undefined members, toJSON, null), still succeed.
    for (source, expected) in [
        ("function execute() { return null; }", json!(null)),
        (
            "function execute() { return { a: 1, b: undefined }; }",
            json!({"a": 1}),
        ),
        (
            "function execute() { return [1, undefined]; }",
            json!([1, null]),
        ),
        (
            "function execute() { return new Date(0); }",
            json!("1970-01-01T00:00:00.000Z"),
        ),
        (
            "function execute() { const s = { v: 1 }; return [s, s]; }",
            json!([{"v": 1}, {"v": 1}]),
        ),
    ] {
        let t = tool(&rt, source, &[]).await;
        assert_eq!(output(&rt, &t, &json!({})).await, expected, "{source}");
    }
    // An error a getter or toJSON throws is the tool's own error, not a
    // result problem.
    let t = tool(
        &rt,
        "function execute() { return { get x() { throw new RangeError('from getter'); } }; }",
        &[],
    )
    .await;
    let f = failure(&rt, &t, &json!({})).await;
    assert!(
        matches!(&f.error, RunError::Js { error } if error.message == "RangeError: from getter"),
        "{:?}",
        f.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_returning_undefined_is_not_forged_even_with_an_open_output_schema() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(HostPolicy::deny_all()), dir.path());
    let request = sandbox(
        "forgot_return",
        "function execute(input) { const sum = input.a + input.b; }",
        json!({}),
        &[json!({"a": 1, "b": 2})],
    );
    let err = forge
        .forge(&request, &ctx())
        .await
        .map(|f| f.tool.name)
        .expect_err("a tool returning undefined must not be forged");
    assert_eq!(err.stage(), temper::forge::Stage::Test, "{err}");
    assert!(
        err.to_string().contains("execute() returned undefined"),
        "{err}"
    );
    assert!(forge.session_tools(&ctx()).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compose_step_returning_undefined_fails_the_run_naming_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(runtime(HostPolicy::deny_all()), dir.path());
    forge
        .forge(
            &sandbox(
                "sometimes",
                "function execute(input) { if (!input.skip) return { ok: true }; }",
                json!({"type": "object"}),
                &[json!({"skip": false})],
            ),
            &ctx(),
        )
        .await
        .unwrap();
    let doc = json!({
        "name": "uses_sometimes",
        "description": "compose over a step that sometimes returns nothing",
        "inputSchema": {"type": "object"},
        "outputSchema": {},
        "implementation": {"mode": "compose", "steps": [
            {"name": "maybe", "tool": "sometimes", "inputMapping": {"skip": "$input.skip"}},
        ]},
        "testCases": [{"input": {"skip": false}}],
    });
    forge
        .forge(&ForgeRequest::from_json(&doc.to_string()).unwrap(), &ctx())
        .await
        .unwrap();
    match forge
        .invoke("uses_sometimes", &json!({"skip": true}), &ctx())
        .await
    {
        Err(InvokeError::Run { failure, .. }) => match &failure.error {
            RunError::Step { step, message, .. } => {
                assert_eq!(&**step, "maybe");
                assert!(
                    message.contains("execute() returned undefined"),
                    "{message}"
                );
            }
            other => panic!("expected a step failure, got {other:?}"),
        },
        Err(other) => panic!("expected a run failure, got {other}"),
        Ok(out) => panic!("expected a run failure, got {}", out.output),
    }
}

#[test]
fn the_cli_prints_ok_false_for_a_tool_returning_undefined() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("forgot.js");
    std::fs::write(&file, "function execute(input) { input.x * 2; }\n").unwrap();
    let (success, doc, stderr) = support::temper_json(
        dir.path(),
        &[],
        ["run", file.to_str().unwrap(), "--input", r#"{"x": 2}"#],
    );
    assert!(!success, "exit status must say failure: {doc} {stderr}");
    assert_eq!(doc["ok"], json!(false), "{doc} {stderr}");
    assert_eq!(doc["error"]["kind"], json!("bad-output"), "{doc}");
    assert_eq!(doc["error"]["returned"], json!("undefined"), "{doc}");
    let message = doc["message"].as_str().unwrap_or_default();
    assert!(message.contains("execute() returned undefined"), "{doc}");
}

// ---- capability errors say what the policy did ----------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_read_file_without_the_grant_is_a_typed_capability_denial() {
    let rt = runtime(HostPolicy::deny_all());
    let t = tool(
        &rt,
        "function execute(input) { return fs.readFileSync(input.path, 'utf8'); }",
        &[],
    )
    .await;
    let f = failure(&rt, &t, &json!({"path": "/data/notes.txt"})).await;
    assert_eq!(
        f.error,
        RunError::CapabilityDenied {
            capability: "fs.readFile".into()
        }
    );
    // Caught, the tool sees the same wording and a Node-style code.
    let t = tool(
        &rt,
        r#"async function execute(input) {
  try { await fs.readFile(input.path); return 'read'; }
  catch (e) { return { message: e.message, code: e.code }; }
}"#,
        &[],
    )
    .await;
    assert_eq!(
        output(&rt, &t, &json!({"path": "/data/notes.txt"})).await,
        json!({"message": "capability not granted: fs.readFile", "code": "ECAPABILITY"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_caught_and_replaced_is_the_tools_own_error() {
    let rt = runtime(HostPolicy::deny_all());
    // The tool is refused fetch, catches it, and throws its own error with
    // the same words: that is a JS error, not the host's denial.
    let t = tool(
        &rt,
        r#"async function execute() {
  try { await fetch('https://api.example.test/'); } catch (e) { /* ignored */ }
  throw new Error('capability not granted: crypto');
}"#,
        &[],
    )
    .await;
    let f = failure(&rt, &t, &json!({})).await;
    assert!(
        matches!(&f.error, RunError::Js { error } if error.message == "Error: capability not granted: crypto"),
        "{:?}",
        f.error
    );
    // The refused call's own error, rethrown as is, is the denial.
    let t = tool(
        &rt,
        r#"async function execute() {
  try { crypto.randomUUID(); } catch (e) { await null; throw e; }
}"#,
        &[],
    )
    .await;
    assert_eq!(
        failure(&rt, &t, &json!({})).await.error,
        RunError::CapabilityDenied {
            capability: "crypto".into()
        }
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_paths_outside_the_grants_are_named_as_policy_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let granted = dir.path().join("granted");
    let evil = dir.path().join("granted-evil");
    std::fs::create_dir(&granted).unwrap();
    std::fs::create_dir(&evil).unwrap();
    std::fs::write(granted.join("in.txt"), "inside\n").unwrap();
    std::fs::write(evil.join("x"), "sibling secret").unwrap();
    std::fs::write(dir.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), granted.join("link-out")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", granted.join("link-abs")).unwrap();
    let mut policy = HostPolicy::deny_all();
    policy.allowed.insert(Capability::FsReadFile);
    policy.read_dirs.push(ReadDir {
        host: granted.clone(),
        guest: "/granted".into(),
    });
    let rt = runtime(policy);
    let t = tool(
        &rt,
        r#"function execute(input) {
  try { return { ok: fs.readFileSync(input.path, 'utf8') }; }
  catch (e) { return { message: e.message, code: e.code }; }
}"#,
        &["fs.readFile"],
    )
    .await;
    assert_eq!(
        output(&rt, &t, &json!({"path": "/granted/in.txt"})).await,
        json!({"ok": "inside\n"})
    );
    for path in [
        "../../etc/passwd",
        "/granted-evil/x",
        "/granted/../granted-evil/x",
        "/granted/../secret.txt",
        "/etc/passwd",
        "/secret.txt",
        "/granted/link-out",
        "/granted/link-abs",
    ] {
        let out = output(&rt, &t, &json!({ "path": path })).await;
        assert_eq!(
            out["message"],
            json!(format!("path outside the granted directories: {path}")),
            "{path}: {out}"
        );
        assert_eq!(out["code"], json!("ERR_ACCESS_DENIED"), "{path}: {out}");
    }
    // A missing file inside the grant is still ENOENT.
    let out = output(&rt, &t, &json!({"path": "/granted/missing.txt"})).await;
    assert_eq!(out["code"], json!("ENOENT"), "{out}");
}

// ---- fetch ---------------------------------------------------------------------

fn overrides(names: &[&str]) -> TransportOptions {
    TransportOptions {
        resolve_overrides: names
            .iter()
            .map(|n| (n.to_string(), vec![LOOPBACK]))
            .collect::<HashMap<_, _>>(),
        ..TransportOptions::default()
    }
}

const FETCH_PROBE: &str = r#"
async function execute(input) {
  try {
    const res = await fetch(input.url);
    return { status: res.status, body: await res.text() };
  } catch (e) {
    return { error: String(e.message) };
  }
}"#;

async fn fetch_rt(rules: &str) -> (TestServer, Runtime, Tool, u16) {
    let server = TestServer::start().await;
    let port = server.port();
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&rules.replace("PORT", &port.to_string()))
        .expect("rules parse");
    policy.fetch.allow_private = true;
    let rt = runtime_with(
        policy,
        overrides(&["api.example.test", "x.cdn.example.test", "evil.test"]),
    );
    let t = tool(&rt, FETCH_PROBE, &["fetch"]).await;
    (server, rt, t, port)
}

async fn fetch_error(rt: &Runtime, t: &Tool, url: &str) -> String {
    let out = output(rt, t, &json!({ "url": url })).await;
    out["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{url} was fetched: {out}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_sees_the_url_exactly_as_the_tool_wrote_it() {
    let (server, rt, t, port) = fetch_rt("api.example.test:PORT,*.cdn.example.test:PORT").await;
    // The guest used to normalize these into allowed URLs before the host
    // checked them: percent-encoded hosts and a literal `*` label.
    for url in [
        format!("http://%61pi.example.test:{port}/json"),
        format!("http://api%2Eexample.test:{port}/json"),
        format!("http://*.cdn.example.test:{port}/json"),
    ] {
        let error = fetch_error(&rt, &t, &url).await;
        assert!(
            error.starts_with("invalid URL: ") || error.starts_with("invalid host: "),
            "{url}: {error}"
        );
    }
    assert!(server.requests().is_empty(), "{:?}", server.requests());
    // The plain spelling still works, and a fragment is not sent.
    let out = output(
        &rt,
        &t,
        &json!({"url": format!("http://api.example.test:{port}/json#frag")}),
    )
    .await;
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(server.requests()[0].path, "/json");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_urls_trailing_dots_and_bad_names_are_refused_before_the_network() {
    let (server, rt, t, port) = fetch_rt("api.example.test:PORT,*.cdn.example.test:PORT").await;
    let long = format!("http://api.example.test:{port}/?q={}", "a".repeat(9000));
    let error = fetch_error(&rt, &t, &long).await;
    assert!(
        error.contains("URL is 90") && error.contains("over the 8192-byte limit"),
        "{error}"
    );
    let error = fetch_error(&rt, &t, &format!("http://api.example.test.:{port}/json")).await;
    assert!(error.contains("trailing dot"), "{error}");
    let label = "a".repeat(64);
    let error = fetch_error(
        &rt,
        &t,
        &format!("http://{label}.cdn.example.test:{port}/json"),
    )
    .await;
    assert!(error.contains("longer than 63"), "{error}");
    assert!(server.requests().is_empty(), "{:?}", server.requests());

    // A rule naming the trailing-dot spelling allows it.
    let (server, rt, t, port) = fetch_rt("api.example.test.:PORT").await;
    let out = output(
        &rt,
        &t,
        &json!({"url": format!("http://api.example.test.:{port}/json")}),
    )
    .await;
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_refusals_keep_their_reason_whole_with_long_urls() {
    // 40 rules: the list in `host not allowed` is longer than 255 bytes.
    let many: Vec<String> = (0..40)
        .map(|i| format!("service-{i:02}.example.test:PORT"))
        .collect();
    let (_server, rt, t, port) = fetch_rt(&many.join(",")).await;
    let error = fetch_error(&rt, &t, &format!("http://evil.test:{port}/json")).await;
    assert!(
        error.starts_with("host not allowed: evil.test (allowed: service-00.example.test:"),
        "{error}"
    );
    assert!(
        error.ends_with(&format!("service-39.example.test:{port})")),
        "{error}"
    );
    // A connection failure to an allowed name with a long path: the URL is
    // shortened, the reason after it is kept.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port();
    drop(closed);
    let (_server, rt, t, _) = fetch_rt(&format!("api.example.test:{closed_port}")).await;
    let url = format!(
        "http://api.example.test:{closed_port}/{}",
        "very-long-path/".repeat(60)
    );
    let error = fetch_error(&rt, &t, &url).await;
    assert!(error.len() < 2048, "{error}");
    assert!(error.contains('…'), "the URL part is shortened: {error}");
    assert!(
        error.to_ascii_lowercase().contains("connect"),
        "the reason is kept: {error}"
    );
}

// ---- Math.random ---------------------------------------------------------------

/// Draws at the top level (frozen into the snapshot), then returns eight
/// more draws: 416 bits that two independent calls repeat with probability
/// ~2^-400 — a test that cannot pass by chance on frozen state.
const RANDOM_TOOL: &str = r#"
const atBuild = Math.random();
function execute() {
  const draws = [];
  for (let i = 0; i < 8; i++) draws.push(Math.random());
  return { atBuild, draws };
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn math_random_used_at_the_top_level_is_reseeded_for_every_call() {
    let rt = runtime(HostPolicy::deny_all());
    let artifact = rt.build(RANDOM_TOOL).await.unwrap();
    // Both paths: the warm-up path first, then a loaded (compiled) tool.
    let warm = rt.tool(&artifact);
    let loaded = rt.load(artifact.bytes.to_vec()).await.unwrap();
    let mut seen = Vec::new();
    for t in [&warm, &warm, &loaded, &loaded] {
        seen.push(output(&rt, t, &json!({})).await);
    }
    for (i, a) in seen.iter().enumerate() {
        // The top-level value is part of the artifact: the same every call.
        assert_eq!(a["atBuild"], seen[0]["atBuild"]);
        for b in &seen[i + 1..] {
            assert_ne!(a["draws"], b["draws"], "two calls drew the same numbers");
        }
    }
    // Deterministic mode still repeats, and follows its seed.
    let det = |seed| {
        support::runtime_builder()
            .policy(
                HostPolicy::deny_all()
                    .with_determinism(temper::policy::Determinism { seed, epoch_ms: 0 }),
            )
            .build()
            .unwrap()
    };
    let (a, b) = (det(7), det(8));
    let ta = a.load(artifact.bytes.to_vec()).await.unwrap();
    let tb = b.load(artifact.bytes.to_vec()).await.unwrap();
    let first = output(&a, &ta, &json!({})).await;
    assert_eq!(output(&a, &ta, &json!({})).await, first);
    assert_ne!(output(&b, &tb, &json!({})).await["draws"], first["draws"]);
}
