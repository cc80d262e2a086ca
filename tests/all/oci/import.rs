//! A pulled tool goes through the same import checks as `temper import`.

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use temper::forge::judge::{Judge, RulesJudge};
use temper::forge::{Forge, ForgeConfig, ForgeContext, ForgeError, ImportError};
use temper::oci::{self, OciAuth, OciError};
use temper::policy::HostPolicy;
use temper::request::ForgeRequest;
use temper::store::{Registry, Tier};

use super::{RegistryServer, insecure};

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(path)
}

fn forge_in(dir: &Path, policy: HostPolicy) -> Forge {
    let runtime = support::runtime_builder().policy(policy).build().unwrap();
    let judge: Arc<dyn Judge> = Arc::new(RulesJudge::standard());
    Forge::builder(runtime, Arc::new(Registry::open(dir).unwrap()))
        .judge(judge)
        .config(ForgeConfig::default())
        .build()
}

fn ctx() -> ForgeContext {
    ForgeContext::new("agent-a", "s1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pulled_tool_goes_through_the_import_checks() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let crypto = || HostPolicy::deny_all().with_allow_crypto();
    let origin = forge_in(a.path(), crypto());
    let request = ForgeRequest::from_json(
        &std::fs::read_to_string(fixture("artifacts/hash_message.json")).unwrap(),
    )
    .unwrap();
    let forged = origin.forge(&request, &ctx()).await.unwrap();
    let exported = origin.export("hash_message", &ctx(), false, None).unwrap();
    let reference = server.reference("tools/hash-message:1");
    let pushed = oci::push_artifact(&exported.bytes, &reference, &options)
        .await
        .unwrap();
    assert_eq!(pushed.id, forged.tool.id);

    // A host whose policy allows crypto: imported, same id, same output.
    let here = forge_in(b.path(), crypto());
    let (pulled, imported) = oci::pull_and_import(&here, &reference, &options, &ctx(), Tier::Agent)
        .await
        .unwrap();
    assert_eq!(pulled.id, pushed.id);
    assert_eq!(imported.tool.id, forged.tool.id);
    assert!(!imported.test_results.is_empty(), "tests re-ran");
    let out = here
        .invoke("hash_message", &json!({"message": "abc"}), &ctx())
        .await
        .unwrap();
    assert_eq!(
        out.output,
        json!({"sha256": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"})
    );

    // A host that does not allow crypto: verified, then refused at import.
    let strict = forge_in(c.path(), HostPolicy::deny_all());
    let err = oci::pull_and_import(&strict, &reference, &options, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    let text = err.to_string();
    match &err {
        OciError::Import { source, .. } => assert!(
            matches!(**source, ForgeError::Import(ImportError::Capabilities(_))),
            "{text}"
        ),
        other => panic!("expected an import refusal: {other:?}"),
    }
    assert!(text.starts_with(&format!("import {reference}")), "{text}");
    assert!(
        text.contains("crypto (not allowed by this host's policy)"),
        "{text}"
    );
    assert!(strict.store().artifact_ids().unwrap().is_empty());

    // The CLI: `temper pull --import` into a store, the policy from flags.
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    let (ok, doc, stderr) = support::temper_json(
        work.path(),
        &[("TEMPER_STORE", store.as_os_str())],
        [
            "pull",
            &reference.to_string(),
            "--insecure",
            "--import",
            "--judge",
            "rules",
            "--allow-crypto",
        ],
    );
    assert!(ok, "{stderr}");
    assert_eq!(doc["id"], pushed.id.as_str());
    assert_eq!(doc["name"], "hash_message");
    assert_eq!(doc["import"]["success"], true, "{doc}");
    let (ok, _, stderr) = support::temper_json(
        work.path(),
        &[("TEMPER_STORE", work.path().join("store2").as_os_str())],
        [
            "pull",
            &reference.to_string(),
            "--insecure",
            "--import",
            "--judge",
            "rules",
        ],
    );
    assert!(!ok);
    assert!(stderr.contains("import refused"), "{stderr}");
}

/// A layer over the puller's `maxArtifactBytes` is refused from the size
/// the registry's manifest declares, before the layer is downloaded; the
/// refusal names the size, the cap and the config key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_over_max_artifact_bytes_is_refused_before_download() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let crypto = || HostPolicy::deny_all().with_allow_crypto();
    let origin = forge_in(a.path(), crypto());
    let request = ForgeRequest::from_json(
        &std::fs::read_to_string(fixture("artifacts/hash_message.json")).unwrap(),
    )
    .unwrap();
    origin.forge(&request, &ctx()).await.unwrap();
    let exported = origin.export("hash_message", &ctx(), false, None).unwrap();
    let reference = server.reference("tools/too-big:1");
    oci::push_artifact(&exported.bytes, &reference, &options)
        .await
        .unwrap();

    let runtime = support::runtime_builder().policy(crypto()).build().unwrap();
    let limit = 64 * 1024;
    let small = Forge::builder(runtime, Arc::new(Registry::open(b.path()).unwrap()))
        .judge(Arc::new(RulesJudge::standard()))
        .config(ForgeConfig {
            max_artifact_bytes: limit,
            ..ForgeConfig::default()
        })
        .build();
    let err = oci::pull_and_import(&small, &reference, &options, &ctx(), Tier::Agent)
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::Verify { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "verify {reference}: the layer is {} bytes, over the {limit}-byte cap (maxArtifactBytes in --forge-config); refused before download",
            exported.bytes.len()
        )
    );
    assert!(small.store().artifact_ids().unwrap().is_empty());
}
