//! What a caller may use: the tiers a transport grants it (all of them on
//! stdio; a token's list over HTTP).

use temper_store::Tier;

/// The tiers a caller may use. `session`: forge, and call session tools;
/// `agent`: call its own agent-tier tools and promote session tools to
/// them; `shared`: call shared tools. A tool in a tier the caller may not
/// use is neither listed nor callable, and asking for it gets the same
/// answer as for a tool that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// May use the session tier.
    pub session: bool,
    /// May use its agent tier.
    pub agent: bool,
    /// May use the shared tier.
    pub shared: bool,
}

impl Access {
    /// Every tier (stdio, and HTTP on loopback without tokens).
    pub const ALL: Access = Access {
        session: true,
        agent: true,
        shared: true,
    };

    /// Whether `tier` is allowed.
    pub fn allows(&self, tier: Tier) -> bool {
        match tier {
            Tier::Session => self.session,
            Tier::Agent => self.agent,
            Tier::Shared => self.shared,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_allows_tiers() {
        let a = Access {
            session: true,
            agent: false,
            shared: true,
        };
        assert!(a.allows(Tier::Session) && a.allows(Tier::Shared));
        assert!(!a.allows(Tier::Agent));
        assert!(Access::ALL.allows(Tier::Agent));
    }
}
