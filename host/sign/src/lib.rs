//! Signed artifacts and the offline trust policy.
//!
//! - [`keys`]: Ed25519 key pairs ([`keys::SigningKey`]), their files (PKCS#8
//!   PEM, the secret written with mode 0600) and key ids.
//! - [`sign`]: signatures in the WebAssembly tool-conventions format
//!   (`Signatures.md`, through the `wasmsign2` crate): a `signature` custom
//!   section placed first, Ed25519 over the SHA-256 of everything after it;
//!   embedded or detached (the same bytes either way); several signers add
//!   to one signature section.
//! - [`policy`]: the trust policy file (`--trust FILE`, TOML): a level
//!   (`enforce`, `audit`, `off`), publishers and their keys, rules scoped by
//!   tool name or OCI reference, and revocations.
//! - [`verify`]: checks an artifact against a policy, offline: which
//!   trusted keys signed all of it, and whether each rule that covers it is
//!   met; a refusal names the rule and what is missing.
//!
//! The signature section is not part of an artifact's id (the blake3 the
//! rest of Temper names it by, `temper_runtime::id`): signing never changes
//! a tool's id. The manifest section is part of what is signed.
//!
//! This crate does not print; it logs with `tracing`.

pub mod date;
pub mod keys;
pub mod policy;
pub mod sign;
pub mod verify;

pub use date::Date;
pub use keys::{KeyError, SigningKey, TrustedKey};
pub use policy::{Level, PolicyError, TrustPolicy};
pub use sign::{SignError, Signed, combine, signer_key_ids};
pub use verify::{Signer, Subject, TrustError, Verdict};

#[cfg(test)]
mod tests;
