use super::*;
use std::time::Duration;

fn metrics(max_tools: usize) -> Arc<Metrics> {
    Metrics::new(max_tools, "0.1.0", "abc123")
}

/// The value of the sample `line_start` (a metric name with its labels,
/// as encoded) in `text`.
fn sample(text: &str, line_start: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line_start)?.strip_prefix(' '))
        .map(|v| v.parse().expect("a number"))
}

#[test]
fn a_call_counts_by_tool_tier_and_outcome_with_its_error_kind_and_latency() {
    let m = metrics(10);
    let t = m.tool("add");
    m.record_call(&t, Tier::Session, None, Duration::from_micros(40));
    m.record_call(&t, Tier::Session, None, Duration::from_micros(40));
    m.record_call(
        &t,
        Tier::Agent,
        Some(ErrorKind::Memory),
        Duration::from_millis(3),
    );
    let text = m.encode();
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="add",tier="session",outcome="ok"}"#
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="add",tier="agent",outcome="error"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_errors_total{tool="add",kind="memory"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_call_duration_seconds_count{tool="add"}"#
        ),
        Some(3.0)
    );
    // 40 µs falls in the 50 µs bucket, not the 25 µs one.
    for (le, n) in [
        ("2.5e-05", 0.0),
        ("5e-05", 2.0),
        ("0.005", 3.0),
        ("+Inf", 3.0),
    ] {
        assert_eq!(
            sample(
                &text,
                &format!(r#"temper_tool_call_duration_seconds_bucket{{tool="add",le="{le}"}}"#)
            ),
            Some(n),
            "{le}: {text}"
        );
    }
    // No series for a tier the tool never ran in.
    assert!(!text.contains(r#"tier="shared""#), "{text}");
    assert_eq!(
        sample(&text, r#"temper_build_info{version="0.1.0",shim="abc123"}"#),
        Some(1.0)
    );
}

#[test]
fn tools_past_the_cap_fold_into_other() {
    let m = metrics(3);
    for i in 0..10 {
        let t = m.tool(&format!("tool{i}"));
        m.record_call(&t, Tier::Session, None, Duration::from_micros(5));
    }
    // A tool seen before the cap keeps its own series.
    let t = m.tool("tool1");
    assert_eq!(t.label(), "tool1");
    m.record_call(&t, Tier::Session, None, Duration::from_micros(5));
    let text = m.encode();
    let tools: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("temper_tool_calls_total{"))
        .filter_map(|l| l.split("tool=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(
        tools.into_iter().collect::<Vec<_>>(),
        ["_other", "tool0", "tool1", "tool2"]
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="_other",tier="session",outcome="ok"}"#
        ),
        Some(7.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_tool_calls_total{tool="tool1",tier="session",outcome="ok"}"#
        ),
        Some(2.0)
    );
}

#[test]
fn every_error_kind_has_its_label() {
    let m = metrics(10);
    let t = m.tool("t");
    for kind in ErrorKind::ALL {
        m.record_call(&t, Tier::Shared, Some(kind), Duration::from_micros(1));
    }
    let text = m.encode();
    for kind in [
        "timeout",
        "memory",
        "output_too_large",
        "capability_denied",
        "bad_input",
        "bad_output",
        "js",
        "trap",
        "busy",
        "upstream",
        "callee",
        "internal",
    ] {
        assert_eq!(
            sample(
                &text,
                &format!(r#"temper_tool_errors_total{{tool="t",kind="{kind}"}}"#)
            ),
            Some(1.0),
            "{kind}"
        );
    }
}

#[test]
fn hostile_label_values_stay_bounded_and_escaped() {
    let m = metrics(2);
    // A client's method names and a tool's capability names are folded.
    for i in 0..50 {
        m.mcp_request(&format!("x/{i}"), "http");
        m.capability_denied(&format!("tool:callee{i}"));
    }
    m.mcp_request("tools/call", "stdio");
    m.capability_denied("fetch");
    m.capability_denied("made-up");
    // A tool name with quotes and a newline is escaped, not a new line.
    let t = m.tool("evil\"} 1\nfake_metric 1");
    m.record_call(&t, Tier::Session, None, Duration::from_micros(1));
    let text = m.encode();
    assert_eq!(
        sample(
            &text,
            r#"temper_mcp_requests_total{method="_other",transport="http"}"#
        ),
        Some(50.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_mcp_requests_total{method="tools/call",transport="stdio"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_capability_denials_total{capability="tool"}"#
        ),
        Some(50.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_capability_denials_total{capability="fetch"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_capability_denials_total{capability="_other"}"#
        ),
        Some(1.0)
    );
    assert!(
        !text.lines().any(|l| l.starts_with("fake_metric")),
        "{text}"
    );
}

#[test]
fn forges_count_by_outcome_and_stage() {
    let m = metrics(10);
    m.record_forge(None, Duration::from_millis(300));
    m.record_forge(Some("test"), Duration::from_millis(100));
    m.record_forge(Some("test"), Duration::from_millis(100));
    m.upstream_call("search", true);
    m.upstream_call("search", false);
    let text = m.encode();
    assert_eq!(
        sample(
            &text,
            r#"temper_forge_total{outcome="ok",stage="register"}"#
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_forge_total{outcome="refused",stage="test"}"#
        ),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "temper_forge_duration_seconds_count"),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"temper_upstream_calls_total{upstream="search",outcome="error"}"#
        ),
        Some(1.0)
    );
}

#[test]
fn samplers_set_gauges_at_scrape_time() {
    let m = metrics(10);
    let n = Arc::new(std::sync::atomic::AtomicUsize::new(3));
    let seen = n.clone();
    m.add_sampler(Box::new(move |m| {
        let v = seen.load(std::sync::atomic::Ordering::Relaxed);
        m.set_pool("warm", v);
        m.set_cache("names", v * 2);
    }));
    assert_eq!(
        sample(&m.encode(), r#"temper_pool_instances{state="warm"}"#),
        Some(3.0)
    );
    n.store(5, std::sync::atomic::Ordering::Relaxed);
    let text = m.encode();
    assert_eq!(
        sample(&text, r#"temper_pool_instances{state="warm"}"#),
        Some(5.0)
    );
    assert_eq!(
        sample(&text, r#"temper_cache_entries{cache="names"}"#),
        Some(10.0)
    );
}
