//! What a caller may use: the tiers a transport grants it (all of them on
//! stdio; a token's list over HTTP). The type is the forge's
//! ([`temper_forge::Access`]): a caller's tiers are part of its grant,
//! checked by the forge at every depth ([`temper_forge::grant`]).

pub use temper_forge::grant::Access;
