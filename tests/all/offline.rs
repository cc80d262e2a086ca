//! Deterministic and offline execution: deterministic mode (fixed clocks,
//! seeded random) and fetch cassettes (record against servers on
//! 127.0.0.1, replay with no network, the policy still in force).

use crate::support;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use temper::capabilities::cassette::{Cassette, CassetteError};
use temper::capabilities::fetch::TransportOptions;
use temper::forge::schema::ToolSchemas;
use temper::policy::{Determinism, HostPolicy};
use temper::request::{ForgeRequest, Implementation};
use temper::{Runtime, Tool};

use support::http::{TestServer, TlsTestServer};
use support::temper_json;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn runtime(policy: HostPolicy, transport: TransportOptions, cassette: Option<Cassette>) -> Runtime {
    let mut builder = support::runtime_builder()
        .policy(policy)
        .transport(transport);
    if let Some(cassette) = cassette {
        builder = builder.cassette(cassette);
    }
    builder.build().expect("runtime")
}

async fn granted(rt: &Runtime, source: &str, allowlist: &[&str]) -> Tool {
    let artifact = rt.build(source).await.expect("build");
    let allowlist: Vec<String> = allowlist.iter().map(|s| s.to_string()).collect();
    rt.grant(&rt.tool(&artifact), &allowlist).expect("grant")
}

async fn call(rt: &Runtime, tool: &Tool, input: Value) -> Value {
    let out = rt
        .call(tool, &input.to_string())
        .await
        .unwrap_or_else(|f| panic!("{input}: {f}"));
    serde_json::from_str(&out.output).unwrap()
}

// ------------------------------------------------------------ deterministic mode

/// Reads every clock and random source a tool can reach.
const CLOCKS_AND_RANDOM: &str = r#"
function execute() {
  return {
    now: Date.now(),
    iso: new Date().toISOString(),
    math: [Math.random(), Math.random(), Math.random()],
    uuid: crypto.randomUUID(),
    values: Array.from(crypto.getRandomValues(new Uint8Array(8))),
    bytes: crypto.randomBytes(4).toString('hex'),
  };
}"#;

const EPOCH_MS: u64 = 1_700_000_000_000;

fn deterministic_policy(seed: u64) -> HostPolicy {
    HostPolicy::deny_all()
        .with_allow_crypto()
        .with_determinism(Determinism::seeded(seed).with_epoch_ms(EPOCH_MS))
}

/// One call on the warm-up path (right after the build) and one on the
/// compiled artifact; both outputs.
async fn both_paths(rt: &Runtime) -> (Value, Value) {
    let artifact = rt.build(CLOCKS_AND_RANDOM).await.expect("build");
    let warm = rt
        .grant(&rt.tool(&artifact), &["crypto".to_string()])
        .unwrap();
    let out = rt.call(&warm, "{}").await.expect("warm-up call");
    assert!(
        !out.compiled,
        "the first call after a build takes the warm-up path"
    );
    let warm_out: Value = serde_json::from_str(&out.output).unwrap();
    let loaded = rt
        .load_compiled(artifact.bytes.to_vec())
        .await
        .expect("load");
    let compiled = rt.grant(&loaded, &["crypto".to_string()]).unwrap();
    let out = rt.call(&compiled, "{}").await.expect("compiled call");
    assert!(out.compiled);
    (warm_out, serde_json::from_str(&out.output).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deterministic_mode_repeats_clocks_and_random_exactly() {
    let rt = runtime(deterministic_policy(42), TransportOptions::default(), None);
    let (warm, compiled) = both_paths(&rt).await;
    // Same values on the warm-up path and the compiled artifact...
    assert_eq!(warm, compiled);
    assert_eq!(compiled["now"], EPOCH_MS);
    assert_eq!(compiled["iso"], "2023-11-14T22:13:20.000Z");
    let math: Vec<f64> = serde_json::from_value(compiled["math"].clone()).unwrap();
    assert!(math.iter().all(|r| (0.0..1.0).contains(r)), "{math:?}");
    assert!(
        math[0] != math[1] && math[1] != math[2],
        "a sequence, not one value: {math:?}"
    );
    // ...on every call...
    let tool = granted(&rt, CLOCKS_AND_RANDOM, &["crypto"]).await;
    for _ in 0..3 {
        assert_eq!(call(&rt, &tool, json!({})).await, compiled);
    }
    // ...in another runtime (another run)...
    let other = runtime(deterministic_policy(42), TransportOptions::default(), None);
    let (warm2, compiled2) = both_paths(&other).await;
    assert_eq!(warm2, compiled);
    assert_eq!(compiled2, compiled);
    // ...and on every machine: the host-side streams depend on the seed
    // alone (pinned here; a change to them must show up in review).
    assert_eq!(compiled["uuid"], "cb89e9cb-5a9f-4891-80db-c6bba7f73132");

    // Another seed: other random numbers, the same clock.
    let rt43 = runtime(deterministic_policy(43), TransportOptions::default(), None);
    let (_, seed43) = both_paths(&rt43).await;
    assert_eq!(seed43["now"], EPOCH_MS);
    for key in ["math", "uuid", "values", "bytes"] {
        assert_ne!(seed43[key], compiled[key], "{key} must follow the seed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn normal_mode_has_live_clocks_and_fresh_random_per_call() {
    let rt = runtime(
        HostPolicy::deny_all().with_allow_crypto(),
        TransportOptions::default(),
        None,
    );
    let (warm, compiled) = both_paths(&rt).await;
    let third = call(
        &rt,
        &granted(&rt, CLOCKS_AND_RANDOM, &["crypto"]).await,
        json!({}),
    )
    .await;
    let outs = [warm, compiled, third];
    for out in &outs {
        assert!(
            out["now"].as_f64().unwrap() > 1.6e12,
            "real wall clock: {out}"
        );
    }
    // Every call draws fresh numbers: no two calls share a value.
    for key in ["math", "uuid", "values", "bytes"] {
        for i in 0..outs.len() {
            for j in i + 1..outs.len() {
                assert_ne!(
                    outs[i][key], outs[j][key],
                    "{key}: calls {i} and {j} repeat"
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deterministic_flag_and_policy_file_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("clocks.js");
    std::fs::write(&tool, CLOCKS_AND_RANDOM).unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy/testdata/good_deterministic.toml");
    let run = |extra: &[&OsStr]| {
        let mut args: Vec<&OsStr> = vec![OsStr::new("run"), tool.as_os_str()];
        args.extend_from_slice(extra);
        let (ok, doc, stderr) = temper_json(dir.path(), &[], args);
        assert!(ok, "{stderr}");
        assert_eq!(doc["ok"], true, "{doc}");
        doc["output"].clone()
    };
    // The policy file: seed 42, epoch_ms 1700000000000.
    let from_file = run(&[OsStr::new("--policy"), fixture.as_os_str()]);
    assert_eq!(from_file["now"], EPOCH_MS);
    assert_eq!(
        from_file,
        run(&[OsStr::new("--policy"), fixture.as_os_str()])
    );
    // `--deterministic` keeps the file's seed; `=SEED` replaces it.
    let flag = OsStr::new("--deterministic");
    assert_eq!(
        run(&[OsStr::new("--policy"), fixture.as_os_str(), flag]),
        from_file
    );
    let seed42 = run(&[
        OsStr::new("--deterministic=42"),
        OsStr::new("--allow-crypto"),
    ]);
    assert_eq!(seed42["now"], 0, "without a policy epoch: the Unix epoch");
    assert_eq!(seed42["uuid"], from_file["uuid"]);
    assert_eq!(seed42["math"], from_file["math"]);
    let seed7 = run(&[
        OsStr::new("--deterministic=7"),
        OsStr::new("--allow-crypto"),
    ]);
    assert_ne!(seed7["uuid"], seed42["uuid"]);

    let (ok, _, stderr) = temper_json(
        dir.path(),
        &[],
        [
            OsStr::new("run"),
            tool.as_os_str(),
            OsStr::new("--deterministic=-1"),
        ],
    );
    assert!(!ok);
    assert!(stderr.contains("--deterministic=-1"), "{stderr}");
}

// ------------------------------------------------------------ fetch cassettes

/// Reports what fetch returned, or the error message.
const FETCH_PROBE: &str = r#"
async function execute(input) {
  try {
    const res = await fetch(input.url, input.init || {});
    const text = await res.text();
    return { status: res.status, ok: res.ok, redirected: res.redirected, url: res.url,
             type: res.headers.get('content-type'), body: text };
  } catch (e) {
    return { error: String(e.message) };
  }
}"#;

fn seed(name: &str) -> ForgeRequest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds")
        .join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Names the tests use, all resolved to 127.0.0.1.
fn loopback_names() -> HashMap<String, Vec<IpAddr>> {
    [
        "httpstat.us",
        "api.example.test",
        "a.cdn.example.test",
        "evil.test",
    ]
    .into_iter()
    .map(|n| (n.to_string(), vec![LOOPBACK]))
    .collect()
}

/// The seed's request, its test case pointed at the local TLS server, plus
/// a case that follows two redirects on the plain server.
fn check_http_status_request(tls_port: u16, plain_port: u16) -> ForgeRequest {
    let mut request = seed("check_http_status");
    assert_eq!(
        request.test_cases[0].input["url"],
        "https://httpstat.us/200"
    );
    request.test_cases[0].input["url"] =
        json!(format!("https://httpstat.us:{tls_port}/status/200"));
    let mut redirect = request.test_cases[0].clone();
    redirect.input["url"] = json!(format!(
        "http://api.example.test:{plain_port}/redirect-chain"
    ));
    redirect.expected_output = Some(json!({"status": 200, "ok": true, "redirected": true}));
    request.test_cases.push(redirect);
    request
}

fn fetch_policy(tls_port: u16, plain_port: u16) -> HostPolicy {
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!(
            "httpstat.us:{tls_port},api.example.test:{plain_port},*.cdn.example.test:{plain_port}"
        ))
        .unwrap();
    policy.fetch.allow_private = true;
    policy
}

/// Runs the request's test cases; returns (passed, failures).
async fn run_seed_tests(rt: &Runtime, request: &ForgeRequest) -> (usize, Vec<String>) {
    let Implementation::Sandbox { code, allowlist } = &request.implementation else {
        panic!("sandbox seed")
    };
    let artifact = rt.build(code).await.expect("build");
    let tool = rt.grant(&rt.tool(&artifact), allowlist).expect("grant");
    let schemas = ToolSchemas::compile(&request.input_schema, &request.output_schema).unwrap();
    let results = temper::testcase::run_cases(rt, &tool, Some(&schemas), &request.test_cases).await;
    let passed = results.iter().filter(|r| r.passed).count();
    let failures = results.iter().filter_map(|r| r.failure.clone()).collect();
    (passed, failures)
}

fn interactions(path: &Path) -> Vec<Value> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(doc["format"], "temper-cassette");
    assert_eq!(doc["version"], 1);
    doc["interactions"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_http_status_passes_offline_from_a_cassette() {
    let dir = tempfile::tempdir().unwrap();
    let tape = dir.path().join("check_http_status.json");
    let tape_again = dir.path().join("again.json");
    let plain = TestServer::start().await;
    let (tls_port, plain_port, request) = {
        let tls = TlsTestServer::start("httpstat.us").await;
        let (tls_port, plain_port) = (tls.port(), plain.port());
        let request = check_http_status_request(tls_port, plain_port);
        let live = TransportOptions {
            resolve_overrides: loopback_names(),
            extra_roots_pem: vec![tls.root_pem().into_bytes()],
        };
        // Record once against the servers (twice, to show the file is a
        // function of the exchanges alone).
        for path in [&tape, &tape_again] {
            let rt = runtime(
                fetch_policy(tls_port, plain_port),
                live.clone(),
                Some(Cassette::record(path).unwrap()),
            );
            let (passed, failures) = run_seed_tests(&rt, &request).await;
            assert_eq!((passed, failures), (2, vec![]));
        }
        (tls_port, plain_port, request)
        // The TLS server stops here.
    };
    assert_eq!(
        std::fs::read(&tape).unwrap(),
        std::fs::read(&tape_again).unwrap(),
        "same exchanges, same cassette bytes"
    );
    let recorded = interactions(&tape);
    let requests: Vec<(String, String, u64)> = recorded
        .iter()
        .map(|i| {
            (
                i["request"]["method"].as_str().unwrap().to_string(),
                i["request"]["url"].as_str().unwrap().to_string(),
                i["response"]["status"].as_u64().unwrap(),
            )
        })
        .collect();
    let (status_url, chain) = (
        format!("https://httpstat.us:{tls_port}/status/200"),
        format!("http://api.example.test:{plain_port}/redirect-chain"),
    );
    // Sorted by method and URL; the redirect chain hop by hop.
    let mut expected = vec![
        (
            "HEAD".to_string(),
            format!("http://a.cdn.example.test:{plain_port}/json"),
            200,
        ),
        (
            "HEAD".to_string(),
            format!("http://api.example.test:{plain_port}/redirect-2"),
            302,
        ),
        ("HEAD".to_string(), chain.clone(), 302),
        ("HEAD".to_string(), status_url.clone(), 200),
    ];
    // The test stage may call each case more than once: every call is kept.
    let repeats = requests.len() / expected.len();
    assert!(
        repeats >= 1 && requests.len().is_multiple_of(expected.len()),
        "{requests:?}"
    );
    expected = expected
        .into_iter()
        .flat_map(|e| std::iter::repeat_n(e, repeats))
        .collect();
    assert_eq!(requests, expected);
    assert!(
        recorded[0]["request"].get("body_blake3").is_none(),
        "HEAD has no body"
    );
    let text = std::fs::read_to_string(&tape).unwrap();
    for absent in ["date", "time", "user-agent"] {
        assert!(
            !text.to_ascii_lowercase().contains(absent),
            "{absent} in {text}"
        );
    }

    // Replay: the TLS server is gone, the plain one is watched, and the
    // transport would fail if it tried (names pointing at 127.0.0.1 where
    // nothing answers TLS for them, and no extra root to trust).
    let seen_before = plain.requests().len();
    let unreachable = TransportOptions {
        resolve_overrides: loopback_names(),
        extra_roots_pem: Vec::new(),
    };
    let rt = runtime(
        fetch_policy(tls_port, plain_port),
        unreachable.clone(),
        Some(Cassette::replay(&tape).unwrap()),
    );
    let (passed, failures) = run_seed_tests(&rt, &request).await;
    assert_eq!((passed, failures), (2, vec![]), "offline from the cassette");
    assert_eq!(
        plain.requests().len(),
        seen_before,
        "replay used no network"
    );

    // The same runtime without the cassette fails: the network was needed.
    let live_rt = runtime(fetch_policy(tls_port, plain_port), unreachable, None);
    let tool = granted(&live_rt, FETCH_PROBE, &["fetch"]).await;
    let out = call(&live_rt, &tool, json!({"url": status_url})).await;
    assert!(out["error"].as_str().is_some(), "{out}");

    // A request the cassette does not hold: a clear error, no network.
    let tool = granted(&rt, FETCH_PROBE, &["fetch"]).await;
    let other = format!("https://httpstat.us:{tls_port}/status/404");
    let out = call(&rt, &tool, json!({"url": other})).await;
    let error = out["error"].as_str().unwrap_or_else(|| panic!("{out}"));
    assert!(
        error.contains(&format!("no recorded response for GET {other}"))
            && error.contains("replay mode: no network"),
        "{error}"
    );
    // Same URL, other method: unknown too (method is part of the match).
    let out = call(
        &rt,
        &tool,
        json!({"url": status_url, "init": {"method": "GET"}}),
    )
    .await;
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.contains(&format!("GET {status_url}"))),
        "{out}"
    );
    assert_eq!(
        plain.requests().len(),
        seen_before,
        "replay used no network"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_matches_bodies_and_replays_redirects_hop_by_hop() {
    let server = TestServer::start().await;
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let tape = dir.path().join("tape.json");
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!(
            "api.example.test:{port},*.cdn.example.test:{port}"
        ))
        .unwrap();
    policy.fetch.allow_private = true;
    let live = TransportOptions {
        resolve_overrides: loopback_names(),
        ..TransportOptions::default()
    };
    let base = format!("http://api.example.test:{port}");
    let post = |body: &str| json!({"url": format!("{base}/echo"), "init": {"method": "POST", "body": body}});
    let inputs = [
        json!({"url": format!("{base}/redirect-chain")}),
        post("first"),
        post("second"),
        json!({"url": format!("{base}/json"), "init": {"redirect": "manual"}}),
    ];
    let mut outputs = Vec::new();
    {
        let rt = runtime(
            policy.clone(),
            live.clone(),
            Some(Cassette::record(&tape).unwrap()),
        );
        let tool = granted(&rt, FETCH_PROBE, &["fetch"]).await;
        for input in &inputs {
            let out = call(&rt, &tool, input.clone()).await;
            assert!(out.get("error").is_none(), "{out}");
            outputs.push(out);
        }
    }
    assert_eq!(outputs[0]["redirected"], true);
    assert_eq!(
        outputs[0]["url"],
        format!("http://a.cdn.example.test:{port}/json")
    );
    let seen = server.requests().len();
    assert_eq!(seen, 6, "3 hops, 2 posts, 1 get");

    let recorded = interactions(&tape);
    assert_eq!(recorded.len(), 6);
    let posts: Vec<&Value> = recorded
        .iter()
        .filter(|i| i["request"]["method"] == "POST")
        .collect();
    assert_eq!(posts.len(), 2);
    let mut hashes: Vec<&str> = posts
        .iter()
        .map(|i| i["request"]["body_blake3"].as_str().unwrap())
        .collect();
    hashes.sort();
    let mut want = vec![
        blake3::hash(b"first").to_hex().to_string(),
        blake3::hash(b"second").to_hex().to_string(),
    ];
    want.sort();
    assert_eq!(hashes, want);

    // Replay, in another order: each answer is the one recorded for that
    // request (bodies told apart by hash), with the server still up and
    // never asked.
    let rt = runtime(policy.clone(), live, Some(Cassette::replay(&tape).unwrap()));
    let tool = granted(&rt, FETCH_PROBE, &["fetch"]).await;
    for i in [2, 0, 3, 1] {
        assert_eq!(
            call(&rt, &tool, inputs[i].clone()).await,
            outputs[i],
            "{}",
            inputs[i]
        );
    }
    let echoed: Value = serde_json::from_str(outputs[2]["body"].as_str().unwrap()).unwrap();
    assert_eq!(echoed["body"], "second");
    let out = call(&rt, &tool, post("third")).await;
    let error = out["error"].as_str().unwrap_or_else(|| panic!("{out}"));
    assert!(
        error.contains(&format!(
            "no recorded response for POST {base}/echo with body blake3 {}",
            blake3::hash(b"third").to_hex()
        )),
        "{error}"
    );
    assert_eq!(server.requests().len(), seen, "replay used no network");
}

/// Writes a cassette by hand.
fn write_cassette(path: &Path, interactions: Value) {
    let doc = json!({"format": "temper-cassette", "version": 1, "interactions": interactions});
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

fn exchange(method: &str, url: &str, status: u16, headers: Value, body: &str) -> Value {
    json!({
        "request": {"method": method, "url": url},
        "response": {"status": status, "headers": headers, "body": body},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cassette_cannot_widen_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let tape = dir.path().join("wide.json");
    let json_headers = json!([["content-type", "application/json"]]);
    write_cassette(
        &tape,
        json!([
            exchange(
                "GET",
                "https://api.example.test/ok",
                200,
                json_headers.clone(),
                "{\"ok\":true}"
            ),
            exchange(
                "GET",
                "https://evil.test/secret",
                200,
                json_headers.clone(),
                "{\"secret\":1}"
            ),
            exchange(
                "GET",
                "https://api.example.test/to-evil",
                302,
                json!([["location", "https://evil.test/secret"]]),
                ""
            ),
            exchange(
                "GET",
                "http://api.example.test/plain",
                200,
                json_headers.clone(),
                "{}"
            ),
            exchange(
                "GET",
                "https://api.example.test/big",
                200,
                json!([]),
                &"x".repeat(2048)
            ),
        ]),
    );
    // Only https://api.example.test; responses over 1 KiB refused.
    let mut policy = HostPolicy::deny_all()
        .with_allow_net("https://api.example.test")
        .unwrap();
    policy.fetch.max_response_body = 1024;
    let rt = runtime(
        policy,
        TransportOptions::default(),
        Some(Cassette::replay(&tape).unwrap()),
    );
    let tool = granted(&rt, FETCH_PROBE, &["fetch"]).await;
    let fetch = |url: &str| {
        let rt = rt.clone();
        let tool = tool.clone();
        let input = json!({"url": url});
        async move { call(&rt, &tool, input).await }
    };
    let ok = fetch("https://api.example.test/ok").await;
    assert_eq!(ok["status"], 200, "{ok}");
    assert_eq!(ok["body"], "{\"ok\":true}");
    let error = |out: Value| {
        out["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{out}"))
            .to_string()
    };
    let e = error(fetch("https://evil.test/secret").await);
    assert!(e.starts_with("host not allowed: evil.test"), "{e}");
    let e = error(fetch("https://api.example.test/to-evil").await);
    assert!(
        e.starts_with("redirect to evil.test refused: host not allowed"),
        "{e}"
    );
    let e = error(fetch("http://api.example.test/plain").await);
    assert!(e.contains("not allowed"), "the rule says https only: {e}");
    let e = error(fetch("https://api.example.test/big").await);
    assert_eq!(e, "response body over 1024 bytes");

    // Without fetch in the policy, a cassette grants nothing.
    let rt = runtime(
        HostPolicy::deny_all(),
        TransportOptions::default(),
        Some(Cassette::replay(&tape).unwrap()),
    );
    let artifact = rt.build(FETCH_PROBE).await.unwrap();
    assert!(
        rt.grant(&rt.tool(&artifact), &["fetch".to_string()])
            .is_err()
    );
    let out = call(
        &rt,
        &rt.tool(&artifact),
        json!({"url": "https://api.example.test/ok"}),
    )
    .await;
    assert!(
        error(out).contains("capability not granted: fetch"),
        "an ungranted tool stays ungranted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_and_replay_flags_through_the_cli() {
    let server = TestServer::start().await;
    let port = server.port();
    let dir = tempfile::tempdir().unwrap();
    let probe = dir.path().join("probe.js");
    std::fs::write(&probe, FETCH_PROBE).unwrap();
    let tape: PathBuf = dir.path().join("cli.json");
    let url = format!("http://127.0.0.1:{port}/json");
    let input = json!({"url": url}).to_string();
    let allow = format!("--allow-net=127.0.0.1:{port}");
    let run = |flag: &str| {
        let (ok, doc, stderr) = temper_json(
            dir.path(),
            &[],
            [
                OsStr::new("run"),
                probe.as_os_str(),
                OsStr::new(&allow),
                OsStr::new(flag),
                tape.as_os_str(),
                OsStr::new("--input"),
                OsStr::new(&input),
            ],
        );
        assert!(ok, "{stderr}");
        doc["output"].clone()
    };
    let recorded = run("--record");
    assert_eq!(recorded["status"], 200, "{recorded}");
    assert_eq!(recorded["body"], r#"{"hello":"world"}"#);
    assert_eq!(server.requests().len(), 1);
    assert_eq!(interactions(&tape).len(), 1);
    drop(server);
    assert_eq!(run("--replay"), recorded, "served from the cassette");

    // Both at once is refused; a missing cassette is an error naming it.
    let (ok, _, stderr) = temper_json(
        dir.path(),
        &[],
        [
            OsStr::new("run"),
            probe.as_os_str(),
            OsStr::new("--record=a.json"),
            OsStr::new("--replay=b.json"),
        ],
    );
    assert!(!ok && stderr.contains("--record"), "{stderr}");
    let (ok, _, stderr) = temper_json(
        dir.path(),
        &[],
        [
            OsStr::new("run"),
            probe.as_os_str(),
            OsStr::new(&allow),
            OsStr::new("--replay=missing.json"),
        ],
    );
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("fetch cassette missing.json: cannot read"),
        "{stderr}"
    );
}

#[test]
fn cassette_errors_are_typed() {
    let err = Cassette::replay("/nonexistent/tape.json").unwrap_err();
    assert!(matches!(err, CassetteError::Read { .. }), "{err:?}");
}
