//! Foundation: JS → `tool` component → isolated run under limits.
//!
//! Every test builds real tools with the real shim and runs them in fresh
//! wasmtime stores. Compiled components are cached under the test target
//! directory, so only the first test pays for compiling the shim.
//!
//! This module keeps the shared helpers; the tests are in its submodules.

use crate::support;

use std::path::{Path, PathBuf};

use temper::request::{ForgeRequest, Implementation};
use temper::{Limits, RunError, Runtime};

mod determinism;
mod engine;
mod isolation;
mod limits;
mod prewarm;
mod run;

fn runtime_with(limits: Limits) -> Runtime {
    support::runtime_builder()
        .limits(limits)
        .build()
        .expect("runtime")
}

fn runtime() -> Runtime {
    runtime_with(Limits::default())
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn seed(name: &str) -> ForgeRequest {
    let path = fixtures().join("seeds").join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn sandbox_code(req: &ForgeRequest) -> &str {
    match &req.implementation {
        Implementation::Sandbox { code, .. } => code,
        other => panic!("not a sandbox request: {other:?}"),
    }
}

/// Builds `source` and calls it once on the warm-up path and once on the
/// compiled artifact; both must agree. Returns the output.
async fn run_both_paths(rt: &Runtime, source: &str, input: &str) -> Result<String, RunError> {
    let artifact = rt.build(source).await.expect("build");
    let warm = rt.tool(&artifact);
    let first = rt.call(&warm, input).await.map(|o| {
        assert!(
            !o.compiled,
            "first call right after build takes the warm-up path"
        );
        o.output
    });
    let compiled = rt
        .load_compiled(artifact.bytes.to_vec())
        .await
        .expect("load artifact");
    let second = rt.call(&compiled, input).await.map(|o| {
        assert!(o.compiled);
        o.output
    });
    assert_eq!(
        first.as_ref().map_err(|f| f.error.clone()),
        second.as_ref().map_err(|f| f.error.clone()),
        "warm-up and compiled paths disagree"
    );
    first.map_err(|f| f.error)
}

/// A runtime on a cache directory of its own, with explicit cache caps.
fn runtime_with_caches(
    cache: &Path,
    caches: temper::limits::CacheLimits,
    limits: Limits,
) -> Runtime {
    Runtime::builder()
        .cache_dir(Some(cache.to_path_buf()))
        .max_concurrent_instances(16)
        .cache_limits(caches)
        .limits(limits)
        .build()
        .expect("runtime")
}
