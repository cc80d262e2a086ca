//! `relay = ["elicitation", "sampling"]` of an `[upstream.NAME]` table:
//! which of the upstream's own requests Temper relays to its callers (and
//! declares the client capability for). Nothing by default.

use crate::upstream::RelayRequests;

/// The names `relay` takes.
const NAMES: [&str; 2] = ["elicitation", "sampling"];

/// The relay set `list` names; `Err(reason)` for an unknown or repeated
/// name.
pub(super) fn relay_requests(list: &[String]) -> Result<RelayRequests, String> {
    let mut set = RelayRequests::default();
    for name in list {
        let flag = match name.as_str() {
            "elicitation" => &mut set.elicitation,
            "sampling" => &mut set.sampling,
            other => {
                return Err(format!(
                    "\"{other}\" is not relayed: one of {}",
                    NAMES.join(", ")
                ));
            }
        };
        if *flag {
            return Err(format!("\"{name}\" is listed twice"));
        }
        *flag = true;
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relay_names_the_requests_and_nothing_else() {
        assert_eq!(relay_requests(&[]), Ok(RelayRequests::default()));
        let both = relay_requests(&["sampling".into(), "elicitation".into()]).unwrap();
        assert!(both.sampling && both.elicitation);
        let err = relay_requests(&["roots".into()]).unwrap_err();
        assert!(err.contains("\"roots\" is not relayed"), "{err}");
        let err = relay_requests(&["sampling".into(), "sampling".into()]).unwrap_err();
        assert!(err.contains("listed twice"), "{err}");
    }
}
