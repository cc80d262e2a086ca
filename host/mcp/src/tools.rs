//! The MCP view of Temper's tools: the `forge_tool` meta-tool (its
//! description, adapted from the seed's `ForgeToolMetaTool`, and its input
//! schema, the forge request), registered tools as MCP tool definitions, and
//! `tools/call` results.

use serde::Serialize;
use serde_json::{Value, json};

use temper_forge::ToolInfo;
use temper_forge::config::{MAX_DESCRIPTION_BYTES, MAX_NAME_LEN, MAX_TEST_CASES};
use temper_policy::{Capability, HostPolicy};

/// The meta-tool's name.
pub const FORGE_TOOL: &str = temper_forge::builtins::FORGE_TOOL;
/// The meta-tool that promotes a session tool to the caller's agent tier.
pub const PROMOTE_TOOL: &str = temper_forge::builtins::PROMOTE_TOOL;
/// The meta-tool that reports a visible tool's call statistics.
pub const STATS_TOOL: &str = temper_forge::builtins::TOOL_STATS;
/// The meta-tool that deletes a tool from the caller's session tier.
pub const DELETE_TOOL: &str = temper_forge::builtins::DELETE_TOOL;

/// The `delete_tool` definition.
pub fn delete_tool_definition() -> Value {
    json!({
        "name": DELETE_TOOL,
        "title": "Delete Tool",
        "description": "Delete a tool you forged in this session (session tier only), freeing \
            one of the session's slots for forge_tool. Agent-tier and shared tools stay.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "The session tool to delete" },
            },
            "required": ["name"],
        },
    })
}

/// The `forge_tool` definition for one caller: [`forge_tool_definition`]
/// with the session cap (`maxSessionTools`) and the slots left in the
/// caller's session stated, so an agent plans before it is refused.
pub fn forge_tool_definition_for(policy: &HostPolicy, max: usize, left: usize) -> Value {
    let mut def = forge_tool_definition(policy);
    if let Some(Value::String(d)) = def.get_mut("description") {
        d.push(' ');
        d.push_str(&session_cap_line(max, left));
    }
    def
}

/// `A session holds at most 10 tools (maxSessionTools); yours has 3 slots
/// left. delete_tool frees one; promote_tool moves a tool to your agent
/// tier.`
pub fn session_cap_line(max: usize, left: usize) -> String {
    format!(
        "A session holds at most {max} tools (maxSessionTools); yours has {left} {} left. \
         delete_tool frees one; promote_tool moves a tool with enough successful calls to your \
         agent tier.",
        if left == 1 { "slot" } else { "slots" }
    )
}

/// The `promote_tool` definition; `uses` is the successful calls a
/// promotion needs (the forge configuration's `promotionThreshold`).
pub fn promote_tool_definition(uses: u64) -> Value {
    json!({
        "name": PROMOTE_TOOL,
        "title": "Promote Tool",
        "description": format!("Promote a tool you forged in this session to your agent tier, so \
            that your later sessions can call it too. It needs at least {uses} successful calls \
            (calls from run_code and compose tools count; tool_stats shows them), a confident \
            forge verdict and the review panel's approval. `source` (optional) is the tool's \
            JavaScript when the host did not keep it."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "The session tool to promote" },
                "source": { "type": "string", "description": "Its source, if the host asks for it" },
            },
            "required": ["name"],
        },
    })
}

/// The `tool_stats` definition.
pub fn stats_tool_definition() -> Value {
    json!({
        "name": STATS_TOOL,
        "title": "Tool Statistics",
        "description": "Call statistics of a tool you can call (run_code included): {name, \
            total_calls, successes, success_rate, avg_latency_ms, p95_latency_ms} (ms; \
            p95_latency_ms null for run_code).",
        "inputSchema": {
            "type": "object",
            "properties": { "name": { "type": "string", "description": "The tool" } },
            "required": ["name"],
        },
    })
}

/// `tool_stats`' answer, one shape for every tool, `run_code` included:
/// the registered tools' field names, with the tool's `name`.
/// `p95_latency_ms` is `null` where no latency window is kept (`run_code`,
/// whose runs are counted in memory).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatsAnswer<'a> {
    /// The tool asked about.
    pub name: &'a str,
    /// Calls recorded.
    pub total_calls: u64,
    /// Calls that succeeded.
    pub successes: u64,
    /// `successes / total_calls`; 0 when there were none.
    pub success_rate: f64,
    /// Mean latency, ms; 0 when there were none.
    pub avg_latency_ms: f64,
    /// 95th-percentile latency over the recent calls, ms.
    pub p95_latency_ms: Option<f64>,
}

impl<'a> StatsAnswer<'a> {
    /// A registered tool's statistics.
    pub fn registered(name: &'a str, s: &temper_store::ToolStats) -> Self {
        Self {
            name,
            total_calls: s.total_calls,
            successes: s.successes,
            success_rate: s.success_rate,
            avg_latency_ms: s.avg_latency_ms,
            p95_latency_ms: Some(s.p95_latency_ms),
        }
    }

    /// As a `tools/call` result.
    pub fn result(&self) -> Value {
        match serde_json::to_value(self) {
            Ok(v) => tool_result(&v, false),
            Err(e) => tool_error("stats", &format!("cannot encode: {e}")),
        }
    }
}

/// The `forge_tool` definition for a host with `policy`: one line per
/// capability, what the host allows (the JavaScript API, the guest
/// directories, the fetch domains) and what it does not, so an agent does
/// not ask for what it cannot get ([`HostPolicy::capability_lines`]; its
/// lists are capped, and nothing in it grows with the number of tools).
pub fn forge_tool_definition(policy: &HostPolicy) -> Value {
    let capabilities = policy.capability_lines().join("\n");
    let description = format!(
        "Create a new tool at runtime when no existing tool fits the task: call `search_tools` \
         first and reuse what it finds. Forging a request an existing tool already has answers \
         with that tool (`reused`), and a result lists the `similarTools` you could call instead. \
         Provide: name \
         (snake_case), description, inputSchema and outputSchema (JSON Schema), implementation \
         and testCases. implementation.mode \"sandbox\": JavaScript defining `function \
         execute(input) {{ ... }}` (sync or async) returning JSON; it runs in a fresh \
         WebAssembly sandbox per call with no capabilities except those its `allowlist` names \
         that this host allows:\n{capabilities}\n\
         eval, Function, require, import and process are refused. implementation.mode \
         \"compose\": `steps` [{{name, tool, inputMapping}}] chaining \
         tools this agent can already call; inputMapping values may reference $input, $input.x, \
         $prev, $prev.x, $steps.NAME.x (a whole-string reference keeps its JSON type, references \
         inside text are interpolated, $$ is a literal $); a compose tool gets no capability of \
         its own. The tool is \
         built, its test cases run twice, a judge reviews safety, correctness and determinism, \
         and if approved it is registered for this session and appears in tools/list. Returns \
         the ForgeResult: success, tool, verdict, errors and the refusing stage."
    );
    json!({
        "name": FORGE_TOOL,
        "title": "Forge Tool",
        "description": description,
        "inputSchema": forge_request_schema(),
    })
}

/// JSON Schema of a forge request (the seed's `ForgeToolInput`).
pub fn forge_request_schema() -> Value {
    let capabilities: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "description": "snake_case name the tool will be called by",
                "pattern": "^[a-z][a-z0-9_]*$",
                "maxLength": MAX_NAME_LEN,
            },
            "description": {
                "type": "string",
                "description": "What the tool does, for the agents that will call it",
                "maxLength": MAX_DESCRIPTION_BYTES,
            },
            "inputSchema": {
                "type": "object",
                "description": "JSON Schema of the tool's input",
            },
            "outputSchema": {
                "type": "object",
                "description": "JSON Schema of the tool's output (checked on every call); optional: without it the output is only checked to be JSON",
            },
            "implementation": {
                "type": "object",
                "properties": {
                    "mode": { "type": "string", "enum": ["sandbox", "compose"] },
                    "code": {
                        "type": "string",
                        "description": "sandbox: JavaScript defining function execute(input) { ... }",
                    },
                    "allowlist": {
                        "type": "array",
                        "items": { "type": "string", "enum": capabilities },
                        "description": "sandbox: capabilities the code uses",
                    },
                    "steps": {
                        "type": "array",
                        "items": { "type": "object" },
                        "description": "compose: the pipeline, [{name, tool, inputMapping}], run in order; the last step's output is the result",
                    },
                },
                "required": ["mode"],
            },
            "testCases": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_TEST_CASES,
                "items": {
                    "type": "object",
                    "properties": {
                        "input": { "description": "The tool's input" },
                        "expectedOutput": { "description": "The output it must produce" },
                        "expectError": {
                            "type": ["boolean", "string"],
                            "description": "In place of expectedOutput: the call must fail; true for any error, a string for a part of the error message",
                        },
                        "cassette": {
                            "type": "array",
                            "items": { "type": "object" },
                            "description": "The HTTP responses this case's fetch calls get, with no network (for a host that is offline): [{request: {method, url}, response: {status, headers: [[name, value]], body}}]",
                        },
                        "recordedCalls": {
                            "type": "array",
                            "description": "Answers of the hub tools this case's run calls, served instead of calling them while the forge tests (required for a hub tool its upstream does not mark readOnlyHint, unless the operator allows live tests)",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "tool": { "type": "string" },
                                    "input": { "description": "The input the call is made with" },
                                    "output": { "description": "The tool's answer" },
                                    "error": { "type": "string", "description": "Or the error it answers with" },
                                },
                                "required": ["tool", "input"],
                            },
                        },
                    },
                    "required": ["input"],
                },
            },
        },
        "required": ["name", "description", "inputSchema", "implementation", "testCases"],
    })
}

/// A registered tool as an MCP tool definition: name, description,
/// inputSchema and, when the tool's output is always an object, its
/// outputSchema (the engine checks every output against it, so
/// `structuredContent` always conforms).
pub fn registered_tool_definition(info: &ToolInfo) -> Value {
    let mut def = json!({
        "name": info.name,
        "description": info.description,
        "inputSchema": object_schema(&info.input_schema),
    });
    if is_object_schema(&info.output_schema) {
        def["outputSchema"] = info.output_schema.clone();
    }
    def
}

/// The `tools/list` entry of a hub tool: an upstream's as its upstream
/// listed it (`listed`: every member, `title`, `annotations`, `execution`,
/// `icons`, `outputSchema` and `_meta` included, with the exposed name and
/// the tools file's annotation overrides), a built-in's from its own name,
/// description and schemas.
pub fn hub_tool_definition(
    spec: &temper_forge::NativeToolSpec,
    listed: Option<&serde_json::Map<String, Value>>,
) -> Value {
    if let Some(listed) = listed {
        return Value::Object(listed.clone());
    }
    let mut def = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": object_schema(&spec.input_schema),
    });
    if is_object_schema(&spec.output_schema) {
        def["outputSchema"] = spec.output_schema.clone();
    }
    def
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// MCP wants `"type": "object"` at the top of an input schema (arguments
/// are always an object): a schema without a `type` gets it, `true` becomes
/// `{"type": "object"}`; anything else is shown as is.
fn object_schema(schema: &Value) -> Value {
    match schema {
        Value::Bool(true) => json!({ "type": "object" }),
        Value::Object(o) if !o.contains_key("type") => {
            let mut o = o.clone();
            o.insert("type".into(), json!("object"));
            Value::Object(o)
        }
        other => other.clone(),
    }
}

/// A `tools/call` result carrying `value`: as JSON text content, and as
/// `structuredContent` when it is an object (MCP requires one there).
pub fn tool_result(value: &Value, is_error: bool) -> Value {
    CallToolResult {
        content: [TextContent::new(value.to_string())],
        is_error,
        structured_content: value.is_object().then_some(value),
    }
    .to_json()
}

/// [`tool_result`] for an output the caller gives up (a hub tool's, passed
/// through the gateway): the structured content is moved into the result,
/// not copied, and the text is written by `serde_json` directly.
pub fn tool_result_owned(value: Value, is_error: bool) -> Value {
    let text = serde_json::to_string(&value).expect("a JSON value serializes");
    let mut block = serde_json::Map::new();
    block.insert("type".into(), Value::from("text"));
    // Moved in: `json!` would copy it.
    block.insert("text".into(), Value::String(text));
    let mut result = serde_json::Map::new();
    result.insert("content".into(), Value::Array(vec![Value::Object(block)]));
    result.insert("isError".into(), Value::Bool(is_error));
    if value.is_object() {
        result.insert("structuredContent".into(), value);
    }
    Value::Object(result)
}

/// A failed call as a tool result (`isError: true`): `{stage, error}` as
/// JSON text content only. `error` is the typed error's message, which
/// starts with the stage (`invoke NAME: run: timed out after ...`).
///
/// No `structuredContent`: a tool's `outputSchema` describes its output,
/// not its errors, and clients check structured content against it (the
/// official TypeScript SDK throws `-32602` on a mismatch), so an error
/// result carries the error as text.
pub fn tool_error(stage: &str, error: &str) -> Value {
    let text = serde_json::to_string(&CallError { stage, error }).expect("two strings serialize");
    CallToolResult {
        content: [TextContent::new(text)],
        is_error: true,
        structured_content: None,
    }
    .to_json()
}

/// A `tools/call` result (`CallToolResult`): one text content block, the
/// error flag, structured content when the output is an object.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallToolResult<'a> {
    content: [TextContent; 1],
    is_error: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    structured_content: Option<&'a Value>,
}

impl CallToolResult<'_> {
    fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a tool result serializes")
    }
}

/// A `text` content block.
#[derive(Serialize)]
struct TextContent {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
}

impl TextContent {
    fn new(text: String) -> Self {
        Self { kind: "text", text }
    }
}

/// The text of a failed call's result.
#[derive(Serialize)]
struct CallError<'a> {
    stage: &'a str,
    error: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owned_result_is_the_borrowed_one() {
        for (value, is_error) in [
            (json!({"items": [{"id": 1, "name": "a \"b\""}]}), false),
            (json!([1, 2]), false),
            (json!("text"), true),
        ] {
            let borrowed = tool_result(&value, is_error);
            let owned = tool_result_owned(value, is_error);
            assert_eq!(owned, borrowed);
            assert_eq!(owned.to_string(), borrowed.to_string(), "same key order");
        }
    }

    #[test]
    fn input_schemas_are_object_schemas() {
        assert_eq!(object_schema(&json!(true)), json!({"type": "object"}));
        assert_eq!(
            object_schema(&json!({"properties": {"a": {}}})),
            json!({"properties": {"a": {}}, "type": "object"})
        );
        let given = json!({"type": "object", "required": ["a"]});
        assert_eq!(object_schema(&given), given);
    }

    #[test]
    fn results_carry_text_and_structured_content() {
        let r = tool_result(&json!({"slug": "a-b"}), false);
        assert_eq!(r["content"][0]["text"], r#"{"slug":"a-b"}"#);
        assert_eq!(r["structuredContent"], json!({"slug": "a-b"}));
        assert_eq!(r["isError"], false);
        assert_eq!(
            r.as_object().unwrap().keys().collect::<Vec<_>>(),
            ["content", "isError", "structuredContent"]
        );
        let r = tool_result(&json!([1, 2]), false);
        assert!(r.get("structuredContent").is_none());
        assert_eq!(r["content"][0]["type"], "text");
        let e = tool_error("invoke", "invoke t: run: timed out after 10 ms");
        assert_eq!(e["isError"], true);
        assert!(e.get("structuredContent").is_none(), "{e}");
        let text: Value = serde_json::from_str(e["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["stage"], "invoke");
    }

    #[test]
    fn forge_tool_states_the_cap_and_the_slots_left() {
        let d = forge_tool_definition_for(&HostPolicy::deny_all(), 10, 1);
        let text = d["description"].as_str().unwrap();
        assert!(
            text.ends_with(
                "A session holds at most 10 tools (maxSessionTools); yours has 1 slot left. \
                 delete_tool frees one; promote_tool moves a tool with enough successful calls to \
                 your agent tier."
            ),
            "{text}"
        );
        let d = forge_tool_definition_for(&HostPolicy::deny_all(), 10, 0);
        assert!(
            d["description"]
                .as_str()
                .unwrap()
                .contains("yours has 0 slots left")
        );
    }

    #[test]
    fn forge_tool_names_the_host_capabilities() {
        let policy = HostPolicy::deny_all()
            .with_allow_read("./data:/data")
            .unwrap()
            .with_allow_crypto();
        let d = forge_tool_definition(&policy);
        let text = d["description"].as_str().unwrap();
        assert!(
            text.contains(
                "that this host allows:\n\
                 - \"fetch\": NOT allowed by this host (`fetch(url, init)` (Headers, Request, Response)); only its operator can allow it\n\
                 - \"fs.readFile\": allowed: `fs.readFile(path, encoding)`, `fs.readFileSync`, `fs.promises.readFile`; directories (read-only): /data\n\
                 - \"crypto\": allowed: `crypto.createHash`, `crypto.createHmac`, `crypto.randomBytes`, `crypto.getRandomValues`, `crypto.randomUUID`\n\
                 eval, Function"
            ),
            "{text}"
        );
        let none = forge_tool_definition(&HostPolicy::deny_all());
        let none = none["description"].as_str().unwrap();
        assert_eq!(
            none.matches("NOT allowed by this host").count(),
            3,
            "{none}"
        );
        // outputSchema is optional (the seed's format).
        assert_eq!(
            d["inputSchema"]["required"],
            serde_json::json!([
                "name",
                "description",
                "inputSchema",
                "implementation",
                "testCases"
            ])
        );
    }
}
