//! Calendar dates (UTC) for key expiry: `not_after = "2027-06-30"`.

use std::time::{SystemTime, UNIX_EPOCH};

/// A day of the proleptic Gregorian calendar, ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// The year, e.g. 2027.
    pub year: i32,
    /// 1..=12.
    pub month: u8,
    /// 1..=31 (checked against the month).
    pub day: u8,
}

impl Date {
    /// Parses `YYYY-MM-DD`; `None` for anything else (including a day the
    /// month does not have).
    pub fn parse(s: &str) -> Option<Date> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            let part = &s[r];
            part.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| part.parse().ok())?
        };
        let year = i32::try_from(num(0..4)?).ok()?;
        let month = u8::try_from(num(5..7)?).ok()?;
        let day = u8::try_from(num(8..10)?).ok()?;
        let date = Date { year, month, day };
        ((1..=12).contains(&month) && day >= 1 && day <= date.days_in_month()).then_some(date)
    }

    fn days_in_month(self) -> u8 {
        let leap = (self.year % 4 == 0 && self.year % 100 != 0) || self.year % 400 == 0;
        match self.month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => 0,
        }
    }

    /// The UTC date of `days` days after 1970-01-01 (Howard Hinnant's
    /// `civil_from_days`).
    pub fn from_unix_days(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        Date {
            year: i32::try_from(year).unwrap_or(i32::MAX),
            month: u8::try_from(month).unwrap_or(1),
            day: u8::try_from(day).unwrap_or(1),
        }
    }

    /// Today's date in UTC.
    pub fn today() -> Date {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Date::from_unix_days(i64::try_from(secs / 86_400).unwrap_or(0))
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_real_dates_only() {
        let d = Date::parse("2027-06-30").unwrap();
        assert_eq!((d.year, d.month, d.day), (2027, 6, 30));
        assert_eq!(d.to_string(), "2027-06-30");
        assert!(Date::parse("2028-02-29").is_some());
        for bad in [
            "2027-02-29",
            "2027-13-01",
            "2027-06-31",
            "2027-6-30",
            "27-06-30",
            "2027-06-3x",
            "",
            "2027-00-10",
            "2027-01-00",
        ] {
            assert_eq!(Date::parse(bad), None, "{bad}");
        }
        assert!(Date::parse("2027-06-30").unwrap() < Date::parse("2027-07-01").unwrap());
    }

    #[test]
    fn unix_days_to_civil() {
        assert_eq!(Date::from_unix_days(0).to_string(), "1970-01-01");
        assert_eq!(Date::from_unix_days(19_782).to_string(), "2024-02-29");
        assert_eq!(Date::from_unix_days(20_783).to_string(), "2026-11-26");
        assert!(Date::today() >= Date::parse("2026-01-01").unwrap());
    }
}
