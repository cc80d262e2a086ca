//! Properties of the artifact manifest section: manifests round-trip, and
//! any section or damaged artifact is read or refused without a panic.

use proptest::prelude::*;
use temper::artifact::{self, ArtifactError, ArtifactManifest, StepRef};
use temper::canonical_json::canonical_json;

use super::{bounded, config, json_value, test_case, text};

fn manifest() -> impl Strategy<Value = ArtifactManifest> {
    let step = (
        text(),
        text(),
        prop::option::of("[0-9a-f]{64}"),
        json_value(),
    )
        .prop_map(|(name, tool, blake3, input_mapping)| StepRef {
            name,
            tool,
            blake3,
            input_mapping,
        });
    (
        (
            text(),
            text(),
            json_value(),
            json_value(),
            prop_oneof![
                Just(artifact::Mode::Sandbox),
                Just(artifact::Mode::Compose),
                Just(artifact::Mode::Bundle)
            ],
        ),
        (
            prop::collection::vec(text(), 0..3),
            prop::collection::vec(test_case(), 0..3),
            "[0-9a-f]{64}",
            "[0-9a-f]{64}",
            prop::collection::vec(step, 0..3),
            prop::option::of(text()),
        ),
    )
        .prop_map(
            |(
                (name, description, input_schema, output_schema, mode),
                (capabilities, test_cases, source_blake3, shim_blake3, steps, source),
            )| ArtifactManifest {
                format: artifact::FORMAT.into(),
                name,
                description,
                input_schema,
                output_schema,
                mode,
                capabilities,
                test_cases,
                source_blake3,
                shim_blake3,
                steps,
                calls: Vec::new(),
                source,
            },
        )
}

fn empty_component() -> Vec<u8> {
    wat::parse_str("(component)").expect("an empty component")
}

// ---- artifact manifest -----------------------------------------------------------

proptest! {
    #![proptest_config(config(300))]

    /// What `embed` writes, `split` reads back exactly.
    #[test]
    fn manifests_round_trip(m in manifest()) {
        let component = empty_component();
        let bytes = artifact::embed(&component, &m).unwrap();
        let (back, rest) = artifact::split(&bytes).unwrap_or_else(|e| panic!("{e}"));
        prop_assert_eq!(&back, &m);
        prop_assert_eq!(rest, &component[..]);
        prop_assert_eq!(back.to_canonical_json(), m.to_canonical_json());
    }

    /// Any section content is read as a manifest only when it is the
    /// canonical JSON of one; otherwise a typed error.
    #[test]
    fn any_manifest_section_is_read_or_refused(data in prop_oneof![
        text(),
        json_value().prop_map(|v| v.to_string()),
        json_value().prop_map(|v| canonical_json(&v)),
        manifest().prop_map(|m| m.to_canonical_json()),
        manifest().prop_map(|m| serde_json::to_string_pretty(&m).unwrap()),
    ]) {
        let bytes = with_custom_section(&empty_component(), artifact::MANIFEST_SECTION, data.as_bytes());
        match bounded("artifact::split", || artifact::split(&bytes)) {
            Ok((m, _)) => prop_assert_eq!(m.to_canonical_json(), data),
            Err(
                ArtifactError::Malformed(_)
                | ArtifactError::NotCanonical
                | ArtifactError::UnknownFormat(_)
                | ArtifactError::ManifestTooLarge(_),
            ) => {}
            Err(other) => prop_assert!(false, "unexpected {other}"),
        }
    }

    /// Arbitrary bytes, and valid artifacts cut or with a byte changed:
    /// never a panic.
    #[test]
    fn damaged_artifacts_are_refused_without_panicking(
        m in manifest(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        noise in prop::collection::vec(any::<u8>(), 0..256),
    ) {
        let bytes = artifact::embed(&empty_component(), &m).unwrap();
        let _ = bounded("split noise", || artifact::split(&noise));
        let _ = bounded("split cut", || artifact::split(&bytes[..cut.index(bytes.len())]));
        let mut flipped = bytes.clone();
        let at = flip.index(flipped.len());
        flipped[at] = byte;
        let _ = bounded("split flipped", || artifact::split(&flipped));
        let _ = artifact::world(&flipped);
    }
}

/// A component with one more custom section at its end.
fn with_custom_section(component: &[u8], name: &str, data: &[u8]) -> Vec<u8> {
    fn leb(out: &mut Vec<u8>, mut n: usize) {
        loop {
            let b = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(&mut body, name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(data);
    let mut out = component.to_vec();
    out.push(0);
    leb(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}
