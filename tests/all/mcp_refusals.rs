//! What an agent connected to `temper mcp` reads, and nothing else: the
//! descriptions (`forge_tool` names what the host grants and what it does
//! not, `run_code` what its code gets), and refusals that say what to do
//! next (issue 45): a capability the host does not allow, one the tool did
//! not list, a file outside the granted directories, `run_code`'s three
//! refused-call cases, JavaScript errors at the agent's own line and
//! column, and no Temper internal reachable from agent code. Each assertion
//! is on the exact text an agent reads.

use serde_json::{Value, json};

use crate::mcp::{Client, seed, text_json};

/// `temper mcp` granting `fs.readFile` (a `data` directory as `/data`) and
/// `crypto`; not `fetch`. `[run_code] allow` is left empty.
fn start(dir: &std::path::Path) -> Client {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("sample.json"), r#"{"a": 1}"#).unwrap();
    let read = format!("--allow-read={}:/data", data.display());
    let mut c = Client::start_with(&dir.join("store"), &[&read, "--allow-crypto"]);
    c.ok("initialize", json!({"protocolVersion": "2025-06-18"}));
    c
}

fn description(c: &mut Client, name: &str) -> String {
    let list = c.ok("tools/list", json!({}));
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} listed"))["description"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A sandbox forge request: `code`, `allowlist`, one test case.
fn request(name: &str, code: &str, allowlist: &[&str], input: Value) -> Value {
    json!({
        "name": name,
        "description": "A tool for the refusal tests",
        "inputSchema": {"type": "object"},
        "outputSchema": {},
        "implementation": {"mode": "sandbox", "code": code, "allowlist": allowlist},
        "testCases": [{"input": input}],
    })
}

/// Forges `req`; returns the refusal's errors (the forge must refuse it).
fn refused(c: &mut Client, req: Value) -> Vec<String> {
    let (m, _) = c.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": req}),
    );
    let result = &m["result"];
    assert_eq!(result["isError"], true, "{m}");
    result["structuredContent"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("errors in {m}"))
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

/// The error text of a failed `run_code`.
fn run_code_error(c: &mut Client, arguments: Value) -> String {
    let r = c.call("run_code", arguments);
    assert_eq!(r["isError"], true, "{r}");
    text_json(&r)["error"].as_str().unwrap().to_string()
}

#[test]
fn descriptions_say_what_the_host_grants() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(dir.path());
    let forge = description(&mut c, "forge_tool");
    assert!(
        forge.contains(
            "with no capabilities except those its `allowlist` names that this host allows:\n\
             - \"fetch\": NOT allowed by this host (`fetch(url, init)` (Headers, Request, Response)); only its operator can allow it\n\
             - \"fs.readFile\": allowed: `fs.readFile(path, encoding)`, `fs.readFileSync`, `fs.promises.readFile`; directories (read-only): /data\n\
             - \"crypto\": allowed: `crypto.createHash`, `crypto.createHmac`, `crypto.randomBytes`, `crypto.getRandomValues`, `crypto.randomUUID`\n"
        ),
        "{forge}"
    );
    let run_code = description(&mut c, "run_code");
    assert!(
        run_code.contains(
            "Each tool runs in its own sandbox with its own grants. The code itself is granted no \
             capability on this host (its policy's [run_code] allow is empty); fetch, fs.readFile, \
             crypto only through the tools it calls, each with its own grants. `tools` (optional)"
        ),
        "{run_code}"
    );
    c.close();
}

#[test]
fn capability_refusals_say_who_grants_and_how() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(dir.path());
    // Not allowed by the host: only the operator can, and how.
    let errors = refused(
        &mut c,
        request(
            "wants_fetch",
            "async function execute() { return (await fetch('https://example.com')).status; }",
            &["fetch"],
            json!({}),
        ),
    );
    assert_eq!(
        errors,
        [
            "validate: allowlist: capability \"fetch\" is requested by the tool but not allowed by the host policy; only \
          the host's operator can allow it (the flag --allow-net=DOMAINS, or \"fetch\" in the \
          policy file's `allow` with the domains in [fetch] domains); forge the tool without it, \
          or ask the operator"
        ]
    );
    // Allowed by the host, not listed by the tool: list it.
    let errors = refused(
        &mut c,
        request(
            "hashes",
            "function execute() { return crypto.createHash('sha256').update('x').digest('hex'); }",
            &[],
            json!({}),
        ),
    );
    assert!(
        errors.iter().any(|e| e.contains(
            "run: capability not granted: crypto (the tool's implementation.allowlist does not \
             list \"crypto\": add it and forge the tool again)"
        )),
        "{errors:?}"
    );
    // A file outside the granted directories: the directories are named.
    let errors = refused(
        &mut c,
        request(
            "reads",
            "function execute() { return JSON.parse(fs.readFileSync('sample.json', 'utf8')); }",
            &["fs.readFile"],
            json!({}),
        ),
    );
    assert!(
        errors.iter().any(|e| e.contains(
            "Error: path outside the granted directories: sample.json; the granted directories: \
             /data (read a path inside one, like /data/FILE; a link inside one that leads out \
             of it is refused too)"
        )),
        "{errors:?}"
    );
    c.close();
}

#[test]
fn run_code_refusals_tell_three_cases_apart() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(dir.path());
    let (forged, _) = c.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": seed("slugify")}),
    );
    assert_eq!(forged["result"]["isError"], false, "{forged}");
    // Left out of `tools`.
    assert_eq!(
        run_code_error(
            &mut c,
            json!({"code": "return await tools.slugify({ text: 'x' });", "tools": []})
        ),
        "run_code: tool \"slugify\" is not in the tools you passed to run_code (tools: []); add \
         it to tools or omit tools to call any visible tool"
    );
    // A typo: the nearest visible name.
    assert_eq!(
        run_code_error(
            &mut c,
            json!({"code": "return await tools.slugfy({ text: 'x' });"})
        ),
        "run_code: no tool named \"slugfy\"; did you mean \"slugify\"?"
    );
    assert_eq!(
        run_code_error(&mut c, json!({"code": "return 1;", "tools": ["slugfy"]})),
        "run_code: tools: no tool named \"slugfy\"; did you mean \"slugify\"?"
    );
    // A capability `[run_code] allow` does not grant (the host allows crypto).
    assert_eq!(
        run_code_error(
            &mut c,
            json!({"code": "return crypto.createHash('sha256').update('x').digest('hex');"})
        ),
        "run_code: capability \"crypto\" is not granted to run_code by the host policy (its \
         [run_code] allow: none); only the host's operator can grant it (\"crypto\" in the policy \
         file's [run_code] allow, and the host allowing it (the flag --allow-crypto, or \"crypto\" \
         in the policy file's `allow`)); until then, call a tool whose allowlist has \"crypto\""
    );
    c.close();
}

#[test]
fn run_code_errors_carry_the_bodys_positions() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(dir.path());
    // An engine TypeError on line 4, sync and after an await: the body's
    // line and column.
    for (body, column) in [
        (
            "const a = 1;\nconst b = 2;\nconst o = undefined;\nreturn a + b + o.x;",
            16,
        ),
        (
            "await null;\nconst b = 2;\nconst o = undefined;\nreturn b + o.x;",
            12,
        ),
    ] {
        assert_eq!(
            run_code_error(&mut c, json!({ "code": body })),
            format!(
                "run_code: run: the tool threw: TypeError: cannot read property 'x' of undefined \
                 (at line 4, column {column})"
            ),
            "{body}"
        );
    }
    // On line 1, which the wrapper shares, the column is the body's too.
    assert_eq!(
        run_code_error(
            &mut c,
            json!({"code": "const o = undefined; return 1 + o.x;"})
        ),
        "run_code: run: the tool threw: TypeError: cannot read property 'x' of undefined (at \
         line 1, column 33)"
    );
    // The static check counts the body's columns, not the wrapper's, and
    // names its stage once.
    assert_eq!(
        run_code_error(&mut c, json!({"code": "const x = eval('1'); return x;"})),
        "run_code: build: static check refused the source: blocked API `eval` at 1:11 \
         (arbitrary code execution)"
    );
    c.close();
}

#[test]
fn agent_code_sees_no_temper_internals() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(dir.path());
    let r = c.call(
        "run_code",
        json!({"code": "const names = Object.getOwnPropertyNames(globalThis).filter(n => /temper/i.test(n));\n\
                        await new Promise(r => setTimeout(r, 50));\n\
                        let ticks = 0; const id = setInterval(() => { ticks++; }, 10);\n\
                        await new Promise(r => setTimeout(r, 35)); clearInterval(id);\n\
                        return { names, ticks, internal: typeof __temper_internal };"}),
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        r["structuredContent"]["result"],
        json!({"names": [], "ticks": 3, "internal": "undefined"}),
        "{r}"
    );
    c.close();
}

/// `promote_tool` states how many successful calls a promotion needs: the
/// default, and what the operator's forge configuration sets.
#[test]
fn promote_tool_states_the_calls_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = start(dir.path());
    let default = temper::forge::config::DEFAULT_PROMOTION_USES;
    let text = description(&mut c, "promote_tool");
    assert!(
        text.contains(&format!("It needs at least {default} successful calls (calls from run_code and compose tools count")),
        "{text}"
    );
    c.close();
    let config = dir.path().join("forge.json");
    std::fs::write(&config, r#"{"promotionThreshold": {"uses": 2}}"#).unwrap();
    let config = config.display().to_string();
    let mut c = Client::start_with(&dir.path().join("store2"), &["--forge-config", &config]);
    c.ok("initialize", json!({"protocolVersion": "2025-06-18"}));
    let text = description(&mut c, "promote_tool");
    assert!(
        text.contains("It needs at least 2 successful calls"),
        "{text}"
    );
    c.close();
}
