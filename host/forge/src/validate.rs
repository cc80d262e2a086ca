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

use super::builtins::BUILTIN_TOOL_NAMES;
use super::config::{ForgeConfig, MAX_DESCRIPTION_BYTES, MAX_NAME_LEN, MAX_TEST_CASES};
use super::error::ValidateError;
use super::schema::ToolSchemas;
use serde_json::Value;

use temper_compose::CompiledSpec;
use temper_policy::{Grants, HostPolicy};
use temper_runtime::artifact::{ArtifactManifest, CallRef, StepRef};
use temper_runtime::capabilities::cassette::{Cassette, CassetteError};
use temper_runtime::capabilities::tool_calls::{NEVER_CALLABLE, tool_grant};
use temper_runtime::id::ArtifactId;
use temper_runtime::request::{ForgeRequest, Implementation};
use temper_runtime::runtime::MAX_SOURCE_BYTES;
use temper_store::{StoreError, Tier};

/// Names no forged or imported tool may take: the built-in tools'
/// ([`BUILTIN_TOOL_NAMES`]).
pub const RESERVED_NAMES: &[&str] = BUILTIN_TOOL_NAMES;

/// The refusal reason for a built-in's name (an instruction).
pub const RESERVED_REASON: &str = "is reserved by a built-in tool; choose another name";
/// The refusal reason for a hub tool's name the caller sees.
pub const HUB_TAKEN_REASON: &str = "is taken by a hub tool; choose another name";
/// The refusal reason for a host-native tool's name.
pub const NATIVE_TAKEN_REASON: &str = "is taken by a host-native tool; choose another name";

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
    /// Whether `name` is a host-native tool the caller sees: `Some(true)`
    /// for a hub tool, `Some(false)` for an embedder's, `None` if none.
    fn native_is_hub_tool(&self, _name: &str) -> Option<bool> {
        None
    }
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
    if let Some(hub) = view.native_is_hub_tool(&request.name) {
        return Err(ValidateError::Name {
            name: request.name.clone(),
            reason: if hub {
                HUB_TAKEN_REASON
            } else {
                NATIVE_TAKEN_REASON
            }
            .into(),
        });
    }
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
    for (index, case) in request.test_cases.iter().enumerate() {
        if let Some(given) = &case.cassette {
            let label = format!("testCases[{index}].cassette");
            match Cassette::from_json(&label, given) {
                Ok(_) => {}
                Err(CassetteError::Format { message, .. }) => {
                    return Err(ValidateError::TestCases(format!(
                        "[{index}].cassette: {message}"
                    )));
                }
                Err(e) => return Err(ValidateError::TestCases(e.to_string())),
            }
        }
        let Some(expect) = &case.expect_error else {
            continue;
        };
        let at = format!("[{index}]");
        if let Some(e) = super::request_shape::expect_error_error(&at, expect) {
            return Err(ValidateError::TestCases(e));
        }
        if case.expected_output.is_some() {
            return Err(ValidateError::TestCases(format!(
                "{at} has both expectedOutput and expectError: give one"
            )));
        }
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
        return refuse(RESERVED_REASON);
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
            closest: None,
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
mod tests;
