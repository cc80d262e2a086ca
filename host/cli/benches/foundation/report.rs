//! The foundation bench's report: its rows, goals and Markdown, and the
//! small measuring helpers (percentiles, RSS, CPU model) it uses.

use std::fmt::Write as _;
use std::time::Duration;

#[derive(Clone, Copy)]
pub(crate) enum Goal {
    None,
    MaxDuration(Duration),
    MaxBytes(usize),
}

pub(crate) struct Row {
    pub(crate) section: &'static str,
    pub(crate) name: String,
    pub(crate) value: String,
    pub(crate) goal: String,
    pub(crate) status: Option<bool>,
}

#[derive(Default)]
pub(crate) struct Report {
    pub(crate) rows: Vec<Row>,
    pub(crate) notes: Vec<String>,
}

impl Report {
    pub(crate) fn add(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        value: String,
        goal: Goal,
        pass: Option<bool>,
    ) {
        let goal_text = match goal {
            Goal::None => String::new(),
            Goal::MaxDuration(d) => format!("≤ {}", fmt_dur(d)),
            Goal::MaxBytes(b) => format!("≤ {} bytes", group(b as u64)),
        };
        let row = Row {
            section,
            name: name.into(),
            value,
            goal: goal_text,
            status: pass,
        };
        let suffix = match row.status {
            Some(true) => format!("   (goal {}: PASS)", row.goal),
            Some(false) => format!("   (goal {}: MISS)", row.goal),
            None => String::new(),
        };
        println!("  {:<46} {:>16}{}", row.name, row.value, suffix);
        self.rows.push(row);
    }

    pub(crate) fn duration(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        d: Duration,
        goal: Goal,
    ) {
        let pass = match goal {
            Goal::MaxDuration(g) => Some(d <= g),
            _ => None,
        };
        self.add(section, name, fmt_dur(d), goal, pass);
    }

    pub(crate) fn bytes(
        &mut self,
        section: &'static str,
        name: impl Into<String>,
        b: usize,
        goal: Goal,
    ) {
        let pass = match goal {
            Goal::MaxBytes(g) => Some(b <= g),
            _ => None,
        };
        let value = format!("{} bytes", group(b as u64));
        self.add(section, name, value, goal, pass);
    }

    pub(crate) fn info(&mut self, section: &'static str, name: impl Into<String>, value: String) {
        self.add(section, name, value, Goal::None, None);
    }

    pub(crate) fn note(&mut self, text: String) {
        println!("  note: {text}");
        self.notes.push(text);
    }

    pub(crate) fn markdown(&self, header: &str) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# Temper foundation benchmark\n\n{header}\n");
        let mut section = "";
        for row in &self.rows {
            if row.section != section {
                section = row.section;
                let _ = writeln!(
                    md,
                    "\n## {section}\n\n| Figure | Value | Goal | Result |\n|---|---:|---|---|"
                );
            }
            let status = match row.status {
                Some(true) => "PASS",
                Some(false) => "**MISS**",
                None => "",
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} |",
                row.name, row.value, row.goal, status
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(md, "\n## Notes\n");
            for note in &self.notes {
                let _ = writeln!(md, "- {note}");
            }
        }
        md
    }
}

pub(crate) fn section(title: &str) {
    println!("\n{title}");
}

pub(crate) fn fmt_dur(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1_000_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// `1234567` → `1,234,567`.
pub(crate) fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Nearest-rank percentile of sorted samples.
pub(crate) fn pct(sorted: &[Duration], p: f64) -> Duration {
    assert!(!sorted.is_empty());
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

pub(crate) fn mean(v: &[Duration]) -> Duration {
    v.iter().sum::<Duration>() / v.len() as u32
}

/// A `/proc/self/status` field in KiB (`VmRSS`, `VmHWM`).
pub(crate) fn proc_status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim().trim_end_matches("kB").trim().parse().ok()
        })
        .unwrap_or(0)
}

pub(crate) fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}
