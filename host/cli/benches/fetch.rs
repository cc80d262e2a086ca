//! Fetch overhead: a loopback GET through a tool (fresh instance, policy
//! checks, host transport, JS Response) vs the same GET from Rust directly
//! with reqwest. Prints the figures and writes `target/bench-fetch.md`.
//!
//! Run: `cargo bench -p temper --bench fetch`.

use std::time::{Duration, Instant};

use temper::policy::HostPolicy;
use temper::{Limits, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ROUNDS: usize = 2000;
const WARMUP: usize = 100;

/// A keep-alive HTTP/1.1 server answering every request with a small JSON.
async fn serve() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    // Accepted sockets set TCP_NODELAY below.
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut pending = Vec::new();
                loop {
                    let n = match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        let body = br#"{"hello":"world"}"#;
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            body.len()
                        );
                        // One write: head and body in one segment (no Nagle wait).
                        let mut response = head.into_bytes();
                        response.extend_from_slice(body);
                        if stream.write_all(&response).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let port = serve().await;
        let url = format!("http://127.0.0.1:{port}/json");

        // Rust directly.
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut direct = Vec::with_capacity(ROUNDS);
        for i in 0..ROUNDS + WARMUP {
            let t = Instant::now();
            let body = client.get(&url).send().await.unwrap().text().await.unwrap();
            if i >= WARMUP {
                direct.push(t.elapsed());
            }
            assert_eq!(body, r#"{"hello":"world"}"#);
        }

        // Through a tool.
        let policy = HostPolicy::deny_all()
            .with_allow_net(&format!("http://127.0.0.1:{port}"))
            .unwrap();
        let cache = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-cache");
        let runtime = Runtime::builder()
            .policy(policy)
            .limits(Limits::default())
            .cache_dir(Some(cache))
            .build()
            .unwrap();
        let source = "async function execute(input) { const r = await fetch(input.url); return await r.json(); }";
        let artifact = runtime.build(source).await.unwrap();
        let tool = runtime.load(artifact.bytes.to_vec()).await.unwrap();
        let tool = runtime.grant(&tool, &["fetch".to_string()]).unwrap();
        let input = serde_json::json!({ "url": url }).to_string();
        let mut through_tool = Vec::with_capacity(ROUNDS);
        for i in 0..ROUNDS + WARMUP {
            let t = Instant::now();
            let out = runtime.call(&tool, &input).await.unwrap();
            if i >= WARMUP {
                through_tool.push(t.elapsed());
            }
            assert_eq!(out.output, r#"{"hello":"world"}"#);
        }

        // A tool that does no fetch: the fixed cost of a call.
        let plain = runtime.build("function execute(input) { return {hello: 'world'}; }").await.unwrap();
        let plain = runtime.load(plain.bytes.to_vec()).await.unwrap();
        let mut no_fetch = Vec::with_capacity(ROUNDS);
        for i in 0..ROUNDS + WARMUP {
            let t = Instant::now();
            runtime.call(&plain, &input).await.unwrap();
            if i >= WARMUP {
                no_fetch.push(t.elapsed());
            }
        }

        for v in [&mut direct, &mut through_tool, &mut no_fetch] {
            v.sort();
        }
        let rows = [
            ("loopback GET from Rust (reqwest, keep-alive)", &direct),
            ("loopback GET through a tool call (fresh instance)", &through_tool),
            ("tool call without fetch (same input)", &no_fetch),
        ];
        let mut report = String::from("# Fetch overhead (loopback)\n\n| path | p50 | p95 | p99 |\n|---|---:|---:|---:|\n");
        for (name, v) in rows {
            let line = format!(
                "| {name} | {:.1} µs | {:.1} µs | {:.1} µs |\n",
                percentile(v, 0.5).as_secs_f64() * 1e6,
                percentile(v, 0.95).as_secs_f64() * 1e6,
                percentile(v, 0.99).as_secs_f64() * 1e6
            );
            print!("{line}");
            report.push_str(&line);
        }
        let overhead = percentile(&through_tool, 0.5).as_secs_f64() - percentile(&direct, 0.5).as_secs_f64();
        let line = format!(
            "\nfetch overhead through a tool, p50: {:.1} µs ({ROUNDS} rounds each after {WARMUP} warm-up)\n",
            overhead * 1e6
        );
        print!("{line}");
        report.push_str(&line);
        let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-fetch.md");
        std::fs::write(path, report).unwrap();
    });
}
