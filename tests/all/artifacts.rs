//! Self-describing artifacts: export on one host, import on another (same
//! id, tests re-run, same outputs); hostile files refused or contained with
//! nothing partial in the store; `verify` rebuilds and compares; the WIT
//! world decodes; builds are byte-identical across processes and match the
//! hashes recorded in `tests/fixtures/reproducible.json`.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::json;
use support::cache_dir;
use temper::artifact::{self, ArtifactError};
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeConfig, ForgeContext, ForgeError, ImportError, Stage};
use temper::policy::HostPolicy;
use temper::request::{ForgeRequest, Implementation};
use temper::store::{Registry, Tier};

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
}

fn request(path: &str) -> ForgeRequest {
    ForgeRequest::from_json(&std::fs::read_to_string(fixture(path)).unwrap()).unwrap()
}

fn code_of(r: &ForgeRequest) -> String {
    let Implementation::Sandbox { code, .. } = &r.implementation else {
        unreachable!()
    };
    code.clone()
}

fn forge_in(dir: &Path, policy: HostPolicy, config: ForgeConfig) -> Forge {
    let runtime = support::runtime_builder().policy(policy).build().unwrap();
    let judge: Arc<dyn Judge> = Arc::new(RulesJudge::standard());
    Forge::builder(runtime, Arc::new(Registry::open(dir).unwrap()))
        .judge(judge)
        .config(config)
        .build()
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-a", "s1")
}

/// The store holds no tool, no artifact, and its audit chain verifies.
fn assert_nothing_landed(forge: &Forge) {
    let st = forge.store();
    assert!(st.artifact_ids().unwrap().is_empty(), "an artifact landed");
    assert!(
        forge.visible_tools(&ctx()).unwrap().is_empty(),
        "a tool landed"
    );
    st.verify_audit().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_then_import_elsewhere_keeps_the_id_and_the_outputs() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let crypto = || HostPolicy::deny_all().with_allow_crypto();
    let origin = forge_in(a.path(), crypto(), ForgeConfig::default());
    let req = request("artifacts/hash_message.json");
    let forged = origin.forge(&req, &ctx()).await.unwrap();
    let input = json!({"message": "hello"});
    let expected = origin
        .invoke("hash_message", &input, &ctx())
        .await
        .unwrap()
        .output;

    // Without source: still importable (it carries bytecode), judged as such.
    let exported = origin.export("hash_message", &ctx(), false, None).unwrap();
    assert_eq!(
        exported.id, forged.tool.id,
        "the file is the registered artifact"
    );
    let m = artifact::read_manifest(&exported.bytes).unwrap();
    assert!(m.source.is_none());
    assert_eq!(m.capabilities, ["crypto"]);
    assert_eq!(
        m.source_blake3,
        blake3::hash(code_of(&req).as_bytes()).to_hex().as_str()
    );
    let text = String::from_utf8_lossy(&exported.bytes);
    assert!(
        !text.contains("createHash('sha256')"),
        "no source in a plain export"
    );
    assert!(
        exported
            .provenance
            .iter()
            .any(|e| e["kind"] == "forge_decision")
    );

    let target = forge_in(b.path(), crypto(), ForgeConfig::default());
    let other = ForgeContext::new("agent-b", "s9");
    let imported = target
        .import(exported.bytes.clone(), &other, Tier::Agent)
        .await
        .unwrap();
    assert_eq!(imported.tool.id, exported.id);
    assert_eq!(imported.tool.tier, Tier::Agent);
    assert!(imported.test_results.iter().all(|r| r.passed) && !imported.test_results.is_empty());
    assert_eq!(
        imported.verdict.confidence, 0.5,
        "bytecode-only: below the promotion threshold"
    );
    let out = target.invoke("hash_message", &input, &other).await.unwrap();
    assert_eq!(out.output, expected);

    // With source: a different file (its own id) that carries the source.
    let with_src = origin.export(&forged.tool.id, &ctx(), true, None).unwrap();
    assert_ne!(with_src.id, exported.id);
    assert_eq!(
        artifact::read_manifest(&with_src.bytes).unwrap().source,
        Some(code_of(&req))
    );
    let c = tempfile::tempdir().unwrap();
    let third = forge_in(c.path(), crypto(), ForgeConfig::default());
    let imported = third
        .import(with_src.bytes, &ctx(), Tier::Session)
        .await
        .unwrap();
    assert_eq!(imported.verdict.confidence, 0.85);
    // Re-importing the same name is refused (the name is taken).
    let err = target
        .import(exported.bytes, &other, Tier::Agent)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("already exists in the agent tier"),
        "{err}"
    );
}

/// The store's files for artifact `id`: (compact record, component).
fn stored_forms(dir: &Path, id: &str) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    let read = |ext: &str| std::fs::read(dir.join("artifacts").join(format!("{id}{ext}"))).ok();
    (read(".tjs"), read(".wasm"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_tool_is_stored_compact_and_rebuilt_byte_for_byte_on_a_cold_host() {
    let dir = tempfile::tempdir().unwrap();
    let first = forge_in(dir.path(), HostPolicy::deny_all(), ForgeConfig::default());
    let req = request("seeds/slugify.json");
    let id = first.forge(&req, &ctx()).await.unwrap().tool.id;
    let (compact, wasm) = stored_forms(dir.path(), &id);
    let compact = compact.expect("the tool is stored as its compact record");
    assert!(wasm.is_none(), "no full component is stored");
    assert!(
        compact.len() < 16 * 1024,
        "the record is {} bytes",
        compact.len()
    );
    let input = json!({"text": "Hello, Compact World"});
    let expected = first
        .invoke("slugify", &input, &ctx())
        .await
        .unwrap()
        .output;
    let exported = first.export("slugify", &ctx(), false, None).unwrap();
    assert_eq!(blake3::hash(&exported.bytes).to_hex().as_str(), id);
    assert!(
        exported.bytes.len() > 500_000,
        "the export is self-contained"
    );

    // A cold host (its own runtime) on the same store: it rebuilds the
    // component from the record, checks it against the id, and runs it.
    let snapshot = first.snapshot_session(&ctx()).unwrap();
    let cold = forge_in(dir.path(), HostPolicy::deny_all(), ForgeConfig::default());
    cold.restore_session(snapshot).unwrap();
    assert_eq!(
        cold.invoke("slugify", &input, &ctx()).await.unwrap().output,
        expected
    );
    assert_eq!(
        cold.export("slugify", &ctx(), false, None).unwrap().bytes,
        exported.bytes,
        "the rebuilt artifact is byte-identical"
    );

    // Switched off, the full component is stored; records already in a
    // store are still rebuilt.
    let config = ForgeConfig {
        compact_artifacts: false,
        ..ForgeConfig::default()
    };
    let off = forge_in(dir.path(), HostPolicy::deny_all(), config.clone());
    off.restore_session(first.snapshot_session(&ctx()).unwrap())
        .unwrap();
    assert_eq!(
        off.export("slugify", &ctx(), false, None).unwrap().bytes,
        exported.bytes
    );
    let full_dir = tempfile::tempdir().unwrap();
    let full = forge_in(full_dir.path(), HostPolicy::deny_all(), config);
    let full_id = full.forge(&req, &ctx()).await.unwrap().tool.id;
    assert_eq!(full_id, id, "the id does not depend on how it is stored");
    let (compact, wasm) = stored_forms(full_dir.path(), &id);
    assert!(compact.is_none());
    assert_eq!(wasm.as_deref(), Some(&exported.bytes[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_compact_record_is_refused_where_it_is_loaded_or_exported() {
    let dir = tempfile::tempdir().unwrap();
    let first = forge_in(dir.path(), HostPolicy::deny_all(), ForgeConfig::default());
    let id = first
        .forge(&request("seeds/slugify.json"), &ctx())
        .await
        .unwrap()
        .tool
        .id;
    let snapshot = first.snapshot_session(&ctx()).unwrap();
    let path = dir.path().join("artifacts").join(format!("{id}.tjs"));
    let genuine = std::fs::read(&path).unwrap();
    let input = json!({"text": "x"});

    // The manifest in the record edited (a description that was not judged).
    let mut edited = genuine.clone();
    let at = edited
        .windows(b"slugify".len())
        .rposition(|w| w == b"slugify")
        .expect("the record carries the manifest");
    edited[at] = b'S';
    // Another shim named, and a truncated record.
    let mut other_shim = genuine.clone();
    other_shim[18..50].fill(0);
    let truncated = genuine[..40].to_vec();
    for (what, bytes, expect) in [
        ("edited manifest", edited, "hashes to"),
        ("other shim", other_shim, "built by shim"),
        ("truncated", truncated, "not a compact artifact record"),
    ] {
        std::fs::write(&path, &bytes).unwrap();
        let cold = forge_in(dir.path(), HostPolicy::deny_all(), ForgeConfig::default());
        cold.restore_session(snapshot.clone()).unwrap();
        let err = cold.invoke("slugify", &input, &ctx()).await.unwrap_err();
        assert!(
            err.to_string().contains(expect) && err.to_string().contains(&id),
            "{what}: {err}"
        );
        let err = cold.export("slugify", &ctx(), false, None).unwrap_err();
        assert!(err.to_string().contains(&id), "{what}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_files_are_refused_or_contained_and_nothing_partial_lands() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let origin = forge_in(
        a.path(),
        HostPolicy::deny_all().with_allow_crypto(),
        ForgeConfig::default(),
    );
    let req = request("artifacts/hash_message.json");
    let good = origin.forge(&req, &ctx()).await.unwrap();
    let bytes = origin
        .export("hash_message", &ctx(), false, None)
        .unwrap()
        .bytes;
    let target = forge_in(
        b.path(),
        HostPolicy::deny_all().with_allow_crypto(),
        ForgeConfig::default(),
    );

    let refused = |e: &ForgeError| e.to_string();
    // Random bytes; a truncated file; a flipped byte in the magic.
    let mut rng_bytes = vec![0u8; 4096];
    for (i, b) in rng_bytes.iter_mut().enumerate() {
        *b = ((i * 2654435761usize) >> 7) as u8;
    }
    let truncated = bytes[..bytes.len() / 2].to_vec();
    let mut magic = bytes.clone();
    magic[1] ^= 0x01;
    for (what, file) in [
        ("random", rng_bytes),
        ("truncated", truncated),
        ("magic", magic),
    ] {
        let err = target.import(file, &ctx(), Tier::Agent).await.unwrap_err();
        assert_eq!(err.stage(), Stage::Import, "{what}: {err}");
        assert!(
            matches!(err, ForgeError::Import(ImportError::Artifact(_))),
            "{what}: {}",
            refused(&err)
        );
    }

    // A flipped byte in the manifest's JSON syntax.
    let (manifest, component) = artifact::split(&bytes).unwrap();
    let json_at = component.len()
        + bytes[component.len()..]
            .windows(2)
            .position(|w| w == b"{\"")
            .unwrap();
    let mut broken = bytes.clone();
    broken[json_at] = b'[';
    let err = target
        .import(broken, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ForgeError::Import(ImportError::Artifact(ArtifactError::Malformed(_)))
        ),
        "{err}"
    );

    // A flipped byte inside the component: refused, or contained as a
    // different tool; never accepted under the original id.
    let mut flipped = bytes.clone();
    flipped[component.len() / 2] ^= 0x40;
    match target.import(flipped, &ctx(), Tier::Agent).await {
        Err(e) => assert!(!e.to_string().is_empty()),
        Ok(f) => {
            assert_ne!(f.tool.id, good.tool.id);
            target.store().delete(&f.tool.name, "agent-a").unwrap();
        }
    }

    // The manifest edited to claim fewer capabilities: grants follow the
    // manifest, so the tool cannot use crypto and its own tests fail.
    let mut fewer = manifest.clone();
    fewer.capabilities.clear();
    let edited = artifact::embed(component, &fewer).unwrap();
    let err = target
        .import(edited, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert_eq!(err.stage(), Stage::Test, "{err}");
    assert!(
        err.to_string().contains("capability not granted: crypto"),
        "{err}"
    );

    // A component that is not of the `tool` world, with a valid manifest.
    let foreign =
        wat::parse_str(r#"(component (import "wasi:sockets/tcp@0.2.0" (instance)))"#).unwrap();
    let foreign = artifact::embed(&foreign, &manifest).unwrap();
    let err = target
        .import(foreign, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ForgeError::Import(ImportError::Load(_))),
        "{err}"
    );
    assert!(err.to_string().contains("wasi:sockets/tcp"), "{err}");

    // No manifest at all: a plain component.
    let err = target
        .import(component.to_vec(), &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("no `temper.manifest` section"),
        "{err}"
    );

    let st = target.store();
    let ids = st.artifact_ids().unwrap();
    assert!(ids.is_empty(), "nothing partial in the store: {ids:?}");
    st.verify_audit().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_that_do_not_fit_the_host_are_each_named() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let origin = forge_in(
        a.path(),
        HostPolicy::deny_all().with_allow_crypto(),
        ForgeConfig::default(),
    );
    origin
        .forge(&request("artifacts/hash_message.json"), &ctx())
        .await
        .unwrap();
    let bytes = origin
        .export("hash_message", &ctx(), false, None)
        .unwrap()
        .bytes;
    let (mut manifest, component) = artifact::split(&bytes).unwrap();
    manifest.capabilities = vec!["crypto".into(), "fetch".into(), "net.raw".into()];
    let wider = artifact::embed(component, &manifest).unwrap();

    let target = forge_in(b.path(), HostPolicy::deny_all(), ForgeConfig::default());
    let err = target.import(wider, &ctx(), Tier::Agent).await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(err, ForgeError::Import(ImportError::Capabilities(ref c)) if c.len() == 3),
        "{text}"
    );
    for part in [
        "crypto (not allowed by this host's policy)",
        "fetch (not allowed by this host's policy)",
        "net.raw (unknown capability)",
    ] {
        assert!(text.contains(part), "{text}");
    }
    assert_nothing_landed(&target);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_rebuilds_and_names_what_differs() {
    let a = tempfile::tempdir().unwrap();
    let origin = forge_in(a.path(), HostPolicy::deny_all(), ForgeConfig::default());
    let req = request("seeds/slugify.json");
    origin.forge(&req, &ctx()).await.unwrap();
    let bytes = origin.export("slugify", &ctx(), false, None).unwrap().bytes;
    let rt = origin.runtime();

    let report = temper::verify::verify(rt, &bytes, Some(&code_of(&req)), None)
        .await
        .unwrap();
    assert!(report.identical, "{report:?}");
    let report = temper::verify::verify(rt, &bytes, None, Some(&req))
        .await
        .unwrap();
    assert!(
        report.identical && report.rebuilt_id == report.id,
        "{report:?}"
    );

    let other = code_of(&req).replace("'-'", "'_'");
    let report = temper::verify::verify(rt, &bytes, Some(&other), None)
        .await
        .unwrap();
    assert!(!report.identical);
    let all = report.differences.join("\n");
    assert!(
        all.contains("source: the file was built from source"),
        "{all}"
    );
    assert!(all.contains("component: the rebuilt component"), "{all}");

    let mut renamed = req.clone();
    renamed.description = "Something else".into();
    let report = temper::verify::verify(rt, &bytes, None, Some(&renamed))
        .await
        .unwrap();
    assert_eq!(
        report.differences,
        ["manifest: field `description` differs from the request"]
    );

    let err = temper::verify::verify(rt, &bytes, None, None)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("carries no source"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exported_artifact_decodes_to_the_tool_world() {
    let a = tempfile::tempdir().unwrap();
    let origin = forge_in(a.path(), HostPolicy::deny_all(), ForgeConfig::default());
    origin
        .forge(&request("seeds/add_numbers.json"), &ctx())
        .await
        .unwrap();
    let bytes = origin
        .export("add_numbers", &ctx(), false, None)
        .unwrap()
        .bytes;
    let world = artifact::world(&bytes).unwrap();
    assert!(
        world
            .exports
            .contains(&temper::runtime::RUN_EXPORT.to_string()),
        "{world:?}"
    );
    for name in [
        "temper:tool/log@0.1.0",
        "temper:tool/fetch@0.1.0",
        "temper:tool/crypto@0.1.0",
    ] {
        assert!(
            world.imports.iter().any(|i| i == name),
            "{name} in {world:?}"
        );
    }
    for import in &world.imports {
        assert!(
            temper::runtime::ALLOWED_IMPORT_PREFIXES
                .iter()
                .any(|p| import.starts_with(p)),
            "import {import} outside the tool world"
        );
        assert!(
            !import.starts_with("wasi:sockets") && !import.starts_with("wasi:http"),
            "{import}"
        );
    }
}

/// `temper build REQUEST.json` in a process with its own cwd, env and TMPDIR.
fn build_in_process(req: &Path, out: &Path, cwd: &Path, tmp: &Path, tz: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_temper"))
        .current_dir(cwd)
        .env_clear()
        .env("TMPDIR", tmp)
        .env("TZ", tz)
        .env("HOME", cwd)
        .env("LANG", if tz == "UTC" { "C" } else { "de_DE.UTF-8" })
        .args([
            "build",
            req.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--json",
            "--cache-dir",
        ])
        .arg(cache_dir())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let bytes = std::fs::read(out).unwrap();
    assert_eq!(doc["id"], blake3::hash(&bytes).to_hex().as_str());
    doc["id"].as_str().unwrap().to_string()
}

/// Set to rewrite `tests/fixtures/reproducible.json` after a deliberate
/// change to the shim, the prelude or the manifest format.
const UPDATE_ENV: &str = "TEMPER_UPDATE_REPRODUCIBLE";

#[test]
fn builds_are_byte_identical_and_match_the_recorded_hashes() {
    let seeds = [
        "add_numbers",
        "check_http_status",
        "convert_temperature",
        "parse_csv",
        "slugify",
    ];
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut built = serde_json::Map::new();
    for name in seeds {
        let req = fixture(&format!("seeds/{name}.json"));
        let a = build_in_process(
            &req,
            &one.path().join("a.wasm"),
            one.path(),
            two.path(),
            "UTC",
        );
        let b = build_in_process(
            &req,
            &two.path().join("b.wasm"),
            two.path(),
            one.path(),
            "Asia/Kolkata",
        );
        assert_eq!(a, b, "{name}: two processes built different bytes");
        built.insert(name.to_string(), json!(a));
    }
    let current = json!({
        "shim": temper::shim::shim_id(),
        "artifacts": built,
    });
    let path = fixture("reproducible.json");
    if std::env::var_os(UPDATE_ENV).is_some() {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&current).unwrap() + "\n",
        )
        .unwrap();
        return;
    }
    let recorded: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        current,
        recorded,
        "a clean build differs from {} (shim or artifacts drifted); if the change is deliberate, rerun with {UPDATE_ENV}=1 and commit the file",
        path.display()
    );
}
