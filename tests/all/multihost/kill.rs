//! A `temper` process killed with SIGKILL mid-forge leaves the shared
//! store consistent, and the other host keeps working.

use crate::support;

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use support::cache_dir;
use temper::forge::ForgeContext;

use super::{
    HANG, Shared, ab, adder, artifacts_of, assert_consistent, config, host, rules, seed, seed_json,
    shared_stores, temper_cli,
};

/// Serves a chat-completions judge that never answers; each request's
/// arrival is sent on the returned channel (the forging process is then
/// in its JUDGE stage, its tests run).
async fn hanging_judge() -> (String, std::sync::mpsc::Receiver<()>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = Mutex::new(tx);
    let url = support::chat::serve(move |_body| {
        let _ = tx.lock().unwrap().send(());
        support::chat::Reply {
            delay: HANG,
            ..support::chat::Reply::content("{}")
        }
    })
    .await;
    (url, rx)
}

fn spawn_temper(shared: &Shared, args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_temper"))
        .current_dir(shared.scratch())
        .args(args)
        .arg("--store")
        .arg(&shared.location)
        .arg("--cache-dir")
        .arg(cache_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn temper")
}

/// SIGKILL (`Child::kill` on Unix) and reap.
fn sigkill(mut child: Child) -> std::process::ExitStatus {
    child.kill().unwrap();
    child.wait().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_host_killed_mid_forge_leaves_the_shared_store_consistent() {
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    for shared in shared_stores("a_host_killed_mid_forge_leaves_the_shared_store_consistent") {
        let label = shared.label;
        // Host B: a library forge in this process, calling throughout.
        let b = host(&shared, rules(), config());
        let ctx = ForgeContext::new("default", "b");
        b.forge(&seed("add_numbers"), &ctx).await.unwrap();
        b.promote("add_numbers", &ctx, None).await.unwrap();
        let calls = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = {
            let (b, ctx, calls, stop) = (b.clone(), ctx.clone(), calls.clone(), stop.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Acquire) {
                    let out = b.invoke("add_numbers", &ab(1, 2), &ctx).await.unwrap();
                    assert_eq!(out.output, json!({"sum": 3}));
                    calls.fetch_add(1, Ordering::AcqRel);
                }
            })
        };

        // Host A: `temper` processes killed with SIGKILL in their JUDGE
        // stage (VALIDATE, BUILD and TEST done, REGISTER next): a forge,
        // then an import into the agent tier.
        let (judge_url, judged) = hanging_judge().await;
        let llm = [
            "--judge",
            "llm",
            "--judge-url",
            judge_url.as_str(),
            "--judge-model",
            "m",
        ];
        let request = shared.scratch().join("killed.json");
        let mut r = seed_json("slugify");
        r["name"] = json!("killed_forge");
        std::fs::write(&request, r.to_string()).unwrap();
        let mut files = artifacts_of(
            &std::iter::once(adder("killed_import", 0))
                .chain((0..16).map(|i| adder(&format!("k_{i}"), 10 + i)))
                .collect::<Vec<_>>(),
        )
        .await;
        let killed_import = shared.scratch().join("killed_import.wasm");
        std::fs::write(&killed_import, files.remove(0)).unwrap();
        for args in [
            vec!["forge", request.to_str().unwrap(), "--session", "a"],
            vec!["import", killed_import.to_str().unwrap(), "--tier", "agent"],
        ] {
            let child = spawn_temper(&shared, &[&args[..], &llm[..]].concat());
            judged
                .recv_timeout(HANG)
                .expect("the child reaches its judge");
            let status = sigkill(child);
            assert_eq!(status.signal(), Some(9), "{label}: {status}");
            // Read through a forge's registry: artifacts may be stored in
            // compact form, which only a forge's codec expands.
            assert_consistent(b.store(), &["default"]);
        }
        let store = shared.open();
        assert!(store.get("killed_import", "default").unwrap().is_none());
        let (ok, doc, stderr) = temper_cli(&shared, &["tools", "--session", "a"]);
        assert!(ok, "{label}: {stderr}");
        assert!(
            !doc.to_string().contains("killed_forge"),
            "{label}: a killed forge is in no tier: {doc}"
        );

        // Imports killed at random points of their run: the first runs to
        // the end and sets the span (T) the others are killed within, at a
        // uniform random point of [0, T) (some may still finish first).
        // The store stays consistent after each, and B keeps calling.
        let (mut finished, mut span) = (0, Duration::ZERO);
        let runs = files.len();
        for (i, bytes) in files.into_iter().enumerate() {
            let file = shared.scratch().join(format!("k_{i}.wasm"));
            std::fs::write(&file, bytes).unwrap();
            let started = std::time::Instant::now();
            let mut child = spawn_temper(
                &shared,
                &[
                    "import",
                    file.to_str().unwrap(),
                    "--tier",
                    "agent",
                    "--judge",
                    "rules",
                ],
            );
            if i == 0 {
                let status = tokio::task::block_in_place(|| child.wait().unwrap());
                assert!(status.success(), "{label}: import k_0: {status}");
                span = started.elapsed();
                assert!(b.store().get("k_0", "default").unwrap().is_some());
                finished += 1;
            } else {
                let delay = rand::random_range(0..span.as_micros().max(1) as u64);
                tokio::time::sleep(Duration::from_micros(delay)).await;
                match child.try_wait().unwrap() {
                    Some(status) => {
                        assert!(status.success(), "{label}: import k_{i}: {status}");
                        finished += 1;
                    }
                    None => {
                        sigkill(child);
                    }
                }
            }
            let store = b.store();
            assert_consistent(store, &["default"]);
            // A registered tool is complete: B calls it.
            let name = format!("k_{i}");
            if store.get(&name, "default").unwrap().is_some() {
                let out = b.invoke(&name, &ab(2, 3), &ctx).await.unwrap();
                assert_eq!(out.output, json!({"sum": 15 + i as i64}));
            }
        }
        eprintln!(
            "{label}: {} of {runs} imports killed within an import's span of {span:?}",
            runs - finished
        );

        stop.store(true, Ordering::Release);
        worker.await.unwrap();
        let made = calls.load(Ordering::Acquire);
        assert!(made > 0, "{label}");
        let s = b.tool_stats("add_numbers", &ctx).unwrap();
        assert_eq!(s.total_calls, made, "{label}: every call of B counted once");
        // B still forges and promotes; the chain verifies from the CLI.
        b.forge(&adder("after_the_kills", 0), &ctx).await.unwrap();
        b.promote("after_the_kills", &ctx, None).await.unwrap();
        let (ok, doc, stderr) = temper_cli(&shared, &["audit", "verify"]);
        assert!(ok && doc["ok"] == true, "{label}: {doc} {stderr}");
    }
}
