//! Why a `run_code` run was refused a tool or a capability, said so that
//! the agent knows what to do next. Three cases the runtime reports alike
//! (`capability not granted: tool:NAME` or `: crypto`) are told apart here:
//!
//! - a tool the caller may call, left out of the `tools` it passed
//!   ([`ToolRefusal::NotInTools`]): add it, or omit `tools`;
//! - a name no visible tool has ([`ToolRefusal::Unknown`]): the nearest
//!   visible name by edit distance, when one is near;
//! - a capability (`fetch`, `fs.readFile`, `crypto`) the host policy's
//!   `[run_code] allow` does not grant ([`capability_refusal`]): only the
//!   operator grants it; until then, a forged tool that holds it.
//!
//! Names listed are only those the caller may see, and lists are capped
//! ([`temper_policy::explain::capped_list`]): a refusal's size does not
//! grow with the number of tools.

use temper_policy::Capability;
use temper_policy::explain::capped_list;

/// Why a tool call from `run_code` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRefusal {
    /// The caller may call the tool, but the `tools` it passed leave it out.
    NotInTools {
        /// The tools it passed, sorted.
        tools: Vec<String>,
    },
    /// No tool the caller may see has the name.
    Unknown {
        /// The nearest visible name, when one is near.
        nearest: Option<String>,
    },
}

impl ToolRefusal {
    /// Classifies a refused call of `tool`: `passed` are the `tools` the
    /// caller named (`None`: it named none, every visible tool was
    /// callable), `visible` every tool it may call from code.
    pub fn of(tool: &str, passed: Option<&[String]>, visible: &[String]) -> Self {
        match passed {
            Some(passed) if visible.iter().any(|v| v == tool) => {
                let mut tools = passed.to_vec();
                tools.sort();
                tools.dedup();
                ToolRefusal::NotInTools { tools }
            }
            _ => ToolRefusal::Unknown {
                nearest: nearest(tool, visible).map(str::to_string),
            },
        }
    }

    /// The refusal's text for a call of `tool`.
    pub fn message(&self, tool: &str) -> String {
        match self {
            ToolRefusal::NotInTools { tools } => format!(
                "tool {tool:?} is not in the tools you passed to run_code (tools: [{}]); add it to \
                 tools or omit tools to call any visible tool",
                if tools.is_empty() {
                    String::new()
                } else {
                    capped_list(tools.iter().map(String::as_str))
                }
            ),
            ToolRefusal::Unknown { nearest: Some(n) } => {
                format!("no tool named {tool:?}; did you mean {n:?}?")
            }
            ToolRefusal::Unknown { nearest: None } => format!(
                "no tool named {tool:?}; run_code's description (or describe_tools) lists the tools \
                 you can call"
            ),
        }
    }
}

/// The name in `candidates` nearest to `name` by edit distance
/// (Levenshtein), when it is near: at most a third of the longer name's
/// length, and at least one edit allowed. Ties go to the first in order.
pub fn nearest<'a>(name: &str, candidates: &'a [String]) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let d = strsim::levenshtein(name, c);
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    let (d, c) = best?;
    let bound = (name.chars().count().max(c.chars().count()) / 3).max(1);
    (d > 0 && d <= bound).then_some(c)
}

/// The refusal of `capability` (`fetch`, `fs.readFile`, `crypto`) to a
/// `run_code` run: only the host's operator grants it, in the policy
/// file's `[run_code] allow` (and its top-level `allow`); until then a
/// forged tool that holds it can be called.
pub fn capability_refusal(capability: &str, run_code_allow: &[String]) -> String {
    let grants = match capability.parse::<Capability>() {
        Ok(cap) => format!(
            "\"{capability}\" in the policy file's [run_code] allow, and the host allowing it \
             ({})",
            cap.operator_grant()
        ),
        Err(_) => format!("\"{capability}\" in the policy file's [run_code] allow"),
    };
    format!(
        "capability \"{capability}\" is not granted to run_code by the host policy (its [run_code] \
         allow: {}); only the host's operator can grant it ({grants}); until then, call a tool \
         whose allowlist has \"{capability}\"",
        capped_list(run_code_allow.iter().map(String::as_str))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn three_cases_three_texts() {
        let visible = names(&["slugify", "word_count", "add"]);
        let left_out = ToolRefusal::of("slugify", Some(&names(&["add"])), &visible);
        assert_eq!(
            left_out.message("slugify"),
            "tool \"slugify\" is not in the tools you passed to run_code (tools: [add]); add it \
             to tools or omit tools to call any visible tool"
        );
        let typo = ToolRefusal::of("slugfy", Some(&names(&["add"])), &visible);
        assert_eq!(
            typo.message("slugfy"),
            "no tool named \"slugfy\"; did you mean \"slugify\"?"
        );
        let far = ToolRefusal::of("http_get", None, &visible);
        assert_eq!(
            far.message("http_get"),
            "no tool named \"http_get\"; run_code's description (or describe_tools) lists the \
             tools you can call"
        );
        // Without `tools`, a visible name is never "left out".
        assert!(matches!(
            ToolRefusal::of("slugify", None, &visible),
            ToolRefusal::Unknown { .. }
        ));
        assert_eq!(
            capability_refusal("crypto", &[]),
            "capability \"crypto\" is not granted to run_code by the host policy (its [run_code] \
             allow: none); only the host's operator can grant it (\"crypto\" in the policy file's \
             [run_code] allow, and the host allowing it (the flag --allow-crypto, or \"crypto\" in \
             the policy file's `allow`)); until then, call a tool whose allowlist has \"crypto\""
        );
    }

    #[test]
    fn nearest_is_near_or_nothing() {
        let c = names(&["slugify", "slug", "word_count"]);
        assert_eq!(nearest("slugfy", &c), Some("slugify"));
        assert_eq!(nearest("wordcount", &c), Some("word_count"));
        assert_eq!(nearest("zzz", &c), None);
        assert_eq!(
            nearest("slugify", &c),
            None,
            "an exact name is not a suggestion"
        );
        assert_eq!(nearest("x", &[]), None);
    }
}
