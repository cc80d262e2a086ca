//! Bounds on the work one client can give a host: the forge deadline (the
//! test stage stops, both runs counted) and the bounds on forges and calls
//! in flight (a bounded queue, then a clear busy refusal).

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use temper::forge::{Forge, ForgeConfig, ForgeContext, ForgeError, InvokeError, Stage};
use temper::request::{ForgeRequest, TestCase};
use temper::store::Registry;
use temper::{Limits, Runtime};

fn runtime(timeout_ms: u64) -> Runtime {
    support::runtime_builder()
        .limits(Limits::default().with_timeout(Duration::from_millis(timeout_ms)))
        .build()
        .unwrap()
}

fn forge(dir: &std::path::Path, runtime: Runtime, config: ForgeConfig) -> Forge {
    Forge::builder(runtime, Arc::new(Registry::open(dir).unwrap()))
        .config(config)
        .judge(Arc::new(support::ApproveAll))
        .build()
}

/// A tool over `{a, b}` running `code`, with `cases` test cases.
fn request(name: &str, code: &str, cases: usize) -> ForgeRequest {
    ForgeRequest::from_json(
        &json!({
            "name": name,
            "description": "Adds, slowly when asked.",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"},
            "implementation": {"mode": "sandbox", "code": code},
        })
        .to_string(),
    )
    .map(|mut r| {
        r.test_cases = (0..cases)
            .map(|i| TestCase {
                input: json!({"a": i, "b": 1}),
                expected_output: None,
                ..Default::default()
            })
            .collect();
        r
    })
    .unwrap()
}

const SPIN: &str = "function execute(input) { for (;;) {} }";
/// Busy-waits `input.wait` ms (real clock), then adds.
const WAIT_THEN_ADD: &str = "function execute(input) { const t = Date.now(); \
     while (Date.now() - t < (input.wait || 0)) {} return { sum: input.a + input.b }; }";

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-1", "session-1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forge_deadline_stops_the_test_stage_and_names_the_cases_done() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        forge_deadline_ms: 1000,
        ..ForgeConfig::default()
    };
    // 20 cases that each run to the 200 ms call timeout: 4 s for the first
    // run alone, 8 s with the repeat run.
    let f = forge(dir.path(), runtime(200), config);
    let err = f
        .forge(&request("spinner", SPIN, 20), &ctx())
        .await
        .unwrap_err();
    let ForgeError::Deadline {
        limit_ms,
        done,
        total,
    } = &err
    else {
        panic!("expected the forge deadline, got: {err}");
    };
    assert_eq!((*limit_ms, *total), (1000, 40));
    assert!(*done < 20, "{done} cases ran past a 1 s deadline");
    assert_eq!(err.stage(), Stage::Test);
    assert_eq!(
        err.to_string(),
        format!("test: forge deadline of 1 s reached after {done} of 40 cases")
    );
    assert!(
        f.session_tools(&ctx()).unwrap().is_empty(),
        "nothing registered"
    );
    let last = f.store().audit_entries(0, 1000).unwrap().pop().unwrap();
    assert_eq!(last.payload["stage"], "test");
    assert_eq!(last.payload["approved"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repeat_run_counts_inside_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        forge_deadline_ms: 1500,
        ..ForgeConfig::default()
    };
    // 4 passing cases of 300 ms: 1.2 s for the first run, 2.4 s with the
    // repeat run, past a 1.5 s deadline.
    let mut req = request("slow_adder", WAIT_THEN_ADD, 4);
    for case in &mut req.test_cases {
        case.input["wait"] = json!(300);
    }
    let f = forge(dir.path(), runtime(5000), config);
    let err = f.forge(&req, &ctx()).await.unwrap_err();
    assert!(
        matches!(err, ForgeError::Deadline { total: 8, .. }),
        "expected the forge deadline over both runs, got: {err}"
    );
    // Under a deadline long enough for both runs it registers.
    let dir2 = tempfile::tempdir().unwrap();
    let f = forge(dir2.path(), runtime(5000), ForgeConfig::default());
    f.forge(&req, &ctx()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forges_past_the_in_flight_and_queue_bounds_are_refused_as_busy() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        max_in_flight_forges: 1,
        max_queued: 0,
        ..ForgeConfig::default()
    };
    let f = forge(dir.path(), runtime(5000), config);
    let mut slow = request("slow_adder", WAIT_THEN_ADD, 2);
    for case in &mut slow.test_cases {
        case.input["wait"] = json!(400);
    }
    // The first forge signals when it reaches its test stage.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = Mutex::new(Some(tx));
    let first = {
        let f = f.clone();
        tokio::spawn(async move {
            let signal = move |stage: Stage| {
                if stage == Stage::Test
                    && let Some(tx) = tx.lock().unwrap().take()
                {
                    let _ = tx.send(());
                }
            };
            f.forge_with_progress(&slow, &ctx(), &signal).await
        })
    };
    rx.await.unwrap();
    let fast = request("fast_adder", WAIT_THEN_ADD, 1);
    let err = f.forge(&fast, &ctx()).await.unwrap_err();
    assert!(matches!(err, ForgeError::Busy(_)), "{err}");
    assert_eq!(err.stage(), Stage::Admission);
    assert_eq!(
        err.to_string(),
        "admission: busy: 1 forges in flight and 0 queued (the most this host takes); try again later"
    );
    first.await.unwrap().unwrap();
    // The slot is free again.
    f.forge(&fast, &ctx()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_in_flight_and_queue_bounds_are_refused_as_busy() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        max_in_flight_calls: 1,
        max_queued: 0,
        ..ForgeConfig::default()
    };
    let f = forge(dir.path(), runtime(5000), config);
    f.forge(&request("adder", WAIT_THEN_ADD, 1), &ctx())
        .await
        .unwrap();
    // The slow call retries while a quick call holds the only slot.
    let slow = {
        let f = f.clone();
        tokio::spawn(async move {
            loop {
                match f
                    .invoke("adder", &json!({"a": 1, "b": 2, "wait": 1500}), &ctx())
                    .await
                {
                    Err(InvokeError::Busy(_)) => tokio::task::yield_now().await,
                    other => return other,
                }
            }
        })
    };
    // While the slow call holds the only slot, another call is refused at
    // once; before it takes the slot, quick calls still pass.
    let mut busy = None;
    let mut passed = 0;
    while busy.is_none() && !slow.is_finished() {
        match f.invoke("adder", &json!({"a": 1, "b": 1}), &ctx()).await {
            Ok(_) => passed += 1,
            Err(e @ InvokeError::Busy(_)) => busy = Some(e),
            Err(e) => panic!("{e}"),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let busy = busy.expect("a call was refused while the slot was held");
    assert_eq!(
        busy.to_string(),
        "invoke: busy: 1 calls in flight and 0 queued (the most this host takes); try again later"
    );
    let out = slow.await.unwrap().unwrap();
    assert_eq!(out.output, json!({"sum": 3}));
    // A refused call never ran: it is not in the tool's stats.
    let stats = f.tool_stats("adder", &ctx()).unwrap();
    assert_eq!(stats.total_calls, passed + 1);
}

/// The forge's caches hold one entry each here: every call past the first
/// tool reloads what was evicted from the registry, and every output stays
/// right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_evicted_from_the_forge_caches_are_reloaded_and_stay_correct() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        cache: temper::forge::CacheCapacity {
            tools: 1,
            compose: 1,
            manifests: 1,
            schemas: 1,
            names: 1,
        },
        ..ForgeConfig::default()
    };
    let f = forge(dir.path(), runtime(5000), config);
    let add = "function execute(input) { return { sum: input.a + input.b }; }";
    let mul = "function execute(input) { return { sum: input.a * input.b }; }";
    f.forge(&request("adder", add, 1), &ctx()).await.unwrap();
    f.forge(&request("multiplier", mul, 1), &ctx())
        .await
        .unwrap();
    for round in 0..3 {
        let a = f
            .invoke("adder", &json!({"a": 6, "b": round}), &ctx())
            .await
            .unwrap();
        assert_eq!(a.output, json!({"sum": 6 + round}));
        let m = f
            .invoke("multiplier", &json!({"a": 6, "b": round}), &ctx())
            .await
            .unwrap();
        assert_eq!(m.output, json!({"sum": 6 * round}));
    }
    // A schema evicted and compiled again still refuses bad input.
    let err = f
        .invoke("adder", &json!("not an object"), &ctx())
        .await
        .unwrap_err();
    assert!(matches!(err, InvokeError::Input { .. }), "{err}");
}

/// `temper run`: a policy file's `[limits]` apply, and a flag overrides the
/// file's value for its limit only.
#[test]
fn the_cli_applies_the_policy_files_limits_and_flags_override_them() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("spin.js");
    std::fs::write(&tool, SPIN).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[limits]\ntimeout_ms = 300\n").unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run".to_string(),
            tool.display().to_string(),
            "--policy".into(),
            policy.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        support::temper_json(dir.path(), &[], args)
    };
    let (ok, doc, err) = run(&[]);
    assert!(!ok, "{doc} {err}");
    assert!(
        doc.to_string().contains("timed out after 300 ms"),
        "{doc} {err}"
    );
    let (ok, doc, err) = run(&["--timeout-ms", "600"]);
    assert!(!ok, "{doc} {err}");
    assert!(
        doc.to_string().contains("timed out after 600 ms"),
        "{doc} {err}"
    );
}

/// With a single call slot and no queue, a compose tool still runs: its
/// steps ride on its own call's slot instead of queueing for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compose_steps_do_not_take_call_slots_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let config = ForgeConfig {
        max_in_flight_calls: 1,
        max_queued: 0,
        ..ForgeConfig::default()
    };
    let f = forge(dir.path(), runtime(5000), config);
    f.forge(&request("adder", WAIT_THEN_ADD, 1), &ctx())
        .await
        .unwrap();
    let pipeline = ForgeRequest::from_json(
        &json!({
            "name": "add_twice",
            "description": "Adds b to a twice.",
            "inputSchema": {"type": "object"},
            "implementation": {"mode": "compose", "steps": [
                {"name": "first", "tool": "adder", "inputMapping": {"a": "$input.a", "b": "$input.b"}},
                {"name": "second", "tool": "adder", "inputMapping": {"a": "$prev.sum", "b": "$input.b"}}
            ]},
            "testCases": [{"input": {"a": 1, "b": 2}, "expectedOutput": {"sum": 5}}],
        })
        .to_string(),
    )
    .unwrap();
    f.forge(&pipeline, &ctx()).await.unwrap();
    let out = f
        .invoke("add_twice", &json!({"a": 10, "b": 5}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"sum": 20}));
}
