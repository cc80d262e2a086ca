//! What a policy grants, said to an agent: the lines of `forge_tool`'s
//! description, and how each capability is granted by the host's operator
//! (the only one who can). The texts follow one rule: a refusal names what
//! was refused and what to do next; a listing names what is there and what
//! is not. Lists that grow with the policy are capped ([`MAX_LISTED`]).

use crate::{Capability, HostPolicy};

/// Most domain rules or directories named in one listing; past it, `and N
/// more`.
pub const MAX_LISTED: usize = 10;

impl Capability {
    /// The JavaScript API this capability unlocks, as an agent writes it.
    pub fn js_api(self) -> &'static str {
        match self {
            Capability::Fetch => "`fetch(url, init)` (Headers, Request, Response)",
            Capability::FsReadFile => {
                "`fs.readFile(path, encoding)`, `fs.readFileSync`, `fs.promises.readFile`"
            }
            Capability::Crypto => {
                "`crypto.createHash`, `crypto.createHmac`, `crypto.randomBytes`, `crypto.getRandomValues`, `crypto.randomUUID`"
            }
        }
    }

    /// How the host's operator grants this capability: the `temper` flag
    /// and the policy-file key.
    pub fn operator_grant(self) -> &'static str {
        match self {
            Capability::Fetch => {
                "the flag --allow-net=DOMAINS, or \"fetch\" in the policy file's `allow` with the domains in [fetch] domains"
            }
            Capability::FsReadFile => {
                "the flag --allow-read=DIR[:/GUEST], or \"fs.readFile\" in the policy file's `allow` with a [[read]] directory"
            }
            Capability::Crypto => {
                "the flag --allow-crypto, or \"crypto\" in the policy file's `allow`"
            }
        }
    }
}

/// `items` joined by `, `, the first [`MAX_LISTED`] only, then `and N
/// more`; `none` when empty.
pub fn capped_list<'a>(items: impl ExactSizeIterator<Item = &'a str>) -> String {
    let total = items.len();
    if total == 0 {
        return "none".into();
    }
    let mut out = items.take(MAX_LISTED).collect::<Vec<_>>().join(", ");
    if total > MAX_LISTED {
        out.push_str(&format!(" and {} more", total - MAX_LISTED));
    }
    out
}

impl HostPolicy {
    /// The guest directories `fs.readFile` may read (`/data`, ...), capped
    /// ([`capped_list`]).
    pub fn granted_dirs(&self) -> String {
        capped_list(self.read_dirs.iter().map(|d| d.guest.as_str()))
    }

    /// The domain rules `fetch` may reach, as written, capped
    /// ([`capped_list`]).
    pub fn granted_domains(&self) -> String {
        let rules: Vec<String> = self.fetch.rules.iter().map(|r| r.to_string()).collect();
        capped_list(rules.iter().map(String::as_str))
    }

    /// One line per capability: what the host allows (the API, the
    /// directories, the domains) and what it does not (and who can change
    /// that). Bounded by the policy's size, capped per list.
    pub fn capability_lines(&self) -> Vec<String> {
        Capability::ALL
            .iter()
            .map(|&cap| {
                let name = cap.as_str();
                if !self.allowed.contains(&cap) {
                    return format!(
                        "- \"{name}\": NOT allowed by this host ({}); only its operator can allow it",
                        cap.js_api()
                    );
                }
                let scope = match cap {
                    Capability::Fetch => format!("; domains: {}", self.granted_domains()),
                    Capability::FsReadFile => {
                        format!("; directories (read-only): {}", self.granted_dirs())
                    }
                    Capability::Crypto => String::new(),
                };
                format!("- \"{name}\": allowed: {}{scope}", cap.js_api())
            })
            .collect()
    }
}

impl HostPolicy {
    /// What code-mode runs (`run_code`) may use themselves, from `[run_code]
    /// allow`, and where the rest is: in the tools they call.
    pub fn run_code_capabilities(&self) -> String {
        let granted: Vec<Capability> = Capability::ALL
            .into_iter()
            .filter(|c| self.run_code.iter().any(|n| n == c.as_str()))
            .collect();
        let others: Vec<&str> = Capability::ALL
            .into_iter()
            .filter(|c| !granted.contains(c))
            .map(Capability::as_str)
            .collect();
        let mut out = if granted.is_empty() {
            "The code itself is granted no capability on this host (its policy's [run_code] allow \
             is empty)"
                .to_string()
        } else {
            let apis: Vec<String> = granted
                .iter()
                .map(|&c| match c {
                    Capability::Fetch => {
                        format!("{} to {}", c.js_api(), self.granted_domains())
                    }
                    Capability::FsReadFile => {
                        format!("{} under {}", c.js_api(), self.granted_dirs())
                    }
                    Capability::Crypto => c.js_api().to_string(),
                })
                .collect();
            format!(
                "The code itself may use (the host policy's [run_code] allow): {}",
                apis.join("; ")
            )
        };
        if !others.is_empty() {
            out.push_str(&format!(
                "; {} only through the tools it calls, each with its own grants",
                others.join(", ")
            ));
        }
        out.push('.');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_name_what_is_granted_and_what_is_not() {
        let policy = HostPolicy::deny_all()
            .with_allow_net("api.example.test,*.cdn.example.test")
            .unwrap()
            .with_allow_read("./data:/data")
            .unwrap();
        let lines = policy.capability_lines();
        assert_eq!(
            lines,
            [
                "- \"fetch\": allowed: `fetch(url, init)` (Headers, Request, Response); domains: api.example.test, *.cdn.example.test",
                "- \"fs.readFile\": allowed: `fs.readFile(path, encoding)`, `fs.readFileSync`, `fs.promises.readFile`; directories (read-only): /data",
                "- \"crypto\": NOT allowed by this host (`crypto.createHash`, `crypto.createHmac`, `crypto.randomBytes`, `crypto.getRandomValues`, `crypto.randomUUID`); only its operator can allow it",
            ]
        );
    }

    #[test]
    fn a_refusal_by_the_host_says_who_grants_and_how() {
        let err = HostPolicy::deny_all()
            .grants(&["crypto".to_string()])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "capability \"crypto\" is requested by the tool but not allowed by the host policy; \
             only the host's operator can allow it (the flag --allow-crypto, or \"crypto\" in the \
             policy file's `allow`); forge the tool without it, or ask the operator"
        );
    }

    #[test]
    fn run_code_capabilities_are_the_run_code_allow() {
        assert_eq!(
            HostPolicy::deny_all()
                .with_allow_crypto()
                .run_code_capabilities(),
            "The code itself is granted no capability on this host (its policy's [run_code] allow \
             is empty); fetch, fs.readFile, crypto only through the tools it calls, each with its \
             own grants."
        );
        let policy = HostPolicy::from_toml(
            "allow = [\"crypto\", \"fetch\"]\n[fetch]\ndomains = [\"api.example.test\"]\n\
             [run_code]\nallow = [\"crypto\", \"fetch\"]\n",
        )
        .unwrap();
        assert_eq!(
            policy.run_code_capabilities(),
            "The code itself may use (the host policy's [run_code] allow): `fetch(url, init)` \
             (Headers, Request, Response) to api.example.test; `crypto.createHash`, \
             `crypto.createHmac`, `crypto.randomBytes`, `crypto.getRandomValues`, \
             `crypto.randomUUID`; fs.readFile only through the tools it calls, each with its own \
             grants."
        );
    }

    #[test]
    fn long_lists_are_capped() {
        let many: Vec<String> = (0..25).map(|i| format!("h{i}.example.test")).collect();
        let policy = HostPolicy::deny_all()
            .with_allow_net(&many.join(","))
            .unwrap();
        assert_eq!(
            policy.granted_domains(),
            format!("{} and 15 more", many[..10].join(", "))
        );
        assert_eq!(HostPolicy::deny_all().granted_dirs(), "none");
    }
}
