//! What a tool can reach: the static check, code generation, global state
//! between calls, console capture, web globals, capabilities denied by
//! default, and components outside the tool world.

use temper::{BuildError, Limits, LoadError, RunError};

use super::{run_both_paths, runtime};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_check_refuses_each_blocked_api_with_its_position() {
    let rt = runtime();
    let cases = [
        (
            "eval",
            "function execute(i) {\n  return eval(i.code);\n}",
            "eval",
            2,
        ),
        (
            "Function",
            "function execute() { return new Function('return 1')(); }",
            "Function",
            1,
        ),
        (
            "require",
            "const fs = require('fs');\nfunction execute() {}",
            "require",
            1,
        ),
        (
            "import()",
            "async function execute() {\n\n  return import('x');\n}",
            "import()",
            3,
        ),
        (
            "process",
            "function execute() { return process.env; }",
            "process",
            1,
        ),
        (
            "child_process",
            "function execute(i) { return i['child_process']; }",
            "child_process",
            1,
        ),
        (
            "fs.writeFile",
            "function execute() { fs.writeFile('/x', 'y'); }",
            "fs.writeFile",
            1,
        ),
        (
            "fs.unlink",
            "function execute() { fs.unlink('/x'); }",
            "fs.unlink",
            1,
        ),
        (
            "fs.mkdir",
            "function execute() { fs.mkdir('/x'); }",
            "fs.mkdir",
            1,
        ),
    ];
    for (what, source, api, line) in cases {
        match rt.build(source).await {
            Err(BuildError::StaticCheck(err)) => {
                let first = &err.0[0];
                assert_eq!(first.api, api, "{what}: {err}");
                assert_eq!(first.line, line, "{what}: {err}");
                assert!(
                    err.to_string().contains(&format!("blocked API `{api}`")),
                    "{err}"
                );
            }
            other => panic!(
                "{what}: expected the static check to refuse, got {:?}",
                other.map(|a| a.id)
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn code_generation_fails_at_run_time_when_the_static_check_is_bypassed() {
    let rt = runtime();
    // None of these names a blocked identifier, so the static check lets them
    // through; the runtime must still refuse each one.
    let attempts = [
        "(function(){}).constructor('return 1')()",
        "(() => 1).constructor('return 1')()",
        "Object.getPrototypeOf(async function(){}).constructor('return 1')",
        "Object.getPrototypeOf(function*(){}).constructor('yield 1')().next()",
        "Object.getPrototypeOf(async function*(){}).constructor('yield 1')",
        "new ((function(){}).constructor)('return 1')()",
        "Reflect.construct((function(){}).constructor, ['return 1'])()",
        "globalThis['ev' + 'al']('1 + 1')",
        "globalThis['Func' + 'tion']('return 1')()",
        "(0, globalThis['Func' + 'tion'].prototype.constructor)('return 1')()",
        "setTimeout('globalThis.pwned = 1', 0)",
    ];
    // One tool holding every attempt; the input picks which one runs.
    let cases: Vec<String> = attempts.iter().map(|a| format!("() => {a}")).collect();
    let source = format!(
        "const attempts = [\n{}\n];\nfunction execute(input) {{\n  return attempts[input.i]();\n}}",
        cases.join(",\n")
    );
    let artifact = rt
        .build(&source)
        .await
        .expect("the static check lets these through");
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
    for (i, attempt) in attempts.iter().enumerate() {
        for tool in [rt.tool(&artifact), compiled.clone()] {
            let err = rt
                .call(&tool, &format!(r#"{{"i": {i}}}"#))
                .await
                .err()
                .map(|f| f.error);
            match err {
                Some(RunError::Js { error }) => assert!(
                    error.message.contains("TypeError") || error.message.contains("not supported"),
                    "{attempt}: {error}"
                ),
                other => panic!("{attempt}: expected a runtime refusal, got {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_state_does_not_survive_between_calls() {
    let rt = runtime();
    let source = "globalThis.loaded = (globalThis.loaded || 0) + 1;\nfunction execute() {\n  globalThis.calls = (globalThis.calls || 0) + 1;\n  Array.prototype.polluted = true;\n  return { calls: globalThis.calls, loaded: globalThis.loaded, polluted: [].polluted === true };\n}";
    let artifact = rt.build(source).await.unwrap();
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
    for tool in [rt.tool(&artifact), compiled] {
        for _ in 0..3 {
            let out = rt.call(&tool, "{}").await.unwrap().output;
            // `polluted` is true within the call that set it, never before.
            assert_eq!(out, r#"{"calls":1,"loaded":1,"polluted":true}"#);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_output_is_captured_bounded_and_never_printed() {
    let rt = runtime();
    let source = "function execute(i) {\n  console.log('hello', 1, {a: [1, 2]});\n  console.error('oops');\n  for (let k = 0; k < i.n; k++) console.log('line ' + k + ' ' + 'y'.repeat(1000));\n  return 'done';\n}";
    let artifact = rt.build(source).await.unwrap();
    let tool = rt.tool(&artifact);
    let out = rt.call(&tool, r#"{"n": 0}"#).await.unwrap();
    assert_eq!(out.logs.len(), 2);
    assert_eq!(
        (out.logs[0].level, out.logs[0].message.as_str()),
        ("info", r#"hello 1 {"a":[1,2]}"#)
    );
    assert_eq!(
        (out.logs[1].level, out.logs[1].message.as_str()),
        ("error", "oops")
    );
    let out = rt.call(&tool, r#"{"n": 1000}"#).await.unwrap();
    let bytes: usize = out.logs.iter().map(|l| l.message.len()).sum();
    assert!(bytes <= Limits::default().console_bytes + 200, "{bytes}");
    assert!(out.logs.len() < 100);
    assert!(
        out.logs.last().unwrap().message.contains("truncated")
            || out.logs.last().unwrap().message.contains("dropped")
    );
    // Logs survive a failure.
    let failing = rt
        .build("function execute() { console.log('before'); throw new Error('x'); }")
        .await
        .unwrap();
    let failure = rt.call(&rt.tool(&failing), "{}").await.unwrap_err();
    assert_eq!(failure.logs[0].message, "before");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_globals_are_available() {
    let rt = runtime();
    let source = r#"function execute() {
        const u = new URL('../b?x=1#h', 'https://Example.test:443/a/c');
        const p = new URLSearchParams({q: 'a b', n: '1'});
        const bytes = new TextEncoder().encode('héllo');
        return {
          href: u.href, host: u.host, x: u.searchParams.get('x'), qs: p.toString(),
          len: bytes.length, text: new TextDecoder().decode(bytes),
          b64: btoa('hi'), raw: atob('aGk='),
          clone: structuredClone({d: [1, {e: 2}]}),
          timers: typeof setTimeout + typeof clearTimeout + typeof queueMicrotask,
        };
    }"#;
    let out: serde_json::Value =
        serde_json::from_str(&run_both_paths(&rt, source, "{}").await.unwrap()).unwrap();
    assert_eq!(
        out,
        serde_json::json!({
            "href": "https://example.test/b?x=1#h", "host": "example.test", "x": "1",
            "qs": "q=a+b&n=1", "len": 6, "text": "héllo", "b64": "aGk=", "raw": "hi",
            "clone": {"d": [1, {"e": 2}]}, "timers": "functionfunctionfunction"
        })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_denied_by_default() {
    // A default runtime's policy allows nothing and the tool was granted
    // nothing: each capability import answers `capability not granted`.
    let rt = runtime();
    let source = "async function execute(input) {\n  if (input.what === 'fetch') return await fetch('http://127.0.0.1/');\n  if (input.what === 'crypto') return crypto.createHash('sha256').update('x').digest('hex');\n  if (input.what === 'random') return crypto.randomUUID();\n  if (input.what === 'fs') return fs.readFileSync('/etc/passwd', 'utf8');\n  try { await fetch('http://example.test/'); } catch (e) { return e.message; }\n}";
    let artifact = rt.build(source).await.unwrap();
    let compiled = rt.load_compiled(artifact.bytes.to_vec()).await.unwrap();
    for tool in [rt.tool(&artifact), compiled] {
        for (what, capability) in [
            ("fetch", "fetch"),
            ("crypto", "crypto"),
            ("random", "crypto"),
            // No directory is preopened: fs.readFile is refused by name
            // (issue 14), not as a missing file.
            ("fs", "fs.readFile"),
        ] {
            let err = rt
                .call(&tool, &format!(r#"{{"what": "{what}"}}"#))
                .await
                .unwrap_err()
                .error;
            assert_eq!(
                err,
                RunError::CapabilityDenied {
                    capability: capability.into()
                },
                "{what}"
            );
        }
        // A tool that catches the refusal sees the reason.
        let out = rt
            .call(&tool, r#"{"what": "caught"}"#)
            .await
            .unwrap()
            .output;
        assert_eq!(out, r#""capability not granted: fetch""#);
    }
}

/// A component importing something outside the `tool` world is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn components_outside_the_tool_world_are_refused() {
    let rt = runtime();
    let sockets = wat::parse_str(
        r#"(component
             (import "wasi:sockets/tcp@0.2.0" (instance))
           )"#,
    )
    .unwrap();
    match rt.load(sockets).await {
        Err(LoadError::ImportNotAllowed(name)) => assert_eq!(name, "wasi:sockets/tcp@0.2.0"),
        other => panic!(
            "expected ImportNotAllowed, got {:?}",
            other.map(|t| t.id().to_string())
        ),
    }
    let http =
        wat::parse_str(r#"(component (import "wasi:http/outgoing-handler@0.2.0" (instance)))"#)
            .unwrap();
    assert!(matches!(
        rt.load(http).await,
        Err(LoadError::ImportNotAllowed(_))
    ));
    let empty = wat::parse_str("(component)").unwrap();
    assert!(matches!(
        rt.load(empty).await,
        Err(LoadError::MissingExport(_))
    ));
    for junk in [Vec::new(), b"\0asm".to_vec(), vec![0xAB; 4096]] {
        assert!(matches!(rt.load(junk).await, Err(LoadError::Invalid(_))));
    }
    // A core module is not a component.
    let core = wat::parse_str("(module)").unwrap();
    assert!(matches!(rt.load(core).await, Err(LoadError::Invalid(_))));
}
