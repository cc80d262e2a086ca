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
mod tests {
    use super::*;
    use crate::expr::ExprErrorKind;
    use serde_json::json;

    /// Parses and compiles steps given as JSON.
    fn compiled(steps: Value) -> Result<CompiledSpec, MappingError> {
        let spec = ComposeSpec::parse(steps.as_array().unwrap()).expect("spec parses");
        compile(&spec)
    }

    /// A one-step pipeline mapping `mapping`, evaluated against `input`.
    fn eval_input(mapping: Value, input: Value) -> Result<Value, MappingError> {
        let spec = compiled(json!([{"name": "only", "tool": "t", "inputMapping": mapping}]))?;
        spec.steps[0].mapping.evaluate(&Context {
            input: &input,
            steps: &[],
        })
    }

    /// A two-step pipeline whose second step maps `mapping`, evaluated with
    /// `first` as step "first"'s output.
    fn eval_second(mapping: Value, input: Value, first: Value) -> Result<Value, MappingError> {
        let spec = compiled(json!([
            {"name": "first", "tool": "t", "inputMapping": {}},
            {"name": "second", "tool": "u", "inputMapping": mapping},
        ]))?;
        let outputs = vec![("first".to_owned(), first)];
        spec.steps[1].mapping.evaluate(&Context {
            input: &input,
            steps: &outputs,
        })
    }

    fn compile_err(steps: Value) -> MappingError {
        compiled(steps).unwrap_err()
    }

    #[test]
    fn whole_references_keep_their_type() {
        let input =
            json!({"n": 3, "b": true, "z": null, "o": {"k": [1, 2]}, "s": "x", "a": [{"id": 7}]});
        let out = eval_input(
            json!({
                "all": "$input", "n": "$input.n", "b": "$input.b", "z": "$input.z",
                "o": "$input.o", "k": "$input.o.k", "s": "$input.s", "id": "$input.a.0.id",
                "braced": "${input.o.k.1}"
            }),
            input.clone(),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({
                "all": input, "n": 3, "b": true, "z": null, "o": {"k": [1, 2]},
                "k": [1, 2], "s": "x", "id": 7, "braced": 2
            })
        );
    }

    #[test]
    fn prev_and_steps_references() {
        let first = json!({"output": "text", "meta": {"tokens": [5, 6]}});
        let out = eval_second(
            json!({
                "p": "$prev", "po": "$prev.output", "s": "$steps.first",
                "deep": "$steps.first.meta.tokens.1", "i": "$input.q"
            }),
            json!({"q": "question"}),
            first.clone(),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"p": first, "po": "text", "s": first, "deep": 6, "i": "question"})
        );
    }

    #[test]
    fn prev_is_the_step_just_before() {
        let spec = compiled(json!([
            {"name": "a", "tool": "t", "inputMapping": {}},
            {"name": "b", "tool": "t", "inputMapping": {}},
            {"name": "c", "tool": "t", "inputMapping": {"prev": "$prev.v", "a": "$steps.a.v"}},
        ]))
        .unwrap();
        let outputs = vec![
            ("a".to_owned(), json!({"v": "from a"})),
            ("b".to_owned(), json!({"v": "from b"})),
        ];
        let out = spec.steps[2]
            .mapping
            .evaluate(&Context {
                input: &json!({}),
                steps: &outputs,
            })
            .unwrap();
        assert_eq!(out, json!({"prev": "from b", "a": "from a"}));
    }

    #[test]
    fn interpolation_of_every_type() {
        let input = json!({
            "s": "text with \"quotes\"", "i": 42, "f": 1.5, "neg": -3, "t": true, "no": false,
            "z": null, "o": {"b": 1, "a": [true, null]}, "arr": [1, "two", {"x": 3}], "e": ""
        });
        let out = eval_input(
            json!({
                "s": "s=$input.s", "i": "i=$input.i", "f": "f=$input.f", "neg": "neg=$input.neg",
                "t": "t=$input.t", "no": "no=$input.no", "z": "z=$input.z",
                "o": "o=$input.o", "arr": "arr=$input.arr", "e": "[$input.e]",
                "all": "$input.i/$input.t/$input.z"
            }),
            input,
        )
        .unwrap();
        assert_eq!(
            out,
            json!({
                "s": "s=text with \"quotes\"", "i": "i=42", "f": "f=1.5", "neg": "neg=-3",
                "t": "t=true", "no": "no=false", "z": "z=null",
                "o": "o={\"b\":1,\"a\":[true,null]}", "arr": "arr=[1,\"two\",{\"x\":3}]",
                "e": "[]", "all": "42/true/null"
            })
        );
    }

    #[test]
    fn nested_objects_and_arrays_are_mapped() {
        let out = eval_second(
            json!({
                "request": {"url": "$input.url", "headers": {"x-id": "${input.id}"}, "retries": 3},
                "list": ["$input.id", "id: $input.id", {"prev": "$prev.ok"}, [["$input.url"]], 1.5, null],
                "static": {"a": [1, {"b": "c"}], "d": "$$HOME"}
            }),
            json!({"url": "https://x.test", "id": 9}),
            json!({"ok": false}),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({
                "request": {"url": "https://x.test", "headers": {"x-id": 9}, "retries": 3},
                "list": [9, "id: 9", {"prev": false}, [["https://x.test"]], 1.5, null],
                "static": {"a": [1, {"b": "c"}], "d": "$HOME"}
            })
        );
    }

    #[test]
    fn literals_pass_through() {
        let out = eval_input(
            json!({"n": 1, "b": false, "z": null, "s": "GET", "o": {}, "a": [], "price": "$$5 or $${x}"}),
            json!({}),
        )
        .unwrap();
        assert_eq!(
            out,
            json!({"n": 1, "b": false, "z": null, "s": "GET", "o": {}, "a": [], "price": "$5 or ${x}"})
        );
    }

    #[test]
    fn object_keys_are_never_evaluated() {
        let out = eval_input(json!({"$input": "$input.a"}), json!({"a": 1})).unwrap();
        assert_eq!(out, json!({"$input": 1}));
    }

    #[test]
    fn missing_field_is_a_clear_error() {
        let e = eval_input(json!({"q": "$input.topic"}), json!({"subject": "x"})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "steps[0] (\"only\") inputMapping.q: `$input.topic`: $input has no field \"topic\" (fields: \"subject\")"
        );
        assert!(matches!(*e.kind, MappingErrorKind::MissingField { .. }));

        let e = eval_second(
            json!({"p": {"deep": ["Result: $prev.data.items"]}}),
            json!({}),
            json!({"data": {}}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "steps[1] (\"second\") inputMapping.p.deep[0]: `$prev.data.items`: $prev.data has no field \"items\" (the object is empty)"
        );
    }

    #[test]
    fn indexing_into_the_wrong_type() {
        let e = eval_input(json!({"x": "$input.name.first"}), json!({"name": "Ada"})).unwrap_err();
        assert_eq!(
            e.to_string(),
            "steps[0] (\"only\") inputMapping.x: `$input.name.first`: cannot read \"first\" of $input.name, which is string"
        );
        let e = eval_input(json!({"x": "$input.a.b"}), json!({"a": null})).unwrap_err();
        assert!(matches!(
            *e.kind,
            MappingErrorKind::NotIndexable { found: "null", .. }
        ));
        let e = eval_input(json!({"x": "$input.a"}), json!(5)).unwrap_err();
        assert!(matches!(
            *e.kind,
            MappingErrorKind::NotIndexable {
                found: "number",
                ..
            }
        ));
    }

    #[test]
    fn array_indices() {
        let input = json!({"items": ["a", "b"], "obj": {"0": "zero"}});
        assert_eq!(
            eval_input(
                json!({"x": "$input.items.1", "y": "$input.obj.0"}),
                input.clone()
            )
            .unwrap(),
            json!({"x": "b", "y": "zero"})
        );
        let e = eval_input(json!({"x": "$input.items.2"}), input.clone()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "steps[0] (\"only\") inputMapping.x: `$input.items.2`: index 2 is out of range: $input.items has 2 element(s)"
        );
        for bad in ["$input.items.first", "$input.items.01", "$input.items.-1"] {
            let e = eval_input(json!({"x": bad}), input.clone()).unwrap_err();
            assert!(
                matches!(*e.kind, MappingErrorKind::NotAnIndex { .. }),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn key_paths_in_errors() {
        let e = eval_input(
            json!({"a b": {"list": [0, {"c": "$input.nope"}]}}),
            json!({}),
        )
        .unwrap_err();
        assert_eq!(e.key, "inputMapping[\"a b\"].list[1].c");
        let e =
            compile_err(json!([{"name": "s", "tool": "t", "inputMapping": {"x": ["ok", "$bad"]}}]));
        assert_eq!(e.key, "inputMapping.x[1]");
        assert_eq!(e.step.index, 0);
        assert_eq!(e.step.name.as_deref(), Some("s"));
    }

    #[test]
    fn prev_in_first_step_is_refused() {
        let e = compile_err(
            json!([{"name": "search", "tool": "t", "inputMapping": {"q": "about $prev.x"}}]),
        );
        assert_eq!(
            e.to_string(),
            "steps[0] (\"search\") inputMapping.q: `$prev.x`: the first step has no previous step (use $input)"
        );
    }

    #[test]
    fn references_to_later_self_or_unknown_steps_are_refused() {
        let e = compile_err(json!([
            {"name": "fetch", "tool": "t", "inputMapping": {}},
            {"name": "summarize", "tool": "t", "inputMapping": {"prompt": "$steps.format.output"}},
            {"name": "format", "tool": "t", "inputMapping": {}},
        ]));
        assert_eq!(
            e.to_string(),
            "steps[1] (\"summarize\") inputMapping.prompt: `$steps.format.output`: step \"format\" runs later (steps[2]); $steps.NAME must name an earlier step"
        );
        let e = compile_err(json!([
            {"name": "fetch", "tool": "t", "inputMapping": {}},
            {"name": "summarize", "tool": "t", "inputMapping": {"p": "x ${steps.summarize}"}},
        ]));
        assert!(
            matches!(*e.kind, MappingErrorKind::SelfReference { .. }),
            "{e}"
        );
        let e = compile_err(json!([
            {"name": "fetch", "tool": "t", "inputMapping": {}},
            {"name": "summarize", "tool": "t", "inputMapping": {"p": "$steps.serach"}},
        ]));
        assert_eq!(
            e.to_string(),
            "steps[1] (\"summarize\") inputMapping.p: `$steps.serach`: there is no step named \"serach\" (earlier steps: fetch)"
        );
        let e = compile_err(json!([{"name": "a", "tool": "t", "inputMapping": {"p": "$steps.b"}}]));
        assert!(e.to_string().ends_with("(earlier steps: none)"), "{e}");
    }

    #[test]
    fn unknown_roots_and_syntax_errors_are_refused() {
        let e = compile_err(json!([{"name": "a", "tool": "t", "inputMapping": {"p": "$foo"}}]));
        assert!(
            matches!(&*e.kind, MappingErrorKind::Syntax(s) if matches!(s.kind, ExprErrorKind::UnknownRoot { .. })),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("steps[0] (\"a\") inputMapping.p: unknown reference `$foo`"),
            "{e}"
        );
        let e = compile_err(json!([{"name": "a", "tool": "t", "inputMapping": {"p": "costs $5"}}]));
        assert!(
            e.to_string().contains("write `$$` for a literal `$`"),
            "{e}"
        );
    }

    #[test]
    fn too_deep_mappings_are_refused() {
        let mut mapping = json!("$input");
        for _ in 0..=MAX_MAPPING_DEPTH {
            mapping = json!([mapping]);
        }
        let e = compile_err(json!([{"name": "a", "tool": "t", "inputMapping": {"x": mapping}}]));
        assert!(matches!(*e.kind, MappingErrorKind::TooDeep { .. }), "{e}");
    }

    #[test]
    fn evaluation_with_a_short_context() {
        let spec = compiled(json!([
            {"name": "a", "tool": "t", "inputMapping": {}},
            {"name": "b", "tool": "t", "inputMapping": {"x": "$prev", "y": "$steps.a"}},
        ]))
        .unwrap();
        let e = spec.steps[1]
            .mapping
            .evaluate(&Context {
                input: &json!({}),
                steps: &[],
            })
            .unwrap_err();
        assert!(
            matches!(*e.kind, MappingErrorKind::NoPreviousOutput { .. }),
            "{e}"
        );
    }

    #[test]
    fn literal_subtrees_are_folded() {
        let spec =
            compiled(json!([{"name": "a", "tool": "t", "inputMapping": {"x": {"y": [1, "$$"]}}}]))
                .unwrap();
        assert_eq!(
            spec.steps[0].mapping.root,
            Node::Literal(json!({"x": {"y": [1, "$"]}}))
        );
    }
}
