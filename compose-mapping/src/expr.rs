//! The expression syntax inside `inputMapping` strings: references
//! (`$input.a`, `$prev`, `$steps.NAME.x`, `${input.a b}`), the `$$` escape,
//! and how a string splits into literal text and references.
//!
//! This module only parses; whether `$steps.NAME` names an earlier step is
//! checked by [`crate::mapping::compile`], and values are looked up
//! by [`crate::mapping::evaluate`]. The host's `temper::compose` module
//! documents the rules with examples.

use std::fmt;

use thiserror::Error;

/// Where a reference starts looking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Root {
    /// `$input`: the compose tool's own input.
    Input,
    /// `$prev`: the output of the step just before this one.
    Prev,
    /// `$steps.NAME`: the output of the earlier step `NAME`.
    Step(String),
}

/// A reference: a root and a path of field names / array indices under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The root.
    pub root: Root,
    /// The path segments after the root (and after the step name for
    /// [`Root::Step`]), in order.
    pub path: Vec<String>,
    /// The reference as written (`$input.a`, `${input.a}`), for messages.
    pub text: String,
}

impl Reference {
    /// The root and the first `n` path segments written in dotted form
    /// (`$input.items`), naming where a lookup stopped.
    pub fn prefix(&self, n: usize) -> String {
        let mut out = match &self.root {
            Root::Input => "$input".to_owned(),
            Root::Prev => "$prev".to_owned(),
            Root::Step(name) => format!("$steps.{name}"),
        };
        for segment in &self.path[..n.min(self.path.len())] {
            out.push('.');
            out.push_str(segment);
        }
        out
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A piece of an interpolated string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Literal text (escapes already resolved).
    Text(String),
    /// A reference whose value is inserted as text.
    Ref(Reference),
}

/// What a mapping string means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StringExpr {
    /// No references: the string itself (with `$$` turned into `$`).
    Literal(String),
    /// The whole string is one reference: the value keeps its JSON type.
    Whole(Reference),
    /// Text and references: the references are interpolated as text.
    Template(Vec<Part>),
}

/// A syntax error in a mapping string.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{kind} (at character {column} of {source_text:?})")]
pub struct ExprError {
    /// What is wrong.
    pub kind: ExprErrorKind,
    /// Character (not byte) offset of the offending `$` in the string, 0-based.
    pub column: usize,
    /// The whole string, for context.
    pub source_text: String,
}

/// The kinds of [`ExprError`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExprErrorKind {
    /// A `$` that starts neither a reference nor the `$$` escape.
    #[error(
        "a lone `$` must start a reference ($input, $prev, $steps.NAME or ${{...}}); \
         write `$$` for a literal `$`"
    )]
    LoneDollar,
    /// A reference whose root is not `input`, `prev` or `steps`.
    #[error(
        "unknown reference `{text}`: a reference starts with $input, $prev or $steps.NAME (write `$$` for a literal `$`)"
    )]
    UnknownRoot {
        /// The reference as written.
        text: String,
    },
    /// `$steps` without a step name.
    #[error("`{text}` needs a step name: $steps.NAME")]
    MissingStepName {
        /// The reference as written.
        text: String,
    },
    /// An empty path segment (`$input..a`, `${input.}`, `${}`).
    #[error("empty path segment in `{text}`")]
    EmptySegment {
        /// The reference as written.
        text: String,
    },
    /// `${` without a closing `}`.
    #[error("`${{` without a closing `}}`")]
    UnterminatedBrace,
}

/// Characters of a bare (unbraced) reference: `$` then the longest run of these.
fn is_bare_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

/// Parses one `inputMapping` string.
///
/// A string without `$` is a literal. Otherwise every `$` must be `$$`
/// (a literal `$`), `${path}` (a braced reference, ending at the first
/// `}`), or `$` followed by a letter or `_` (a bare reference: the longest
/// run of `[A-Za-z0-9_.-]`, minus any trailing dots, which stay text).
pub fn parse(source: &str) -> Result<StringExpr, ExprError> {
    if !source.contains('$') {
        return Ok(StringExpr::Literal(source.to_owned()));
    }
    let error = |at: usize, kind: ExprErrorKind| ExprError {
        kind,
        column: source[..at].chars().count(),
        source_text: source.to_owned(),
    };
    let mut parts: Vec<Part> = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while let Some(rel) = source[i..].find('$') {
        let at = i + rel;
        text.push_str(&source[i..at]);
        let rest = &source[at + 1..];
        match rest.chars().next() {
            Some('$') => {
                text.push('$');
                i = at + 2;
            }
            Some('{') => {
                let close = rest
                    .find('}')
                    .ok_or_else(|| error(at, ExprErrorKind::UnterminatedBrace))?;
                let written = &source[at..at + 1 + close + 1];
                let reference = reference(&rest[1..close], written).map_err(|k| error(at, k))?;
                flush(&mut text, &mut parts);
                parts.push(Part::Ref(reference));
                i = at + 1 + close + 1;
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let run_len = rest.find(|c: char| !is_bare_char(c)).unwrap_or(rest.len());
                let run = rest[..run_len].trim_end_matches('.');
                let written = &source[at..at + 1 + run.len()];
                let reference = reference(run, written).map_err(|k| error(at, k))?;
                flush(&mut text, &mut parts);
                parts.push(Part::Ref(reference));
                i = at + 1 + run.len();
            }
            _ => return Err(error(at, ExprErrorKind::LoneDollar)),
        }
    }
    text.push_str(&source[i..]);
    flush(&mut text, &mut parts);
    Ok(match parts.as_slice() {
        [] => StringExpr::Literal(String::new()),
        [Part::Text(_)] => match parts.pop() {
            Some(Part::Text(t)) => StringExpr::Literal(t),
            _ => unreachable!(),
        },
        [Part::Ref(_)] => match parts.pop() {
            Some(Part::Ref(r)) => StringExpr::Whole(r),
            _ => unreachable!(),
        },
        _ => StringExpr::Template(parts),
    })
}

fn flush(text: &mut String, parts: &mut Vec<Part>) {
    if !text.is_empty() {
        parts.push(Part::Text(std::mem::take(text)));
    }
}

/// Parses a dotted path (`input.a.b`, `steps.fetch.body`) into a reference.
fn reference(path: &str, written: &str) -> Result<Reference, ExprErrorKind> {
    let text = written.to_owned();
    let mut segments = path.split('.');
    let root = segments.next().unwrap_or_default();
    let rest: Vec<String> = segments.map(str::to_owned).collect();
    if root.is_empty() || rest.iter().any(String::is_empty) {
        return Err(ExprErrorKind::EmptySegment { text });
    }
    let (root, path) = match root {
        "input" => (Root::Input, rest),
        "prev" => (Root::Prev, rest),
        "steps" => {
            let mut rest = rest.into_iter();
            match rest.next() {
                Some(name) => (Root::Step(name), rest.collect()),
                None => return Err(ExprErrorKind::MissingStepName { text }),
            }
        }
        _ => return Err(ExprErrorKind::UnknownRoot { text }),
    };
    Ok(Reference { root, path, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(root: Root, path: &[&str], text: &str) -> Reference {
        Reference {
            root,
            path: path.iter().map(|s| s.to_string()).collect(),
            text: text.to_owned(),
        }
    }

    fn whole(s: &str) -> Reference {
        match parse(s).unwrap() {
            StringExpr::Whole(r) => r,
            other => panic!("{s}: {other:?}"),
        }
    }

    fn kind(s: &str) -> ExprErrorKind {
        parse(s).unwrap_err().kind
    }

    #[test]
    fn every_reference_form() {
        assert_eq!(whole("$input"), r(Root::Input, &[], "$input"));
        assert_eq!(
            whole("$input.a.b"),
            r(Root::Input, &["a", "b"], "$input.a.b")
        );
        assert_eq!(whole("$prev"), r(Root::Prev, &[], "$prev"));
        assert_eq!(whole("$prev.x"), r(Root::Prev, &["x"], "$prev.x"));
        assert_eq!(
            whole("$steps.search"),
            r(Root::Step("search".into()), &[], "$steps.search")
        );
        assert_eq!(
            whole("$steps.my-step.x.y"),
            r(
                Root::Step("my-step".into()),
                &["x", "y"],
                "$steps.my-step.x.y"
            )
        );
        assert_eq!(
            whole("$input.items.0.name"),
            r(Root::Input, &["items", "0", "name"], "$input.items.0.name")
        );
    }

    #[test]
    fn braced_form() {
        assert_eq!(whole("${input}"), r(Root::Input, &[], "${input}"));
        assert_eq!(
            whole("${input.first name}"),
            r(Root::Input, &["first name"], "${input.first name}")
        );
        assert_eq!(
            whole("${steps.fetch.body}"),
            r(Root::Step("fetch".into()), &["body"], "${steps.fetch.body}")
        );
        assert_eq!(
            parse("${input.a}-${input.b}").unwrap(),
            StringExpr::Template(vec![
                Part::Ref(r(Root::Input, &["a"], "${input.a}")),
                Part::Text("-".into()),
                Part::Ref(r(Root::Input, &["b"], "${input.b}")),
            ])
        );
        assert_eq!(kind("${input.a"), ExprErrorKind::UnterminatedBrace);
        assert!(matches!(kind("${}"), ExprErrorKind::EmptySegment { .. }));
        assert!(matches!(
            kind("${input.}"),
            ExprErrorKind::EmptySegment { .. }
        ));
        assert!(matches!(
            kind("${ input}"),
            ExprErrorKind::UnknownRoot { .. }
        ));
    }

    #[test]
    fn bare_reference_ends_at_first_other_character() {
        // The seed's own strings.
        assert_eq!(
            parse("about \"$input.topic\":\n$prev.output").unwrap(),
            StringExpr::Template(vec![
                Part::Text("about \"".into()),
                Part::Ref(r(Root::Input, &["topic"], "$input.topic")),
                Part::Text("\":\n".into()),
                Part::Ref(r(Root::Prev, &["output"], "$prev.output")),
            ])
        );
        // Trailing dots are text, `-` is part of the run.
        assert_eq!(
            parse("See $input.a. Then $input.b-c!").unwrap(),
            StringExpr::Template(vec![
                Part::Text("See ".into()),
                Part::Ref(r(Root::Input, &["a"], "$input.a")),
                Part::Text(". Then ".into()),
                Part::Ref(r(Root::Input, &["b-c"], "$input.b-c")),
                Part::Text("!".into()),
            ])
        );
        // Two references back to back.
        assert_eq!(
            parse("$input.a$input.b").unwrap(),
            StringExpr::Template(vec![
                Part::Ref(r(Root::Input, &["a"], "$input.a")),
                Part::Ref(r(Root::Input, &["b"], "$input.b")),
            ])
        );
        // A trailing dot after a whole reference makes it a template.
        assert!(matches!(parse("$input.").unwrap(), StringExpr::Template(_)));
    }

    #[test]
    fn dollar_escape() {
        assert_eq!(parse("$$").unwrap(), StringExpr::Literal("$".into()));
        assert_eq!(
            parse("costs $$5").unwrap(),
            StringExpr::Literal("costs $5".into())
        );
        assert_eq!(
            parse("$$input").unwrap(),
            StringExpr::Literal("$input".into())
        );
        assert_eq!(parse("$$$$").unwrap(), StringExpr::Literal("$$".into()));
        assert_eq!(
            parse("$$$input.a").unwrap(),
            StringExpr::Template(vec![
                Part::Text("$".into()),
                Part::Ref(r(Root::Input, &["a"], "$input.a")),
            ])
        );
        assert_eq!(
            parse("no dollars").unwrap(),
            StringExpr::Literal("no dollars".into())
        );
        assert_eq!(parse("").unwrap(), StringExpr::Literal(String::new()));
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(kind("costs $5"), ExprErrorKind::LoneDollar);
        assert_eq!(kind("end $"), ExprErrorKind::LoneDollar);
        assert_eq!(kind("$ input"), ExprErrorKind::LoneDollar);
        assert_eq!(
            kind("$foo.bar"),
            ExprErrorKind::UnknownRoot {
                text: "$foo.bar".into()
            }
        );
        assert_eq!(
            kind("x $inputs"),
            ExprErrorKind::UnknownRoot {
                text: "$inputs".into()
            }
        );
        assert_eq!(
            kind("$steps"),
            ExprErrorKind::MissingStepName {
                text: "$steps".into()
            }
        );
        assert_eq!(
            kind("$steps."),
            ExprErrorKind::MissingStepName {
                text: "$steps".into()
            }
        );
        assert!(matches!(
            kind("$input..a"),
            ExprErrorKind::EmptySegment { .. }
        ));
        let e = parse("héllo $5").unwrap_err();
        assert_eq!(e.column, 6);
        assert!(
            e.to_string().contains("write `$$` for a literal `$`"),
            "{e}"
        );
    }

    #[test]
    fn prefix_names_where_a_lookup_stopped() {
        let reference = whole("$steps.fetch.body.items.0");
        assert_eq!(reference.prefix(0), "$steps.fetch");
        assert_eq!(reference.prefix(2), "$steps.fetch.body.items");
        assert_eq!(reference.to_string(), "$steps.fetch.body.items.0");
    }
}
