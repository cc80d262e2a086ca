//! Artifacts on the engine: loading own artifacts and distrusting damaged
//! records, rebuilding from bytecode, and the instance pool and reaper.

use temper::{Limits, RunError, Runtime};

use super::{runtime, runtime_with_caches, sandbox_code, seed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_runs_own_artifacts_on_the_engine_and_distrusts_damaged_records() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime_with_caches(
        cache.path(),
        temper::limits::CacheLimits::default(),
        Limits::default(),
    );
    let artifact = rt
        .build("function execute(i) { return i.a * 2; }")
        .await
        .unwrap();
    // With a manifest section, as the registry stores it.
    let manifest = temper::artifact::ArtifactManifest::sandbox(
        "double",
        "doubles",
        &serde_json::json!({}),
        &serde_json::json!({}),
        &[],
        &[],
        "function execute(i) { return i.a * 2; }",
        false,
    );
    let stored = temper::artifact::embed(&artifact.bytes, &manifest).unwrap();
    for bytes in [artifact.bytes.to_vec(), stored.clone()] {
        let id = blake3::hash(&bytes).to_hex().to_string();
        let tool = rt.load(bytes).await.unwrap();
        assert!(tool.runs_on_engine());
        assert_eq!(tool.id(), id);
        assert_eq!(rt.call(&tool, r#"{"a": 21}"#).await.unwrap().output, "42");
    }
    // A new runtime (a restarted host) on the same cache finds the record.
    let again = runtime_with_caches(
        cache.path(),
        temper::limits::CacheLimits::default(),
        Limits::default(),
    );
    let tool = again.load(stored.clone()).await.unwrap();
    assert!(tool.runs_on_engine());
    assert_eq!(again.call(&tool, r#"{"a": 1}"#).await.unwrap().output, "2");
    // A damaged record is not trusted: the artifact runs as itself.
    for entry in std::fs::read_dir(cache.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("bytecode-")
        {
            let mut bytes = std::fs::read(&path).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 0xff;
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let third = runtime_with_caches(
        cache.path(),
        temper::limits::CacheLimits::default(),
        Limits::default(),
    );
    let tool = third.load(stored).await.unwrap();
    assert!(!tool.runs_on_engine());
    let out = third.call(&tool, r#"{"a": 4}"#).await.unwrap();
    assert!(out.compiled);
    assert_eq!(out.output, "8");
    // Without a cache, another runtime knows nothing of this artifact.
    let uncached = Runtime::builder().cache_dir(None).build().unwrap();
    let tool = uncached.load(artifact.bytes.to_vec()).await.unwrap();
    assert!(!tool.runs_on_engine());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_artifact_rebuilds_byte_identically_from_its_bytecode() {
    let rt = runtime();
    let req = seed("slugify");
    let built = rt.build(sandbox_code(&req)).await.unwrap();
    let rebuilt = rt
        .artifact_from_bytecode(built.bytecode.to_vec())
        .await
        .unwrap();
    assert_eq!(rebuilt.id, built.id);
    assert!(rebuilt.bytes == built.bytes);
    // Bytes that are not a tool's bytecode are refused, not snapshotted.
    assert!(rt.artifact_from_bytecode(vec![1, 2, 3]).await.is_err());
}

/// A runtime with `slots` pool slots for calls and no pre-warmed instances
/// (every call makes its own), on a cache directory of its own.
fn runtime_without_pre_warming(slots: u32) -> (tempfile::TempDir, Runtime) {
    let cache = tempfile::tempdir().unwrap();
    let caches = temper::limits::CacheLimits {
        warm_per_tool: 0,
        // The engine path is what is measured: no promotion.
        promote_after_calls: 0,
        ..Default::default()
    };
    let rt = Runtime::builder()
        .cache_dir(Some(cache.path().to_path_buf()))
        .max_concurrent_instances(slots)
        .cache_limits(caches)
        .build()
        .expect("runtime");
    (cache, rt)
}

/// Used stores wait for the reaper in pool slots of their own: 6,000 short
/// calls from two tasks on a runtime with 2 call slots never find the pool
/// full.
/// (Before, the reaper's queue and the batch it was dropping could hold
/// every slot, and calls failed as traps under load.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_waiting_for_the_reaper_never_take_a_calls_slot() {
    let (_cache, rt) = runtime_without_pre_warming(2);
    let artifact = rt
        .build("function execute(input) { return input.n * 2; }")
        .await
        .unwrap();
    let tool = rt.tool(&artifact);
    let tasks: Vec<_> = (0..2)
        .map(|_| {
            let (rt, tool) = (rt.clone(), tool.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u32, Vec::new());
                for _ in 0..3000 {
                    match rt.call(&tool, r#"{"n":21}"#).await {
                        Ok(out) if out.output == "42" => ok += 1,
                        Ok(out) => failed.push(format!("wrong output {}", out.output)),
                        Err(e) => failed.push(e.error.to_string()),
                    }
                }
                (ok, failed)
            })
        })
        .collect();
    let mut calls = 0;
    for task in tasks {
        let (ok, failed) = task.await.unwrap();
        assert!(
            failed.is_empty(),
            "{} calls failed, first: {}",
            failed.len(),
            failed[0]
        );
        calls += ok;
    }
    assert_eq!(calls, 6000);
}

/// More instances at once than the pool holds: the calls that find no
/// slot fail as `RunError::Instantiate` naming the limit, never as a trap
/// of the tool, and the others still answer correctly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_instance_pool_is_an_instantiation_error_not_a_trap() {
    let (_cache, rt) = runtime_without_pre_warming(1);
    // Busy for 1.5 s: the epoch ticker makes it yield, so the calls'
    // instances are all alive at once (1 call slot + the reaper's 32). The
    // first call's end frees its slot at once (while every core is busy a
    // call drops its own store), so all 48 must have started by then, also
    // on a machine loaded by the other tests.
    let artifact = rt
        .build("function execute() { const end = Date.now() + 1500; let i = 0; while (Date.now() < end) i++; return 'done'; }")
        .await
        .unwrap();
    let tool = rt.tool(&artifact);
    let tasks: Vec<_> = (0..48)
        .map(|_| {
            let (rt, tool) = (rt.clone(), tool.clone());
            tokio::spawn(async move { rt.call(&tool, "{}").await })
        })
        .collect();
    let (mut ok, mut refused) = (0, 0);
    for task in tasks {
        match task.await.unwrap() {
            Ok(out) => {
                assert_eq!(out.output, "\"done\"");
                ok += 1;
            }
            Err(failure) => match failure.error {
                RunError::Instantiate { message } => {
                    assert!(message.contains("concurrent"), "{message}");
                    refused += 1;
                }
                other => panic!("expected an instantiation error, got {other:?}"),
            },
        }
    }
    assert!(ok >= 1, "no call answered");
    assert!(refused >= 1, "48 calls at once fit in 33 slots?");
}
