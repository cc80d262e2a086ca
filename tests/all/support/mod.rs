//! Test support: real servers on 127.0.0.1, the shared compile cache, and
//! a helper to run the `temper` CLI.

#![allow(dead_code)]

pub mod chat;
pub mod http;
pub mod mcp_stdio;
pub mod sse;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A runtime builder with the shared compile cache and room for parallel
/// tests; each test adds its policy, limits and transport.
pub fn runtime_builder() -> temper::RuntimeBuilder {
    temper::Runtime::builder()
        .cache_dir(Some(cache_dir()))
        .max_concurrent_instances(16)
}

/// Compiled components shared by all tests (the shim compiles once).
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("temper-test-cache")
}

/// Runs `temper ARGS --json --cache-dir CACHE` in `cwd` with extra env and
/// returns (success, stdout as JSON, stderr).
pub fn temper_json<I, S>(
    cwd: &Path,
    env: &[(&str, &OsStr)],
    args: I,
) -> (bool, serde_json::Value, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .current_dir(cwd)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .args(args)
        .arg("--json")
        .arg("--cache-dir")
        .arg(cache_dir())
        .output()
        .expect("run temper");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out.status.success(), doc, stderr)
}

/// A judge that approves everything (confidence 0.9): stands for a
/// reviewer that missed what the rules judge catches, to show the runtime
/// still holds the line, or to reach the stages after JUDGE.
pub struct ApproveAll;

impl temper::forge::judge::Judge for ApproveAll {
    fn review<'a>(
        &'a self,
        _c: &'a temper::forge::judge::ToolCandidate,
    ) -> temper::forge::judge::ReviewFuture<'a> {
        let scores = temper::forge::judge::Scores {
            safety: 1.0,
            correctness: 1.0,
            determinism: 1.0,
            confidence: 0.9,
        };
        let v = temper::forge::judge::Verdict::new(
            true,
            scores,
            vec!["approve-all".into()],
            "approve-all",
        );
        Box::pin(async move { v })
    }
}

/// A missing part (a binary, an SDK, a server): a failure when `var` is
/// `1` (scripts/test.sh sets the REQUIRE switches), else `test` is skipped
/// with `why` printed. Returns false, so callers write
/// `return skip_unless_required(...)` or `else { skip_unless_required(...); return }`.
pub fn skip_unless_required(var: &str, why: &str, test: &str) -> bool {
    if std::env::var(var).as_deref() == Ok("1") {
        panic!("{var}=1 but {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
    false
}
