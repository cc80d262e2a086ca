//! A tampered blob or a lying manifest is refused, naming the stage and
//! the reference.

use std::collections::BTreeMap;

use oci_client::Reference;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use temper::oci::{
    self, OciAuth, OciError, VerifyFailure, WASM_CONFIG_MEDIA_TYPE, WASM_LAYER_MEDIA_TYPE,
};

use super::{RegistryServer, insecure, push_raw, raw_client, sha256, small_artifact};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_blob_or_lying_manifest_is_refused() {
    let Some(server) = RegistryServer::start(None) else {
        return;
    };
    let options = insecure(OciAuth::Anonymous);
    let bytes = small_artifact("victim");
    let reference = server.reference("tools/victim:1");
    let pushed = oci::push_artifact(&bytes, &reference, &options)
        .await
        .unwrap();

    // The blob's file in the registry's storage is rewritten (same length).
    let file = server.blob_file(&pushed.layer_digest);
    let mut stored = std::fs::read(&file).unwrap();
    assert_eq!(stored, bytes, "the blob is stored as pushed");
    let last = stored.len() - 1;
    stored[last] ^= 0x55;
    std::fs::write(&file, &stored).unwrap();
    let err = oci::pull_artifact(&reference, &options).await.unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::LayerDigest { .. },
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.starts_with(&format!("verify {reference}")), "{text}");
    assert!(text.contains(&pushed.layer_digest), "{text}");

    // A manifest whose annotated blake3 id is not the bytes'.
    let other = small_artifact("other");
    let mut annotations = BTreeMap::new();
    annotations.insert(oci::ANNOTATION_BLAKE3.to_string(), pushed.id.clone());
    push_raw(
        &server.host(),
        "tools/liar",
        "1",
        &other,
        WASM_LAYER_MEDIA_TYPE,
        None,
        annotations,
    )
    .await;
    let err = oci::pull_artifact(&server.reference("tools/liar:1"), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::Blake3 { .. },
                ..
            }
        ),
        "{err:?}"
    );

    // A manifest stating a digest that is not the layer's: the registry
    // refuses it (the blob is unknown) or the pull does.
    let stated = sha256(b"something else");
    let client = raw_client(&server.host());
    let target = Reference::with_tag(server.host(), "tools/wrong".into(), "1".into());
    client
        .store_auth_if_needed(&server.host(), &RegistryAuth::Anonymous)
        .await;
    client
        .push_blob(&target, &other, &sha256(&other))
        .await
        .unwrap();
    let config = br#"{"architecture":"wasm","os":"wasip2"}"#.to_vec();
    client
        .push_blob(&target, &config, &sha256(&config))
        .await
        .unwrap();
    let lying = OciImageManifest {
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: WASM_CONFIG_MEDIA_TYPE.into(),
            digest: sha256(&config),
            size: config.len() as i64,
            ..OciDescriptor::default()
        },
        layers: vec![OciDescriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.into(),
            digest: stated,
            size: other.len() as i64,
            ..OciDescriptor::default()
        }],
        ..OciImageManifest::default()
    };
    let accepted = client
        .push_manifest_raw(
            &target,
            serde_json::to_vec(&lying).unwrap(),
            OCI_IMAGE_MEDIA_TYPE.parse().unwrap(),
        )
        .await;
    if accepted.is_ok() {
        let err = oci::pull_artifact(&server.reference("tools/wrong:1"), &options)
            .await
            .unwrap_err();
        assert!(
            matches!(err, OciError::NotFound { .. } | OciError::Verify { .. }),
            "{err:?}"
        );
    }

    // Not wasm: a layer of another media type; a wasm without a manifest section.
    push_raw(
        &server.host(),
        "tools/tarball",
        "1",
        &other,
        "application/vnd.oci.image.layer.v1.tar",
        None,
        BTreeMap::new(),
    )
    .await;
    let err = oci::pull_artifact(&server.reference("tools/tarball:1"), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::Layers(_),
                ..
            }
        ),
        "{err:?}"
    );
    let bare = wat::parse_str("(component)").unwrap();
    push_raw(
        &server.host(),
        "tools/bare",
        "1",
        &bare,
        WASM_LAYER_MEDIA_TYPE,
        None,
        BTreeMap::new(),
    )
    .await;
    let err = oci::pull_artifact(&server.reference("tools/bare:1"), &options)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            OciError::Verify {
                failure: VerifyFailure::Manifest(_),
                ..
            }
        ),
        "{err:?}"
    );
    // And push refuses bytes that are not a Temper artifact.
    let err = oci::push_artifact(&bare, &server.reference("tools/bare:2"), &options)
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::NotAnArtifact { .. }), "{err:?}");
}
