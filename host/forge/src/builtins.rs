//! The names of the built-in (meta) tools a host serves next to the
//! tools in its registry, in one place: no forged, imported or hub tool
//! may take one ([`reserved_by_builtin`]), so `tools/list` never lists a
//! name twice and no agent or upstream can forge a built-in's
//! description.

/// `forge_tool`: forge a tool into the session tier.
pub const FORGE_TOOL: &str = "forge_tool";
/// `promote_tool`: move a session tool to the agent tier.
pub const PROMOTE_TOOL: &str = "promote_tool";
/// `delete_tool`: remove a tool from the caller's session tier.
pub const DELETE_TOOL: &str = "delete_tool";
/// `tool_stats`: a tool's call statistics.
pub const TOOL_STATS: &str = "tool_stats";
/// `run_code`: run a JavaScript body once with the tools the caller may
/// call (code mode).
pub const RUN_CODE: &str = "run_code";
/// `describe_tools`: the schemas of named tools (code mode).
pub const DESCRIBE_TOOLS: &str = "describe_tools";
/// `search_tools`: find tools by what they do.
pub const SEARCH_TOOLS: &str = "search_tools";

/// Every built-in tool's name, reserved for them.
pub const BUILTIN_TOOL_NAMES: &[&str] = &[
    FORGE_TOOL,
    PROMOTE_TOOL,
    DELETE_TOOL,
    TOOL_STATS,
    RUN_CODE,
    DESCRIBE_TOOLS,
    SEARCH_TOOLS,
];

/// Whether `name` is a built-in tool's.
pub fn is_builtin(name: &str) -> bool {
    BUILTIN_TOOL_NAMES.contains(&name)
}

/// The refusal for a tool that would take built-in `name`: an
/// instruction, `name "run_code" is reserved by a built-in tool; choose
/// another name`; `None` when `name` is not a built-in's.
pub fn reserved_by_builtin(name: &str) -> Option<String> {
    is_builtin(name)
        .then(|| format!("name {name:?} is reserved by a built-in tool; choose another name"))
}

/// The refusal for a forged tool that would take the name of a hub tool
/// the caller sees: `name "x.y" is taken by a hub tool; choose another
/// name`.
pub fn taken_by_hub_tool(name: &str) -> String {
    format!("name {name:?} is taken by a hub tool; choose another name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use temper_runtime::capabilities::tool_calls::NEVER_CALLABLE;

    #[test]
    fn every_never_callable_name_is_a_builtin() {
        for name in NEVER_CALLABLE {
            assert!(
                is_builtin(name),
                "{name} is never callable but not reserved"
            );
        }
    }

    #[test]
    fn the_refusal_is_an_instruction() {
        assert_eq!(
            reserved_by_builtin("run_code").unwrap(),
            "name \"run_code\" is reserved by a built-in tool; choose another name"
        );
        assert_eq!(reserved_by_builtin("slugify"), None);
        assert_eq!(
            taken_by_hub_tool("x.y"),
            "name \"x.y\" is taken by a hub tool; choose another name"
        );
    }
}
