//! The OpenAI-compatible embeddings client against a stub on 127.0.0.1:
//! the request's shape, the key kept out of errors and logs, and the
//! fallback to lexical results (with a warning) when the endpoint refuses
//! connections or answers 500.

use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};

use temper_embedding::{
    EmbedError, Embedder, OpenAiEmbedder, OpenAiEmbedderConfig, hybrid_ranking,
};

/// What the stub answers.
#[derive(Clone, Copy)]
enum Mode {
    /// 200 with one 3-dimensional vector per input, in reverse index order.
    Vectors,
    /// 500 whose body quotes the request's Authorization header back.
    EchoAuthWith500,
}

/// A request the stub received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    authorization: Option<String>,
    content_type: Option<String>,
    body: Value,
}

/// A tiny hyper server on 127.0.0.1 with its own runtime.
struct Stub {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    _runtime: tokio::runtime::Runtime,
}

impl Stub {
    fn start(mode: Mode) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let log = log.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let log = log.clone();
                        async move { Ok::<_, Infallible>(answer(mode, req, log).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Self {
            addr,
            seen,
            _runtime: runtime,
        }
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

async fn answer(
    mode: Mode,
    req: Request<Incoming>,
    log: Arc<Mutex<Vec<Seen>>>,
) -> Response<Full<Bytes>> {
    let header = |name| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let (authorization, content_type) = (header("authorization"), header("content-type"));
    let (method, path) = (req.method().to_string(), req.uri().path().to_string());
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    log.lock().unwrap().push(Seen {
        method,
        path,
        authorization: authorization.clone(),
        content_type,
        body: body.clone(),
    });
    let (status, out) = match mode {
        Mode::Vectors => {
            let inputs = body["input"].as_array().cloned().unwrap_or_default();
            let mut data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let len = t.as_str().unwrap_or("").len() as f64;
                    json!({"object": "embedding", "index": i, "embedding": [len, 1.0, i as f64]})
                })
                .collect();
            data.reverse();
            (
                StatusCode::OK,
                json!({"object": "list", "data": data, "model": body["model"]}),
            )
        }
        Mode::EchoAuthWith500 => (
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": {"message": format!("backend exploded; you sent {}", authorization.unwrap_or_default())}}),
        ),
    };
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(out.to_string())))
        .unwrap()
}

/// Sets `name` to `value` for this test process (each test uses its own name).
fn set_key(name: &str, value: &str) {
    // SAFETY: each test sets a variable no other test reads or writes, and
    // nothing in this process enumerates the environment concurrently.
    unsafe { std::env::set_var(name, value) };
}

fn embedder(base_url: String, key_env: &str) -> OpenAiEmbedder {
    let mut config = OpenAiEmbedderConfig::new(base_url, "text-embedding-test");
    config.api_key_env = Some(key_env.to_string());
    config.timeout = Duration::from_secs(5);
    OpenAiEmbedder::new(config).unwrap()
}

/// Runs `f` with `warn` logs captured; returns what was logged.
fn logged(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buf = Buf::default();
    let out = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || out.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
}

fn docs() -> (Vec<(String, String)>, Vec<String>) {
    let docs = vec![
        (
            "slugify".to_string(),
            "slugify: turns text into a URL slug".to_string(),
        ),
        (
            "fetch_weather".to_string(),
            "fetch weather: the weather of a city".to_string(),
        ),
    ];
    (docs, vec!["slugify".to_string()])
}

#[test]
fn calls_the_endpoint_with_the_openai_request_shape_and_the_key_as_bearer() {
    let stub = Stub::start(Mode::Vectors);
    set_key("TEMPER_TEST_EMBED_KEY_SHAPE", "sk-shape-0123456789");
    let e = embedder(stub.base_url(), "TEMPER_TEST_EMBED_KEY_SHAPE");
    assert_eq!(
        e.model_id(),
        format!("openai:text-embedding-test@{}/embeddings", stub.base_url())
    );
    let vectors = e.embed(&["a", "bbb"]).unwrap();
    assert_eq!(
        vectors,
        vec![vec![1.0, 1.0, 0.0], vec![3.0, 1.0, 1.0]],
        "ordered by index, not answer order"
    );

    let seen = stub.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/embeddings")
    );
    assert_eq!(r.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        r.authorization.as_deref(),
        Some("Bearer sk-shape-0123456789")
    );
    assert_eq!(
        r.body,
        json!({"model": "text-embedding-test", "input": ["a", "bbb"], "encoding_format": "float"})
    );
    assert!(!format!("{e:?}").contains("sk-shape"));
}

#[test]
fn without_a_key_no_authorization_header_is_sent() {
    let stub = Stub::start(Mode::Vectors);
    let e = embedder(stub.base_url(), "TEMPER_TEST_EMBED_KEY_UNSET_NEVER_SET");
    e.embed(&["x"]).unwrap();
    assert_eq!(stub.seen.lock().unwrap()[0].authorization, None);
}

#[test]
fn a_refusing_endpoint_falls_back_to_lexical_results_with_a_warning() {
    // A port that was just free: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    set_key("TEMPER_TEST_EMBED_KEY_REFUSED", "sk-refused-0123456789");
    let e = embedder(
        format!("http://127.0.0.1:{port}/v1"),
        "TEMPER_TEST_EMBED_KEY_REFUSED",
    );
    let err = e.embed(&["x"]).unwrap_err();
    assert!(
        matches!(&err, EmbedError::Upstream { upstream, detail }
        if upstream.contains(&port.to_string()) && detail.contains("cannot connect")),
        "{err}"
    );

    let (docs, lexical) = docs();
    let mut fused = None;
    let logs = logged(|| fused = Some(hybrid_ranking(Some(&e), "url slug", &docs, &lexical)));
    let fused = fused.unwrap();
    assert_eq!(fused.ranking, lexical, "the lexical ranking, unchanged");
    assert!(!fused.semantic);
    assert_eq!(fused.warnings.len(), 1);
    assert!(
        fused.warnings[0].contains(&format!("127.0.0.1:{port}")),
        "{:?}",
        fused.warnings
    );
    assert!(logs.contains("semantic ranking failed"), "{logs}");
    for text in [err.to_string(), fused.warnings.join(" "), logs] {
        assert!(!text.contains("sk-refused"), "key leaked: {text}");
    }
}

#[test]
fn an_endpoint_answering_500_falls_back_and_its_echo_of_the_key_is_cut_out() {
    let stub = Stub::start(Mode::EchoAuthWith500);
    set_key("TEMPER_TEST_EMBED_KEY_500", "sk-five-hundred-0123456789");
    let e = embedder(stub.base_url(), "TEMPER_TEST_EMBED_KEY_500");
    let err = e.embed(&["x"]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("HTTP 500") && text.contains("backend exploded"),
        "{text}"
    );
    assert_eq!(
        stub.seen.lock().unwrap()[0].authorization.as_deref(),
        Some("Bearer sk-five-hundred-0123456789"),
        "the stub did receive (and echo) the key"
    );

    let (docs, lexical) = docs();
    let mut fused = None;
    let logs = logged(|| fused = Some(hybrid_ranking(Some(&e), "url slug", &docs, &lexical)));
    let fused = fused.unwrap();
    assert_eq!(fused.ranking, lexical);
    assert!(
        fused.warnings[0].contains("HTTP 500"),
        "{:?}",
        fused.warnings
    );
    assert!(logs.contains("HTTP 500"), "{logs}");
    for text in [text, fused.warnings.join(" "), logs] {
        assert!(!text.contains("sk-five-hundred"), "key leaked: {text}");
    }
}

#[test]
fn a_working_endpoint_is_fused_with_the_lexical_ranking() {
    let stub = Stub::start(Mode::Vectors);
    let e = embedder(stub.base_url(), "TEMPER_TEST_EMBED_KEY_UNSET_NEVER_SET");
    let (docs, lexical) = docs();
    let fused = hybrid_ranking(Some(&e), "url slug", &docs, &lexical);
    assert!(fused.semantic && fused.warnings.is_empty());
    assert_eq!(
        fused.ranking.len(),
        2,
        "the semantic half adds the tool lexical search missed"
    );
}
