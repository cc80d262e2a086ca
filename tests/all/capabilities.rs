//! Capabilities: fetch, fs.readFile and crypto, granted only by
//! allowlist ∩ host policy. Real servers on 127.0.0.1, started here.

use crate::support;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::capabilities::fetch::TransportOptions;
use temper::policy::{HostPolicy, PolicyError, ReadDir};
use temper::{Limits, RunError, Runtime, Tool};

use support::http::{TestServer, TlsTestServer};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

fn overrides() -> HashMap<String, Vec<IpAddr>> {
    [
        "api.example.test",
        "evil.test",
        "a.cdn.example.test",
        "cdn.example.test",
        "secure.example.test",
    ]
    .into_iter()
    .map(|name| (name.to_string(), vec![LOOPBACK]))
    .collect()
}

fn net_policy(port: u16, allow_private: bool) -> HostPolicy {
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!(
            "api.example.test:{port},*.cdn.example.test:{port}"
        ))
        .expect("rules parse");
    policy.fetch.allow_private = allow_private;
    policy
}

fn runtime(policy: HostPolicy, limits: Limits, transport: TransportOptions) -> Runtime {
    support::runtime_builder()
        .limits(limits)
        .policy(policy)
        .transport(transport)
        .build()
        .expect("runtime")
}

fn with_overrides() -> TransportOptions {
    TransportOptions {
        resolve_overrides: overrides(),
        ..TransportOptions::default()
    }
}

async fn granted_tool(rt: &Runtime, source: &str, allowlist: &[&str]) -> Tool {
    let artifact = rt.build(source).await.expect("build");
    let allowlist: Vec<String> = allowlist.iter().map(|s| s.to_string()).collect();
    rt.grant(&rt.tool(&artifact), &allowlist).expect("grant")
}

async fn call_json(rt: &Runtime, tool: &Tool, input: Value) -> Value {
    let out = rt
        .call(tool, &input.to_string())
        .await
        .unwrap_or_else(|f| panic!("{input}: {f}"));
    serde_json::from_str(&out.output).unwrap()
}

/// A tool that reports what fetch returned, or the error message.
const FETCH_PROBE: &str = r#"
async function execute(input) {
  try {
    const res = await fetch(input.url, input.init || {});
    const text = await res.text();
    return {
      status: res.status, ok: res.ok, redirected: res.redirected, url: res.url,
      type: res.headers.get('content-type'),
      body: text.length > 200 ? 'len:' + text.length : text,
    };
  } catch (e) {
    return { error: String(e.message) , name: e.name };
  }
}"#;

/// The usual fetch setup: a test server, a runtime whose policy allows the
/// test names on its port (with or without private addresses), the probe
/// tool granted `fetch`, and the base URL.
struct FetchSetup {
    server: TestServer,
    port: u16,
    rt: Runtime,
    tool: Tool,
    base: String,
}

async fn fetch_setup(allow_private: bool, limits: Limits) -> FetchSetup {
    let server = TestServer::start().await;
    let port = server.port();
    let rt = runtime(net_policy(port, allow_private), limits, with_overrides());
    let tool = granted_tool(&rt, FETCH_PROBE, &["fetch"]).await;
    FetchSetup {
        server,
        port,
        rt,
        tool,
        base: format!("http://api.example.test:{port}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_plain_json_redirects_and_refusals() {
    let FetchSetup {
        server,
        port,
        rt,
        tool,
        base,
        ..
    } = fetch_setup(true, Limits::default()).await;

    let out = call_json(&rt, &tool, json!({"url": format!("{base}/json")})).await;
    assert_eq!(out["status"], 200);
    assert_eq!(out["ok"], true);
    assert_eq!(out["redirected"], false);
    assert_eq!(out["type"], "application/json");
    assert_eq!(out["body"], r#"{"hello":"world"}"#);

    // A chain of redirects to allowed names is followed, hop by hop.
    let out = call_json(&rt, &tool, json!({"url": format!("{base}/redirect-chain")})).await;
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(out["redirected"], true);
    assert_eq!(out["url"], format!("http://a.cdn.example.test:{port}/json"));

    // A redirect to a name outside the rules is refused at that hop.
    let out = call_json(&rt, &tool, json!({"url": format!("{base}/redirect-evil")})).await;
    let error = out["error"].as_str().unwrap();
    assert!(
        error.starts_with("redirect to evil.test refused: host not allowed: evil.test (allowed: "),
        "{error}"
    );
    assert_eq!(out["name"], "TypeError");

    // A redirect to an IP literal is refused.
    let out = call_json(&rt, &tool, json!({"url": format!("{base}/redirect-ip")})).await;
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .starts_with("redirect to 127.0.0.1 refused"),
        "{out}"
    );

    // redirect: 'manual' returns the 3xx; 'error' refuses.
    let out = call_json(
        &rt,
        &tool,
        json!({"url": format!("{base}/redirect-chain"), "init": {"redirect": "manual"}}),
    )
    .await;
    assert_eq!(out["status"], 302);
    let out = call_json(
        &rt,
        &tool,
        json!({"url": format!("{base}/redirect-chain"), "init": {"redirect": "error"}}),
    )
    .await;
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .contains("redirect mode is 'error'"),
        "{out}"
    );

    // The server only ever saw requests that passed the policy.
    let evil_hits = server
        .requests()
        .into_iter()
        .filter(|r| r.host.starts_with("evil.test"))
        .count();
    assert_eq!(evil_hits, 0);

    // Names not in the rules, the bare wildcard suffix, and IP literals.
    for (url, expected) in [
        (
            format!("http://evil.test:{port}/json"),
            "host not allowed: evil.test (allowed: ",
        ),
        (
            format!("http://cdn.example.test:{port}/json"),
            "host not allowed: cdn.example.test",
        ),
        (
            format!("http://127.0.0.1:{port}/json"),
            "IP address not allowed: 127.0.0.1",
        ),
        (
            format!("http://2130706433:{port}/json"),
            "IP address not allowed: 127.0.0.1",
        ),
        ("file:///etc/passwd".to_string(), "scheme not allowed: file"),
        (
            format!("http://api.example.test:{}/json", port.wrapping_add(1)),
            "port not allowed",
        ),
    ] {
        let out = call_json(&rt, &tool, json!({"url": url})).await;
        let error = out["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{url} was fetched: {out}"));
        assert!(error.starts_with(expected), "{url}: {error}");
    }
    // Credentials in the URL are refused by the JS surface (as browsers do)
    // and, behind it, by the host policy (see the policy's SSRF matrix).
    let url = format!("http://user:pw@api.example.test:{port}/json");
    let out = call_json(&rt, &tool, json!({"url": url})).await;
    assert!(
        out["error"].as_str().unwrap().contains("credentials"),
        "{out}"
    );
    assert!(server.requests().iter().all(|r| !r.path.contains("user")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_methods_headers_and_bodies() {
    let server = TestServer::start().await;
    let port = server.port();
    let rt = runtime(net_policy(port, true), Limits::default(), with_overrides());
    let source = r#"
async function execute(input) {
  const res = await fetch(input.url, { method: input.method, headers: { 'X-Probe': 'yes' }, body: input.body });
  const echo = await res.json();
  return { status: res.status, method: echo.method, probe: echo.headers['x-probe'], body: echo.body };
}"#;
    let tool = granted_tool(&rt, source, &["fetch"]).await;
    let url = format!("http://api.example.test:{port}/echo");
    for method in ["GET", "POST", "PUT", "PATCH", "DELETE"] {
        let body = if method == "GET" {
            Value::Null
        } else {
            json!(format!("payload for {method}"))
        };
        let out = call_json(
            &rt,
            &tool,
            json!({"url": url, "method": method, "body": body}),
        )
        .await;
        assert_eq!(out["status"], 200);
        assert_eq!(out["method"], method);
        assert_eq!(out["probe"], "yes");
        if method != "GET" {
            assert_eq!(out["body"], format!("payload for {method}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_caps_slow_and_oversized_responses() {
    let FetchSetup {
        server: _server,
        port: _,
        rt,
        tool,
        base,
        ..
    } = fetch_setup(
        true,
        Limits::default().with_timeout(Duration::from_millis(1500)),
    )
    .await;

    let out = call_json(&rt, &tool, json!({"url": format!("{base}/big")})).await;
    assert_eq!(out["error"], "response body over 8 MiB", "{out}");

    // A slow endpoint cannot hold the call past the tool's timeout.
    let started = Instant::now();
    let result = rt
        .call(&tool, &json!({"url": format!("{base}/slow")}).to_string())
        .await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_millis(1500) * 3, "{elapsed:?}");
    match result {
        Err(f) => assert_eq!(f.error, RunError::Timeout { limit_ms: 1500 }),
        Ok(out) => {
            let v: Value = serde_json::from_str(&out.output).unwrap();
            assert!(v["error"].as_str().unwrap().contains("time"), "{v}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_caps_redirect_loops_request_bodies_and_header_counts() {
    let FetchSetup {
        server,
        port: _,
        rt,
        tool,
        base,
        ..
    } = fetch_setup(true, Limits::default()).await;
    // A redirect loop stops at the policy's limit (default 5 hops).
    let out = call_json(&rt, &tool, json!({"url": format!("{base}/loop")})).await;
    assert_eq!(out["error"], "too many redirects (limit 5)", "{out}");
    let hops = server
        .requests()
        .iter()
        .filter(|r| r.path == "/loop")
        .count();
    assert_eq!(hops, 6, "the first request and five redirects");
    // A request body over the cap (1 MiB) is refused before anything is sent.
    let before = server.requests().len();
    let source = "async function execute(input) {\n  try { await fetch(input.url, { method: 'POST', body: 'x'.repeat(input.n) }); return { sent: true }; }\n  catch (e) { return { error: e.message }; }\n}";
    let poster = granted_tool(&rt, source, &["fetch"]).await;
    let out = call_json(
        &rt,
        &poster,
        json!({"url": format!("{base}/echo"), "n": (1 << 20) + 1}),
    )
    .await;
    assert_eq!(out["error"], "request body over 1048576 bytes", "{out}");
    assert_eq!(server.requests().len(), before);
    // More response headers than the cap (64) is an error, not a truncation.
    let out = call_json(&rt, &tool, json!({"url": format!("{base}/many-headers")})).await;
    assert_eq!(
        out["error"], "too many response headers (limit 64)",
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_refuses_names_resolving_to_private_addresses_without_the_switch() {
    let FetchSetup {
        server,
        port,
        rt,
        tool,
        ..
    } = fetch_setup(false, Limits::default()).await;
    let out = call_json(
        &rt,
        &tool,
        json!({"url": format!("http://api.example.test:{port}/json")}),
    )
    .await;
    assert_eq!(
        out["error"], "private address not allowed: api.example.test resolved to 127.0.0.1",
        "{out}"
    );
    assert!(server.requests().is_empty(), "nothing reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_over_tls_with_a_test_root() {
    let server = TlsTestServer::start("secure.example.test").await;
    let port = server.port();
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!("https://secure.example.test:{port}"))
        .unwrap();
    policy.fetch.allow_private = true;
    let transport = TransportOptions {
        resolve_overrides: overrides(),
        extra_roots_pem: vec![server.root_pem().into_bytes()],
    };
    let rt = runtime(policy, Limits::default(), transport);
    let tool = granted_tool(&rt, FETCH_PROBE, &["fetch"]).await;
    let out = call_json(
        &rt,
        &tool,
        json!({"url": format!("https://secure.example.test:{port}/json")}),
    )
    .await;
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(out["body"], r#"{"hello":"tls"}"#);
    // Plain http to the https-only rule is refused.
    let out = call_json(
        &rt,
        &tool,
        json!({"url": format!("http://secure.example.test:{port}/json")}),
    )
    .await;
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .starts_with("host not allowed")
            || out["error"].as_str().unwrap().starts_with("scheme"),
        "{out}"
    );
    // Without the test root the certificate is not trusted.
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!("https://secure.example.test:{port}"))
        .unwrap();
    policy.fetch.allow_private = true;
    let rt = runtime(policy, Limits::default(), with_overrides());
    let tool = granted_tool(&rt, FETCH_PROBE, &["fetch"]).await;
    let out = call_json(
        &rt,
        &tool,
        json!({"url": format!("https://secure.example.test:{port}/json")}),
    )
    .await;
    assert!(
        out["error"].as_str().unwrap().contains("certificate")
            || out["error"].as_str().unwrap().contains("failed"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_check_http_status_works_as_written() {
    let server = TestServer::start().await;
    let port = server.port();
    let rt = runtime(net_policy(port, true), Limits::default(), with_overrides());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/seeds/check_http_status.json");
    let req =
        temper::request::ForgeRequest::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let temper::request::Implementation::Sandbox { code, allowlist } = &req.implementation else {
        panic!()
    };
    let allow: Vec<&str> = allowlist.iter().map(String::as_str).collect();
    let tool = granted_tool(&rt, code, &allow).await;
    let cases = vec![temper::request::TestCase {
        input: json!({"url": format!("http://api.example.test:{port}/status/200")}),
        expected_output: req.test_cases[0].expected_output.clone(),
        ..Default::default()
    }];
    let results = temper::testcase::run_cases(&rt, &tool, None, &cases).await;
    assert!(results[0].passed, "{:?}", results[0]);
    assert_eq!(results[0].output.as_ref().unwrap()["redirected"], false);
    let heads = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "HEAD")
        .count();
    assert_eq!(heads, 1, "the seed tool sends one HEAD request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capability_not_in_allowlist_is_denied_and_host_policy_bounds_the_allowlist() {
    let server = TestServer::start().await;
    let port = server.port();
    let rt = runtime(
        net_policy(port, true).with_allow_crypto(),
        Limits::default(),
        with_overrides(),
    );
    // The host allows fetch, but this tool did not list it.
    let source =
        "async function execute(input) { const r = await fetch(input.url); return r.status; }";
    let tool = granted_tool(&rt, source, &["crypto"]).await;
    let err = rt
        .call(
            &tool,
            &json!({"url": format!("http://api.example.test:{port}/json")}).to_string(),
        )
        .await
        .unwrap_err()
        .error;
    assert_eq!(
        err,
        RunError::CapabilityDenied {
            capability: "fetch".into()
        }
    );
    assert!(server.requests().is_empty());
    // Crypto not listed either way: denied.
    let tool = granted_tool(
        &rt,
        "function execute() { return crypto.createHash('sha256').update('a').digest('hex'); }",
        &[],
    )
    .await;
    let err = rt.call(&tool, "{}").await.unwrap_err().error;
    assert_eq!(
        err,
        RunError::CapabilityDenied {
            capability: "crypto".into()
        }
    );
    // A tool listing a capability the host does not allow is refused, by name.
    let artifact = rt.build("function execute() { return 1; }").await.unwrap();
    match rt.grant(&rt.tool(&artifact), &["fs.readFile".to_string()]) {
        Err(e @ PolicyError::NotAllowedByHost(_)) => {
            assert!(e.to_string().contains("fs.readFile"), "{e}")
        }
        other => panic!(
            "expected NotAllowedByHost, got {:?}",
            other.map(|t| t.id().to_string())
        ),
    }
    assert!(matches!(
        rt.grant(&rt.tool(&artifact), &["sockets".to_string()]),
        Err(PolicyError::UnknownCapability(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fs_read_file_inside_grants_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("hello.txt"), "hello from a file\n").unwrap();
    std::fs::write(data.join("bytes.bin"), [0u8, 1, 2, 255]).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "top secret").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), data.join("link-out")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", data.join("link-abs")).unwrap();
    let mut policy = HostPolicy::deny_all();
    policy
        .allowed
        .insert(temper::policy::Capability::FsReadFile);
    policy.read_dirs.push(ReadDir {
        host: data.clone(),
        guest: "/data".into(),
    });
    let rt = runtime(policy, Limits::default(), TransportOptions::default());
    let source = r#"
async function execute(input) {
  const attempt = async (f) => { try { return { ok: await f() }; } catch (e) { return { error: e.message, code: e.code }; } };
  return {
    sync: await attempt(() => fs.readFileSync(input.path, 'utf8')),
    promise: await attempt(() => fs.readFile(input.path, 'utf8')),
    bytes: await attempt(() => Array.from(fs.readFileSync(input.path))),
    callback: await new Promise(r => fs.readFile(input.path, 'utf8', (err, data) => r(err ? { code: err.code } : { ok: data }))),
  };
}"#;
    let tool = granted_tool(&rt, source, &["fs.readFile"]).await;
    let out = call_json(&rt, &tool, json!({"path": "/data/hello.txt"})).await;
    assert_eq!(out["sync"]["ok"], "hello from a file\n", "{out}");
    assert_eq!(out["promise"]["ok"], "hello from a file\n");
    assert_eq!(out["callback"]["ok"], "hello from a file\n");
    let out = call_json(&rt, &tool, json!({"path": "/data/bytes.bin"})).await;
    assert_eq!(out["bytes"]["ok"], json!([0, 1, 2, 255]));
    for path in [
        "/data/../secret.txt",
        "/data/link-out",
        "/data/link-abs",
        "/etc/passwd",
        "../secret.txt",
        "/data/missing.txt",
        "/secret.txt",
    ] {
        let out = call_json(&rt, &tool, json!({"path": path})).await;
        assert!(out["sync"]["error"].is_string(), "{path} was read: {out}");
        assert!(out["callback"]["code"].is_string(), "{path}: {out}");
        assert!(
            !out.to_string().contains("top secret") && !out.to_string().contains("root:"),
            "{path}: {out}"
        );
    }
    // A file over the 16 MiB read cap is refused, not read into the sandbox.
    let big = std::fs::File::create(data.join("big.bin")).unwrap();
    big.set_len((16 << 20) + 1).unwrap();
    let out = call_json(&rt, &tool, json!({"path": "/data/big.bin"})).await;
    let error = out["sync"]["error"]
        .as_str()
        .unwrap_or_else(|| panic!("read: {out}"));
    assert!(error.starts_with("EFBIG"), "{error}");
    std::fs::remove_file(data.join("big.bin")).unwrap();
    // No write API exists; no route to one either.
    let writes = r#"function execute() {
      // Reflect.get keeps the static check (which refuses fs writes by
      // name) out of the way: this asks the runtime itself.
      const probes = ['writeFile', 'writeFileSync', 'appendFile', 'unlink', 'mkdir', 'rm', 'rename', 'open', 'createWriteStream'];
      const found = probes.filter(name => typeof Reflect.get(globalThis.fs, name) === 'function');
      const promises = Reflect.get(globalThis.fs, 'promises') || {};
      return found.concat(probes.filter(name => typeof Reflect.get(promises, name) === 'function').map(n => 'promises.' + n));
    }"#;
    let tool = granted_tool(&rt, writes, &["fs.readFile"]).await;
    assert_eq!(call_json(&rt, &tool, json!({})).await, json!([]));
    assert!(
        std::fs::read_dir(&data).unwrap().count() == 4,
        "nothing was created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crypto_known_answers_through_js() {
    let rt = runtime(
        HostPolicy::deny_all().with_allow_crypto(),
        Limits::default(),
        TransportOptions::default(),
    );
    let source = r#"
function execute() {
  const h = (alg, s, enc) => crypto.createHash(alg).update(s).digest(enc || 'hex');
  const key1 = new Uint8Array(20).fill(0x0b);
  const key3 = new Uint8Array(20).fill(0xaa);
  const data3 = new Uint8Array(50).fill(0xdd);
  const uuid = crypto.randomUUID();
  const arr = crypto.getRandomValues(new Uint8Array(32));
  return {
    sha1: h('sha1', 'abc'),
    sha256: h('sha256', 'abc'),
    sha384: h('sha384', 'abc'),
    sha512: h('sha512', 'abc'),
    md5: h('md5', 'abc'),
    sha256_b64: h('sha256', 'abc', 'base64'),
    chained: crypto.createHash('sha256').update('a').update('bc').digest('hex'),
    hmac1: crypto.createHmac('sha256', key1).update('Hi There').digest('hex'),
    hmac2: crypto.createHmac('sha512', 'Jefe').update('what do ya want for nothing?').digest('hex'),
    hmac3: crypto.createHmac('sha384', key3).update(data3).digest('hex'),
    uuid_ok: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(uuid),
    random_len: crypto.randomBytes(16).length,
    random_nonzero: arr.some(x => x !== 0),
  };
}"#;
    let tool = granted_tool(&rt, source, &["crypto"]).await;
    let out = call_json(&rt, &tool, json!({})).await;
    assert_eq!(
        out,
        json!({
            "sha1": "a9993e364706816aba3e25717850c26c9cd0d89d",
            "sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "sha384": "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7",
            "sha512": "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            "md5": "900150983cd24fb0d6963f7d28e17f72",
            "sha256_b64": "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=",
            "chained": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            // RFC 4231 test cases 1, 2 and 3.
            "hmac1": "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            "hmac2": "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737",
            "hmac3": "88062608d3e6ad8a0aa2ace014c8a86f0aa635d947ac9febe83ef4e55966144b2a5ab39dc13814b94e3ab6e101a34f27",
            "uuid_ok": true,
            "random_len": 16,
            "random_nonzero": true,
        })
    );
}
