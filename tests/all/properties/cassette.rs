//! Properties of the fetch cassette file: read or refused, documented
//! cassettes read whole, and round trips through record and replay.

use crate::support;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;
use serde_json::{Value, json};
use temper::capabilities::cassette::{Cassette, CassetteError};
use temper::capabilities::fetch::TransportOptions;
use temper::policy::HostPolicy;

use super::{bounded, config, json_value, text};

/// Cassette documents in the documented shape, with generated values.
fn cassette_doc() -> impl Strategy<Value = (Value, usize)> {
    let interaction = (
        prop_oneof![Just("GET"), Just("POST"), Just("get"), Just("BREW")],
        prop_oneof![
            "https://api\\.example\\.test/[a-z0-9]{0,10}".prop_map(String::from),
            text()
        ],
        prop::option::of(prop_oneof!["[0-9a-f]{64}", text()]),
        prop_oneof![100u16..600, any::<u16>()],
        prop::collection::vec((text(), text()), 0..3),
        prop_oneof![
            Just(None),
            text().prop_map(|b| Some(("body", b))),
            "[A-Za-z0-9+/]{0,12}={0,2}".prop_map(|b| Some(("body_base64", b))),
        ],
    )
        .prop_map(|(method, url, hash, status, headers, body)| {
            let mut request = json!({"method": method, "url": url});
            if let Some(h) = hash {
                request["body_blake3"] = json!(h);
            }
            let mut response = json!({"status": status, "headers": headers});
            if let Some((k, b)) = body {
                response[k] = json!(b);
            }
            json!({"request": request, "response": response})
        });
    prop::collection::vec(interaction, 0..4).prop_map(|list| {
        let n = list.len();
        (
            json!({"format": "temper-cassette", "version": 1, "interactions": list}),
            n,
        )
    })
}

// ---- cassette -------------------------------------------------------------------

proptest! {
    #![proptest_config(config(300))]

    /// Any file is a cassette or a typed format error naming the file.
    #[test]
    fn cassette_files_are_read_or_refused(doc in prop_oneof![
        text(),
        json_value().prop_map(|v| v.to_string()),
        cassette_doc().prop_map(|(v, _)| v.to_string()),
    ]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, &doc).unwrap();
        match bounded("Cassette::replay", || Cassette::replay(&path)) {
            Ok(_) => {}
            Err(CassetteError::Format { path: p, message }) => {
                prop_assert_eq!(p, path);
                prop_assert!(!message.is_empty());
            }
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    /// Cassettes written in the documented format with valid values are
    /// read with every interaction.
    #[test]
    fn documented_cassettes_are_read_whole(
        list in prop::collection::vec((
            prop_oneof![Just("GET"), Just("POST"), Just("DELETE")],
            "https://api\\.example\\.test/[a-z0-9]{0,10}(\\?[a-z]=[0-9])?",
            prop::option::of("[0-9a-f]{64}"),
            100u16..600,
            prop::collection::vec(("[a-z-]{1,10}", "[ -~]{0,10}"), 0..3),
            prop_oneof![
                Just(None),
                "[ -~]{0,20}".prop_map(|b| Some(("body", b))),
                prop::collection::vec(any::<u8>(), 0..12).prop_map(|b| Some(("body_base64", base64_std(&b)))),
            ],
        ), 0..5)
    ) {
        let interactions: Vec<Value> = list.iter().map(|(method, url, hash, status, headers, body)| {
            let mut request = json!({"method": method, "url": url});
            if let Some(h) = hash { request["body_blake3"] = json!(h); }
            let mut response = json!({"status": status, "headers": headers});
            if let Some((k, b)) = body { response[*k] = json!(b); }
            json!({"request": request, "response": response})
        }).collect();
        let doc = json!({"format": "temper-cassette", "version": 1, "interactions": interactions});
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        let cassette = Cassette::replay(&path).unwrap_or_else(|e| panic!("{doc}: {e}"));
        prop_assert_eq!(cassette.len(), list.len());
    }
}

/// Fetches each URL of `input.urls`, reporting what came back.
const FETCH_ALL: &str = r#"
async function execute(input) {
  const out = [];
  for (const u of input.urls) {
    try {
      const r = await fetch(u);
      out.push({ status: r.status, url: r.url, redirected: r.redirected, body: await r.text() });
    } catch (e) {
      out.push({ error: String(e.message) });
    }
  }
  return out;
}"#;

/// Exchanges recorded by the host's cassette writer replay to the same
/// results with no network, and recording the same exchanges again writes
/// the same bytes.
#[test]
fn cassettes_round_trip_through_record_and_replay() {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let paths = prop::collection::vec(
        prop_oneof![
            Just("/json".to_string()),
            Just("/status/200".to_string()),
            Just("/redirect-chain".to_string()),
            Just("/echo".to_string()),
            Just("/redirect-evil".to_string()),
            "/missing-[a-z0-9]{1,6}",
            "/json\\?q=[a-z0-9%]{0,8}",
        ],
        1..5,
    );
    let mut runner = proptest::test_runner::TestRunner::new(config(12));
    runner
        .run(&paths, |paths| {
            tokio.block_on(record_and_replay(paths));
            Ok(())
        })
        .unwrap();
}

async fn record_and_replay(paths: Vec<String>) {
    let server = support::http::TestServer::start().await;
    let port = server.port();
    let mut policy = HostPolicy::deny_all()
        .with_allow_net(&format!(
            "api.example.test:{port},*.cdn.example.test:{port}"
        ))
        .unwrap();
    policy.fetch.allow_private = true;
    let loopback = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    let transport = TransportOptions {
        resolve_overrides: ["api.example.test", "a.cdn.example.test", "evil.test"]
            .into_iter()
            .map(|n| (n.to_string(), loopback.clone()))
            .collect::<HashMap<_, _>>(),
        ..TransportOptions::default()
    };
    let urls: Vec<String> = paths
        .iter()
        .map(|p| format!("http://api.example.test:{port}{p}"))
        .collect();
    let input = json!({ "urls": urls }).to_string();
    let dir = tempfile::tempdir().unwrap();
    let run = |cassette: Cassette| {
        let rt = support::runtime_builder()
            .policy(policy.clone())
            .transport(transport.clone())
            .cassette(cassette)
            .build()
            .unwrap();
        let input = input.clone();
        async move {
            let artifact = rt.build(FETCH_ALL).await.unwrap();
            let tool = rt
                .grant(&rt.tool(&artifact), &["fetch".to_string()])
                .unwrap();
            let out = rt
                .call(&tool, &input)
                .await
                .unwrap_or_else(|f| panic!("{f}"));
            serde_json::from_str::<Value>(&out.output).unwrap()
        }
    };
    let first = dir.path().join("first.json");
    let live = run(Cassette::record(&first).unwrap()).await;
    let seen = server.requests().len();
    let second = dir.path().join("second.json");
    assert_eq!(run(Cassette::record(&second).unwrap()).await, live);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        std::fs::read(&second).unwrap(),
        "the same exchanges write the same cassette"
    );
    let replayed = run(Cassette::replay(&first).unwrap()).await;
    assert_eq!(replayed, live, "{paths:?}");
    assert_eq!(server.requests().len(), 2 * seen, "replay used no network");
}

fn base64_std(bytes: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if chunk.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}
