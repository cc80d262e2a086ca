//! Properties of the static check's lexer: total, and a blocked call after
//! a comment is found.

use proptest::prelude::*;
use temper::static_check;

use super::{bounded, config, text};

/// JavaScript-ish token soup for the static check's lexer.
fn js_soup() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("eval"),
        Just("Function"),
        Just("fs"),
        Just("."),
        Just("readFile"),
        Just("writeFile"),
        Just("import"),
        Just("require"),
        Just("fetch"),
        Just("crypto"),
        Just("globalThis"),
        Just("constructor"),
        Just("("),
        Just(")"),
        Just("["),
        Just("]"),
        Just("{"),
        Just("}"),
        Just("`"),
        Just("${"),
        Just("'"),
        Just("\""),
        Just("/"),
        Just("*"),
        Just("//"),
        Just("/*"),
        Just("*/"),
        Just("\\"),
        Just("\n"),
        Just(" "),
        Just("=>"),
        Just("#"),
        Just("<!--"),
        Just("-->"),
        Just("x"),
        Just("1e3"),
        Just("0x"),
        Just("\u{2028}"),
        Just("é"),
    ];
    prop_oneof![
        text(),
        prop::collection::vec(token, 0..64).prop_map(|t| t.concat()),
    ]
}

// ---- static check -----------------------------------------------------------------

proptest! {
    #![proptest_config(config(1000))]

    /// The lexer never panics and never hangs; every finding has a position
    /// inside the source.
    #[test]
    fn the_static_check_is_total(source in js_soup()) {
        let lines = source.split('\n').count() as u32 + source.matches('\u{2028}').count() as u32 + source.matches('\r').count() as u32;
        if let Err(e) = bounded("static_check::check", || static_check::check(&source)) {
            for b in &e.0 {
                prop_assert!(b.line >= 1 && b.line <= lines, "{b:?} in {source:?}");
                prop_assert!(b.column >= 1, "{b:?}");
            }
        }
        let _ = bounded("used_capabilities", || static_check::used_capabilities(&source));
    }

    /// A blocked call after any complete line comment is still found.
    #[test]
    fn a_blocked_call_after_a_comment_is_found(comment in "[^\n\r\u{2028}\u{2029}]{0,40}") {
        let source = format!("// {comment}\neval('1');\n");
        let err = static_check::check(&source).expect_err("eval must be refused");
        prop_assert!(err.0.iter().any(|b| b.api == "eval" && b.line == 2), "{err:?}");
    }
}
