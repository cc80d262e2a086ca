use super::*;
use serde_json::json;
use temper_runtime::artifact::Mode;
use temper_runtime::request::TestCase;

fn request(code: &str, allowlist: &[&str]) -> ForgeRequest {
    ForgeRequest {
        name: "add_numbers".into(),
        description: "Adds two numbers.".into(),
        input_schema: json!({"type": "object"}),
        output_schema: json!({"type": "object"}),
        implementation: Implementation::Sandbox {
            code: code.into(),
            allowlist: allowlist.iter().map(|s| s.to_string()).collect(),
        },
        test_cases: vec![TestCase {
            input: json!({}),
            expected_output: None,
            ..Default::default()
        }],
    }
}

const OK: &str = "function execute(i) { return {}; }";

#[test]
fn names() {
    for good in ["a", "parse_csv", "x1_y2", &"a".repeat(MAX_NAME_LEN)] {
        check_name(good).unwrap();
    }
    for (bad, why) in [
        ("", "empty"),
        ("../etc/passwd", "path characters"),
        ("a/b", "path characters"),
        ("a\\b", "path characters"),
        ("a.b", "path characters"),
        ("ParseCsv", "snake_case"),
        ("parse-csv", "snake_case"),
        ("1abc", "snake_case"),
        ("_abc", "snake_case"),
        ("naïve", "snake_case"),
        ("forge_tool", "reserved"),
        (&"a".repeat(MAX_NAME_LEN + 1), "longer than"),
    ] {
        let err = check_name(bad).unwrap_err().to_string();
        assert!(err.contains(why), "{bad:?}: {err}");
        assert!(err.starts_with("validate: name"), "{err}");
    }
}

#[test]
fn each_check_names_what_failed() {
    let policy = HostPolicy::deny_all();
    validate(&request(OK, &[]), &policy).unwrap();

    let mut r = request(OK, &[]);
    r.description = "  ".into();
    assert!(matches!(
        validate(&r, &policy),
        Err(ValidateError::Description(_))
    ));

    let mut r = request(OK, &[]);
    r.output_schema = json!({"type": 12});
    let err = validate(&r, &policy).unwrap_err().to_string();
    assert!(
        err.starts_with("validate: outputSchema is not a valid JSON Schema"),
        "{err}"
    );

    let err = validate(&request(OK, &["fetch"]), &policy)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"fetch\"") && err.contains("not allowed by the host policy"),
        "{err}"
    );
    let err = validate(&request(OK, &["net"]), &policy)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown capability \"net\""), "{err}");
    let allowed = HostPolicy::deny_all().with_allow_crypto();
    let r = request(OK, &["crypto"]);
    let v = validate(&r, &allowed).unwrap();
    assert!(v.grants.crypto && !v.grants.fetch);

    let err = validate(
        &request("function execute() { return eval('1'); }", &[]),
        &policy,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("blocked API `eval` at 1:29"), "{err}");

    let mut r = request(OK, &[]);
    r.description = "x".repeat(MAX_DESCRIPTION_BYTES + 1);
    let err = validate(&r, &policy).unwrap_err().to_string();
    assert!(err.contains("over the 4096-byte limit"), "{err}");

    let mut r = request(OK, &[]);
    let case = r.test_cases[0].clone();
    r.test_cases = vec![case; MAX_TEST_CASES + 1];
    let err = validate(&r, &policy).unwrap_err().to_string();
    assert!(err.contains("has 65 cases, over the limit of 64"), "{err}");
    r.test_cases.truncate(MAX_TEST_CASES);
    validate(&r, &policy).unwrap();

    let r = request(&" ".repeat(MAX_SOURCE_BYTES + 1), &[]);
    assert!(matches!(
        validate(&r, &policy),
        Err(ValidateError::SourceTooLarge { .. })
    ));

    let mut r = request(OK, &[]);
    r.test_cases.clear();
    assert!(
        validate(&r, &policy)
            .unwrap_err()
            .to_string()
            .contains("at least one test case")
    );

    let mut r = request(OK, &[]);
    r.implementation = Implementation::Compose { steps: vec![] };
    let err = check(&r, &policy).unwrap_err().to_string();
    assert!(err.contains("at least one step"), "{err}");
    // Step names that clash as component import names.
    r.implementation = Implementation::Compose {
        steps: vec![
            json!({"name": "step_2", "tool": "a", "inputMapping": {}}),
            json!({"name": "step2", "tool": "b", "inputMapping": {}}),
        ],
    };
    let err = check(&r, &policy).unwrap_err().to_string();
    assert!(
        err.contains("steps[1] (\"step2\")") && err.contains("`step2`"),
        "{err}"
    );
    // The steps are capped like a source: 1 MiB of JSON.
    let big = |n: usize| Implementation::Compose {
        steps: vec![json!({"name": "a", "tool": "t", "inputMapping": {"x": "y".repeat(n)}})],
    };
    r.implementation = big(MAX_SOURCE_BYTES);
    let err = check(&r, &policy).unwrap_err().to_string();
    assert!(err.contains("over the 1048576-byte limit"), "{err}");
    r.implementation = big(MAX_SOURCE_BYTES - 100);
    assert!(matches!(check(&r, &policy), Ok(Checked::Compose(_))));
}

#[test]
fn occupancy_limits() {
    let cfg = ForgeConfig::default();
    let free = Occupancy {
        session_tools: 9,
        agent_tools: 49,
        name_taken: None,
    };
    check_occupancy("t", "a", "s", Tier::Session, free, &cfg).unwrap();
    let err = check_occupancy(
        "t",
        "a",
        "s",
        Tier::Session,
        Occupancy {
            session_tools: 10,
            ..free
        },
        &cfg,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("already holds 10 tools (maxSessionTools)"),
        "{err}"
    );
    let err = check_occupancy(
        "t",
        "a",
        "s",
        Tier::Session,
        Occupancy {
            agent_tools: 50,
            ..free
        },
        &cfg,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("already owns 50 tools (maxAgentTools)"),
        "{err}"
    );
    let err = check_occupancy(
        "t",
        "a",
        "s",
        Tier::Session,
        Occupancy {
            name_taken: Some(Tier::Shared),
            ..free
        },
        &cfg,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("already exists in the shared tier"), "{err}");

    // The session limit binds the session tier only; the agent limit
    // binds the session and agent tiers, not the shared one.
    let full = Occupancy {
        session_tools: 10,
        agent_tools: 50,
        name_taken: None,
    };
    let err = check_occupancy("t", "a", "s", Tier::Agent, full, &cfg).unwrap_err();
    assert!(matches!(err, ValidateError::AgentFull { .. }), "{err}");
    check_occupancy("t", "a", "s", Tier::Shared, full, &cfg).unwrap();
    let taken = Occupancy {
        name_taken: Some(Tier::Agent),
        ..full
    };
    assert!(check_occupancy("t", "a", "s", Tier::Shared, taken, &cfg).is_err());
}

/// A registry view over fixed data, for the checks that read one.
struct FakeView {
    tools: Vec<(String, ViewedTool)>,
    natives: Vec<(String, Value)>,
    occupancy: Occupancy,
}

impl RegistryView for FakeView {
    fn caller(&self) -> (&str, &str) {
        ("agent-a", "session-1")
    }
    fn tool(&self, name: &str) -> Result<Option<ViewedTool>, StoreError> {
        Ok(self
            .tools
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone()))
    }
    fn native_output_schema(&self, name: &str) -> Option<Value> {
        self.natives
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
    }
    fn occupancy(&self, _name: &str) -> Result<Occupancy, StoreError> {
        Ok(self.occupancy)
    }
}

fn sandbox_tool(name: &str, output_schema: Value) -> (String, ViewedTool) {
    let m = ArtifactManifest::sandbox(name, "d", &json!({}), &output_schema, &[], &[], OK, false);
    let artifact = ArtifactId::of(name.as_bytes());
    (
        name.to_string(),
        ViewedTool {
            artifact,
            manifest: m,
        },
    )
}

fn compose_request(name: &str, tools: &[&str]) -> ForgeRequest {
    let mut r = request(OK, &[]);
    r.name = name.into();
    r.output_schema = Value::Null;
    r.implementation = Implementation::Compose {
        steps: tools
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"name": format!("s{i}"), "tool": t, "inputMapping": {}}))
            .collect(),
    };
    r
}

fn view(tools: Vec<(String, ViewedTool)>) -> FakeView {
    FakeView {
        tools,
        natives: vec![(
            "web_search".into(),
            json!({"type": "object", "title": "native"}),
        )],
        occupancy: Occupancy {
            session_tools: 0,
            agent_tools: 0,
            name_taken: None,
        },
    }
}

#[test]
fn compose_steps_are_pinned_and_the_last_steps_schema_inherited() {
    let (name, upper) = sandbox_tool("upper", json!({"type": "object", "title": "upper"}));
    let pinned = upper.artifact.to_string();
    let v = view(vec![(name, upper)]);
    let r = compose_request("pipeline", &["web_search", "upper"]);
    let valid = check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap();
    assert_eq!(valid.request.output_schema["title"], "upper");
    let Checked::Compose(c) = valid.checked else {
        panic!("a compose request validates as compose");
    };
    assert_eq!(c.refs.len(), 2);
    assert_eq!(c.refs[0].blake3, None, "a native step is pinned by name");
    assert_eq!(c.refs[1].blake3.as_deref(), Some(pinned.as_str()));

    // Ending on the native step inherits its schema instead.
    let r = compose_request("pipeline", &["upper", "web_search"]);
    let valid = check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap();
    assert_eq!(valid.request.output_schema["title"], "native");
}

#[test]
fn a_step_the_caller_cannot_call_is_refused_naming_it() {
    let v = view(vec![]);
    let r = compose_request("pipeline", &["ghost", "web_search"]);
    let err = check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("steps[0] (\"s0\")")
            && err.contains(
                "\"ghost\" is not callable by agent \"agent-a\" in session \"session-1\""
            ),
        "{err}"
    );
}

/// The seed's `fetch_analyze_report` has no `outputSchema` and ends on
/// a tool this host lacks: the unknown tool is named, not the schema.
#[test]
fn an_unknown_last_step_is_named_before_the_missing_output_schema() {
    let v = view(vec![]);
    let r = compose_request("report", &["web_search", "http_request"]);
    let err = check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("steps[1] (\"s1\")") && err.contains("\"http_request\" is not callable"),
        "{err}"
    );
    assert!(!err.contains("outputSchema"), "{err}");
}

#[test]
fn a_compose_cycle_through_the_registry_is_refused() {
    // `loop_b` (registered) calls `loop_a`: forging `loop_a` over
    // `loop_b` would close the loop.
    let (name, mut b) = sandbox_tool("loop_b", json!({}));
    b.manifest.mode = Mode::Compose;
    b.manifest.steps = vec![StepRef {
        name: "s0".into(),
        tool: "loop_a".into(),
        blake3: None,
        input_mapping: json!({}),
    }];
    let v = view(vec![(name, b)]);
    let r = compose_request("loop_a", &["loop_b"]);
    let err = check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap_err();
    assert!(matches!(err, ValidateError::Cycle(_)), "{err}");
    assert!(
        err.to_string().contains("loop_a -> loop_b -> loop_a"),
        "{err}"
    );
}

#[test]
fn occupancy_is_read_through_the_view() {
    let mut v = view(vec![]);
    v.occupancy.name_taken = Some(Tier::Agent);
    let err = check_request(
        &request(OK, &[]),
        &HostPolicy::deny_all(),
        &ForgeConfig::default(),
        &v,
    )
    .unwrap_err();
    assert!(matches!(err, ValidateError::NameTaken { .. }), "{err}");
    v.occupancy.name_taken = None;
    v.occupancy.session_tools = ForgeConfig::default().max_session_tools;
    let err = check_request(
        &request(OK, &[]),
        &HostPolicy::deny_all(),
        &ForgeConfig::default(),
        &v,
    )
    .unwrap_err();
    assert!(matches!(err, ValidateError::SessionFull { .. }), "{err}");
    v.occupancy.session_tools = 0;
    let r = request(OK, &[]);
    let valid = check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap();
    assert!(matches!(valid.checked, Checked::Sandbox(_)));
}
