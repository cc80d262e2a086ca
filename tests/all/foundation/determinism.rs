//! Deterministic builds: byte-identical across processes, and Date and
//! random fixed in the snapshot but live in calls.

use crate::support;

use std::ffi::OsStr;

use support::temper_json;

use super::{fixtures, runtime};

#[test]
fn builds_are_byte_identical_across_processes() {
    let source = fixtures().join("../../components/examples/slugify.js");
    let mut ids = Vec::new();
    for run in 0..2 {
        let work = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let out = work.path().join("tool.wasm");
        let run_s = run.to_string();
        let tz = if run == 0 { "UTC" } else { "Asia/Tokyo" };
        let env = [
            ("TMPDIR", tmp.path().as_os_str()),
            ("TEMPER_TEST_RUN", OsStr::new(&run_s)),
            ("TZ", OsStr::new(tz)),
        ];
        let (ok, doc, stderr) = temper_json(
            work.path(),
            &env,
            [
                OsStr::new("build"),
                source.as_os_str(),
                OsStr::new("-o"),
                out.as_os_str(),
            ],
        );
        assert!(ok, "{stderr}");
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(doc["id"], blake3::hash(&bytes).to_hex().as_str());
        ids.push(doc["id"].as_str().unwrap().to_string());
    }
    assert_eq!(ids[0], ids[1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn date_and_random_at_top_level_are_fixed_in_the_snapshot_but_live_in_calls() {
    let rt = runtime();
    let source = "const builtAt = Date.now();\nfunction execute() { return { builtAt, now: Date.now() > 1.6e12 }; }";
    let a = rt.build(source).await.unwrap();
    let b = rt.build(source).await.unwrap();
    assert_eq!(
        a.id, b.id,
        "top-level clock reads must not make builds differ"
    );
    let out = rt.call(&rt.tool(&a), "{}").await.unwrap().output;
    assert_eq!(out, r#"{"builtAt":0,"now":true}"#);
}
