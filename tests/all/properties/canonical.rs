//! Properties of the canonical JSON: it round-trips.

use proptest::prelude::*;
use serde_json::Value;
use temper::canonical_json::canonical_json;

use super::{config, json_value};

// ---- canonical JSON ---------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    /// Canonical JSON reads back to the same value, is a fixed point, has
    /// sorted keys and no whitespace outside strings.
    #[test]
    fn canonical_json_round_trips(v in json_value()) {
        let text = canonical_json(&v);
        let back: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        prop_assert_eq!(&back, &v, "{}", text);
        prop_assert_eq!(canonical_json(&back), text.clone());
        let reserialized = serde_json::to_string(&back).unwrap();
        prop_assert_eq!(reserialized.len(), text.len(), "no extra whitespace");
        fn sorted(v: &Value) -> bool {
            match v {
                Value::Object(m) => {
                    let keys: Vec<&String> = m.keys().collect();
                    keys.windows(2).all(|w| w[0] <= w[1]) && m.values().all(sorted)
                }
                Value::Array(a) => a.iter().all(sorted),
                _ => true,
            }
        }
        let ordered: Value = serde_json::from_str(&text).unwrap();
        prop_assert!(sorted(&ordered), "{}", text);
    }
}
