//! Durations in Go / Hive syntax (`90s`, `1h30m`, `1.5h`, `250ms`).
//!
//! A [`GoDuration`] keeps the text it was written as next to the parsed value, so a pool spec with a bad
//! duration still deserializes and [`crate::validate`] can report it together with every other problem,
//! naming the field. Serialization writes the original text back unchanged.

use std::fmt;

use chrono::TimeDelta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration as written in a pool spec, with its parsed value when the text is valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoDuration {
    text: String,
    value: Option<TimeDelta>,
}

impl GoDuration {
    /// Parses `text`; an invalid text is kept and reported by validation.
    pub fn new(text: impl Into<String>) -> Self {
        let text = text.into();
        let value = parse(&text).ok();
        Self { text, value }
    }

    /// A duration from a value, written in canonical Go form.
    pub fn from_delta(value: TimeDelta) -> Self {
        Self { text: format(value), value: Some(value) }
    }

    /// The parsed value, or `None` when the text is not a valid duration.
    pub fn get(&self) -> Option<TimeDelta> {
        self.value
    }

    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(GoDuration::new)
    }
}

/// Why a duration text was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseDurationError(pub String);

impl fmt::Display for ParseDurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseDurationError {}

/// Parses Go's `time.ParseDuration` syntax: a sequence of decimal numbers, each with an optional fraction
/// and a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`). A lone `0` is zero. Negative durations are refused:
/// nothing in a pool spec can meaningfully be negative.
pub fn parse(text: &str) -> Result<TimeDelta, ParseDurationError> {
    let err = |why: &str| ParseDurationError(format!("invalid duration {text:?}: {why} (examples: 90s, 45m, 1h30m)"));
    let s = text.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s.starts_with('-') {
        return Err(err("must not be negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(TimeDelta::zero());
    }
    let mut rest = s;
    let mut total_ns: i128 = 0;
    while !rest.is_empty() {
        let digits_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number = &rest[..digits_end];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(err("expected a number before each unit"));
        }
        rest = &rest[digits_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let unit_ns: i128 = match &rest[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        rest = &rest[unit_end..];
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        let whole: i128 = if whole.is_empty() { 0 } else { whole.parse().map_err(|_| err("number too large"))? };
        let mut part = whole.checked_mul(unit_ns).ok_or_else(|| err("too large"))?;
        let mut scale = unit_ns;
        for digit in frac.chars().take(18) {
            scale /= 10;
            part += i128::from(digit.to_digit(10).unwrap_or(0)) * scale;
        }
        total_ns = total_ns.checked_add(part).ok_or_else(|| err("too large"))?;
    }
    let ns = i64::try_from(total_ns).map_err(|_| err("too large"))?;
    Ok(TimeDelta::nanoseconds(ns))
}

/// A duration in hours, with fractions: the unit rates and costs are quoted in.
pub fn hours(d: TimeDelta) -> f64 {
    d.num_milliseconds() as f64 / 3_600_000.0
}

/// Formats a duration the way Go prints it, without zero trailing units: `1h30m`, `90s` → `1m30s`, `0s`.
pub fn format(d: TimeDelta) -> String {
    let total_ms = d.num_milliseconds();
    if total_ms == 0 {
        return "0s".to_string();
    }
    let sign = if total_ms < 0 { "-" } else { "" };
    let ms = total_ms.unsigned_abs();
    let (h, m, s, milli) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = String::from(sign);
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || milli > 0 {
        if milli > 0 {
            out.push_str(format!("{s}.{milli:03}").trim_end_matches('0'));
            out.push('s');
        } else {
            out.push_str(&format!("{s}s"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_like_go() {
        let cases = [
            ("90s", TimeDelta::seconds(90)),
            ("1h30m", TimeDelta::minutes(90)),
            ("1.5h", TimeDelta::minutes(90)),
            ("8h", TimeDelta::hours(8)),
            ("2h45m30s", TimeDelta::seconds(2 * 3600 + 45 * 60 + 30)),
            ("250ms", TimeDelta::milliseconds(250)),
            ("0", TimeDelta::zero()),
            ("0s", TimeDelta::zero()),
            ("+5m", TimeDelta::minutes(5)),
            (".5s", TimeDelta::milliseconds(500)),
            ("1us", TimeDelta::microseconds(1)),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_durations_are_refused_with_the_text() {
        for text in ["", "5", "h", "1x", "-5m", "1..5s", "1h30", "ten minutes"] {
            let e = parse(text).expect_err(text);
            assert!(e.0.contains(&format!("{text:?}")), "{e}");
        }
    }

    #[test]
    fn durations_format_as_go_prints_them() {
        assert_eq!(format(TimeDelta::seconds(90)), "1m30s");
        assert_eq!(format(TimeDelta::minutes(90)), "1h30m");
        assert_eq!(format(TimeDelta::zero()), "0s");
        assert_eq!(format(TimeDelta::milliseconds(1500)), "1.5s");
        assert_eq!(format(TimeDelta::hours(8)), "8h");
    }

    #[test]
    fn a_go_duration_keeps_its_text_even_when_invalid() {
        let d: GoDuration = serde_json::from_str("\"soon\"").expect("a string deserializes");
        assert_eq!(d.get(), None);
        assert_eq!(serde_json::to_string(&d).expect("serializes"), "\"soon\"");
    }
}
