//! Signatures as OCI 1.1 referrers of an artifact's manifest.
//!
//! [`push_signature`] stores a detached signature (the payload of the
//! `signature` section, `temper_sign`) as an image manifest whose
//! `artifactType` is [`SIGNATURE_ARTIFACT_TYPE`], with one layer of
//! [`SIGNATURE_LAYER_MEDIA_TYPE`], the OCI empty config, and a `subject`
//! naming the artifact's manifest. [`pull_signatures`] finds them again.
//!
//! Registries without the referrers API (Debian's `docker-registry`,
//! distribution 2.8) are served by the OCI 1.1 *referrers tag schema*: an
//! image index tagged `sha256-<hex of the subject digest>` lists the
//! referrers; a push adds to it, a pull reads it. Every referrer is checked
//! before its signature is returned: its manifest's digest, its `subject`
//! (a referrer of another manifest is skipped), its media types, its size,
//! and the signature blob's digest. Whether a signature is *trusted* is the
//! trust policy's question (`temper_sign`), asked by the import.

use oci_client::Reference;
use oci_client::manifest::{OCI_IMAGE_INDEX_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use serde_json::{Value, json};

use super::{
    OciError, OciOptions, OciReference, OciStage, classify, client, read_blob, sha256_digest,
};

/// `artifactType` of a signature referrer.
pub const SIGNATURE_ARTIFACT_TYPE: &str = "application/vnd.dev.temper.signature.v1";
/// Media type of its one layer: the tool-conventions signature payload.
pub const SIGNATURE_LAYER_MEDIA_TYPE: &str = "application/vnd.dev.temper.signature.v1+wasmsig";
/// The OCI empty config.
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
const EMPTY_CONFIG: &[u8] = b"{}";
/// The largest signature accepted (256 signatures of ~100 bytes each fit).
pub const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;
/// The most signature referrers read for one artifact.
pub const MAX_REFERRERS: usize = 64;
/// The largest referrer manifest or index read.
const MAX_MANIFEST_BYTES: usize = 256 * 1024;

/// The referrers tag of `digest` (`sha256:abc…` → `sha256-abc…`).
fn referrers_tag(digest: &str) -> String {
    digest.replace(':', "-")
}

fn at(reference: &OciReference, tag: Option<String>, digest: Option<String>) -> Reference {
    match (tag, digest) {
        (_, Some(d)) => {
            Reference::with_digest(reference.registry.clone(), reference.repository.clone(), d)
        }
        (Some(t), None) => {
            Reference::with_tag(reference.registry.clone(), reference.repository.clone(), t)
        }
        (None, None) => reference.to_client_reference(),
    }
}

/// Pushes `signature` as a referrer of the manifest `subject_digest`
/// (`subject_size` bytes) in `reference`'s repository, and lists it in the
/// repository's referrers tag. Returns the referrer manifest's digest.
pub async fn push_signature(
    reference: &OciReference,
    subject_digest: &str,
    subject_size: u64,
    signature: &[u8],
    options: &OciOptions,
) -> Result<String, OciError> {
    let stage = OciStage::Push;
    let client = client(reference, options, stage)?;
    let target = reference.to_client_reference();
    client
        .store_auth_if_needed(target.resolve_registry(), &options.auth.to_client())
        .await;
    let layer_digest = sha256_digest(signature);
    let empty_digest = sha256_digest(EMPTY_CONFIG);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": OCI_IMAGE_MEDIA_TYPE,
        "artifactType": SIGNATURE_ARTIFACT_TYPE,
        "config": {"mediaType": EMPTY_MEDIA_TYPE, "digest": empty_digest, "size": EMPTY_CONFIG.len()},
        "layers": [{"mediaType": SIGNATURE_LAYER_MEDIA_TYPE, "digest": layer_digest, "size": signature.len()}],
        "subject": {"mediaType": OCI_IMAGE_MEDIA_TYPE, "digest": subject_digest, "size": subject_size},
    });
    let body = serde_json::to_vec(&manifest).expect("a manifest serializes");
    let digest = sha256_digest(&body);
    let fail = |e| classify(e, stage, reference);
    client
        .push_blob(&target, signature, &layer_digest)
        .await
        .map_err(fail)?;
    client
        .push_blob(&target, EMPTY_CONFIG, &empty_digest)
        .await
        .map_err(fail)?;
    let size = body.len();
    client
        .push_manifest_raw(
            &at(reference, None, Some(digest.clone())),
            body,
            OCI_IMAGE_MEDIA_TYPE.parse().expect("a valid header value"),
        )
        .await
        .map_err(fail)?;

    // The referrers tag schema: add this referrer to the subject's index.
    let tag = at(reference, Some(referrers_tag(subject_digest)), None);
    let mut index = match client
        .pull_manifest_raw(
            &tag,
            &options.auth.to_client(),
            &[OCI_IMAGE_INDEX_MEDIA_TYPE],
        )
        .await
    {
        Ok((bytes, _)) => serde_json::from_slice::<Value>(&bytes).unwrap_or(Value::Null),
        Err(e) => match classify(e, stage, reference) {
            OciError::NotFound { .. } => Value::Null,
            other => return Err(other),
        },
    };
    if !index["manifests"].is_array() {
        index =
            json!({"schemaVersion": 2, "mediaType": OCI_IMAGE_INDEX_MEDIA_TYPE, "manifests": []});
    }
    let manifests = index["manifests"].as_array_mut().expect("checked above");
    if !manifests.iter().any(|m| m["digest"] == digest.as_str()) {
        manifests.push(
            json!({"mediaType": OCI_IMAGE_MEDIA_TYPE, "digest": digest, "size": size,
                              "artifactType": SIGNATURE_ARTIFACT_TYPE}),
        );
    }
    let body = serde_json::to_vec(&index).expect("an index serializes");
    client
        .push_manifest_raw(
            &tag,
            body,
            OCI_IMAGE_INDEX_MEDIA_TYPE
                .parse()
                .expect("a valid header value"),
        )
        .await
        .map_err(fail)?;
    Ok(digest)
}

/// The signatures pushed as referrers of the manifest `subject_digest` in
/// `reference`'s repository, each checked (see the module docs); empty when
/// there are none.
pub async fn pull_signatures(
    reference: &OciReference,
    subject_digest: &str,
    options: &OciOptions,
) -> Result<Vec<Vec<u8>>, OciError> {
    let stage = OciStage::Pull;
    let client = client(reference, options, stage)?;
    let auth = options.auth.to_client();
    let tag = at(reference, Some(referrers_tag(subject_digest)), None);
    let index = match client
        .pull_manifest_raw(&tag, &auth, &[OCI_IMAGE_INDEX_MEDIA_TYPE])
        .await
    {
        Ok((bytes, _)) => bytes,
        Err(e) => match classify(e, stage, reference) {
            OciError::NotFound { .. } => return Ok(Vec::new()),
            other => return Err(other),
        },
    };
    let bad = |detail: String| OciError::Registry {
        stage,
        reference: reference.to_string(),
        detail: format!("referrers of {subject_digest}: {detail}"),
    };
    if index.len() > MAX_MANIFEST_BYTES {
        return Err(bad("the referrers index is too large".into()));
    }
    let index: Value =
        serde_json::from_slice(&index).map_err(|e| bad(format!("unreadable index: {e}")))?;
    let listed: Vec<&Value> = index["manifests"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|d| d["artifactType"] == SIGNATURE_ARTIFACT_TYPE)
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for descriptor in listed.into_iter().take(MAX_REFERRERS) {
        let Some(digest) = descriptor["digest"].as_str() else {
            continue;
        };
        let (body, _) = client
            .pull_manifest_raw(
                &at(reference, None, Some(digest.to_string())),
                &auth,
                &[OCI_IMAGE_MEDIA_TYPE],
            )
            .await
            .map_err(|e| classify(e, stage, reference))?;
        if body.len() > MAX_MANIFEST_BYTES || sha256_digest(&body) != digest {
            tracing::warn!(
                referrer = digest,
                "skipped: its manifest does not match its digest"
            );
            continue;
        }
        let manifest: Value =
            serde_json::from_slice(&body).map_err(|e| bad(format!("referrer {digest}: {e}")))?;
        if manifest["subject"]["digest"] != subject_digest
            || manifest["artifactType"] != SIGNATURE_ARTIFACT_TYPE
        {
            tracing::warn!(
                referrer = digest,
                "skipped: not a signature of this manifest"
            );
            continue;
        }
        let layer = match manifest["layers"].as_array().map(Vec::as_slice) {
            Some([one]) if one["mediaType"] == SIGNATURE_LAYER_MEDIA_TYPE => one,
            _ => {
                tracing::warn!(referrer = digest, "skipped: not one signature layer");
                continue;
            }
        };
        let (Some(layer_digest), Some(size)) = (layer["digest"].as_str(), layer["size"].as_u64())
        else {
            continue;
        };
        if size > MAX_SIGNATURE_BYTES {
            tracing::warn!(referrer = digest, size, "skipped: signature too large");
            continue;
        }
        let descriptor = OciDescriptor {
            media_type: SIGNATURE_LAYER_MEDIA_TYPE.to_string(),
            digest: layer_digest.to_string(),
            size: size as i64,
            ..OciDescriptor::default()
        };
        let (bytes, failed) = read_blob(&client, &tag, &descriptor, size, reference).await?;
        if failed.is_some() || sha256_digest(&bytes) != layer_digest {
            tracing::warn!(
                referrer = digest,
                "skipped: the signature blob does not match its digest"
            );
            continue;
        }
        out.push(bytes);
    }
    Ok(out)
}
