//! Tools written in other languages against `wit/tool.wit` run beside JS
//! tools on the same runtime: a Rust tool (`components/rust-word-stats`)
//! and a Python tool built with componentize-py
//! (`components/python-word-count`). `scripts/build-components.sh` builds
//! both into `target/components/` (the test suite runs it first).

use crate::support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use temper::Runtime;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn runtime() -> Runtime {
    support::runtime_builder().build().unwrap()
}

async fn call(rt: &Runtime, tool: &temper::Tool, input: Value) -> Result<Value, String> {
    rt.call(tool, &input.to_string())
        .await
        .map(|o| serde_json::from_str(&o.output).unwrap())
        .map_err(|f| f.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_tool_runs_beside_a_js_tool() {
    // Up to date after scripts/build-components.sh; builds it otherwise.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root())
        .args([
            "build",
            "--release",
            "--locked",
            "--target",
            "wasm32-wasip2",
            "--manifest-path",
            "components/rust-word-stats/Cargo.toml",
            "--target-dir",
            "target/components",
        ])
        .status()
        .unwrap();
    assert!(status.success(), "building the Rust tool failed");
    let bytes =
        std::fs::read(root().join("target/components/wasm32-wasip2/release/rust_word_stats.wasm"))
            .unwrap();
    let world = temper::artifact::world(&bytes).unwrap();
    assert!(
        world
            .exports
            .contains(&temper::runtime::RUN_EXPORT.to_string()),
        "{world:?}"
    );

    let rt = runtime();
    let rust = rt.load(bytes).await.unwrap();
    let js = rt.tool(
        &rt.build("function execute(i) { return { upper: i.text.toUpperCase() }; }")
            .await
            .unwrap(),
    );
    let input = json!({"text": "forged tools in  any language"});
    assert_eq!(
        call(&rt, &rust, input.clone()).await.unwrap(),
        json!({"words": 5, "chars": 29, "longest": "language"})
    );
    assert_eq!(
        call(&rt, &js, input).await.unwrap(),
        json!({"upper": "FORGED TOOLS IN  ANY LANGUAGE"})
    );
    // Its typed error comes through as the tool-error variant.
    let err = call(&rt, &rust, json!({"txt": 1})).await.unwrap_err();
    assert!(err.contains("input.text must be a string"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_tool_runs_beside_a_js_tool() {
    let path = root().join("target/components/python_word_count.wasm");
    if !path.exists() {
        let msg = "target/components/python_word_count.wasm is missing: run scripts/build-components.sh (needs PyPI's componentize-py)";
        if std::env::var_os("TEMPER_REQUIRE_PY_TOOL").is_some() {
            panic!("{msg}");
        }
        eprintln!("skipped: {msg}");
        return;
    }
    let bytes = std::fs::read(path).unwrap();
    let rt = runtime();
    let py = rt.load(bytes).await.unwrap();
    assert_eq!(
        call(&rt, &py, json!({"text": "one two\nthree"}))
            .await
            .unwrap(),
        json!({"words": 3, "lines": 2})
    );
    let err = call(&rt, &py, json!({"text": 7})).await.unwrap_err();
    assert!(err.contains("input.text must be a string"), "{err}");
    let js = rt.tool(
        &rt.build("function execute(i) { return { n: i.text.length }; }")
            .await
            .unwrap(),
    );
    assert_eq!(
        call(&rt, &js, json!({"text": "abc"})).await.unwrap(),
        json!({"n": 3})
    );
}
