//! The checker: walks the tokens, tracking brackets, class bodies and
//! aliases of the global object, and records every blocked use and every
//! capability global referenced.

use super::*;

pub(super) struct Checker<'t> {
    pub(super) tokens: &'t [Token],
    /// For each `(`, `[`, `{`: index of its closer, or `usize::MAX`.
    pub(super) closer: Vec<usize>,
    /// The token sits directly in a class body (not in a nested bracket).
    pub(super) in_class_body: Vec<bool>,
    /// The token ends an expression that is the global object.
    pub(super) global_obj: Vec<bool>,
    /// The token ends an expression that is the global `fs`.
    pub(super) fs_obj: Vec<bool>,
    pub(super) uses: Vec<BlockedUse>,
    /// Capability globals referenced (`fetch`, `fs`, `crypto`).
    pub(super) used: BTreeSet<Capability>,
}

impl<'t> Checker<'t> {
    pub(super) fn new(tokens: &'t [Token]) -> Self {
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

    pub(super) fn after_member_at(tokens: &[Token], i: usize) -> bool {
        i > 0 && tokens[i - 1].is_member_dot()
    }

    pub(super) fn tok(&self, i: usize) -> Option<&'t Token> {
        self.tokens.get(i)
    }

    pub(super) fn prev(&self, i: usize) -> Option<&'t Token> {
        i.checked_sub(1).and_then(|j| self.tokens.get(j))
    }

    pub(super) fn flag(&mut self, api: impl Into<String>, at: usize, reason: &'static str) {
        let t = &self.tokens[at];
        self.uses.push(BlockedUse {
            api: api.into(),
            line: t.line,
            column: t.column,
            reason,
        });
    }

    pub(super) fn run(self) -> Vec<BlockedUse> {
        self.scan().0
    }

    /// Walks every token once: the blocked uses and the capabilities used.
    pub(super) fn scan(mut self) -> (Vec<BlockedUse>, BTreeSet<Capability>) {
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

    pub(super) fn ident(&mut self, i: usize) {
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
    pub(super) fn resolve(&mut self, name: &str, at: usize, end: usize, bare: bool) {
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

    pub(super) fn fs_member(&mut self, name: &str, at: usize) {
        if name == "promises" {
            // `fs.promises.readFile` is the promise form of the allowed read;
            // any other member of `fs.promises` is named in full.
            let member = self
                .tok(at + 2)
                .filter(|t| t.kind == Kind::Ident && Self::after_member_at(self.tokens, at + 2));
            if let Some(t) = member {
                if t.value != "readFile" {
                    self.flag(format!("fs.promises.{}", t.value), at, REASON_FS);
                }
                return;
            }
        }
        if !FS_ALLOWED.contains(&name) {
            self.flag(format!("fs.{name}"), at, REASON_FS);
        }
    }

    pub(super) fn blocked_string(&mut self, i: usize) {
        let value = self.tokens[i].value.as_str();
        if let Some(&(_, api, reason)) = BLOCKED_STRINGS.iter().find(|(s, ..)| *s == value) {
            self.flag(api, i, reason);
        }
    }

    /// Object end for a `[` at `open`, looking through an optional `?.`.
    pub(super) fn bracket_object(&self, open: usize) -> Option<usize> {
        let before = open.checked_sub(1)?;
        if self.tokens[before].kind == Kind::OptChain {
            before.checked_sub(1)
        } else {
            Some(before)
        }
    }

    /// `obj['name']` where obj is the global object or `fs`.
    pub(super) fn bracket_string(&mut self, i: usize) {
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
    pub(super) fn computed_fs(&mut self, open: usize) {
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
    pub(super) fn is_object_key(&self, i: usize) -> bool {
        self.tok(i + 1).is_some_and(|t| t.is_punct(':'))
            && self
                .prev(i)
                .is_some_and(|p| p.is_punct('{') || p.is_punct(','))
    }

    /// `{ name(...) {` — a method definition, not a call.
    pub(super) fn is_method_name(&self, i: usize) -> bool {
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
    pub(super) fn is_class_member(&self, i: usize) -> bool {
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
