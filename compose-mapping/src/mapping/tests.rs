//! Compiling and evaluating mappings: paths, templates, errors.

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
    let e = compile_err(json!([{"name": "s", "tool": "t", "inputMapping": {"x": ["ok", "$bad"]}}]));
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
