//! `temper mcp` over stdio as a child process, as the hub tests drive it:
//! its stderr in a file, every line it prints on stdout checked for a
//! secret, requests answered in order (notifications skipped).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use super::cache_dir;

/// A running `temper mcp` (stdio), initialized.
pub struct McpStdio {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    next: i64,
}

impl McpStdio {
    /// Starts `temper mcp --judge rules --cache-dir CACHE ARGS` with `env`
    /// and `RUST_LOG=debug`, its stderr written to `stderr`; a stdout line
    /// holding `secret` fails the test. Sends `initialize`.
    pub fn start(args: &[&str], stderr: &Path, env: &[(&str, &str)], secret: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_temper"))
            .args(["mcp", "--judge", "rules", "--cache-dir"])
            .arg(cache_dir())
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        let secret = secret.to_string();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                assert!(!line.contains(&secret), "secret on stdout: {line}");
                if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
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
        let init = m.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
        assert!(init.get("result").is_some(), "{init}");
        m
    }

    /// The response to a request (notifications skipped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_noting(method, params).0
    }

    /// The response to a request, and the messages that came before it.
    pub fn request_noting(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        self.next += 1;
        let id = self.next;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(&line).unwrap();
        stdin.flush().unwrap();
        loop {
            let m = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .expect("no answer");
            if m["id"] == json!(id) {
                return (m, before);
            }
            before.push(m);
        }
    }

    /// `tools/call` of `name`.
    pub fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// The tools `tools/list` answers.
    pub fn tools(&mut self) -> Vec<Value> {
        let list = self.request("tools/list", json!({}));
        list["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Closes stdin (the server's way out) and waits for the process.
    pub fn close(mut self) {
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

/// A tool result's output (structured content, else the text as JSON).
pub fn tool_output(response: &Value) -> Value {
    let r = &response["result"];
    assert_ne!(r["isError"], json!(true), "tool error: {response}");
    if let Some(s) = r.get("structuredContent") {
        return s.clone();
    }
    serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap()
}

/// Writes `text` to `dir/name`.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A host policy allowing the hub tools `allow` (`dir/policy.toml`).
pub fn tools_policy(dir: &Path, allow: &[&str]) -> PathBuf {
    write_file(
        dir,
        "policy.toml",
        &format!(
            "[tools]\nallow = {}\n",
            serde_json::to_string(allow).unwrap()
        ),
    )
}

/// Every file under `dir`.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// The SDK venv's python (with the official `mcp` package), for upstream
/// servers written with it; `None` (the test skips, with a notice) when
/// missing, unless TEMPER_REQUIRE_MCP_PY=1.
pub fn mcp_python() -> Option<PathBuf> {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/mcp-venv/bin/python");
    let ok = python.exists()
        && Command::new(&python)
            .args(["-c", "import mcp.server.mcpserver"])
            .status()
            .is_ok_and(|s| s.success());
    if ok {
        return Some(python);
    }
    let why = format!(
        "no Python venv with the `mcp` package at {} (run scripts/mcp-venv.sh)",
        python.display()
    );
    if std::env::var("TEMPER_REQUIRE_MCP_PY").as_deref() == Ok("1") {
        panic!("TEMPER_REQUIRE_MCP_PY=1 but {why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}
