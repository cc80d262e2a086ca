//! Embedding the runtime alone (`temper-runtime`, no store, server or CLI):
//! build a JavaScript tool, grant it `fetch` to one domain, call it.
//!
//! Run: `cargo run --release --example embed_runtime`
//!
//! The example starts its own tiny HTTP server on 127.0.0.1, so it runs
//! offline. The host policy allows one domain, `api.example.test` on that
//! server's port; the runtime resolves that name to 127.0.0.1 (a test
//! override) and, because the server is on loopback, the policy allows a
//! private address. Leave `allow_private` off in a real deployment: it is
//! what refuses a tool's requests to your internal network.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener};

use temper_runtime::capabilities::fetch::TransportOptions;
use temper_runtime::policy::HostPolicy;
use temper_runtime::{RunError, Runtime};

/// The tool: agent JavaScript against the `tool` world. `fetch` is the
/// host's, checked against the policy on every hop.
const WEATHER_TOOL: &str = r#"
async function execute(input) {
  const res = await fetch(input.url);
  const body = await res.json();
  return { status: res.status, celsius: body.celsius };
}"#;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = serve_one_json_body(r#"{"celsius": 21.5}"#)?;

    // Deny by default; allow exactly one domain (and port).
    let mut policy = HostPolicy::deny_all().with_allow_net(&format!("api.example.test:{port}"))?;
    policy.fetch.allow_private = true; // only because the server is on loopback
    let transport = TransportOptions {
        resolve_overrides: HashMap::from([(
            "api.example.test".to_string(),
            vec![IpAddr::V4(Ipv4Addr::LOCALHOST)],
        )]),
        ..TransportOptions::default()
    };
    let runtime = Runtime::builder()
        .policy(policy)
        .transport(transport)
        .build()?;

    // Build once (QuickJS bytecode in a content-addressed artifact) ...
    let artifact = runtime.build(WEATHER_TOOL).await?;
    println!("built {}", artifact.id);

    // ... grant it `fetch` (the allowlist meets the host policy) and call it.
    let tool = runtime.grant(&runtime.tool(&artifact), &["fetch".to_string()])?;
    let url = format!("http://api.example.test:{port}/weather");
    let out = runtime
        .call(&tool, &serde_json::json!({ "url": url }).to_string())
        .await?;
    println!("granted fetch: {}", out.output);

    // The same artifact without the grant: the call is refused by the host.
    let ungranted = runtime.tool(&artifact);
    match runtime
        .call(&ungranted, &serde_json::json!({ "url": url }).to_string())
        .await
    {
        Err(failure) => match failure.error {
            RunError::CapabilityDenied { capability } => {
                println!("no grant: capability not granted: {capability}")
            }
            other => return Err(format!("expected a denial, got {other}").into()),
        },
        Ok(out) => return Err(format!("expected a denial, got {}", out.output).into()),
    }

    // A domain the policy does not allow, with the grant: refused too.
    let elsewhere = serde_json::json!({ "url": format!("http://other.example.test:{port}/") });
    match runtime.call(&tool, &elsewhere.to_string()).await {
        Err(failure) => println!("other domain: {}", failure.error),
        Ok(out) => return Err(format!("expected a refusal, got {}", out.output).into()),
    }
    Ok(())
}

/// Serves `body` as `application/json` to every request, on a free port of
/// 127.0.0.1, from a background thread; returns the port.
fn serve_one_json_body(body: &'static str) -> std::io::Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Ok(port)
}
