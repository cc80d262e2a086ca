//! Signing and verification, with hostile inputs: each refusal below is
//! the guard it names, and fails without it.

use std::path::Path;

use crate::sign::{self, DELIMITER_SECTION, parts};
use crate::verify::{Subject, TrustError};
use crate::{Date, Level, SigningKey, TrustPolicy};

/// A component with a code-like section and a trailing `temper.manifest`
/// custom section, like a Temper artifact.
fn artifact(text: &str) -> Vec<u8> {
    let mut bytes = wat::parse_str(format!(
        r#"(component (core module (func (export "{text}") (result i32) i32.const 7)))"#
    ))
    .unwrap();
    let manifest = format!(r#"{{"name":"{text}"}}"#);
    let name = "temper.manifest";
    let mut body = vec![u8::try_from(name.len()).unwrap()];
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(manifest.as_bytes());
    bytes.push(0);
    bytes.push(u8::try_from(body.len()).unwrap());
    bytes.extend_from_slice(&body);
    bytes
}

fn today() -> Date {
    Date::parse("2026-11-26").unwrap()
}

fn subject<'a>(name: &'a str) -> Subject<'a> {
    Subject {
        id: "9c1f4e0aa0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4c5d6e7f8091",
        name,
        reference: None,
    }
}

fn policy(text: &str) -> TrustPolicy {
    TrustPolicy::parse(Path::new("trust.toml"), text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// enforce; publisher `team` with `key` (extra fields after it), one rule.
fn team_policy(key: &SigningKey, key_extra: &str, rule: &str) -> TrustPolicy {
    policy(&format!(
        r#"level = "enforce"
[publishers.team]
keys = [{{ id = "k1", ed25519 = "{}"{key_extra} }}]
[[rule]]
{rule}
"#,
        key.public_base64()
    ))
}

fn require_team(key: &SigningKey) -> TrustPolicy {
    team_policy(
        key,
        "",
        r#"scope = ["*"]
require = ["team"]"#,
    )
}

#[test]
fn embedded_and_detached_are_the_same_signature() {
    let key = SigningKey::generate();
    let a = artifact("slugify");
    let embedded = sign::sign(&a, &key, false, None).unwrap();
    let detached = sign::sign(&a, &key, true, None).unwrap();
    assert_eq!(detached.bytes, a, "detached leaves the artifact as it is");
    assert_eq!(embedded.signature, detached.signature);
    assert_eq!(
        sign::attach(&a, &detached.signature).unwrap(),
        embedded.bytes
    );
    // The signature section is first, where the format (and the library) puts it,
    // and everything after it is the artifact's bytes as they were.
    assert!(sign::library_sees_signature(&embedded.bytes));
    let p = parts(&embedded.bytes).unwrap();
    assert_eq!(p.unsigned, a);
    assert_eq!(p.signature, Some(embedded.signature.as_slice()));

    let policy = require_team(&key);
    let v = policy
        .check(&subject("slugify"), &embedded.bytes, None, today())
        .unwrap();
    assert_eq!(v.level, Level::Enforce);
    assert_eq!(v.signers.len(), 1);
    assert_eq!(v.signers[0].publisher, "team");
    assert_eq!(v.signers[0].key, "k1");
    assert_eq!(v.signers[0].fingerprint, key.id());
    assert!(v.refusal.is_none());
    let v2 = policy
        .check(&subject("slugify"), &a, Some(&detached.signature), today())
        .unwrap();
    assert_eq!(v.signers, v2.signers);
    assert_eq!(
        sign::signer_key_ids(&embedded.bytes, None).unwrap(),
        [key.id()]
    );
    // Audit record: key ids, never key material.
    let audit = v.audit_json().to_string();
    assert!(
        audit.contains(key.id()) && !audit.contains(&key.public_base64()),
        "{audit}"
    );
}

#[test]
fn several_signers_add_to_one_section_and_meet_a_threshold() {
    let (a_key, b_key) = (SigningKey::generate(), SigningKey::generate());
    let a = artifact("report");
    let once = sign::sign(&a, &a_key, false, None).unwrap();
    let twice = sign::sign(&once.bytes, &b_key, false, None).unwrap();
    assert_eq!(parts(&twice.bytes).unwrap().unsigned, a);
    let mut ids = sign::signer_key_ids(&twice.bytes, None).unwrap();
    ids.sort();
    let mut want = vec![a_key.id().to_string(), b_key.id().to_string()];
    want.sort();
    assert_eq!(ids, want);
    // Signing again with the same key is refused, not stacked.
    assert!(matches!(
        sign::sign(&twice.bytes, &a_key, false, None),
        Err(sign::SignError::AlreadySigned(id)) if id == a_key.id()
    ));
    // Detached signatures grow the same way.
    let d1 = sign::sign(&a, &a_key, true, None).unwrap();
    let d2 = sign::sign(&a, &b_key, true, Some(&d1.signature)).unwrap();
    assert_eq!(d2.signature, twice.signature);

    let text = format!(
        r#"level = "enforce"
[publishers.alpha]
keys = [{{ id = "a", ed25519 = "{}" }}]
[publishers.beta]
keys = [{{ id = "b", ed25519 = "{}" }}]
[[rule]]
scope = ["*"]
threshold = 2
"#,
        a_key.public_base64(),
        b_key.public_base64()
    );
    let p = policy(&text);
    let v = p
        .check(&subject("report"), &twice.bytes, None, today())
        .unwrap();
    assert_eq!(
        v.signers
            .iter()
            .map(|s| s.publisher.as_str())
            .collect::<Vec<_>>(),
        ["alpha", "beta"]
    );
    let e = p
        .check(&subject("report"), &once.bytes, None, today())
        .unwrap_err();
    assert!(
        matches!(
            &e,
            TrustError::Threshold {
                need: 2,
                rule: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("is signed by 1 of the 2 publishers it needs (alpha) (rule 1: scope *)"),
        "{e}"
    );
}

#[test]
fn a_duplicated_signature_counts_once_toward_a_threshold() {
    let (a_key, b_key) = (SigningKey::generate(), SigningKey::generate());
    let a = artifact("report");
    let once = sign::sign(&a, &a_key, true, None).unwrap();
    // The attacker copies alpha's signature entry, and then the whole
    // hash set, so the section holds alpha's signature three times.
    let mut data = wasmsign2::SignatureData::deserialize(&once.signature).unwrap();
    let sig = data.signed_hashes_set[0].signatures[0].clone();
    data.signed_hashes_set[0].signatures.push(sig.clone());
    let mut relabelled = sig;
    relabelled.key_id = Some(b_key.id().as_bytes().to_vec());
    data.signed_hashes_set[0].signatures.push(relabelled);
    let set = data.signed_hashes_set[0].clone();
    data.signed_hashes_set.push(set);
    let forged = data.serialize().unwrap();
    assert_eq!(
        sign::signer_key_ids(&a, Some(&forged)).unwrap().len(),
        2,
        "the forged section claims two keys"
    );
    let text = format!(
        r#"level = "enforce"
[publishers.alpha]
keys = [{{ id = "a", ed25519 = "{}" }}]
[publishers.beta]
keys = [{{ id = "b", ed25519 = "{}" }}]
[[rule]]
scope = ["*"]
threshold = 2
"#,
        a_key.public_base64(),
        b_key.public_base64()
    );
    let e = policy(&text)
        .check(&subject("report"), &a, Some(&forged), today())
        .unwrap_err();
    assert!(
        matches!(&e, TrustError::Threshold { have, .. } if have == &["alpha"]),
        "{e}"
    );

    // Two keys of one publisher are one publisher.
    let two_keys = format!(
        r#"level = "enforce"
[publishers.alpha]
keys = [{{ id = "a", ed25519 = "{}" }}, {{ id = "a2", ed25519 = "{}" }}]
[publishers.beta]
keys = [{{ id = "b", ed25519 = "{}" }}]
[[rule]]
scope = ["*"]
threshold = 2
"#,
        a_key.public_base64(),
        b_key.public_base64(),
        SigningKey::generate().public_base64()
    );
    let both = sign::sign(&once.bytes, &b_key, true, Some(&once.signature)).unwrap();
    let e = policy(&two_keys)
        .check(&subject("report"), &a, Some(&both.signature), today())
        .unwrap_err();
    assert!(
        matches!(&e, TrustError::Threshold { have, .. } if have == &["alpha"]),
        "{e}"
    );
}

#[test]
fn a_flipped_byte_in_code_or_manifest_is_refused() {
    let key = SigningKey::generate();
    let a = artifact("slugify");
    let signed = sign::sign(&a, &key, false, None).unwrap().bytes;
    let policy = require_team(&key);
    assert!(
        policy
            .check(&subject("slugify"), &signed, None, today())
            .is_ok()
    );
    // The code: the `i32.const 7` immediate of the core module.
    let code_at = signed.windows(2).rposition(|w| w == [0x41, 0x07]).unwrap() + 1;
    // The manifest: the last byte (its closing brace).
    let manifest_at = signed.len() - 1;
    for at in [code_at, manifest_at] {
        let mut bad = signed.clone();
        bad[at] ^= 0x01;
        let e = policy
            .check(&subject("slugify"), &bad, None, today())
            .unwrap_err();
        assert!(
            matches!(&e, TrustError::MissingPublisher { publisher, rule: 1, .. } if publisher == "team"),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("no key of the trust policy signed all of it"),
            "{e}"
        );
    }
    // Bytes appended after the manifest are not covered either.
    let mut longer = signed.clone();
    longer.extend_from_slice(&[0, 3, 1, b'x', b'y']);
    assert!(
        policy
            .check(&subject("slugify"), &longer, None, today())
            .is_err()
    );
}

#[test]
fn a_signature_moved_from_another_artifact_is_refused() {
    let key = SigningKey::generate();
    let (a, b) = (artifact("slugify"), artifact("slugifx"));
    let sig_a = sign::sign(&a, &key, true, None).unwrap().signature;
    let moved = sign::embed(&b, &sig_a);
    let policy = require_team(&key);
    let e = policy
        .check(&subject("slugifx"), &moved, None, today())
        .unwrap_err();
    assert!(matches!(e, TrustError::MissingPublisher { .. }), "{e}");
    // A detached signature for other bytes, likewise.
    let e = policy
        .check(&subject("slugifx"), &b, Some(&sig_a), today())
        .unwrap_err();
    assert!(matches!(e, TrustError::MissingPublisher { .. }), "{e}");
}

/// Why the verifier does not use `verify_multi` for whole artifacts: the
/// library accepts the moved signature above when there are no delimiters.
/// If a later wasmsign2 fixes this, this test fails: revisit the choice.
#[test]
fn library_multi_verify_misses_a_moved_signature() {
    let key = SigningKey::generate();
    let (a, b) = (artifact("slugify"), artifact("slugifx"));
    let sig_a = sign::sign(&a, &key, true, None).unwrap().signature;
    let pk = key.public_key();
    let multi = pk.verify_multi(&mut std::io::Cursor::new(&b), Some(&sig_a), |_| true);
    assert!(multi.is_ok(), "wasmsign2 0.2.8 verify_multi accepts it");
    let whole = pk.verify(&mut std::io::Cursor::new(&b), Some(&sig_a));
    assert!(whole.is_err(), "PublicKey::verify refuses it");
}

#[test]
fn an_unsigned_artifact_under_enforce_is_refused_and_audit_admits() {
    let key = SigningKey::generate();
    let a = artifact("slugify");
    let signed = sign::sign(&a, &key, false, None).unwrap().bytes;
    let stripped = parts(&signed).unwrap().unsigned;
    let enforce = require_team(&key);
    let e = enforce
        .check(&subject("slugify"), &stripped, None, today())
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "trust: artifact 9c1f4e0aa0b1… (slugify) has no signature from team (rule 1: scope *): it carries no signature"
    );
    let mut audit = enforce.clone();
    audit.level = Level::Audit;
    let v = audit
        .check(&subject("slugify"), &stripped, None, today())
        .unwrap();
    assert_eq!(v.refusal, Some(e));
    assert!(v.signers.is_empty());
    assert!(
        v.audit_json()["refusal"]
            .as_str()
            .unwrap()
            .contains("no signature from team")
    );
    let v = TrustPolicy::off()
        .check(&subject("slugify"), &stripped, None, today())
        .unwrap();
    assert_eq!((v.level, v.refusal, v.signers.len()), (Level::Off, None, 0));
}

#[test]
fn a_revoked_or_expired_key_does_not_count() {
    let key = SigningKey::generate();
    let signed = sign::sign(&artifact("slugify"), &key, false, None)
        .unwrap()
        .bytes;
    let rule = r#"scope = ["*"]
require = ["team"]"#;

    let mut revoked = require_team(&key);
    revoked.revoked_keys.insert("k1".into());
    let e = revoked
        .check(&subject("slugify"), &signed, None, today())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("key k1 of team signed it, but it is revoked"),
        "{e}"
    );
    // By fingerprint, from the file.
    let text = format!(
        "level = \"enforce\"\n[publishers.team]\nkeys = [{{ id = \"k1\", ed25519 = \"{}\" }}]\n[[rule]]\n{rule}\n[revoked]\nkeys = [\"{}\"]\n",
        key.public_base64(),
        key.id()
    );
    assert!(
        policy(&text)
            .check(&subject("slugify"), &signed, None, today())
            .is_err()
    );

    let expired = team_policy(&key, r#", not_after = "2026-11-25""#, rule);
    let e = expired
        .check(&subject("slugify"), &signed, None, today())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("key k1 of team signed it, but it expired on 2026-11-25"),
        "{e}"
    );
    // The last day still counts.
    let last_day = team_policy(&key, r#", not_after = "2026-11-26""#, rule);
    assert!(
        last_day
            .check(&subject("slugify"), &signed, None, today())
            .is_ok()
    );

    // A revoked artifact is refused whoever signed it.
    let mut p = require_team(&key);
    p.revoked_artifacts
        .insert(subject("slugify").id.to_string());
    let e = p
        .check(&subject("slugify"), &signed, None, today())
        .unwrap_err();
    assert!(matches!(e, TrustError::ArtifactRevoked { .. }), "{e}");
}

#[test]
fn a_partial_signature_counts_only_when_the_policy_allows_it() {
    let key = SigningKey::generate();
    let a = artifact("slugify");
    // Signed with the format's delimiters (extensions allowed), then a
    // section appended after the signed range.
    let module = wasmsign2::Module::deserialize(&mut std::io::Cursor::new(&a)).unwrap();
    let (signed, _) = key
        .secret()
        .sign_multi(module, Some(&key.id().as_bytes().to_vec()), false, true)
        .unwrap();
    let mut bytes = Vec::new();
    signed.serialize(&mut bytes).unwrap();
    assert!(parts(&bytes).unwrap().delimited);
    assert!(String::from_utf8_lossy(&bytes).contains(DELIMITER_SECTION));
    let mut extended = bytes.clone();
    extended.extend_from_slice(&[0, 6, 5, b'e', b'x', b't', b'r', b'a']);

    let strict = require_team(&key);
    // Fully covered (the delimiter ends the artifact): a full signature.
    let v = strict
        .check(&subject("slugify"), &bytes, None, today())
        .unwrap();
    assert!(!v.signers[0].partial);
    let e = strict
        .check(&subject("slugify"), &extended, None, today())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("signed only part of it (partial signatures are not allowed"),
        "{e}"
    );

    let mut lenient = strict.clone();
    lenient.allow_partial = true;
    let v = lenient
        .check(&subject("slugify"), &extended, None, today())
        .unwrap();
    assert!(v.signers[0].partial);
    // Still not a signature over other bytes.
    let mut flipped = extended.clone();
    let code_at = flipped.windows(2).rposition(|w| w == [0x41, 0x07]).unwrap() + 1;
    flipped[code_at] ^= 1;
    assert!(
        lenient
            .check(&subject("slugify"), &flipped, None, today())
            .is_err()
    );
}

#[test]
fn rules_are_scoped_by_name_and_reference() {
    let key = SigningKey::generate();
    let unsigned = artifact("billing-report");
    let p = team_policy(
        &key,
        "",
        r#"scope = ["billing-*", "oci://registry.example/tools/*"]
require = ["team"]"#,
    );
    // Covered by name.
    let e = p
        .check(&subject("billing-report"), &unsigned, None, today())
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("(rule 1: scope billing-*, oci://registry.example/tools/*)"),
        "{e}"
    );
    // Not covered by any rule: refused under enforce all the same.
    let e = p
        .check(&subject("slugify"), &unsigned, None, today())
        .unwrap_err();
    assert!(matches!(e, TrustError::NoRule { .. }), "{e}");
    // Covered by reference.
    let pulled = Subject {
        reference: Some("oci://registry.example/tools/slugify:1.0"),
        ..subject("slugify")
    };
    assert!(matches!(
        p.check(&pulled, &unsigned, None, today()),
        Err(TrustError::MissingPublisher { .. })
    ));
    let elsewhere = Subject {
        reference: Some("oci://other.example/tools/slugify:1.0"),
        ..subject("slugify")
    };
    assert!(matches!(
        p.check(&elsewhere, &unsigned, None, today()),
        Err(TrustError::NoRule { .. })
    ));
}

#[test]
fn a_garbled_signature_section_is_refused_with_a_reason() {
    let key = SigningKey::generate();
    let a = artifact("slugify");
    let garbled = sign::embed(&a, b"\x07not a signature");
    let e = require_team(&key)
        .check(&subject("slugify"), &garbled, None, today())
        .unwrap_err();
    assert!(matches!(e, TrustError::Malformed { .. }), "{e}");
    // A signature section that is not first is not a signature.
    let mut late = a.clone();
    late.extend_from_slice(&sign::embed(&a, b"x")[8..8 + 13]);
    assert!(matches!(
        sign::sign(&late, &key, false, None),
        Err(sign::SignError::Misplaced)
    ));
    assert!(matches!(
        sign::sign(b"junk", &key, false, None),
        Err(sign::SignError::NotWasm(_))
    ));
}

// ---- the policy file -------------------------------------------------------

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(name)
}

#[test]
fn the_full_policy_file_parses() {
    let p = TrustPolicy::load(&fixture("good.toml")).unwrap();
    assert_eq!(p.level, Level::Enforce);
    assert_eq!(p.publishers, ["platform-team", "security"]);
    assert_eq!(p.keys.len(), 2);
    assert_eq!(p.keys[0].id, "k2026");
    assert_eq!(p.keys[0].not_after, Date::parse("2027-06-30"));
    assert_eq!(p.rules.len(), 2);
    assert_eq!(p.rules[1].threshold, Some(2));
    assert!(p.rules[1].covers("x", Some("oci://registry.example/tools/x:1")));
    assert!(p.rules[1].covers("billing-x", None));
    assert!(!p.rules[1].covers("x", None));
    assert!(p.revoked_keys.contains("a024c0de0000beef"));
    assert_eq!(p.revoked_artifacts.len(), 1);
}

#[test]
fn each_bad_policy_file_names_the_table_and_key() {
    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        ("bad_unknown_top.toml", "", Some("levle"), "unknown field"),
        (
            "bad_unknown_key.toml",
            "publishers.platform-team.keys[1]",
            Some("expires"),
            "unknown field",
        ),
        (
            "bad_unknown_rule_key.toml",
            "rule[1]",
            Some("requires"),
            "unknown field",
        ),
        (
            "bad_level.toml",
            "",
            Some("level"),
            "unknown variant `strict`",
        ),
        ("bad_no_level.toml", "", None, "missing field `level`"),
        (
            "bad_base64.toml",
            "publishers.platform-team.keys[1]",
            Some("ed25519"),
            "32-byte",
        ),
        (
            "bad_short_key.toml",
            "publishers.platform-team.keys[1]",
            Some("ed25519"),
            "32-byte",
        ),
        (
            "bad_date.toml",
            "publishers.platform-team.keys[1]",
            Some("not_after"),
            "not a date",
        ),
        (
            "bad_same_key_twice.toml",
            "publishers.b.keys[1]",
            Some("ed25519"),
            "the same public key as key \"ka\" of a",
        ),
        (
            "bad_duplicate_id.toml",
            "publishers.b.keys[1]",
            Some("id"),
            "also a key of a",
        ),
        (
            "bad_no_keys.toml",
            "publishers.a",
            Some("keys"),
            "at least one key",
        ),
        (
            "bad_require_unknown.toml",
            "rule[1]",
            Some("require"),
            "\"platfrom-team\" is not a publisher",
        ),
        (
            "bad_threshold.toml",
            "rule[1]",
            Some("threshold"),
            "between 1 and the number of publishers (1)",
        ),
        (
            "bad_rule_requires_nothing.toml",
            "rule[1]",
            None,
            "requires nothing",
        ),
        (
            "bad_scope_glob.toml",
            "rule[1]",
            Some("scope"),
            "only a trailing *",
        ),
        (
            "bad_revoked_unknown.toml",
            "revoked",
            Some("keys"),
            "\"k-typo\"",
        ),
        (
            "bad_revoked_artifact.toml",
            "revoked",
            Some("artifacts"),
            "blake3:",
        ),
        ("bad_toml.toml", "", None, "TOML parse error"),
    ];
    for (file, table, key, message) in cases {
        let path = fixture(file);
        let e = TrustPolicy::load(&path).expect_err(file);
        assert_eq!(e.file, path, "{file}");
        assert_eq!(&e.table, table, "{file}: {e}");
        assert_eq!(e.key.as_deref(), *key, "{file}: {e}");
        assert!(e.message.contains(message), "{file}: {e}");
        assert!(e.to_string().contains(file), "{file}: {e}");
    }
    let e = TrustPolicy::load(&fixture("absent.toml")).unwrap_err();
    assert!(e.message.contains("cannot read"), "{e}");
}

#[test]
fn combined_detached_signatures_count_like_embedded_ones() {
    let (a_key, b_key) = (SigningKey::generate(), SigningKey::generate());
    let a = artifact("report");
    let da = sign::sign(&a, &a_key, true, None).unwrap().signature;
    let db = sign::sign(&a, &b_key, true, None).unwrap().signature;
    // Twice the same one, and the other: each signature once.
    let combined = sign::combine(&a, &[da.clone(), db.clone(), da.clone()]).unwrap();
    let data = wasmsign2::SignatureData::deserialize(parts(&combined).unwrap().signature.unwrap())
        .unwrap();
    assert_eq!(data.signed_hashes_set.len(), 1);
    assert_eq!(data.signed_hashes_set[0].signatures.len(), 2);
    assert_eq!(parts(&combined).unwrap().unsigned, a);
    // Added to an embedded signature, too.
    let embedded = sign::sign(&a, &a_key, false, None).unwrap().bytes;
    assert_eq!(
        sign::combine(&embedded, std::slice::from_ref(&db)).unwrap(),
        combined
    );
    assert_eq!(sign::combine(&a, &[]).unwrap(), a);
    assert!(sign::combine(&a, &[b"junk".to_vec()]).is_err());
    let p = require_team(&b_key);
    assert!(
        p.check(&subject("report"), &combined, None, today())
            .is_ok()
    );
}
