//! Foundation: JS → `tool` component → isolated run under limits.
//!
//! Every test builds real tools with the real shim and runs them in fresh
//! wasmtime stores. Compiled components are cached under the test target
//! directory, so only the first test pays for compiling the shim.

mod support;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::{Duration, Instant};
use support::{cache_dir, temper_json};

use temper::request::{ForgeRequest, Implementation};
use temper::{BuildError, Limits, LoadError, RunError, Runtime};

fn runtime_with(limits: Limits) -> Runtime {
    support::runtime_builder()
        .limits(limits)
        .build()
        .expect("runtime")
}

fn runtime() -> Runtime {
    runtime_with(Limits::default())
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn seed(name: &str) -> ForgeRequest {
    let path = fixtures().join("seeds").join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn sandbox_code(req: &ForgeRequest) -> &str {
    match &req.implementation {
        Implementation::Sandbox { code, .. } => code,
        other => panic!("not a sandbox request: {other:?}"),
    }
}

/// Builds `source` and calls it once on the warm-up path and once on the
/// compiled artifact; both must agree. Returns the output.
async fn run_both_paths(rt: &Runtime, source: &str, input: &str) -> Result<String, RunError> {
    let artifact = rt.build(source).await.expect("build");
    let warm = rt.tool(&artifact);
    let first = rt.call(&warm, input).await.map(|o| {
        assert!(
            !o.compiled,
            "first call right after build takes the warm-up path"
        );
        o.output
    });
    let compiled = rt
        .load(artifact.bytes.to_vec())
        .await
        .expect("load artifact");
    let second = rt.call(&compiled, input).await.map(|o| {
        assert!(o.compiled);
        o.output
    });
    assert_eq!(
        first.as_ref().map_err(|f| f.error.clone()),
        second.as_ref().map_err(|f| f.error.clone()),
        "warm-up and compiled paths disagree"
    );
    first.map_err(|f| f.error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_examples_pass_their_test_cases_through_the_library() {
    let rt = runtime();
    for name in ["parse_csv", "convert_temperature", "slugify", "add_numbers"] {
        let req = seed(name);
        assert!(!req.test_cases.is_empty(), "{name} has test cases");
        let artifact = rt.build(sandbox_code(&req)).await.expect(name);
        for tool in [
            rt.tool(&artifact),
            rt.load(artifact.bytes.to_vec()).await.unwrap(),
        ] {
            let results = temper::testcase::run_cases(&rt, &tool, None, &req.test_cases).await;
            assert_eq!(results.len(), req.test_cases.len());
            for r in &results {
                assert!(r.passed, "{name} case {}: {:?}", r.index, r.failure);
            }
        }
    }
}

#[test]
fn seed_examples_pass_their_test_cases_through_the_cli() {
    for name in ["parse_csv", "convert_temperature", "slugify", "add_numbers"] {
        let request = fixtures().join("seeds").join(format!("{name}.json"));
        let (ok, doc, stderr) = temper_json(
            Path::new("."),
            &[],
            [OsStr::new("test"), request.as_os_str()],
        );
        assert!(ok, "{name}: {stderr}");
        assert_eq!(doc["name"], name);
        assert_eq!(doc["failed"], 0);
        assert_eq!(
            doc["passed"].as_u64().unwrap() as usize,
            seed(name).test_cases.len()
        );
    }
}

#[test]
fn cli_test_fails_on_a_wrong_expected_output() {
    let mut req: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("seeds/add_numbers.json")).unwrap(),
    )
    .unwrap();
    req["testCases"][0]["expectedOutput"]["sum"] = serde_json::json!(6);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrong.json");
    std::fs::write(&path, req.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args(["test"])
        .arg(&path)
        .arg("--cache-dir")
        .arg(cache_dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("at $.sum: expected 6, got 5"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_tool_with_await_promise_all_and_timers() {
    let rt = runtime();
    let source = r#"
        async function execute(input) {
          const wait = (ms, v) => new Promise(r => setTimeout(() => r(v), ms));
          const values = await Promise.all([wait(30, 'a'), wait(10, 'b'), Promise.resolve('c')]);
          const order = [];
          await Promise.all([30, 10, 20].map(async ms => { await wait(ms); order.push(ms); }));
          return { values, order, doubled: await Promise.resolve(input.n * 2) };
        }"#;
    let out = run_both_paths(&rt, source, r#"{"n": 21}"#).await.unwrap();
    assert_eq!(
        out,
        r#"{"values":["a","b","c"],"order":[10,20,30],"doubled":42}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_that_never_settles_is_an_error_not_a_hang() {
    // A long timeout: reaching it would give a timeout error, not this one.
    let rt = runtime_with(Limits::default().with_timeout(Duration::from_secs(120)));
    for source in [
        "function execute() { return new Promise(() => {}); }",
        "async function execute() { await new Promise(() => {}); }",
        "async function execute() { const t = setTimeout(() => {}, 10); clearTimeout(t); await new Promise(r => setTimeout(r, 5)); await new Promise(() => {}); }",
    ] {
        let err = run_both_paths(&rt, source, "{}").await.unwrap_err();
        match err {
            RunError::Js { error } => assert!(error.message.contains("never settles"), "{error}"),
            other => panic!("{source}: expected a JS error, got {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thrown_error_carries_message_and_line() {
    let rt = runtime();
    let source = "function execute(input) {\n  const x = input.x;\n  if (x > 1) {\n    throw new RangeError('x too big: ' + x);\n  }\n  return x;\n}\n";
    let err = run_both_paths(&rt, source, r#"{"x": 5}"#)
        .await
        .unwrap_err();
    let RunError::Js { error } = err else {
        panic!("expected JS error, got {err}")
    };
    assert_eq!(error.message, "RangeError: x too big: 5");
    assert_eq!(error.line, Some(4), "{error:?}");
    assert!(error.column.is_some());
    // A rejected promise carries its line too.
    let source = "async function execute() {\n  await null;\n  null.boom;\n}\n";
    let err = run_both_paths(&rt, source, "{}").await.unwrap_err();
    let RunError::Js { error } = err else {
        panic!("expected JS error, got {err}")
    };
    assert!(error.message.starts_with("TypeError"), "{error}");
    assert_eq!(error.line, Some(3), "{error:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syntax_error_reports_line_and_column_before_anything_runs() {
    let rt = runtime();
    let err = rt
        .build("function execute(input) {\n  const a = 1;\n  let b = ;\n}\n")
        .await
        .err()
        .expect("syntax error");
    match err {
        BuildError::Compile(js) => {
            assert!(js.message.starts_with("SyntaxError"), "{js}");
            // QuickJS points at the start of the expression that failed.
            assert_eq!((js.line, js.column), (Some(3), Some(9)), "{js:?}");
        }
        other => panic!("expected a compile error, got {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_without_execute_or_with_a_throwing_top_level_is_refused_at_build() {
    let rt = runtime();
    match rt.build("function run(input) { return 1; }").await {
        Err(BuildError::Load(js)) => assert!(js.message.contains("no `execute`"), "{js}"),
        other => panic!("expected a load error, got {:?}", other.map(|a| a.id)),
    }
    match rt
        .build("throw new Error('top level boom');\nfunction execute() {}")
        .await
    {
        Err(BuildError::Load(js)) => {
            assert!(js.message.contains("top level boom"), "{js}");
            assert_eq!(js.line, Some(1));
        }
        other => panic!("expected a load error, got {:?}", other.map(|a| a.id)),
    }
    match rt.build("for (;;) {}\nfunction execute() {}").await {
        Err(BuildError::TopLevel(why)) => assert!(why.contains("limit"), "{why}"),
        other => panic!(
            "expected a top-level timeout, got {:?}",
            other.map(|a| a.id)
        ),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_over_the_size_limit_is_refused_before_anything_runs() {
    let rt = runtime();
    let limit = temper::runtime::MAX_SOURCE_BYTES;
    let source = format!(
        "function execute() {{ return 1; }}\n//{}",
        "x".repeat(limit)
    );
    match rt.build(&source).await {
        Err(BuildError::SourceTooLarge { actual, limit: l }) => {
            assert_eq!(l, limit);
            assert_eq!(actual, source.len());
        }
        other => panic!("expected SourceTooLarge, got {:?}", other.map(|a| a.id)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_json_input_is_rejected_clearly() {
    let rt = runtime();
    let artifact = rt.build("function execute(i) { return i; }").await.unwrap();
    let tool = rt.tool(&artifact);
    for bad in ["", "{", "{'a': 1}", "[1,]", "nope"] {
        let err = rt.call(&tool, bad).await.unwrap_err().error;
        match err {
            RunError::BadInput { message } => {
                assert!(message.contains("not valid JSON"), "{message}")
            }
            other => panic!("{bad:?}: expected bad input, got {other}"),
        }
    }
    // Over the input cap.
    let big = format!("\"{}\"", "a".repeat(Limits::default().input_bytes + 1));
    assert!(matches!(
        rt.call(&tool, &big).await.unwrap_err().error,
        RunError::BadInput { .. }
    ));
    // Any JSON value is fine.
    assert_eq!(
        rt.call(&tool, "[1, 2.5, null]").await.unwrap().output,
        "[1,2.5,null]"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infinite_loop_times_out_near_the_limit_and_the_host_keeps_working() {
    let limit = Duration::from_millis(400);
    let rt = runtime_with(Limits::default().with_timeout(limit));
    let spin = rt
        .build("function execute() { for (;;) {} }")
        .await
        .unwrap();
    let ok = rt
        .build("function execute(i) { return i.n + 1; }")
        .await
        .unwrap();
    let spin_compiled = rt.load(spin.bytes.to_vec()).await.unwrap();
    for tool in [rt.tool(&spin), spin_compiled] {
        let started = Instant::now();
        let err = rt.call(&tool, "{}").await.unwrap_err().error;
        let elapsed = started.elapsed();
        assert_eq!(err, RunError::Timeout { limit_ms: 400 });
        assert!(elapsed >= limit, "stopped early: {elapsed:?}");
        assert!(elapsed < limit * 4, "stopped late: {elapsed:?}");
        // The same runtime, and the same tool, still work.
        assert_eq!(
            rt.call(&rt.tool(&ok), r#"{"n": 1}"#).await.unwrap().output,
            "2"
        );
    }
    // An async tool spinning inside a timer callback is stopped too.
    let source = "async function execute() { await new Promise(r => setTimeout(r, 1)); for(;;){} }";
    let err = run_both_paths(&rt, source, "{}").await.unwrap_err();
    assert_eq!(err, RunError::Timeout { limit_ms: 400 });
    // So is an interval that never stops re-arming.
    let source =
        "async function execute() { setInterval(() => {}, 1); return new Promise(() => {}); }";
    let err = run_both_paths(&rt, source, "{}").await.unwrap_err();
    assert_eq!(err, RunError::Timeout { limit_ms: 400 });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_bomb_is_a_memory_error() {
    let rt = runtime_with(Limits::default().with_memory_bytes(48 << 20));
    let source = "function execute(input) {\n  const keep = [];\n  for (let i = 0; ; i++) {\n    if (input.kind === 'arrays') keep.push(new Array(100000).fill(i));\n    else if (input.kind === 'buffers') keep.push(new ArrayBuffer(1 << 20));\n    else keep.push('v'.repeat(1000) + i);\n  }\n}";
    let artifact = rt.build(source).await.unwrap();
    let compiled = rt.load(artifact.bytes.to_vec()).await.unwrap();
    for kind in ["arrays", "buffers", "strings"] {
        for tool in [rt.tool(&artifact), compiled.clone()] {
            let err = rt
                .call(&tool, &format!(r#"{{"kind": "{kind}"}}"#))
                .await
                .unwrap_err()
                .error;
            match err {
                RunError::Memory { limit_bytes, .. } => assert_eq!(limit_bytes, 48 << 20),
                other => panic!("{kind}: expected a memory error, got {other}"),
            }
        }
    }
    let ok = rt
        .build("function execute() { return 'fine'; }")
        .await
        .unwrap();
    assert_eq!(
        rt.call(&rt.tool(&ok), "{}").await.unwrap().output,
        "\"fine\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unbounded_recursion_is_a_clean_error() {
    let rt = runtime();
    let source = "function f(n) { return f(n + 1) + 1; }\nfunction execute() { return f(0); }";
    let err = run_both_paths(&rt, source, "{}").await.unwrap_err();
    match &err {
        RunError::Js { error } => assert!(error.message.contains("stack overflow"), "{error}"),
        RunError::Trap { message } => assert!(message.contains("stack"), "{message}"),
        other => panic!("expected a stack error, got {other}"),
    }
    // Caught inside JS, the tool can recover and report it.
    let source = "function f(n) { return f(n + 1) + 1; }\nfunction execute() { try { return f(0); } catch (e) { return 'caught ' + e.name; } }";
    match run_both_paths(&rt, source, "{}").await {
        Ok(out) => assert!(out.contains("caught"), "{out}"),
        Err(RunError::Trap { message }) => assert!(message.contains("stack"), "{message}"),
        Err(other) => panic!("unexpected {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabyte_output_is_output_too_large() {
    let rt = runtime();
    let err = run_both_paths(
        &rt,
        "function execute() { return 'x'.repeat(10 * 1024 * 1024); }",
        "{}",
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        RunError::OutputTooLarge {
            actual_bytes: 10 * 1024 * 1024 + 2,
            limit_bytes: 1 << 20
        }
    );
    // Just under the cap passes.
    let out = run_both_paths(
        &rt,
        "function execute() { return 'x'.repeat(1024 * 1024 - 2); }",
        "{}",
    )
    .await
    .unwrap();
    assert_eq!(out.len(), 1 << 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_check_refuses_each_blocked_api_with_its_position() {
    let rt = runtime();
    let cases = [
        (
            "eval",
            "function execute(i) {\n  return eval(i.code);\n}",
            "eval",
            2,
        ),
        (
            "Function",
            "function execute() { return new Function('return 1')(); }",
            "Function",
            1,
        ),
        (
            "require",
            "const fs = require('fs');\nfunction execute() {}",
            "require",
            1,
        ),
        (
            "import()",
            "async function execute() {\n\n  return import('x');\n}",
            "import()",
            3,
        ),
        (
            "process",
            "function execute() { return process.env; }",
            "process",
            1,
        ),
        (
            "child_process",
            "function execute(i) { return i['child_process']; }",
            "child_process",
            1,
        ),
        (
            "fs.writeFile",
            "function execute() { fs.writeFile('/x', 'y'); }",
            "fs.writeFile",
            1,
        ),
        (
            "fs.unlink",
            "function execute() { fs.unlink('/x'); }",
            "fs.unlink",
            1,
        ),
        (
            "fs.mkdir",
            "function execute() { fs.mkdir('/x'); }",
            "fs.mkdir",
            1,
        ),
    ];
    for (what, source, api, line) in cases {
        match rt.build(source).await {
            Err(BuildError::StaticCheck(err)) => {
                let first = &err.0[0];
                assert_eq!(first.api, api, "{what}: {err}");
                assert_eq!(first.line, line, "{what}: {err}");
                assert!(
                    err.to_string().contains(&format!("blocked API `{api}`")),
                    "{err}"
                );
            }
            other => panic!(
                "{what}: expected the static check to refuse, got {:?}",
                other.map(|a| a.id)
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_generation_fails_at_run_time_when_the_static_check_is_bypassed() {
    let rt = runtime();
    // None of these names a blocked identifier, so the static check lets them
    // through; the runtime must still refuse each one.
    let attempts = [
        "(function(){}).constructor('return 1')()",
        "(() => 1).constructor('return 1')()",
        "Object.getPrototypeOf(async function(){}).constructor('return 1')",
        "Object.getPrototypeOf(function*(){}).constructor('yield 1')().next()",
        "Object.getPrototypeOf(async function*(){}).constructor('yield 1')",
        "new ((function(){}).constructor)('return 1')()",
        "Reflect.construct((function(){}).constructor, ['return 1'])()",
        "globalThis['ev' + 'al']('1 + 1')",
        "globalThis['Func' + 'tion']('return 1')()",
        "(0, globalThis['Func' + 'tion'].prototype.constructor)('return 1')()",
        "setTimeout('globalThis.pwned = 1', 0)",
    ];
    // One tool holding every attempt; the input picks which one runs.
    let cases: Vec<String> = attempts.iter().map(|a| format!("() => {a}")).collect();
    let source = format!(
        "const attempts = [\n{}\n];\nfunction execute(input) {{\n  return attempts[input.i]();\n}}",
        cases.join(",\n")
    );
    let artifact = rt
        .build(&source)
        .await
        .expect("the static check lets these through");
    let compiled = rt.load(artifact.bytes.to_vec()).await.unwrap();
    for (i, attempt) in attempts.iter().enumerate() {
        for tool in [rt.tool(&artifact), compiled.clone()] {
            let err = rt
                .call(&tool, &format!(r#"{{"i": {i}}}"#))
                .await
                .err()
                .map(|f| f.error);
            match err {
                Some(RunError::Js { error }) => assert!(
                    error.message.contains("TypeError") || error.message.contains("not supported"),
                    "{attempt}: {error}"
                ),
                other => panic!("{attempt}: expected a runtime refusal, got {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_state_does_not_survive_between_calls() {
    let rt = runtime();
    let source = "globalThis.loaded = (globalThis.loaded || 0) + 1;\nfunction execute() {\n  globalThis.calls = (globalThis.calls || 0) + 1;\n  Array.prototype.polluted = true;\n  return { calls: globalThis.calls, loaded: globalThis.loaded, polluted: [].polluted === true };\n}";
    let artifact = rt.build(source).await.unwrap();
    let compiled = rt.load(artifact.bytes.to_vec()).await.unwrap();
    for tool in [rt.tool(&artifact), compiled] {
        for _ in 0..3 {
            let out = rt.call(&tool, "{}").await.unwrap().output;
            // `polluted` is true within the call that set it, never before.
            assert_eq!(out, r#"{"calls":1,"loaded":1,"polluted":true}"#);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_output_is_captured_bounded_and_never_printed() {
    let rt = runtime();
    let source = "function execute(i) {\n  console.log('hello', 1, {a: [1, 2]});\n  console.error('oops');\n  for (let k = 0; k < i.n; k++) console.log('line ' + k + ' ' + 'y'.repeat(1000));\n  return 'done';\n}";
    let artifact = rt.build(source).await.unwrap();
    let tool = rt.tool(&artifact);
    let out = rt.call(&tool, r#"{"n": 0}"#).await.unwrap();
    assert_eq!(out.logs.len(), 2);
    assert_eq!(
        (out.logs[0].level, out.logs[0].message.as_str()),
        ("info", r#"hello 1 {"a":[1,2]}"#)
    );
    assert_eq!(
        (out.logs[1].level, out.logs[1].message.as_str()),
        ("error", "oops")
    );
    let out = rt.call(&tool, r#"{"n": 1000}"#).await.unwrap();
    let bytes: usize = out.logs.iter().map(|l| l.message.len()).sum();
    assert!(bytes <= Limits::default().console_bytes + 200, "{bytes}");
    assert!(out.logs.len() < 100);
    assert!(
        out.logs.last().unwrap().message.contains("truncated")
            || out.logs.last().unwrap().message.contains("dropped")
    );
    // Logs survive a failure.
    let failing = rt
        .build("function execute() { console.log('before'); throw new Error('x'); }")
        .await
        .unwrap();
    let failure = rt.call(&rt.tool(&failing), "{}").await.unwrap_err();
    assert_eq!(failure.logs[0].message, "before");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_globals_are_available() {
    let rt = runtime();
    let source = r#"function execute() {
        const u = new URL('../b?x=1#h', 'https://Example.test:443/a/c');
        const p = new URLSearchParams({q: 'a b', n: '1'});
        const bytes = new TextEncoder().encode('héllo');
        return {
          href: u.href, host: u.host, x: u.searchParams.get('x'), qs: p.toString(),
          len: bytes.length, text: new TextDecoder().decode(bytes),
          b64: btoa('hi'), raw: atob('aGk='),
          clone: structuredClone({d: [1, {e: 2}]}),
          timers: typeof setTimeout + typeof clearTimeout + typeof queueMicrotask,
        };
    }"#;
    let out: serde_json::Value =
        serde_json::from_str(&run_both_paths(&rt, source, "{}").await.unwrap()).unwrap();
    assert_eq!(
        out,
        serde_json::json!({
            "href": "https://example.test/b?x=1#h", "host": "example.test", "x": "1",
            "qs": "q=a+b&n=1", "len": 6, "text": "héllo", "b64": "aGk=", "raw": "hi",
            "clone": {"d": [1, {"e": 2}]}, "timers": "functionfunctionfunction"
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_denied_by_default() {
    // A default runtime's policy allows nothing and the tool was granted
    // nothing: each capability import answers `capability not granted`.
    let rt = runtime();
    let source = "async function execute(input) {\n  if (input.what === 'fetch') return await fetch('http://127.0.0.1/');\n  if (input.what === 'crypto') return crypto.createHash('sha256').update('x').digest('hex');\n  if (input.what === 'random') return crypto.randomUUID();\n  if (input.what === 'fs') return fs.readFileSync('/etc/passwd', 'utf8');\n  try { await fetch('http://example.test/'); } catch (e) { return e.message; }\n}";
    let artifact = rt.build(source).await.unwrap();
    let compiled = rt.load(artifact.bytes.to_vec()).await.unwrap();
    for tool in [rt.tool(&artifact), compiled] {
        for (what, capability) in [
            ("fetch", "fetch"),
            ("crypto", "crypto"),
            ("random", "crypto"),
            // No directory is preopened: fs.readFile is refused by name
            // (issue 14), not as a missing file.
            ("fs", "fs.readFile"),
        ] {
            let err = rt
                .call(&tool, &format!(r#"{{"what": "{what}"}}"#))
                .await
                .unwrap_err()
                .error;
            assert_eq!(
                err,
                RunError::CapabilityDenied {
                    capability: capability.into()
                },
                "{what}"
            );
        }
        // A tool that catches the refusal sees the reason.
        let out = rt
            .call(&tool, r#"{"what": "caught"}"#)
            .await
            .unwrap()
            .output;
        assert_eq!(out, r#""capability not granted: fetch""#);
    }
}

/// A component importing something outside the `tool` world is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_outside_the_tool_world_are_refused() {
    let rt = runtime();
    let sockets = wat::parse_str(
        r#"(component
             (import "wasi:sockets/tcp@0.2.0" (instance))
           )"#,
    )
    .unwrap();
    match rt.load(sockets).await {
        Err(LoadError::ImportNotAllowed(name)) => assert_eq!(name, "wasi:sockets/tcp@0.2.0"),
        other => panic!(
            "expected ImportNotAllowed, got {:?}",
            other.map(|t| t.id().to_string())
        ),
    }
    let http =
        wat::parse_str(r#"(component (import "wasi:http/outgoing-handler@0.2.0" (instance)))"#)
            .unwrap();
    assert!(matches!(
        rt.load(http).await,
        Err(LoadError::ImportNotAllowed(_))
    ));
    let empty = wat::parse_str("(component)").unwrap();
    assert!(matches!(
        rt.load(empty).await,
        Err(LoadError::MissingExport(_))
    ));
    for junk in [Vec::new(), b"\0asm".to_vec(), vec![0xAB; 4096]] {
        assert!(matches!(rt.load(junk).await, Err(LoadError::Invalid(_))));
    }
    // A core module is not a component.
    let core = wat::parse_str("(module)").unwrap();
    assert!(matches!(rt.load(core).await, Err(LoadError::Invalid(_))));
}

#[test]
fn builds_are_byte_identical_across_processes() {
    let source = fixtures().join("../../components/examples/slugify.js");
    let mut ids = Vec::new();
    for run in 0..2 {
        let work = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let out = work.path().join("tool.wasm");
        let run_s = run.to_string();
        let tz = if run == 0 { "UTC" } else { "Asia/Tokyo" };
        let env = [
            ("TMPDIR", tmp.path().as_os_str()),
            ("TEMPER_TEST_RUN", OsStr::new(&run_s)),
            ("TZ", OsStr::new(tz)),
        ];
        let (ok, doc, stderr) = temper_json(
            work.path(),
            &env,
            [
                OsStr::new("build"),
                source.as_os_str(),
                OsStr::new("-o"),
                out.as_os_str(),
            ],
        );
        assert!(ok, "{stderr}");
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(doc["id"], blake3::hash(&bytes).to_hex().as_str());
        ids.push(doc["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids[0], ids[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn date_and_random_at_top_level_are_fixed_in_the_snapshot_but_live_in_calls() {
    let rt = runtime();
    let source = "const builtAt = Date.now();\nfunction execute() { return { builtAt, now: Date.now() > 1.6e12 }; }";
    let a = rt.build(source).await.unwrap();
    let b = rt.build(source).await.unwrap();
    assert_eq!(
        a.id, b.id,
        "top-level clock reads must not make builds differ"
    );
    let out = rt.call(&rt.tool(&a), "{}").await.unwrap().output;
    assert_eq!(out, r#"{"builtAt":0,"now":true}"#);
}
