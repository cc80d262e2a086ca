//! Canonical JSON: keys sorted (by UTF-8 bytes), no whitespace, numbers and
//! strings as `serde_json` writes them. The one encoding that is hashed or
//! embedded: audit payloads (their hash chain), registry manifests and the
//! artifact manifest section, so the same value always gives the same bytes
//! whatever map order it was built in.

use serde_json::Value;

/// Canonical JSON text of `value`: keys sorted, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key.as_str()], out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_sorted_at_every_depth_and_no_whitespace() {
        let v = json!({"b": [1, {"z": null, "a": "x y"}], "a": true, "é": 1.5});
        assert_eq!(
            canonical_json(&v),
            r#"{"a":true,"b":[1,{"a":"x y","z":null}],"é":1.5}"#
        );
    }

    #[test]
    fn round_trips_to_an_equal_value() {
        let v = json!({"s": "quote \" and \\ and \n", "n": [0, -1, 1e300], "o": {}});
        let text = canonical_json(&v);
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, v);
        assert_eq!(canonical_json(&back), text);
    }
}
