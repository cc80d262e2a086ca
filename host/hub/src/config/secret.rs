//! [`Secret`]: a configured value that never prints.

use std::fmt;

/// A configured value that may be secret: an `env:` value or a header or
/// environment value of an upstream. `Debug` and `Display` print where it
/// came from (`env:NAME` or `<literal>`), never the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    origin: String,
    value: String,
}

impl Secret {
    /// A secret with a value and a printable origin.
    pub fn new(origin: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            origin: origin.into(),
            value: value.into(),
        }
    }

    /// The value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// Where it came from: `env:NAME` or `<literal>`.
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({}: [redacted])", self.origin)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} [redacted]", self.origin)
    }
}
