//! Failing, looping and slow steps of a compose tool.

use std::time::{Duration, Instant};

use serde_json::json;
use temper::policy::HostPolicy;
use temper::{Limits, RunError};

use super::{compose, ctx, echo, forge_on, forged, native, run_failure, runtime_with, sandbox};

// ---- 5. failing, looping and slow steps ------------------------------------------

const THROWER: &str = "function execute(input) {\n  if (input.boom) {\n    throw new Error('kaboom: ' + input.boom);\n  }\n  return { ok: true };\n}";
const SPINNER: &str = "function execute(input) {\n  if (input.spin) {\n    while (true) {}\n  }\n  return { ok: true };\n}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_looping_and_slow_steps() {
    let limit = Duration::from_millis(1000);
    let dir = tempfile::tempdir().unwrap();
    let forge = forge_on(
        runtime_with(
            HostPolicy::deny_all(),
            Limits::default().with_timeout(limit),
        ),
        dir.path(),
    );
    echo(&forge);
    native(&forge, "slow", |input| async move {
        if input["sleep"] == json!(true) {
            tokio::time::sleep(Duration::from_secs(30)).await;
        } else if let Some(ms) = input["ms"].as_u64() {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        Ok(json!({"slept": false}))
    });
    forged(
        &forge,
        &sandbox("thrower", THROWER, &[], &[json!({})]),
        &ctx(),
    )
    .await;
    forged(
        &forge,
        &sandbox("spinner", SPINNER, &[], &[json!({})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "before", "tool": "echo", "inputMapping": {"boom": "$input.boom"}},
        {"name": "explode", "tool": "thrower", "inputMapping": {"boom": "$prev.boom"}},
        {"name": "after", "tool": "echo", "inputMapping": {"after": "$prev.ok"}},
    ]);
    forged(
        &forge,
        &compose("throws", steps, &[json!({"boom": ""})]),
        &ctx(),
    )
    .await;
    // Each looping/sleeping step comes after a 50 ms pause, so the step's
    // own budget (the runtime timeout, started when the step starts) ends
    // well after the run's: the run's timeout is what fires.
    let steps = json!([
        {"name": "pause", "tool": "slow", "inputMapping": {"ms": 50}},
        {"name": "spin", "tool": "spinner", "inputMapping": {"spin": "$input.spin"}},
    ]);
    forged(
        &forge,
        &compose("spins", steps, &[json!({"spin": false})]),
        &ctx(),
    )
    .await;
    let steps = json!([
        {"name": "pause", "tool": "slow", "inputMapping": {"ms": 50}},
        {"name": "nap", "tool": "slow", "inputMapping": {"sleep": "$input.sleep"}},
        {"name": "after", "tool": "echo", "inputMapping": {"x": "$prev.slept"}},
    ]);
    forged(
        &forge,
        &compose("sleeps", steps, &[json!({"sleep": false})]),
        &ctx(),
    )
    .await;

    // A throwing JS step: the step is named, with the JS message.
    let failure = run_failure(&forge, "throws", json!({"boom": "now"}), &ctx()).await;
    assert_eq!(
        failure.error,
        RunError::Step {
            index: 1,
            step: "explode".into(),
            tool: "thrower".into(),
            message:
                "invoke thrower: run: the tool threw: Error: kaboom: now (at line 3, column 34)"
                    .into(),
        }
    );
    let out = forge
        .invoke("throws", &json!({"boom": ""}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"after": true}));

    // A step looping forever: the run's timeout.
    let started = Instant::now();
    let failure = run_failure(&forge, "spins", json!({"spin": true}), &ctx()).await;
    assert_eq!(failure.error, RunError::Timeout { limit_ms: 1000 });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let out = forge
        .invoke("spins", &json!({"spin": false}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"ok": true}));
    // The looping tool on its own: its own timeout.
    let failure = run_failure(&forge, "spinner", json!({"spin": true}), &ctx()).await;
    assert_eq!(failure.error, RunError::Timeout { limit_ms: 1000 });

    // A native step sleeping past the timeout.
    let started = Instant::now();
    let failure = run_failure(&forge, "sleeps", json!({"sleep": true}), &ctx()).await;
    assert_eq!(failure.error, RunError::Timeout { limit_ms: 1000 });
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let out = forge
        .invoke("sleeps", &json!({"sleep": false}), &ctx())
        .await
        .unwrap();
    assert_eq!(out.output, json!({"x": false}));

    let stats = forge.tool_stats("spins", &ctx()).unwrap();
    assert_eq!((stats.successes, stats.total_calls), (1, 2));
}
