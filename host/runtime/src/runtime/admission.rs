//! Admission of external component bytes: a gate (a trust policy, say)
//! that [`Runtime::load`] and [`Runtime::load_compiled`] ask before they
//! load bytes from outside. None by default (every valid component loads,
//! as before). An embedder loading bytes it has already admitted (its own
//! registry's) uses [`Runtime::load_admitted`].

use std::fmt;
use std::sync::Arc;

use super::Runtime;
use crate::error::LoadError;

/// Decides whether component bytes from outside may be loaded.
///
/// `temper-forge` implements it for the trust policy of `temper-sign`
/// (`temper::forge::TrustAdmission`): the runtime itself knows nothing of
/// signatures.
pub trait ArtifactAdmission: Send + Sync {
    /// `Ok` to load `bytes`; `Err` refuses them, with the reason (which
    /// names the rule and what is missing).
    fn admit(&self, bytes: &[u8]) -> Result<(), String>;
}

/// The gate a runtime was built with (cloneable, printable).
#[derive(Clone, Default)]
pub(crate) struct Admission(pub(crate) Option<Arc<dyn ArtifactAdmission>>);

impl fmt::Debug for Admission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Admission(gate)"
        } else {
            "Admission(none)"
        })
    }
}

impl Runtime {
    /// Asks the admission gate, if any, about `bytes`.
    pub(super) fn admit(&self, bytes: &[u8]) -> Result<(), LoadError> {
        match &self.inner.admission.0 {
            Some(gate) => gate
                .admit(bytes)
                .map_err(|reason| LoadError::Refused { reason }),
            None => Ok(()),
        }
    }
}
