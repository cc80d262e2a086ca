//! The artifact commands: `inspect`, `export`, `import`, `verify`.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use serde_json::json;
use temper::artifact;
use temper::forge::ForgeResult;
use temper::store::Tier;

use crate::Common;
use crate::registry::{JudgeArgs, Opened, Registry};

/// The tier an import lands in.
#[derive(Clone, Copy, ValueEnum)]
pub enum TierArg {
    /// This session only.
    Session,
    /// The importing agent.
    Agent,
    /// Every agent (an operator's decision).
    Shared,
}

impl From<TierArg> for Tier {
    fn from(t: TierArg) -> Tier {
        match t {
            TierArg::Session => Tier::Session,
            TierArg::Agent => Tier::Agent,
            TierArg::Shared => Tier::Shared,
        }
    }
}

fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// `temper inspect FILE.wasm`.
pub fn inspect(file: &Path, common: &Common) -> Result<(), String> {
    let bytes = read_file(file)?;
    let id = temper::id::ArtifactId::of(&bytes);
    let manifest =
        artifact::read_manifest(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    let world = artifact::world(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    if common.json {
        println!(
            "{}",
            json!({"id": id, "bytes": bytes.len(), "manifest": manifest,
                   "capabilities": manifest.capabilities, "world": world})
        );
    } else {
        let caps = if manifest.capabilities.is_empty() {
            "none".to_string()
        } else {
            manifest.capabilities.join(", ")
        };
        println!("{}  ({} bytes)", file.display(), bytes.len());
        println!("id            {id}");
        println!("name          {}", manifest.name);
        println!("description   {}", manifest.description);
        println!("format        {} ({} mode)", manifest.format, manifest.mode);
        println!("capabilities  {caps}");
        println!("tests         {}", manifest.test_cases.len());
        println!(
            "source        {} ({})",
            manifest.source_blake3,
            if manifest.source.is_some() {
                "included"
            } else {
                "not included"
            }
        );
        println!("shim          {}", manifest.shim_blake3);
        println!("imports       {}", world.imports.join(", "));
        println!("exports       {}", world.exports.join(", "));
        println!("inputSchema   {}", manifest.input_schema);
        println!("outputSchema  {}", manifest.output_schema);
    }
    Ok(())
}

/// The file format `temper export` writes.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// The `.wasm` artifact.
    Wasm,
    /// An AgentOS `agentos.emergent-tool.v1` package (JSON).
    Agentos,
}

/// What `temper export` writes.
pub struct ExportKind<'a> {
    /// Include the source.
    pub with_source: bool,
    /// The source to include.
    pub source: Option<&'a Path>,
    /// A compose tool's bundle.
    pub bundle: bool,
    /// The file format.
    pub format: ExportFormat,
}

/// `temper export NAME|ID -o FILE --format agentos`.
fn export_agentos(
    name: &str,
    output: &Path,
    source: Option<&str>,
    opened: &Opened,
    common: &Common,
) -> Result<(), String> {
    let text = opened
        .forge
        .export_agentos(name, &opened.ctx, source)
        .map_err(|e| e.to_string())?;
    crate::write_atomically(output, text.as_bytes())?;
    if common.json {
        println!(
            "{}",
            json!({"ok": true, "format": "agentos", "path": output, "bytes": text.len()})
        );
    } else {
        println!(
            "exported {name} to {} as an AgentOS package ({} bytes)",
            output.display(),
            text.len()
        );
    }
    Ok(())
}

/// `temper export NAME|ID -o FILE`.
pub fn export(
    name: &str,
    output: &Path,
    kind: ExportKind<'_>,
    sidecar: bool,
    registry: &Registry,
    common: &Common,
) -> Result<(), String> {
    let opened = crate::registry::open(registry, common, None)?;
    let source = kind.source.map(crate::read_source).transpose()?;
    if kind.format == ExportFormat::Agentos {
        return export_agentos(name, output, source.as_deref(), &opened, common);
    }
    let exported = if kind.bundle {
        opened.forge.export_bundle(name, &opened.ctx)
    } else {
        opened.forge.export(
            name,
            &opened.ctx,
            kind.with_source || source.is_some(),
            source.as_deref(),
        )
    }
    .map_err(|e| e.to_string())?;
    // A bundle's host-native steps stay imports: list them.
    let natives: Vec<String> = if kind.bundle {
        temper::compose::adapter::component_imports(&exported.bytes)?
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !name.contains(':'))
            .collect()
    } else {
        Vec::new()
    };
    crate::write_atomically(output, &exported.bytes)?;
    let sidecar_path = sidecar.then(|| {
        let mut p = output.as_os_str().to_owned();
        p.push(".provenance.json");
        PathBuf::from(p)
    });
    if let Some(path) = &sidecar_path {
        let doc =
            json!({"id": exported.id, "tool": exported.tool, "auditTrail": exported.provenance});
        let text = serde_json::to_vec_pretty(&doc).map_err(|e| e.to_string())?;
        crate::write_atomically(path, &text)?;
    }
    if common.json {
        println!(
            "{}",
            json!({"ok": true, "id": exported.id, "path": output, "bytes": exported.bytes.len(), "sidecar": sidecar_path, "nativeImports": natives})
        );
    } else {
        println!(
            "exported {} to {} ({} bytes)\nid  {}",
            exported.tool.name,
            output.display(),
            exported.bytes.len(),
            exported.id
        );
        if kind.bundle {
            let listed = if natives.is_empty() {
                "none".to_string()
            } else {
                natives.join(", ")
            };
            println!("host-native imports  {listed}");
        }
    }
    Ok(())
}

/// The file `temper import` reads, and its detached signature.
pub struct ImportFile<'a> {
    /// The `.wasm` artifact.
    pub path: &'a Path,
    /// Its detached signature, if any.
    pub signature: Option<&'a Path>,
    /// Test cases for an AgentOS package.
    pub tests: Option<&'a Path>,
}

/// Whether `path` names an AgentOS package (`.json`, `.yaml`, `.yml`).
fn is_package(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "json" | "yaml" | "yml"))
}

/// `temper import FILE.wasm [--signature FILE.sig]` or `temper import
/// PACKAGE.yaml|.json [--tests FILE]`.
pub async fn import(
    file: ImportFile<'_>,
    tier: TierArg,
    registry: &Registry,
    judge: &JudgeArgs,
    common: &Common,
) -> Result<(), String> {
    let opened = crate::registry::open(registry, common, Some(judge))?;
    crate::signing::check_tiers(&opened).await?;
    let package = is_package(file.path);
    if !package && file.tests.is_some() {
        return Err(
            "--tests is for AgentOS packages (.json, .yaml); a .wasm artifact carries its tests"
                .into(),
        );
    }
    if package && file.signature.is_some() {
        return Err("--signature is for .wasm artifacts; an AgentOS package is not signed".into());
    }
    // Bounded by maxArtifactBytes before anything is read whole.
    let bytes = opened
        .forge
        .read_artifact(file.path)
        .map_err(|e| e.to_string())?;
    let outcome = if package {
        let text = String::from_utf8(bytes)
            .map_err(|e| format!("{}: not UTF-8 text: {e}", file.path.display()))?;
        let tests = match file.tests {
            None => None,
            Some(p) => Some(
                serde_json::from_str(&crate::read_source(p)?)
                    .map_err(|e| format!("{}: not a list of test cases: {e}", p.display()))?,
            ),
        };
        opened
            .forge
            .import_agentos(&text, tests, &opened.ctx, tier.into())
            .await
    } else {
        let bytes = crate::signing::with_signature(bytes, file.signature)?;
        opened.forge.import(bytes, &opened.ctx, tier.into()).await
    };
    let file = file.path;
    if outcome.is_ok() {
        crate::registry::save(&opened)?;
    }
    let result = ForgeResult::from(&outcome);
    if common.json {
        println!(
            "{}",
            serde_json::to_string(&result).map_err(|e| e.to_string())?
        );
    } else if let Ok(f) = &outcome {
        println!(
            "imported {} into the {} tier\n  id       {}\n  verdict  approved by {} (confidence {:.2})\n  tests    {} passed",
            f.tool.name,
            f.tool.tier,
            f.tool.id,
            f.verdict.judge,
            f.verdict.confidence,
            f.test_results.len()
        );
    }
    outcome.map(|_| ()).map_err(|e| {
        format!(
            "{}: import refused at the {} stage: {e}",
            file.display(),
            e.stage()
        )
    })
}

/// `temper verify FILE.wasm --source tool.js | --request req.json`.
pub async fn verify(
    file: &Path,
    source: Option<&Path>,
    request: Option<&Path>,
    common: &Common,
) -> Result<(), String> {
    let runtime = common.runtime()?;
    let bytes = read_file(file)?;
    let source = source.map(crate::read_source).transpose()?;
    let request = match request {
        Some(p) => Some(
            temper::forge::request_shape::parse(&crate::read_source(p)?)
                .map_err(|e| format!("{}: not a forge request: {e}", p.display()))?,
        ),
        None => None,
    };
    let report = temper::verify::verify(&runtime, &bytes, source.as_deref(), request.as_ref())
        .await
        .map_err(|e| e.to_string())?;
    if common.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(|e| e.to_string())?
        );
    } else if report.identical {
        println!(
            "verified: rebuilding gives the same bytes\nid  {}",
            report.id
        );
    } else {
        println!(
            "NOT reproduced: {} (file) vs {} (rebuilt)",
            report.id, report.rebuilt_id
        );
        for d in &report.differences {
            println!("  {d}");
        }
    }
    if report.identical {
        Ok(())
    } else {
        Err(format!("{}: rebuilt bytes differ", file.display()))
    }
}
