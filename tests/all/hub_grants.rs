//! A grant narrows at every depth, over `temper mcp --http`: a caller whose
//! token (its `tools`, or its JWT scopes' `tools`) hides the hub tool
//! `nice.admin` reaches it through no tool at all — not `run_code` calling
//! a forged tool that calls it, not a forged tool calling a forged tool
//! that calls it, not a compose tool whose step is a compose tool with a
//! `nice.admin` step — in its own agent's tier and through the shared
//! tier. The upstream (`tests/fixtures/hub/recording_upstream.py`) records
//! every call it receives: the test asserts it received none of the
//! narrowed caller's, and did receive the unnarrowed caller's (the
//! positive control).

use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp_http::{Http, Server, root, token_entry};
use crate::mcp_jwt::{auth_config, file_jwks, jwt_for};

/// The refusal's words, and the narrowing each kind of token names.
const REFUSED: &str = "\"nice.admin\" is not callable by this caller (outside its grant: ";
const BY_TOKEN: &str = "token's tools narrowing)";
const BY_SCOPES: &str = "token's scopes' tools narrowing)";

/// The tools forged for the test, innermost first: a code tool calling
/// `nice.admin`, a code tool calling that one, a compose tool with a
/// `nice.admin` step, a compose tool whose step is that one.
const FORGED: [&str; 4] = ["admin_call", "admin_wrap", "admin_step", "admin_nest"];

fn marker_schema() -> Value {
    json!({"type": "object", "properties": {"marker": {"type": "string"}}, "required": ["marker"]})
}

fn done_schema() -> Value {
    json!({"type": "object", "properties": {"done": {"type": "boolean"}, "marker": {"type": "string"}}, "required": ["done", "marker"]})
}

fn code_tool(name: &str, code: &str, grant: &str) -> Value {
    json!({
        "name": name,
        "description": "Runs the administrative action through a tool call.",
        "inputSchema": marker_schema(),
        "outputSchema": done_schema(),
        "implementation": {"mode": "sandbox", "code": code, "allowlist": [format!("tool:{grant}")]},
        "testCases": [{"input": {"marker": "forge-test"}}],
    })
}

fn compose_tool(name: &str, step: &str) -> Value {
    json!({
        "name": name,
        "description": "Runs the administrative action as a pipeline step.",
        "inputSchema": marker_schema(),
        "implementation": {"mode": "compose", "steps": [
            {"name": "act", "tool": step, "inputMapping": {"marker": "$input.marker"}}
        ]},
        "testCases": [{"input": {"marker": "forge-test"}}],
    })
}

/// The server's files: the recording upstream exposed as `nice.*`, a
/// policy allowing `nice.*`, a forge config promoting after one use.
struct Setup {
    store: tempfile::TempDir,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(tokens: &str) -> Self {
        let store = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let script = root().join("tests/fixtures/hub/recording_upstream.py");
        let log = dir.path().join("upstream.log");
        std::fs::write(
            dir.path().join("tools.toml"),
            format!(
                "[upstream.nice]\ncommand = {}\ntools = [\"*\"]\nprefix = \"nice.\"\nallow_live_tests = true\n",
                serde_json::to_string(&[
                    "python3",
                    script.to_str().unwrap(),
                    log.to_str().unwrap()
                ])
                .unwrap()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("policy.toml"),
            "[tools]\nallow = [\"nice.*\"]\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("forge.json"),
            r#"{"promotionThreshold": {"uses": 1, "confidence": 0.0}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("tokens.toml"), tokens).unwrap();
        Self { store, dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    fn start(&self, extra: &[&str]) -> Server {
        let (tools, policy, config, tokens) = (
            self.path("tools.toml"),
            self.path("policy.toml"),
            self.path("forge.json"),
            self.path("tokens.toml"),
        );
        let mut args = vec![
            "--tools",
            tools.as_str(),
            "--policy",
            policy.as_str(),
            "--forge-config",
            config.as_str(),
            "--tokens",
            tokens.as_str(),
        ];
        args.extend_from_slice(extra);
        Server::start(self.store.path(), &args)
    }

    /// The markers of the `admin` calls the upstream received.
    fn admin_markers(&self) -> Vec<String> {
        let text =
            std::fs::read_to_string(self.dir.path().join("upstream.log")).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|v| v["tool"] == "admin")
            .map(|v| v["arguments"]["marker"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Approves alice's agent tool `name` for every agent (another
    /// process, as a person would).
    fn approve(&self, name: &str) {
        let out = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args([
                "approve", name, "--by", "reviewer", "--agent", "alice", "--store",
            ])
            .arg(self.store.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Forges the four tools as `owner` (who may reach `nice.admin`), calls
/// each once and promotes it to the agent tier.
async fn forge_all(owner: &mut Http) {
    let requests = [
        code_tool(
            "admin_call",
            "async function execute(input) { return await callTool(\"nice.admin\", { marker: input.marker }); }",
            "nice.admin",
        ),
        code_tool(
            "admin_wrap",
            "async function execute(input) { return await tools.admin_call({ marker: input.marker }); }",
            "admin_call",
        ),
        compose_tool("admin_step", "nice.admin"),
        compose_tool("admin_nest", "admin_step"),
    ];
    for request in requests {
        let name = request["name"].as_str().unwrap().to_string();
        let a = owner.call("forge_tool", request).await;
        assert_eq!(a.result()["isError"], false, "{name}: {:?}", a.result());
        let a = owner.call(&name, json!({"marker": "setup"})).await;
        assert_eq!(a.result()["isError"], false, "{name}: {:?}", a.result());
        let a = owner.call("promote_tool", json!({"name": name})).await;
        assert_eq!(a.result()["isError"], false, "{name}: {:?}", a.result());
    }
}

/// The error text of a failed `tools/call` result (`{stage, error}` in its
/// text content).
fn error_of(answer: &crate::mcp_http::Answer) -> String {
    let result = answer.result();
    assert_eq!(result["isError"], true, "not refused: {result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v["error"].as_str().map(String::from))
        .unwrap_or_else(|| text.to_string())
}

/// Every bypass shape, as `caller` (narrowed to `nice.echo`), with markers
/// `{tag}-...`: each refused naming the tool and `by`.
async fn bypasses_refused(caller: &mut Http, tag: &str, by: &str) {
    // The tools are visible to it: only the hub tool is hidden.
    let names = caller.tool_names().await;
    for name in FORGED {
        assert!(names.contains(&name.to_string()), "{tag}: {names:?}");
    }
    assert!(!names.contains(&"nice.admin".to_string()), "{names:?}");
    assert!(names.contains(&"nice.echo".to_string()), "{names:?}");
    // Directly: an unknown tool.
    let a = caller
        .call("nice.admin", json!({"marker": format!("{tag}-direct")}))
        .await;
    assert_eq!(a.response()["error"]["code"], -32602, "{tag}: {a:?}");

    // run_code -> forged -> nice.admin; run_code -> forged -> forged ->
    // nice.admin; run_code -> compose -> compose -> nice.admin: the
    // runtime's checks at each call.
    for tool in FORGED {
        let code = format!("return await tools.{tool}({{ marker: '{tag}-run_code-{tool}' }});");
        let a = caller.call("run_code", json!({"code": code})).await;
        let error = error_of(&a);
        assert!(
            error.contains(REFUSED) && error.contains(by),
            "{tag} run_code {tool}: {error}"
        );
    }
    // Called directly: refused before the tool runs, naming the hidden
    // tool its pins reach.
    for tool in FORGED {
        let a = caller
            .call(tool, json!({"marker": format!("{tag}-direct-{tool}")}))
            .await;
        let error = error_of(&a);
        assert!(
            error.contains(REFUSED) && error.contains(by),
            "{tag} {tool}: {error}"
        );
    }
    // A forge reaching it is refused at VALIDATE, as an unknown tool.
    let a = caller
        .call("forge_tool", compose_tool("my_admin", "nice.admin"))
        .await;
    assert_eq!(
        a.result()["structuredContent"]["stage"],
        "validate",
        "{a:?}"
    );
    // The allowed hub tool still works through a tool.
    let a = caller
        .call(
            "run_code",
            json!({"code": "return await tools['nice.echo']({ text: 'still here' });"}),
        )
        .await;
    assert_eq!(a.result()["isError"], false, "{:?}", a.result());
}

/// The markers that reached the upstream from calls tagged `tag`.
fn reached(setup: &Setup, tag: &str) -> Vec<String> {
    setup
        .admin_markers()
        .into_iter()
        .filter(|m| m.starts_with(&format!("{tag}-")))
        .collect()
}

/// Waits until `caller` lists `name` (an approval made by another process
/// is seen within the server's registry poll).
async fn until_listed(caller: &mut Http, name: &str) {
    for _ in 0..300 {
        if caller.tool_names().await.contains(&name.to_string()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} never listed");
}

/// Static tokens: alice narrowed in her own agent tier, bob narrowed
/// through the shared tier; the unnarrowed tokens reach the tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_narrowing_holds_at_every_depth() {
    let setup = Setup::new(
        &[
            token_entry("alice-full", "alice", ""),
            token_entry("alice-narrow", "alice", "tools = [\"nice.echo\"]"),
            token_entry("bob-full", "bob", ""),
            token_entry("bob-narrow", "bob", "tools = [\"nice.echo\"]"),
        ]
        .concat(),
    );
    let server = setup.start(&[]);
    let mut owner = server.client(Some("alice-full"));
    owner.open().await;
    forge_all(&mut owner).await;
    assert!(
        setup.admin_markers().iter().any(|m| m == "setup"),
        "the owner's calls reached the upstream: {:?}",
        setup.admin_markers()
    );

    // Same agent, agent tier.
    let mut alice = server.client(Some("alice-narrow"));
    alice.open().await;
    bypasses_refused(&mut alice, "alice", BY_TOKEN).await;
    assert_eq!(reached(&setup, "alice"), Vec::<String>::new());

    // Across agents, through the shared tier.
    for name in FORGED {
        setup.approve(name);
    }
    let mut bob = server.client(Some("bob-narrow"));
    bob.open().await;
    until_listed(&mut bob, "admin_nest").await;
    bypasses_refused(&mut bob, "bob", BY_TOKEN).await;
    assert_eq!(reached(&setup, "bob"), Vec::<String>::new());

    // The positive control: the same calls with unnarrowed tokens reach it.
    let mut full = server.client(Some("bob-full"));
    full.open().await;
    until_listed(&mut full, "admin_nest").await;
    for tool in FORGED {
        let code = format!("return await tools.{tool}({{ marker: 'full-run_code-{tool}' }});");
        let a = full.call("run_code", json!({"code": code})).await;
        assert_eq!(a.result()["isError"], false, "{tool}: {:?}", a.result());
        let a = full
            .call(tool, json!({"marker": format!("full-direct-{tool}")}))
            .await;
        assert_eq!(a.result()["isError"], false, "{tool}: {:?}", a.result());
    }
    let mut reached_full = reached(&setup, "full");
    reached_full.sort();
    assert_eq!(reached_full.len(), 8, "{reached_full:?}");
    let log = server.log();
    assert!(!log.contains("alice-narrow") && !log.contains("bob-narrow"));
}

/// JWT scopes' `tools` narrow the same way, and the refusal names them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_scopes_narrow_at_every_depth() {
    let setup = Setup::new(&token_entry("alice-full", "alice", ""));
    let config = auth_config(
        setup.dir.path(),
        &file_jwks(),
        "[scopes.\"mcp:all\"]\ntiers = [\"session\", \"agent\", \"shared\"]\n\
         [scopes.\"mcp:echo\"]\ntiers = [\"session\", \"agent\", \"shared\"]\ntools = [\"nice.echo\"]\n",
    );
    let server = setup.start(&["--auth", "jwt", "--auth-config", config.to_str().unwrap()]);
    let mut owner = server.client(Some("alice-full"));
    owner.open().await;
    forge_all(&mut owner).await;

    let alice_jwt = jwt_for("alice", "mcp:echo");
    let mut alice = server.client(Some(&alice_jwt));
    alice.open().await;
    bypasses_refused(&mut alice, "alice", BY_SCOPES).await;
    assert_eq!(reached(&setup, "alice"), Vec::<String>::new());

    for name in FORGED {
        setup.approve(name);
    }
    let bob_jwt = jwt_for("bob", "mcp:echo");
    let mut bob = server.client(Some(&bob_jwt));
    bob.open().await;
    until_listed(&mut bob, "admin_nest").await;
    bypasses_refused(&mut bob, "bob", BY_SCOPES).await;
    assert_eq!(reached(&setup, "bob"), Vec::<String>::new());

    // The positive control: bob with the unnarrowed scope reaches it.
    let bob_all = jwt_for("bob", "mcp:all");
    let mut full = server.client(Some(&bob_all));
    full.open().await;
    let a = full
        .call(
            "run_code",
            json!({"code": "return await tools.admin_nest({ marker: 'full-nest' });"}),
        )
        .await;
    assert_eq!(a.result()["isError"], false, "{:?}", a.result());
    assert_eq!(reached(&setup, "full"), ["full-nest"]);
}
