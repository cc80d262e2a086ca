//! Promotion: a hot tool moves to its own compiled snapshot and behaves
//! exactly as it did on the shared engine — outputs, JS errors, refused
//! capabilities, limits, and a fresh instance per call.

use super::*;
use crate::limits::CacheLimits;
use std::time::Duration;
use temper_policy::HostPolicy;

/// Keeps a module-level counter (a call must never see another's), throws
/// with a message and line, spins, and uses `crypto` when asked.
const TOOL: &str = "let calls = 0;
function execute(input) {
  calls += 1;
  if (input.mode === 'throw') {
    throw new Error('refused ' + input.n);
  }
  if (input.mode === 'spin') { while (true) {} }
  if (input.mode === 'hash') {
    return crypto.createHash('sha256').update(String(input.n)).digest('hex');
  }
  return { twice: input.n * 2, calls };
}";

fn runtime(cache: &std::path::Path, promote_after_calls: u64, compiled_tools: usize) -> Runtime {
    Runtime::builder()
        .policy(HostPolicy::deny_all().with_allow_crypto())
        .limits(Limits::default().with_timeout(Duration::from_millis(300)))
        .cache_dir(Some(cache.to_path_buf()))
        .cache_limits(CacheLimits {
            promote_after_calls,
            compiled_tools,
            ..CacheLimits::default()
        })
        .build()
        .unwrap()
}

/// What each kind of call gives, and whether the successful ones ran on a
/// compiled snapshot.
async fn behaviour(rt: &Runtime, plain: &Tool, hashing: &Tool) -> (Vec<String>, Vec<bool>) {
    let calls = [
        (plain, r#"{"n": 21}"#),
        (plain, r#"{"n": 21}"#),
        (plain, r#"{"mode": "throw", "n": 7}"#),
        (plain, r#"{"mode": "hash", "n": 1}"#),
        (hashing, r#"{"mode": "hash", "n": 1}"#),
        (plain, r#"{"mode": "spin"}"#),
    ];
    let mut seen = Vec::new();
    let mut compiled = Vec::new();
    for (tool, input) in calls {
        match rt.call(tool, input).await {
            Ok(out) => {
                compiled.push(out.compiled);
                seen.push(format!("ok {}", out.output));
            }
            Err(failure) => seen.push(format!("err {:?}", failure.error)),
        }
    }
    (seen, compiled)
}

/// Calls `tool` until the runtime has made `promotions` promotions.
async fn call_until_promoted(rt: &Runtime, tool: &Tool, promotions: u64) {
    let start = std::time::Instant::now();
    while rt.cache_stats().promoted_tools < promotions {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no promotion: {:?}",
            rt.cache_stats()
        );
        rt.call(tool, r#"{"n": 1}"#).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_tool_is_promoted_and_behaves_exactly_as_on_the_engine() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path(), 3, 4);
    let artifact = rt.build(TOOL).await.unwrap();
    let plain = rt.tool(&artifact);
    let hashing = rt.grant(&plain, &["crypto".to_string()]).unwrap();

    let (on_engine, compiled) = behaviour(&rt, &plain, &hashing).await;
    assert!(compiled.iter().all(|c| !c), "{compiled:?}");
    assert_eq!(
        on_engine,
        [
            r#"ok {"twice":42,"calls":1}"#.to_string(),
            r#"ok {"twice":42,"calls":1}"#.to_string(),
            r#"err Js { error: JsLocation { message: "Error: refused 7", line: Some(5), column: Some(34), stack: Some("    at execute (tool.js:5:34)\n") } }"#.to_string(),
            r#"err CapabilityDenied { capability: "crypto" }"#.to_string(),
            r#"ok "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b""#.to_string(),
            "err Timeout { limit_ms: 300 }".to_string(),
        ]
    );

    call_until_promoted(&rt, &plain, 1).await;
    let stats = rt.cache_stats();
    assert_eq!((stats.promoted_tools, stats.promotion_failures), (1, 0));
    assert_eq!(stats.compiled_tools, 1);
    let (promoted, compiled) = behaviour(&rt, &plain, &hashing).await;
    assert_eq!(
        compiled,
        [true, true, true],
        "the successful calls ran compiled"
    );
    assert_eq!(promoted, on_engine, "the same outputs and errors");
    // Promoted once: more calls compile nothing more.
    for _ in 0..10 {
        assert!(rt.call(&plain, r#"{"n": 2}"#).await.unwrap().compiled);
    }
    assert_eq!(rt.cache_stats().promoted_tools, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promotion_off_and_one_shot_tools_stay_on_the_engine() {
    let cache = tempfile::tempdir().unwrap();
    let off = runtime(cache.path(), 0, 4);
    let tool = off.tool(&off.build(TOOL).await.unwrap());
    let one_shot = runtime(cache.path(), 1, 4);
    let once = one_shot.one_shot_tool(TOOL).await.unwrap();
    for _ in 0..20 {
        assert!(!off.call(&tool, r#"{"n": 1}"#).await.unwrap().compiled);
        assert!(!one_shot.call(&once, r#"{"n": 1}"#).await.unwrap().compiled);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    for rt in [&off, &one_shot] {
        let stats = rt.cache_stats();
        assert_eq!((stats.promoted_tools, stats.compiled_tools), (0, 0));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_promotion_goes_back_to_the_engine_and_counts_anew() {
    let cache = tempfile::tempdir().unwrap();
    // One place for compiled components: the second promotion evicts the
    // first.
    let rt = runtime(cache.path(), 2, 1);
    let first = rt.tool(&rt.build(TOOL).await.unwrap());
    let second = rt.tool(
        &rt.build(&TOOL.replace("calls = 0", "calls = 100"))
            .await
            .unwrap(),
    );
    // The engine compiled before the clock starts: what is timed below is
    // the promotion.
    rt.warm_up().await.unwrap();
    let started = std::time::Instant::now();
    call_until_promoted(&rt, &first, 1).await;
    let first_took = started.elapsed();
    assert!(rt.call(&first, r#"{"n": 1}"#).await.unwrap().compiled);
    let promoted_first = std::time::Instant::now();
    call_until_promoted(&rt, &second, 2).await;
    // Promotions take at most a tenth of a core: the second compile starts
    // no sooner than 9x the first's after it (which took at least
    // `first_took` less the calls and 5 ms polls around it).
    let slop = Duration::from_millis(100);
    let gap = promoted_first.elapsed();
    assert!(
        gap + slop >= first_took.saturating_sub(slop) * 9,
        "second promotion {gap:?} after the first, which took {first_took:?}"
    );
    let out = rt.call(&second, r#"{"n": 1}"#).await.unwrap();
    assert!(out.compiled);
    assert_eq!(out.output, r#"{"twice":2,"calls":101}"#);
    // `first` lost its place: on the engine again, with the same result.
    let out = rt.call(&first, r#"{"n": 1}"#).await.unwrap();
    assert!(!out.compiled);
    assert_eq!(out.output, r#"{"twice":2,"calls":1}"#);
    assert_eq!(rt.cache_stats().compiled_tools, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_tool_keeps_pre_warmed_instances_of_its_snapshot() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path(), 1, 4);
    let tool = rt.tool(&rt.build(TOOL).await.unwrap());
    call_until_promoted(&rt, &tool, 1).await;
    let per_tool = rt.cache_limits().warm_per_tool;
    for _ in 0..20 {
        let start = std::time::Instant::now();
        while rt.warm_ready(&tool) < per_tool {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no pre-warmed instance: {:?}",
                rt.cache_stats()
            );
            tokio::task::yield_now().await;
        }
        let hits = rt.cache_stats().warm_hits;
        let out = rt.call(&tool, r#"{"n": 3}"#).await.unwrap();
        assert!(out.compiled);
        assert_eq!(out.output, r#"{"twice":6,"calls":1}"#);
        assert_eq!(rt.cache_stats().warm_hits, hits + 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_whose_promotion_fails_stays_on_the_engine() {
    let cache = tempfile::tempdir().unwrap();
    let rt = runtime(cache.path(), 2, 4);
    rt.warm_up().await.unwrap();
    // Bytes that are not QuickJS bytecode: every call fails to load, and so
    // does the rebuild a promotion starts from.
    let broken = rt.engine_tool("not-bytecode", Arc::new(b"\x02garbage".to_vec()));
    let first = rt.call(&broken, "{}").await.unwrap_err().error;
    let start = std::time::Instant::now();
    while rt.cache_stats().promotion_failures == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{:?}",
            rt.cache_stats()
        );
        let again = rt.call(&broken, "{}").await.unwrap_err().error;
        assert_eq!(format!("{again:?}"), format!("{first:?}"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let stats = rt.cache_stats();
    assert_eq!((stats.promoted_tools, stats.compiled_tools), (0, 0));
    // No second attempt, and calls fail as before (on the engine).
    for _ in 0..5 {
        let again = rt.call(&broken, "{}").await.unwrap_err().error;
        assert_eq!(format!("{again:?}"), format!("{first:?}"));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(rt.cache_stats().promotion_failures, 1);
}
