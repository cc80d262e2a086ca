//! Foundation: JS → `tool` component → isolated run under limits.
//!
//! Every test builds real tools with the real shim and runs them in fresh
//! wasmtime stores. Compiled components are cached under the test target
//! directory, so only the first test pays for compiling the shim.

use crate::support;

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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
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
        .load_compiled(artifact.bytes.to_vec())
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
            rt.load_compiled(artifact.bytes.to_vec()).await.unwrap(),
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
    let spin_compiled = rt.load_compiled(spin.bytes.to_vec()).await.unwrap();
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
    // `objects` (an array of small objects growing until the cap) made
    // QuickJS throw `InternalError: ` with an empty message: still the
    // memory cap, not a JS error.
    let source = "function execute(input) {\n  const keep = [];\n  for (let i = 0; ; i++) {\n    if (input.kind === 'arrays') keep.push(new Array(100000).fill(i));\n    else if (input.kind === 'buffers') keep.push(new ArrayBuffer(1 << 20));\n    else if (input.kind === 'objects') keep.push({ n: i, tag: 'item', more: [i] });\n    else keep.push('v'.repeat(1000) + i);\n  }\n}";
    let artifact = rt.build(source).await.unwrap();
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
    for kind in ["arrays", "buffers", "strings", "objects"] {
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
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
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
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
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
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
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

// ------------------------------------------------------------ shared engine, pre-warmed instances

/// Waits until `tool` has a pre-warmed instance waiting.
async fn wait_warm(rt: &Runtime, tool: &temper::Tool) {
    let started = Instant::now();
    while rt.warm_ready(tool) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no pre-warmed instance appeared"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A runtime on a cache directory of its own, with explicit cache caps.
fn runtime_with_caches(
    cache: &Path,
    caches: temper::limits::CacheLimits,
    limits: Limits,
) -> Runtime {
    Runtime::builder()
        .cache_dir(Some(cache.to_path_buf()))
        .max_concurrent_instances(16)
        .cache_limits(caches)
        .limits(limits)
        .build()
        .expect("runtime")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_warmed_instances_start_from_a_state_no_call_touched() {
    let rt = runtime();
    // Top-level counter, a per-call counter and prototype pollution: a
    // reused or shared instance would show `calls` > 1, `loaded` > 1 or
    // `[].polluted` before the call set it.
    let source = "globalThis.loaded = (globalThis.loaded || 0) + 1;\nfunction execute() {\n  const before = [].polluted === true;\n  globalThis.calls = (globalThis.calls || 0) + 1;\n  Array.prototype.polluted = true;\n  Object.prototype.leak = 'x';\n  return { calls: globalThis.calls, loaded: globalThis.loaded, before, polluted: [].polluted === true };\n}";
    let artifact = rt.build(source).await.unwrap();
    let tool = rt.tool(&artifact);
    assert!(tool.runs_on_engine());
    let expected = r#"{"calls":1,"loaded":1,"before":false,"polluted":true}"#;
    // The first call makes its own instance and makes the tool hot.
    let out = rt.call(&tool, "{}").await.unwrap();
    assert!(!out.compiled);
    assert_eq!(out.output, expected);
    let hits_before = rt.cache_stats().warm_hits;
    for _ in 0..5 {
        wait_warm(&rt, &tool).await;
        assert_eq!(rt.call(&tool, "{}").await.unwrap().output, expected);
    }
    assert_eq!(
        rt.cache_stats().warm_hits - hits_before,
        5,
        "every call above took a pre-warmed instance"
    );
    // Concurrent calls, some pre-warmed, some fresh: all isolated.
    let calls: Vec<_> = (0..16)
        .map(|_| {
            let (rt, tool) = (rt.clone(), tool.clone());
            tokio::spawn(async move { rt.call(&tool, "{}").await.unwrap().output })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap(), expected);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trap_or_throw_in_one_call_does_not_affect_the_next() {
    let rt = runtime_with(Limits::default().with_memory_bytes(48 << 20));
    let source = "function f(n) { return f(n + 1) + 1; }\nfunction execute(input) {\n  globalThis.dirty = (globalThis.dirty || 0) + 1;\n  if (input.do === 'recurse') return f(0);\n  if (input.do === 'oom') { const k = []; for (;;) k.push(new ArrayBuffer(1 << 20)); }\n  if (input.do === 'throw') throw new Error('boom');\n  return { dirty: globalThis.dirty };\n}";
    let artifact = rt.build(source).await.unwrap();
    let tool = rt.tool(&artifact);
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
    // A first call makes the engine tool hot.
    rt.call(&tool, r#"{"do": "nothing"}"#).await.unwrap();
    for t in [&tool, &compiled] {
        for bad in ["recurse", "oom", "throw"] {
            // With a pre-warmed instance waiting (engine tool) and without.
            if t.runs_on_engine() {
                wait_warm(&rt, t).await;
            }
            let err = rt
                .call(t, &format!(r#"{{"do": "{bad}"}}"#))
                .await
                .unwrap_err()
                .error;
            match (bad, &err) {
                ("oom", RunError::Memory { .. }) | ("throw", RunError::Js { .. }) => {}
                ("recurse", RunError::Js { .. } | RunError::Trap { .. }) => {}
                _ => panic!("{bad}: unexpected {err}"),
            }
            for _ in 0..3 {
                if t.runs_on_engine() {
                    wait_warm(&rt, t).await;
                }
                assert_eq!(
                    rt.call(t, r#"{"do": "nothing"}"#).await.unwrap().output,
                    r#"{"dirty":1}"#,
                    "after {bad}"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_warmed_instances_keep_their_grants_apart() {
    let policy = temper::policy::HostPolicy::deny_all().with_allow_crypto();
    let rt = support::runtime_builder().policy(policy).build().unwrap();
    let source = "function execute() { return crypto.createHash('sha256').update('x').digest('hex').length; }";
    let artifact = rt.build(source).await.unwrap();
    let plain = rt.tool(&artifact);
    let granted = rt.grant(&plain, &["crypto".to_string()]).unwrap();
    // Both hot, each with instances of its own grants.
    for _ in 0..3 {
        for (tool, ok) in [(&plain, false), (&granted, true)] {
            wait_warm_or_first(&rt, tool).await;
            let out = rt.call(tool, "{}").await;
            if ok {
                assert_eq!(out.unwrap().output, "64");
            } else {
                assert_eq!(
                    out.unwrap_err().error,
                    RunError::CapabilityDenied {
                        capability: "crypto".into()
                    }
                );
            }
        }
    }
}

/// Waits for a pre-warmed instance if the tool is hot already.
async fn wait_warm_or_first(rt: &Runtime, tool: &temper::Tool) {
    if rt.cache_stats().warm_tools > 0
        && rt.cache_stats().warm_hits + rt.cache_stats().warm_misses > 0
    {
        let started = Instant::now();
        while rt.warm_ready(tool) == 0 && started.elapsed() < Duration::from_secs(5) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pre_warmed_instance_gets_the_full_time_limit_of_its_call() {
    let limit = Duration::from_millis(400);
    let rt = runtime_with(Limits::default().with_timeout(limit));
    // Busy for ~150 ms per call when asked; loops forever when asked.
    let source = "function execute(i) { if (i.spin) for (;;) {} const t = Date.now(); while (Date.now() - t < 150) {} return 'ok'; }";
    let artifact = rt.build(source).await.unwrap();
    let tool = rt.tool(&artifact);
    assert_eq!(rt.call(&tool, "{}").await.unwrap().output, "\"ok\"");
    wait_warm(&rt, &tool).await;
    // Made well over a time limit ago: its call still has the whole limit.
    tokio::time::sleep(limit * 2).await;
    assert_eq!(rt.call(&tool, "{}").await.unwrap().output, "\"ok\"");
    wait_warm(&rt, &tool).await;
    let started = Instant::now();
    let err = rt.call(&tool, r#"{"spin": true}"#).await.unwrap_err().error;
    assert_eq!(err, RunError::Timeout { limit_ms: 400 });
    let elapsed = started.elapsed();
    assert!(elapsed >= limit && elapsed < limit * 4, "{elapsed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caches_evict_under_small_caps_and_tools_keep_working() {
    let cache = tempfile::tempdir().unwrap();
    let caps = temper::limits::CacheLimits {
        warm_tools: 2,
        warm_per_tool: 1,
        compiled_tools: 1,
        bytecode_records: 2,
        keep_resident_bytes: 1 << 20,
        promote_after_calls: 0,
    };
    let rt = runtime_with_caches(cache.path(), caps, Limits::default());
    let mut artifacts = Vec::new();
    let mut tools = Vec::new();
    for i in 0..5 {
        let a = rt
            .build(&format!(
                "const N = {i};\nfunction execute() {{ return N; }}"
            ))
            .await
            .unwrap();
        tools.push(rt.tool(&a));
        artifacts.push(a);
    }
    // Five hot tools, room for two.
    for (i, tool) in tools.iter().enumerate() {
        assert_eq!(rt.call(tool, "{}").await.unwrap().output, i.to_string());
        wait_warm(&rt, tool).await;
        let stats = rt.cache_stats();
        assert!(stats.warm_tools <= 2, "{stats:?}");
        assert!(stats.warm_instances <= 2, "{stats:?}");
    }
    // The least recently used lost their instances; they still run.
    assert_eq!(rt.warm_ready(&tools[0]), 0);
    assert_eq!(rt.call(&tools[0], "{}").await.unwrap().output, "0");
    // Bytecode records: two in memory, the rest found on disk.
    assert!(rt.cache_stats().bytecode_records <= 2);
    for (i, a) in artifacts.iter().enumerate() {
        let loaded = rt.load(a.bytes.to_vec()).await.unwrap();
        assert!(loaded.runs_on_engine(), "artifact {i} runs on the engine");
        assert_eq!(rt.call(&loaded, "{}").await.unwrap().output, i.to_string());
        assert!(rt.cache_stats().bytecode_records <= 2);
    }
    // Compiled components: one kept; evicted ones compile again (from the
    // disk cache) when called.
    let compiled: Vec<_> = {
        let mut v = Vec::new();
        for a in &artifacts[..3] {
            v.push(rt.load_compiled(a.bytes.to_vec()).await.unwrap());
        }
        v
    };
    assert_eq!(rt.cache_stats().compiled_tools, 1);
    for round in 0..2 {
        for (i, tool) in compiled.iter().enumerate() {
            let out = rt.call(tool, "{}").await.unwrap();
            assert!(out.compiled);
            assert_eq!(out.output, i.to_string(), "round {round}");
            assert_eq!(rt.cache_stats().compiled_tools, 1);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_runs_own_artifacts_on_the_engine_and_distrusts_damaged_records() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime_with_caches(
        cache.path(),
        temper::limits::CacheLimits::default(),
        Limits::default(),
    );
    let artifact = rt
        .build("function execute(i) { return i.a * 2; }")
        .await
        .unwrap();
    // With a manifest section, as the registry stores it.
    let manifest = temper::artifact::ArtifactManifest::sandbox(
        "double",
        "doubles",
        &serde_json::json!({}),
        &serde_json::json!({}),
        &[],
        &[],
        "function execute(i) { return i.a * 2; }",
        false,
    );
    let stored = temper::artifact::embed(&artifact.bytes, &manifest).unwrap();
    for bytes in [artifact.bytes.to_vec(), stored.clone()] {
        let id = blake3::hash(&bytes).to_hex().to_string();
        let tool = rt.load(bytes).await.unwrap();
        assert!(tool.runs_on_engine());
        assert_eq!(tool.id(), id);
        assert_eq!(rt.call(&tool, r#"{"a": 21}"#).await.unwrap().output, "42");
    }
    // A new runtime (a restarted host) on the same cache finds the record.
    let again = runtime_with_caches(
        cache.path(),
        temper::limits::CacheLimits::default(),
        Limits::default(),
    );
    let tool = again.load(stored.clone()).await.unwrap();
    assert!(tool.runs_on_engine());
    assert_eq!(again.call(&tool, r#"{"a": 1}"#).await.unwrap().output, "2");
    // A damaged record is not trusted: the artifact runs as itself.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("bytecode-")
        {
            let mut bytes = std::fs::read(&path).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let third = runtime_with_caches(
        cache.path(),
        temper::limits::CacheLimits::default(),
        Limits::default(),
    );
    let tool = third.load(stored).await.unwrap();
    assert!(!tool.runs_on_engine());
    let out = third.call(&tool, r#"{"a": 4}"#).await.unwrap();
    assert!(out.compiled);
    assert_eq!(out.output, "8");
    // Without a cache, another runtime knows nothing of this artifact.
    let uncached = Runtime::builder().cache_dir(None).build().unwrap();
    let tool = uncached.load(artifact.bytes.to_vec()).await.unwrap();
    assert!(!tool.runs_on_engine());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_artifact_rebuilds_byte_identically_from_its_bytecode() {
    let rt = runtime();
    let req = seed("slugify");
    let built = rt.build(sandbox_code(&req)).await.unwrap();
    let rebuilt = rt
        .artifact_from_bytecode(built.bytecode.to_vec())
        .await
        .unwrap();
    assert_eq!(rebuilt.id, built.id);
    assert!(rebuilt.bytes == built.bytes);
    // Bytes that are not a tool's bytecode are refused, not snapshotted.
    assert!(rt.artifact_from_bytecode(vec![1, 2, 3]).await.is_err());
}

/// A runtime with `slots` pool slots for calls and no pre-warmed instances
/// (every call makes its own), on a cache directory of its own.
fn runtime_without_pre_warming(slots: u32) -> (tempfile::TempDir, Runtime) {
    let cache = tempfile::tempdir().unwrap();
    let caches = temper::limits::CacheLimits {
        warm_per_tool: 0,
        // The engine path is what is measured: no promotion.
        promote_after_calls: 0,
        ..Default::default()
    };
    let rt = Runtime::builder()
        .cache_dir(Some(cache.path().to_path_buf()))
        .max_concurrent_instances(slots)
        .cache_limits(caches)
        .build()
        .expect("runtime");
    (cache, rt)
}

/// Used stores wait for the reaper in pool slots of their own: 6,000 short
/// calls from two tasks on a runtime with 2 call slots never find the pool
/// full.
/// (Before, the reaper's queue and the batch it was dropping could hold
/// every slot, and calls failed as traps under load.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_waiting_for_the_reaper_never_take_a_calls_slot() {
    let (_cache, rt) = runtime_without_pre_warming(2);
    let artifact = rt
        .build("function execute(input) { return input.n * 2; }")
        .await
        .unwrap();
    let tool = rt.tool(&artifact);
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (rt, tool) = (rt.clone(), tool.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u32, Vec::new());
                for _ in 0..3000 {
                    match rt.call(&tool, r#"{"n":21}"#).await {
                        Ok(out) if out.output == "42" => ok += 1,
                        Ok(out) => failed.push(format!("wrong output {}", out.output)),
                        Err(e) => failed.push(e.error.to_string()),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let mut calls = 0;
    for task in tasks {
        let (ok, failed) = task.await.unwrap();
        assert!(
            failed.is_empty(),
            "{} calls failed, first: {}",
            failed.len(),
            failed[0]
        );
        calls += ok;
    }
    assert_eq!(calls, 6000);
}

/// More instances at once than the pool holds: the calls that find no
/// slot fail as `RunError::Instantiate` naming the limit, never as a trap
/// of the tool, and the others still answer correctly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_instance_pool_is_an_instantiation_error_not_a_trap() {
    let (_cache, rt) = runtime_without_pre_warming(1);
    // Busy for 1.5 s: the epoch ticker makes it yield, so the calls'
    // instances are all alive at once (1 call slot + the reaper's 32). The
    // first call's end frees its slot at once (while every core is busy a
    // call drops its own store), so all 48 must have started by then, also
    // on a machine loaded by the other tests.
    let artifact = rt
        .build("function execute() { const end = Date.now() + 1500; let i = 0; while (Date.now() < end) i++; return 'done'; }")
        .await
        .unwrap();
    let tool = rt.tool(&artifact);
    let tasks: Vec<_> = (0..48)
        .map(|_| {
            let (rt, tool) = (rt.clone(), tool.clone());
            tokio::spawn(async move { rt.call(&tool, "{}").await })
        })
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(out) => {
                assert_eq!(out.output, "\"done\"");
                ok += 1;
            }
            Err(failure) => match failure.error {
                RunError::Instantiate { message } => {
                    assert!(message.contains("concurrent"), "{message}");
                    refused += 1;
                }
                other => panic!("expected an instantiation error, got {other:?}"),
            },
        }
    }
    assert!(ok >= 1, "no call answered");
    assert!(refused >= 1, "48 calls at once fit in 33 slots?");
}
