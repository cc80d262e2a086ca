//! One store under load and crashes: eight threads forging and invoking at
//! once, and a child process killed at random points while it forges.

use crate::support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use temper::forge::{Forge, ForgeConfig, ForgeContext};
use temper::store::{AuditKind, Registry, Tier};

use super::{audit, renamed, rules, runtime, seed, store, with_code};

#[test]
fn eight_threads_forge_and_invoke_against_one_store() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let rt = rt.clone();
            let path = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let tokio = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                tokio.block_on(async move {
                    // Each thread opens its own handle on the same store.
                    let forge = Forge::builder(rt, store(&path)).judge(rules()).build();
                    let c = ForgeContext::new(format!("agent-{}", i % 2), format!("s{i}"));
                    let name = format!("add_{i}");
                    forge
                        .forge(&renamed(seed("add_numbers"), &name), &c)
                        .await
                        .unwrap();
                    for n in 0..5 {
                        let out = forge
                            .invoke(&name, &json!({"a": n, "b": i}), &c)
                            .await
                            .unwrap();
                        assert_eq!(out.output, json!({"sum": n + i}));
                    }
                    forge.promote(&name, &c, None).await.unwrap();
                    for n in 0..3 {
                        forge
                            .invoke(&name, &json!({"a": n, "b": 0}), &c)
                            .await
                            .unwrap();
                    }
                    let stats = forge.tool_stats(&name, &c).unwrap();
                    assert_eq!(
                        stats.total_calls, 8,
                        "a promoted tool keeps its 5 session-tier calls"
                    );
                })
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let st = Registry::open(dir.path()).unwrap();
    let report = st.verify_audit().unwrap();
    // Per thread: forge decision, promotion, registration.
    assert_eq!(report.entries, 8 * 3);
    assert_eq!(st.tools_for_agent("agent-0").unwrap().len(), 4);
    assert_eq!(st.tools_for_agent("agent-1").unwrap().len(), 4);
}

/// Environment variable that turns `crash_child` into the forging child.
const CRASH_DIR_ENV: &str = "TEMPER_CRASH_CHILD_DIR";

/// The child of `killed_forging_process_leaves_a_consistent_store`: forges,
/// calls, promotes and approves tools in a loop until it is killed.
#[test]
#[ignore = "run only as the crash test's child process"]
fn crash_child() {
    let Ok(dir) = std::env::var(CRASH_DIR_ENV) else {
        return;
    };
    let agent = std::env::var("TEMPER_CRASH_AGENT").unwrap();
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    tokio.block_on(async move {
        let config = ForgeConfig {
            promotion_threshold: temper::forge::PromotionThreshold {
                uses: 1,
                confidence: 0.8,
            },
            max_agent_tools: 1000,
            ..ForgeConfig::default()
        };
        let rt = runtime();
        // Kill points are spread over forging work, not process start-up.
        rt.warm_up().await.unwrap();
        let forge = Forge::builder(rt, store(Path::new(&dir)))
            .judge(rules())
            .config(config)
            .build();
        let c = ForgeContext::new(agent, "s");
        println!("ready");
        for i in 0.. {
            // Unique across runs: shared-tier names are global.
            let name = format!("{}_add_{i}", c.agent_id);
            // A distinct source per tool: distinct artifacts get written.
            let code = format!(
                "function execute(input) {{ return {{ sum: input.a + input.b + {i} - {i} }}; }}"
            );
            let r = with_code(&name, &code, &[]);
            forge.forge(&r, &c).await.unwrap();
            forge
                .invoke(&name, &json!({"a": 1, "b": 2}), &c)
                .await
                .unwrap();
            forge.promote(&name, &c, None).await.unwrap();
            if i % 2 == 0 {
                forge
                    .approve(&name, &c.agent_id, "crash-test", None)
                    .unwrap();
            }
            forge
                .invoke(&name, &json!({"a": 1, "b": 2}), &c)
                .await
                .unwrap();
        }
    });
}

/// Checks what a crash must never break: the audit chain verifies; every
/// registry row's artifact is present and hashes to its id; every row has
/// its registration entry; every shared tool has its approval.
/// Artifacts in `checked` were rebuilt and checked by an earlier round
/// (content-addressed files are never rewritten with other content).
fn assert_consistent(
    dir: &Path,
    agents: &[String],
    codec: &Arc<dyn temper::store::ArtifactCodec>,
    checked: &mut std::collections::HashSet<temper::ArtifactId>,
) -> usize {
    let st = Registry::open(dir).expect("the store opens after a crash");
    // Compact records are rebuilt (and checked against their ids) by a runtime.
    st.attach_codec(codec.clone());
    st.verify_audit().expect("audit chain intact");
    let entries = audit(&st);
    let by_seq: std::collections::HashMap<i64, &temper::store::AuditEntry> =
        entries.iter().map(|e| (e.seq, e)).collect();
    let mut rows = st.shared_tools().unwrap();
    let shared = rows.len();
    for a in agents {
        rows.extend(st.tools_for_agent(a).unwrap());
    }
    for r in &rows {
        if !checked.contains(&r.artifact) {
            st.get_artifact(&r.artifact)
                .expect("registered artifact present and intact");
            checked.insert(r.artifact.clone());
        }
        let reg = by_seq.get(&r.created_seq).expect("registration entry");
        assert_eq!(
            (reg.kind, reg.subject.as_str()),
            (AuditKind::Registration, r.name.as_str())
        );
    }
    let shared_rows: std::collections::HashSet<(&str, Option<&str>)> = rows
        .iter()
        .filter(|r| r.tier == Tier::Shared)
        .map(|r| (r.name.as_str(), r.agent_id.as_deref()))
        .collect();
    for e in entries.iter().filter(|e| e.kind == AuditKind::Approval) {
        assert!(shared_rows.contains(&(e.subject.as_str(), e.agent.as_deref())));
    }
    assert_eq!(
        entries
            .iter()
            .filter(|e| e.kind == AuditKind::Approval)
            .count(),
        shared
    );
    for id in st.artifact_ids().unwrap() {
        if checked.insert(id.clone()) {
            st.get_artifact(&id)
                .expect("every listed artifact is complete");
        }
    }
    rows.len()
}

#[test]
fn killed_forging_process_leaves_a_consistent_store() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let runs = 50;
    let codec = support::runtime_builder().build().unwrap().artifact_codec();
    let mut checked = std::collections::HashSet::new();
    let mut agents = Vec::new();
    let mut registered = 0;
    for run in 0..runs {
        let agent = format!("a{run}");
        agents.push(agent.clone());
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "forge::concurrency::crash_child",
                "--exact",
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DIR_ENV, dir.path())
            .env("TEMPER_CRASH_AGENT", &agent)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until it is working, then kill it at a random point.
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        while !line.contains("ready") {
            line.clear();
            if out.read_line(&mut line).unwrap() == 0 {
                panic!("crash child exited before starting: {:?}", child.wait());
            }
        }
        let delay = rand::random_range(0..800u64);
        std::thread::sleep(Duration::from_millis(delay));
        if let Some(status) = child.try_wait().unwrap() {
            panic!("run {run}: the child stopped on its own ({status}) instead of being killed");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        registered = assert_consistent(dir.path(), &agents, &codec, &mut checked);
    }
    eprintln!("{runs} kills, {registered} tools registered at the end");
    assert!(
        registered > 0,
        "the children got far enough to register tools"
    );
}
