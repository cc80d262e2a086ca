//! The tool names a source calls (code mode): `tools.NAME(...)`,
//! `tools?.NAME(...)`, `tools["NAME"](...)` and `callTool("NAME", ...)`,
//! read from the same tokens as the rest of the static check. Any other use
//! of `tools` or `callTool` (a computed name, an alias, passing them on) is
//! reported as *computed*: the names it calls cannot be read from the
//! source. The runtime refuses every name not granted either way; this is
//! what the forge's rules judge compares with the `tool:` grants.

use super::*;

/// A use of `tools` or `callTool` whose tool name is not a literal.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ComputedToolCall {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
}

/// What a source calls, as far as its text says.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ToolCallsUsed {
    /// Tool names called with a literal name, sorted.
    pub names: BTreeSet<String>,
    /// Uses whose name is computed, in source order.
    pub computed: Vec<ComputedToolCall>,
}

/// The tools `source` calls (see the module docs).
pub fn used_tool_calls(source: &str) -> ToolCallsUsed {
    let tokens = Lexer::new(source).run();
    scan(&tokens)
}

fn scan(tokens: &[Token]) -> ToolCallsUsed {
    let mut used = ToolCallsUsed::default();
    let at = |i: usize| tokens.get(i);
    for (i, t) in tokens.iter().enumerate() {
        if t.kind != Kind::Ident || !(t.value == "tools" || t.value == "callTool") {
            continue;
        }
        // A member name (`obj.tools`), an object key or a declaration of a
        // method is not the global.
        if Checker::after_member_at(tokens, i) {
            continue;
        }
        if at(i + 1).is_some_and(|n| n.is_punct(':'))
            && i > 0
            && (tokens[i - 1].is_punct('{') || tokens[i - 1].is_punct(','))
        {
            continue;
        }
        let literal = if t.value == "tools" {
            match at(i + 1) {
                Some(dot) if dot.is_member_dot() => at(i + 2)
                    .filter(|n| n.kind == Kind::Ident)
                    .map(|n| n.value.clone()),
                Some(open) if open.is_punct('[') => match (at(i + 2), at(i + 3)) {
                    (Some(s), Some(close)) if s.kind == Kind::Str && close.is_punct(']') => {
                        Some(s.value.clone())
                    }
                    _ => None,
                },
                _ => None,
            }
        } else {
            match (at(i + 1), at(i + 2), at(i + 3)) {
                (Some(open), Some(s), Some(next))
                    if open.is_punct('(')
                        && matches!(s.kind, Kind::Str | Kind::Template { complete: true, .. })
                        && (next.is_punct(',') || next.is_punct(')')) =>
                {
                    Some(s.value.clone())
                }
                _ => None,
            }
        };
        match literal {
            Some(name) => {
                used.names.insert(name);
            }
            None => used.computed.push(ComputedToolCall {
                line: t.line,
                column: t.column,
            }),
        }
    }
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<String> {
        used_tool_calls(src).names.into_iter().collect()
    }

    #[test]
    fn literal_names_in_every_spelling() {
        let src = r#"
            async function execute(input) {
                const a = await tools.slugify({ text: input.t });
                const b = await tools?.word_count(a);
                const c = await tools["web_search"]({ q: "x" });
                const d = await callTool("add", { a: 1, b: 2 });
                const e = await callTool(`mul`, {});
                return [a, b, c, d, e];
            }"#;
        let used = used_tool_calls(src);
        assert_eq!(
            names(src),
            ["add", "mul", "slugify", "web_search", "word_count"]
        );
        assert!(used.computed.is_empty(), "{:?}", used.computed);
    }

    #[test]
    fn computed_names_and_aliases_are_reported_with_positions() {
        let src = "async function execute(i) {\n  const n = 'slu' + 'gify';\n  await tools[n]({});\n  await callTool(i.name, {});\n  const t = tools;\n  return 1;\n}";
        let used = used_tool_calls(src);
        assert!(used.names.is_empty(), "{:?}", used.names);
        let at: Vec<(u32, u32)> = used.computed.iter().map(|c| (c.line, c.column)).collect();
        assert_eq!(at, [(3, 9), (4, 9), (5, 13)]);
    }

    #[test]
    fn text_members_and_keys_are_not_calls() {
        let src = r#"
            // tools.secret in a comment
            const s = "callTool('x')";
            const o = { tools: 1, callTool: 2 };
            const m = input.tools.evil;
            function execute(input) { return o.callTool; }"#;
        let used = used_tool_calls(src);
        assert!(used.names.is_empty(), "{:?}", used.names);
        assert!(used.computed.is_empty(), "{:?}", used.computed);
    }
}
