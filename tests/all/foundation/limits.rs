//! Resource limits: an infinite loop times out, a memory bomb, unbounded
//! recursion and a 10 MB output are clean errors, and the host keeps working.

use std::time::{Duration, Instant};

use temper::{Limits, RunError};

use super::{run_both_paths, runtime, runtime_with};

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
