//! The official MCP reference servers behind `temper mcp`, against the same
//! servers called directly: npm `@modelcontextprotocol/server-everything`,
//! `server-filesystem` and `server-memory`, PyPI `mcp-server-time` and
//! `mcp-server-git` (pinned, installed by scripts/mcp-servers.sh). For each,
//! `tests/mcp_gateway_compare.py` lists and calls its tools with the
//! official Python SDK client, directly and through Temper, from the same
//! starting state, and reports; this test asserts that the listings are
//! identical (every member: title, annotations, execution, icons,
//! outputSchema, _meta) and that every call result is identical apart from
//! volatile values (datetimes), images, audio, resources, resource links,
//! annotations, errors and a progress-sending call among them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::cache_dir;
use crate::support::mcp_stdio::{mcp_python, tools_policy, write_file};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The reference servers' npm folder and `node`, or None (the test skips
/// with a notice) unless TEMPER_REQUIRE_MCP_SERVERS=1.
pub(crate) fn npm_servers() -> Option<(PathBuf, PathBuf)> {
    let dir = root().join("tests/mcp-servers/node_modules/@modelcontextprotocol");
    let node = which("node");
    let ok = dir.join("server-everything/dist/index.js").exists()
        && dir.join("server-filesystem/dist/index.js").exists()
        && dir.join("server-memory/dist/index.js").exists();
    match node {
        Some(node) if ok => Some((dir, node)),
        _ => skip("the npm reference servers (run scripts/mcp-servers.sh) or node"),
    }
}

/// The SDK venv's python with the PyPI reference servers, or None.
fn py_servers() -> Option<PathBuf> {
    let python = mcp_python()?;
    let ok = Command::new(&python)
        .args(["-c", "import mcp_server_time, mcp_server_git"])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Some(python)
    } else {
        skip("mcp-server-time and mcp-server-git in target/mcp-venv (run scripts/mcp-servers.sh)")
    }
}

fn skip<T>(what: &str) -> Option<T> {
    if std::env::var("TEMPER_REQUIRE_MCP_SERVERS").as_deref() == Ok("1") {
        panic!("TEMPER_REQUIRE_MCP_SERVERS=1 but {what} is missing");
    }
    eprintln!("SKIPPED: {what} is missing");
    None
}

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// One server's comparison: its command (program and arguments), the
/// environment both sides give it, the calls.
struct Compare<'a> {
    name: &'a str,
    command: Vec<String>,
    env: Vec<(&'a str, String)>,
    calls: Vec<Value>,
    /// Prepares the template every session starts from.
    template: &'a dyn Fn(&Path),
    /// More lines of the upstream's table (`prefix`, `resources`, ...).
    extra: &'a str,
    /// The host policy's text (default: every hub tool allowed).
    policy: Option<&'a str>,
    /// Resources and prompts to compare (`mcp_gateway_compare.py`).
    features: Option<Value>,
}

impl Default for Compare<'_> {
    fn default() -> Self {
        Self {
            name: "",
            command: Vec::new(),
            env: Vec::new(),
            calls: Vec::new(),
            template: &|_| {},
            extra: "",
            policy: None,
            features: None,
        }
    }
}

/// Runs the comparison and returns the report.
fn compare(c: Compare<'_>) -> Value {
    let python = mcp_python().expect("checked by the caller");
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template");
    std::fs::create_dir_all(&template).unwrap();
    (c.template)(&template);
    let work = dir.path().join("work");
    let command: Vec<String> = c
        .command
        .iter()
        .map(|a| a.replace("{work}", work.to_str().unwrap()))
        .collect();
    let env: serde_json::Map<String, Value> = c
        .env
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                json!(v.replace("{work}", work.to_str().unwrap())),
            )
        })
        .collect();
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &format!(
            "[upstream.{}]\ncommand = {}\nenv = {}\ntools = [\"*\"]\ntimeout_ms = 60000\n{}\n",
            c.name,
            serde_json::to_string(&command).unwrap(),
            toml_inline(&env),
            c.extra,
        ),
    );
    let policy = match c.policy {
        Some(text) => write_file(dir.path(), "policy.toml", text),
        None => tools_policy(dir.path(), &["*"]),
    };
    let prefix = c
        .extra
        .lines()
        .find_map(|l| l.strip_prefix("prefix = "))
        .map(|p| p.trim_matches('"').to_string())
        .unwrap_or_default();
    let gateway_args = vec![
        "mcp".to_string(),
        "--judge".into(),
        "rules".into(),
        "--cache-dir".into(),
        cache_dir().display().to_string(),
        "--store".into(),
        dir.path().join("store").display().to_string(),
        "--tools".into(),
        tools.display().to_string(),
        "--policy".into(),
        policy.display().to_string(),
    ];
    // Paths in the calls name the session's work folder on both sides.
    let calls: Value = serde_json::from_str(
        &Value::from(c.calls)
            .to_string()
            .replace("{work}", work.to_str().unwrap()),
    )
    .unwrap();
    let spec = json!({
        "name": c.name,
        "direct": {"command": command[0], "args": command[1..], "env": env},
        "gateway": {"command": env!("CARGO_BIN_EXE_temper"), "args": gateway_args, "env": {}, "prefix": prefix},
        "workdir": work,
        "template": template,
        "calls": calls,
    });
    let mut spec = spec;
    if let Some(features) = c.features {
        spec["features"] = features;
    }
    let spec_path = write_file(dir.path(), "spec.json", &spec.to_string());
    let out = Command::new(&python)
        .arg(root().join("tests/mcp_gateway_compare.py"))
        .arg(&spec_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: the comparison did not run: {}\n{stdout}",
        c.name,
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{}: not a report ({e}): {stdout}", c.name));
    assert_same(&report);
    report
}

/// `{k = "v", ...}`.
fn toml_inline(map: &serde_json::Map<String, Value>) -> String {
    let members: Vec<String> = map.iter().map(|(k, v)| format!("{k} = {}", v)).collect();
    format!("{{ {} }}", members.join(", "))
}

/// The listing and every call are the same on both sides.
fn assert_same(report: &Value) {
    let server = &report["server"];
    assert_eq!(
        report["tools"], report["gateway_tools"],
        "{server}: tool names"
    );
    assert!(
        !report["tools"].as_array().unwrap().is_empty(),
        "{server}: no tool listed"
    );
    if let Some(name) = report["definitions_differ"].as_array().unwrap().first() {
        let name = name.as_str().unwrap();
        panic!(
            "{server}: tool {name} listed differently:\ndirect:  {}\ngateway: {}",
            report["direct_definitions"][name], report["gateway_definitions"][name]
        );
    }
    let (direct, gateway) = (
        &report["features"]["direct"],
        &report["features"]["gateway"],
    );
    if !direct.is_null() {
        for part in ["resources", "templates", "prompts", "reads", "gets"] {
            assert_eq!(
                direct[part], gateway[part],
                "{server}: {part} differ:\ndirect:  {}\ngateway: {}",
                direct[part], gateway[part]
            );
        }
    }
    for call in report["calls"].as_array().unwrap() {
        assert!(
            call["identical"].as_bool().unwrap(),
            "{server}: {} answered differently:\ndirect:  {}\ngateway: {}",
            call["label"],
            call["direct"],
            call["gateway"]
        );
    }
}

/// The direct result of the call labelled `label`.
fn direct<'a>(report: &'a Value, label: &str) -> &'a Value {
    let call = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == json!(label))
        .unwrap_or_else(|| panic!("no call {label}"));
    &call["direct"]
}

/// The content block types of a result.
fn block_types(answer: &Value) -> Vec<&str> {
    answer["result"]["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|b| b["type"].as_str()).collect())
        .unwrap_or_default()
}

fn call(tool: &str, arguments: Value) -> Value {
    json!({"tool": tool, "arguments": arguments, "label": tool})
}

fn labelled(label: &str, tool: &str, arguments: Value) -> Value {
    json!({"tool": tool, "arguments": arguments, "label": label})
}

#[test]
fn server_everything_through_the_gateway_is_the_server() {
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let index = npm.join("server-everything/dist/index.js");
    let mut long = call(
        "trigger-long-running-operation",
        json!({"duration": 1, "steps": 3}),
    );
    long["progress"] = json!(true);
    let report = compare(Compare {
        name: "everything",
        command: vec![node.display().to_string(), index.display().to_string()],
        env: vec![],
        calls: vec![
            call("echo", json!({"message": "hi there"})),
            call("get-sum", json!({"a": 2, "b": 3.5})),
            call("get-tiny-image", json!({})),
            labelled(
                "annotated error with image",
                "get-annotated-message",
                json!({"messageType": "error", "includeImage": true}),
            ),
            labelled(
                "annotated debug",
                "get-annotated-message",
                json!({"messageType": "debug"}),
            ),
            call("get-resource-links", json!({"count": 4})),
            labelled(
                "text resource",
                "get-resource-reference",
                json!({"resourceType": "Text", "resourceId": 2}),
            ),
            labelled(
                "blob resource",
                "get-resource-reference",
                json!({"resourceType": "Blob", "resourceId": 3}),
            ),
            call("get-structured-content", json!({"location": "Chicago"})),
            long,
        ],
        template: &|_| {},
        ..Default::default()
    });
    // What the calls cover, as the server answered them directly.
    assert_eq!(report["tools"].as_array().unwrap().len(), 13, "{report}");
    assert_eq!(report["with_title"], json!(13));
    assert_eq!(report["with_annotations"], json!(13));
    assert_eq!(report["with_execution"], json!(13));
    assert!(block_types(direct(&report, "get-tiny-image")).contains(&"image"));
    let annotated = direct(&report, "annotated error with image");
    assert!(block_types(annotated).contains(&"image"), "{annotated}");
    assert!(
        annotated["result"]["content"][0]
            .get("annotations")
            .is_some(),
        "{annotated}"
    );
    assert!(block_types(direct(&report, "get-resource-links")).contains(&"resource_link"));
    assert!(block_types(direct(&report, "text resource")).contains(&"resource"));
    assert!(block_types(direct(&report, "blob resource")).contains(&"resource"));
    assert!(
        direct(&report, "get-structured-content")["result"]
            .get("structuredContent")
            .is_some()
    );
    // A plain-text answer stays plain text, with no structuredContent.
    let echo = direct(&report, "echo");
    assert_eq!(
        echo["result"]["content"][0]["text"],
        json!("Echo: hi there")
    );
    assert!(echo["result"].get("structuredContent").is_none());
    // Progress: the upstream's own notifications reach the caller, after
    // Temper's report of the call's start.
    let long = report["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["tool"] == json!("trigger-long-running-operation"))
        .unwrap();
    let theirs = long["direct"]["progress"].as_array().unwrap();
    let ours = long["gateway"]["progress"].as_array().unwrap();
    assert_eq!(theirs.len(), 3, "{long}");
    assert_eq!(ours.len(), theirs.len() + 1, "{long}");
    assert_eq!(ours[0]["progress"], json!(0.0), "{long}");
    assert_eq!(&ours[1..], &theirs[..], "{long}");
}

/// A 1×1 PNG and a short WAV for the media reads.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn wav() -> Vec<u8> {
    let samples: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(4)).collect();
    let mut w = Vec::new();
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes());
    w.extend_from_slice(&8u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    w.extend_from_slice(&samples);
    w
}

#[test]
fn server_filesystem_through_the_gateway_is_the_server() {
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let index = npm.join("server-filesystem/dist/index.js");
    let report = compare(Compare {
        name: "files",
        command: vec![
            node.display().to_string(),
            index.display().to_string(),
            "{work}".into(),
        ],
        env: vec![],
        calls: vec![
            call("list_allowed_directories", json!({})),
            call("list_directory", json!({"path": "{work}"})),
            call("read_text_file", json!({"path": "{work}/notes.txt"})),
            labelled(
                "read_text_file head",
                "read_text_file",
                json!({"path": "{work}/notes.txt", "head": 1}),
            ),
            labelled(
                "image",
                "read_media_file",
                json!({"path": "{work}/pixel.png"}),
            ),
            labelled(
                "audio",
                "read_media_file",
                json!({"path": "{work}/tone.wav"}),
            ),
            call(
                "write_file",
                json!({"path": "{work}/new/out.txt", "content": "written\n"}),
            ),
            call("create_directory", json!({"path": "{work}/new"})),
            call(
                "write_file",
                json!({"path": "{work}/new/out.txt", "content": "written\n"}),
            ),
            call(
                "edit_file",
                json!({"path": "{work}/notes.txt", "edits": [{"oldText": "two", "newText": "2"}]}),
            ),
            call("directory_tree", json!({"path": "{work}"})),
            call(
                "search_files",
                json!({"path": "{work}", "pattern": "*.txt"}),
            ),
            call("get_file_info", json!({"path": "{work}/notes.txt"})),
            labelled(
                "missing file",
                "read_text_file",
                json!({"path": "{work}/missing.txt"}),
            ),
            labelled(
                "outside the root",
                "read_text_file",
                json!({"path": "/etc/hostname"}),
            ),
        ],
        template: &|t| {
            std::fs::write(t.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
            std::fs::write(t.join("pixel.png"), PNG).unwrap();
            std::fs::write(t.join("tone.wav"), wav()).unwrap();
            std::fs::create_dir_all(t.join("sub")).unwrap();
            std::fs::write(t.join("sub/inner.txt"), "inner\n").unwrap();
        },
        ..Default::default()
    });
    assert_eq!(report["tools"].as_array().unwrap().len(), 14, "{report}");
    assert_eq!(report["with_annotations"], json!(14));
    assert_eq!(report["with_output_schema"], json!(14));
    assert!(block_types(direct(&report, "image")).contains(&"image"));
    assert!(block_types(direct(&report, "audio")).contains(&"audio"));
    assert_eq!(
        direct(&report, "missing file")["result"]["isError"],
        json!(true)
    );
    assert_eq!(
        direct(&report, "outside the root")["result"]["isError"],
        json!(true)
    );
}

#[test]
fn server_memory_through_the_gateway_is_the_server() {
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let index = npm.join("server-memory/dist/index.js");
    let report = compare(Compare {
        name: "memory",
        command: vec![node.display().to_string(), index.display().to_string()],
        env: vec![("MEMORY_FILE_PATH", "{work}/memory.jsonl".into())],
        calls: vec![
            call(
                "create_entities",
                json!({"entities": [
                    {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
                    {"name": "Engine", "entityType": "machine", "observations": []}
                ]}),
            ),
            call(
                "create_relations",
                json!({"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]}),
            ),
            call(
                "add_observations",
                json!({"observations": [{"entityName": "Engine", "contents": ["analytical"]}]}),
            ),
            call("read_graph", json!({})),
            call("search_nodes", json!({"query": "program"})),
            call("open_nodes", json!({"names": ["Ada"]})),
            labelled(
                "observation of a missing entity",
                "add_observations",
                json!({"observations": [{"entityName": "Nobody", "contents": ["x"]}]}),
            ),
            call(
                "delete_relations",
                json!({"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]}),
            ),
            call("delete_entities", json!({"entityNames": ["Engine"]})),
            labelled("graph after", "read_graph", json!({})),
        ],
        template: &|_| {},
        ..Default::default()
    });
    assert_eq!(report["tools"].as_array().unwrap().len(), 9, "{report}");
    assert_eq!(report["with_execution"], json!(9));
    assert_eq!(
        direct(&report, "observation of a missing entity")["result"]["isError"],
        json!(true)
    );
}

#[test]
fn mcp_server_time_through_the_gateway_is_the_server() {
    let Some(python) = py_servers() else { return };
    let report = compare(Compare {
        name: "time",
        command: vec![
            python.display().to_string(),
            "-m".into(),
            "mcp_server_time".into(),
            "--local-timezone".into(),
            "UTC".into(),
        ],
        env: vec![],
        calls: vec![
            call("get_current_time", json!({"timezone": "Europe/Warsaw"})),
            call(
                "convert_time",
                json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
            ),
            labelled(
                "unknown zone",
                "get_current_time",
                json!({"timezone": "Nowhere/Nothing"}),
            ),
            labelled(
                "bad time",
                "convert_time",
                json!({"source_timezone": "UTC", "time": "25:99", "target_timezone": "Asia/Tokyo"}),
            ),
        ],
        template: &|_| {},
        ..Default::default()
    });
    assert_eq!(report["tools"], json!(["convert_time", "get_current_time"]));
    assert_eq!(report["with_annotations"], json!(2));
    assert_eq!(report["with_output_schema"], json!(2));
    assert_eq!(
        direct(&report, "unknown zone")["result"]["isError"],
        json!(true)
    );
}

#[test]
fn mcp_server_git_through_the_gateway_is_the_server() {
    let Some(python) = py_servers() else { return };
    let Some(git) = which("git") else {
        skip::<()>("git");
        return;
    };
    let template = |t: &Path| {
        let run = |args: &[&str]| {
            let out = Command::new(&git)
                .args(args)
                .current_dir(t)
                .env("GIT_AUTHOR_NAME", "Temper Test")
                .env("GIT_AUTHOR_EMAIL", "test@temper.invalid")
                .env("GIT_COMMITTER_NAME", "Temper Test")
                .env("GIT_COMMITTER_EMAIL", "test@temper.invalid")
                .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
                .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        run(&["init", "-q", "-b", "main"]);
        std::fs::write(t.join("README.md"), "# repo\n").unwrap();
        run(&["add", "README.md"]);
        run(&["commit", "-q", "-m", "first"]);
        std::fs::write(t.join("README.md"), "# repo\n\nmore\n").unwrap();
        run(&["commit", "-q", "-am", "second"]);
        std::fs::write(t.join("README.md"), "# repo\n\nmore\nchanged\n").unwrap();
        std::fs::write(t.join("new.txt"), "new\n").unwrap();
    };
    let report = compare(Compare {
        name: "git",
        command: vec![
            python.display().to_string(),
            "-m".into(),
            "mcp_server_git".into(),
            "--repository".into(),
            "{work}".into(),
        ],
        // GitPython runs `git`: both sides get the same PATH and HOME.
        env: vec![
            ("PATH", std::env::var("PATH").unwrap_or_default()),
            ("HOME", "{work}".into()),
            ("GIT_CONFIG_GLOBAL", "/dev/null".into()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ],
        calls: vec![
            call("git_status", json!({"repo_path": "{work}"})),
            call("git_diff_unstaged", json!({"repo_path": "{work}"})),
            call("git_log", json!({"repo_path": "{work}", "max_count": 5})),
            call(
                "git_show",
                json!({"repo_path": "{work}", "revision": "HEAD"}),
            ),
            call(
                "git_branch",
                json!({"repo_path": "{work}", "branch_type": "local"}),
            ),
            labelled(
                "missing branch",
                "git_checkout",
                json!({"repo_path": "{work}", "branch_name": "no-such-branch"}),
            ),
        ],
        template: &template,
        ..Default::default()
    });
    assert_eq!(report["tools"].as_array().unwrap().len(), 12, "{report}");
    assert_eq!(report["with_annotations"], json!(12));
    assert_eq!(
        direct(&report, "missing branch")["result"]["isError"],
        json!(true)
    );
}

#[test]
fn server_everything_resources_and_prompts_through_the_gateway_are_the_servers() {
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let index = npm.join("server-everything/dist/index.js");
    let policy = "[tools]\nallow = [\"ev.*\"]\n[resources]\nallow = [\"ev.*\"]\n[prompts]\nallow = [\"ev.*\"]\n";
    let report = compare(Compare {
        name: "everything",
        command: vec![node.display().to_string(), index.display().to_string()],
        calls: vec![call("echo", json!({"message": "prefixed"}))],
        extra: "prefix = \"ev.\"\nresources = [\"*\"]\nprompts = [\"*\"]",
        policy: Some(policy),
        features: Some(json!({
            "reads": [
                "demo://resource/static/document/architecture.md",
                "demo://resource/dynamic/text/3",
                "demo://resource/dynamic/blob/4",
            ],
            "gets": [
                {"name": "simple-prompt"},
                {"name": "args-prompt", "arguments": {"city": "Lyon", "state": "Rhone"}},
                {"name": "resource-prompt", "arguments": {"resourceType": "Text", "resourceId": "2"}},
            ],
            // Without the prefix: not a URI the gateway exposes.
            "refused": ["demo://resource/static/document/architecture.md"],
        })),
        ..Default::default()
    });
    let gateway = &report["features"]["gateway"];
    assert!(
        gateway["resources"].as_array().unwrap().len() >= 5,
        "{gateway}"
    );
    assert_eq!(
        gateway["templates"].as_array().unwrap().len(),
        2,
        "{gateway}"
    );
    assert!(
        gateway["prompts"].as_array().unwrap().len() >= 2,
        "{gateway}"
    );
    let reads = gateway["reads"].as_array().unwrap();
    assert!(
        reads[0]["result"]["contents"][0]["text"].is_string(),
        "{gateway}"
    );
    assert!(
        reads[2]["result"]["contents"][0]["blob"].is_string(),
        "{gateway}"
    );
    assert!(
        gateway["gets"][1]["result"]["messages"].is_array(),
        "{gateway}"
    );
    assert_eq!(
        gateway["refused"][0]["error"]["code"],
        json!(-32002),
        "{gateway}"
    );
}

#[test]
fn upstream_resources_and_prompts_are_denied_by_default_and_narrowed_by_the_policy() {
    let Some((npm, node)) = npm_servers() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let index = npm.join("server-everything/dist/index.js");
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &format!(
            "[upstream.ev]\ncommand = [{:?}, {:?}]\nprefix = \"ev.\"\nresources = [\"*\"]\nprompts = [\"*\"]\n",
            node.display().to_string(),
            index.display().to_string()
        ),
    );
    // Static documents only; no [prompts] section: no prompt.
    let policy = write_file(
        dir.path(),
        "policy.toml",
        "[resources]\nallow = [\"ev.demo://resource/static/*\"]\n",
    );
    let mut m = crate::support::mcp_stdio::McpStdio::start(
        &[
            "--store",
            dir.path().join("store").to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
        &dir.path().join("stderr.txt"),
        &[],
        "no-secret-here",
    );
    // The tools file selects resources and prompts: both are advertised.
    let init = m.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    let caps = &init["result"]["capabilities"];
    assert_eq!(caps["resources"], json!({"listChanged": true}), "{init}");
    assert_eq!(caps["prompts"], json!({"listChanged": true}), "{init}");
    assert_eq!(caps["completions"], json!({}), "{init}");
    let listed = m.request("resources/list", json!({}));
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert!(!uris.is_empty(), "{listed}");
    assert!(
        uris.iter()
            .all(|u| u.starts_with("ev.demo://resource/static/")),
        "{uris:?}"
    );
    let templates = m.request("resources/templates/list", json!({}));
    assert_eq!(
        templates["result"]["resourceTemplates"],
        json!([]),
        "{templates}"
    );
    let read = m.request(
        "resources/read",
        json!({"uri": "ev.demo://resource/dynamic/text/1"}),
    );
    assert_eq!(read["error"]["code"], json!(-32002), "{read}");
    let read = m.request("resources/read", json!({"uri": uris[0]}));
    assert_eq!(
        read["result"]["contents"][0]["uri"],
        json!(uris[0]),
        "{read}"
    );
    let prompts = m.request("prompts/list", json!({}));
    assert_eq!(prompts["result"]["prompts"], json!([]), "{prompts}");
    let got = m.request("prompts/get", json!({"name": "ev.simple-prompt"}));
    assert_eq!(got["error"]["code"], json!(-32602), "{got}");
    m.close();
}
