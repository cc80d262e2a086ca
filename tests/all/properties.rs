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
//!
//! This module keeps the case counts, the time bound and the generators
//! several parsers share; each parser's properties are in a submodule.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};
use temper::request::TestCase;

mod canonical;
mod cassette;
mod framing;
mod lexer;
mod manifest;
mod policy;
mod request;

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
        ..Default::default()
    })
}
