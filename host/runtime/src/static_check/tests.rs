//! Tests of the static check: each blocked form, its evasions, and what
//! must stay allowed.

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
fn fs_promises_allows_only_read_file() {
    assert!(uses("const t = await fs.promises.readFile('/data/a.txt', 'utf8');").is_empty());
    assert!(uses("const t = await fs?.promises?.readFile('/data/a.txt');").is_empty());
    assert_eq!(
        uses("await fs.promises.writeFile(p, x);"),
        one("fs.promises.writeFile", 1, 10)
    );
    assert_eq!(uses("const p = fs.promises;"), one("fs.promises", 1, 14));
    assert_eq!(
        uses("fs.promises['readFile'](p);"),
        one("fs.promises", 1, 4)
    );
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
    clean("class B extends C {\n  process = 1\n  require = 2;\n  get Function() { return 0; }\n}");
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
    use temper_policy::Capability::*;
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
