//! Unit tests of the per-call store state: the console buffer's bound, the
//! memory limiter, the fixed switch and the deterministic random streams.

use super::*;

#[test]
fn console_keeps_lines_up_to_the_byte_limit_then_counts_the_dropped() {
    let mut console = ConsoleBuffer::new(10);
    console.push("info", "12345".into());
    console.push("warn", "6789".into());
    // 9 bytes kept; 2 more would pass the limit of 10.
    console.push("info", "ab".into());
    console.push("error", "c".into());
    let lines = console.into_lines();
    let texts: Vec<&str> = lines.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(&texts[..3], ["12345", "6789", "c"]);
    assert_eq!(lines[3].level, "warn");
    assert_eq!(
        lines[3].message,
        "[temper: 1 console line(s) dropped over the 10-byte limit]"
    );
}

#[test]
fn console_without_drops_adds_no_line() {
    let mut console = ConsoleBuffer::new(100);
    console.push("debug", "x".into());
    assert_eq!(
        console.into_lines(),
        vec![LogLine {
            level: "debug",
            message: "x".into()
        }]
    );
}

#[test]
fn memory_cap_refuses_growth_past_the_limit_and_remembers_it() {
    let mut cap = MemoryCap::new(1 << 20);
    assert!(cap.memory_growing(0, 1 << 20, None).unwrap());
    assert!(!cap.hit, "growth to exactly the cap is allowed");
    assert!(!cap.memory_growing(1 << 20, (1 << 20) + 1, None).unwrap());
    assert!(cap.hit);
    // Tables are bounded too.
    assert!(cap.table_growing(0, 1 << 20, None).unwrap());
    assert!(!cap.table_growing(0, (1 << 20) + 1, None).unwrap());
}

#[test]
fn fixed_switch_is_shared_between_clones() {
    let switch = FixedSwitch::default();
    let other = switch.clone();
    assert!(!other.is_fixed());
    switch.set_fixed(true);
    assert!(other.is_fixed());
    other.set_fixed(false);
    assert!(!switch.is_fixed());
}

#[test]
fn deterministic_streams_differ_by_stream_and_seed_and_repeat() {
    assert_eq!(stream_seed(7, 1), stream_seed(7, 1));
    assert_ne!(stream_seed(7, 1), stream_seed(7, 2));
    assert_ne!(stream_seed(7, 1), stream_seed(8, 1));
    let d = Determinism {
        seed: 42,
        ..Determinism::default()
    };
    assert!(deterministic_monotonic(&d) < 1 << 62);
}
