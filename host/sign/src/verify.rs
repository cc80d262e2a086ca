//! Checking an artifact against a [`TrustPolicy`], offline.
//!
//! A trusted key counts for an artifact when one of its signatures covers
//! every byte after the signature section ([`wasmsign2::PublicKey::verify`]
//! hashes them as they are), the key is not revoked, and it has not
//! expired. A signature that covers only a prefix ending at a
//! `signature_delimiter` (a *partial* signature) counts only when the
//! policy sets `allow_partial`. Each key counts once, and each publisher
//! once, however many signatures they left.
//!
//! `wasmsign2`'s `verify_multi` and `verify_matrix` are not used for full
//! coverage: on an artifact without delimiters they never compare the
//! artifact's hash with the signed one (a signature moved from another
//! artifact passes them; `tests::library_multi_verify_misses_a_moved_signature`
//! measures it), so partial checks run only where delimiters are.

use std::collections::BTreeSet;
use std::io::Cursor;

use serde::Serialize;
use serde_json::{Value, json};

use crate::Date;
use crate::keys::TrustedKey;
use crate::policy::{Level, TrustPolicy};
use crate::sign::parts;

/// What is being admitted: its artifact id (hex), its tool name, and the
/// OCI reference it was pulled from (`oci://host/repo:tag`), if any.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// Artifact id (blake3 hex, without the signature section).
    pub id: &'a str,
    /// The tool's name from its manifest.
    pub name: &'a str,
    /// `oci://host/repo:tag` when it came from a registry.
    pub reference: Option<&'a str>,
}

/// A trusted key that signed the artifact.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Signer {
    /// Its publisher.
    pub publisher: String,
    /// Its id in the trust file.
    pub key: String,
    /// Its fingerprint (key id from `temper keygen`).
    pub fingerprint: String,
    /// The signature covers only part of the artifact (allowed by the policy).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

/// Why an artifact is not trusted. Each names the artifact (short id and
/// tool name) and, for a rule, its number (from 1) and scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustError {
    /// `[revoked] artifacts` lists it.
    #[error(
        "trust: artifact {} ({name}) is revoked by the trust policy ([revoked] artifacts)",
        short(id)
    )]
    ArtifactRevoked {
        /// Artifact id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// Its signature section or detached signature does not parse.
    #[error(
        "trust: artifact {} ({name}) has an unreadable signature: {detail}",
        short(id)
    )]
    Malformed {
        /// Artifact id.
        id: String,
        /// Tool name.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// No rule's scope covers it (an `enforce` policy trusts nothing by default).
    #[error(
        "trust: artifact {} ({name}) is covered by no [[rule]] of the trust policy",
        short(id)
    )]
    NoRule {
        /// Artifact id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// A publisher the rule requires did not sign it.
    #[error(
        "trust: artifact {} ({name}) has no signature from {publisher} (rule {rule}: scope {scope}){}",
        short(id),
        note(why)
    )]
    MissingPublisher {
        /// Artifact id.
        id: String,
        /// Tool name.
        name: String,
        /// The publisher whose signature is missing.
        publisher: String,
        /// The rule's number, from 1.
        rule: usize,
        /// The rule's scope.
        scope: String,
        /// What was found instead (unsigned, revoked, expired, partial).
        why: Vec<String>,
    },
    /// Fewer distinct publishers signed it than the rule's threshold.
    #[error("trust: artifact {} ({name}) is signed by {} of the {need} publishers it needs ({}) (rule {rule}: scope {scope}){}", short(id), have.len(), if have.is_empty() { "none".to_string() } else { have.join(", ") }, note(why))]
    Threshold {
        /// Artifact id.
        id: String,
        /// Tool name.
        name: String,
        /// Publishers that signed.
        have: Vec<String>,
        /// The threshold.
        need: usize,
        /// The rule's number, from 1.
        rule: usize,
        /// The rule's scope.
        scope: String,
        /// What was found besides (unsigned, revoked, expired, partial).
        why: Vec<String>,
    },
}

fn short(id: &str) -> String {
    format!("{}…", &id[..id.len().min(12)])
}

fn note(why: &[String]) -> String {
    if why.is_empty() {
        String::new()
    } else {
        format!(": {}", why.join("; "))
    }
}

/// The outcome of [`TrustPolicy::check`] for an artifact that may be
/// admitted: the trusted signers found, and under `audit` the refusal that
/// `enforce` would have made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The policy's level.
    pub level: Level,
    /// Trusted keys that signed it (sorted; each once).
    pub signers: Vec<Signer>,
    /// Under `audit`: why `enforce` would refuse it.
    pub refusal: Option<TrustError>,
}

impl Verdict {
    /// The audit trail's record of the check: the level, the signers' key
    /// ids, and the refusal under `audit`. No key material.
    pub fn audit_json(&self) -> Value {
        let mut v = json!({
            "level": self.level.as_str(),
            "signers": self.signers,
        });
        if let Some(r) = &self.refusal {
            v["refusal"] = Value::String(r.to_string());
        }
        v
    }
}

/// How one trusted key relates to the artifact.
struct Found<'a> {
    key: &'a TrustedKey,
    partial: bool,
}

impl TrustPolicy {
    /// Checks `artifact` (its embedded signatures and `detached`, if given)
    /// for `subject` on `today`. `Ok` when it may be admitted: always under
    /// `off` (nothing is checked), with the refusal recorded under `audit`;
    /// `Err` under `enforce` when it is not trusted.
    // A refusal is the cold path, returned once per admission: not boxed.
    #[allow(clippy::result_large_err)]
    pub fn check(
        &self,
        subject: &Subject<'_>,
        artifact: &[u8],
        detached: Option<&[u8]>,
        today: Date,
    ) -> Result<Verdict, TrustError> {
        if self.level == Level::Off {
            return Ok(Verdict {
                level: Level::Off,
                signers: Vec::new(),
                refusal: None,
            });
        }
        let (signers, refusal) = match self.evaluate(subject, artifact, detached, today) {
            Ok(signers) => (signers, None),
            Err((signers, e)) => (signers, Some(e)),
        };
        match (self.level, refusal) {
            (Level::Enforce, Some(e)) => {
                tracing::warn!(artifact = subject.id, tool = subject.name, "{e}");
                Err(e)
            }
            (level, refusal) => {
                if let Some(e) = &refusal {
                    tracing::warn!(
                        artifact = subject.id,
                        tool = subject.name,
                        "audit only, admitted: {e}"
                    );
                }
                Ok(Verdict {
                    level,
                    signers,
                    refusal,
                })
            }
        }
    }

    /// The signers, or the signers and why the artifact is refused.
    #[allow(clippy::result_large_err)]
    fn evaluate(
        &self,
        subject: &Subject<'_>,
        artifact: &[u8],
        detached: Option<&[u8]>,
        today: Date,
    ) -> Result<Vec<Signer>, (Vec<Signer>, TrustError)> {
        let id = subject.id.to_string();
        let name = subject.name.to_string();
        let malformed = |detail: String| {
            (
                Vec::new(),
                TrustError::Malformed {
                    id: id.clone(),
                    name: name.clone(),
                    detail,
                },
            )
        };
        if self.revoked_artifacts.contains(subject.id) {
            return Err((Vec::new(), TrustError::ArtifactRevoked { id, name }));
        }
        let p = parts(artifact).map_err(|e| malformed(e.to_string()))?;
        let payloads: Vec<&[u8]> = [p.signature, detached].into_iter().flatten().collect();
        for payload in &payloads {
            wasmsign2::SignatureData::deserialize(payload)
                .map_err(|e| malformed(format!("{e}")))?;
        }
        let found = self.found(&p.unsigned, p.delimited, &payloads);

        // Why keys that signed do not count.
        let mut why: Vec<String> = Vec::new();
        if payloads.is_empty() {
            why.push("it carries no signature".into());
        } else if found.is_empty() {
            why.push("no key of the trust policy signed all of it".into());
        }
        let mut signers: BTreeSet<Signer> = BTreeSet::new();
        for f in &found {
            let k = f.key;
            if self.is_revoked(k) {
                why.push(format!(
                    "key {} of {} signed it, but it is revoked",
                    k.id, k.publisher
                ));
            } else if let Some(d) = k.not_after.filter(|d| *d < today) {
                why.push(format!(
                    "key {} of {} signed it, but it expired on {d}",
                    k.id, k.publisher
                ));
            } else if f.partial && !self.allow_partial {
                why.push(format!(
                    "key {} of {} signed only part of it (partial signatures are not allowed: allow_partial)",
                    k.id, k.publisher
                ));
            } else {
                signers.insert(Signer {
                    publisher: k.publisher.clone(),
                    key: k.id.clone(),
                    fingerprint: k.fingerprint.clone(),
                    partial: f.partial,
                });
            }
        }
        let signers: Vec<Signer> = signers.into_iter().collect();
        let publishers: BTreeSet<&str> = signers.iter().map(|s| s.publisher.as_str()).collect();

        let mut covered = false;
        for (i, rule) in self.rules.iter().enumerate() {
            if !rule.covers(subject.name, subject.reference) {
                continue;
            }
            covered = true;
            for required in &rule.require {
                if !publishers.contains(required.as_str()) {
                    let why = why
                        .iter()
                        .filter(|w| {
                            !w.starts_with("key ") || w.contains(&format!(" of {required} "))
                        })
                        .cloned()
                        .collect();
                    return Err((
                        signers.clone(),
                        TrustError::MissingPublisher {
                            id,
                            name,
                            publisher: required.clone(),
                            rule: i + 1,
                            scope: rule.scope_text(),
                            why,
                        },
                    ));
                }
            }
            if let Some(need) = rule.threshold
                && publishers.len() < need
            {
                return Err((
                    signers.clone(),
                    TrustError::Threshold {
                        id,
                        name,
                        have: publishers.iter().map(|s| s.to_string()).collect(),
                        need,
                        rule: i + 1,
                        scope: rule.scope_text(),
                        why,
                    },
                ));
            }
        }
        if !covered {
            return Err((signers, TrustError::NoRule { id, name }));
        }
        Ok(signers)
    }

    /// Every key of the policy (revoked and expired ones too, to explain a
    /// refusal) with a valid signature over all of `unsigned`, or, where
    /// delimiters are, over the ranges they end.
    fn found<'a>(&'a self, unsigned: &[u8], delimited: bool, payloads: &[&[u8]]) -> Vec<Found<'a>> {
        let mut out = Vec::new();
        for key in &self.keys {
            let full = payloads.iter().any(|sig| {
                key.public
                    .verify(&mut Cursor::new(unsigned), Some(sig))
                    .is_ok()
            });
            if full {
                out.push(Found {
                    key,
                    partial: false,
                });
                continue;
            }
            // verify_multi checks the hash at each delimiter; it is only
            // sound when there are delimiters (see the module docs).
            let partial = delimited
                && payloads.iter().any(|sig| {
                    key.public
                        .verify_multi(&mut Cursor::new(unsigned), Some(sig), |_| true)
                        .is_ok()
                });
            if partial {
                out.push(Found { key, partial: true });
            }
        }
        out
    }
}
