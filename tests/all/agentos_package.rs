//! AgentOS tool packages through the CLI: `temper import PACKAGE.yaml
//! --tests FILE` builds the package's code, runs its tests and the judge
//! (a failing test or the fail-closed judge refuses it, storing nothing); a
//! package with redacted source is refused saying so; `temper export NAME
//! --format agentos` writes a package that imports into another store with
//! the tests it carries, the same bytes each time. (AgentOS's own
//! `parseEmergentToolPackage` reading Temper's export, and Temper importing
//! AgentOS's export, run in host/node/test/package.test.js.)

use crate::support;

use std::path::Path;

use serde_json::{Value, json};
use support::temper_json;

/// An `agentos.emergent-tool.v1` package as AgentOS's YAML serializer
/// writes one, for `code`.
fn package_yaml(name: &str, code: Option<&str>) -> String {
    let implementation = match code {
        Some(code) => {
            let indented: String = code.lines().map(|l| format!("      {l}\n")).collect();
            format!(
                "    mode: sandbox\n    allowlist: []\n    sourcePersisted: true\n    redactedAtRest: false\n    code: |-\n{indented}"
            )
        }
        None => "    mode: sandbox\n    allowlist: []\n    sourcePersisted: false\n    redactedAtRest: true\n".into(),
    };
    format!(
        "schemaVersion: agentos.emergent-tool.v1
packageType: emergent-tool
exportedAt: 2026-11-28T09:00:00.000Z
portability:
  portable: true
  warnings: []
tool:
  originalToolId: emergent_1764320000000_abc123
  originalTier: session
  name: {name}
  description: Convert a string to a URL-friendly slug
  inputSchema:
    type: object
    properties:
      text:
        type: string
    required:
      - text
  outputSchema:
    type: object
    properties:
      slug:
        type: string
  implementation:
{implementation}  createdBy: agent-7
  createdAt: 2026-11-28T09:00:00.000Z
  source: forged by agent agent-7 during session s1
  judgeVerdicts: []
  usageStats:
    totalUses: 0
    successCount: 0
    failureCount: 0
    avgExecutionTimeMs: 0
    lastUsedAt: null
    confidenceScore: 0.9
"
    )
}

const SLUGIFY: &str = "function execute(input) {\n  return { slug: input.text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') };\n}";

fn tests_file(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("tests.json");
    let cases = json!([
        {"input": {"text": "Hello World!"}, "expectedOutput": {"slug": "hello-world"}},
        {"input": {"text": " A  b "}, "expectedOutput": {"slug": "a-b"}}
    ]);
    std::fs::write(&path, cases.to_string()).unwrap();
    path
}

fn run(dir: &Path, store: &Path, args: &[&str]) -> (bool, Value, String) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--store", store.to_str().unwrap(), "--agent", "agent-a"]);
    temper_json(dir, &[], all)
}

#[test]
fn import_runs_the_tests_and_the_judge_and_refuses_redacted_source() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let tests = tests_file(dir.path());
    let tests = tests.to_str().unwrap();
    let write = |file: &str, text: String| {
        let p = dir.path().join(file);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };

    // Without test cases: refused, nothing built.
    let pkg = write("slugify.yaml", package_yaml("slugify", Some(SLUGIFY)));
    let (ok, _, err) = run(dir.path(), &store, &["import", &pkg, "--judge", "rules"]);
    assert!(!ok);
    assert!(err.contains("carries no test cases"), "{err}");

    // The fail-closed default judge refuses it at the judge stage.
    let (ok, doc, err) = run(dir.path(), &store, &["import", &pkg, "--tests", tests]);
    assert!(!ok, "{doc}");
    assert_eq!(doc["stage"], "judge", "{doc} {err}");
    assert_eq!(doc["testResults"].as_array().unwrap().len(), 2, "{doc}");

    // Code that fails its tests: refused at the test stage.
    let wrong = write(
        "wrong.yaml",
        package_yaml(
            "slugify",
            Some("function execute(input) { return { slug: input.text } }"),
        ),
    );
    let (ok, doc, _) = run(
        dir.path(),
        &store,
        &["import", &wrong, "--tests", tests, "--judge", "rules"],
    );
    assert!(!ok);
    assert_eq!(doc["stage"], "test", "{doc}");

    // Redacted source (AgentOS's default at rest): refused, saying so.
    let redacted = write("redacted.yaml", package_yaml("slugify", None));
    let (ok, doc, err) = run(
        dir.path(),
        &store,
        &["import", &redacted, "--tests", tests, "--judge", "rules"],
    );
    assert!(!ok);
    assert_eq!(doc["stage"], "import", "{doc}");
    assert!(
        err.contains("the sandbox source of \"slugify\" is redacted"),
        "{err}"
    );

    // Nothing landed.
    let (_, listed, _) = run(dir.path(), &store, &["tools"]);
    assert_eq!(listed["tools"], json!([]), "{listed}");

    // Tests and rules judge: imported into the agent tier, then callable.
    let (ok, doc, err) = run(
        dir.path(),
        &store,
        &["import", &pkg, "--tests", tests, "--judge", "rules"],
    );
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["tool"]["tier"], "agent");
    assert_eq!(doc["verdict"]["approved"], true);
    let (ok, out, err) = run(
        dir.path(),
        &store,
        &["call", "slugify", "--input", r#"{"text": "From AgentOS"}"#],
    );
    assert!(ok, "{err}");
    assert_eq!(out["output"], json!({"slug": "from-agentos"}), "{out}");
}

#[test]
fn export_writes_a_package_that_imports_elsewhere_with_its_tests() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let seed =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/seeds/slugify.json");
    let (ok, doc, err) = run(
        dir.path(),
        &a,
        &["forge", seed.to_str().unwrap(), "--judge", "rules"],
    );
    assert!(ok, "{doc} {err}");
    let out = dir.path().join("slugify.agentos.json");
    let out_s = out.to_str().unwrap();
    let (ok, doc, err) = run(
        dir.path(),
        &a,
        &["export", "slugify", "-o", out_s, "--format", "agentos"],
    );
    assert!(ok, "{doc} {err}");
    let first = std::fs::read(&out).unwrap();
    let (ok, _, _) = run(
        dir.path(),
        &a,
        &["export", "slugify", "-o", out_s, "--format", "agentos"],
    );
    assert!(ok);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        first,
        "the same tool, the same bytes"
    );
    let pkg: Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(pkg["schemaVersion"], "agentos.emergent-tool.v1");
    assert_eq!(pkg["packageType"], "emergent-tool");
    assert_eq!(pkg["tool"]["implementation"]["sourcePersisted"], true);
    assert_eq!(pkg["tool"]["testCases"].as_array().unwrap().len(), 2);
    assert_eq!(pkg["exportedAt"], "1970-01-01T00:00:00.000Z");

    // Another store imports it with the tests it carries.
    let (ok, doc, err) = run(dir.path(), &b, &["import", out_s, "--judge", "rules"]);
    assert!(ok, "{doc} {err}");
    assert_eq!(doc["testResults"].as_array().unwrap().len(), 2, "{doc}");
    let (ok, out, err) = run(
        dir.path(),
        &b,
        &["call", "slugify", "--input", r#"{"text": "Round Trip"}"#],
    );
    assert!(ok, "{err}");
    assert_eq!(out["output"], json!({"slug": "round-trip"}));
}
