//! The shared engine's pre-warmed instances: a clean start for each call,
//! grants kept apart, the full time limit, and caches evicting under small
//! caps.

use crate::support;

use std::time::{Duration, Instant};

use temper::{Limits, RunError, Runtime};

use super::{runtime, runtime_with, runtime_with_caches};

// ------------------------------------------------------------ shared engine, pre-warmed instances

/// Waits until `tool` has a pre-warmed instance waiting.
async fn wait_warm(rt: &Runtime, tool: &temper::Tool) {
    wait_ready(rt, tool, 1).await;
}

/// Waits until `tool` has at least `n` pre-warmed instances waiting.
async fn wait_ready(rt: &Runtime, tool: &temper::Tool, n: usize) {
    let started = Instant::now();
    while rt.warm_ready(tool) < n {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{n} pre-warmed instances never appeared"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
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
async fn a_retire_after_scope_starts_the_refill_when_it_ends() {
    let rt = runtime();
    let artifact = rt
        .build("function execute(input) { return { n: input.n + 1 }; }")
        .await
        .unwrap();
    let tool = rt.tool(&artifact);
    rt.call(&tool, r#"{"n":1}"#).await.unwrap();
    // Up to three tries: a refill task that filled the pool may still be
    // about to end when the call below takes an instance (on a loaded
    // machine), and would then make the next one itself. Without the
    // deferral every try sees the pool refilled inside the scope.
    let mut deferred = false;
    for _ in 0..3 {
        // The pool full for the tool (two instances by default), and its
        // refill task given time to end.
        wait_ready(&rt, &tool, 2).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let full = rt.warm_ready(&tool);
        // A thread that answers calls itself (as the stdio reader does), in
        // a scope: the call takes a pre-warmed instance, and its refill
        // waits for the scope's end.
        let handle = tokio::runtime::Handle::current();
        let (rt2, tool2) = (rt.clone(), tool.clone());
        let (output, during) = std::thread::spawn(move || {
            let scope = Runtime::retire_after();
            let out = handle.block_on(rt2.call(&tool2, r#"{"n":2}"#)).unwrap();
            std::thread::sleep(Duration::from_millis(100));
            let during = rt2.warm_ready(&tool2);
            drop(scope);
            (out.output, during)
        })
        .join()
        .unwrap();
        assert_eq!(output, r#"{"n":3}"#);
        // Started when the scope ended: the pool fills again.
        wait_ready(&rt, &tool, full).await;
        if during == full - 1 {
            deferred = true;
            break;
        }
    }
    assert!(deferred, "a refill started inside the scope in every try");
}
