//! The OCI distribution commands: `push` and `pull`.

use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::json;
use temper::forge::ForgeResult;
use temper::oci::{self, OciAuth, OciOptions, OciReference};

use crate::Common;
use crate::artifacts::TierArg;
use crate::registry::{JudgeArgs, Registry};

/// How to reach the OCI registry.
#[derive(Args)]
pub struct OciArgs {
    /// Plain HTTP instead of HTTPS: only accepted for a registry on
    /// 127.0.0.1, localhost or [::1].
    #[arg(long)]
    insecure: bool,
    /// Registry credentials file (TOML, `[registries."HOST[:PORT]"]` with
    /// `username`/`password` or `token`); default
    /// ~/.config/temper/oci-auth.toml when it exists. TEMPER_OCI_USERNAME /
    /// TEMPER_OCI_PASSWORD or TEMPER_OCI_TOKEN take precedence.
    #[arg(long, env = "TEMPER_OCI_AUTH_FILE", value_name = "FILE")]
    oci_auth: Option<PathBuf>,
}

impl OciArgs {
    fn options(&self, reference: &OciReference) -> Result<OciOptions, String> {
        let default_file = dirs::config_dir()
            .map(|d| d.join("temper").join("oci-auth.toml"))
            .filter(|p| p.is_file());
        let file = self.oci_auth.clone().or(default_file);
        let auth =
            OciAuth::resolve(&reference.registry, file.as_deref()).map_err(|e| e.to_string())?;
        Ok(OciOptions {
            auth,
            insecure: self.insecure,
            // The forge's maxArtifactBytes (pull_and_import).
            max_artifact_bytes: None,
        })
    }
}

fn parse(reference: &str) -> Result<OciReference, String> {
    OciReference::parse(reference).map_err(|e| e.to_string())
}

/// What `temper push` pushes.
pub struct PushArgs<'a> {
    /// A registered tool's name or id, or a `.wasm` file.
    pub name: &'a str,
    /// `oci://HOST[:PORT]/REPO:TAG`.
    pub reference: &'a str,
    /// Sign with this key and push the signature as a referrer.
    pub sign: Option<&'a Path>,
}

/// `temper push NAME|FILE.wasm oci://HOST[:PORT]/REPO:TAG [--sign KEY]`.
pub async fn push(
    what: PushArgs<'_>,
    args: &OciArgs,
    registry: &Registry,
    common: &Common,
) -> Result<(), String> {
    let name = what.name;
    let key = match what.sign {
        Some(path) => Some(temper::sign::SigningKey::read(path).map_err(|e| e.to_string())?),
        None => None,
    };
    let reference = parse(what.reference)?;
    let options = args.options(&reference)?;
    let path = Path::new(name);
    let bytes = if name.ends_with(".wasm") && path.is_file() {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?
    } else {
        let opened = crate::registry::open(registry, common, None)?;
        opened
            .forge
            .export(name, &opened.ctx, false, None)
            .map_err(|e| e.to_string())?
            .bytes
    };
    let pushed = oci::push_artifact(&bytes, &reference, &options)
        .await
        .map_err(|e| e.to_string())?;
    let referrer = match &key {
        None => None,
        Some(key) => {
            // Detached: the signature covers the pushed bytes and carries
            // any signature they have embedded.
            let signed = temper::sign::sign::sign(&bytes, key, true, None)
                .map_err(|e| format!("{name}: {e}"))?;
            let digest = oci::push_signature(
                &reference,
                &pushed.manifest_digest,
                pushed.manifest_size,
                &signed.signature,
                &options,
            )
            .await
            .map_err(|e| e.to_string())?;
            Some((key.id().to_string(), digest))
        }
    };
    if common.json {
        println!(
            "{}",
            json!({"ok": true, "reference": pushed.reference.to_string(), "name": pushed.name,
                   "id": pushed.id, "manifestDigest": pushed.manifest_digest,
                   "layerDigest": pushed.layer_digest, "bytes": bytes.len(),
                   "signature": referrer.as_ref().map(|(key, digest)| json!({"key": key, "referrer": digest}))})
        );
    } else {
        println!(
            "pushed {} to {} ({} bytes)\n  id      {}\n  digest  {}",
            pushed.name,
            pushed.reference,
            bytes.len(),
            pushed.id,
            pushed.manifest_digest
        );
        if let Some((key, digest)) = &referrer {
            println!("  signed  by key {key}, referrer {digest}");
        }
    }
    Ok(())
}

/// What `temper pull` does with the verified bytes.
pub struct PullTarget<'a> {
    /// Write the `.wasm` here.
    pub output: Option<&'a Path>,
    /// Import into the store (the same checks as `temper import`), in this tier.
    pub import: Option<TierArg>,
}

/// `temper pull oci://HOST[:PORT]/REPO(:TAG|@DIGEST) [-o FILE] [--import]`.
pub async fn pull(
    reference: &str,
    target: PullTarget<'_>,
    args: &OciArgs,
    registry: &Registry,
    judge: &JudgeArgs,
    common: &Common,
) -> Result<(), String> {
    let reference = parse(reference)?;
    let options = args.options(&reference)?;
    let pulled = oci::pull_artifact(&reference, &options)
        .await
        .map_err(|e| e.to_string())?;
    if let Some(path) = target.output {
        crate::write_atomically(path, &pulled.bytes)?;
    }
    let imported = match target.import {
        None => None,
        Some(tier) => {
            let opened = crate::registry::open(registry, common, Some(judge))?;
            crate::signing::check_tiers(&opened).await?;
            let bytes = oci::with_referrer_signatures(&pulled, &options)
                .await
                .map_err(|e| e.to_string())?;
            let from = reference.to_string();
            let outcome = opened
                .forge
                .import_from(bytes, &opened.ctx, tier.into(), Some(&from))
                .await;
            if outcome.is_ok() {
                crate::registry::save(&opened)?;
            }
            Some(outcome)
        }
    };
    if common.json {
        let mut doc = json!({"ok": imported.as_ref().is_none_or(|o| o.is_ok()),
            "reference": reference.to_string(), "id": pulled.id, "name": pulled.manifest.name,
            "manifestDigest": pulled.manifest_digest, "layerDigest": pulled.layer_digest,
            "bytes": pulled.bytes.len(), "path": target.output});
        if let Some(outcome) = &imported {
            doc["import"] =
                serde_json::to_value(ForgeResult::from(outcome)).map_err(|e| e.to_string())?;
        }
        println!("{doc}");
    } else {
        println!(
            "pulled {} from {} ({} bytes, verified)\n  id      {}\n  digest  {}",
            pulled.manifest.name,
            reference,
            pulled.bytes.len(),
            pulled.id,
            pulled.manifest_digest
        );
        if let Some(path) = target.output {
            println!("  wrote   {}", path.display());
        }
        if let Some(Ok(f)) = &imported {
            println!(
                "imported {} into the {} tier\n  verdict  approved by {} (confidence {:.2})\n  tests    {} passed",
                f.tool.name,
                f.tool.tier,
                f.verdict.judge,
                f.verdict.confidence,
                f.test_results.len()
            );
        }
    }
    match imported {
        Some(Err(e)) => Err(format!(
            "{reference}: import refused at the {} stage: {e}",
            e.stage()
        )),
        _ => Ok(()),
    }
}
