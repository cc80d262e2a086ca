//! The seed examples through the library and the CLI, async tools, and the
//! errors a tool's build or run reports (thrown, syntax, no `execute`, size,
//! invalid input).

use crate::support;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;

use std::time::Duration;
use support::{cache_dir, temper_json};

use temper::{BuildError, Limits, RunError};

use super::{fixtures, run_both_paths, runtime, runtime_with, sandbox_code, seed};

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
