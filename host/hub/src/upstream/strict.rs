//! An upstream's `structuredContent` read strictly, so that its own JSON
//! text can be passed on instead of being written again (the gateway path).
//!
//! The text is passed on only when it means exactly the value Temper
//! checked against the tool's output schema, for every reader:
//! - a duplicate key in an object is refused (readers disagree on which
//!   one counts: `serde_json` keeps the last, others the first);
//! - a number `serde_json` would change is not passed on as text: every
//!   number with a fraction or an exponent, and every integer beyond 64
//!   bits, is read as an `f64`, so then the value is written anew
//!   (`exact: false`) and the client gets the number that was checked;
//! - a string with an unpaired surrogate escape or invalid UTF-8, a value
//!   nested deeper than `serde_json`'s limit (128), or trailing text, is
//!   refused, as `serde_json` refuses it.
//!
//! The value is built by a visitor of its own rather than `Value`'s
//! `Deserialize` because that one keeps the last of duplicate keys without
//! a word, and says nothing of the numbers it read as `f64`.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

/// A `structuredContent` read strictly.
#[derive(Debug)]
pub(super) struct Checked {
    /// The value.
    pub(super) value: Value,
    /// Whether the text means exactly `value` for every reader (see the
    /// module docs): it may then be passed on as it came.
    pub(super) exact: bool,
}

/// Reads `raw` (the `structuredContent` of an upstream's result) as a
/// value; `Err` says what is wrong with it.
pub(super) fn read(raw: &RawValue) -> Result<Checked, String> {
    let exact = Cell::new(true);
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let value = Strict { exact: &exact }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| e.to_string())?;
    Ok(Checked {
        value,
        exact: exact.get(),
    })
}

/// Builds a [`Value`], refusing duplicate keys and noting in `exact`
/// (false) any number read as an `f64`.
#[derive(Clone, Copy)]
struct Strict<'a> {
    exact: &'a Cell<bool>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        self.exact.set(false);
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom(format!("number {v} is not finite")))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // One lookup: the key is moved into its entry, or refused.
            match object.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(self)?);
                }
                serde_json::map::Entry::Occupied(earlier) => {
                    let key = earlier.key();
                    return Err(de::Error::custom(format!("duplicate key {key:?}")));
                }
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).expect("JSON text")
    }

    #[test]
    fn exact_text_is_kept_with_its_value() {
        let text = r#"{"items": [{"id": 1, "name": "a\u0062", "neg": -5, "big": 18446744073709551615, "t": [true, null]}]}"#;
        let out = read(&raw(text)).unwrap();
        assert_eq!(
            out.value,
            json!({"items": [{"id": 1, "name": "ab", "neg": -5, "big": 18446744073709551615u64, "t": [true, null]}]})
        );
        assert!(out.exact);
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        for text in [
            r#"{"a": 1, "a": 2}"#,
            r#"{"x": [{"b": 1, "c": 2, "b": 1}]}"#,
            // The same key written two ways.
            r#"{"a": 1, "\u0061": 1}"#,
        ] {
            let e = read(&raw(text)).unwrap_err();
            assert!(e.contains("duplicate key"), "{text}: {e}");
        }
    }

    #[test]
    fn numbers_serde_json_would_change_are_written_anew() {
        for (text, value) in [
            (
                r#"{"n": 18446744073709551616}"#,
                json!({"n": 18446744073709551616.0}),
            ),
            (
                r#"{"n": -9223372036854775809}"#,
                json!({"n": -9223372036854775809.0}),
            ),
            (r#"{"n": 0.30000000000000000001}"#, json!({"n": 0.3})),
            (r#"{"n": 1e2}"#, json!({"n": 100.0})),
            (r#"{"n": 1.50}"#, json!({"n": 1.5})),
        ] {
            let out = read(&raw(text)).unwrap();
            assert_eq!(out.value, value, "{text}");
            assert!(!out.exact, "{text} passed on as text");
        }
        // Out of the f64 range: refused, as serde_json refuses it.
        assert!(read(&raw(r#"{"n": 1e400}"#)).is_err());
    }

    #[test]
    fn bad_strings_and_deep_nesting_are_refused() {
        // Unpaired surrogates.
        assert!(read(&raw(r#"{"s": "\ud800"}"#)).is_err());
        assert!(read(&raw(r#"{"s": "\udc00x"}"#)).is_err());
        assert!(read(&raw(r#"{"\ud800": 1}"#)).is_err());
        // A pair is one character.
        let out = read(&raw(r#"{"s": "\ud83d\ude00"}"#)).unwrap();
        assert_eq!(out.value, json!({"s": "\u{1F600}"}));
        assert!(out.exact);
        // Deeper than serde_json's recursion limit.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = read(&raw(&deep)).unwrap_err();
        assert!(e.contains("recursion limit"), "{e}");
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(read(&raw(&ok)).is_ok());
    }
}
