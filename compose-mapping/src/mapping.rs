//! Compiling `inputMapping`s at forge time and evaluating them at run time.
//!
//! [`compile`] parses every string of every step's mapping once (see
//! [`crate::expr`]) and checks that `$prev` and `$steps.NAME` refer
//! to earlier steps; [`evaluate`] builds a step's input from the compose
//! tool's input and the outputs of the steps run so far. Every error names
//! the step and the mapping key path (`steps[1] ("summarize")
//! inputMapping.prompt: ...`).

use serde_json::{Map, Value};
use thiserror::Error;

use crate::expr::{self, ExprError, Part, Reference, Root, StringExpr};
use crate::spec::{ComposeSpec, StepRef, json_type};

/// How deeply objects and arrays may nest inside one `inputMapping`.
pub const MAX_MAPPING_DEPTH: usize = 32;

/// How many field names an error lists before eliding the rest.
const LISTED_KEYS: usize = 10;

/// A compose pipeline with every mapping compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledSpec {
    /// The steps, in the order they run.
    pub steps: Vec<CompiledStep>,
}

/// One compiled step.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledStep {
    /// The step's name.
    pub name: String,
    /// The tool the step calls.
    pub tool: String,
    /// The compiled `inputMapping`.
    pub mapping: CompiledMapping,
}

/// A compiled `inputMapping`: ready to [`evaluate`] without parsing again.
#[derive(Debug, Clone, PartialEq)]
pub struct CompiledMapping {
    step: StepRef,
    root: Node,
}

/// A node of a compiled mapping. `key` is the mapping key path of the node
/// (`inputMapping.a[0]`), kept for error messages.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// A value with no references in it (strings already unescaped).
    Literal(Value),
    /// A string that is exactly one reference.
    Ref { key: String, reference: Reference },
    /// A string with references inside text.
    Template { key: String, parts: Vec<Part> },
    /// An object with at least one reference somewhere below.
    Object(Vec<(String, Node)>),
    /// An array with at least one reference somewhere below.
    Array(Vec<Node>),
}

/// The values a mapping is evaluated against.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The compose tool's input (`$input`).
    pub input: &'a Value,
    /// The outputs of the steps that ran before this one, in order, as
    /// `(step name, output)`. `$prev` is the last entry, `$steps.NAME` the
    /// entry named `NAME`.
    pub steps: &'a [(String, Value)],
}

/// A mapping that does not compile or does not evaluate, naming the step
/// and the key path inside `inputMapping`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{step} {key}: {kind}")]
pub struct MappingError {
    /// The step whose mapping failed.
    pub step: StepRef,
    /// The key path inside the mapping (`inputMapping.prompt`,
    /// `inputMapping.items[0]`, `inputMapping["a b"]`).
    pub key: String,
    /// What went wrong (boxed: keeps `Result<_, MappingError>` small).
    pub kind: Box<MappingErrorKind>,
}

/// The kinds of [`MappingError`]: the first group is found by [`compile`],
/// the second by [`evaluate`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MappingErrorKind {
    /// A string does not parse (lone `$`, unknown root, ...).
    #[error(transparent)]
    Syntax(ExprError),
    /// `$prev` in the first step.
    #[error("`{expr}`: the first step has no previous step (use $input)")]
    PrevInFirstStep {
        /// The reference as written.
        expr: String,
    },
    /// `$steps.NAME` naming the step itself.
    #[error("`{expr}`: a step cannot use its own output; $steps.NAME must name an earlier step")]
    SelfReference {
        /// The reference as written.
        expr: String,
    },
    /// `$steps.NAME` naming a step that runs later.
    #[error(
        "`{expr}`: step {name:?} runs later (steps[{index}]); $steps.NAME must name an earlier step"
    )]
    LaterStep {
        /// The reference as written.
        expr: String,
        /// The step named.
        name: String,
        /// Its index.
        index: usize,
    },
    /// `$steps.NAME` naming no step at all.
    #[error("`{expr}`: there is no step named {name:?} (earlier steps: {earlier})")]
    UnknownStep {
        /// The reference as written.
        expr: String,
        /// The name given.
        name: String,
        /// The earlier steps' names, comma-separated (or `none`).
        earlier: String,
    },
    /// Objects and arrays nested deeper than [`MAX_MAPPING_DEPTH`].
    #[error("nested deeper than {limit} levels")]
    TooDeep {
        /// The limit.
        limit: usize,
    },

    /// A field is missing from an object.
    #[error("`{expr}`: {at} has no field {field:?} ({available})")]
    MissingField {
        /// The reference as written.
        expr: String,
        /// The reference up to the object (`$input.user`).
        at: String,
        /// The missing field.
        field: String,
        /// The fields the object does have, for the message.
        available: String,
    },
    /// A path segment applied to something that is neither object nor array.
    #[error("`{expr}`: cannot read {segment:?} of {at}, which is {found}")]
    NotIndexable {
        /// The reference as written.
        expr: String,
        /// The reference up to the value (`$input.name`).
        at: String,
        /// The segment that could not be applied.
        segment: String,
        /// The JSON type found (`string`, `null`, ...).
        found: &'static str,
    },
    /// A segment that is not an index applied to an array.
    #[error("`{expr}`: {at} is an array; {segment:?} is not an index (0, 1, 2, ...)")]
    NotAnIndex {
        /// The reference as written.
        expr: String,
        /// The reference up to the array.
        at: String,
        /// The segment.
        segment: String,
    },
    /// An index past the end of an array.
    #[error("`{expr}`: index {index} is out of range: {at} has {len} element(s)")]
    IndexOutOfRange {
        /// The reference as written.
        expr: String,
        /// The reference up to the array.
        at: String,
        /// The index.
        index: usize,
        /// The array's length.
        len: usize,
    },
    /// `$prev` evaluated with no earlier output in the context.
    #[error("`{expr}`: no previous step output")]
    NoPreviousOutput {
        /// The reference as written.
        expr: String,
    },
    /// `$steps.NAME` evaluated with no output for `NAME` in the context.
    #[error("`{expr}`: step {name:?} has no output yet")]
    NoStepOutput {
        /// The reference as written.
        expr: String,
        /// The step named.
        name: String,
    },
}

/// Compiles every step's mapping of a parsed spec.
pub fn compile(spec: &ComposeSpec) -> Result<CompiledSpec, MappingError> {
    let names: Vec<&str> = spec.steps.iter().map(|s| s.name.as_str()).collect();
    let steps = spec
        .steps
        .iter()
        .enumerate()
        .map(|(index, step)| {
            let at = StepRef {
                index,
                name: Some(step.name.clone()),
            };
            let compiler = Compiler {
                index,
                names: &names,
                step: &at,
            };
            let root = compiler.node(&step.input_mapping, "inputMapping".to_owned(), 0)?;
            Ok(CompiledStep {
                name: step.name.clone(),
                tool: step.tool.clone(),
                mapping: CompiledMapping { step: at, root },
            })
        })
        .collect::<Result<Vec<_>, MappingError>>()?;
    Ok(CompiledSpec { steps })
}

impl CompiledSpec {
    /// The distinct tools the steps call, in order of first use.
    pub fn tools(&self) -> Vec<String> {
        crate::spec::distinct_in_order(self.steps.iter().map(|s| s.tool.as_str()))
    }
}

impl CompiledMapping {
    /// The step this mapping belongs to.
    pub fn step(&self) -> &StepRef {
        &self.step
    }

    /// Builds the step's input; see [`evaluate`].
    pub fn evaluate(&self, context: &Context<'_>) -> Result<Value, MappingError> {
        evaluate(self, context)
    }
}

struct Compiler<'a> {
    index: usize,
    names: &'a [&'a str],
    step: &'a StepRef,
}

impl Compiler<'_> {
    fn fail(&self, key: String, kind: MappingErrorKind) -> MappingError {
        MappingError {
            step: self.step.clone(),
            key,
            kind: Box::new(kind),
        }
    }

    fn node(&self, value: &Value, key: String, depth: usize) -> Result<Node, MappingError> {
        if depth > MAX_MAPPING_DEPTH {
            return Err(self.fail(
                key,
                MappingErrorKind::TooDeep {
                    limit: MAX_MAPPING_DEPTH,
                },
            ));
        }
        Ok(match value {
            Value::String(s) => {
                let parsed = expr::parse(s)
                    .map_err(|e| self.fail(key.clone(), MappingErrorKind::Syntax(e)))?;
                match parsed {
                    StringExpr::Literal(text) => Node::Literal(Value::String(text)),
                    StringExpr::Whole(reference) => {
                        self.check(&reference, &key)?;
                        Node::Ref { key, reference }
                    }
                    StringExpr::Template(parts) => {
                        for part in &parts {
                            if let Part::Ref(reference) = part {
                                self.check(reference, &key)?;
                            }
                        }
                        Node::Template { key, parts }
                    }
                }
            }
            Value::Object(object) => {
                let mut children = Vec::with_capacity(object.len());
                for (k, v) in object {
                    let child = self.node(v, key_path(&key, k), depth + 1)?;
                    children.push((k.clone(), child));
                }
                if children.iter().all(|(_, c)| matches!(c, Node::Literal(_))) {
                    let object: Map<String, Value> = children
                        .into_iter()
                        .map(|(k, c)| match c {
                            Node::Literal(v) => (k, v),
                            _ => unreachable!(),
                        })
                        .collect();
                    Node::Literal(Value::Object(object))
                } else {
                    Node::Object(children)
                }
            }
            Value::Array(items) => {
                let mut children = Vec::with_capacity(items.len());
                for (i, v) in items.iter().enumerate() {
                    children.push(self.node(v, format!("{key}[{i}]"), depth + 1)?);
                }
                if children.iter().all(|c| matches!(c, Node::Literal(_))) {
                    Node::Literal(Value::Array(
                        children
                            .into_iter()
                            .map(|c| match c {
                                Node::Literal(v) => v,
                                _ => unreachable!(),
                            })
                            .collect(),
                    ))
                } else {
                    Node::Array(children)
                }
            }
            other => Node::Literal(other.clone()),
        })
    }

    /// Checks that a reference only uses earlier steps.
    fn check(&self, reference: &Reference, key: &str) -> Result<(), MappingError> {
        let expr = reference.text.clone();
        match &reference.root {
            Root::Input => Ok(()),
            Root::Prev if self.index == 0 => {
                Err(self.fail(key.to_owned(), MappingErrorKind::PrevInFirstStep { expr }))
            }
            Root::Prev => Ok(()),
            Root::Step(name) => match self.names.iter().position(|n| n == name) {
                Some(i) if i < self.index => Ok(()),
                Some(i) if i == self.index => {
                    Err(self.fail(key.to_owned(), MappingErrorKind::SelfReference { expr }))
                }
                Some(i) => Err(self.fail(
                    key.to_owned(),
                    MappingErrorKind::LaterStep {
                        expr,
                        name: name.clone(),
                        index: i,
                    },
                )),
                None => {
                    let earlier = &self.names[..self.index];
                    Err(self.fail(
                        key.to_owned(),
                        MappingErrorKind::UnknownStep {
                            expr,
                            name: name.clone(),
                            earlier: if earlier.is_empty() {
                                "none".to_owned()
                            } else {
                                earlier.join(", ")
                            },
                        },
                    ))
                }
            },
        }
    }
}

/// Appends an object key to a key path: `.key` for keys made of ASCII
/// letters, digits, `_` and `-`, `["key"]` (JSON string) otherwise.
fn key_path(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        format!("{parent}.{key}")
    } else {
        let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("{key:?}"));
        format!("{parent}[{quoted}]")
    }
}

/// Builds a step's input from its compiled mapping.
///
/// A whole-string reference gives the referenced value as is; a template
/// gives a string with each reference's value inserted as text (strings
/// raw, anything else as compact JSON). A missing field, an index past the
/// end of an array or a path into a string/number/boolean/null is an error
/// naming the expression, the step and the key, never a silent `null`.
pub fn evaluate(mapping: &CompiledMapping, context: &Context<'_>) -> Result<Value, MappingError> {
    eval_node(&mapping.root, context).map_err(|(key, kind)| MappingError {
        step: mapping.step.clone(),
        key,
        kind: Box::new(kind),
    })
}

type EvalResult<T> = Result<T, (String, MappingErrorKind)>;

fn eval_node(node: &Node, context: &Context<'_>) -> EvalResult<Value> {
    Ok(match node {
        Node::Literal(value) => value.clone(),
        Node::Ref { key, reference } => resolve(reference, context)
            .map_err(|kind| (key.clone(), kind))?
            .clone(),
        Node::Template { key, parts } => {
            let mut out = String::new();
            for part in parts {
                match part {
                    Part::Text(text) => out.push_str(text),
                    Part::Ref(reference) => {
                        let value =
                            resolve(reference, context).map_err(|kind| (key.clone(), kind))?;
                        push_text(&mut out, value);
                    }
                }
            }
            Value::String(out)
        }
        Node::Object(children) => {
            let mut object = Map::with_capacity(children.len());
            for (k, child) in children {
                object.insert(k.clone(), eval_node(child, context)?);
            }
            Value::Object(object)
        }
        Node::Array(children) => Value::Array(
            children
                .iter()
                .map(|c| eval_node(c, context))
                .collect::<EvalResult<Vec<_>>>()?,
        ),
    })
}

/// Inserts a value into an interpolated string: strings raw, everything
/// else as compact JSON text.
fn push_text(out: &mut String, value: &Value) {
    match value {
        Value::String(s) => out.push_str(s),
        // Serializing a `Value` cannot fail.
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

/// Follows a reference in the context.
fn resolve<'v>(
    reference: &Reference,
    context: &Context<'v>,
) -> Result<&'v Value, MappingErrorKind> {
    let expr = || reference.text.clone();
    let mut value: &'v Value = match &reference.root {
        Root::Input => context.input,
        Root::Prev => match context.steps.last() {
            Some((_, output)) => output,
            None => return Err(MappingErrorKind::NoPreviousOutput { expr: expr() }),
        },
        Root::Step(name) => match context.steps.iter().find(|(n, _)| n == name) {
            Some((_, output)) => output,
            None => {
                return Err(MappingErrorKind::NoStepOutput {
                    expr: expr(),
                    name: name.clone(),
                });
            }
        },
    };
    for (depth, segment) in reference.path.iter().enumerate() {
        value = match value {
            Value::Object(object) => match object.get(segment) {
                Some(v) => v,
                None => {
                    return Err(MappingErrorKind::MissingField {
                        expr: expr(),
                        at: reference.prefix(depth),
                        field: segment.clone(),
                        available: available_fields(object),
                    });
                }
            },
            Value::Array(items) => {
                let Some(index) = array_index(segment) else {
                    return Err(MappingErrorKind::NotAnIndex {
                        expr: expr(),
                        at: reference.prefix(depth),
                        segment: segment.clone(),
                    });
                };
                match items.get(index) {
                    Some(v) => v,
                    None => {
                        return Err(MappingErrorKind::IndexOutOfRange {
                            expr: expr(),
                            at: reference.prefix(depth),
                            index,
                            len: items.len(),
                        });
                    }
                }
            }
            other => {
                return Err(MappingErrorKind::NotIndexable {
                    expr: expr(),
                    at: reference.prefix(depth),
                    segment: segment.clone(),
                    found: json_type(other),
                });
            }
        };
    }
    Ok(value)
}

/// An array index: decimal digits without sign or leading zeros (`0`, `7`, `12`).
fn array_index(segment: &str) -> Option<usize> {
    let canonical = !segment.is_empty()
        && segment.bytes().all(|b| b.is_ascii_digit())
        && (segment == "0" || !segment.starts_with('0'));
    if canonical {
        segment.parse().ok()
    } else {
        None
    }
}

fn available_fields(object: &Map<String, Value>) -> String {
    if object.is_empty() {
        return "the object is empty".to_owned();
    }
    let mut names: Vec<String> = object
        .keys()
        .take(LISTED_KEYS)
        .map(|k| format!("{k:?}"))
        .collect();
    if object.len() > LISTED_KEYS {
        names.push(format!("... {} more", object.len() - LISTED_KEYS));
    }
    format!("fields: {}", names.join(", "))
}

#[cfg(test)]
mod tests;
