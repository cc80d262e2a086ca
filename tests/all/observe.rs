//! Observability: the metrics a forge records (errors by kind from real
//! failing calls, refused capabilities, forges by stage), and
//! `temper mcp --metrics` scraped by a real Prometheus server (Debian's
//! `prometheus`, started here on 127.0.0.1) whose query API must count the
//! calls made. Without the binary the scrape test is skipped, unless
//! TEMPER_REQUIRE_PROMETHEUS=1 (scripts/test.sh sets it).

use crate::support;
use crate::support::mcp_stdio::{McpStdio, tool_output};

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use temper::forge::{Forge, ForgeContext};
use temper::observe::Metrics;
use temper::request::ForgeRequest;
use temper::store::Registry;
use temper::{Limits, Runtime};

/// The value of the sample `series` (name and labels as encoded).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

/// One tool that fails as `input.kind` asks.
const FAILING: &str = "async function execute(input) {\n\
  if (input.kind === 'js') throw new Error('boom');\n\
  if (input.kind === 'timeout') for (;;) {}\n\
  if (input.kind === 'memory') { const keep = []; for (let i = 0; ; i++) keep.push({ n: i, tag: 'item' }); }\n\
  if (input.kind === 'big') return 'x'.repeat(200000);\n\
  if (input.kind === 'undefined') return undefined;\n\
  if (input.kind === 'cap-probe-x7') return globalThis[input.cap].createHash('sha256').update('a').digest('hex');\n\
  return { ok: true };\n\
}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_calls_count_under_their_error_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let runtime: Runtime = support::runtime_builder()
        .limits(
            Limits::default()
                // Room for the memory case to reach its cap first on a
                // loaded machine (else it times out: `timeout`, not `memory`).
                .with_timeout(Duration::from_millis(3000))
                .with_memory_bytes(32 << 20)
                .with_output_bytes(64 << 10),
        )
        .build()
        .unwrap();
    let forge = Forge::builder(runtime, Arc::new(Registry::open(dir.path()).unwrap()))
        .judge(Arc::new(support::ApproveAll))
        .build();
    let metrics = Metrics::new(100, "test", "shim");
    assert!(forge.set_metrics(metrics.clone()));
    assert!(!forge.set_metrics(Metrics::new(1, "x", "y")), "set once");
    let ctx = ForgeContext::new("agent-1", "session-1");
    let request = json!({
        "name": "failing",
        "description": "Fails as asked.",
        "inputSchema": {"type": "object", "properties": {"kind": {"type": "string"}}},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "sandbox", "code": FAILING},
        "testCases": [{"input": {"kind": "none"}, "expectedOutput": {"ok": true}}],
    });
    let request = ForgeRequest::from_json(&request.to_string()).unwrap();
    forge.forge(&request, &ctx).await.unwrap();
    // A refused forge counts under its stage.
    let bad = ForgeRequest::from_json(
        &json!({
            "name": "broken",
            "description": "Does not pass its test.",
            "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object"},
            "implementation": {"mode": "sandbox", "code": "function execute() { throw new Error('no'); }"},
            "testCases": [{"input": {}}],
        })
        .to_string(),
    )
    .unwrap();
    assert!(forge.forge(&bad, &ctx).await.is_err());

    let cases = [
        (json!({"kind": "none"}), None),
        (json!({"kind": "js"}), Some("js")),
        (json!({"kind": "timeout"}), Some("timeout")),
        (json!({"kind": "memory"}), Some("memory")),
        (json!({"kind": "big"}), Some("output_too_large")),
        (json!({"kind": "undefined"}), Some("bad_output")),
        (json!({"kind": 5}), Some("bad_input")),
        (
            json!({"kind": "cap-probe-x7", "cap": "crypto"}),
            Some("capability_denied"),
        ),
    ];
    for (input, kind) in &cases {
        let outcome = forge.invoke("failing", input, &ctx).await;
        assert_eq!(outcome.is_err(), kind.is_some(), "{input}: {outcome:?}");
    }
    // A name that is no tool is not counted: no label for it.
    assert!(
        forge
            .invoke("no_such_tool", &json!({}), &ctx)
            .await
            .is_err()
    );

    let text = metrics.encode();
    for kind in cases.iter().filter_map(|(_, kind)| *kind) {
        assert_eq!(
            sample(
                &text,
                &format!(r#"temper_tool_errors_total{{tool="failing",kind="{kind}"}}"#)
            ),
            Some(1.0),
            "{kind}: {text}"
        );
    }
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="failing",tier="session",outcome="error"}"#
        ),
        Some(7.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="failing",tier="session",outcome="ok"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_call_duration_seconds_count{tool="failing"}"#
        ),
        Some(8.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_capability_denials_total{capability="crypto"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_forge_total{outcome="ok",stage="register"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_forge_total{outcome="refused",stage="test"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert!(!text.contains("no_such_tool"), "{text}");
    // Inputs never become labels.
    assert!(!text.contains("cap-probe-x7"), "{text}");
    // The pool and caches are read at scrape time.
    assert!(
        sample(&text, r#"temper_cache_entries{cache="loaded_tools"}"#).unwrap() >= 1.0,
        "{text}"
    );
    assert!(sample(&text, r#"temper_pool_instances{state="live"}"#).is_some());
}

/// A Prometheus server on 127.0.0.1 scraping one target every second,
/// storage in a tempdir; killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn prometheus_binary() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("prometheus"))
        .find(|p| p.is_file())
}

impl Prometheus {
    /// Starts one scraping `target` (HOST:PORT), or `None` (printed) when
    /// the binary is missing and TEMPER_REQUIRE_PROMETHEUS is not 1.
    fn start(target: &str) -> Option<Prometheus> {
        let Some(binary) = prometheus_binary() else {
            crate::support::skip_unless_required(
                "TEMPER_REQUIRE_PROMETHEUS",
                "prometheus not found (install Debian's prometheus: scripts/prometheus.sh)",
                "the Prometheus scrape test",
            );
            return None;
        };
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: temper\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let server = Prometheus {
            child,
            port,
            _dir: dir,
        };
        let started = Instant::now();
        while http_get(port, "/-/ready").map(|(s, _)| s) != Some(200) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "prometheus did not become ready: {}",
                std::fs::read_to_string(server._dir.path().join("prometheus.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }

    /// The value of the first series `promql` returns now, if any.
    fn value(&self, promql: &str) -> Option<f64> {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("query", promql)
            .finish();
        let (status, body) = http_get(self.port, &format!("/api/v1/query?{query}"))?;
        assert_eq!(status, 200, "{body}");
        let v: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{v}");
        v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }

    /// Waits (up to a minute) until `promql` is `want`; returns what it was
    /// last.
    fn wait_for(&self, promql: &str, want: f64) -> Option<f64> {
        let started = Instant::now();
        loop {
            let got = self.value(promql);
            if got == Some(want) || started.elapsed() > Duration::from_secs(60) {
                return got;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// GET `path` from 127.0.0.1:`port`: status and body (`None`: no answer).
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let r = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}{path}"))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .ok()?;
        let status = r.status().as_u16();
        Some((status, r.text().await.ok()?))
    })
}

/// The address `temper mcp` printed for its metrics listener.
fn metrics_addr(stderr: &Path) -> String {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(stderr).unwrap_or_default();
        if let Some(addr) = text
            .lines()
            .find_map(|l| l.strip_prefix("temper mcp: metrics on http://"))
        {
            return addr.trim_end_matches("/metrics").to_string();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no metrics line: {text}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn prometheus_scrapes_the_calls_temper_mcp_served() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("stderr.log");
    let store = dir.path().join("store");
    let mut m = McpStdio::start(
        &[
            "--store",
            store.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
            "--metrics-max-tools",
            "50",
        ],
        &stderr,
        &[],
        "no-secret-here",
    );
    let addr = metrics_addr(&stderr);
    let Some(prometheus) = Prometheus::start(&addr) else {
        m.close();
        return;
    };
    let request: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/seeds/add_numbers.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let forged = m.call("forge_tool", request);
    assert_eq!(tool_output(&forged)["success"], json!(true), "{forged}");
    const N: usize = 7;
    for i in 0..N {
        let out = tool_output(&m.call("add_numbers", json!({"a": i, "b": 1})));
        assert_eq!(out["sum"], json!(i + 1));
    }
    // One call with input outside the schema.
    let bad = m.call("add_numbers", json!({"a": "two"}));
    assert_eq!(bad["result"]["isError"], json!(true), "{bad}");

    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let (status, text) = http_get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="add_numbers",tier="session",outcome="ok"}"#
        ),
        Some(N as f64),
        "{text}"
    );

    let got = prometheus.wait_for(
        r#"temper_tool_calls_total{job="temper",tool="add_numbers",outcome="ok"}"#,
        N as f64,
    );
    assert_eq!(got, Some(N as f64), "Prometheus saw {got:?}");
    assert_eq!(
        prometheus.wait_for(
            r#"temper_tool_errors_total{tool="add_numbers",kind="bad_input"}"#,
            1.0
        ),
        Some(1.0)
    );
    assert_eq!(
        prometheus.wait_for(r#"temper_forge_total{outcome="ok",stage="register"}"#, 1.0),
        Some(1.0)
    );
    // initialize, forge_tool, N + 1 calls: tools/call counted on stdio.
    assert_eq!(
        prometheus.wait_for(
            r#"temper_mcp_requests_total{method="tools/call",transport="stdio"}"#,
            (N + 2) as f64
        ),
        Some((N + 2) as f64)
    );
    assert_eq!(
        prometheus.wait_for(r#"count(temper_build_info)"#, 1.0),
        Some(1.0)
    );
    m.close();
}

#[test]
fn a_non_loopback_metrics_bind_without_a_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_temper"))
        .args(["mcp", "--judge", "rules", "--cache-dir"])
        .arg(support::cache_dir())
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["--metrics", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("refusing to serve /metrics on non-loopback 0.0.0.0:0"),
        "{stderr}"
    );
}

/// An OTLP/HTTP receiver on 127.0.0.1: every POST body kept as received.
struct OtlpReceiver {
    port: u16,
    bodies: Arc<std::sync::Mutex<Vec<bytes::Bytes>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl OtlpReceiver {
    fn start() -> Self {
        use http_body_util::BodyExt;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let kept = bodies.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let stream = tokio::select! {
                        s = listener.accept() => s.unwrap().0,
                        _ = &mut stopped => return,
                    };
                    let kept = kept.clone();
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(
                            move |req: hyper::Request<hyper::body::Incoming>| {
                                let kept = kept.clone();
                                async move {
                                    assert_eq!(req.uri().path(), "/v1/traces");
                                    assert_eq!(
                                        req.headers()["content-type"],
                                        "application/x-protobuf"
                                    );
                                    let body = req.into_body().collect().await?.to_bytes();
                                    kept.lock().unwrap().push(body);
                                    Ok::<_, hyper::Error>(hyper::Response::new(
                                        http_body_util::Full::new(bytes::Bytes::new()),
                                    ))
                                }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        });
        OtlpReceiver {
            port,
            bodies,
            stop: Some(stop),
        }
    }

    /// Every span received so far.
    fn spans(&self) -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
        use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
        use prost::Message;
        self.bodies
            .lock()
            .unwrap()
            .iter()
            .flat_map(|b| {
                ExportTraceServiceRequest::decode(b.clone())
                    .unwrap()
                    .resource_spans
            })
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }

    /// Every body received, concatenated (to look for what must not be there).
    fn raw(&self) -> Vec<u8> {
        self.bodies.lock().unwrap().concat()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A string attribute of `span`.
fn attr(span: &opentelemetry_proto::tonic::trace::v1::Span, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    let value = span
        .attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?;
    match value.value.as_ref()? {
        V::StringValue(s) => Some(s.clone()),
        V::IntValue(i) => Some(i.to_string()),
        V::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

#[test]
fn spans_of_a_forge_and_a_call_reach_an_otlp_receiver_under_the_given_traceparent() {
    const SECRET: &str = "sk-live-7f3a9c2e-do-not-export";
    const FORGE_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    const FORGE_PARENT: &str = "b7ad6b7169203331";
    const CALL_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const CALL_PARENT: &str = "00f067aa0ba902b7";
    let receiver = OtlpReceiver::start();
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("stderr.log");
    let store = dir.path().join("store");
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let mut m = McpStdio::start(
        &["--store", store.to_str().unwrap()],
        &stderr,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
        SECRET,
    );
    let request: Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../tests/fixtures/seeds/add_numbers.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let forged = m.request(
        "tools/call",
        json!({"name": "forge_tool", "arguments": request,
               "_meta": {"traceparent": format!("00-{FORGE_TRACE}-{FORGE_PARENT}-01")}}),
    );
    assert_eq!(tool_output(&forged)["success"], json!(true), "{forged}");
    let called = m.request(
        "tools/call",
        json!({"name": "add_numbers", "arguments": {"a": 2, "b": 3, "note": SECRET},
               "_meta": {"traceparent": format!("00-{CALL_TRACE}-{CALL_PARENT}-01")}}),
    );
    assert_eq!(tool_output(&called)["sum"], json!(5), "{called}");
    // Closing stdin ends the server, which flushes its spans.
    m.close();
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let named = |name: &str| {
        spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name:?} among {names:?}"))
    };

    // The forge: under the request's span, under the given parent.
    let forge_request = named("tools/call forge_tool");
    assert_eq!(hex(&forge_request.trace_id), FORGE_TRACE);
    assert_eq!(hex(&forge_request.parent_span_id), FORGE_PARENT);
    let forge = named("forge add_numbers");
    assert_eq!(hex(&forge.trace_id), FORGE_TRACE);
    assert_eq!(forge.parent_span_id, forge_request.span_id);
    for stage in ["validate", "build", "test", "judge", "register"] {
        let s = named(&format!("forge.{stage}"));
        assert_eq!(s.parent_span_id, forge.span_id, "{stage}");
        assert_eq!(attr(s, "temper.forge.stage").as_deref(), Some(stage));
    }

    // The call: `tools/call add_numbers` with the MCP attributes, and
    // `execute_tool add_numbers` under it with the GenAI ones.
    let call = named("tools/call add_numbers");
    assert_eq!(hex(&call.trace_id), CALL_TRACE);
    assert_eq!(hex(&call.parent_span_id), CALL_PARENT);
    assert_eq!(attr(call, "mcp.method.name").as_deref(), Some("tools/call"));
    assert_eq!(attr(call, "jsonrpc.request.id").as_deref(), Some("3"));
    let session = attr(call, "mcp.session.id").expect("mcp.session.id");
    assert_eq!(session.len(), 16, "hashed: {session}");
    let exec = named("execute_tool add_numbers");
    assert_eq!(exec.parent_span_id, call.span_id);
    assert_eq!(hex(&exec.trace_id), CALL_TRACE);
    assert_eq!(
        attr(exec, "gen_ai.operation.name").as_deref(),
        Some("execute_tool")
    );
    assert_eq!(
        attr(exec, "gen_ai.tool.name").as_deref(),
        Some("add_numbers")
    );
    assert_eq!(attr(exec, "temper.tier").as_deref(), Some("session"));
    let id = attr(exec, "temper.tool.id").expect("temper.tool.id");
    assert_eq!(id.len(), 64, "blake3 hex: {id}");
    assert_eq!(attr(exec, "error.type"), None);

    // Inputs and outputs are never attributes: the secret in the call's
    // arguments is nowhere in what was exported.
    let raw = receiver.raw();
    assert!(!raw.is_empty());
    assert!(
        !raw.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the secret was exported"
    );
    let log = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        log.contains(&format!("continues trace 00-{CALL_TRACE}-{CALL_PARENT}-01")),
        "{log}"
    );
}

#[test]
fn otel_sdk_disabled_exports_nothing() {
    let receiver = OtlpReceiver::start();
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}", receiver.port);
    let mut m = McpStdio::start(
        &["--store", dir.path().join("store").to_str().unwrap()],
        &dir.path().join("stderr.log"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SDK_DISABLED", "true"),
        ],
        "no-secret-here",
    );
    m.tools();
    m.close();
    assert!(receiver.raw().is_empty());
}

#[test]
fn hub_tool_calls_count_under_their_upstream() {
    use crate::support::mcp_stdio::{mcp_python, tools_policy, write_file};
    const SECRET: &str = "sk-hub-metrics-SECRET-4410";
    let Some(python) = mcp_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hub/upstream_server.py");
    let command =
        serde_json::to_string(&[python.display().to_string(), script.display().to_string()])
            .unwrap();
    let tools = write_file(
        dir.path(),
        "tools.toml",
        &format!(
            "[upstream.search]\ncommand = {command}\nenv = {{ SEARCH_API_KEY = \"env:TEMPER_TEST_HUB_KEY\" }}\ntools = [\"web_search\"]\n"
        ),
    );
    let policy = tools_policy(dir.path(), &["web_search"]);
    let stderr = dir.path().join("stderr.log");
    let mut m = McpStdio::start(
        &[
            "--timeout-ms",
            "10000",
            "--store",
            dir.path().join("store").to_str().unwrap(),
            "--tools",
            tools.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--metrics",
            "127.0.0.1:0",
        ],
        &stderr,
        &[("TEMPER_TEST_HUB_KEY", SECRET)],
        SECRET,
    );
    let addr = metrics_addr(&stderr);
    for _ in 0..2 {
        let out = tool_output(&m.call("web_search", json!({"query": "wasm", "limit": 1})));
        assert_eq!(out["results"][0]["title"], "wasm #0");
    }
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let (status, text) = http_get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        sample(
            &text,
            r#"temper_upstream_calls_total{upstream="search",outcome="ok"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="web_search",tier="hub",outcome="ok"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert!(!text.contains(SECRET));
    m.close();
}

/// `temper mcp --http --metrics`: the calls served over Streamable HTTP are
/// counted like those over stdio, under `transport="http"`, and no request
/// is counted under stdio.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_calls_served_over_http() {
    let store = tempfile::tempdir().unwrap();
    let server = crate::mcp_http::Server::start(store.path(), &["--metrics", "127.0.0.1:0"]);
    let started = Instant::now();
    let metrics = loop {
        if let Some(addr) = server
            .log()
            .lines()
            .find_map(|l| l.strip_prefix("temper mcp: metrics on http://"))
        {
            break format!("http://{addr}");
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no metrics line: {}",
            server.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut c = server.client(None);
    c.open().await;
    let forged = c
        .call("forge_tool", crate::mcp_http::seed("add_numbers"))
        .await;
    assert_eq!(forged.result()["isError"], false, "{forged:?}");
    const N: usize = 5;
    for i in 0..N {
        let r = c.call("add_numbers", json!({"a": i, "b": 1})).await;
        assert_eq!(
            r.result()["structuredContent"]["sum"],
            json!(i + 1),
            "{r:?}"
        );
    }
    let bad = c.call("add_numbers", json!({"a": "two"})).await;
    assert_eq!(bad.result()["isError"], true, "{bad:?}");

    let text = reqwest::get(&metrics).await.unwrap().text().await.unwrap();
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="add_numbers",tier="session",outcome="ok"}"#
        ),
        Some(N as f64),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_errors_total{tool="add_numbers",kind="bad_input"}"#
        ),
        Some(1.0),
        "{text}"
    );
    // forge_tool, N calls and the refused one: tools/call over HTTP.
    assert_eq!(
        sample(
            &text,
            r#"temper_mcp_requests_total{method="tools/call",transport="http"}"#
        ),
        Some((N + 2) as f64),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_mcp_requests_total{method="tools/call",transport="stdio"}"#
        ),
        None,
        "{text}"
    );
}
