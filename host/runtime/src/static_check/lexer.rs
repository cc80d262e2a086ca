//! The tokenizer the static check runs on: JavaScript tokens with their
//! positions, regular-expression and template literals told apart from
//! division and strings.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
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
pub(super) struct Token {
    pub(super) kind: Kind,
    pub(super) value: String,
    pub(super) line: u32,
    pub(super) column: u32,
    /// A line terminator precedes this token (after the previous one).
    pub(super) nl_before: bool,
}

impl Token {
    pub(super) fn is_punct(&self, c: char) -> bool {
        self.kind == Kind::Punct(c)
    }

    pub(super) fn is_ident(&self, name: &str) -> bool {
        self.kind == Kind::Ident && self.value == name
    }

    /// `.` or `?.`: the next identifier is a member name.
    pub(super) fn is_member_dot(&self) -> bool {
        matches!(self.kind, Kind::Punct('.') | Kind::OptChain)
    }

    /// The token can end an operand (so a following newline starts a new item).
    pub(super) fn ends_operand(&self) -> bool {
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

pub(super) fn is_line_terminator(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}')
}

pub(super) fn is_id_start(c: char) -> bool {
    c.is_ascii_alphabetic()
        || c == '$'
        || c == '_'
        || (!c.is_ascii() && !c.is_whitespace() && !is_line_terminator(c) && c != '\u{feff}')
}

pub(super) fn is_id_continue(c: char) -> bool {
    is_id_start(c) || c.is_ascii_digit()
}

pub(super) struct Lexer {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) line: u32,
    pub(super) column: u32,
    pub(super) tokens: Vec<Token>,
    pub(super) nl_before: bool,
    pub(super) regex_allowed: bool,
    /// One entry per open `{`: `true` if it is a template `${`.
    pub(super) braces: Vec<bool>,
}

impl Lexer {
    pub(super) fn new(source: &str) -> Self {
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

    pub(super) fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    pub(super) fn bump(&mut self) -> Option<char> {
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

    pub(super) fn push(&mut self, kind: Kind, value: String, line: u32, column: u32) {
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

    pub(super) fn run(mut self) -> Vec<Token> {
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

    pub(super) fn pos_advance(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    /// Skips to (not past) the next line terminator.
    pub(super) fn skip_line(&mut self) {
        while let Some(c) = self.peek(0) {
            if is_line_terminator(c) {
                break;
            }
            self.bump();
        }
    }

    pub(super) fn skip_block_comment(&mut self) {
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

    pub(super) fn skip_regex(&mut self) {
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

    pub(super) fn skip_number(&mut self) {
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

    pub(super) fn lex_ident(&mut self) -> String {
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

    pub(super) fn lex_string(&mut self, quote: char) -> String {
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
    pub(super) fn lex_template(&mut self, from_start: bool, line: u32, column: u32) {
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
    pub(super) fn escape(&mut self) -> Option<char> {
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
    pub(super) fn hex_digits(&mut self, n: usize) -> Option<u32> {
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
    pub(super) fn unicode_escape(&mut self) -> Option<char> {
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
