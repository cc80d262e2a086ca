//! Property tests for the parsers of compose mode, which take agent input:
//! the step spec (`implementation.steps`), the `inputMapping` expression
//! language, and mapping compilation and evaluation.
//!
//! Invariants: no panic on any input, bounded time, refusals are typed
//! errors, and expressions round-trip (print a parsed expression, parse it
//! again: the same references and text). Bounded for CI (a few seconds);
//! run longer with `PROPTEST_CASES=100000 cargo test -p
//! temper-compose-mapping --test properties`.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use serde_json::{Value, json};
use temper_compose_mapping::expr::{self, Part, Root, StringExpr};
use temper_compose_mapping::mapping::{self, Context};
use temper_compose_mapping::spec::ComposeSpec;

/// `PROPTEST_CASES` when set, else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Runs `f`, failing when it takes longer than `limit` (no input here is
/// large enough to need more: a hang or blow-up shows as a failure).
fn bounded<T>(what: &str, limit: Duration, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    assert!(
        started.elapsed() < limit,
        "{what} took {:?}",
        started.elapsed()
    );
    out
}

const LIMIT: Duration = Duration::from_secs(2);

/// Strings biased towards the expression syntax.
fn mapping_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[$a-z{}._ 0-9\\-]{0,40}",
        prop::collection::vec(
            prop_oneof![
                Just("$".to_string()),
                Just("$$".to_string()),
                Just("${".to_string()),
                Just("}".to_string()),
                Just("$input".to_string()),
                Just("$prev".to_string()),
                Just("$steps".to_string()),
                Just(".".to_string()),
                "[a-z_]{1,4}",
                "[ -~]{0,3}",
            ],
            0..16
        )
        .prop_map(|parts| parts.concat()),
    ]
}

/// Arbitrary JSON values, small.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e9f64..1e9).prop_map(|f| json!(f)),
        mapping_text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z$]{0,6}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// One generated part of a mapping string: literal text or a reference.
#[derive(Debug, Clone)]
enum GenPart {
    Text(String),
    Ref(Root, Vec<String>),
}

fn gen_part() -> impl Strategy<Value = GenPart> {
    let segment = "[^.}]{1,6}";
    prop_oneof![
        any::<String>().prop_map(GenPart::Text),
        (
            prop_oneof![
                Just(Root::Input),
                Just(Root::Prev),
                segment.prop_map(Root::Step)
            ],
            prop::collection::vec(segment, 0..4),
        )
            .prop_map(|(root, path)| GenPart::Ref(root, path)),
    ]
}

/// Writes parts in the braced form the parser reads back.
fn print(parts: &[GenPart]) -> String {
    let mut out = String::new();
    for p in parts {
        match p {
            GenPart::Text(t) => out.push_str(&t.replace('$', "$$")),
            GenPart::Ref(root, path) => {
                out.push_str("${");
                out.push_str(match root {
                    Root::Input => "input",
                    Root::Prev => "prev",
                    Root::Step(_) => "steps",
                });
                if let Root::Step(name) = root {
                    out.push('.');
                    out.push_str(name);
                }
                for s in path {
                    out.push('.');
                    out.push_str(s);
                }
                out.push('}');
            }
        }
    }
    out
}

/// A comparable form: adjacent text merged, empty text dropped.
#[derive(Debug, PartialEq)]
enum Norm {
    Text(String),
    Ref(Root, Vec<String>),
}

fn normalize_gen(parts: &[GenPart]) -> Vec<Norm> {
    let mut out: Vec<Norm> = Vec::new();
    for p in parts {
        match p {
            GenPart::Text(t) if t.is_empty() => {}
            GenPart::Text(t) => match out.last_mut() {
                Some(Norm::Text(prev)) => prev.push_str(t),
                _ => out.push(Norm::Text(t.clone())),
            },
            GenPart::Ref(root, path) => out.push(Norm::Ref(root.clone(), path.clone())),
        }
    }
    out
}

fn normalize_parsed(e: &StringExpr) -> Vec<Norm> {
    match e {
        StringExpr::Literal(t) if t.is_empty() => vec![],
        StringExpr::Literal(t) => vec![Norm::Text(t.clone())],
        StringExpr::Whole(r) => vec![Norm::Ref(r.root.clone(), r.path.clone())],
        StringExpr::Template(parts) => parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => Norm::Text(t.clone()),
                Part::Ref(r) => Norm::Ref(r.root.clone(), r.path.clone()),
            })
            .collect(),
    }
}

proptest! {
    #![proptest_config(config(2000))]

    /// Any string parses to an expression or a typed error with a column
    /// inside the string; never a panic.
    #[test]
    fn expressions_never_panic(s in mapping_text()) {
        let parsed = bounded("expr::parse", LIMIT, || expr::parse(&s));
        if let Err(e) = parsed {
            prop_assert!(e.column <= s.chars().count(), "{e:?}");
            prop_assert!(!e.to_string().is_empty());
        }
    }

    /// Printed expressions parse back to the same text and references.
    #[test]
    fn expressions_round_trip(parts in prop::collection::vec(gen_part(), 0..8)) {
        let text = print(&parts);
        let parsed = expr::parse(&text)
            .unwrap_or_else(|e| panic!("{text:?} does not parse: {e}"));
        prop_assert_eq!(normalize_parsed(&parsed), normalize_gen(&parts), "{:?}", text);
    }
}

proptest! {
    #![proptest_config(config(500))]

    /// Any JSON as `steps` parses, or is a typed refusal; a spec that
    /// parses compiles or is refused with a typed error; a compiled spec
    /// evaluates against any context without panicking.
    #[test]
    fn specs_compile_and_evaluate_without_panicking(
        steps in prop::collection::vec(json_value(), 0..5),
        input in json_value(),
        outputs in prop::collection::vec(json_value(), 0..4),
    ) {
        let Ok(spec) = bounded("ComposeSpec::parse", LIMIT, || ComposeSpec::parse(&steps)) else {
            return Ok(());
        };
        let Ok(compiled) = bounded("mapping::compile", LIMIT, || mapping::compile(&spec)) else {
            return Ok(());
        };
        let _ = compiled.tools();
        let done: Vec<(String, Value)> = compiled
            .steps
            .iter()
            .zip(&outputs)
            .map(|(s, v)| (s.name.clone(), v.clone()))
            .collect();
        for (i, step) in compiled.steps.iter().enumerate() {
            let context = Context { input: &input, steps: &done[..i.min(done.len())] };
            if let Err(e) = bounded("evaluate", LIMIT, || step.mapping.evaluate(&context)) {
                prop_assert_eq!(e.step.index, i, "{}", e);
            }
        }
    }

    /// Well-formed steps with generated mappings: parse, compile, then
    /// evaluate every step against generated outputs of the steps before.
    #[test]
    fn generated_pipelines_evaluate_or_name_the_failing_key(
        mappings in prop::collection::vec(
            prop::collection::vec(("[a-z]{1,4}", prop_oneof![
                mapping_text().prop_map(Value::String),
                json_value(),
                prop::collection::vec(gen_part(), 0..4).prop_map(|p| Value::String(print(&p))),
            ]), 0..4),
            1..4,
        ),
        input in json_value(),
        outputs in prop::collection::vec(json_value(), 4),
    ) {
        let steps: Vec<Value> = mappings
            .iter()
            .enumerate()
            .map(|(i, kv)| {
                let mapping: serde_json::Map<String, Value> = kv.iter().cloned().collect();
                json!({"name": format!("s{i}"), "tool": format!("tool_{i}"), "inputMapping": mapping})
            })
            .collect();
        let spec = ComposeSpec::parse(&steps).expect("well-formed steps parse");
        let Ok(compiled) = mapping::compile(&spec) else { return Ok(()); };
        let mut done: Vec<(String, Value)> = Vec::new();
        for (i, step) in compiled.steps.iter().enumerate() {
            let context = Context { input: &input, steps: &done };
            match bounded("evaluate", LIMIT, || step.mapping.evaluate(&context)) {
                Ok(v) => prop_assert!(v.is_object(), "{v}"),
                Err(e) => prop_assert_eq!(e.step.index, i, "{}", e),
            }
            done.push((format!("s{i}"), outputs[i].clone()));
        }
    }
}
