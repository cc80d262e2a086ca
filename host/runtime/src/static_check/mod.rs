//! The forge's static check: refuses agent-written JavaScript that names a
//! blocked API before anything is compiled or run.
//!
//! This is a hand-written, linear-time lexer plus a small token-pattern pass
//! rather than a full parser. Full JavaScript front ends (oxc, swc, boa's
//! parser) add large dependency trees and long compile times to a host build
//! that is already heavy, and a lexer-level check is enough here: the runtime
//! also removes `eval`/`Function` and exposes no module system or process, so
//! this check is the first layer that gives the agent a clear, positioned error
//! message. It is not the security boundary. The lexer understands comments,
//! string escapes, template literals with nested `${ }` code, regex literals
//! versus division (heuristically, from the previous token), `?.`, private
//! names and identifier unicode escapes, so that blocked names appearing in
//! text are not reported and names spelled with escapes are.
//!
//! Blocked, as implemented:
//! - `eval`, `Function` (arbitrary code execution), referenced as a bare
//!   identifier in any way (`Function(`, `new Function`, `Function.prototype`).
//! - `require`, dynamic `import(...)`, `import.meta`, static `import`
//!   declarations and `export ... from` re-exports (module system escape).
//! - `process` (host process access) and `WebAssembly` (raw WebAssembly).
//! - A string literal (or substitution-free template) whose value is exactly
//!   `child_process` or `node:child_process` (subprocess spawning).
//! - `fs.<member>` for every member except the read-only allow-list
//!   `readFile`, `readFileSync`, `existsSync`, `statSync`, `readdirSync`
//!   and `promises.readFile`; so `fs.writeFile`, `fs.unlink`, `fs.mkdir`,
//!   `fs.rm`, `fs.rename`, `fs.copyFile`, `fs.symlink`, `fs.chmod`,
//!   `fs.open`, `fs.promises.writeFile`, `fs.promises` on its own,
//!   `fs.createWriteStream`, ... are refused, as is computed `fs[expr]`.
//! - The blocked global names above reached through the global object:
//!   `globalThis.eval`, `globalThis['eval']`, `globalThis?.eval`,
//!   `this.eval`, `self['require']`, `window.process`, `global.Function`,
//!   `globalThis.self.eval`, `globalThis.fs.writeFile`, ...
//!
//! Not flagged: text in comments, strings, template text and regex literals;
//! member names after `.`/`?.` on anything other than the global object
//! (`obj.eval`, `input.process`); object keys (`{ process: 1 }`); method and
//! class member names (`{ eval() {} }`, `class A { process() {} }`).
//! Known limits of a scope-free check: a local binding named like a blocked
//! global (`function process() {}`, `this.process()` in a class) is reported,
//! and computed lookups such as `globalThis['ev' + 'al']` are not.

use std::collections::BTreeSet;
use std::fmt;

use temper_policy::Capability;

/// One blocked API use found in the source.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BlockedUse {
    /// Canonical name of the blocked API, e.g. `eval`, `fs.writeFile`, `import()`.
    pub api: String,
    /// 1-based line of the use.
    pub line: u32,
    /// 1-based column of the use, counted in characters (not bytes).
    pub column: u32,
    /// Short reason the API is blocked, e.g. `arbitrary code execution`.
    pub reason: &'static str,
}

impl fmt::Display for BlockedUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "blocked API `{}` at {}:{} ({})",
            self.api, self.line, self.column, self.reason
        )
    }
}

/// The static check's verdict: every blocked use, in source order.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{}", format_uses(.0))]
pub struct StaticCheckError(pub Vec<BlockedUse>);

/// Joins uses as `blocked API `eval` at 3:5 (arbitrary code execution); ...`.
fn format_uses(uses: &[BlockedUse]) -> String {
    uses.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The capabilities `source` appears to use: a reference to the global
/// `fetch` (fetch), `fs` (fs.readFile) or `crypto` (crypto), bare or through
/// the global object (`globalThis.fetch`). The same scope-free reading as
/// [`check`]: a local binding with one of these names counts as a use, and
/// member names (`obj.fetch`), object keys and text never do. The forge's
/// rules judge compares this with the tool's allowlist.
pub fn used_capabilities(source: &str) -> BTreeSet<Capability> {
    let tokens = Lexer::new(source).run();
    Checker::new(&tokens).scan().1
}

/// Checks `source` for blocked API uses.
///
/// # Errors
///
/// Returns [`StaticCheckError`] listing every blocked use, in source order.
pub fn check(source: &str) -> Result<(), StaticCheckError> {
    let tokens = Lexer::new(source).run();
    let uses = Checker::new(&tokens).run();
    if uses.is_empty() {
        Ok(())
    } else {
        Err(StaticCheckError(uses))
    }
}

const REASON_CODE: &str = "arbitrary code execution";
const REASON_MODULE: &str = "module system escape";
const REASON_PROCESS: &str = "host process access";
const REASON_SUBPROCESS: &str = "subprocess spawning";
const REASON_WASM: &str = "raw WebAssembly access";
const REASON_FS: &str = "filesystem access beyond the read-only allow-list";

/// Global names that are refused wherever they are referenced.
const BLOCKED_GLOBALS: &[(&str, &str)] = &[
    ("eval", REASON_CODE),
    ("Function", REASON_CODE),
    ("require", REASON_MODULE),
    ("process", REASON_PROCESS),
    ("WebAssembly", REASON_WASM),
];

/// String values refused wherever they appear as a whole string literal,
/// with the API name they are reported as.
const BLOCKED_STRINGS: &[(&str, &str, &str)] = &[
    ("child_process", "child_process", REASON_SUBPROCESS),
    ("node:child_process", "child_process", REASON_SUBPROCESS),
];

/// The only `fs` members that may be used.
const FS_ALLOWED: &[&str] = &[
    "readFile",
    "readFileSync",
    "existsSync",
    "statSync",
    "readdirSync",
];

/// Names that evaluate to the global object when reached from it.
const GLOBAL_ALIASES: &[&str] = &["globalThis", "self", "window", "global"];

/// Keywords after which a `/` starts a regex literal rather than a division.
const REGEX_KEYWORDS: &[&str] = &[
    "return",
    "typeof",
    "instanceof",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "case",
    "do",
    "else",
    "yield",
    "await",
    "extends",
];

/// Modifiers that may precede a class or object member name.
const MEMBER_MODIFIERS: &[&str] = &["static", "get", "set", "async", "accessor"];

mod checker;
mod lexer;
#[cfg(test)]
mod tests;
mod tool_calls;

use checker::Checker;
use lexer::{Kind, Lexer, Token};
pub use tool_calls::{ComputedToolCall, ToolCallsUsed, used_tool_calls};
