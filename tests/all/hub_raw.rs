//! A gateway call passes an upstream's result on as the upstream's own
//! text only when its `structuredContent` is exactly what Temper checked:
//! against a hostile upstream (`tests/fixtures/hub/hostile_upstream.py`,
//! plain Python writing its result lines by hand), `temper mcp`'s answer
//! lines are read as bytes. An exact result goes out as it came (its
//! spacing kept); duplicate keys, unpaired surrogates and nesting past the
//! limit are refused naming the upstream and the tool; numbers serde_json
//! changes (beyond 64 bits, beyond f64 precision) go out in
//! `structuredContent` as the number that was checked (the text block
//! stays the upstream's own); invalid UTF-8 and a result over the cap end
//! the connection, which is restarted.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cache_dir;
use crate::support::mcp_stdio::{tools_policy, write_file};

/// `temper mcp` whose answers are kept as the lines it wrote.
struct RawMcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next: i64,
}

impl RawMcp {
    fn start(dir: &Path) -> Self {
        let script = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/hub/hostile_upstream.py");
        let tools = write_file(
            dir,
            "tools.toml",
            &format!(
                "[upstream.hostile]\ncommand = [\"/usr/bin/python3\", {:?}]\ntools = [\"*\"]\ntimeout_ms = 20000\nmax_result_bytes = 100000\n",
                script.display().to_string()
            ),
        );
        let policy = tools_policy(dir, &["hostile"]);
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--cache-dir"])
            .arg(cache_dir())
            .arg("--store")
            .arg(dir.join("store"))
            .arg("--tools")
            .arg(&tools)
            .arg("--policy")
            .arg(&policy)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr.txt")).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let mut m = Self {
            stdin: child.stdin.take(),
            child,
            lines,
            next: 0,
        };
        let (_, init) = m.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        m
    }

    /// Writes one message.
    fn send(&mut self, message: Value) {
        let mut line = serde_json::to_vec(&message).unwrap();
        line.push(b'\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(&line).unwrap();
        stdin.flush().unwrap();
    }

    /// The next line `temper mcp` writes.
    fn next_line(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("no answer")
    }

    /// The answer to a request: its line as written, and read.
    fn request(&mut self, method: &str, params: Value) -> (String, Value) {
        self.next += 1;
        let id = self.next;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let text = self.next_line();
            let msg: Value = serde_json::from_str(&text).unwrap();
            if msg["id"] == json!(id) {
                return (text, msg);
            }
        }
    }

    /// `tools/call` of `hostile` with `case`.
    fn call(&mut self, case: &str) -> (String, Value) {
        self.request(
            "tools/call",
            json!({"name": "hostile", "arguments": {"case": case}}),
        )
    }

    /// The error text of a call that must fail.
    fn refused(&mut self, case: &str) -> String {
        let (_, msg) = self.call(case);
        let result = &msg["result"];
        assert_eq!(result["isError"], json!(true), "{case}: {msg}");
        assert!(result.get("structuredContent").is_none(), "{case}: {msg}");
        result["content"][0]["text"].as_str().unwrap().to_string()
    }

    /// Waits until the upstream answers again (after a connection end).
    fn until_back(&mut self) {
        let t = Instant::now();
        loop {
            let (_, msg) = self.call("exact");
            if msg.get("result").is_some() && msg["result"]["isError"] != json!(true) {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "not back: {msg}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for RawMcp {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn a_gateway_passes_on_only_the_exact_text_it_checked() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = RawMcp::start(dir.path());

    // Exact: the upstream's own result, spacing and escapes kept, its
    // structuredContent and its text content block.
    let (line, msg) = m.call("exact");
    let upstream_text = r#"{ "n" : 1, "s": "caf\u00e9 \"q\"" }"#;
    assert!(
        line.contains(&format!(r#""structuredContent": {upstream_text}"#)),
        "{line}"
    );
    let result = &msg["result"];
    // The upstream sent no isError: none is added.
    assert!(result.get("isError").is_none(), "{msg}");
    assert_eq!(
        result["structuredContent"],
        json!({"n": 1, "s": "café \"q\""})
    );
    assert_eq!(result["content"][0]["type"], json!("text"));
    assert_eq!(result["content"][0]["text"], json!(upstream_text));

    // The same on the modern revision (2026-07-28), with its members.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    });
    let (line, msg) = m.request(
        "tools/call",
        json!({"name": "hostile", "arguments": {"case": "exact"}, "_meta": meta}),
    );
    assert!(
        line.contains(&format!(r#""structuredContent": {upstream_text}"#)),
        "{line}"
    );
    assert_eq!(msg["result"]["resultType"], json!("complete"), "{msg}");
    assert!(
        msg["result"]["_meta"]
            .as_object()
            .is_some_and(|m| !m.is_empty()),
        "{msg}"
    );
    assert_eq!(msg["result"]["content"][0]["text"], json!(upstream_text));
    // Asked for progress: told, and answered the same way.
    m.send(json!({"jsonrpc": "2.0", "id": "p-1", "method": "tools/call",
        "params": {"name": "hostile", "arguments": {"case": "exact"}, "_meta": {"progressToken": "tok"}}}));
    let mut progress = 0;
    let line = loop {
        let line = m.next_line();
        let msg: Value = serde_json::from_str(&line).unwrap();
        if msg["method"] == json!("notifications/progress") {
            assert_eq!(msg["params"]["progressToken"], json!("tok"), "{msg}");
            progress += 1;
        } else if msg["id"] == json!("p-1") {
            break line;
        }
    };
    assert_eq!(progress, 2, "a report before and after the call");
    assert!(
        line.contains(&format!(r#""structuredContent": {upstream_text}"#)),
        "{line}"
    );

    // Numbers serde_json changes: the number that was checked goes out.
    // 2**64 + 1 is read as 2**64, which the schema's maximum (2**64)
    // allows; the client must not get 2**64 + 1.
    let (line, msg) = m.call("huge_int");
    let structured = |line: &str| {
        let at = line
            .find(r#""structuredContent""#)
            .expect("structuredContent");
        line[at..].to_string()
    };
    assert!(
        !structured(&line).contains("18446744073709551617"),
        "{line}"
    );
    assert!(msg["result"].get("isError").is_none(), "{msg}");
    let n = &msg["result"]["structuredContent"]["n"];
    assert_eq!(n.as_f64(), Some(18446744073709551616.0), "{msg}");
    // The text block is the upstream's own (nothing checked it).
    assert_eq!(
        msg["result"]["content"][0]["text"],
        json!(r#"{"n": 18446744073709551617}"#)
    );
    let (line, msg) = m.call("float");
    assert!(
        !structured(&line).contains("0.30000000000000000001"),
        "{line}"
    );
    assert_eq!(msg["result"]["structuredContent"], json!({"n": 0.3}));

    // Refused, naming the upstream, the tool and what is wrong; the
    // connection stays up.
    for (case, why) in [
        ("dup", "duplicate key \\\"n\\\""),
        ("dup_escaped", "duplicate key \\\"k\\\""),
        ("surrogate", "hex escape"),
        ("deep", "recursion limit exceeded"),
    ] {
        let text = m.refused(case);
        assert!(
            text.contains(r#"upstream \"hostile\" tool \"hostile\": output structuredContent is not JSON Temper passes on: "#),
            "{case}: {text}"
        );
        assert!(text.contains(why), "{case}: {text}");
        let (_, msg) = m.call("exact");
        assert_eq!(
            msg["result"]["structuredContent"],
            json!({"n": 1, "s": "café \"q\""}),
            "{case}: {msg}"
        );
    }

    // Invalid UTF-8 is not JSON: the connection ends and is restarted.
    let text = m.refused("bad_utf8");
    assert!(
        text.contains(r#"upstream \"hostile\" sent malformed JSON-RPC"#),
        "{text}"
    );
    m.until_back();
    // Over the cap (100,000 bytes here).
    let text = m.refused("big");
    assert!(
        text.contains(r#"upstream \"hostile\" sent a message over the 100000-byte cap"#),
        "{text}"
    );
    m.until_back();
}
