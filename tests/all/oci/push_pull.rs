//! Push then pull through a real registry: the same bytes, id and Wasm
//! layout, and a missing tag or repository as a clear not-found.

use oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
use serde_json::json;
use temper::oci::{
    self, OciAuth, OciError, OciStage, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};

use super::{RegistryServer, get_json, insecure, sha256, small_artifact};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_then_pull_gives_the_same_bytes_id_and_wasm_layout() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let bytes = small_artifact("echo_tool");
    let reference = server.reference("tools/echo:1.0");
    let options = insecure(OciAuth::Anonymous);
    let pushed = oci::push_artifact(&bytes, &reference, &options)
        .await
        .unwrap();
    assert_eq!(pushed.id, temper::id::blake3_hex(&bytes));
    assert_eq!(pushed.name, "echo_tool");
    assert_eq!(pushed.layer_digest, sha256(&bytes));

    let pulled = oci::pull_artifact(&reference, &options).await.unwrap();
    assert_eq!(pulled.bytes, bytes, "pulled bytes differ");
    assert_eq!(pulled.id, pushed.id);
    assert_eq!(pulled.manifest.name, "echo_tool");
    assert_eq!(pulled.manifest_digest, pushed.manifest_digest);

    // Pinned by digest: the same bytes.
    let pinned = server.reference(&format!("tools/echo@{}", pushed.manifest_digest));
    let again = oci::pull_artifact(&pinned, &options).await.unwrap();
    assert_eq!(again.bytes, bytes);

    // The CNCF Wasm layout, as any OCI client sees it.
    let manifest = get_json(
        &server.host(),
        "/v2/tools/echo/manifests/1.0",
        OCI_IMAGE_MEDIA_TYPE,
    )
    .await;
    assert_eq!(manifest["config"]["mediaType"], WASM_CONFIG_MEDIA_TYPE);
    assert_eq!(manifest["layers"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["layers"][0]["mediaType"], WASM_LAYER_MEDIA_TYPE);
    assert_eq!(
        manifest["layers"][0]["digest"],
        pushed.layer_digest.as_str()
    );
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.title"],
        "echo_tool"
    );
    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let config = get_json(
        &server.host(),
        &format!("/v2/tools/echo/blobs/{config_digest}"),
        "*/*",
    )
    .await;
    assert_eq!(config["architecture"], "wasm");
    assert_eq!(config["os"], "wasip2");
    assert_eq!(config["layerDigests"], json!([pushed.layer_digest]));

    // Pushing the same bytes again gives the same manifest digest.
    let second = server.reference("tools/echo:latest");
    let repushed = oci::push_artifact(&bytes, &second, &options).await.unwrap();
    assert_eq!(repushed.manifest_digest, pushed.manifest_digest);

    // Tag listing.
    let mut tags = oci::list_tags(&reference, &options).await.unwrap();
    tags.sort();
    assert_eq!(tags, ["1.0", "latest"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_tag_or_repository_is_a_clear_not_found() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    oci::push_artifact(
        &small_artifact("present"),
        &server.reference("tools/present:1"),
        &options,
    )
    .await
    .unwrap();

    let missing = server.reference("tools/present:2");
    let err = oci::pull_artifact(&missing, &options).await.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::NotFound {
                stage: OciStage::Pull,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.starts_with("pull "), "{text}");
    assert!(text.contains(&missing.to_string()), "{text}");
    assert!(text.contains("not found"), "{text}");

    let nowhere = server.reference("tools/absent:1");
    let err = oci::pull_artifact(&nowhere, &options).await.unwrap_err();
    assert!(matches!(err, OciError::NotFound { .. }), "{err:?}");
    let err = oci::list_tags(&nowhere, &options).await.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::NotFound {
                stage: OciStage::Tags,
                ..
            }
        ),
        "{err:?}"
    );
}
