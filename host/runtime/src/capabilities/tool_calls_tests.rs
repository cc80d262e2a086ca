//! Tool calls through the whole runtime path, with a test [`ToolCaller`]
//! that runs callees on the same runtime (as the forge does, minus the
//! registry): grants, deny by default, computed names, the JS API, callee
//! failures, the depth cap, the tree's deadline and the caps.

use super::*;
use crate::runtime::{Runtime, Tool};
use crate::{Limits, RunError};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Runs callees on the runtime: a registered JS tool, or a canned output
/// (standing for a hub tool, which has no sandbox caps of its own).
#[derive(Default)]
struct TestCaller {
    tools: Mutex<HashMap<String, (Runtime, Tool)>>,
    canned: Mutex<HashMap<String, String>>,
    calls: AtomicUsize,
    max_depth: AtomicUsize,
}

impl ToolCaller for TestCaller {
    fn call_tool(&self, request: ToolCallRequest) -> ToolCallFuture<'_> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.max_depth.fetch_max(request.depth, Ordering::SeqCst);
            if let Some(out) = self.canned.lock().unwrap().get(&request.tool).cloned() {
                return Ok(ToolCallOutput {
                    output: out,
                    logs: Vec::new(),
                });
            }
            let found = self.tools.lock().unwrap().get(&request.tool).cloned();
            let Some((rt, tool)) = found else {
                return Err(ToolCallFailure {
                    message: format!("no tool {:?}", request.tool),
                    logs: Vec::new(),
                });
            };
            rt.call(&tool, &request.input)
                .await
                .map(|o| ToolCallOutput {
                    output: o.output,
                    logs: o.logs,
                })
                .map_err(|f| ToolCallFailure {
                    message: f.error.to_string(),
                    logs: f.logs,
                })
        })
    }
}

struct Host {
    rt: Runtime,
    caller: Arc<TestCaller>,
}

impl Host {
    /// A runtime whose shared engine is compiled already (so no call below
    /// pays for it).
    async fn new(limits: Limits) -> Self {
        let rt = Runtime::builder().limits(limits).build().unwrap();
        rt.warm_up().await.unwrap();
        Self {
            rt,
            caller: Arc::default(),
        }
    }

    /// Builds `code` granted `allowlist`, run by the test caller, and
    /// registers it as `name` for other tools to call.
    async fn tool(&self, name: &str, code: &str, allowlist: &[&str]) -> Tool {
        let artifact = self.rt.build(code).await.unwrap();
        let allowlist: Vec<String> = allowlist.iter().map(|s| s.to_string()).collect();
        let tool = self
            .rt
            .grant(&self.rt.tool(&artifact), &allowlist)
            .unwrap()
            .with_tool_caller(self.caller.clone());
        self.caller
            .tools
            .lock()
            .unwrap()
            .insert(name.to_string(), (self.rt.clone(), tool.clone()));
        tool
    }
}

fn limits() -> Limits {
    Limits::default().with_timeout(Duration::from_secs(5))
}

const ADD: &str =
    r#"function execute(i) { console.log("adding", i.a, i.b); return { sum: i.a + i.b }; }"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_calls_run_with_both_spellings_and_callee_console_lines_are_prefixed() {
    let host = Host::new(limits()).await;
    host.tool("add", ADD, &[]).await;
    let caller = host
        .tool(
            "caller",
            r#"async function execute(i) {
                const a = await tools.add({ a: 1, b: 2 });
                const b = await callTool("add", { a: a.sum, b: 10 });
                console.log("done");
                return { a: a.sum, b: b.sum };
            }"#,
            &["tool:add"],
        )
        .await;
    let out = host.rt.call(&caller, "{}").await.unwrap();
    assert_eq!(out.output, r#"{"a":3,"b":13}"#);
    let lines: Vec<&str> = out.logs.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        lines,
        ["[tool add] adding 1 2", "[tool add] adding 3 10", "done"]
    );
    assert_eq!(host.caller.max_depth.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ungranted_tool_is_denied_computed_names_included() {
    let host = Host::new(limits()).await;
    host.tool("add", ADD, &[]).await;
    host.tool("slugify", ADD, &[]).await;
    // No grant at all.
    let bare = host
        .tool(
            "bare",
            "async function execute() { return await tools.add({a: 1, b: 1}); }",
            &[],
        )
        .await;
    let err = host.rt.call(&bare, "{}").await.unwrap_err().error;
    assert_eq!(
        err,
        RunError::CapabilityDenied {
            capability: "tool:add".into()
        }
    );
    assert_eq!(
        err.to_string(),
        "run: capability not granted: tool:add (the tool's implementation.allowlist does not list \"tool:add\": add it and forge the tool again)"
    );
    // Granted `add` only: a computed name reaching `slugify` is refused,
    // through `tools[...]` and through `callTool`.
    for body in [
        r#"return await tools["slu" + "gify"]({a: 1, b: 2});"#,
        r#"const n = ["slu", "gify"].join(""); return await callTool(n, {a: 1, b: 2});"#,
    ] {
        let code = format!("async function execute() {{ {body} }}");
        let tool = host.tool("computed", &code, &["tool:add"]).await;
        let err = host.rt.call(&tool, "{}").await.unwrap_err().error;
        assert_eq!(
            err,
            RunError::CapabilityDenied {
                capability: "tool:slugify".into()
            },
            "{body}"
        );
    }
    assert_eq!(
        host.caller.calls.load(Ordering::SeqCst),
        0,
        "no refused call reached the embedder"
    );
    // A caught refusal is an error with code ECAPABILITY.
    let caught = host
        .tool(
            "caught",
            r#"async function execute() { try { await tools.slugify({}); } catch (e) { return { code: e.code, message: e.message }; } }"#,
            &["tool:add"],
        )
        .await;
    let out = host.rt.call(&caught, "{}").await.unwrap();
    assert_eq!(
        out.output,
        r#"{"code":"ECAPABILITY","message":"capability not granted: tool:slugify"}"#
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_tools_are_never_callable_even_when_granted() {
    let host = Host::new(limits()).await;
    for name in NEVER_CALLABLE {
        host.caller
            .canned
            .lock()
            .unwrap()
            .insert(name.to_string(), "{}".into());
        let code = format!("async function execute() {{ return await callTool({name:?}, {{}}); }}");
        let tool = host.tool("meta", &code, &[&format!("tool:{name}")]).await;
        let err = host.rt.call(&tool, "{}").await.unwrap_err().error;
        assert_eq!(
            err,
            RunError::CapabilityDenied {
                capability: format!("tool:{name}")
            }
        );
    }
    assert_eq!(host.caller.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callee_that_throws_traps_or_runs_out_of_memory_is_an_etool_error() {
    let host = Host::new(limits().with_memory_bytes(32 << 20)).await;
    host.tool(
        "thrower",
        r#"function execute() { console.error("about to fail"); throw new RangeError("bad value"); }"#,
        &[],
    )
    .await;
    host.tool(
        "hog",
        "function execute() { const a = []; for (;;) a.push(new Array(1e6).fill(1)); }",
        &[],
    )
    .await;
    host.tool("undef", "function execute() { }", &[]).await;
    let caller = host
        .tool(
            "caller",
            r#"async function execute(i) {
                try { await callTool(i.callee, {}); return { ok: true }; }
                catch (e) { return { name: e.name, code: e.code, tool: e.tool, message: e.message }; }
            }"#,
            &["tool:thrower", "tool:hog", "tool:undef"],
        )
        .await;
    let run = |callee: &str| {
        let input = format!(r#"{{"callee":"{callee}"}}"#);
        let (rt, caller) = (host.rt.clone(), caller.clone());
        async move {
            let out = rt.call(&caller, &input).await.unwrap();
            let v: serde_json::Value = serde_json::from_str(&out.output).unwrap();
            (v, out.logs)
        }
    };
    let (v, logs) = run("thrower").await;
    assert_eq!(v["name"], "Error");
    assert_eq!(v["code"], "ETOOL");
    assert_eq!(v["tool"], "thrower");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("RangeError: bad value"),
        "{v}"
    );
    assert_eq!(logs[0].message, "[tool thrower] about to fail");
    let (v, _) = run("hog").await;
    assert_eq!(
        (v["code"].as_str(), v["tool"].as_str()),
        (Some("ETOOL"), Some("hog"))
    );
    assert!(
        v["message"].as_str().unwrap().contains("out of memory"),
        "{v}"
    );
    let (v, _) = run("undef").await;
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("returned undefined"),
        "{v}"
    );
    // Uncaught, the callee's failure is the caller's JS error, naming it.
    let uncaught = host
        .tool(
            "uncaught",
            "async function execute() { return await tools.thrower({}); }",
            &["tool:thrower"],
        )
        .await;
    let RunError::Js { error } = host.rt.call(&uncaught, "{}").await.unwrap_err().error else {
        panic!("not a JS error");
    };
    assert!(error.message.contains("bad value"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_calling_itself_stops_at_the_depth_cap() {
    let host = Host::new(limits()).await;
    let selfie = host
        .tool(
            "selfie",
            r#"async function execute(i) { return { depth: (await tools.selfie({})).depth + 1 }; }"#,
            &["tool:selfie"],
        )
        .await;
    let RunError::Js { error } = host.rt.call(&selfie, "{}").await.unwrap_err().error else {
        panic!("not a JS error");
    };
    assert!(
        error
            .message
            .contains(&format!("nest more than {MAX_TOOL_CALL_DEPTH} levels deep")),
        "{error}"
    );
    assert_eq!(
        host.caller.max_depth.load(Ordering::SeqCst),
        MAX_TOOL_CALL_DEPTH
    );
    assert_eq!(
        host.caller.calls.load(Ordering::SeqCst),
        MAX_TOOL_CALL_DEPTH
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutual_recursion_bomb_is_bounded_by_depth_and_the_trees_deadline() {
    let timeout = Duration::from_secs(3);
    let host = Host::new(limits().with_timeout(timeout)).await;
    // Each calls the other twice, swallowing failures: 2^8 calls deep down
    // unless something stops it.
    let bomb = |other: &str| {
        format!(
            r#"async function execute() {{
                for (let k = 0; k < 2; k++) {{ try {{ await tools.{other}({{}}); }} catch (e) {{}} }}
                return {{}};
            }}"#
        )
    };
    let ping = host.tool("ping", &bomb("pong"), &["tool:pong"]).await;
    host.tool("pong", &bomb("ping"), &["tool:ping"]).await;
    let started = Instant::now();
    let result = host.rt.call(&ping, "{}").await;
    let took = started.elapsed();
    assert!(
        host.caller.max_depth.load(Ordering::SeqCst) <= MAX_TOOL_CALL_DEPTH,
        "depth {}",
        host.caller.max_depth.load(Ordering::SeqCst)
    );
    // At most 2 + 4 + ... + 2^8 callees ever started.
    assert!(host.caller.calls.load(Ordering::SeqCst) <= (1 << (MAX_TOOL_CALL_DEPTH + 1)) - 2);
    match result {
        Ok(out) => assert_eq!(out.output, "{}"),
        Err(f) => assert!(matches!(f.error, RunError::Timeout { .. }), "{}", f.error),
    }
    assert!(
        took < timeout + Duration::from_secs(2),
        "the tree ran {took:?}, past its deadline of {timeout:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callee_that_never_returns_is_bounded_by_the_outer_deadline() {
    let timeout = Duration::from_millis(800);
    let host = Host::new(limits().with_timeout(timeout)).await;
    host.tool("spin", "function execute() { for (;;) {} }", &[])
        .await;
    let caller = host
        .tool(
            "caller",
            "async function execute() { try { await tools.spin({}); } catch (e) {} for (;;) {} }",
            &["tool:spin"],
        )
        .await;
    let started = Instant::now();
    let err = host.rt.call(&caller, "{}").await.unwrap_err().error;
    let took = started.elapsed();
    assert!(matches!(err, RunError::Timeout { .. }), "{err}");
    // Not 2 × the timeout: the callee had only what was left of the tree's.
    assert!(took < timeout * 2, "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callee_input_and_output_are_capped() {
    let host = Host::new(limits().with_output_bytes(1 << 20)).await;
    // A callee that is not a sandbox tool (a hub tool) returning 100 MiB:
    // the caller's host refuses to take it in.
    let huge = format!("\"{}\"", "x".repeat(100 << 20));
    host.caller
        .canned
        .lock()
        .unwrap()
        .insert("huge".into(), huge);
    host.tool("add", ADD, &[]).await;
    let caller = host
        .tool(
            "caller",
            r#"async function execute(i) {
                const out = {};
                try { await tools.huge({}); } catch (e) { out.huge = [e.code, e.message]; }
                try { await tools.add({ a: "y".repeat(2 << 20), b: 1 }); } catch (e) { out.big = [e.code, e.message]; }
                return out;
            }"#,
            &["tool:huge", "tool:add"],
        )
        .await;
    let out = host.rt.call(&caller, "{}").await.unwrap();
    let v: serde_json::Value = serde_json::from_str(&out.output).unwrap();
    assert_eq!(v["huge"][0], "ETOOL");
    assert!(
        v["huge"][1].as_str().unwrap().contains(&format!(
            "output is {} bytes, over the 1048576-byte limit",
            (100 << 20) + 2
        )),
        "{v}"
    );
    assert_eq!(v["big"][0], "ETOOL");
    assert!(v["big"][1].as_str().unwrap().contains("input is"), "{v}");
    // Only the huge one reached the embedder; the big input was refused first.
    assert_eq!(host.caller.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_callee_returning_100_mib_fails_in_its_own_instance() {
    let host = Host::new(limits()).await;
    host.tool(
        "big",
        r#"function execute() { return { s: "x".repeat(100 * 1024 * 1024) }; }"#,
        &[],
    )
    .await;
    let caller = host
        .tool(
            "caller",
            r#"async function execute() { try { await tools.big({}); return {}; } catch (e) { return { code: e.code, message: e.message }; } }"#,
            &["tool:big"],
        )
        .await;
    let out = host.rt.call(&caller, "{}").await.unwrap();
    let v: serde_json::Value = serde_json::from_str(&out.output).unwrap();
    assert_eq!(v["code"], "ETOOL");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("over the") || message.contains("out of memory"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_tool_caller_a_granted_call_fails_saying_so() {
    let rt = Runtime::builder().build().unwrap();
    let artifact = rt
        .build("async function execute() { try { await tools.add({}); } catch (e) { return [e.code, e.message]; } }")
        .await
        .unwrap();
    let tool = rt
        .grant(&rt.tool(&artifact), &["tool:add".to_string()])
        .unwrap();
    let out = rt.call(&tool, "{}").await.unwrap();
    assert!(out.output.starts_with(r#"["ETOOL","#), "{}", out.output);
    assert!(out.output.contains("no tool caller"), "{}", out.output);
    assert!(
        rt.grant(&rt.tool(&artifact), &["tool:".to_string()])
            .is_err()
    );
}
