use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A raw HTTP/1.1 exchange with `addr`: the status line and the body.
async fn get(addr: SocketAddr, path: &str, auth: Option<&str>) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out.lines().next().unwrap_or_default().to_string();
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (status, body)
}

fn metrics() -> Arc<Metrics> {
    let m = Metrics::new(10, "0.1.0", "shim");
    let t = m.tool("add");
    m.record_call(&t, crate::Tier::Session, None, Duration::from_micros(10));
    m
}

#[tokio::test]
async fn loopback_serves_metrics_without_a_token() {
    let server = MetricsServer::bind("127.0.0.1:0", metrics(), None)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    let task = tokio::spawn(server.run());
    let (status, body) = get(addr, "/metrics", None).await;
    assert!(status.contains("200"), "{status}");
    assert!(
        body.contains(r#"temper_tool_calls_total{tool="add",tier="session",outcome="ok"} 1"#),
        "{body}"
    );
    let (status, _) = get(addr, "/mcp", None).await;
    assert!(status.contains("404"), "{status}");
    task.abort();
}

#[tokio::test]
async fn a_non_loopback_bind_needs_a_token() {
    let err = MetricsServer::bind("0.0.0.0:0", metrics(), None)
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, MetricsServeError::NeedsToken { .. }), "{err}");
    assert!(err.to_string().contains("--metrics-token-file"), "{err}");
    let err = MetricsServer::bind("not an address", metrics(), None)
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, MetricsServeError::Address { .. }), "{err}");
}

#[tokio::test]
async fn with_a_token_only_its_bearer_scrapes() {
    let dir = std::env::temp_dir().join(format!("temper-observe-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, "s3cret-scrape-token\n").unwrap();
    let token = ScrapeToken::from_file(&file).unwrap();
    assert!(!format!("{token:?}").contains("s3cret"));
    // With a token, any address may be bound (0.0.0.0 here).
    let server = MetricsServer::bind("0.0.0.0:0", metrics(), Some(token))
        .await
        .unwrap();
    let port = server.local_addr().unwrap().port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let task = tokio::spawn(server.run());
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("Bearer s3cret-scrape-token-and-more"),
        Some("Basic s3cret-scrape-token"),
        Some("s3cret-scrape-token"),
    ] {
        let (status, body) = get(addr, "/metrics", auth).await;
        assert!(status.contains("401"), "{auth:?}: {status}");
        assert!(!body.contains("temper_"), "{auth:?}: {body}");
    }
    let (status, body) = get(addr, "/metrics", Some("Bearer s3cret-scrape-token")).await;
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("temper_tool_calls_total"), "{body}");
    assert!(!body.contains("s3cret"), "{body}");
    // An empty token file is refused, naming the file, not a token.
    std::fs::write(&file, "  \n").unwrap();
    let err = ScrapeToken::from_file(&file).expect_err("empty");
    assert!(err.to_string().contains("empty"), "{err}");
    task.abort();
    let _ = std::fs::remove_dir_all(&dir);
}
