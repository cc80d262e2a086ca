//! Unit tests of the runtime's own rules: how the builder settles the
//! limits, what a grant gives, and one call through the whole path.

use super::*;
use temper_policy::HostPolicy;

const POLICY_WITH_LIMITS: &str = "[limits]\ntimeout_ms = 1234\nmax_output_bytes = 77\n";

#[test]
fn the_builder_applies_the_policy_files_limits() {
    let policy = HostPolicy::from_toml(POLICY_WITH_LIMITS).unwrap();
    let rt = Runtime::builder().policy(policy).build().unwrap();
    assert_eq!(rt.limits().timeout, std::time::Duration::from_millis(1234));
    assert_eq!(rt.limits().output_bytes, 77);
    assert_eq!(rt.limits().memory_bytes, Limits::default().memory_bytes);
}

#[test]
fn explicit_limits_win_over_the_policy() {
    let policy = HostPolicy::from_toml(POLICY_WITH_LIMITS).unwrap();
    let explicit = Limits::default().with_output_bytes(5);
    let rt = Runtime::builder()
        .policy(policy)
        .limits(explicit.clone())
        .build()
        .unwrap();
    assert_eq!(rt.limits(), &explicit);
}

#[test]
fn a_runtime_without_a_policy_denies_everything_with_default_limits() {
    let rt = Runtime::builder().build().unwrap();
    assert_eq!(rt.limits(), &Limits::default());
    assert!(rt.policy().allowed.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grants_are_the_allowlist_within_the_policy_and_calls_run() {
    let policy = HostPolicy::deny_all().with_allow_crypto();
    let rt = Runtime::builder().policy(policy).build().unwrap();
    let artifact = rt
        .build("function execute(input) { return { twice: input.n * 2 }; }")
        .await
        .unwrap();
    assert_eq!(artifact.id, crate::id::blake3_hex(&artifact.bytes));
    let base = rt.tool(&artifact);
    assert_eq!(
        base.grants(),
        &Grants::default(),
        "a new tool holds nothing"
    );

    let granted = rt.grant(&base, &["crypto".to_string()]).unwrap();
    assert!(granted.grants().crypto && !granted.grants().fetch);
    let Err(refused) = rt.grant(&base, &["fetch".to_string()]) else {
        panic!("fetch was granted by a policy that does not allow it");
    };
    assert!(refused.to_string().contains("\"fetch\""), "{refused}");
    assert!(rt.grant(&base, &["sockets".to_string()]).is_err());

    let out = rt.call(&granted, r#"{"n": 21}"#).await.unwrap();
    assert_eq!(out.output, r#"{"twice":42}"#);
    // Input that is not JSON is refused before the guest runs.
    assert!(matches!(
        rt.call(&granted, "{").await.unwrap_err().error,
        RunError::BadInput { .. }
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_compiles_what_the_shim_compiles_and_fails_alike() {
    let rt = Runtime::builder().build().unwrap();
    let sources = [
        "function execute(input) { return { n: input.n + 1 }; }",
        "async function execute(input) { const xs = [1, 2, 3];\n return { s: xs.map(x => x * 2).join(',') }; }",
    ];
    for source in sources {
        let on_shim = rt.compile_source(source).await.unwrap();
        let on_engine = rt.compile_on_engine(source).await.unwrap();
        assert_eq!(on_shim, on_engine, "bytecode of {source:?}");
        // A second compile on the engine starts from the same state.
        assert_eq!(rt.compile_on_engine(source).await.unwrap(), on_engine);
    }
    let broken = "function execute(input) {\n  return { a: ; };\n}";
    let (Err(BuildError::Compile(on_shim)), Err(BuildError::Compile(on_engine))) = (
        rt.compile_source(broken).await,
        rt.compile_on_engine(broken).await,
    ) else {
        panic!("a syntax error is a compile error on both");
    };
    assert_eq!(on_shim, on_engine);
    assert_eq!(on_engine.line, Some(2), "{on_engine:?}");
    let huge = "x".repeat(MAX_SOURCE_BYTES + 1);
    assert!(matches!(
        rt.compile_on_engine(&huge).await,
        Err(BuildError::SourceTooLarge { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_tool_compiled_on_the_engine_runs_and_is_checked() {
    let rt = Runtime::builder().build().unwrap();
    let tool = rt
        .one_shot_tool("async function execute(input) { return { ok: input.n === 1 }; }")
        .await
        .unwrap();
    let out = rt.call(&tool, r#"{"n": 1}"#).await.unwrap();
    assert_eq!(out.output, r#"{"ok":true}"#);
    // The static check still runs first: eval is refused before compiling.
    assert!(matches!(
        rt.one_shot_tool("async function execute() { return eval('1'); }")
            .await,
        Err(BuildError::StaticCheck(_))
    ));
}
