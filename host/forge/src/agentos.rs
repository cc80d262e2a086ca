//! AgentOS tool packages (`agentos.emergent-tool.v1`, the format of
//! `@framers/agentos`'s `buildEmergentToolPackage` /
//! `serializeEmergentToolPackage`): [`Forge::import_agentos`] reads one
//! (JSON or YAML), builds its sandbox code here and imports the artifact
//! like any `.wasm` file (capabilities against this host's policy, the
//! tests, the judge, registration); [`Forge::export_agentos`] writes one
//! that AgentOS's `parseEmergentToolPackage` accepts.
//!
//! AgentOS packages carry no test cases. Temper writes them in
//! `tool.testCases` (an extra field AgentOS ignores) and reads them from
//! there; a package without them is imported only with test cases given
//! by the caller ([`PackageError::NoTests`] otherwise): nothing is
//! registered untested.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::error::{ExportError, ForgeError};
use super::outcome::Forged;
use super::{Forge, ForgeContext};
use temper_runtime::artifact::{self, Mode};
use temper_runtime::request::{ForgeRequest, Implementation, TestCase};
use temper_store::Tier;

/// The package format's `schemaVersion`.
pub const SCHEMA_VERSION: &str = "agentos.emergent-tool.v1";
/// The package format's `packageType`.
pub const PACKAGE_TYPE: &str = "emergent-tool";
/// What Temper writes for the package's timestamps (`exportedAt`,
/// `tool.createdAt`): exports are content-addressed, so they carry no
/// clock; who forged a tool and when is in the store's audit trail.
pub const EPOCH: &str = "1970-01-01T00:00:00.000Z";
/// The largest package text read, bytes (4 MiB, as an artifact manifest).
pub const MAX_PACKAGE_BYTES: usize = 4 << 20;

/// Why an AgentOS package was refused (before anything was built), or
/// could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// Neither JSON nor YAML, or not the expected shape.
    #[error("agentos package: {0}")]
    Parse(String),
    /// Another format or version than `agentos.emergent-tool.v1`.
    #[error(
        "agentos package: unsupported package (schemaVersion {found:?}, packageType {kind:?}); expected schemaVersion \"{SCHEMA_VERSION}\", packageType \"{PACKAGE_TYPE}\""
    )]
    Unsupported {
        /// The `schemaVersion` found.
        found: String,
        /// The `packageType` found.
        kind: String,
    },
    /// The sandbox source was redacted at rest (AgentOS's default,
    /// `persistSandboxSource: false`): there is no code to build or review.
    #[error(
        "agentos package: the sandbox source of {0:?} is redacted (sourcePersisted: false): the package has no code to build, test or review; export it from AgentOS with persistSandboxSource on"
    )]
    Redacted(String),
    /// A compose package: its steps name tools of the host that made it.
    #[error(
        "agentos package: {0:?} is a compose tool; only sandbox packages are imported (forge the pipeline as a compose request on this host)"
    )]
    Compose(String),
    /// No test cases in the package and none given.
    #[error(
        "agentos package: {0:?} carries no test cases (AgentOS packages have none): give test cases (`temper import --tests FILE`) to import it"
    )]
    NoTests(String),
    /// Over [`MAX_PACKAGE_BYTES`].
    #[error("agentos package: {0} bytes, over the {MAX_PACKAGE_BYTES}-byte limit")]
    TooLarge(usize),
    /// Export of a tool that is not a sandbox tool.
    #[error(
        "agentos package: {0:?} is a {1} tool; only sandbox tools are exported as AgentOS packages"
    )]
    NotSandbox(String, &'static str),
}

/// An AgentOS package, read: the forge request it stands for (test cases
/// from the package, when it has them) and the warnings it carried.
#[derive(Debug, Clone)]
pub struct Package {
    /// The tool as a forge request (code adapted by [`temper_source`]).
    pub request: ForgeRequest,
    /// `portability.warnings` as written.
    pub warnings: Vec<String>,
}

/// Parses an `agentos.emergent-tool.v1` package from JSON or YAML text,
/// with the checks AgentOS's `parseEmergentToolPackage` makes (JSON when
/// the text starts with `{` or `[`, else YAML; the schema version and
/// package type), then those an import needs: a sandbox tool whose source
/// is there. `tests` replaces the package's test cases when given.
pub fn parse_package(text: &str, tests: Option<Vec<TestCase>>) -> Result<Package, PackageError> {
    if text.len() > MAX_PACKAGE_BYTES {
        return Err(PackageError::TooLarge(text.len()));
    }
    let trimmed = text.trim();
    let doc: Value = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        serde_json::from_str(trimmed).map_err(|e| PackageError::Parse(format!("JSON: {e}")))?
    } else {
        serde_saphyr::from_str(trimmed).map_err(|e| PackageError::Parse(format!("YAML: {e}")))?
    };
    let field = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (found, kind) = (field(&doc, "schemaVersion"), field(&doc, "packageType"));
    if found != SCHEMA_VERSION || kind != PACKAGE_TYPE {
        return Err(PackageError::Unsupported { found, kind });
    }
    let tool = doc
        .get("tool")
        .and_then(Value::as_object)
        .ok_or_else(|| PackageError::Parse("`tool` is missing or not an object".into()))?;
    let text_field = |k: &str| -> Result<String, PackageError> {
        tool.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| PackageError::Parse(format!("`tool.{k}` is missing or not a string")))
    };
    let name = text_field("name")?;
    let description = text_field("description")?;
    let implementation = tool
        .get("implementation")
        .and_then(Value::as_object)
        .ok_or_else(|| PackageError::Parse("`tool.implementation` is missing".into()))?;
    match implementation.get("mode").and_then(Value::as_str) {
        Some("sandbox") => {}
        Some("compose") => return Err(PackageError::Compose(name)),
        other => {
            return Err(PackageError::Parse(format!(
                "`tool.implementation.mode` is {other:?}, not \"sandbox\" or \"compose\""
            )));
        }
    }
    let code = implementation
        .get("code")
        .and_then(Value::as_str)
        .filter(|c| !c.trim().is_empty());
    let Some(code) = code else {
        return Err(PackageError::Redacted(name));
    };
    let allowlist = match implementation.get("allowlist") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => serde_json::from_value::<Vec<String>>(v.clone()).map_err(|_| {
            PackageError::Parse("`tool.implementation.allowlist` is not a list of names".into())
        })?,
    };
    let test_cases = match tests {
        Some(t) => t,
        None => match tool.get("testCases") {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => serde_json::from_value::<Vec<TestCase>>(v.clone())
                .map_err(|e| PackageError::Parse(format!("`tool.testCases`: {e}")))?,
        },
    };
    if test_cases.is_empty() {
        return Err(PackageError::NoTests(name));
    }
    let warnings = doc
        .pointer("/portability/warnings")
        .and_then(Value::as_array)
        .map(|w| {
            w.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    Ok(Package {
        request: ForgeRequest {
            name,
            description,
            input_schema: tool.get("inputSchema").cloned().unwrap_or(Value::Null),
            output_schema: tool.get("outputSchema").cloned().unwrap_or(Value::Null),
            implementation: Implementation::Sandbox {
                code: temper_source(code).into_owned(),
                allowlist,
            },
            test_cases,
        },
        warnings,
    })
}

/// Whether `code` has the identifier `word` (not as part of a longer one).
fn has_word(code: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    code.match_indices(word).any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + word.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// AgentOS code as Temper runs it: AgentOS calls `execute(input)` or, when
/// there is none, `run(input)`; Temper calls `execute`. Code that never
/// names `execute` but names `run` gets `function execute(input) { return
/// run(input); }` appended; any other code is unchanged.
pub fn temper_source(code: &str) -> Cow<'_, str> {
    if !has_word(code, "execute") && has_word(code, "run") {
        Cow::Owned(format!(
            "{code}\n;function execute(input) {{ return run(input); }}\n"
        ))
    } else {
        Cow::Borrowed(code)
    }
}

impl Forge {
    /// Imports an AgentOS package (`text`, JSON or YAML) into `tier` for
    /// `ctx`: [`parse_package`] (`tests` replace the package's own), then
    /// its code is built here into an artifact that carries the source, and
    /// that artifact goes through [`Forge::import`]: capabilities against
    /// this host's policy, the static check, the tests, the judge (which
    /// sees the source), registration. Nothing is stored unless every step
    /// passes.
    pub async fn import_agentos(
        &self,
        text: &str,
        tests: Option<Vec<TestCase>>,
        ctx: &ForgeContext,
        tier: Tier,
    ) -> Result<Forged, ForgeError> {
        let package = super::bounded::check_size(text.len() as u64, self.max_artifact_bytes())
            .map_err(ForgeError::Import)
            .and_then(|()| {
                parse_package(text, tests)
                    .map_err(|e| ForgeError::Import(super::error::ImportError::Package(e)))
            })
            .and_then(|p| {
                // A built-in's name is refused before anything is built.
                super::validate::check_name(&p.request.name)?;
                Ok(p)
            });
        let package = match package {
            Ok(p) => p,
            Err(e) => {
                self.audit_rejection("(import)", ctx, &e);
                return Err(e);
            }
        };
        let built = super::build::build_sandbox(&self.inner.runtime, &package.request, true).await;
        let built = match built {
            Ok(b) => b,
            Err(e) => {
                let e = ForgeError::Build(e);
                self.audit_rejection(&package.request.name, ctx, &e);
                return Err(e);
            }
        };
        self.import(built.artifact.bytes.to_vec(), ctx, tier).await
    }

    /// The tool `name_or_id` (as `ctx` sees it) as an AgentOS package, JSON
    /// text that `parseEmergentToolPackage` accepts: name, description,
    /// schemas, the sandbox code (kept, or `source`, checked against the
    /// recorded blake3) and allowlist, and its test cases in
    /// `tool.testCases`. Deterministic: the timestamps are [`EPOCH`],
    /// `createdBy` is `temper`, no judge verdicts or usage statistics (the
    /// importer judges again), keys in a fixed order.
    pub fn export_agentos(
        &self,
        name_or_id: &str,
        ctx: &ForgeContext,
        source: Option<&str>,
    ) -> Result<String, ExportError> {
        let info = self.find_visible(name_or_id, ctx)?;
        if info.mode != Mode::Sandbox {
            return Err(PackageError::NotSandbox(info.name, info.mode.as_str()).into());
        }
        let exported = self.export(name_or_id, ctx, true, source)?;
        let manifest = artifact::read_manifest(&exported.bytes)?;
        let code = manifest
            .source
            .clone()
            .ok_or_else(|| ExportError::NoSource(info.name.clone()))?;
        Ok(package_json(&manifest, &code, info.tier, &exported.id))
    }
}

/// The package text for `manifest` (sandbox code `code`) registered in
/// `tier` as artifact `id`.
fn package_json(manifest: &artifact::ArtifactManifest, code: &str, tier: Tier, id: &str) -> String {
    let mut tool = Map::new();
    tool.insert("originalToolId".into(), json!(format!("temper:{id}")));
    tool.insert("originalTier".into(), json!(tier.as_str()));
    tool.insert("name".into(), json!(manifest.name));
    tool.insert("description".into(), json!(manifest.description));
    tool.insert("inputSchema".into(), manifest.input_schema.clone());
    tool.insert("outputSchema".into(), manifest.output_schema.clone());
    tool.insert(
        "implementation".into(),
        json!({
            "mode": "sandbox",
            "allowlist": manifest.capabilities,
            "sourcePersisted": true,
            "redactedAtRest": false,
            "code": code,
        }),
    );
    tool.insert("createdBy".into(), json!("temper"));
    tool.insert("createdAt".into(), json!(EPOCH));
    tool.insert(
        "source".into(),
        json!(format!("exported by Temper from artifact {id}")),
    );
    tool.insert("judgeVerdicts".into(), json!([]));
    tool.insert(
        "usageStats".into(),
        json!({"totalUses": 0, "successCount": 0, "failureCount": 0,
               "avgExecutionTimeMs": 0, "confidenceScore": 0, "lastUsedAt": null}),
    );
    tool.insert("testCases".into(), json!(manifest.test_cases));
    let doc = json!({
        "schemaVersion": SCHEMA_VERSION,
        "packageType": PACKAGE_TYPE,
        "exportedAt": EPOCH,
        "portability": {"portable": true, "warnings": []},
        "tool": tool,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value serializes");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const PACKAGE: &str = r#"schemaVersion: agentos.emergent-tool.v1
packageType: emergent-tool
exportedAt: 2026-11-28T09:00:00.000Z
portability:
  portable: true
  warnings: []
tool:
  originalToolId: emergent_1_abc
  originalTier: session
  name: slugify
  description: Convert a string to a URL-friendly slug
  inputSchema:
    type: object
    properties:
      text:
        type: string
  outputSchema:
    type: object
  implementation:
    mode: sandbox
    allowlist: []
    sourcePersisted: true
    redactedAtRest: false
    code: |-
      function execute(input) {
        return { slug: input.text.toLowerCase().replace(/[^a-z0-9]+/g, '-') };
      }
  createdBy: agent-1
  createdAt: 2026-11-28T09:00:00.000Z
  source: forged by agent agent-1 during session s1
  judgeVerdicts: []
  usageStats:
    totalUses: 0
"#;

    fn case() -> Vec<TestCase> {
        vec![TestCase {
            input: json!({"text": "A b"}),
            expected_output: Some(json!({"slug": "a-b"})),
            ..Default::default()
        }]
    }

    #[test]
    fn yaml_package_becomes_a_request() {
        let p = parse_package(PACKAGE, Some(case())).unwrap();
        assert_eq!(p.request.name, "slugify");
        assert_eq!(
            p.request.input_schema["properties"]["text"]["type"],
            "string"
        );
        let Implementation::Sandbox { code, allowlist } = &p.request.implementation else {
            panic!("not sandbox")
        };
        assert!(code.starts_with("function execute(input) {"), "{code}");
        assert!(allowlist.is_empty());
        assert_eq!(p.request.test_cases, case());
    }

    #[test]
    fn package_without_tests_is_refused_unless_given() {
        let err = parse_package(PACKAGE, None).unwrap_err();
        assert!(
            matches!(err, PackageError::NoTests(ref n) if n == "slugify"),
            "{err}"
        );
        assert!(err.to_string().contains("carries no test cases"), "{err}");
    }

    #[test]
    fn redacted_source_is_refused_saying_so() {
        let redacted = PACKAGE
            .replace("sourcePersisted: true", "sourcePersisted: false")
            .replace("redactedAtRest: false", "redactedAtRest: true");
        let redacted =
            redacted.split("    code: |-").next().unwrap().to_string() + "  createdBy: agent-1\n";
        let err = parse_package(&redacted, Some(case())).unwrap_err();
        assert!(
            matches!(err, PackageError::Redacted(ref n) if n == "slugify"),
            "{err}"
        );
        assert!(err.to_string().contains("is redacted"), "{err}");
    }

    #[test]
    fn other_formats_are_refused() {
        let err = parse_package(
            r#"{"schemaVersion": "agentos.emergent-tool.v2", "packageType": "emergent-tool"}"#,
            None,
        )
        .unwrap_err();
        assert!(matches!(err, PackageError::Unsupported { .. }), "{err}");
        let err = parse_package("- [unclosed", None).unwrap_err();
        assert!(matches!(err, PackageError::Parse(_)), "{err}");
        let compose = PACKAGE.replace("mode: sandbox", "mode: compose");
        assert!(matches!(
            parse_package(&compose, Some(case())),
            Err(PackageError::Compose(_))
        ));
    }

    #[test]
    fn run_entry_points_get_an_execute() {
        let adapted = temper_source("async function run(input) { return input; }");
        assert!(adapted.ends_with("function execute(input) { return run(input); }\n"));
        let kept = "function execute(i) { return run(i); } function run(i) { return i; }";
        assert_eq!(temper_source(kept), kept);
        assert_eq!(
            temper_source("function executed() {} const rerun = 1;"),
            "function executed() {} const rerun = 1;"
        );
    }
}
