//! Signing: adds an Ed25519 signature to an artifact in the WebAssembly
//! tool-conventions format, through `wasmsign2`.
//!
//! The signature covers every byte after the `signature` section: all the
//! component's sections, the `temper.manifest` section included. Signing
//! again with another key adds that signer to the same section; detached,
//! the section's payload is written to a file of its own instead, and the
//! artifact keeps no signature section (the two forms are the same
//! signature).
//!
//! The artifact's bytes after the signature section are copied as they
//! are (never re-encoded), so signing never changes an artifact's id; each
//! new signature is checked against those bytes before it is returned.

use std::io::Cursor;

use wasmsign2::Module;

/// The custom section that holds the signatures (first in the artifact).
pub const SIGNATURE_SECTION: &str = "signature";
/// The custom section that ends a signed range in a partial signature.
pub const DELIMITER_SECTION: &str = "signature_delimiter";

/// Why an artifact could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// Not a WebAssembly module or component.
    #[error("sign: not a WebAssembly component: {0}")]
    NotWasm(String),
    /// A `signature` section that is not the first section.
    #[error("sign: the artifact has a `signature` section that is not its first section")]
    Misplaced,
    /// The signature section (or detached signature) does not parse.
    #[error("sign: the existing signature does not parse: {0}")]
    Malformed(String),
    /// The artifact carries signatures and a detached signature was given too.
    #[error(
        "sign: the artifact carries a signature section and a detached signature was given too; use one"
    )]
    Both,
    /// This key signed these bytes already.
    #[error("sign: already signed by key {0}")]
    AlreadySigned(String),
    /// The artifact's section sizes are not minimally encoded, so the
    /// signature the library computed does not cover its bytes as they are.
    #[error(
        "sign: the new signature does not verify against the artifact's bytes (non-canonical section encoding)"
    )]
    DoesNotVerify,
}

/// A signed artifact.
#[derive(Debug, Clone)]
pub struct Signed {
    /// The artifact: with the signature section first when embedded;
    /// without any signature section when detached.
    pub bytes: Vec<u8>,
    /// The signature section's payload: every signature, the new one
    /// included (the detached signature file).
    pub signature: Vec<u8>,
    /// The id of the key that signed.
    pub key_id: String,
}

/// The parts of an artifact around its leading signature section.
pub(crate) struct Parts<'a> {
    /// The signature section's payload, if it has one.
    pub(crate) signature: Option<&'a [u8]>,
    /// The artifact without that section: the 8-byte header and the rest,
    /// as they are.
    pub(crate) unsigned: Vec<u8>,
    /// Whether any `signature_delimiter` section is present.
    pub(crate) delimited: bool,
}

fn leb_u32(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let mut value = 0usize;
    for i in 0..5 {
        let byte = *bytes.get(at + i)?;
        value |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, at + i + 1));
        }
    }
    None
}

/// Splits `bytes` at the section level (the same top-level walk
/// `wasmsign2` does): the leading signature section's payload and the rest.
pub(crate) fn parts(bytes: &[u8]) -> Result<Parts<'_>, SignError> {
    let bad = |what: &str| SignError::NotWasm(what.to_string());
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(bad("no WebAssembly header"));
    }
    let mut at = 8;
    let mut signature = None;
    let mut cut = None;
    let mut delimited = false;
    let mut index = 0;
    while at < bytes.len() {
        let id = bytes[at];
        let (size, body) = leb_u32(bytes, at + 1).ok_or_else(|| bad("truncated section size"))?;
        let end = body
            .checked_add(size)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad("a section runs past the end"))?;
        if id == 0 {
            let (name_len, name_at) =
                leb_u32(bytes, body).ok_or_else(|| bad("truncated custom section name"))?;
            let name_end = name_at
                .checked_add(name_len)
                .filter(|&e| e <= end)
                .ok_or_else(|| bad("a custom section name runs past its section"))?;
            let name = &bytes[name_at..name_end];
            if name == SIGNATURE_SECTION.as_bytes() {
                if index != 0 {
                    return Err(SignError::Misplaced);
                }
                signature = Some(&bytes[name_end..end]);
                cut = Some(end);
            } else if name == DELIMITER_SECTION.as_bytes() {
                delimited = true;
            }
        }
        at = end;
        index += 1;
    }
    let unsigned = match cut {
        Some(end) => [&bytes[..8], &bytes[end..]].concat(),
        None => bytes.to_vec(),
    };
    Ok(Parts {
        signature,
        unsigned,
        delimited,
    })
}

/// `payload` as a custom section named `name`.
fn custom_section(name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(out: &mut Vec<u8>, mut n: usize) {
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
    let mut body = Vec::with_capacity(name.len() + payload.len() + 5);
    leb(&mut body, name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = Vec::with_capacity(body.len() + 6);
    out.push(0);
    leb(&mut out, body.len());
    out.extend_from_slice(&body);
    out
}

/// `unsigned` with `signature` embedded as its first section.
pub fn embed(unsigned: &[u8], signature: &[u8]) -> Vec<u8> {
    let section = custom_section(SIGNATURE_SECTION, signature);
    [&unsigned[..8], &section, &unsigned[8..]].concat()
}

/// Attaches a detached signature to `artifact` (which must carry none):
/// the embedded form of the same signature.
pub fn attach(artifact: &[u8], signature: &[u8]) -> Result<Vec<u8>, SignError> {
    let p = parts(artifact)?;
    if p.signature.is_some() {
        return Err(SignError::Both);
    }
    wasmsign2::SignatureData::deserialize(signature)
        .map_err(|e| SignError::Malformed(e.to_string()))?;
    Ok(embed(&p.unsigned, signature))
}

/// `artifact` with the signatures of every `detached` signature added to
/// its signature section (an embedded one, if any, is kept): how signatures
/// fetched from elsewhere (OCI referrers) travel into an import. Each
/// signature appears once.
pub fn combine(artifact: &[u8], detached: &[Vec<u8>]) -> Result<Vec<u8>, SignError> {
    let p = parts(artifact)?;
    let parse = |payload: &[u8]| {
        wasmsign2::SignatureData::deserialize(payload)
            .map_err(|e| SignError::Malformed(e.to_string()))
    };
    let mut data = match p.signature {
        Some(payload) => parse(payload)?,
        None => match detached.first() {
            Some(first) => parse(first)?,
            None => return Ok(artifact.to_vec()),
        },
    };
    let rest = if p.signature.is_some() {
        detached
    } else {
        &detached[1..]
    };
    for payload in rest {
        let more = parse(payload)?;
        if more.specification_version != data.specification_version
            || more.content_type != data.content_type
            || more.hash_function != data.hash_function
        {
            return Err(SignError::Malformed(
                "signatures of different format versions".into(),
            ));
        }
        for set in more.signed_hashes_set {
            match data
                .signed_hashes_set
                .iter_mut()
                .find(|s| s.hashes == set.hashes)
            {
                Some(existing) => {
                    for sig in set.signatures {
                        if !existing.signatures.contains(&sig) {
                            existing.signatures.push(sig);
                        }
                    }
                }
                None => data.signed_hashes_set.push(set),
            }
        }
    }
    let payload = data
        .serialize()
        .map_err(|e| SignError::Malformed(e.to_string()))?;
    parse(&payload)?;
    Ok(embed(&p.unsigned, &payload))
}

/// Signs `artifact` with `key`, adding to the signatures it carries (or to
/// `detached_so_far`, a detached signature to extend). `detached`: return
/// the artifact without a signature section and the signature on its own.
pub fn sign(
    artifact: &[u8],
    key: &crate::SigningKey,
    detached: bool,
    detached_so_far: Option<&[u8]>,
) -> Result<Signed, SignError> {
    let p = parts(artifact)?;
    let previous = match (p.signature, detached_so_far) {
        (Some(_), Some(_)) => return Err(SignError::Both),
        (a, b) => a.or(b),
    };
    let mut module = Module::deserialize(&mut Cursor::new(&p.unsigned))
        .map_err(|e| SignError::NotWasm(e.to_string()))?;
    if let Some(previous) = previous {
        wasmsign2::SignatureData::deserialize(previous)
            .map_err(|e| SignError::Malformed(e.to_string()))?;
        module = module
            .attach_signature(previous)
            .map_err(|e| SignError::Malformed(e.to_string()))?;
    }
    let key_id = key.id().as_bytes().to_vec();
    let (_, signature) = key
        .secret()
        .sign_multi(module, Some(&key_id), true, false)
        .map_err(|e| match e {
            wasmsign2::WSError::DuplicateSignature => {
                SignError::AlreadySigned(key.id().to_string())
            }
            other => SignError::Malformed(other.to_string()),
        })?;
    // The library hashed its re-encoding of the sections; check that the
    // signature covers the bytes as they are.
    key.public_key()
        .verify(&mut Cursor::new(&p.unsigned), Some(&signature))
        .map_err(|_| SignError::DoesNotVerify)?;
    tracing::debug!(key = key.id(), detached, "signed an artifact");
    let bytes = if detached {
        p.unsigned
    } else {
        embed(&p.unsigned, &signature)
    };
    Ok(Signed {
        bytes,
        signature,
        key_id: key.id().to_string(),
    })
}

/// The key ids written in the signatures `artifact` carries (and in
/// `detached`), in order, each once: hints of who signed, not verified.
pub fn signer_key_ids(artifact: &[u8], detached: Option<&[u8]>) -> Result<Vec<String>, SignError> {
    let p = parts(artifact)?;
    let mut out: Vec<String> = Vec::new();
    for payload in [p.signature, detached].into_iter().flatten() {
        let data = wasmsign2::SignatureData::deserialize(payload)
            .map_err(|e| SignError::Malformed(e.to_string()))?;
        for set in &data.signed_hashes_set {
            for s in &set.signatures {
                let id = match &s.key_id {
                    Some(id) => String::from_utf8_lossy(id).into_owned(),
                    None => "(no key id)".to_string(),
                };
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
    }
    Ok(out)
}

/// Whether the library's view of `bytes` puts a signature section first
/// (used by tests to check the embedded form is the format's).
#[cfg(test)]
pub(crate) fn library_sees_signature(bytes: &[u8]) -> bool {
    use wasmsign2::SectionLike;
    Module::deserialize(&mut Cursor::new(bytes))
        .ok()
        .and_then(|m| {
            m.sections
                .first()
                .map(|s| s.is_signature_header() && s.id() == wasmsign2::SectionId::CustomSection)
        })
        .unwrap_or(false)
}
