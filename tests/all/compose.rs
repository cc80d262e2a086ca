//! Compose mode end to end: the two compose seeds forged with the rules
//! judge and run over host-native stand-ins (one doing real HTTP against a
//! server on 127.0.0.1); every `inputMapping` form through forge + invoke;
//! composing never widens capabilities (the adapter imports only its steps,
//! an ungranted step stays ungranted); failing, looping and slow steps;
//! nested compose tools; cycles across tiers; forge-time errors naming the
//! step and key; the same request giving the same tool id.
//!
//! This module keeps the shared helpers; the tests are in its submodules.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeContext, ForgeError, Forged, InvokeError, NativeToolSpec};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{ArtifactId, Registry};
use temper::{CallFailure, Limits, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

mod determinism;
mod failures;
mod mapping;
mod nesting;
mod seeds;
mod widening;

// ---- helpers ---------------------------------------------------------------

fn runtime_with(policy: HostPolicy, limits: Limits) -> Runtime {
    support::runtime_builder()
        .policy(policy)
        .limits(limits)
        .build()
        .expect("runtime")
}

fn runtime() -> Runtime {
    runtime_with(HostPolicy::deny_all(), Limits::default())
}

fn rules() -> Arc<dyn Judge> {
    Arc::new(RulesJudge::standard())
}

fn forge_on(runtime: Runtime, dir: &Path) -> Forge {
    Forge::builder(runtime, Arc::new(Registry::open(dir).expect("store")))
        .judge(rules())
        .build()
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-1", "session-1")
}

/// A compose seed from `tests/fixtures/compose/`.
fn compose_seed(name: &str) -> ForgeRequest {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/compose")
        .join(format!("{name}.json"));
    ForgeRequest::from_json(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A compose request over `steps` with one test case per input.
fn compose(name: &str, steps: Value, cases: &[Value]) -> ForgeRequest {
    let cases: Vec<Value> = cases.iter().map(|i| json!({"input": i})).collect();
    let doc = json!({
        "name": name,
        "description": format!("compose tool {name} for the tests"),
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "compose", "steps": steps},
        "testCases": cases,
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

/// A sandbox request with one test case per input.
fn sandbox(name: &str, code: &str, allowlist: &[&str], cases: &[Value]) -> ForgeRequest {
    let cases: Vec<Value> = cases.iter().map(|i| json!({"input": i})).collect();
    let doc = json!({
        "name": name,
        "description": format!("sandbox tool {name} for the tests"),
        "inputSchema": {"type": "object"},
        "outputSchema": {"type": "object"},
        "implementation": {"mode": "sandbox", "code": code, "allowlist": allowlist},
        "testCases": cases,
    });
    ForgeRequest::from_json(&doc.to_string()).unwrap()
}

/// Registers a native tool taking and returning objects.
fn native<F, Fut>(forge: &Forge, name: &str, f: F)
where
    F: Fn(Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, String>> + Send + 'static,
{
    forge
        .register_native(
            NativeToolSpec {
                name: name.into(),
                description: format!("native {name} for the tests"),
                input_schema: json!({"type": "object"}),
                output_schema: json!({"type": "object"}),
            },
            f,
        )
        .unwrap();
}

/// A native `echo` returning its input; counts its calls.
fn echo(forge: &Forge) -> Arc<AtomicUsize> {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    native(forge, "echo", move |input| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move { Ok(input) }
    });
    calls
}

async fn forged(forge: &Forge, request: &ForgeRequest, ctx: &ForgeContext) -> Forged {
    forge
        .forge(request, ctx)
        .await
        .unwrap_or_else(|e| panic!("forging {}: {e}", request.name))
}

/// The failure of an invoke that must fail in the run.
async fn run_failure(forge: &Forge, name: &str, input: Value, ctx: &ForgeContext) -> CallFailure {
    match forge.invoke(name, &input, ctx).await {
        Err(InvokeError::Run { tool, failure }) => {
            assert_eq!(tool, name);
            failure
        }
        Err(other) => panic!("{name}: expected a run failure, got {other}"),
        Ok(out) => panic!("{name}: expected a run failure, got {}", out.output),
    }
}

async fn refused(forge: &Forge, request: &ForgeRequest, ctx: &ForgeContext) -> ForgeError {
    forge
        .forge(request, ctx)
        .await
        .err()
        .unwrap_or_else(|| panic!("{} was registered", request.name))
}

fn artifact_bytes(forge: &Forge, id: &str) -> Vec<u8> {
    forge
        .store()
        .get_artifact(&ArtifactId::from_hex(id).unwrap())
        .unwrap()
}

/// A plain HTTP/1.1 server on 127.0.0.1 answering every request with a
/// fixed JSON body; records each request line (`GET /path`).
struct JsonServer {
    port: u16,
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl JsonServer {
    async fn start(body: &'static str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head);
                    let line = head.lines().next().unwrap_or("");
                    let line = line.rsplit_once(' ').map_or(line, |(l, _)| l).to_string();
                    log.lock().unwrap().push(line);
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self { port, seen, task }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for JsonServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---- step sources shared by the nesting, mapping and determinism tests ----

const TRIPLE: &str = "function execute(i) {\n  if (typeof i.n !== 'number') throw new TypeError('n must be a number');\n  console.log('triple ' + i.n);\n  return { n: i.n * 3 };\n}";
const INC: &str = "function execute(i) {\n  return { n: i.n + 1, label: 'n=' + (i.n + 1) };\n}";
