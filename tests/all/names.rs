//! Reserved names and the session cap's way out, as an agent meets them:
//! every built-in tool's name is refused for forge and import with an
//! instruction, `tools/list` never lists a name twice (an upstream that
//! advertises `run_code` included), `delete_tool` frees a slot (audited,
//! announced, refused clearly for what it cannot delete), and a scripted
//! agent that fills its session follows the refusal's text to a forge
//! that succeeds.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use temper::forge::builtins::BUILTIN_TOOL_NAMES;
use temper::forge::judge::RulesJudge;
use temper::forge::{Forge, ForgeContext};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{AuditKind, Registry, Tier};
use temper::{Limits, Runtime};

use crate::support;
use crate::support::mcp_stdio::{McpStdio, mcp_python, tool_output, tools_policy, write_file};

const ECHO: &str = "function execute(i) {\n  return { n: i.n };\n}";

/// A sandbox request named `name` with three test cases (the rules
/// judge's "well tested").
fn request(name: &str) -> Value {
    json!({
        "name": name,
        "description": format!("Echoes n ({name})."),
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "implementation": {"mode": "sandbox", "code": ECHO, "allowlist": []},
        "testCases": [
            {"input": {"n": 1}, "expectedOutput": {"n": 1}},
            {"input": {"n": 2}, "expectedOutput": {"n": 2}},
            {"input": {"n": 3}, "expectedOutput": {"n": 3}},
        ],
    })
}

fn runtime() -> Runtime {
    support::runtime_builder()
        .policy(HostPolicy::deny_all())
        .limits(Limits::default())
        .build()
        .expect("runtime")
}

fn forge_in(dir: &Path) -> (Forge, Arc<Registry>) {
    let registry = Arc::new(Registry::open(dir).unwrap());
    let forge = Forge::builder(runtime(), registry.clone())
        .judge(Arc::new(RulesJudge::standard()))
        .build();
    (forge, registry)
}

fn reserved(name: &str) -> String {
    format!("validate: name {name:?} is reserved by a built-in tool; choose another name")
}

/// Names in a `tools/list`, each asserted to appear once.
fn unique_names(tools: &[Value]) -> Vec<String> {
    let names: Vec<String> = tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    let set: BTreeSet<&String> = names.iter().collect();
    assert_eq!(set.len(), names.len(), "a name listed twice: {names:?}");
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_name_is_refused_for_forge_and_import_with_an_instruction() {
    let dir = tempfile::tempdir().unwrap();
    let (forge, _) = forge_in(dir.path());
    let ctx = ForgeContext::new("agent-a", "s1");
    for name in BUILTIN_TOOL_NAMES {
        let doc = request(name);
        let req = ForgeRequest::from_json(&doc.to_string()).unwrap();
        let err = forge.forge(&req, &ctx).await.unwrap_err();
        assert_eq!(err.to_string(), reserved(name), "forge of {name}");

        // An artifact built under the name without the forge's checks
        // (another host, an older Temper) is refused on import alike.
        let built = temper::forge::build::build_sandbox(forge.runtime(), &req, true)
            .await
            .unwrap();
        for tier in [Tier::Session, Tier::Agent] {
            let err = forge
                .import(built.artifact.bytes.to_vec(), &ctx, tier)
                .await
                .unwrap_err();
            assert_eq!(err.to_string(), reserved(name), "import of {name}");
        }

        // An AgentOS package under the name: refused before a build.
        let package = json!({
            "schemaVersion": "agentos.emergent-tool.v1",
            "packageType": "emergent-tool",
            "tool": {
                "name": name, "description": "d",
                "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                "implementation": {"mode": "sandbox", "code": ECHO, "allowlist": []},
            },
        });
        let tests = vec![serde_json::from_value(json!({"input": {"n": 1}})).unwrap()];
        let err = forge
            .import_agentos(&package.to_string(), Some(tests), &ctx, Tier::Session)
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), reserved(name), "AgentOS import of {name}");
    }
    assert!(forge.visible_tools(&ctx).unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_a_session_tool_only_audited_and_refuses_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (forge, registry) = forge_in(dir.path());
    let mine = ForgeContext::new("agent-a", "s1");
    let other_session = ForgeContext::new("agent-a", "s2");
    let other_agent = ForgeContext::new("agent-b", "s1");
    for (ctx, name) in [(&mine, "alpha"), (&mine, "beta"), (&other_session, "gamma")] {
        let req = ForgeRequest::from_json(&request(name).to_string()).unwrap();
        forge.forge(&req, ctx).await.unwrap();
    }
    assert_eq!(forge.session_slots_left(&mine).unwrap(), 8);

    // Another session's tool, and the same session id of another agent:
    // not there to delete, and the refusal lists what is.
    let err = forge.delete_session_tool("gamma", &mine).unwrap_err();
    assert_eq!(
        err.to_string(),
        "delete: session \"s1\" has no tool named \"gamma\"; its tools: alpha, beta"
    );
    let err = forge
        .delete_session_tool("alpha", &other_agent)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "delete: session \"s1\" has no tool named \"alpha\"; it holds no tools (only session-tier tools can be deleted)"
    );
    let err = forge.delete_session_tool("run_code", &mine).unwrap_err();
    assert_eq!(
        err.to_string(),
        "delete: \"run_code\" is a built-in tool and cannot be deleted"
    );

    // Promotion's refusal counts in good grammar.
    forge.invoke("beta", &json!({"n": 1}), &mine).await.unwrap();
    let err = forge.promote("beta", &mine, None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "promote: \"beta\" has 1 successful use; promotion needs at least 5"
    );

    let deleted = forge.delete_session_tool("alpha", &mine).unwrap();
    assert_eq!(deleted.name, "alpha");
    assert_eq!(forge.session_slots_left(&mine).unwrap(), 9);
    let names: Vec<String> = forge
        .visible_tools(&mine)
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["beta"]);
    // The other session keeps its tool.
    assert_eq!(forge.visible_tools(&other_session).unwrap().len(), 1);

    let entries = registry.audit_entries(0, 1000).unwrap();
    let deletion = entries
        .iter()
        .find(|e| e.kind == AuditKind::Deletion)
        .expect("a deletion entry");
    assert_eq!(deletion.subject, "alpha");
    assert_eq!(deletion.agent.as_deref(), Some("agent-a"));
    assert_eq!(deletion.payload["session"], "s1");
    assert_eq!(deletion.payload["agent"], "agent-a");
    assert_eq!(deletion.payload["reason"], "deleted by its agent");
    assert!(registry.verify_audit().is_ok());

    // An agent-tier tool is not deleted: the refusal says where it is.
    let cfg = temper::forge::ForgeConfig {
        promotion_threshold: temper::forge::PromotionThreshold {
            uses: 0,
            confidence: 0.0,
        },
        ..Default::default()
    };
    let dir2 = tempfile::tempdir().unwrap();
    let forge2 = Forge::builder(runtime(), Arc::new(Registry::open(dir2.path()).unwrap()))
        .judge(Arc::new(RulesJudge::standard()))
        .config(cfg)
        .build();
    let req = ForgeRequest::from_json(&request("kept").to_string()).unwrap();
    forge2.forge(&req, &mine).await.unwrap();
    forge2.promote("kept", &mine, None).await.unwrap();
    let err = forge2.delete_session_tool("kept", &mine).unwrap_err();
    assert_eq!(
        err.to_string(),
        "delete: \"kept\" is in the agent tier, not session \"s1\": only session-tier tools can be deleted (an agent-tier tool stays; an operator removes it)"
    );
}

/// `temper mcp` over stdio on `store` as `agent`.
fn mcp(dir: &Path, store: &Path, agent: &str, extra: &[&str]) -> McpStdio {
    let stderr = dir.join(format!("stderr-{agent}.txt"));
    let mut args = vec!["--store", store.to_str().unwrap(), "--agent", agent];
    args.extend_from_slice(extra);
    McpStdio::start(&args, &stderr, &[], "no-secret-here")
}

/// A tool error's `{stage, error}` text, or a refused forge's first error.
fn refusal(response: &Value) -> String {
    let r = &response["result"];
    assert_eq!(r["isError"], json!(true), "expected a refusal: {response}");
    let body: Value = match r.get("structuredContent") {
        Some(s) => s.clone(),
        None => serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap(),
    };
    if let Some(errors) = body.get("errors") {
        return errors[0].as_str().unwrap().to_string();
    }
    body["error"].as_str().unwrap().to_string()
}

fn forge_description(tools: &[Value]) -> String {
    tools.iter().find(|t| t["name"] == "forge_tool").unwrap()["description"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The scripted agent: it forges ten tools with the default cap and uses
/// one of them five times (three direct calls, two from a `run_code`
/// body), then its eleventh forge is refused. It reads the refusal, does
/// what it says (delete a tool it no longer needs, promote the tool the
/// refusal names) and forges again: registered, with no call made only to
/// qualify.
#[test]
fn a_scripted_agent_follows_the_session_cap_refusal_to_a_successful_forge() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut m = mcp(dir.path(), &store, "scripted", &[]);

    let tools = m.tools();
    unique_names(&tools);
    assert!(
        forge_description(&tools).contains(
            "A session holds at most 10 tools (maxSessionTools); yours has 10 slots left."
        ),
        "{}",
        forge_description(&tools)
    );
    for i in 0..10 {
        let out = tool_output(&m.call("forge_tool", request(&format!("tool_{i}"))));
        assert_eq!(out["success"], true, "{out}");
    }
    // Its work: tool_3 is the one it uses (twice of them from code).
    for n in 0..3 {
        let out = tool_output(&m.call("tool_3", json!({"n": n})));
        assert_eq!(out["n"], n);
    }
    let run = m.call(
        "run_code",
        json!({"code": "const a = await tools.tool_3({n: 7});\nconst b = await tools.tool_3({n: 8});\nreturn a.n + b.n;"}),
    );
    assert_eq!(tool_output(&run)["result"], 15, "{run}");
    let tools = m.tools();
    unique_names(&tools);
    assert!(forge_description(&tools).contains("yours has 0 slots left."));

    let refused = m.call("forge_tool", request("tool_10"));
    let text = refusal(&refused);
    let session = text
        .strip_prefix("validate: session ")
        .and_then(|t| t.split(' ').next())
        .unwrap()
        .to_string();
    assert_eq!(
        text,
        format!(
            "validate: session {session} already holds 10 tools (maxSessionTools); to make room: delete_tool one you no longer need, promote_tool \"tool_3\" (it has the successful calls it needs) to move it to your agent tier, or ask the operator to raise maxSessionTools (--forge-config)"
        )
    );

    // The agent does what the refusal says.
    assert!(text.contains("delete_tool"));
    let (deleted, notes) = m.request_noting(
        "tools/call",
        json!({"name": "delete_tool", "arguments": {"name": "tool_0"}}),
    );
    assert_eq!(tool_output(&deleted)["deleted"]["name"], "tool_0");
    assert!(
        notes
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed"),
        "{notes:?}"
    );
    let promote = text
        .split("promote_tool \"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .unwrap();
    let promoted = tool_output(&m.call("promote_tool", json!({"name": promote})));
    assert_eq!(promoted["tier"], "agent", "{promoted}");

    let tools = m.tools();
    unique_names(&tools);
    assert!(forge_description(&tools).contains("yours has 2 slots left."));
    let out = tool_output(&m.call("forge_tool", request("tool_10")));
    assert_eq!(out["success"], true, "{out}");

    // Deleting what is not in the session says what is.
    let text = refusal(&m.call("delete_tool", json!({"name": "tool_3"})));
    assert!(
        text.starts_with("delete: \"tool_3\" is in the agent tier"),
        "{text}"
    );
    m.close();

    let registry = Registry::open(&store).unwrap();
    let entries = registry.audit_entries(0, 10_000).unwrap();
    let deletion = entries
        .iter()
        .find(|e| e.kind == AuditKind::Deletion && e.subject == "tool_0")
        .expect("the deletion is audited");
    assert_eq!(deletion.agent.as_deref(), Some("scripted"));
    assert_eq!(
        deletion.payload["session"]
            .as_str()
            .map(|s| format!("{s:?}")),
        Some(session)
    );
}

#[test]
fn mcp_refuses_builtin_names_and_lists_each_name_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut m = mcp(dir.path(), &store, "namer", &[]);
    for name in BUILTIN_TOOL_NAMES {
        let text = refusal(&m.call("forge_tool", request(name)));
        assert_eq!(text, reserved(name));
    }
    let names = unique_names(&m.tools());
    for name in [
        "forge_tool",
        "delete_tool",
        "promote_tool",
        "tool_stats",
        "run_code",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
    }
    m.close();
}

/// An upstream advertising `run_code` and `describe_tools` (the official
/// Python SDK's server): neither reaches `tools/list`, the built-ins'
/// descriptions are Temper's, and the log says why they were skipped.
#[test]
fn an_upstream_tool_with_a_builtin_name_is_skipped_with_the_true_reason() {
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hub/upstream_server.py");
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &format!(
            "[upstream.search]\ncommand = {}\ntools = [\"*\"]\n",
            serde_json::to_string(&[
                python.display().to_string(),
                script.display().to_string(),
                "builtin-names".into()
            ])
            .unwrap()
        ),
    );
    let policy = tools_policy(dir.path(), &["web_search", "run_code", "describe_tools"]);
    let mut m = mcp(
        dir.path(),
        &store,
        "gateway",
        &[
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    let tools = m.tools();
    let names = unique_names(&tools);
    assert!(names.iter().any(|n| n == "web_search"), "{names:?}");
    for t in &tools {
        let d = t["description"].as_str().unwrap_or("");
        assert!(
            !d.contains("UPSTREAM"),
            "an upstream's built-in listed: {t}"
        );
    }
    // A forged tool may not take a hub tool's name either.
    let text = refusal(&m.call("forge_tool", request("web_search")));
    assert_eq!(
        text,
        "validate: name \"web_search\" is taken by a hub tool; choose another name"
    );
    m.close();
    let log = std::fs::read_to_string(dir.path().join("stderr-gateway.txt")).unwrap();
    assert!(
        log.contains("hub tool skipped: its name \"run_code\" is reserved by a built-in tool"),
        "{log}"
    );
    assert!(!log.contains("is not ASCII letters"), "{log}");
}

/// Calls made through a compose step count as the step tool's uses: a
/// session tool used only inside a pipeline reaches promotion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uses_through_compose_steps_count_for_promotion() {
    let dir = tempfile::tempdir().unwrap();
    let (forge, _) = forge_in(dir.path());
    let ctx = ForgeContext::new("agent-a", "s1");
    let inner = ForgeRequest::from_json(&request("inner").to_string()).unwrap();
    forge.forge(&inner, &ctx).await.unwrap();
    let outer = json!({
        "name": "outer",
        "description": "Echoes n through inner.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "implementation": {"mode": "compose", "steps": [
            {"name": "only", "tool": "inner", "inputMapping": {"n": "$input.n"}}
        ]},
        "testCases": [{"input": {"n": 1}, "expectedOutput": {"n": 1}}],
    });
    forge
        .forge(&ForgeRequest::from_json(&outer.to_string()).unwrap(), &ctx)
        .await
        .unwrap();
    for n in 0..4 {
        let out = forge.invoke("outer", &json!({"n": n}), &ctx).await.unwrap();
        assert_eq!(out.output["n"], n);
    }
    let err = forge.promote("inner", &ctx, None).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "promote: \"inner\" has 4 successful uses; promotion needs at least 5"
    );
    forge.invoke("outer", &json!({"n": 9}), &ctx).await.unwrap();
    let promoted = forge.promote("inner", &ctx, None).await.unwrap();
    assert_eq!(promoted.tier, Tier::Agent);
}
