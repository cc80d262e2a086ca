//! A small HTTP/1.1 test server on 127.0.0.1 (plain and TLS) with the
//! endpoints the fetch tests need. It records every request it receives.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
#[allow(dead_code)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub host: String,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A plain HTTP server on an ephemeral loopback port.
pub struct TestServer {
    port: u16,
    log: Log,
    task: tokio::task::JoinHandle<()>,
}

impl TestServer {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let log: Log = Arc::default();
        let log2 = log.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let log = log2.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, port, log).await;
                });
            }
        });
        Self { port, log, task }
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    pub fn requests(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An HTTPS server with a self-signed certificate for one name.
pub struct TlsTestServer {
    port: u16,
    root_pem: String,
    task: tokio::task::JoinHandle<()>,
}

impl TlsTestServer {
    pub async fn start(name: &str) -> Self {
        let cert = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        let root_pem = cert.cert.pem();
        let der = cert.cert.der().clone();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(stream).await {
                        let _ = serve(tls, port, Arc::default()).await;
                    }
                });
            }
        });
        Self {
            port,
            root_pem,
            task,
        }
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    pub fn root_pem(&self) -> String {
        self.root_pem.clone()
    }
}

impl Drop for TlsTestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    port: u16,
    log: Log,
) -> std::io::Result<()> {
    loop {
        // Read the head.
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).await? == 0 {
                return Ok(());
            }
            head.push(byte[0]);
            if head.len() > 64 * 1024 {
                return Ok(());
            }
        }
        let head = String::from_utf8_lossy(&head).to_string();
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let method = first.next().unwrap_or("").to_string();
        let path = first.next().unwrap_or("").to_string();
        let mut headers = serde_json::Map::new();
        let mut length = 0usize;
        let mut host = String::new();
        for line in lines {
            if let Some((k, v)) = line.split_once(':') {
                let k = k.trim().to_ascii_lowercase();
                let v = v.trim().to_string();
                if k == "content-length" {
                    length = v.parse().unwrap_or(0);
                }
                if k == "host" {
                    host = v.clone();
                }
                headers.insert(k, serde_json::Value::String(v));
            }
        }
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await?;
        log.lock().unwrap().push(Seen {
            method: method.clone(),
            path: path.clone(),
            host,
        });

        let json = |s: &str| {
            (
                200u16,
                "application/json".to_string(),
                s.as_bytes().to_vec(),
                None::<String>,
            )
        };
        let redirect = |to: String| {
            (
                302u16,
                "text/plain".to_string(),
                b"moved".to_vec(),
                Some(to),
            )
        };
        let (status, ctype, payload, location) = match path.as_str() {
            "/json" if port_is_tls(&headers) => json(r#"{"hello":"tls"}"#),
            "/json" => json(r#"{"hello":"world"}"#),
            "/status/200" => json(r#"{"status":200}"#),
            "/metrics" => json(r#"{"requests":[120,135,180],"errors":[3,2,1]}"#),
            "/redirect-chain" => redirect(format!("http://api.example.test:{port}/redirect-2")),
            "/redirect-2" => redirect(format!("http://a.cdn.example.test:{port}/json")),
            "/redirect-evil" => redirect(format!("http://evil.test:{port}/json")),
            "/redirect-ip" => redirect(format!("http://127.0.0.1:{port}/json")),
            "/loop" => redirect(format!("http://api.example.test:{port}/loop")),
            "/many-headers" => (
                200,
                "text/plain".into(),
                b"ok".to_vec(),
                Some("many-headers".into()),
            ),
            "/slow" => {
                tokio::time::sleep(Duration::from_secs(10)).await;
                json("{}")
            }
            "/big" => (
                200,
                "application/octet-stream".into(),
                vec![b'x'; 9 << 20],
                None,
            ),
            "/echo" => {
                let doc = serde_json::json!({
                    "method": method,
                    "headers": headers,
                    "body": String::from_utf8_lossy(&body),
                });
                json(&doc.to_string())
            }
            _ => (404, "text/plain".into(), b"not found".to_vec(), None),
        };
        let mut response = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n",
            if status == 200 {
                "OK"
            } else if status == 302 {
                "Found"
            } else {
                "Not Found"
            },
            payload.len()
        );
        match location.as_deref() {
            Some("many-headers") => {
                for i in 0..80 {
                    response.push_str(&format!("x-h{i}: v\r\n"));
                }
            }
            Some(location) => response.push_str(&format!("location: {location}\r\n")),
            None => {}
        }
        response.push_str("\r\n");
        stream.write_all(response.as_bytes()).await?;
        if method != "HEAD" {
            stream.write_all(&payload).await?;
        }
        stream.flush().await?;
    }
}

fn port_is_tls(headers: &serde_json::Map<String, serde_json::Value>) -> bool {
    headers
        .get("host")
        .and_then(|h| h.as_str())
        .is_some_and(|h| h.starts_with("secure."))
}
