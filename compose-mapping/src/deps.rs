//! Dependencies between compose tools: a compose tool may use another
//! compose tool as a step, and that must never loop back.

use std::collections::HashSet;

use thiserror::Error;

/// A compose tool reaches itself (or another tool reaches itself) through
/// its steps.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("compose cycle: {}", path.join(" -> "))]
pub struct CycleError {
    /// The chain of tools from the compose tool being checked to the tool
    /// that repeats; the last name appears earlier in the path too
    /// (`["a", "b", "a"]`, or `["a", "a"]` for a tool using itself).
    pub path: Vec<String>,
}

/// Checks that the compose tool `name`, whose steps call `step_tools`,
/// is not part of a cycle and does not reach one.
///
/// `lookup(tool)` returns the step tools of `tool` when it is a compose
/// tool and `None` otherwise (a sandbox tool, a host-native tool, or an
/// unknown name: whether every tool exists is checked elsewhere). `name`
/// itself is never looked up: `step_tools` stands for it, so a new version
/// of a registered compose tool is checked as it will be, not as it was.
/// Each tool is looked up at most once.
pub fn check_cycles<F>(name: &str, step_tools: &[String], lookup: F) -> Result<(), CycleError>
where
    F: Fn(&str) -> Option<Vec<String>>,
{
    let mut walk = Walk {
        lookup,
        path: Vec::new(),
        done: HashSet::new(),
    };
    walk.visit(name, step_tools)
}

struct Walk<F> {
    lookup: F,
    path: Vec<String>,
    /// Tools already shown to reach no cycle.
    done: HashSet<String>,
}

impl<F> Walk<F>
where
    F: Fn(&str) -> Option<Vec<String>>,
{
    fn visit(&mut self, tool: &str, children: &[String]) -> Result<(), CycleError> {
        self.path.push(tool.to_owned());
        for child in children {
            if self.path.iter().any(|p| p == child) {
                let mut path = self.path.clone();
                path.push(child.clone());
                return Err(CycleError { path });
            }
            if self.done.contains(child) {
                continue;
            }
            match (self.lookup)(child) {
                Some(grandchildren) => self.visit(child, &grandchildren)?,
                None => {
                    self.done.insert(child.clone());
                }
            }
        }
        self.path.pop();
        self.done.insert(tool.to_owned());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::collections::HashMap;

    fn registry(entries: &[(&str, &[&str])]) -> HashMap<String, Vec<String>> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    fn tools(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn check(
        name: &str,
        steps: &[&str],
        reg: &HashMap<String, Vec<String>>,
    ) -> Result<(), CycleError> {
        check_cycles(name, &tools(steps), |t| reg.get(t).cloned())
    }

    #[test]
    fn no_cycle() {
        let reg = registry(&[
            ("research", &["web_search", "generate_text"]),
            ("report", &["research", "generate_text"]),
        ]);
        check("weekly", &["report", "research", "http_request"], &reg).unwrap();
        check("plain", &["web_search"], &HashMap::new()).unwrap();
    }

    #[test]
    fn self_cycle() {
        let e = check("loop", &["web_search", "loop"], &HashMap::new()).unwrap_err();
        assert_eq!(e.path, tools(&["loop", "loop"]));
        assert_eq!(e.to_string(), "compose cycle: loop -> loop");
    }

    #[test]
    fn direct_cycle() {
        // `b` is registered using `a`; now `a` is forged using `b`.
        let reg = registry(&[("b", &["a"])]);
        let e = check("a", &["b"], &reg).unwrap_err();
        assert_eq!(e.to_string(), "compose cycle: a -> b -> a");
    }

    #[test]
    fn indirect_cycle() {
        let reg = registry(&[
            ("b", &["web_search", "c"]),
            ("c", &["generate_text", "d"]),
            ("d", &["a"]),
        ]);
        let e = check("a", &["http_request", "b"], &reg).unwrap_err();
        assert_eq!(e.to_string(), "compose cycle: a -> b -> c -> d -> a");
    }

    #[test]
    fn cycle_below_the_root() {
        let reg = registry(&[("b", &["c"]), ("c", &["b"])]);
        let e = check("a", &["b"], &reg).unwrap_err();
        assert_eq!(e.path, tools(&["a", "b", "c", "b"]));
    }

    #[test]
    fn the_root_uses_its_new_steps_not_the_registered_ones() {
        // The registered version of `a` used `b`; the new one does not.
        let reg = registry(&[("a", &["b"]), ("b", &["x"])]);
        check("a", &["b"], &reg).unwrap();
        let reg = registry(&[("a", &["web_search"]), ("b", &["a"])]);
        assert!(check("a", &["b"], &reg).is_err());
    }

    #[test]
    fn shared_dependencies_are_looked_up_once() {
        let reg = registry(&[("b", &["d"]), ("c", &["d"]), ("d", &["leaf"])]);
        let calls = Cell::new(0);
        check_cycles("a", &tools(&["b", "c", "d"]), |t| {
            calls.set(calls.get() + 1);
            reg.get(t).cloned()
        })
        .unwrap();
        // b, d, leaf, c: each once.
        assert_eq!(calls.get(), 4);
    }
}
