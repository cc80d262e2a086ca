//! Code mode through the forge: sandbox tools that call tools (`tool:NAME`
//! grants, pinned in the manifest, judged by the names they use), never
//! widening (a callee's `fetch` stays the callee's), compose and code tools
//! nesting, export and import of a tool with callees, and `run_code` (one
//! body, tools of the caller, typed failures, counted). Hostile inputs
//! throughout: each names the guard it checks.

use crate::support::{self, ApproveAll, http::TestServer};

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::forge::code_mode::RunCodeError;
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{
    Forge, ForgeConfig, ForgeContext, ForgeError, Forged, ImportError, NativeToolSpec, Stage,
    ValidateError,
};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{ArtifactId, Registry, Tier};
use temper::{Limits, RunError, Runtime};

fn runtime_with(policy: HostPolicy, limits: Limits) -> Runtime {
    support::runtime_builder()
        .policy(policy)
        .limits(limits)
        .build()
        .expect("runtime")
}

fn forge_with(runtime: Runtime, dir: &Path, judge: Arc<dyn Judge>) -> Forge {
    Forge::builder(runtime, Arc::new(Registry::open(dir).expect("store")))
        .judge(judge)
        .build()
}

fn rules() -> Arc<dyn Judge> {
    Arc::new(RulesJudge::standard())
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-1", "session-1")
}

/// A sandbox request with one test case per input.
fn sandbox(name: &str, code: &str, allowlist: &[&str], cases: &[Value]) -> ForgeRequest {
    let cases: Vec<Value> = cases.iter().map(|i| json!({"input": i})).collect();
    let doc = json!({
        "name": name,
        "description": format!("sandbox tool {name} for the tests"),
        "inputSchema": {"type": "object"},
        "outputSchema": {},
        "implementation": {"mode": "sandbox", "code": code, "allowlist": allowlist},
        "testCases": cases,
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

async fn forged(forge: &Forge, req: &ForgeRequest) -> Forged {
    forge
        .forge(req, &ctx())
        .await
        .unwrap_or_else(|e| panic!("forging {}: {e}", req.name))
}

async fn refused(forge: &Forge, req: &ForgeRequest) -> ForgeError {
    match forge.forge(req, &ctx()).await {
        Ok(_) => panic!("{} was forged", req.name),
        Err(e) => e,
    }
}

/// A native `echo` returning `{echo: input}`; counts its calls.
fn echo(forge: &Forge) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    forge
        .register_native(
            NativeToolSpec {
                name: "echo".into(),
                description: "native echo for the tests".into(),
                input_schema: json!({"type": "object"}),
                output_schema: json!({"type": "object"}),
            },
            move |input| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(json!({ "echo": input })) }
            },
        )
        .unwrap();
    calls
}

const ADD: &str = "function execute(i) { console.log('adding'); return { sum: i.a + i.b }; }";
const CALLER: &str = r#"async function execute(i) {
  const s = await tools.add({ a: i.a, b: i.b });
  const e = await callTool("echo", { s: s.sum });
  return { sum: s.sum, echoed: e.echo.s };
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_tool_calls_pinned_tools_and_the_rules_judge_checks_the_names() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_with(
        runtime_with(HostPolicy::deny_all(), Limits::default()),
        dir.path(),
        rules(),
    );
    let echoes = echo(&forge);
    let add = forged(
        &forge,
        &sandbox("add", ADD, &[], &[json!({"a": 1, "b": 2})]),
    )
    .await;
    let caller = forged(
        &forge,
        &sandbox(
            "caller",
            CALLER,
            &["tool:add", "tool:echo"],
            &[json!({"a": 2, "b": 3})],
        ),
    )
    .await;
    // Pinned: the forged callee by its artifact, the native one by name.
    let bytes = forge
        .store()
        .get_artifact(&ArtifactId::from_hex(&caller.tool.id).unwrap())
        .unwrap();
    let manifest = temper::artifact::read_manifest(&bytes).unwrap();
    let pins: Vec<(String, Option<String>)> = manifest
        .calls
        .iter()
        .map(|c| (c.tool.clone(), c.blake3.clone()))
        .collect();
    assert_eq!(
        pins,
        [
            ("add".into(), Some(add.tool.id.clone())),
            ("echo".into(), None)
        ]
    );
    let out = forge
        .invoke("caller", &json!({"a": 20, "b": 22}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"sum": 42, "echoed": 42}));
    assert_eq!(out.logs[0].message, "[tool add] adding");
    assert!(echoes.load(Ordering::SeqCst) >= 1);

    // The rules judge: a grant the code does not use, a call it is not
    // granted, a computed name: each refused at JUDGE, naming it.
    for (name, code, allowlist, expect) in [
        (
            "extra",
            "async function execute(i) { return await tools.add(i); }",
            vec!["tool:add", "tool:echo"],
            "allowlist grants `tool:echo` but the code does not appear to use it",
        ),
        (
            "computed",
            "async function execute(i) { return await tools['a' + 'dd'](i); }",
            vec!["tool:add"],
            "code appears to use `tool:<computed>`",
        ),
    ] {
        let err = refused(
            &forge,
            &sandbox(name, code, &allowlist, &[json!({"a": 1, "b": 1})]),
        )
        .await;
        assert_eq!(err.stage(), Stage::Judge, "{err}");
        assert!(err.to_string().contains(expect), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_refuses_grants_the_agent_cannot_call_meta_tools_and_self_calls() {
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_with(
        runtime_with(HostPolicy::deny_all(), Limits::default()),
        dir.path(),
        Arc::new(ApproveAll),
    );
    let code = "async function execute(i) { return {}; }";
    for (grant, expect) in [
        ("tool:nowhere", "is not callable by agent \"agent-1\""),
        ("tool:forge_tool", "is never callable from code"),
        ("tool:run_code", "is never callable from code"),
        ("tool:promote_tool", "is never callable from code"),
        ("tool:selfish", "may not call itself"),
        ("tool:", "names no tool"),
    ] {
        let err = refused(&forge, &sandbox("selfish", code, &[grant], &[json!({})])).await;
        assert_eq!(err.stage(), Stage::Validate, "{grant}: {err}");
        assert!(
            matches!(err, ForgeError::Validate(ValidateError::ToolCall { .. })),
            "{grant}: {err}"
        );
        assert!(err.to_string().contains(expect), "{grant}: {err}");
    }
    // Another agent's session tool is not callable either.
    forged(
        &forge,
        &sandbox("add", ADD, &[], &[json!({"a": 1, "b": 2})]),
    )
    .await;
    let other = ForgeContext::new("agent-2", "session-9");
    let err = forge
        .forge(
            &sandbox("theirs", code, &["tool:add"], &[json!({})]),
            &other,
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("is not callable by agent \"agent-2\""),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_granted_only_a_fetching_tool_cannot_fetch_itself() {
    let server = TestServer::start().await;
    let port = server.port();
    let url = format!("http://127.0.0.1:{port}/json");
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!("127.0.0.1:{port}"))
        .unwrap();
    policy.fetch.allow_private = true;
    let dir = tempfile::tempdir().unwrap();
    // A lenient judge: the runtime must hold the line on its own.
    let forge = forge_with(
        runtime_with(policy, Limits::default()),
        dir.path(),
        Arc::new(ApproveAll),
    );
    forged(
        &forge,
        &sandbox(
            "fetcher",
            "async function execute(i) { const r = await fetch(i.url); return await r.json(); }",
            &["fetch"],
            &[json!({"url": url})],
        ),
    )
    .await;
    let code = r#"async function execute(i) {
  if (i.direct) { const r = await fetch(i.url); return { direct: r.status }; }
  return await tools.fetcher({ url: i.url });
}"#;
    forged(
        &forge,
        &sandbox("wrapper", code, &["tool:fetcher"], &[json!({"url": url})]),
    )
    .await;
    let through = forge
        .invoke("wrapper", &json!({"url": url}), &ctx())
        .await
        .unwrap();
    assert_eq!(through.output, json!({"hello": "world"}));
    let seen = server.requests().len();
    let err = forge
        .invoke("wrapper", &json!({"url": url, "direct": true}), &ctx())
        .await
        .unwrap_err();
    let temper::forge::InvokeError::Run { failure, .. } = err else {
        panic!("not a run failure: {err}");
    };
    assert_eq!(
        failure.error,
        RunError::CapabilityDenied {
            capability: "fetch".into()
        }
    );
    assert_eq!(
        server.requests().len(),
        seen,
        "the direct fetch reached the server"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compose_and_code_tools_call_each_other_within_the_depth_cap() {
    let dir = tempfile::tempdir().unwrap();
    let forge = Forge::builder(
        runtime_with(HostPolicy::deny_all(), Limits::default()),
        Arc::new(Registry::open(dir.path()).unwrap()),
    )
    .judge(Arc::new(ApproveAll))
    .config(ForgeConfig {
        max_session_tools: 64,
        ..ForgeConfig::default()
    })
    .build();
    echo(&forge);
    // A chain alternating code and compose tools: t0 calls the native
    // echo, m1 is a compose tool over t0, t2 calls m1, m3 is over t2, ...
    // Invoking t(2k), the echo is reached at tool-call depth k + 1.
    let code = |callee: &str| {
        format!(
            "async function execute(i) {{ const r = await tools.{callee}(i); return {{ via: r }}; }}"
        )
    };
    forged(
        &forge,
        &sandbox("t0", &code("echo"), &["tool:echo"], &[json!({"x": 1})]),
    )
    .await;
    let mut last = String::from("t0");
    for k in 1..=7 {
        let middle = format!("m{}", 2 * k - 1);
        let compose = json!({
            "name": middle,
            "description": "compose over a code tool",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"},
            "implementation": {"mode": "compose", "steps": [
                {"name": "a", "tool": last, "inputMapping": {"x": "$input.x"}}
            ]},
            "testCases": [{"input": {"x": 1}}],
        });
        forged(
            &forge,
            &ForgeRequest::from_json(&compose.to_string()).unwrap(),
        )
        .await;
        let top = format!("t{}", 2 * k);
        let grant = format!("tool:{middle}");
        forged(
            &forge,
            &sandbox(&top, &code(&middle), &[&grant], &[json!({"x": 1})]),
        )
        .await;
        last = top;
    }
    // t14: 7 code → compose hops, the echo at depth 8: within the cap.
    let out = forge.invoke("t14", &json!({"x": 7}), &ctx()).await.unwrap();
    let mut v = &out.output;
    let mut hops = 0;
    while let Some(next) = v.get("via") {
        v = next;
        hops += 1;
    }
    assert_eq!(hops, 8, "{}", out.output);
    assert_eq!(v, &json!({"echo": {"x": 7}}));
    // One more level: the test run of t16 reaches the echo at depth 9.
    let compose = json!({
        "name": "m15",
        "description": "compose over a code tool",
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": [
            {"name": "a", "tool": "t14", "inputMapping": {"x": "$input.x"}}
        ]},
        "testCases": [{"input": {"x": 1}}],
    });
    forged(
        &forge,
        &ForgeRequest::from_json(&compose.to_string()).unwrap(),
    )
    .await;
    let err = refused(
        &forge,
        &sandbox("t16", &code("m15"), &["tool:m15"], &[json!({"x": 1})]),
    )
    .await;
    assert_eq!(err.stage(), Stage::Test, "{err}");
    assert!(
        err.to_string().contains("nest more than 8 levels deep"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_export_records_callees_and_import_refuses_a_missing_one() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let source = forge_with(
        runtime_with(HostPolicy::deny_all(), Limits::default()),
        a.path(),
        Arc::new(ApproveAll),
    );
    let add = forged(
        &source,
        &sandbox("add", ADD, &[], &[json!({"a": 1, "b": 2})]),
    )
    .await;
    forged(
        &source,
        &sandbox(
            "caller",
            "async function execute(i) { return await tools.add(i); }",
            &["tool:add"],
            &[json!({"a": 1, "b": 2})],
        ),
    )
    .await;
    let exported_caller = source.export("caller", &ctx(), false, None).unwrap();
    let exported_add = source.export("add", &ctx(), false, None).unwrap();
    let manifest = temper::artifact::read_manifest(&exported_caller.bytes).unwrap();
    assert_eq!(
        manifest.calls[0].blake3.as_deref(),
        Some(add.tool.id.as_str())
    );

    let target = forge_with(
        runtime_with(HostPolicy::deny_all(), Limits::default()),
        b.path(),
        Arc::new(ApproveAll),
    );
    let err = target
        .import(exported_caller.bytes.clone(), &ctx(), Tier::Session)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ForgeError::Import(ImportError::MissingCallee { ref tool, .. }) if tool == "add"
        ),
        "{err}"
    );
    assert!(
        target.visible_tools(&ctx()).unwrap().is_empty(),
        "nothing partial"
    );
    // With the callee imported first (the same artifact), it imports and runs.
    target
        .import(exported_add.bytes, &ctx(), Tier::Session)
        .await
        .unwrap();
    target
        .import(exported_caller.bytes, &ctx(), Tier::Session)
        .await
        .unwrap();
    let out = target
        .invoke("caller", &json!({"a": 4, "b": 5}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"sum": 9}));
}

// ---- run_code ----------------------------------------------------------------

async fn run_code_forge(dir: &Path, policy: HostPolicy, limits: Limits) -> Forge {
    let forge = forge_with(runtime_with(policy, limits), dir, Arc::new(ApproveAll));
    forged(
        &forge,
        &sandbox("add", ADD, &[], &[json!({"a": 1, "b": 2})]),
    )
    .await;
    echo(&forge);
    forge
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_runs_a_body_with_the_callers_tools_and_registers_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let forge = run_code_forge(dir.path(), HostPolicy::deny_all(), Limits::default()).await;
    let before = forge.visible_tools(&ctx()).unwrap().len();
    let body = r#"
        const a = await tools.add({ a: 1, b: 2 });
        const b = await tools.add({ a: a.sum, b: 3 });
        const e = await callTool("echo", { total: b.sum });
        console.log("total", b.sum);
        return { total: e.echo.total };
    "#;
    let run = forge.run_code(body, None, &ctx()).await.unwrap();
    assert_eq!(run.output, json!({"total": 6}));
    let lines: Vec<&str> = run.logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(lines, ["[tool add] adding", "[tool add] adding", "total 6"]);
    assert_eq!(run.tools, ["add", "echo"]);
    assert_eq!(forge.visible_tools(&ctx()).unwrap().len(), before);

    // Narrowed by `tools`: echo is then refused, computed or not.
    let err = forge
        .run_code(
            "return await callTool(['ec', 'ho'].join(''), {});",
            Some(&["add".to_string()]),
            &ctx(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.run_error(),
        Some(&RunError::CapabilityDenied {
            capability: "tool:echo".into()
        })
    );
    // A name the caller cannot call is refused before anything runs.
    let err = forge
        .run_code("return 1;", Some(&["nowhere".to_string()]), &ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, RunCodeError::NotCallable { .. }), "{err}");
    // Nor is a meta-tool named in `tools`.
    for meta in ["forge_tool", "run_code"] {
        let err = forge
            .run_code("return 1;", Some(&[meta.to_string()]), &ctx())
            .await
            .unwrap_err();
        assert!(
            matches!(err, RunCodeError::NotCallable { .. }),
            "{meta}: {err}"
        );
    }
    // Meta-tools are never reachable from code.
    for meta in ["forge_tool", "run_code", "promote_tool"] {
        let err = forge
            .run_code(
                &format!("return await callTool({meta:?}, {{}});"),
                None,
                &ctx(),
            )
            .await
            .unwrap_err();
        assert_eq!(
            err.run_error(),
            Some(&RunError::CapabilityDenied {
                capability: format!("tool:{meta}")
            }),
            "{meta}"
        );
    }
    let stats = forge.run_code_stats(&ctx().agent_id);
    assert_eq!((stats.total_calls, stats.successes), (5, 1), "{stats:?}");
    let other = forge.run_code_stats("another-agent");
    assert_eq!(other.total_calls, 0, "another agent's runs are apart");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_failures_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let timeout = Duration::from_millis(1500);
    let forge = run_code_forge(
        dir.path(),
        HostPolicy::deny_all().with_allow_crypto(),
        Limits::default().with_timeout(timeout),
    )
    .await;
    let error = |e: RunCodeError| e.run_error().cloned().unwrap_or_else(|| panic!("{e}"));
    // Never returns: the timeout.
    let started = Instant::now();
    let err = forge
        .run_code("for (;;) {}", None, &ctx())
        .await
        .unwrap_err();
    assert!(matches!(error(err), RunError::Timeout { .. }));
    assert!(started.elapsed() < timeout * 3);
    // Returns undefined: a bad output, not null.
    let err = forge
        .run_code("const x = 1;", None, &ctx())
        .await
        .unwrap_err();
    assert_eq!(
        error(err),
        RunError::BadOutput {
            returned: "undefined".into()
        }
    );
    // No capability unless `[run_code] allow` grants it, even one the host allows.
    let err = forge
        .run_code(
            "return [...crypto.getRandomValues(new Uint8Array(2))];",
            None,
            &ctx(),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error(err),
        RunError::CapabilityDenied {
            capability: "crypto".into()
        }
    );
    // A blocked API is refused at build.
    let err = forge
        .run_code("return eval('1');", None, &ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, RunCodeError::Build(_)), "{err}");

    // With `[run_code] allow = ["crypto"]`, it is granted.
    let dir = tempfile::tempdir().unwrap();
    let policy =
        HostPolicy::from_toml("allow = [\"crypto\"]\n[run_code]\nallow = [\"crypto\"]\n").unwrap();
    let forge = run_code_forge(dir.path(), policy, Limits::default()).await;
    let run = forge
        .run_code(
            "return crypto.getRandomValues(new Uint8Array(4)).length;",
            None,
            &ctx(),
        )
        .await
        .unwrap();
    assert_eq!(run.output, json!(4));
}

// ---- the command line ------------------------------------------------------

/// `temper` with the registry flags, in a scratch store.
fn cli(store: &Path, args: &[&str]) -> (bool, Value, String) {
    let mut all: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    all.push("--store".into());
    all.push(store.into());
    support::temper_json(store, &[], all)
}

#[test]
fn temper_run_code_runs_a_file_with_the_tools_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path();
    let seed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds/slugify.json")
        .display()
        .to_string();
    let (ok, doc, err) = cli(store, &["forge", &seed, "--judge", "rules"]);
    assert!(ok, "{doc} {err}");
    let body = store.join("body.js");
    std::fs::write(
        &body,
        "const s = await tools.slugify({ text: 'Run Code' });\nconsole.log('slug', s.slug);\nreturn { slug: s.slug };\n",
    )
    .unwrap();
    let body = body.display().to_string();
    let (ok, doc, err) = cli(store, &["run-code", &body, "--tools", "slugify"]);
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["output"], json!({"slug": "run-code"}));
    assert_eq!(doc["tools"], json!(["slugify"]));
    assert_eq!(doc["logs"][0]["message"], "slug run-code");
    // Without the tool: refused, typed, and the exit status says so.
    let (ok, doc, _) = cli(store, &["run-code", &body, "--tools", ""]);
    assert!(!ok);
    assert_eq!(doc["kind"], "capability-denied", "{doc}");
    let error = doc["error"].as_str().unwrap();
    assert!(
        error.contains("tool \"slugify\" is not in the tools you passed"),
        "{doc}"
    );
}
