//! Property tests for every host parser that takes outside input: the
//! forge request, the artifact manifest section, the policy TOML and the
//! fetch domain rules and URL check, the fetch cassette file, the MCP
//! JSON-RPC framing, the static check's lexer, and the canonical JSON of
//! the audit trail and manifests. (Compose step specs and mapping
//! expressions: `compose-mapping/tests/properties.rs`.)
//!
//! Invariants: no panic on any input, bounded time, refusals are typed
//! errors, and round trips where a format is written and read (manifest,
//! canonical JSON, domain rules, forge requests, cassettes as documented).
//! The case counts keep the CI run to seconds; run longer with
//! `PROPTEST_CASES=100000 cargo test --release -p temper --test properties`.

use crate::support;

use std::collections::HashMap;
use std::io::BufReader;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};
use temper::artifact::{self, ArtifactError, ArtifactManifest, StepRef};
use temper::canonical_json::canonical_json;
use temper::capabilities::cassette::{Cassette, CassetteError};
use temper::capabilities::fetch::TransportOptions;
use temper::mcp::jsonrpc::{self, Frame, Incoming};
use temper::policy::{DomainRule, FetchDenied, FetchPolicy, HostKind, HostPolicy, check_dns_name};
use temper::request::{ForgeRequest, Implementation, TestCase};
use temper::static_check;

/// `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Runs `f`, failing when it takes longer than `limit`: inputs here are a
/// few KiB at most, so a hang or a blow-up shows as a failure.
fn bounded<T>(what: &str, f: impl FnOnce() -> T) -> T {
    const LIMIT: Duration = Duration::from_secs(3);
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    assert!(took < LIMIT, "{what} took {took:?}");
    out
}

// ---- generators -------------------------------------------------------------------

/// Printable-ish strings with the characters parsers care about.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ -~]{0,40}",
        "[a-z0-9.:/@%#?*\\[\\]_-]{0,40}",
    ]
}

/// JSON values, small, with finite floats anywhere.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 40, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((text(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

fn test_case() -> impl Strategy<Value = TestCase> {
    (json_value(), prop::option::of(json_value())).prop_map(|(input, expected_output)| TestCase {
        input,
        expected_output,
    })
}

fn forge_request() -> impl Strategy<Value = ForgeRequest> {
    let implementation = prop_oneof![
        (text(), prop::collection::vec(text(), 0..3))
            .prop_map(|(code, allowlist)| Implementation::Sandbox { code, allowlist }),
        prop::collection::vec(json_value(), 0..3)
            .prop_map(|steps| Implementation::Compose { steps }),
    ];
    (
        "[a-z_]{1,16}",
        text(),
        json_value(),
        json_value(),
        implementation,
        prop::collection::vec(test_case(), 0..3),
    )
        .prop_map(
            |(name, description, input_schema, output_schema, implementation, test_cases)| {
                ForgeRequest {
                    name,
                    description,
                    input_schema,
                    output_schema,
                    implementation,
                    test_cases,
                }
            },
        )
}

fn manifest() -> impl Strategy<Value = ArtifactManifest> {
    let step = (
        text(),
        text(),
        prop::option::of("[0-9a-f]{64}"),
        json_value(),
    )
        .prop_map(|(name, tool, blake3, input_mapping)| StepRef {
            name,
            tool,
            blake3,
            input_mapping,
        });
    (
        (
            text(),
            text(),
            json_value(),
            json_value(),
            prop_oneof![
                Just(artifact::Mode::Sandbox),
                Just(artifact::Mode::Compose),
                Just(artifact::Mode::Bundle)
            ],
        ),
        (
            prop::collection::vec(text(), 0..3),
            prop::collection::vec(test_case(), 0..3),
            "[0-9a-f]{64}",
            "[0-9a-f]{64}",
            prop::collection::vec(step, 0..3),
            prop::option::of(text()),
        ),
    )
        .prop_map(
            |(
                (name, description, input_schema, output_schema, mode),
                (capabilities, test_cases, source_blake3, shim_blake3, steps, source),
            )| ArtifactManifest {
                format: artifact::FORMAT.into(),
                name,
                description,
                input_schema,
                output_schema,
                mode,
                capabilities,
                test_cases,
                source_blake3,
                shim_blake3,
                steps,
                calls: Vec::new(),
                source,
            },
        )
}

fn empty_component() -> Vec<u8> {
    wat::parse_str("(component)").expect("an empty component")
}

/// Domain-rule-like strings.
fn rule_text() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        (
            prop::option::of(prop_oneof![
                Just("http://"),
                Just("https://"),
                Just("ftp://"),
                Just("HTTPS://")
            ]),
            prop_oneof![
                "([a-z0-9-]{1,12}\\.){0,3}[a-z]{1,8}\\.?",
                "\\*\\.([a-z0-9-]{1,8}\\.){1,3}[a-z]{2,5}",
                "[0-9]{1,3}(\\.[0-9]{1,3}){3}",
                "\\[[0-9a-f:]{2,20}\\]",
                "[^/:@]{0,12}",
            ],
            prop::option::of((0u32..70000).prop_map(|p| format!(":{p}"))),
            prop::option::of(Just("/")),
        )
            .prop_map(|(s, h, p, slash)| {
                format!(
                    "{}{h}{}{}",
                    s.unwrap_or(""),
                    p.unwrap_or_default(),
                    slash.unwrap_or("")
                )
            }),
    ]
}

/// URL-like strings aimed at the fetch check.
fn url_text() -> impl Strategy<Value = String> {
    prop_oneof![
        text(),
        (
            prop_oneof![
                Just("http://"),
                Just("https://"),
                Just("HTTP://"),
                Just("http:"),
                Just("ftp://")
            ],
            prop::option::of("[a-z:%@]{1,8}@"),
            prop_oneof![
                "([a-z0-9*_%!-]{1,12}\\.){0,3}(example\\.test|cdn\\.example\\.test)\\.{0,2}",
                "[0-9]{1,10}(\\.[0-9]{1,3}){0,3}",
                "0x[0-9a-f]{1,8}",
                "\\[[0-9a-f:.%]{2,24}\\]",
                "[^/?#]{0,20}",
                "[a-z]{60,70}\\.example\\.test",
            ],
            prop::option::of((0u32..70000).prop_map(|p| format!(":{p}"))),
            "(/[a-zA-Z0-9%._~?#&=+-]{0,20}){0,3}",
        )
            .prop_map(|(s, user, host, port, path)| {
                format!(
                    "{s}{}{host}{}{path}",
                    user.unwrap_or_default(),
                    port.unwrap_or_default()
                )
            }),
    ]
}

fn fetch_policy() -> FetchPolicy {
    FetchPolicy {
        rules: [
            "api.example.test",
            "*.cdn.example.test",
            "https://secure.example.test",
            "api.example.test:8443",
            "dotted.example.test.",
            "127.0.0.1:8080",
            "[::1]",
        ]
        .iter()
        .map(|r| DomainRule::parse(r).unwrap())
        .collect(),
        max_url_bytes: 200,
        ..FetchPolicy::default()
    }
}

/// TOML-ish policy documents: real keys and sections with generated values.
fn policy_doc() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        text().prop_map(|s| format!("{:?}", s)),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        prop::collection::vec(rule_text().prop_map(|s| format!("{s:?}")), 0..4)
            .prop_map(|v| format!("[{}]", v.join(", "))),
        "[ -~]{0,12}",
    ];
    let key = prop_oneof![
        Just("allow"),
        Just("domains"),
        Just("allow_private"),
        Just("max_redirects"),
        Just("max_url_bytes"),
        Just("max_headers"),
        Just("host"),
        Just("guest"),
        Just("timeout_ms"),
        Just("memory_mb"),
        Just("seed"),
        Just("epoch_ms"),
        Just("enabled"),
        Just("bogus"),
    ];
    let section = prop_oneof![
        Just(""),
        Just("[fetch]\n"),
        Just("[[read]]\n"),
        Just("[limits]\n"),
        Just("[determinism]\n"),
        Just("[nope]\n"),
    ];
    prop::collection::vec((section, prop::collection::vec((key, value), 0..4)), 0..4).prop_map(
        |sections| {
            let mut doc = String::new();
            for (header, pairs) in sections {
                doc.push_str(header);
                for (k, v) in pairs {
                    doc.push_str(&format!("{k} = {v}\n"));
                }
            }
            doc
        },
    )
}

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

/// JavaScript-ish token soup for the static check's lexer.
fn js_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("eval"),
        Just("Function"),
        Just("fs"),
        Just("."),
        Just("readFile"),
        Just("writeFile"),
        Just("import"),
        Just("require"),
        Just("fetch"),
        Just("crypto"),
        Just("globalThis"),
        Just("constructor"),
        Just("("),
        Just(")"),
        Just("["),
        Just("]"),
        Just("{"),
        Just("}"),
        Just("`"),
        Just("${"),
        Just("'"),
        Just("\""),
        Just("/"),
        Just("*"),
        Just("//"),
        Just("/*"),
        Just("*/"),
        Just("\\"),
        Just("\n"),
        Just(" "),
        Just("=>"),
        Just("#"),
        Just("<!--"),
        Just("-->"),
        Just("x"),
        Just("1e3"),
        Just("0x"),
        Just("\u{2028}"),
        Just("é"),
    ];
    prop_oneof![
        text(),
        prop::collection::vec(token, 0..64).prop_map(|t| t.concat()),
    ]
}

// ---- forge request ---------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn forge_requests_parse_or_refuse_any_text(s in text()) {
        let _ = bounded("ForgeRequest::from_json", || ForgeRequest::from_json(&s));
    }

    #[test]
    fn forge_requests_parse_or_refuse_any_json(v in json_value()) {
        let _ = bounded("ForgeRequest::from_json", || ForgeRequest::from_json(&v.to_string()));
    }

    #[test]
    fn forge_requests_round_trip(request in forge_request()) {
        let text = serde_json::to_string(&request).unwrap();
        let back = ForgeRequest::from_json(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        prop_assert_eq!(back, request);
    }
}

/// `"expectedOutput": null` expects the tool to return `null`; an absent
/// field expects nothing. (Until this was fixed, `null` read back as absent
/// and such a test case checked nothing.)
#[test]
fn null_expected_output_expects_null() {
    let r = ForgeRequest::from_json(
        r#"{"name":"n","description":"d","implementation":{"mode":"sandbox","code":""},
            "testCases":[{"input":{},"expectedOutput":null},{"input":{}}]}"#,
    )
    .unwrap();
    assert_eq!(r.test_cases[0].expected_output, Some(Value::Null));
    assert_eq!(r.test_cases[1].expected_output, None);
    let back = ForgeRequest::from_json(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
}

// ---- artifact manifest -----------------------------------------------------------

proptest! {
    #![proptest_config(config(300))]

    /// What `embed` writes, `split` reads back exactly.
    #[test]
    fn manifests_round_trip(m in manifest()) {
        let component = empty_component();
        let bytes = artifact::embed(&component, &m).unwrap();
        let (back, rest) = artifact::split(&bytes).unwrap_or_else(|e| panic!("{e}"));
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(rest, &component[..]);
        prop_assert_eq!(back.to_canonical_json(), m.to_canonical_json());
    }

    /// Any section content is read as a manifest only when it is the
    /// canonical JSON of one; otherwise a typed error.
    #[test]
    fn any_manifest_section_is_read_or_refused(data in prop_oneof![
        text(),
        json_value().prop_map(|v| v.to_string()),
        json_value().prop_map(|v| canonical_json(&v)),
        manifest().prop_map(|m| m.to_canonical_json()),
        manifest().prop_map(|m| serde_json::to_string_pretty(&m).unwrap()),
    ]) {
        let bytes = with_custom_section(&empty_component(), artifact::MANIFEST_SECTION, data.as_bytes());
        match bounded("artifact::split", || artifact::split(&bytes)) {
            Ok((m, _)) => prop_assert_eq!(m.to_canonical_json(), data),
            Err(
                ArtifactError::Malformed(_)
                | ArtifactError::NotCanonical
                | ArtifactError::UnknownFormat(_)
                | ArtifactError::ManifestTooLarge(_),
            ) => {}
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    /// Arbitrary bytes, and valid artifacts cut or with a byte changed:
    /// never a panic.
    #[test]
    fn damaged_artifacts_are_refused_without_panicking(
        m in manifest(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        noise in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let bytes = artifact::embed(&empty_component(), &m).unwrap();
        let _ = bounded("split noise", || artifact::split(&noise));
        let _ = bounded("split cut", || artifact::split(&bytes[..cut.index(bytes.len())]));
        let mut flipped = bytes.clone();
        let at = flip.index(flipped.len());
        flipped[at] = byte;
        let _ = bounded("split flipped", || artifact::split(&flipped));
        let _ = artifact::world(&flipped);
    }
}

/// A component with one more custom section at its end.
fn with_custom_section(component: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
    fn leb(out: &mut Vec<u8>, mut n: usize) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(&mut body, name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(data);
    let mut out = component.to_vec();
    out.push(0);
    leb(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}

// ---- canonical JSON ---------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    /// Canonical JSON reads back to the same value, is a fixed point, has
    /// sorted keys and no whitespace outside strings.
    #[test]
    fn canonical_json_round_trips(v in json_value()) {
        let text = canonical_json(&v);
        let back: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        prop_assert_eq!(&back, &v, "{}", text);
        prop_assert_eq!(canonical_json(&back), text.clone());
        let reserialized = serde_json::to_string(&back).unwrap();
        prop_assert_eq!(reserialized.len(), text.len(), "no extra whitespace");
        fn sorted(v: &Value) -> bool {
            match v {
                Value::Object(m) => {
                    let keys: Vec<&String> = m.keys().collect();
                    keys.windows(2).all(|w| w[0] <= w[1]) && m.values().all(sorted)
                }
                Value::Array(a) => a.iter().all(sorted),
                _ => true,
            }
        }
        let ordered: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(sorted(&ordered), "{}", text);
    }
}

// ---- policy: TOML, domain rules, URL check ---------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn policy_toml_parses_or_is_a_typed_refusal(doc in prop_oneof![text(), policy_doc()]) {
        if let Ok(p) = bounded("HostPolicy::from_toml", || HostPolicy::from_toml(&doc)) {
            // What parsed is usable: every rule prints and parses back.
            for r in &p.fetch.rules {
                prop_assert_eq!(&DomainRule::parse(&r.to_string()).unwrap(), r);
            }
            prop_assert!(p.fetch.max_url_bytes > 0);
        }
    }

    /// A rule that parses prints in a normalized form that parses back to
    /// the same rule (and prints the same again).
    #[test]
    fn domain_rules_round_trip(s in rule_text()) {
        match bounded("DomainRule::parse", || DomainRule::parse(&s)) {
            Ok(rule) => {
                let shown = rule.to_string();
                let again = DomainRule::parse(&shown).unwrap_or_else(|e| panic!("{s:?} -> {shown:?}: {e}"));
                prop_assert_eq!(&again, &rule);
                prop_assert_eq!(again.to_string(), shown);
            }
            // A refusal names the rule as written.
            Err(e) => prop_assert!(e.to_string().contains(&format!("\"{s}\"")), "{e}"),
        }
    }

    /// Any URL is allowed or refused with a reason; an allowed one is
    /// short enough, has a DNS-name or IP host, no fragment, a rule for its
    /// host, and passes the check again as sent (the check is a fixed point).
    #[test]
    fn the_url_check_is_total_and_its_output_is_checked(raw in url_text()) {
        let policy = fetch_policy();
        match bounded("check_url", || policy.check_url(&raw)) {
            Ok(c) => {
                prop_assert!(raw.len() <= policy.max_url_bytes);
                prop_assert!(c.url.fragment().is_none(), "{}", c.url);
                prop_assert!(c.url.username().is_empty() && c.url.password().is_none());
                if let HostKind::Domain(d) = &c.host {
                    prop_assert_eq!(check_dns_name(d), Ok(()), "{}", d);
                    prop_assert_eq!(c.url.host_str(), Some(d.as_str()));
                }
                let again = policy.check_url(c.url.as_str()).unwrap_or_else(|e| panic!("{raw:?} -> {}: {e}", c.url));
                prop_assert_eq!(again, c);
            }
            Err(e) => {
                let message = e.to_string();
                prop_assert!(!message.is_empty());
                // Quoted tool text is shortened; the reason is whole.
                prop_assert!(message.chars().count() < 1200, "{}", message);
                if let FetchDenied::UrlTooLong { bytes, limit } = e {
                    prop_assert_eq!(bytes, raw.len());
                    prop_assert_eq!(limit, policy.max_url_bytes);
                }
            }
        }
    }
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

// ---- MCP JSON-RPC framing ---------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    /// Any line is a message or a rejection with a JSON-RPC error code and
    /// an id that is null, a string or a number.
    #[test]
    fn any_line_is_a_message_or_a_typed_rejection(line in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        text().prop_map(String::into_bytes),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        (prop::option::of(json_value()), prop::option::of(json_value()), prop::option::of(json_value()))
            .prop_map(|(id, method, params)| {
                let mut o = json!({"jsonrpc": "2.0"});
                if let Some(v) = id { o["id"] = v; }
                if let Some(v) = method { o["method"] = v; }
                if let Some(v) = params { o["params"] = v; }
                o.to_string().into_bytes()
            }),
    ]) {
        match bounded("parse_message", || jsonrpc::parse_message(&line)) {
            Ok(_) => {}
            Err(rejected) => {
                prop_assert!(
                    [jsonrpc::PARSE_ERROR, jsonrpc::INVALID_REQUEST].contains(&rejected.error.code),
                    "{rejected:?}"
                );
                prop_assert!(rejected.id.is_null() || rejected.id.is_string() || rejected.id.is_number());
            }
        }
    }

    /// A well-formed request parses to exactly its id, method and params.
    #[test]
    fn well_formed_requests_parse_exactly(
        id in prop_oneof![any::<i64>().prop_map(|n| json!(n)), text().prop_map(Value::String)],
        method in text(),
        params in prop::option::of(prop::collection::vec((text(), json_value()), 0..3)
            .prop_map(|kv| Value::Object(kv.into_iter().collect()))),
    ) {
        let mut o = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = &params { o["params"] = p.clone(); }
        let parsed = jsonrpc::parse_message(o.to_string().as_bytes()).unwrap();
        prop_assert_eq!(parsed, Incoming::Request { id, method, params });
    }

    /// Reading frames from any byte stream, through any buffer size: each
    /// line is at most `cap` bytes and newline-free, over-long lines are
    /// reported with their length, and every byte is accounted for.
    #[test]
    fn frames_respect_the_cap_and_account_for_every_byte(
        input in prop::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), Just(b'{'), any::<u8>()], 0..400),
        cap in 0usize..64,
        buffer in 1usize..32,
    ) {
        let mut reader = BufReader::with_capacity(buffer, &input[..]);
        let mut accounted = 0usize;
        let mut frames = 0usize;
        loop {
            frames += 1;
            prop_assert!(frames <= input.len() + 2, "no progress");
            match jsonrpc::read_frame(&mut reader, cap).unwrap() {
                Frame::Eof => break,
                Frame::Line(line) => {
                    prop_assert!(line.len() <= cap);
                    prop_assert!(!line.contains(&b'\n'));
                    accounted += line.len();
                }
                Frame::TooLarge { bytes } => {
                    prop_assert!(bytes > cap);
                    accounted += bytes;
                }
            }
        }
        // Every byte is in a frame, a newline, or a stripped `\r`.
        let newlines = input.iter().filter(|&&b| b == b'\n').count();
        let crs = input.iter().filter(|&&b| b == b'\r').count();
        prop_assert!(accounted + newlines <= input.len());
        prop_assert!(accounted + newlines + crs >= input.len());
    }
}

// ---- static check -----------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    /// The lexer never panics and never hangs; every finding has a position
    /// inside the source.
    #[test]
    fn the_static_check_is_total(source in js_soup()) {
        let lines = source.split('\n').count() as u32 + source.matches('\u{2028}').count() as u32 + source.matches('\r').count() as u32;
        if let Err(e) = bounded("static_check::check", || static_check::check(&source)) {
            for b in &e.0 {
                prop_assert!(b.line >= 1 && b.line <= lines, "{b:?} in {source:?}");
                prop_assert!(b.column >= 1, "{b:?}");
            }
        }
        let _ = bounded("used_capabilities", || static_check::used_capabilities(&source));
    }

    /// A blocked call after any complete line comment is still found.
    #[test]
    fn a_blocked_call_after_a_comment_is_found(comment in "[^\n\r\u{2028}\u{2029}]{0,40}") {
        let source = format!("// {comment}\neval('1');\n");
        let err = static_check::check(&source).expect_err("eval must be refused");
        prop_assert!(err.0.iter().any(|b| b.api == "eval" && b.line == 2), "{err:?}");
    }
}
