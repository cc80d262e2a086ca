//! Code mode on the MCP server: the `run_code` meta-tool (run an async
//! function body once, in a fresh sandbox, with the tools this caller may
//! call) and `describe_tools` (the TypeScript declarations of tools, for
//! when there are too many to put in `run_code`'s description).
//!
//! `run_code`'s description carries a TypeScript declaration of the tools
//! the caller may call, generated from their schemas each time the tool
//! list is read (so it follows `notifications/tools/list_changed`). It is
//! bounded: past [`MAX_DECLARATION_BYTES`] it lists the names only and
//! points at `describe_tools`.
//!
//! The tools a run may call are the caller's: its visible forged tools (the
//! tiers its access allows), the hub tools its token allows and the host's
//! other native tools; narrowed by the request's `tools`.
//!
//! The code itself gets exactly the capabilities of the host policy's
//! `[run_code] allow` (none by default), not those the top-level `allow`
//! grants forged tools, and the description says which, built from the
//! policy ([`temper_policy::HostPolicy::run_code_capabilities`]): anything
//! else is reached through the tools it calls. Why a separate grant rather
//! than the host's: a forged tool's capabilities were reviewed with its
//! code (tests, judge) before it was registered; a `run_code` body runs
//! once and unreviewed, so the operator decides apart what such code may
//! touch, and a capability already reviewed inside a tool stays the way in.
//!
//! A refused call says which case it is (the forge's
//! [`temper_forge::code_mode::ToolRefusal`], told apart again here with the
//! names this caller sees): a tool left out of `tools`, a name no visible
//! tool has (with the nearest visible name), or a capability `[run_code]
//! allow` does not grant.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::Handler;
use crate::jsonrpc::RpcError;
use crate::tools;
use temper_forge::code_mode::{RunCodeError, ToolRefusal};
use temper_policy::HostPolicy;
use temper_runtime::capabilities::tool_calls::NEVER_CALLABLE;

/// The meta-tool that runs code.
pub const RUN_CODE: &str = temper_forge::builtins::RUN_CODE;
/// The meta-tool that describes tools as TypeScript.
pub const DESCRIBE_TOOLS: &str = temper_forge::builtins::DESCRIBE_TOOLS;
/// Most bytes of TypeScript declarations put in `run_code`'s description;
/// past it, names only.
pub const MAX_DECLARATION_BYTES: usize = 8 * 1024;
/// Most tool names listed in `run_code`'s description when the
/// declarations do not fit.
pub const MAX_LISTED_NAMES: usize = 200;
/// Most tools one `describe_tools` call describes.
pub const MAX_DESCRIBED: usize = 64;
/// Longest doc comment kept per tool.
const MAX_DOC_CHARS: usize = 300;

/// One tool as code sees it.
#[derive(Debug, Clone)]
pub struct CodeTool {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its input schema.
    pub input_schema: Value,
    /// Its output schema.
    pub output_schema: Value,
}

use temper_forge::discovery::typescript::is_identifier;
pub use temper_forge::discovery::typescript::ts_type;

/// A doc comment's text: one line, no comment terminator, bounded.
fn doc_text(description: &str) -> String {
    let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let cleaned = one_line.replace("*/", "* /");
    match cleaned.char_indices().nth(MAX_DOC_CHARS) {
        Some((at, _)) => format!("{}…", &cleaned[..at]),
        None => cleaned,
    }
}

/// The declaration of one tool, as a member of `tools`.
pub fn declare_tool(tool: &CodeTool) -> String {
    let name = if is_identifier(&tool.name) {
        tool.name.clone()
    } else {
        Value::String(tool.name.clone()).to_string()
    };
    format!(
        "  /** {} */\n  {name}(input: {}): Promise<{}>;\n",
        doc_text(&tool.description),
        ts_type(&tool.input_schema),
        ts_type(&tool.output_schema)
    )
}

/// `declare const tools: { ... };` for `tools`, plus `callTool`.
pub fn declarations(tools: &[CodeTool]) -> String {
    let mut out = String::from("declare const tools: {\n");
    for tool in tools {
        out.push_str(&declare_tool(tool));
    }
    out.push_str("};\ndeclare function callTool(name: string, input: object): Promise<any>;\n");
    out
}

/// The `run_code` definition for a caller who may call `tools` on a host
/// with `policy`: the full declarations when they fit
/// [`MAX_DECLARATION_BYTES`], else the names and a pointer to
/// `describe_tools`; and what the code itself may use, exactly the
/// policy's `[run_code] allow` ([`HostPolicy::run_code_capabilities`]).
pub fn run_code_definition(tools: &[CodeTool], policy: &HostPolicy) -> Value {
    let decls = declarations(tools);
    let callable = if tools.is_empty() {
        "You can call no tools right now: forge one with forge_tool first.".to_string()
    } else if decls.len() <= MAX_DECLARATION_BYTES {
        format!("The tools you can call:\n```ts\n{decls}```")
    } else {
        let names: Vec<&str> = tools
            .iter()
            .take(MAX_LISTED_NAMES)
            .map(|t| t.name.as_str())
            .collect();
        let more = match tools.len().saturating_sub(MAX_LISTED_NAMES) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        format!(
            "You can call {} tools: {}{more}. Call `{DESCRIBE_TOOLS}` with `names` for their TypeScript declarations.",
            tools.len(),
            names.join(", ")
        )
    };
    json!({
        "name": RUN_CODE,
        "title": "Run Code",
        "description": format!(
            "Run JavaScript once, in a fresh sandbox, to do in one call what would take several \
            tool calls: `code` is the body of an async function; `return` its result. Call tools \
            with `await tools.NAME(input)` or `await callTool(name, input)`; a failed call throws \
            an Error with `code` \"ETOOL\", `tool` and the callee's message. Each tool runs in its \
            own sandbox with its own grants. {capabilities} `tools` (optional) narrows what the \
            code may call. The result is the returned value and the console lines. Nothing is \
            registered.\n\n{callable}",
            capabilities = policy.run_code_capabilities(),
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": { "type": "string", "description": "The body of an async function; `return` the result" },
                "tools": {
                    "type": "array",
                    "items": { "type": "string" },
                    "description": "Only these tools may be called (default: every tool you can call)",
                },
            },
            "required": ["code"],
        },
    })
}

/// The `describe_tools` definition.
pub fn describe_tools_definition() -> Value {
    json!({
        "name": DESCRIBE_TOOLS,
        "title": "Describe Tools",
        "description": format!(
            "TypeScript declarations of tools you can call from `{RUN_CODE}`, for up to \
            {MAX_DESCRIBED} names."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "names": { "type": "array", "items": { "type": "string" } },
            },
            "required": ["names"],
        },
    })
}

/// `describe_tools`' answer: the declarations of the names known and,
/// when some are not, those names and where to look (an error only when
/// no name is known).
fn described(picked: &[CodeTool], unknown: &[String]) -> Value {
    let mut answer = json!({ "declarations": declarations(picked) });
    if !unknown.is_empty() {
        answer["unknown"] = json!(unknown);
        answer["hint"] = json!(format!(
            "no tool by these names is visible to you: {RUN_CODE}'s description names the tools you can call"
        ));
    }
    tools::tool_result(&answer, picked.is_empty())
}

impl Handler {
    /// The tools this caller may call from code, by name: forged tools it
    /// sees (they keep precedence), hub tools its token allows, the host's
    /// other native tools; never a meta-tool.
    pub(super) async fn code_tools(&self) -> Result<Vec<CodeTool>, RpcError> {
        Ok(self.code_tools_of(self.visible().await?))
    }

    /// [`Handler::code_tools`] given the forged tools this caller sees.
    pub(super) fn code_tools_of(&self, visible: Vec<temper_forge::ToolInfo>) -> Vec<CodeTool> {
        let mut all = BTreeMap::new();
        let hub: Vec<String> = self.forge.hub_tools().into_iter().map(|t| t.name).collect();
        for native in self.forge.native_tools() {
            if hub.contains(&native.name) && self.hub_hidden(&native.name) {
                continue;
            }
            all.insert(
                native.name.clone(),
                CodeTool {
                    name: native.name,
                    description: native.description,
                    input_schema: native.input_schema,
                    output_schema: native.output_schema,
                },
            );
        }
        for info in visible {
            all.insert(
                info.name.clone(),
                CodeTool {
                    name: info.name,
                    description: info.description,
                    input_schema: info.input_schema,
                    output_schema: info.output_schema,
                },
            );
        }
        all.retain(|name, _| !NEVER_CALLABLE.contains(&name.as_str()));
        all.into_values().collect()
    }

    /// `run_code {code, tools?}`.
    pub(super) async fn run_code_tool(&self, arguments: &Value) -> Result<Value, RpcError> {
        let Some(code) = arguments.get("code").and_then(Value::as_str) else {
            return Ok(tools::tool_error(
                "run_code",
                "run_code: arguments.code must be a string",
            ));
        };
        let callable: Vec<String> = self
            .code_tools()
            .await?
            .into_iter()
            .map(|t| t.name)
            .collect();
        let passed = matches!(arguments.get("tools"), Some(Value::Array(_)));
        let only: Vec<String> = match arguments.get("tools") {
            None | Some(Value::Null) => callable.clone(),
            Some(Value::Array(names)) => {
                let mut only = Vec::with_capacity(names.len());
                for name in names {
                    let Some(name) = name.as_str() else {
                        return Ok(tools::tool_error(
                            "run_code",
                            "run_code: arguments.tools must be an array of strings",
                        ));
                    };
                    if !callable.iter().any(|c| c == name) {
                        let unknown = ToolRefusal::of(name, None, &callable);
                        return Ok(tools::tool_error(
                            "run_code",
                            &format!("run_code: tools: {}", unknown.message(name)),
                        ));
                    }
                    only.push(name.to_string());
                }
                only
            }
            Some(_) => {
                return Ok(tools::tool_error(
                    "run_code",
                    "run_code: arguments.tools must be an array of strings",
                ));
            }
        };
        let outcome = self.forge.run_code(code, Some(&only), &self.ctx).await;
        Ok(match outcome {
            Ok(run) => {
                let logs: Vec<Value> = run
                    .logs
                    .iter()
                    .map(|l| json!({"level": l.level, "message": l.message}))
                    .collect();
                tools::tool_result(&json!({ "result": run.output, "logs": logs }), false)
            }
            Err(mut e) => {
                for line in e.logs() {
                    tracing::info!(target: "temper_mcp::console", "[run_code console.{}] {}", line.level, line.message);
                }
                // Told apart again with what this caller sees (the forge
                // also knows hub tools its token hides, which no refusal
                // may name).
                if let RunCodeError::Tool { tool, refusal, .. } = &mut e {
                    *refusal = ToolRefusal::of(tool, passed.then_some(&only[..]), &callable);
                }
                tools::tool_error("run_code", &e.to_string())
            }
        })
    }

    /// `describe_tools {names}`.
    pub(super) async fn describe_tools_tool(&self, arguments: &Value) -> Result<Value, RpcError> {
        let Some(names) = arguments.get("names").and_then(Value::as_array) else {
            return Ok(tools::tool_error(
                "describe",
                "describe_tools: arguments.names must be an array of strings",
            ));
        };
        if names.len() > MAX_DESCRIBED {
            return Ok(tools::tool_error(
                "describe",
                &format!("describe_tools: at most {MAX_DESCRIBED} names per call"),
            ));
        }
        let all = self.code_tools().await?;
        let mut picked = Vec::new();
        let mut unknown = Vec::new();
        for name in names {
            let name = name.as_str().unwrap_or_default();
            match all.iter().find(|t| t.name == name) {
                Some(t) => picked.push(t.clone()),
                None => unknown.push(name.to_string()),
            }
        }
        Ok(described(&picked, &unknown))
    }

    /// `tool_stats {name: "run_code"}`: the caller's agent's runs on this
    /// host, in `tool_stats`' one shape ([`tools::StatsAnswer`]).
    pub(super) fn run_code_stats(&self) -> Value {
        let s = self.forge.run_code_stats(&self.ctx.agent_id);
        tools::StatsAnswer::registered(RUN_CODE, &s).result()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, input: Value, output: Value) -> CodeTool {
        CodeTool {
            name: name.into(),
            description: "Convert a string to a URL-friendly slug */ evil".into(),
            input_schema: input,
            output_schema: output,
        }
    }

    #[test]
    fn schemas_become_typescript() {
        let slugify = tool(
            "slugify",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            json!({"type": "object", "properties": {"slug": {"type": "string"}, "n": {"type": ["integer", "null"]}}, "required": ["slug"]}),
        );
        assert_eq!(
            declare_tool(&slugify),
            "  /** Convert a string to a URL-friendly slug * / evil */\n  slugify(input: { text: string; }): Promise<{ n?: (number | null); slug: string; }>;\n"
        );
        assert_eq!(ts_type(&json!({"enum": ["a", 1]})), r#""a" | 1"#);
        assert_eq!(
            ts_type(
                &json!({"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}})
            ),
            "Array<(string | boolean)>"
        );
        assert_eq!(ts_type(&json!({})), "any");
        assert_eq!(ts_type(&json!({"type": "object"})), "Record<string, any>");
        let odd = tool(
            "web-search",
            json!({"type": "object", "properties": {"a b": {}}}),
            json!(true),
        );
        assert!(
            declare_tool(&odd).contains(r#""web-search"(input: { "a b"?: any; }): Promise<any>"#)
        );
        let required = tool(
            "quoted",
            json!({"type": "object", "properties": {"a b": {}}, "required": ["a b"]}),
            json!(true),
        );
        assert!(
            declare_tool(&required).contains(r#"(input: { "a b": any; })"#),
            "a required name that needs quotes is not optional: {}",
            declare_tool(&required)
        );
    }

    #[test]
    fn deep_schemas_are_cut_to_any() {
        let mut s = json!({"type": "string"});
        for _ in 0..50 {
            s = json!({"type": "array", "items": s});
        }
        let t = ts_type(&s);
        assert!(t.ends_with("any>>>>>>>"), "{t}");
        assert!(t.len() < 100, "{t}");
    }

    #[test]
    fn the_description_is_bounded() {
        let few: Vec<CodeTool> = (0..3)
            .map(|i| tool(&format!("t{i}"), json!({"type": "object"}), json!({})))
            .collect();
        let d = run_code_definition(&few, &HostPolicy::deny_all());
        let text = d["description"].as_str().unwrap();
        assert!(text.contains("declare const tools: {"), "{text}");
        assert!(
            text.contains("t2(input: Record<string, any>): Promise<any>;"),
            "{text}"
        );
        let many: Vec<CodeTool> = (0..1000)
            .map(|i| tool(&format!("tool_{i}"), json!({"type": "object"}), json!({})))
            .collect();
        let d = run_code_definition(&many, &HostPolicy::deny_all());
        let text = d["description"].as_str().unwrap();
        assert!(!text.contains("declare const"), "names only");
        assert!(text.contains("You can call 1000 tools: tool_0, tool_1,"));
        assert!(text.contains(DESCRIBE_TOOLS));
        assert!(text.contains("tool_199 and 800 more."), "capped");
        assert!(text.len() < MAX_DECLARATION_BYTES, "{}", text.len());
    }

    #[test]
    fn describe_answers_the_known_names_and_lists_the_unknown() {
        let known = [tool("slugify", json!({"type": "object"}), json!({}))];
        let answer = described(&known, &["nope".to_string()]);
        assert_eq!(answer["isError"], json!(false));
        let body = &answer["structuredContent"];
        assert!(
            body["declarations"].as_str().unwrap().contains("slugify("),
            "{body}"
        );
        assert_eq!(body["unknown"], json!(["nope"]));
        assert_eq!(
            body["hint"],
            json!(
                "no tool by these names is visible to you: run_code's description names the tools you can call"
            )
        );
        let none = described(&[], &["nope".to_string()]);
        assert_eq!(none["isError"], json!(true));
        assert_eq!(none["structuredContent"]["unknown"], json!(["nope"]));
        let all_known = described(&known, &[]);
        assert!(all_known["structuredContent"].get("unknown").is_none());
    }
}
