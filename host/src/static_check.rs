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
//!   `readFile`, `readFileSync`, `existsSync`, `statSync`, `readdirSync`; so
//!   `fs.writeFile`, `fs.unlink`, `fs.mkdir`, `fs.rm`, `fs.rename`,
//!   `fs.copyFile`, `fs.symlink`, `fs.chmod`, `fs.open`, `fs.promises`,
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

use crate::policy::Capability;

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

// ---------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Identifier or keyword; `value` is the name with escapes decoded.
    Ident,
    /// String literal; `value` is the cooked string.
    Str,
    /// One template chunk. `complete`: a whole template without substitutions
    /// (`value` is then its cooked text). `opens`: the chunk ends with `${`.
    Template {
        complete: bool,
        opens: bool,
    },
    Regex,
    Number,
    /// `#name`.
    Private,
    /// Any other single punctuation character.
    Punct(char),
    /// `?.`
    OptChain,
    /// `...`
    Ellipsis,
    /// `++` or `--`.
    IncDec,
}

#[derive(Debug, Clone)]
struct Token {
    kind: Kind,
    value: String,
    line: u32,
    column: u32,
    /// A line terminator precedes this token (after the previous one).
    nl_before: bool,
}

impl Token {
    fn is_punct(&self, c: char) -> bool {
        self.kind == Kind::Punct(c)
    }

    fn is_ident(&self, name: &str) -> bool {
        self.kind == Kind::Ident && self.value == name
    }

    /// `.` or `?.`: the next identifier is a member name.
    fn is_member_dot(&self) -> bool {
        matches!(self.kind, Kind::Punct('.') | Kind::OptChain)
    }

    /// The token can end an operand (so a following newline starts a new item).
    fn ends_operand(&self) -> bool {
        matches!(
            self.kind,
            Kind::Ident
                | Kind::Str
                | Kind::Regex
                | Kind::Number
                | Kind::Private
                | Kind::IncDec
                | Kind::Template { opens: false, .. }
                | Kind::Punct(')' | ']')
        )
    }
}

fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

fn is_id_start(c: char) -> bool {
    c.is_ascii_alphabetic()
        || c == '$'
        || c == '_'
        || (!c.is_ascii() && !c.is_whitespace() && !is_line_terminator(c) && c != '\u{feff}')
}

fn is_id_continue(c: char) -> bool {
    is_id_start(c) || c.is_ascii_digit()
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    column: u32,
    tokens: Vec<Token>,
    nl_before: bool,
    regex_allowed: bool,
    /// One entry per open `{`: `true` if it is a template `${`.
    braces: Vec<bool>,
}

impl Lexer {
    fn new(source: &str) -> Self {
        Self {
            chars: source.chars().collect(),
            pos: 0,
            line: 1,
            column: 1,
            tokens: Vec::new(),
            nl_before: false,
            regex_allowed: true,
            braces: Vec::new(),
        }
    }

    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.pos += 1;
        if is_line_terminator(c) && !(c == '\r' && self.peek(0) == Some('\n')) {
            self.line = self.line.saturating_add(1);
            self.column = 1;
        } else {
            self.column = self.column.saturating_add(1);
        }
        Some(c)
    }

    fn push(&mut self, kind: Kind, value: String, line: u32, column: u32) {
        let after_member = self.tokens.last().is_some_and(Token::is_member_dot);
        self.regex_allowed = match kind {
            Kind::Ident => !after_member && REGEX_KEYWORDS.contains(&value.as_str()),
            Kind::Template { opens, .. } => opens,
            Kind::Str
            | Kind::Regex
            | Kind::Number
            | Kind::Private
            | Kind::IncDec
            | Kind::Punct(')' | ']') => false,
            _ => true,
        };
        self.tokens.push(Token {
            kind,
            value,
            line,
            column,
            nl_before: std::mem::take(&mut self.nl_before),
        });
    }

    fn run(mut self) -> Vec<Token> {
        if self.peek(0) == Some('#') && self.peek(1) == Some('!') {
            self.skip_line();
        }
        while let Some(c) = self.peek(0) {
            if is_line_terminator(c) {
                self.bump();
                self.nl_before = true;
                continue;
            }
            if c.is_whitespace() || c == '\u{feff}' {
                self.bump();
                continue;
            }
            let (line, column) = (self.line, self.column);
            match c {
                '/' if self.peek(1) == Some('/') => self.skip_line(),
                '/' if self.peek(1) == Some('*') => self.skip_block_comment(),
                '/' if self.regex_allowed => {
                    self.skip_regex();
                    self.push(Kind::Regex, String::new(), line, column);
                }
                '\'' | '"' => {
                    let value = self.lex_string(c);
                    self.push(Kind::Str, value, line, column);
                }
                '`' => {
                    self.bump();
                    self.lex_template(true, line, column);
                }
                '{' => {
                    self.bump();
                    self.braces.push(false);
                    self.push(Kind::Punct('{'), String::new(), line, column);
                }
                '}' => {
                    self.bump();
                    if self.braces.pop() == Some(true) {
                        self.lex_template(false, line, column);
                    } else {
                        self.push(Kind::Punct('}'), String::new(), line, column);
                    }
                }
                '0'..='9' => {
                    self.skip_number();
                    self.push(Kind::Number, String::new(), line, column);
                }
                '.' if self.peek(1).is_some_and(|d| d.is_ascii_digit()) => {
                    self.skip_number();
                    self.push(Kind::Number, String::new(), line, column);
                }
                '.' if self.peek(1) == Some('.') && self.peek(2) == Some('.') => {
                    self.pos_advance(3);
                    self.push(Kind::Ellipsis, String::new(), line, column);
                }
                '?' if self.peek(1) == Some('.')
                    && !self.peek(2).is_some_and(|d| d.is_ascii_digit()) =>
                {
                    self.pos_advance(2);
                    self.push(Kind::OptChain, String::new(), line, column);
                }
                '+' | '-' if self.peek(1) == Some(c) => {
                    self.pos_advance(2);
                    self.push(Kind::IncDec, String::new(), line, column);
                }
                '#' if self.peek(1).is_some_and(is_id_start) => {
                    self.bump();
                    let name = self.lex_ident();
                    self.push(Kind::Private, name, line, column);
                }
                _ if is_id_start(c) || (c == '\\' && self.peek(1) == Some('u')) => {
                    let name = self.lex_ident();
                    self.push(Kind::Ident, name, line, column);
                }
                _ => {
                    self.bump();
                    self.push(Kind::Punct(c), String::new(), line, column);
                }
            }
        }
        self.tokens
    }

    fn pos_advance(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    /// Skips to (not past) the next line terminator.
    fn skip_line(&mut self) {
        while let Some(c) = self.peek(0) {
            if is_line_terminator(c) {
                break;
            }
            self.bump();
        }
    }

    fn skip_block_comment(&mut self) {
        self.pos_advance(2);
        while let Some(c) = self.bump() {
            if is_line_terminator(c) {
                self.nl_before = true;
            } else if c == '*' && self.peek(0) == Some('/') {
                self.bump();
                return;
            }
        }
    }

    fn skip_regex(&mut self) {
        self.bump();
        let mut in_class = false;
        while let Some(c) = self.peek(0) {
            if is_line_terminator(c) {
                return; // unterminated; resynchronise on the next line
            }
            self.bump();
            match c {
                '\\' if self.peek(0).is_some_and(|n| !is_line_terminator(n)) => {
                    self.bump();
                }
                '[' => in_class = true,
                ']' => in_class = false,
                '/' if !in_class => {
                    while self.peek(0).is_some_and(is_id_continue) {
                        self.bump();
                    }
                    return;
                }
                _ => {}
            }
        }
    }

    fn skip_number(&mut self) {
        let radix = self.peek(0) == Some('0')
            && matches!(self.peek(1), Some('x' | 'X' | 'o' | 'O' | 'b' | 'B'));
        let mut seen_dot = false;
        while let Some(c) = self.peek(0) {
            if c.is_ascii_alphanumeric() || c == '_' {
                let exponent =
                    !radix && matches!(c, 'e' | 'E') && matches!(self.peek(1), Some('+' | '-'));
                self.bump();
                if exponent {
                    self.bump();
                }
            } else if c == '.' && !seen_dot && !radix {
                seen_dot = true;
                self.bump();
            } else {
                break;
            }
        }
    }

    fn lex_ident(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek(0) {
            if c == '\\' && self.peek(1) == Some('u') {
                self.pos_advance(2);
                if let Some(d) = self.unicode_escape() {
                    name.push(d);
                }
            } else if is_id_continue(c) {
                name.push(c);
                self.bump();
            } else {
                break;
            }
        }
        name
    }

    fn lex_string(&mut self, quote: char) -> String {
        self.bump();
        let mut value = String::new();
        while let Some(c) = self.peek(0) {
            if c == quote {
                self.bump();
                break;
            }
            if c == '\n' || c == '\r' {
                break; // unterminated; resynchronise on the next line
            }
            self.bump();
            if c == '\\' {
                if let Some(d) = self.escape() {
                    value.push(d);
                }
            } else {
                value.push(c);
            }
        }
        value
    }

    /// Lexes one template chunk; the opening backtick or `}` is already consumed.
    fn lex_template(&mut self, from_start: bool, line: u32, column: u32) {
        let mut value = String::new();
        loop {
            match self.peek(0) {
                None | Some('`') => {
                    self.bump();
                    let kind = Kind::Template {
                        complete: from_start,
                        opens: false,
                    };
                    self.push(kind, value, line, column);
                    return;
                }
                Some('$') if self.peek(1) == Some('{') => {
                    self.pos_advance(2);
                    self.braces.push(true);
                    let kind = Kind::Template {
                        complete: false,
                        opens: true,
                    };
                    self.push(kind, String::new(), line, column);
                    return;
                }
                Some('\\') => {
                    self.bump();
                    if let Some(d) = self.escape() {
                        value.push(d);
                    }
                }
                Some(c) => {
                    self.bump();
                    if from_start {
                        value.push(c);
                    }
                }
            }
        }
    }

    /// Decodes an escape after a consumed backslash; `None` for line
    /// continuations and malformed escapes.
    fn escape(&mut self) -> Option<char> {
        let c = self.bump()?;
        Some(match c {
            'n' => '\n',
            't' => '\t',
            'r' => '\r',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'v' => '\u{b}',
            'x' => return self.hex_digits(2).and_then(char::from_u32),
            'u' => return self.unicode_escape(),
            '0'..='7' => {
                let mut value = c as u32 - '0' as u32;
                while let Some(d) = self.peek(0).and_then(|d| d.to_digit(8)) {
                    if value * 8 + d > 0o377 {
                        break;
                    }
                    value = value * 8 + d;
                    self.bump();
                }
                return char::from_u32(value);
            }
            '\r' => {
                if self.peek(0) == Some('\n') {
                    self.bump();
                }
                return None;
            }
            '\n' | '\u{2028}' | '\u{2029}' => return None,
            other => other,
        })
    }

    /// Reads up to `n` hex digits; `None` if there are none.
    fn hex_digits(&mut self, n: usize) -> Option<u32> {
        let mut value = None;
        for _ in 0..n {
            let Some(d) = self.peek(0).and_then(|d| d.to_digit(16)) else {
                break;
            };
            self.bump();
            value = Some(value.unwrap_or(0) * 16 + d);
        }
        value
    }

    /// Decodes `XXXX` or `{X...}` after a consumed `\u`.
    fn unicode_escape(&mut self) -> Option<char> {
        if self.peek(0) != Some('{') {
            return self.hex_digits(4).and_then(char::from_u32);
        }
        self.bump();
        let mut value: u32 = 0;
        let mut valid = true;
        while let Some(c) = self.peek(0) {
            if c == '}' {
                self.bump();
                break;
            }
            let Some(d) = c.to_digit(16) else {
                valid = false;
                break;
            };
            self.bump();
            value = value.saturating_mul(16).saturating_add(d);
        }
        if valid { char::from_u32(value) } else { None }
    }
}

// ---------------------------------------------------------------------------
// Checker
// ---------------------------------------------------------------------------

struct Checker<'t> {
    tokens: &'t [Token],
    /// For each `(`, `[`, `{`: index of its closer, or `usize::MAX`.
    closer: Vec<usize>,
    /// The token sits directly in a class body (not in a nested bracket).
    in_class_body: Vec<bool>,
    /// The token ends an expression that is the global object.
    global_obj: Vec<bool>,
    /// The token ends an expression that is the global `fs`.
    fs_obj: Vec<bool>,
    uses: Vec<BlockedUse>,
    /// Capability globals referenced (`fetch`, `fs`, `crypto`).
    used: BTreeSet<Capability>,
}

impl<'t> Checker<'t> {
    fn new(tokens: &'t [Token]) -> Self {
        let n = tokens.len();
        let mut closer = vec![usize::MAX; n];
        let mut in_class_body = vec![false; n];
        let mut stack: Vec<(usize, bool)> = Vec::new();
        let mut pending_class: Option<usize> = None;
        for (i, t) in tokens.iter().enumerate() {
            in_class_body[i] = matches!(stack.last(), Some(&(_, true)));
            match t.kind {
                Kind::Punct('(' | '[') => stack.push((i, false)),
                Kind::Punct('{') => {
                    let is_class = pending_class == Some(stack.len());
                    if is_class {
                        pending_class = None;
                    }
                    stack.push((i, is_class));
                }
                Kind::Punct(')' | ']' | '}') => {
                    if let Some((open, _)) = stack.pop() {
                        closer[open] = i;
                    }
                    if pending_class.is_some_and(|depth| depth > stack.len()) {
                        pending_class = None;
                    }
                }
                Kind::Ident if t.value == "class" && !Self::after_member_at(tokens, i) => {
                    pending_class = Some(stack.len());
                }
                _ => {}
            }
        }
        Self {
            tokens,
            closer,
            in_class_body,
            global_obj: vec![false; n],
            fs_obj: vec![false; n],
            uses: Vec::new(),
            used: BTreeSet::new(),
        }
    }

    fn after_member_at(tokens: &[Token], i: usize) -> bool {
        i > 0 && tokens[i - 1].is_member_dot()
    }

    fn tok(&self, i: usize) -> Option<&'t Token> {
        self.tokens.get(i)
    }

    fn prev(&self, i: usize) -> Option<&'t Token> {
        i.checked_sub(1).and_then(|j| self.tokens.get(j))
    }

    fn flag(&mut self, api: impl Into<String>, at: usize, reason: &'static str) {
        let t = &self.tokens[at];
        self.uses.push(BlockedUse {
            api: api.into(),
            line: t.line,
            column: t.column,
            reason,
        });
    }

    fn run(self) -> Vec<BlockedUse> {
        self.scan().0
    }

    /// Walks every token once: the blocked uses and the capabilities used.
    fn scan(mut self) -> (Vec<BlockedUse>, BTreeSet<Capability>) {
        for i in 0..self.tokens.len() {
            let t = &self.tokens[i];
            match t.kind {
                Kind::Ident => self.ident(i),
                Kind::Str => {
                    self.blocked_string(i);
                    self.bracket_string(i);
                }
                Kind::Template { complete: true, .. } => self.blocked_string(i),
                Kind::Punct('[') => self.computed_fs(i),
                _ => {}
            }
        }
        (self.uses, self.used)
    }

    fn ident(&mut self, i: usize) {
        let t = &self.tokens[i];
        let name = t.value.as_str();
        if Self::after_member_at(self.tokens, i) {
            if i >= 2 {
                let obj = i - 2;
                if self.global_obj[obj] {
                    self.resolve(name, i, i, false);
                } else if self.fs_obj[obj] {
                    self.fs_member(name, i);
                }
            }
            return;
        }
        if self.is_object_key(i) || self.is_method_name(i) || self.is_class_member(i) {
            return;
        }
        match name {
            "import" => match self.tok(i + 1).map(|n| n.kind) {
                Some(Kind::Punct('(')) => self.flag("import()", i, REASON_MODULE),
                Some(Kind::Punct('.')) => self.flag("import.meta", i, REASON_MODULE),
                _ => self.flag("import", i, REASON_MODULE),
            },
            "export" => {
                let reexport = match self.tok(i + 1).map(|n| n.kind) {
                    Some(Kind::Punct('*')) => true,
                    Some(Kind::Punct('{')) => self
                        .closer
                        .get(i + 1)
                        .and_then(|&c| self.tok(c.checked_add(1)?))
                        .is_some_and(|n| n.is_ident("from")),
                    _ => false,
                };
                if reexport {
                    self.flag("export from", i, REASON_MODULE);
                }
            }
            _ => self.resolve(name, i, i, true),
        }
    }

    /// Handles a reference to global `name` whose name token is `at` and whose
    /// expression ends at token `end`.
    fn resolve(&mut self, name: &str, at: usize, end: usize, bare: bool) {
        if let Some(&(api, reason)) = BLOCKED_GLOBALS.iter().find(|(n, _)| *n == name) {
            self.flag(api, at, reason);
        }
        if GLOBAL_ALIASES.contains(&name) || (bare && name == "this") {
            self.global_obj[end] = true;
        }
        if name == "fs" {
            self.fs_obj[end] = true;
        }
        match name {
            "fetch" => self.used.insert(Capability::Fetch),
            "fs" => self.used.insert(Capability::FsReadFile),
            "crypto" => self.used.insert(Capability::Crypto),
            _ => false,
        };
    }

    fn fs_member(&mut self, name: &str, at: usize) {
        if !FS_ALLOWED.contains(&name) {
            self.flag(format!("fs.{name}"), at, REASON_FS);
        }
    }

    fn blocked_string(&mut self, i: usize) {
        let value = self.tokens[i].value.as_str();
        if let Some(&(_, api, reason)) = BLOCKED_STRINGS.iter().find(|(s, ..)| *s == value) {
            self.flag(api, i, reason);
        }
    }

    /// Object end for a `[` at `open`, looking through an optional `?.`.
    fn bracket_object(&self, open: usize) -> Option<usize> {
        let before = open.checked_sub(1)?;
        if self.tokens[before].kind == Kind::OptChain {
            before.checked_sub(1)
        } else {
            Some(before)
        }
    }

    /// `obj['name']` where obj is the global object or `fs`.
    fn bracket_string(&mut self, i: usize) {
        let Some(open) = i.checked_sub(1) else {
            return;
        };
        if !self.tokens[open].is_punct('[') || !self.tok(i + 1).is_some_and(|t| t.is_punct(']')) {
            return;
        }
        let Some(obj) = self.bracket_object(open) else {
            return;
        };
        let name = self.tokens[i].value.as_str();
        if self.global_obj[obj] {
            self.resolve(name, i, i + 1, false);
        } else if self.fs_obj[obj] {
            self.fs_member(name, i);
        }
    }

    /// `fs[expr]` with a computed, non-literal key.
    fn computed_fs(&mut self, open: usize) {
        let Some(obj) = self.bracket_object(open) else {
            return;
        };
        let literal = self.tok(open + 1).is_some_and(|t| t.kind == Kind::Str)
            && self.tok(open + 2).is_some_and(|t| t.is_punct(']'));
        if self.fs_obj[obj] && !literal {
            self.flag("fs[...]", open, REASON_FS);
        }
    }

    /// `{ name: ...` or `, name: ...`.
    fn is_object_key(&self, i: usize) -> bool {
        self.tok(i + 1).is_some_and(|t| t.is_punct(':'))
            && self
                .prev(i)
                .is_some_and(|p| p.is_punct('{') || p.is_punct(','))
    }

    /// `{ name(...) {` — a method definition, not a call.
    fn is_method_name(&self, i: usize) -> bool {
        let Some(p) = self.prev(i) else {
            return false;
        };
        let prev_ok = p.is_punct('{')
            || p.is_punct(',')
            || p.is_punct('*')
            || (p.kind == Kind::Ident && MEMBER_MODIFIERS.contains(&p.value.as_str()));
        prev_ok
            && self.tok(i + 1).is_some_and(|t| t.is_punct('('))
            && self.closer[i + 1]
                .checked_add(1)
                .and_then(|j| self.tok(j))
                .is_some_and(|t| t.is_punct('{'))
    }

    /// A member name directly in a class body (method, field, accessor).
    fn is_class_member(&self, i: usize) -> bool {
        if !self.in_class_body[i] {
            return false;
        }
        let Some(p) = self.prev(i) else {
            return false;
        };
        p.is_punct('{')
            || p.is_punct('}')
            || p.is_punct(';')
            || p.is_punct('*')
            || (p.kind == Kind::Ident && MEMBER_MODIFIERS.contains(&p.value.as_str()))
            || (self.tokens[i].nl_before && p.ends_operand())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(src: &str) -> Vec<(String, u32, u32)> {
        match check(src) {
            Ok(()) => Vec::new(),
            Err(StaticCheckError(uses)) => uses
                .into_iter()
                .map(|u| (u.api, u.line, u.column))
                .collect(),
        }
    }

    fn one(api: &str, line: u32, column: u32) -> Vec<(String, u32, u32)> {
        vec![(api.to_string(), line, column)]
    }

    fn clean(src: &str) {
        assert_eq!(check(src), Ok(()), "expected clean: {src}");
    }

    const SEED_CSV: &str = "function execute(input) {\n const delim = input.delimiter || ',';\n const lines = input.csv.trim().split('\\n');\n const headers = lines[0].split(delim).map(h => h.trim());\n const rows = lines.slice(1).map(line => {\n const values = line.split(delim);\n return Object.fromEntries(headers.map((h, i) => [h, values[i]?.trim()]));\n });\n return { headers, rows };\n}";
    const SEED_SLUG: &str = "function execute(input) { const slug = input.text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, ''); return { slug }; }";
    const SEED_HEAD: &str = "async function execute(input) {\n const res = await fetch(input.url, { method: 'HEAD', redirect: 'follow' });\n return { status: res.status, ok: res.ok, redirected: res.redirected };\n}";
    const SEED_SUM: &str = "function execute(input) { return { sum: input.a + input.b }; }";

    #[test]
    fn seed_tools_pass() {
        for src in [SEED_CSV, SEED_SLUG, SEED_HEAD, SEED_SUM] {
            clean(src);
        }
    }

    #[test]
    fn eval_call() {
        assert_eq!(uses("eval('1 + 1')"), one("eval", 1, 1));
        assert_eq!(uses("const x = eval(s);"), one("eval", 1, 11));
    }

    #[test]
    fn function_constructor_forms() {
        assert_eq!(uses("new Function('a', 'return a')"), one("Function", 1, 5));
        assert_eq!(uses("Function('return 1')()"), one("Function", 1, 1));
        assert_eq!(uses("x = Function.prototype"), one("Function", 1, 5));
        assert_eq!(uses("f instanceof Function"), one("Function", 1, 14));
    }

    #[test]
    fn require_is_module_escape() {
        let err = check("const m = require('os');").unwrap_err();
        assert_eq!(
            err.0,
            vec![BlockedUse {
                api: "require".into(),
                line: 1,
                column: 11,
                reason: REASON_MODULE,
            }]
        );
    }

    #[test]
    fn dynamic_import() {
        assert_eq!(
            uses("const m = await import('os');"),
            one("import()", 1, 17)
        );
        assert_eq!(
            uses("const u = import.meta.url;"),
            one("import.meta", 1, 11)
        );
    }

    #[test]
    fn static_import_and_reexport() {
        assert_eq!(uses("import fs from 'fs';"), one("import", 1, 1));
        assert_eq!(uses("\nimport { a } from 'b';"), one("import", 2, 1));
        assert_eq!(uses("import 'side-effect';"), one("import", 1, 1));
        assert_eq!(uses("export * from 'x';"), one("export from", 1, 1));
        assert_eq!(uses("export { a, b } from 'x';"), one("export from", 1, 1));
        clean("export function execute(input) { return input; }");
        clean("const a = 1; export { a };");
    }

    #[test]
    fn process_and_webassembly() {
        assert_eq!(uses("const k = process.env.KEY;"), one("process", 1, 11));
        assert_eq!(uses("typeof process"), one("process", 1, 8));
        assert_eq!(uses("f(...process.argv)"), one("process", 1, 6));
        assert_eq!(uses("WebAssembly.compile(b)"), one("WebAssembly", 1, 1));
    }

    #[test]
    fn child_process_strings() {
        assert_eq!(uses("x('child_process')"), one("child_process", 1, 3));
        assert_eq!(
            uses("x(\"node:child_process\")"),
            one("child_process", 1, 3)
        );
        assert_eq!(uses("x(`child_process`)"), one("child_process", 1, 3));
        assert_eq!(
            uses("const cp = require('child_process');"),
            vec![
                ("require".to_string(), 1, 12),
                ("child_process".to_string(), 1, 20)
            ]
        );
        // Prose mentioning it is ordinary string text.
        clean("const msg = 'do not use child_process here';");
    }

    #[test]
    fn fs_write_family_blocked() {
        for member in [
            "writeFile",
            "writeFileSync",
            "appendFile",
            "unlink",
            "unlinkSync",
            "mkdir",
            "mkdirSync",
            "rm",
            "rmdir",
            "rename",
            "copyFile",
            "symlink",
            "chmod",
            "open",
            "promises",
            "createWriteStream",
        ] {
            let src = format!("await fs.{member}(p);");
            assert_eq!(uses(&src), one(&format!("fs.{member}"), 1, 10), "{src}");
        }
    }

    #[test]
    fn fs_read_allow_list() {
        for member in FS_ALLOWED {
            clean(&format!("const d = fs.{member}(p);"));
            clean(&format!("const d = fs['{member}'](p);"));
        }
        clean("input.fs.writeFile(x)");
        clean("const o = { fs: 1 };");
    }

    #[test]
    fn fs_bracket_and_computed() {
        assert_eq!(uses("fs['writeFile'](p, d)"), one("fs.writeFile", 1, 4));
        assert_eq!(uses("fs?.[name](p)"), one("fs[...]", 1, 5));
        assert_eq!(uses("fs\n  .unlinkSync(p)"), one("fs.unlinkSync", 2, 4));
        assert_eq!(uses("globalThis.fs.rm(p)"), one("fs.rm", 1, 15));
    }

    #[test]
    fn global_object_access() {
        assert_eq!(uses("globalThis.eval(s)"), one("eval", 1, 12));
        assert_eq!(uses("globalThis['eval'](s)"), one("eval", 1, 12));
        assert_eq!(uses("globalThis[\"Function\"]"), one("Function", 1, 12));
        assert_eq!(uses("this.eval(s)"), one("eval", 1, 6));
        assert_eq!(uses("this['require']('os')"), one("require", 1, 6));
        assert_eq!(uses("self['require']('os')"), one("require", 1, 6));
        assert_eq!(uses("globalThis?.eval(s)"), one("eval", 1, 13));
        assert_eq!(uses("globalThis?.['eval'](s)"), one("eval", 1, 14));
        assert_eq!(uses("globalThis.self.eval(s)"), one("eval", 1, 17));
        assert_eq!(uses("globalThis['self']['process']"), one("process", 1, 20));
        assert_eq!(uses("globalThis['\\x65val'](s)"), one("eval", 1, 12));
    }

    #[test]
    fn member_names_not_flagged() {
        clean("obj.eval(x); input.process; x.require('a'); a?.Function; b.WebAssembly");
        clean("input.process.eval.require");
        clean("obj['eval']; arr['process']");
        clean("this.#eval = 1; this.#process();");
    }

    #[test]
    fn object_keys_and_methods_not_flagged() {
        clean("const o = { process: 1, eval: 2, require: 3, import: 4, Function: 5 };");
        clean("const o = { eval(x) { return x; }, async process(y) { return y; } };");
        clean("const o = { get process() { return 1; }, set eval(v) {} };");
    }

    #[test]
    fn class_members_not_flagged() {
        clean("class A { process(x) { return x; } static eval() {} }");
        clean(
            "class B extends C {\n  process = 1\n  require = 2;\n  get Function() { return 0; }\n}",
        );
        // ...but code inside class members is checked.
        assert_eq!(
            uses("class A { run() { return eval(x); } }"),
            one("eval", 1, 26)
        );
        assert_eq!(uses("class A { f = process.env; }"), one("process", 1, 15));
    }

    #[test]
    fn shorthand_and_ternary_are_references() {
        assert_eq!(uses("const o = { process };"), one("process", 1, 13));
        assert_eq!(uses("const f = c ? eval : g;"), one("eval", 1, 15));
        assert_eq!(uses("switch (x) { case eval: break; }"), one("eval", 1, 19));
    }

    #[test]
    fn comments_not_flagged() {
        clean("// eval(x) require('child_process')\nconst a = 1;");
        clean("/* process.exit()\n   new Function('x') */ const a = 1;");
        clean("#!/usr/bin/env node eval\nconst a = 1;");
        assert_eq!(
            uses("/* eval\n eval */ eval(x)"),
            one("eval", 2, 10),
            "position after a multi-line comment"
        );
    }

    #[test]
    fn strings_not_flagged() {
        clean("const s = 'eval(x)'; const t = \"process.env\"; const u = 'require';");
        clean("const s = 'it\\'s eval'; const t = \"say \\\"Function\\\"\";");
        clean("const s = `text eval(x) and process and require`;");
        clean("const s = 'line\\\ncontinued eval';");
    }

    #[test]
    fn template_substitutions_are_checked() {
        assert_eq!(uses("const s = `a ${eval(x)} b`;"), one("eval", 1, 16));
        assert_eq!(uses("`${`${process}`}`"), one("process", 1, 7));
        assert_eq!(
            uses("`${ {a: 1}.a } eval ${ x } require`; require(y)"),
            one("require", 1, 38)
        );
        assert_eq!(uses("`\n  ${\n    eval(x)}`"), one("eval", 3, 5));
        clean("`${a}/${b}/eval(`");
    }

    #[test]
    fn regex_literals_not_flagged() {
        clean("const ok = /eval\\(/.test(s);");
        clean("const r = /[/]eval('x')/g;");
        clean("function f(s) { return /process|require/i.test(s); }");
        clean("if (!/Function\\//.test(s)) {}");
        clean("const r = [/eval/, /`/];");
    }

    #[test]
    fn division_is_not_a_regex() {
        assert_eq!(uses("const a = b / 2; eval(c) / 3;"), one("eval", 1, 18));
        assert_eq!(uses("(x) / eval(y) / 2"), one("eval", 1, 7));
        assert_eq!(uses("a[0] / eval(y) / 2"), one("eval", 1, 8));
        assert_eq!(uses("1.5e+3 / eval(y) / 2"), one("eval", 1, 10));
        assert_eq!(uses("i++ / eval(y) / 2"), one("eval", 1, 7));
        assert_eq!(uses("x.return / eval(y) / 2"), one("eval", 1, 12));
    }

    #[test]
    fn multi_line_positions_and_order() {
        let src =
            "function f() {\n  const a = 1;\n  return eval(a) + require('x');\n}\nprocess.exit(0);";
        assert_eq!(
            uses(src),
            vec![
                ("eval".to_string(), 3, 10),
                ("require".to_string(), 3, 20),
                ("process".to_string(), 5, 1),
            ]
        );
    }

    #[test]
    fn crlf_line_endings() {
        assert_eq!(uses("a;\r\nb;\r\n  eval(x)"), one("eval", 3, 3));
        assert_eq!(uses("/* x\r\n y */\r\n\tprocess"), one("process", 3, 2));
        assert_eq!(uses("a;\rb;\r eval(x)"), one("eval", 3, 2));
    }

    #[test]
    fn non_ascii_columns_count_chars() {
        assert_eq!(
            uses("const ü = 'é🎉'; const 名前 = 1; eval(x)"),
            one("eval", 1, 31)
        );
        clean("const café = 1; const ünïcödé = café; const ƒ = x => x;");
        clean("const s = '\u{2028}';\u{feff}const t = 1;");
    }

    #[test]
    fn identifier_escapes_are_decoded() {
        assert_eq!(uses("\\u0065val(x)"), one("eval", 1, 1));
        assert_eq!(uses("x = \\u{70}rocess"), one("process", 1, 5));
    }

    #[test]
    fn malformed_input_does_not_panic() {
        for src in [
            "'unterminated",
            "\"unterminated\neval(x)",
            "`unterminated ${",
            "`unterminated ${ eval",
            "/* unterminated",
            "/unterminated regex",
            "}}}}]]))",
            "\\",
            "\\u{110000}",
            "'\\u{ffffffffff}'",
            "'\\x'",
            "#",
            "a?.",
            "fs[",
            "globalThis[",
            "export {",
            "export { a",
            "{ x; eval(",
            "class",
            "0x",
        ] {
            let _ = check(src);
        }
        assert_eq!(uses("\"unterminated\neval(x)"), one("eval", 2, 1));
        // An unclosed `(` must not make a call look like a method definition.
        assert_eq!(uses("{ x; eval("), one("eval", 1, 6));
    }

    #[test]
    fn error_message_format() {
        let err = check("x;\nlet a;\n  eval(1)\n\n\n\nrequire('a')").unwrap_err();
        assert_eq!(
            err.to_string(),
            "blocked API `eval` at 3:3 (arbitrary code execution); \
             blocked API `require` at 7:1 (module system escape)"
        );
    }

    #[test]
    fn import_and_export_as_names_not_flagged() {
        clean("obj.import(x); const o = { import: 1, export: 2 }; o.export;");
        clean("class A { import() {} }");
    }

    #[test]
    fn numbers_and_punctuation_do_not_confuse() {
        clean("const a = 0x1F / 2 + .5 / 3 + 1_000n + 1..toString();");
        clean("const b = a?.b ?? c; const d = x ? .5 : 1;");
    }

    #[test]
    fn one_mebibyte_input_completes() {
        let mut src = String::with_capacity(1 << 20);
        while src.len() < (1 << 20) {
            src.push_str(SEED_CSV);
            src.push_str("\n// eval(x) in a comment\nconst s = `${a} /re/ ${'process'}`;\n");
        }
        clean(&src);

        let mut deep = String::with_capacity(1 << 20);
        deep.push_str("globalThis");
        while deep.len() < (1 << 20) {
            deep.push_str(".self");
        }
        deep.push_str(".eval");
        assert_eq!(uses(&deep).len(), 1);

        let many = "eval;".repeat((1 << 20) / 5);
        assert_eq!(uses(&many).len(), (1 << 20) / 5);

        let nested = "`${".repeat(100_000);
        let _ = check(&nested);
    }

    #[test]
    fn used_capabilities_reads_global_references_only() {
        use crate::policy::Capability::*;
        let used = |src: &str| used_capabilities(src).into_iter().collect::<Vec<_>>();
        assert_eq!(
            used("async function execute(i) { return (await fetch(i.url)).status; }"),
            [Fetch]
        );
        assert_eq!(
            used("function execute(i) { return fs.readFileSync('/data/a.txt', 'utf8'); }"),
            [FsReadFile]
        );
        assert_eq!(
            used("function execute() { return crypto.randomUUID(); }"),
            [Crypto]
        );
        assert_eq!(
            used("const f = globalThis.fetch; const h = globalThis['crypto'];"),
            [Fetch, Crypto]
        );
        assert_eq!(
            used("const c = crypto; fetch('x'); fs.promises;"),
            [Fetch, FsReadFile, Crypto]
        );
        // Members, keys, text and comments are not uses.
        assert!(
            used("// fetch(x)\nconst o = { fetch: 1, crypto() {} }; o.fetch; 'fs'; `crypto`")
                .is_empty()
        );
    }
}
