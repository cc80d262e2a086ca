//! `temper keygen`, `temper sign` and the `--trust FILE` policy: thin
//! wrappers over `temper::sign` (keys, signatures, the trust policy) and
//! the forge's trust checks.

use std::path::{Path, PathBuf};

use serde_json::json;
use temper::sign::{SigningKey, TrustPolicy, sign};

use crate::Common;
use crate::registry::{Opened, Registry};

/// The trust policy of `--trust FILE`, or the default (`level = "off"`).
pub fn trust_policy(path: Option<&Path>) -> Result<TrustPolicy, String> {
    match path {
        None => Ok(TrustPolicy::off()),
        Some(p) => TrustPolicy::load(p).map_err(|e| e.to_string()),
    }
}

/// `temper keygen -o KEY`: writes KEY (secret, mode 0600) and KEY.pub.
pub fn keygen(output: &Path, json_out: bool) -> Result<(), String> {
    let key = SigningKey::generate();
    let public = key.write(output).map_err(|e| e.to_string())?;
    let entry = format!(
        "{{ id = \"{}\", ed25519 = \"{}\" }}",
        key.id(),
        key.public_base64()
    );
    if json_out {
        println!(
            "{}",
            json!({"ok": true, "secretKey": output, "publicKey": public, "keyId": key.id(),
                   "ed25519": key.public_base64(), "trustEntry": entry})
        );
    } else {
        println!(
            "secret key   {} (mode 0600; keep it private)",
            output.display()
        );
        println!("public key   {}", public.display());
        println!("key id       {}", key.id());
        println!("trust entry  {entry}");
    }
    Ok(())
}

/// `temper sign`: what it signs and where it writes.
#[derive(clap::Args)]
pub struct SignArgs {
    /// A `.wasm` file, or a registered tool's name or id.
    target: String,
    /// The secret key (from `temper keygen`).
    #[arg(long, value_name = "KEY")]
    key: PathBuf,
    /// Write the signature to its own file (FILE.wasm.sig, or -o).
    #[arg(long)]
    detached: bool,
    /// Where to write (default: the file itself, or FILE.wasm.sig).
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// A detached signature to add this signature to.
    #[arg(long, value_name = "FILE", requires = "detached")]
    signature: Option<PathBuf>,
    #[command(flatten)]
    registry: Registry,
    #[command(flatten)]
    common: Common,
}

/// `temper sign FILE.wasm --key KEY [--detached]` or `temper sign NAME`.
pub fn sign_command(args: &SignArgs) -> Result<(), String> {
    let (registry, common) = (&args.registry, &args.common);
    let key = SigningKey::read(&args.key).map_err(|e| e.to_string())?;
    let previous = match &args.signature {
        Some(p) => Some(std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?),
        None => None,
    };
    let file = Path::new(&args.target);
    let is_file = file.is_file();
    let (bytes, stored) = if is_file {
        let bytes =
            std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        (bytes, None)
    } else {
        let opened = crate::registry::open(registry, common, None)?;
        let info = opened
            .forge
            .visible_tools(&opened.ctx)
            .map_err(|e| e.to_string())?
            .into_iter()
            .find(|t| t.name == args.target || t.id == args.target)
            .ok_or_else(|| {
                format!(
                    "{}: no such file, and no registered tool of that name or id",
                    args.target
                )
            })?;
        if info.tier == temper::store::Tier::Session {
            return Err(format!(
                "{}: a session-tier tool is not stored; promote it, or export and sign the file",
                info.name
            ));
        }
        let id = temper::id::ArtifactId::from_hex(&info.id).map_err(|e| e.to_string())?;
        let bytes = opened
            .forge
            .store()
            .get_artifact(&id)
            .map_err(|e| e.to_string())?;
        (bytes, Some((opened, info)))
    };
    let signed = sign::sign(&bytes, &key, args.detached, previous.as_deref())
        .map_err(|e| format!("{}: {e}", args.target))?;
    let id = temper::id::ArtifactId::of(&signed.bytes);
    let written: PathBuf = if args.detached {
        let out = match &args.output {
            Some(o) => o.to_path_buf(),
            None if is_file => {
                let mut name = file.as_os_str().to_owned();
                name.push(".sig");
                PathBuf::from(name)
            }
            None => return Err("--detached for a registered tool needs -o FILE".into()),
        };
        crate::write_atomically(&out, &signed.signature)?;
        out
    } else if let Some((opened, _)) = &stored {
        // Same id: the store keeps the signed bytes under it.
        let put = opened
            .forge
            .store()
            .put_artifact(&signed.bytes)
            .map_err(|e| e.to_string())?;
        if put != id {
            return Err(format!("the signed artifact's id {put} is not {id}"));
        }
        PathBuf::from(format!("store:{}", opened.forge.store().location()))
    } else {
        let out = args.output.as_deref().unwrap_or(file);
        crate::write_atomically(out, &signed.bytes)?;
        out.to_path_buf()
    };
    let signers = sign::signer_key_ids(
        &signed.bytes,
        args.detached.then_some(signed.signature.as_slice()),
    )
    .map_err(|e| e.to_string())?;
    if common.json {
        println!(
            "{}",
            json!({"ok": true, "id": id, "key": key.id(), "detached": args.detached,
                   "written": written, "signers": signers})
        );
    } else {
        println!("signed {} with key {}", args.target, key.id());
        println!("  id       {id} (unchanged by signing)");
        println!("  signers  {}", signers.join(", "));
        println!("  written  {}", written.display());
    }
    Ok(())
}

/// A `.wasm` file's bytes with the detached signature `signature` (if
/// given) attached: the form `temper import` checks.
pub fn with_signature(bytes: Vec<u8>, signature: Option<&Path>) -> Result<Vec<u8>, String> {
    match signature {
        None => Ok(bytes),
        Some(p) => {
            let sig = std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
            sign::attach(&bytes, &sig).map_err(|e| format!("{}: {e}", p.display()))
        }
    }
}

/// `temper run FILE.wasm --trust FILE [--signature FILE.sig]`: the trust
/// policy for an external file run directly.
#[derive(clap::Args)]
pub struct RunTrust {
    /// Trust policy (TOML) the `.wasm` file must meet before it is loaded.
    #[arg(long, env = "TEMPER_TRUST", value_name = "FILE")]
    trust: Option<PathBuf>,
    /// The file's detached signature.
    #[arg(long, value_name = "FILE")]
    signature: Option<PathBuf>,
}

impl RunTrust {
    /// `bytes` (of `path`) with the detached signature attached, if they
    /// meet the trust policy; the refusal otherwise.
    pub fn admit(&self, path: &Path, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
        let bytes = with_signature(bytes, self.signature.as_deref())?;
        let policy = trust_policy(self.trust.as_deref())?;
        if policy.level == temper::sign::Level::Off {
            return Ok(bytes);
        }
        let id = temper::id::ArtifactId::of(&bytes);
        // The manifest's name when it has one (rules scope by tool name).
        let name = temper::artifact::read_manifest(&bytes)
            .map(|m| m.name)
            .unwrap_or_else(|_| path.display().to_string());
        let subject = temper::sign::Subject {
            id: id.as_str(),
            name: &name,
            reference: None,
        };
        policy
            .check(&subject, &bytes, None, temper::sign::Date::today())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(bytes)
    }
}

/// Re-checks the agent and shared tiers under the trust policy (a host's
/// start); says which tools it disabled, on stderr.
pub async fn check_tiers(opened: &Opened) -> Result<(), String> {
    check_agent_tiers(opened, &[opened.ctx.agent_id.as_str()]).await
}

/// [`check_tiers`] for each of `agents` (an HTTP host's start: every agent
/// its tokens file names, since each token's calls reach that agent's tier).
pub async fn check_agent_tiers(opened: &Opened, agents: &[&str]) -> Result<(), String> {
    if opened.forge.trust().level == temper::sign::Level::Off {
        return Ok(());
    }
    for agent in agents {
        let disabled = opened
            .forge
            .check_tiers(agent)
            .await
            .map_err(|e| e.to_string())?;
        for d in disabled {
            let owner = d
                .agent
                .as_deref()
                .map(|a| format!(" of {a}"))
                .unwrap_or_default();
            eprintln!(
                "temper: {} ({} tier{owner}) is disabled: {}",
                d.name, d.tier, d.reason
            );
        }
    }
    Ok(())
}
