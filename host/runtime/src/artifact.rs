//! Self-describing artifacts: a tool component carries its own manifest in a
//! custom section named [`MANIFEST_SECTION`], appended after the component's
//! last section.
//!
//! The manifest ([`ArtifactManifest`]) is canonical JSON (keys sorted, no
//! whitespace): format version, name, description, schemas, requested
//! capabilities (sorted, deduplicated), test cases, blake3 of the source and
//! of the shim, steps for compose tools, and the source only when it was
//! persisted. No timestamps, user names or paths: the same request built by
//! the same shim gives the same bytes, and a tool's id is the blake3 of those
//! bytes. Who forged it and when lives in the store's audit trail.
//!
//! Reading is strict: exactly one manifest section, at the top level of the
//! component (not inside a nested module), well-formed, of a known format.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmparser::{Parser, Payload};

use crate::request::TestCase;

/// Name of the custom section holding the manifest.
pub const MANIFEST_SECTION: &str = "temper.manifest";
/// The manifest format this host writes and reads.
pub const FORMAT: &str = "temper.tool/1";
/// Largest manifest accepted, in bytes (sources are capped at 1 MiB).
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// A step of a compose tool: the tool it calls, pinned by the blake3 of
/// that tool's artifact (absent for a host-native tool, which the running
/// host provides by name), and the step's input mapping.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepRef {
    /// The step's name in the composition.
    pub name: String,
    /// The tool it calls.
    pub tool: String,
    /// blake3 of that tool's artifact, hex; `None` for a host-native tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
    /// The step's `inputMapping`, as given.
    pub input_mapping: Value,
}

/// A tool a sandbox tool calls (code mode, granted `tool:NAME`): pinned by
/// the blake3 of that tool's artifact, like a compose step, or by name for a
/// host-native or hub tool (absent `blake3`), which the running host
/// provides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallRef {
    /// The tool called.
    pub tool: String,
    /// blake3 of its artifact, hex; `None` for a host-native or hub tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blake3: Option<String>,
}

/// How a tool is implemented; written as its lowercase name in manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Agent JavaScript built on the shim.
    Sandbox,
    /// A pipeline of registered tools, run by a generated adapter.
    Compose,
    /// A compose tool with its component steps composed in (an export).
    Bundle,
}

impl Mode {
    /// The name written in manifests: `sandbox`, `compose` or `bundle`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Sandbox => "sandbox",
            Mode::Compose => "compose",
            Mode::Bundle => "bundle",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Mode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// What an artifact says about itself (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArtifactManifest {
    /// [`FORMAT`].
    pub format: String,
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the input.
    pub input_schema: Value,
    /// JSON Schema of the output.
    pub output_schema: Value,
    /// How the tool is implemented.
    pub mode: Mode,
    /// Capabilities the tool requests (sorted, no duplicates); what it gets
    /// is always this ∩ the running host's policy.
    pub capabilities: Vec<String>,
    /// The tool's test cases, re-run on import.
    pub test_cases: Vec<TestCase>,
    /// blake3 of the JS source, hex.
    pub source_blake3: String,
    /// blake3 of the shim the component was built from, hex.
    pub shim_blake3: String,
    /// Compose steps, by artifact blake3.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepRef>,
    /// Tools a sandbox tool calls (its `tool:NAME` grants), pinned, sorted
    /// by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallRef>,
    /// The JS source, only when it was persisted or exported with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl ArtifactManifest {
    /// A sandbox tool's manifest; `capabilities` is sorted and deduplicated.
    #[allow(clippy::too_many_arguments)]
    pub fn sandbox(
        name: &str,
        description: &str,
        input_schema: &Value,
        output_schema: &Value,
        capabilities: &[String],
        test_cases: &[TestCase],
        source: &str,
        keep_source: bool,
    ) -> Self {
        let mut caps = capabilities.to_vec();
        caps.sort();
        caps.dedup();
        Self {
            format: FORMAT.into(),
            name: name.into(),
            description: description.into(),
            input_schema: input_schema.clone(),
            output_schema: output_schema.clone(),
            mode: Mode::Sandbox,
            capabilities: caps,
            test_cases: test_cases.to_vec(),
            source_blake3: crate::id::blake3_hex(source.as_bytes()),
            shim_blake3: crate::shim::shim_id(),
            steps: Vec::new(),
            calls: Vec::new(),
            source: keep_source.then(|| source.to_string()),
        }
    }

    /// A compose tool's manifest: no capabilities of its own (each step
    /// keeps its own grants), the steps pinned, `sourceBlake3` the blake3
    /// of the pipeline JSON embedded in the adapter, `shimBlake3` the
    /// compose core's (`core_blake3`, which `temper_compose` builds).
    pub fn compose(
        request: &crate::request::ForgeRequest,
        pipeline_json: &str,
        steps: Vec<StepRef>,
        core_blake3: String,
    ) -> Self {
        Self {
            format: FORMAT.into(),
            name: request.name.clone(),
            description: request.description.clone(),
            input_schema: request.input_schema.clone(),
            output_schema: request.output_schema.clone(),
            mode: Mode::Compose,
            capabilities: Vec::new(),
            test_cases: request.test_cases.clone(),
            source_blake3: crate::id::blake3_hex(pipeline_json.as_bytes()),
            shim_blake3: core_blake3,
            steps,
            calls: Vec::new(),
            source: None,
        }
    }

    /// The canonical JSON bytes stored in the section.
    pub fn to_canonical_json(&self) -> String {
        let value = serde_json::to_value(self).expect("a manifest serializes");
        crate::canonical_json::canonical_json(&value)
    }
}

/// Why bytes are not a well-formed artifact.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArtifactError {
    /// The bytes do not parse as a WebAssembly component.
    #[error("artifact: not a WebAssembly component: {0}")]
    NotAComponent(String),
    /// No manifest section.
    #[error("artifact: no `{MANIFEST_SECTION}` section: not a Temper tool artifact")]
    NoManifest,
    /// More than one manifest section.
    #[error("artifact: {0} `{MANIFEST_SECTION}` sections; exactly one is allowed")]
    DuplicateManifest(usize),
    /// The manifest section sits inside a nested module or component.
    #[error("artifact: the `{MANIFEST_SECTION}` section is not at the component's top level")]
    NestedManifest,
    /// The manifest section is not the component's last section.
    #[error("artifact: the `{MANIFEST_SECTION}` section is not the last section")]
    ManifestNotLast,
    /// The manifest is over [`MAX_MANIFEST_BYTES`].
    #[error("artifact: manifest is {0} bytes, over the {MAX_MANIFEST_BYTES}-byte limit")]
    ManifestTooLarge(usize),
    /// The manifest is not valid JSON of the expected shape.
    #[error("artifact: malformed manifest: {0}")]
    Malformed(String),
    /// The manifest's JSON is not in canonical form (it was edited or
    /// written by something else).
    #[error("artifact: manifest is not canonical JSON")]
    NotCanonical,
    /// A format this host does not read.
    #[error("artifact: manifest format {0:?} is not supported (this host reads {FORMAT:?})")]
    UnknownFormat(String),
}

/// Appends the manifest section to a component that has none.
pub fn embed(component: &[u8], manifest: &ArtifactManifest) -> Result<Vec<u8>, ArtifactError> {
    if locate(component)?.is_some() {
        return Err(ArtifactError::DuplicateManifest(2));
    }
    let json = manifest.to_canonical_json();
    if json.len() > MAX_MANIFEST_BYTES {
        return Err(ArtifactError::ManifestTooLarge(json.len()));
    }
    let mut body = Vec::with_capacity(json.len() + 32);
    leb128(&mut body, MANIFEST_SECTION.len());
    body.extend_from_slice(MANIFEST_SECTION.as_bytes());
    body.extend_from_slice(json.as_bytes());
    let mut out = Vec::with_capacity(component.len() + body.len() + 8);
    out.extend_from_slice(component);
    out.push(0); // custom section id
    leb128(&mut out, body.len());
    out.extend_from_slice(&body);
    Ok(out)
}

fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Where the manifest section is: (start of its section header, its data).
fn locate(bytes: &[u8]) -> Result<Option<(usize, &[u8])>, ArtifactError> {
    let bad = |e: wasmparser::BinaryReaderError| ArtifactError::NotAComponent(e.to_string());
    let mut depth = 0usize;
    let mut found: Vec<(usize, &[u8], usize)> = Vec::new();
    let mut last_section_end = 0usize;
    let mut is_component = false;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(bad)?;
        match &payload {
            Payload::Version { encoding, .. } if depth == 0 && !is_component => {
                if *encoding != wasmparser::Encoding::Component {
                    return Err(ArtifactError::NotAComponent(
                        "a core module, not a component".into(),
                    ));
                }
                is_component = true;
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(offset) => {
                if depth == 0 {
                    break;
                }
                depth -= 1;
                last_section_end = *offset;
            }
            Payload::CustomSection(reader) if reader.name() == MANIFEST_SECTION => {
                if depth > 0 {
                    return Err(ArtifactError::NestedManifest);
                }
                let range = reader.range();
                let mut header = Vec::new();
                leb128(&mut header, range.len());
                let start = range.start - 1 - header.len();
                found.push((start, reader.data(), range.end));
            }
            _ => {}
        }
        if depth == 0
            && let Some((_, range)) = payload.as_section()
        {
            last_section_end = last_section_end.max(range.end);
        }
    }
    match found.len() {
        0 => Ok(None),
        1 => {
            let (start, data, end) = found[0];
            if end != bytes.len() || end < last_section_end {
                return Err(ArtifactError::ManifestNotLast);
            }
            Ok(Some((start, data)))
        }
        n => Err(ArtifactError::DuplicateManifest(n)),
    }
}

/// Reads and checks the manifest (strict: see the module docs).
pub fn read_manifest(bytes: &[u8]) -> Result<ArtifactManifest, ArtifactError> {
    split(bytes).map(|(manifest, _)| manifest)
}

/// The manifest and the component bytes without its section.
pub fn split(bytes: &[u8]) -> Result<(ArtifactManifest, &[u8]), ArtifactError> {
    let (start, data) = locate(bytes)?.ok_or(ArtifactError::NoManifest)?;
    if data.len() > MAX_MANIFEST_BYTES {
        return Err(ArtifactError::ManifestTooLarge(data.len()));
    }
    let value: Value =
        serde_json::from_slice(data).map_err(|e| ArtifactError::Malformed(e.to_string()))?;
    if let Some(format) = value.get("format").and_then(Value::as_str)
        && format != FORMAT
    {
        return Err(ArtifactError::UnknownFormat(format.to_string()));
    }
    let manifest: ArtifactManifest =
        serde_json::from_value(value).map_err(|e| ArtifactError::Malformed(e.to_string()))?;
    if manifest.to_canonical_json().as_bytes() != data {
        return Err(ArtifactError::NotCanonical);
    }
    Ok((manifest, &bytes[..start]))
}

/// The WIT world of a component, as decoded by `wit-component`: its
/// imported and exported interface names, sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorldSummary {
    /// Imported interfaces, e.g. `temper:tool/fetch@0.1.0`.
    pub imports: Vec<String>,
    /// Exported interfaces, e.g. `temper:tool/run@0.1.0`.
    pub exports: Vec<String>,
}

/// Decodes the component's WIT world.
pub fn world(bytes: &[u8]) -> Result<WorldSummary, ArtifactError> {
    let decoded =
        wit_component::decode(bytes).map_err(|e| ArtifactError::NotAComponent(format!("{e:#}")))?;
    let wit_component::DecodedWasm::Component(resolve, world) = decoded else {
        return Err(ArtifactError::NotAComponent(
            "a WIT package, not a component".into(),
        ));
    };
    let w = &resolve.worlds[world];
    let names = |items: &mut dyn Iterator<Item = &wit_parser::WorldKey>| {
        let mut v: Vec<String> = items.map(|k| resolve.name_world_key(k)).collect();
        v.sort();
        v
    };
    Ok(WorldSummary {
        imports: names(&mut w.imports.keys()),
        exports: names(&mut w.exports.keys()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest() -> ArtifactManifest {
        ArtifactManifest::sandbox(
            "add_numbers",
            "Adds.",
            &json!({"type": "object"}),
            &json!({"type": "object"}),
            &["fetch".into(), "crypto".into(), "fetch".into()],
            &[],
            "function execute(i) { return i; }",
            false,
        )
    }

    fn component() -> Vec<u8> {
        wat::parse_str("(component (core module))").unwrap()
    }

    #[test]
    fn embed_then_read_round_trips_canonically() {
        let bytes = embed(&component(), &manifest()).unwrap();
        let (m, rest) = split(&bytes).unwrap();
        assert_eq!(m, manifest());
        assert_eq!(m.capabilities, ["crypto", "fetch"]);
        assert_eq!(rest, component().as_slice());
        // Same input, same bytes.
        assert_eq!(bytes, embed(&component(), &manifest()).unwrap());
        assert!(matches!(
            embed(&bytes, &manifest()),
            Err(ArtifactError::DuplicateManifest(_))
        ));
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            text.contains(r#""capabilities":["crypto","fetch"]"#),
            "{text}"
        );
    }

    #[test]
    fn strict_reading() {
        assert_eq!(read_manifest(&component()), Err(ArtifactError::NoManifest));
        let core = wat::parse_str("(module)").unwrap();
        assert!(matches!(
            read_manifest(&core),
            Err(ArtifactError::NotAComponent(_))
        ));
        assert!(matches!(
            read_manifest(b"junk"),
            Err(ArtifactError::NotAComponent(_))
        ));

        let bytes = embed(&component(), &manifest()).unwrap();
        let twice = {
            let mut m2 = manifest();
            m2.name = "other".into();
            let mut b = bytes.clone();
            let extra = embed(&component(), &m2).unwrap();
            b.extend_from_slice(&extra[component().len()..]);
            b
        };
        assert_eq!(
            read_manifest(&twice),
            Err(ArtifactError::DuplicateManifest(2))
        );

        // Hand-written sections: pretty JSON is not canonical; other shapes
        // are malformed.
        let raw = |data: &[u8]| {
            let mut body = Vec::new();
            leb128(&mut body, MANIFEST_SECTION.len());
            body.extend_from_slice(MANIFEST_SECTION.as_bytes());
            body.extend_from_slice(data);
            let mut out = component();
            out.push(0);
            leb128(&mut out, body.len());
            out.extend_from_slice(&body);
            out
        };
        let pretty = serde_json::to_vec_pretty(&manifest()).unwrap();
        assert_eq!(
            read_manifest(&raw(&pretty)),
            Err(ArtifactError::NotCanonical)
        );
        assert!(matches!(
            read_manifest(&raw(b"{}")),
            Err(ArtifactError::Malformed(_))
        ));
        assert!(matches!(
            read_manifest(&raw(b"not json")),
            Err(ArtifactError::Malformed(_))
        ));
        let mut extra = serde_json::to_value(manifest()).unwrap();
        extra["grants"] = json!(["fetch"]);
        let extra = crate::canonical_json::canonical_json(&extra);
        let err = read_manifest(&raw(extra.as_bytes())).unwrap_err();
        assert!(
            matches!(&err, ArtifactError::Malformed(m) if m.contains("unknown field `grants`")),
            "{err}"
        );

        let mut wrong = manifest();
        wrong.format = "temper.tool/9".into();
        let bytes = embed(&component(), &wrong).unwrap();
        assert!(matches!(
            read_manifest(&bytes),
            Err(ArtifactError::UnknownFormat(_))
        ));

        // Over the size cap: refused when writing, and when reading.
        let mut big = manifest();
        big.source = Some("x".repeat(MAX_MANIFEST_BYTES));
        assert!(matches!(
            embed(&component(), &big),
            Err(ArtifactError::ManifestTooLarge(_))
        ));
        let json = big.to_canonical_json();
        assert!(matches!(
            read_manifest(&raw(json.as_bytes())),
            Err(ArtifactError::ManifestTooLarge(_))
        ));

        // Truncated: the section runs past the end.
        let bytes = embed(&component(), &manifest()).unwrap();
        assert!(read_manifest(&bytes[..bytes.len() - 3]).is_err());
    }
}
