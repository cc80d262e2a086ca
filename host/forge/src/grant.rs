//! What a caller may reach: its [`CallerGrant`], carried by its
//! [`ForgeContext`](crate::ForgeContext) and checked by the forge on every
//! path a call takes.
//!
//! # A grant narrows at every depth
//!
//! A grant is the caller's tiers ([`Access`]: session, agent, shared) and
//! its narrowings of the hub tools ([`HubNarrowing`]: a static token's
//! `tools`, a JWT's scopes' `tools`, an embedder's `tools` option), on top
//! of the host policy (`[tools] allow`: a hub tool the policy does not list
//! is no tool of the forge at all). Every tool call made during a call is
//! checked against the grant of the call's **outermost** caller, at any
//! depth: a forged tool's `callTool`/`tools.*`, a compose step, a
//! `run_code` run's calls, a nested compose or code tool, a bundle's. So a
//! caller reaches through a tool only what it could call itself:
//!
//! - a **hub tool**, reached by name (a compose step or a call pinned to a
//!   host-native tool), must be allowed by every narrowing of the grant;
//! - a **forged tool** reached by name (a top-level call, a `run_code`
//!   run's tools, a forge's steps and `tool:` grants) must be in a tier the
//!   grant allows;
//! - a **forged tool pinned by blake3** (a compose step, a code tool's
//!   call) stays pinned: it runs the artifact fixed at forge time, never a
//!   wider one, whatever tier it sits in now (the caller may call the tool
//!   that pins it). Its own callees are checked against the caller's grant
//!   again, so a pin is never wider than the caller either.
//!
//! Host-native tools the embedder registered itself (not from the hub) are
//! the host's, callable by every caller: narrowings name hub tools.
//!
//! # Where it is checked
//!
//! In the forge, on the one path every call takes, whatever the transport
//! (MCP over stdio or HTTP, the Python and Node packages, an embedder):
//! [`Forge::invoke`](crate::Forge::invoke) and
//! [`Forge::run_code`](crate::Forge::run_code) put the caller's grant in
//! scope (a tokio task-local: nested calls run in the caller's task), and
//! every nested path reads it there: `PinnedCaller` (code mode), the compose
//! steps linked per call, the TEST stage's runs. A nested call with no grant
//! in scope is refused ([`GrantError::NoGrant`]): the check fails closed.
//! A top-level call made while a grant is in scope (an embedder's native
//! tool calling back into the forge) gets the intersection of both grants:
//! never wider than its caller's.
//!
//! VALIDATE applies the forging caller's grant too: a compose step or a
//! `tool:NAME` grant naming a tool outside it is refused as an unknown tool
//! would be.
//!
//! # What a refusal says
//!
//! A hidden tool answers like a nonexistent one. A name called by name
//! that no narrowing allows is refused the same way whether or not the hub
//! has such a tool ([`GrantError::OutsideGrant`]: "is not callable by this
//! caller (outside its grant: token's tools narrowing)"): the caller
//! learns which of its own narrowings stands in the way, never whether the
//! tool exists. A forged tool in a tier the grant does not allow is not
//! found, as a tool that does not exist.

use std::future::Future;
use std::sync::Arc;

use temper_policy::ToolAllow;
use temper_store::Tier;

/// The tiers a caller may use. `session`: forge, and call session tools;
/// `agent`: call its own agent-tier tools and promote session tools to
/// them; `shared`: call shared tools. A tool in a tier the caller may not
/// use is neither listed nor callable, and asking for it gets the same
/// answer as for a tool that does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Access {
    /// May use the session tier.
    pub session: bool,
    /// May use its agent tier.
    pub agent: bool,
    /// May use the shared tier.
    pub shared: bool,
}

impl Access {
    /// Every tier (stdio, HTTP on loopback without tokens, an embedder).
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

    /// The tiers both allow.
    pub fn and(self, other: Access) -> Access {
        Access {
            session: self.session && other.session,
            agent: self.agent && other.agent,
            shared: self.shared && other.shared,
        }
    }
}

impl Default for Access {
    fn default() -> Self {
        Access::ALL
    }
}

/// Who narrowed the hub tools: named in a refusal, so the caller knows
/// which of its own settings stands in the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NarrowedBy {
    /// A static token's `tools` (the tokens file).
    Token,
    /// A JWT's scopes' `tools` (`[scopes."NAME"] tools`).
    Scopes,
    /// The embedder's `tools` option (the Python and Node packages).
    Context,
}

impl NarrowedBy {
    /// How a refusal names it: `token's tools narrowing`.
    pub fn as_str(self) -> &'static str {
        match self {
            NarrowedBy::Token => "token's tools narrowing",
            NarrowedBy::Scopes => "token's scopes' tools narrowing",
            NarrowedBy::Context => "context's tools narrowing",
        }
    }
}

impl std::fmt::Display for NarrowedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One narrowing of the hub tools: the names or globs it allows, and who
/// set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubNarrowing {
    /// The hub tools it allows.
    pub allow: ToolAllow,
    /// Who set it.
    pub by: NarrowedBy,
}

impl HubNarrowing {
    /// `allow`, set by `by`.
    pub fn new(allow: ToolAllow, by: NarrowedBy) -> Self {
        Self { allow, by }
    }
}

/// A caller's grant (see the module docs): its tiers and its narrowings of
/// the hub tools. Cheap to clone. The default is unrestricted (every tier,
/// no narrowing: the host policy alone).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerGrant {
    tiers: Access,
    /// Every narrowing a hub tool must pass (empty: none).
    hub: Arc<[HubNarrowing]>,
}

impl Default for CallerGrant {
    fn default() -> Self {
        Self::unrestricted()
    }
}

impl CallerGrant {
    /// Every tier, the hub tools the host policy allows.
    pub fn unrestricted() -> Self {
        Self::new(Access::ALL)
    }

    /// `tiers`, the hub tools the host policy allows.
    pub fn new(tiers: Access) -> Self {
        Self {
            tiers,
            hub: Arc::from(Vec::new()),
        }
    }

    /// This grant, its tiers narrowed to those `tiers` also allows.
    pub fn with_tiers(mut self, tiers: Access) -> Self {
        self.tiers = self.tiers.and(tiers);
        self
    }

    /// This grant, its hub tools narrowed by `narrowing` too (a hub tool
    /// must pass every narrowing); `None` leaves it.
    pub fn narrowed(mut self, narrowing: Option<HubNarrowing>) -> Self {
        if let Some(n) = narrowing
            && !self.hub.contains(&n)
        {
            let mut all = self.hub.to_vec();
            all.push(n);
            self.hub = Arc::from(all);
        }
        self
    }

    /// What both grants allow: the tiers both allow, both grants'
    /// narrowings.
    pub fn intersect(&self, other: &CallerGrant) -> CallerGrant {
        let mut out = self.clone().with_tiers(other.tiers);
        for n in other.hub.iter() {
            out = out.narrowed(Some(n.clone()));
        }
        out
    }

    /// The tiers this grant allows.
    pub fn tiers(&self) -> Access {
        self.tiers
    }

    /// Whether a tool in `tier` may be called (or listed).
    pub fn allows_tier(&self, tier: Tier) -> bool {
        self.tiers.allows(tier)
    }

    /// The narrowings of the hub tools (empty: none).
    pub fn narrowings(&self) -> &[HubNarrowing] {
        &self.hub
    }

    /// Whether the hub tools are narrowed at all.
    pub fn is_narrowed(&self) -> bool {
        !self.hub.is_empty()
    }

    /// Whether every tier is allowed and nothing is narrowed.
    pub fn is_unrestricted(&self) -> bool {
        self.tiers == Access::ALL && self.hub.is_empty()
    }

    /// Whether every narrowing allows the hub tool name `name`.
    pub fn allows_hub(&self, name: &str) -> bool {
        self.hub_refusal(name).is_none()
    }

    /// The first narrowing that does not allow the hub tool name `name`.
    pub fn hub_refusal(&self, name: &str) -> Option<NarrowedBy> {
        self.hub
            .iter()
            .find(|n| !n.allow.allows(name))
            .map(|n| n.by)
    }
}

/// A call refused by its caller's grant. Worded so that it does not tell
/// whether the tool exists (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// The tool is a name this caller's grant does not allow.
    #[error(
        "tool {tool:?} is not callable by this caller (outside its grant: {by}); only the tools it lists are callable, through other tools too"
    )]
    OutsideGrant {
        /// The tool called.
        tool: String,
        /// The narrowing that refuses it.
        by: NarrowedBy,
    },
    /// A nested call ran with no caller's grant in scope: refused (the
    /// check fails closed). A host bug: calls start at `Forge::invoke` or
    /// `Forge::run_code`.
    #[error(
        "tool {tool:?} is not callable here: the call carries no caller's grant (the host must start calls at Forge::invoke or Forge::run_code)"
    )]
    NoGrant {
        /// The tool called.
        tool: String,
    },
}

impl GrantError {
    /// The tool refused.
    pub fn tool(&self) -> &str {
        match self {
            GrantError::OutsideGrant { tool, .. } | GrantError::NoGrant { tool } => tool,
        }
    }
}

/// Whether `grant` lets a call reach the host-native tool `name` by name
/// (`tool`: the one registered under it, if any). A hub tool must pass
/// every narrowing; the embedder's own native tools are narrowed by none. A
/// name no narrowing allows is refused whether or not there is such a
/// tool, so the refusal tells nothing of what exists.
pub(crate) fn check_native(
    grant: &CallerGrant,
    name: &str,
    tool: Option<&crate::native::NativeTool>,
) -> Result<(), GrantError> {
    match grant.hub_refusal(name) {
        None => Ok(()),
        Some(_) if tool.is_some_and(|t| t.hub_source.is_none()) => Ok(()),
        Some(by) => Err(GrantError::OutsideGrant {
            tool: name.to_owned(),
            by,
        }),
    }
}

tokio::task_local! {
    /// The grant of the outermost call running in this task.
    static GRANT: CallerGrant;
}

/// The grant of the call running in this task, if any.
pub(crate) fn in_scope() -> Option<CallerGrant> {
    GRANT.try_with(Clone::clone).ok()
}

/// The grant of a nested call to `tool`: the one in scope, or a refusal
/// (fail closed).
pub(crate) fn nested(tool: &str) -> Result<CallerGrant, GrantError> {
    in_scope().ok_or_else(|| GrantError::NoGrant {
        tool: tool.to_owned(),
    })
}

/// The grant a top-level call with `own` runs under: `own`, or, when it
/// is made during another call (an embedder's tool calling back), `own`
/// within that call's grant.
pub(crate) fn effective(own: &CallerGrant) -> CallerGrant {
    match in_scope() {
        Some(outer) => outer.intersect(own),
        None => own.clone(),
    }
}

/// Runs `fut` with `grant` in scope for every call it makes.
pub(crate) async fn scoped<F: Future>(grant: CallerGrant, fut: F) -> F::Output {
    GRANT.scope(grant, fut).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(globs: &[&str]) -> ToolAllow {
        ToolAllow::new(globs.iter().map(|g| g.to_string()).collect()).unwrap()
    }

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

    #[test]
    fn narrowings_stack_and_name_who_refuses() {
        let g = CallerGrant::unrestricted();
        assert!(g.is_unrestricted() && g.allows_hub("nice.admin"));
        let g = g.narrowed(Some(HubNarrowing::new(
            allow(&["nice.*"]),
            NarrowedBy::Token,
        )));
        assert!(g.allows_hub("nice.admin") && !g.is_unrestricted());
        assert_eq!(g.hub_refusal("other.x"), Some(NarrowedBy::Token));
        let g = g.narrowed(Some(HubNarrowing::new(
            allow(&["nice.echo"]),
            NarrowedBy::Context,
        )));
        assert!(g.allows_hub("nice.echo"));
        assert_eq!(g.hub_refusal("nice.admin"), Some(NarrowedBy::Context));
        // The same narrowing twice is kept once.
        let again = g.clone().narrowed(Some(g.narrowings()[0].clone()));
        assert_eq!(again.narrowings().len(), 2);
    }

    #[test]
    fn an_intersection_is_never_wider_than_either() {
        let shared_only = CallerGrant::new(Access {
            session: false,
            agent: false,
            shared: true,
        });
        let narrowed = CallerGrant::unrestricted().narrowed(Some(HubNarrowing::new(
            allow(&["nice.echo"]),
            NarrowedBy::Scopes,
        )));
        for g in [
            shared_only.intersect(&narrowed),
            narrowed.intersect(&shared_only),
        ] {
            assert!(!g.allows_tier(Tier::Session) && !g.allows_tier(Tier::Agent));
            assert!(g.allows_tier(Tier::Shared));
            assert!(!g.allows_hub("nice.admin") && g.allows_hub("nice.echo"));
        }
    }

    #[test]
    fn the_refusal_names_the_tool_and_the_narrowing_only() {
        let e = GrantError::OutsideGrant {
            tool: "nice.admin".into(),
            by: NarrowedBy::Token,
        };
        let text = e.to_string();
        assert!(
            text.starts_with(
                "tool \"nice.admin\" is not callable by this caller (outside its grant: token's tools narrowing)"
            ),
            "{text}"
        );
        // Nothing that would tell a hub tool from a missing one.
        for word in ["hub", "exist", "unknown", "upstream"] {
            assert!(!text.contains(word), "{word} in {text}");
        }
    }

    fn native(name: &str, hub: bool) -> crate::native::NativeTool {
        let any = serde_json::json!({});
        crate::native::NativeTool {
            spec: crate::native::NativeToolSpec {
                name: name.into(),
                description: String::new(),
                input_schema: any.clone(),
                output_schema: any.clone(),
            },
            schemas: crate::schema::ToolSchemas::compile(&any, &any).unwrap(),
            call: Arc::new(|v| Box::pin(async move { Ok(v) })),
            hub_source: hub.then(|| "nice".to_string()),
            live_in_tests: true,
            own_timeout: None,
            checks_output: false,
            checks_input: false,
            call_output: None,
        }
    }

    #[test]
    fn a_narrowing_hides_hub_tools_and_missing_names_alike() {
        let grant = CallerGrant::unrestricted().narrowed(Some(HubNarrowing::new(
            allow(&["nice.echo"]),
            NarrowedBy::Token,
        )));
        let admin = native("nice.admin", true);
        let echo = native("nice.echo", true);
        let own = native("local_clock", false);
        assert!(check_native(&grant, "nice.echo", Some(&echo)).is_ok());
        // The embedder's own tools are narrowed by no token.
        assert!(check_native(&grant, "local_clock", Some(&own)).is_ok());
        // A hidden hub tool and a name that is no tool get the same answer.
        let hidden = check_native(&grant, "nice.admin", Some(&admin)).unwrap_err();
        let missing = check_native(&grant, "nice.nothing", None).unwrap_err();
        assert_eq!(
            hidden.to_string().replace("nice.admin", "X"),
            missing.to_string().replace("nice.nothing", "X")
        );
        assert_eq!(
            hidden,
            GrantError::OutsideGrant {
                tool: "nice.admin".into(),
                by: NarrowedBy::Token
            }
        );
        // Unnarrowed: every hub tool passes.
        assert!(check_native(&CallerGrant::unrestricted(), "nice.admin", Some(&admin)).is_ok());
    }

    #[tokio::test]
    async fn nested_calls_fail_closed_without_a_grant_and_see_the_outermost() {
        assert!(matches!(nested("x"), Err(GrantError::NoGrant { .. })));
        let narrowed = CallerGrant::unrestricted().narrowed(Some(HubNarrowing::new(
            allow(&["nice.echo"]),
            NarrowedBy::Token,
        )));
        let seen = scoped(narrowed.clone(), async {
            // A top-level call made inside (an embedder's tool calling
            // back) with an unrestricted context stays narrowed.
            let inner = effective(&CallerGrant::unrestricted());
            (nested("x").unwrap(), inner)
        })
        .await;
        assert_eq!(seen.0, narrowed);
        assert!(!seen.1.allows_hub("nice.admin"));
    }
}
