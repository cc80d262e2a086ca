//! The forge's VALIDATE stage: everything that can be refused before a
//! build, in one pass over the request.
//!
//! Stateless checks ([`check`]), in order: implementation mode, name,
//! description, both schemas, allowlist against the host policy, source
//! size, static check, test-case count (compose: the steps parse, their
//! mappings compile, their import names do not clash, the 1 MiB cap).
//!
//! Checks that read the registry ([`check_request`]) see it only through a
//! [`RegistryView`], read-only and scoped to the caller: a compose request
//! without an `outputSchema` inherits its last step's; the name is free and
//! the session and agent limits leave room ([`check_occupancy`]); every
//! compose step's tool is callable by the caller and is pinned by its
//! artifact's blake3; no compose cycle.

use std::borrow::Cow;

use super::config::{ForgeConfig, MAX_DESCRIPTION_BYTES, MAX_NAME_LEN, MAX_TEST_CASES};
use super::error::ValidateError;
use super::schema::ToolSchemas;
use serde_json::Value;

use temper_compose::CompiledSpec;
use temper_policy::{Grants, HostPolicy};
use temper_runtime::artifact::{ArtifactManifest, CallRef, StepRef};
use temper_runtime::capabilities::tool_calls::{NEVER_CALLABLE, tool_grant};
use temper_runtime::id::ArtifactId;
use temper_runtime::request::{ForgeRequest, Implementation};
use temper_runtime::runtime::MAX_SOURCE_BYTES;
use temper_store::{StoreError, Tier};

/// Names no forged tool may take (the MCP meta-tool).
pub const RESERVED_NAMES: &[&str] = &["forge_tool"];

/// A sandbox request that passed the stateless checks.
#[derive(Debug)]
pub struct Validated {
    /// Both schemas, compiled.
    pub schemas: ToolSchemas,
    /// What the tool will be granted (allowlist ∩ host policy), parsed once.
    pub grants: Grants,
    /// The tools it may call (its `tool:NAME` entries), sorted.
    pub tool_calls: Vec<String>,
    /// Those tools, pinned (filled by [`check_request`]; empty after the
    /// stateless [`check`]).
    pub call_refs: Vec<CallRef>,
}

/// A compose request that passed the checks.
#[derive(Debug)]
pub struct ValidatedCompose {
    /// The steps, parsed and their mappings compiled.
    pub spec: CompiledSpec,
    /// Both schemas, compiled.
    pub schemas: ToolSchemas,
    /// Each step's tool, pinned (filled by [`check_request`]; empty after
    /// the stateless [`check`]).
    pub refs: Vec<StepRef>,
}

/// A request of either mode that passed the checks.
#[derive(Debug)]
pub enum Checked {
    /// Agent JavaScript.
    Sandbox(Validated),
    /// A pipeline of existing tools.
    Compose(ValidatedCompose),
}

/// A tool as the caller would call it: its artifact and manifest.
#[derive(Debug, Clone)]
pub struct ViewedTool {
    /// The artifact's blake3.
    pub artifact: ArtifactId,
    /// Its manifest.
    pub manifest: ArtifactManifest,
}

/// What VALIDATE may read of the registry, for one caller (an agent in a
/// session): read-only, so validation never changes what it checks.
pub trait RegistryView {
    /// The agent and the session asking (for messages).
    fn caller(&self) -> (&str, &str);
    /// The tool `name` as the caller would call it (session tier, then the
    /// agent's, then shared); `None` when there is none.
    fn tool(&self, name: &str) -> Result<Option<ViewedTool>, StoreError>;
    /// The output schema of the host-native tool `name`, if this host has
    /// one.
    fn native_output_schema(&self, name: &str) -> Option<Value>;
    /// How full the caller's tiers are, and where `name` is taken.
    fn occupancy(&self, name: &str) -> Result<Occupancy, StoreError>;
}

/// A request that passed VALIDATE: the request as it will be built (a
/// compose request may have inherited its `outputSchema`) and what the
/// checks produced.
#[derive(Debug)]
pub struct ValidRequest<'r> {
    /// The request, possibly with an inherited `outputSchema`.
    pub request: Cow<'r, ForgeRequest>,
    /// The checks' results.
    pub checked: Checked,
}

/// VALIDATE, whole, for a request to forge into the session tier: the
/// stateless checks, then the checks that read `view` (see the module
/// docs).
pub fn check_request<'r>(
    request: &'r ForgeRequest,
    policy: &HostPolicy,
    config: &ForgeConfig,
    view: &dyn RegistryView,
) -> Result<ValidRequest<'r>, ValidateError> {
    check_step_tools_exist(request, view)?;
    let request = with_inherited_output_schema(request, view);
    let mut checked = check(&request, policy)?;
    let (agent, session) = view.caller();
    check_occupancy(
        &request.name,
        agent,
        session,
        Tier::Session,
        view.occupancy(&request.name)?,
        config,
    )?;
    match (&mut checked, &request.implementation) {
        (Checked::Compose(v), Implementation::Compose { steps }) => {
            v.refs = pin_steps(&v.spec, steps, view)?;
            temper_compose::check_cycles(&request.name, &v.spec.tools(), |tool| {
                callees_of(tool, view)
            })?;
        }
        (Checked::Sandbox(v), Implementation::Sandbox { .. }) if !v.tool_calls.is_empty() => {
            v.call_refs = pin_calls(&request.name, &v.tool_calls, view)?;
        }
        _ => {}
    }
    Ok(ValidRequest { request, checked })
}

/// The tools a registered tool reaches directly: a compose tool's steps, a
/// sandbox tool's calls (`None`: neither, or not registered).
fn callees_of(tool: &str, view: &dyn RegistryView) -> Option<Vec<String>> {
    let m = view.tool(tool).ok()??.manifest;
    let mut callees: Vec<String> = m.steps.iter().map(|s| s.tool.clone()).collect();
    callees.extend(m.calls.iter().map(|c| c.tool.clone()));
    (!callees.is_empty()).then_some(callees)
}

/// Pins each tool a sandbox tool `name` calls, as compose steps are pinned:
/// a registered tool the caller can call by its artifact's blake3, a
/// host-native (or hub) one by name; any other is refused naming it, as is
/// a call that would come back to `name` (a cycle, where the registry shows
/// it).
fn pin_calls(
    name: &str,
    tools: &[String],
    view: &dyn RegistryView,
) -> Result<Vec<CallRef>, ValidateError> {
    let mut refs = Vec::with_capacity(tools.len());
    for tool in tools {
        let refuse = |message: String| ValidateError::ToolCall {
            tool: tool.clone(),
            message,
        };
        let blake3 = match view.tool(tool) {
            Ok(Some(t)) => Some(t.artifact.to_string()),
            Ok(None) if view.native_output_schema(tool).is_some() => None,
            Ok(None) => return Err(refuse(not_callable(tool, view))),
            Err(e) => return Err(refuse(e.to_string())),
        };
        refs.push(CallRef {
            tool: tool.clone(),
            blake3,
        });
    }
    temper_compose::check_cycles(name, tools, |tool| callees_of(tool, view))?;
    Ok(refs)
}

/// Splits an allowlist into its capabilities and the tools it lets the
/// tool call (`tool:NAME`, sorted, no duplicates). A name that is empty,
/// never callable from code, or the tool's own is refused.
pub fn split_tool_grants(
    name: &str,
    allowlist: &[String],
) -> Result<(Vec<String>, Vec<String>), ValidateError> {
    let mut capabilities = Vec::new();
    let mut tools = std::collections::BTreeSet::new();
    for entry in allowlist {
        let Some(tool) = tool_grant(entry) else {
            capabilities.push(entry.clone());
            continue;
        };
        let refuse = |message: &str| ValidateError::ToolCall {
            tool: tool.to_string(),
            message: message.to_string(),
        };
        if tool.is_empty() {
            return Err(refuse("names no tool"));
        }
        if NEVER_CALLABLE.contains(&tool) {
            return Err(refuse("is never callable from code"));
        }
        if tool == name {
            return Err(refuse(
                "a tool may not call itself (a cycle: tool calls nest at most 8 deep at run time)",
            ));
        }
        tools.insert(tool.to_string());
    }
    Ok((capabilities, tools.into_iter().collect()))
}

/// A compose request without an `outputSchema` takes its last step's (the
/// last step's output is the tool's output, already checked against that
/// schema); any other request is returned as is.
fn with_inherited_output_schema<'r>(
    request: &'r ForgeRequest,
    view: &dyn RegistryView,
) -> Cow<'r, ForgeRequest> {
    let Implementation::Compose { steps } = &request.implementation else {
        return Cow::Borrowed(request);
    };
    if !request.output_schema.is_null() {
        return Cow::Borrowed(request);
    }
    let Some(tool) = steps
        .last()
        .and_then(|s| s.get("tool"))
        .and_then(Value::as_str)
    else {
        return Cow::Borrowed(request);
    };
    let schema = match view.tool(tool) {
        Ok(Some(t)) => Some(t.manifest.output_schema),
        _ => view.native_output_schema(tool),
    };
    match schema {
        Some(schema) => {
            let mut owned = request.clone();
            owned.output_schema = schema;
            Cow::Owned(owned)
        }
        None => Cow::Borrowed(request),
    }
}

/// A compose step naming a tool the caller cannot call is refused first,
/// naming the step and the tool: otherwise a missing last step would
/// surface as a missing `outputSchema` (it could not be inherited).
fn check_step_tools_exist(
    request: &ForgeRequest,
    view: &dyn RegistryView,
) -> Result<(), ValidateError> {
    let Implementation::Compose { steps } = &request.implementation else {
        return Ok(());
    };
    for (index, step) in steps.iter().enumerate() {
        let Some(tool) = step.get("tool").and_then(Value::as_str) else {
            continue; // the spec checks name this
        };
        if matches!(view.tool(tool), Ok(None)) && view.native_output_schema(tool).is_none() {
            let name = step.get("name").and_then(Value::as_str).unwrap_or("");
            return Err(ValidateError::Step {
                step: format!("steps[{index}] ({name:?})"),
                message: not_callable(tool, view),
            });
        }
    }
    Ok(())
}

fn not_callable(tool: &str, view: &dyn RegistryView) -> String {
    let (agent, session) = view.caller();
    format!(
        "tool {tool:?} is not callable by agent {agent:?} in session {session:?} (not in its session, its agent tier, the shared tier, nor a host-native tool)"
    )
}

/// Pins each step's tool: a registered tool by its artifact's blake3, a
/// host-native one by name; any other is refused naming the step.
fn pin_steps(
    spec: &CompiledSpec,
    steps: &[Value],
    view: &dyn RegistryView,
) -> Result<Vec<StepRef>, ValidateError> {
    let mut refs = Vec::with_capacity(spec.steps.len());
    for (index, step) in spec.steps.iter().enumerate() {
        let refuse = |message: String| ValidateError::Step {
            step: format!("steps[{index}] ({:?})", step.name),
            message,
        };
        let blake3 = match view.tool(&step.tool) {
            Ok(Some(t)) => Some(t.artifact.to_string()),
            Ok(None) if view.native_output_schema(&step.tool).is_some() => None,
            Ok(None) => return Err(refuse(not_callable(&step.tool, view))),
            Err(e) => return Err(refuse(e.to_string())),
        };
        refs.push(StepRef {
            name: step.name.clone(),
            tool: step.tool.clone(),
            blake3,
            input_mapping: steps[index]
                .get("inputMapping")
                .cloned()
                .unwrap_or(Value::Null),
        });
    }
    Ok(refs)
}

/// Runs the stateless checks (see the module docs) for either mode.
pub fn check(request: &ForgeRequest, policy: &HostPolicy) -> Result<Checked, ValidateError> {
    match &request.implementation {
        Implementation::Sandbox { .. } => validate(request, policy).map(Checked::Sandbox),
        Implementation::Compose { steps } => {
            let schemas = check_common(request)?;
            // The pipeline rides in the adapter as data: the source cap.
            let size = serde_json::to_string(steps).map_or(usize::MAX, |s| s.len());
            if size > MAX_SOURCE_BYTES {
                return Err(ValidateError::Compose(format!(
                    "the steps are {size} bytes of JSON, over the {MAX_SOURCE_BYTES}-byte limit"
                )));
            }
            let spec = temper_compose::compile_steps(steps)?;
            let names: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
            temper_compose::adapter::import_names(&names)
                .map_err(|e| ValidateError::Compose(e.to_string()))?;
            Ok(Checked::Compose(ValidatedCompose {
                spec,
                schemas,
                refs: Vec::new(),
            }))
        }
    }
}

/// Runs the stateless checks of a sandbox request (see the module docs).
pub fn validate(request: &ForgeRequest, policy: &HostPolicy) -> Result<Validated, ValidateError> {
    let (code, allowlist) = match &request.implementation {
        Implementation::Sandbox { code, allowlist } => (code.as_str(), allowlist.as_slice()),
        Implementation::Compose { .. } => {
            return Err(ValidateError::Compose(
                "a compose request has no source to validate as sandbox code".into(),
            ));
        }
    };
    let schemas = check_common(request)?;
    let (capabilities, tool_calls) = split_tool_grants(&request.name, allowlist)?;
    let grants = policy.grants(&capabilities)?;
    if code.len() > MAX_SOURCE_BYTES {
        return Err(ValidateError::SourceTooLarge {
            actual: code.len(),
            limit: MAX_SOURCE_BYTES,
        });
    }
    temper_runtime::static_check::check(code)?;
    Ok(Validated {
        schemas,
        grants,
        tool_calls,
        call_refs: Vec::new(),
    })
}

/// The checks both modes share: name, description, schemas, test cases.
fn check_common(request: &ForgeRequest) -> Result<ToolSchemas, ValidateError> {
    check_name(&request.name)?;
    let description = request.description.trim();
    if description.is_empty() {
        return Err(ValidateError::Description(
            "is empty: say what the tool does".into(),
        ));
    }
    if request.description.len() > MAX_DESCRIPTION_BYTES {
        return Err(ValidateError::Description(format!(
            "is {} bytes, over the {MAX_DESCRIPTION_BYTES}-byte limit",
            request.description.len()
        )));
    }
    let schemas = ToolSchemas::compile(&request.input_schema, &request.output_schema)?;
    match request.test_cases.len() {
        0 => {
            return Err(ValidateError::TestCases(
                "is empty: at least one test case is required".into(),
            ));
        }
        n if n > MAX_TEST_CASES => {
            return Err(ValidateError::TestCases(format!(
                "has {n} cases, over the limit of {MAX_TEST_CASES}"
            )));
        }
        _ => {}
    }
    Ok(schemas)
}

/// snake_case ASCII, starting with a letter, at most [`MAX_NAME_LEN`]
/// characters, not reserved. Path characters can never pass.
pub fn check_name(name: &str) -> Result<(), ValidateError> {
    let refuse = |reason: &str| {
        Err(ValidateError::Name {
            name: name.to_string(),
            reason: reason.to_string(),
        })
    };
    if name.is_empty() {
        return refuse("is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return refuse(&format!("is longer than {MAX_NAME_LEN} characters"));
    }
    if name.contains(['/', '\\', '.', '\0']) {
        return refuse("contains path characters (`/`, `\\`, `.` or NUL)");
    }
    let mut chars = name.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !first_ok || !rest_ok {
        return refuse(
            "is not snake_case (lowercase ASCII letters, digits and `_`, starting with a letter)",
        );
    }
    if RESERVED_NAMES.contains(&name) {
        return refuse("is reserved");
    }
    Ok(())
}

/// How full the tiers are for the forging agent and session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occupancy {
    /// Tools in the session.
    pub session_tools: usize,
    /// Agent-tier tools the agent owns.
    pub agent_tools: usize,
    /// The tier of an existing tool with the requested name, if any.
    pub name_taken: Option<Tier>,
}

/// The stateful checks: the name is free in every tier the agent sees, the
/// session holds fewer than `maxSessionTools` tools, and the agent owns
/// fewer than `maxAgentTools` (a tool forged at the cap could never be
/// promoted).
pub fn check_occupancy(
    name: &str,
    agent: &str,
    session: &str,
    tier: Tier,
    occupancy: Occupancy,
    config: &ForgeConfig,
) -> Result<(), ValidateError> {
    if let Some(tier) = occupancy.name_taken {
        return Err(ValidateError::NameTaken {
            name: name.to_string(),
            tier,
        });
    }
    if tier == Tier::Session && occupancy.session_tools >= config.max_session_tools {
        return Err(ValidateError::SessionFull {
            session: session.to_string(),
            limit: config.max_session_tools,
        });
    }
    if tier != Tier::Shared && occupancy.agent_tools >= config.max_agent_tools {
        return Err(ValidateError::AgentFull {
            agent: agent.to_string(),
            limit: config.max_agent_tools,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
        let m =
            ArtifactManifest::sandbox(name, "d", &json!({}), &output_schema, &[], &[], OK, false);
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
        let valid =
            check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap();
        assert_eq!(valid.request.output_schema["title"], "upper");
        let Checked::Compose(c) = valid.checked else {
            panic!("a compose request validates as compose");
        };
        assert_eq!(c.refs.len(), 2);
        assert_eq!(c.refs[0].blake3, None, "a native step is pinned by name");
        assert_eq!(c.refs[1].blake3.as_deref(), Some(pinned.as_str()));

        // Ending on the native step inherits its schema instead.
        let r = compose_request("pipeline", &["upper", "web_search"]);
        let valid =
            check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap();
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
        let err =
            check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap_err();
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
        let valid =
            check_request(&r, &HostPolicy::deny_all(), &ForgeConfig::default(), &v).unwrap();
        assert!(matches!(valid.checked, Checked::Sandbox(_)));
    }
}
