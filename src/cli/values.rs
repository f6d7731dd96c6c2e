//! Flag values written the way Go programs take them, so that manifests made for
//! controller-runtime-based providers work unchanged: durations (`15s`, `1m30s`, `500ms`, and a
//! plain integer as seconds) and booleans (`--flag=true`, `--flag=f`, ...).

use std::time::Duration;

/// Parses a duration: a Go duration (`1h`, `1m30s`, `1.5s`, `250ms`, `10us`, `0`) or a plain
/// integer, which counts seconds. Negative durations are refused: no flag of ferro-ipam takes one.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let value = text.trim();
    if value.is_empty() {
        return Err("empty duration: write e.g. 15s, 1m30s or 500ms".to_owned());
    }
    if let Ok(seconds) = value.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let unsigned = value.strip_prefix('+').unwrap_or(value);
    if unsigned.starts_with('-') {
        return Err(format!("{text:?} is negative: a duration here must be 0 or more"));
    }
    let mut nanos: u128 = 0;
    let mut rest = unsigned;
    while !rest.is_empty() {
        let (amount, after_number) = number(rest).ok_or_else(|| invalid(text))?;
        let unit_len = after_number.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(after_number.len());
        let unit = unit_nanos(&after_number[..unit_len]).ok_or_else(|| invalid(text))?;
        nanos = amount.scale(unit).and_then(|n| nanos.checked_add(n)).ok_or_else(|| too_long(text))?;
        rest = &after_number[unit_len..];
    }
    let seconds = u64::try_from(nanos / 1_000_000_000).map_err(|_| too_long(text))?;
    Ok(Duration::new(seconds, (nanos % 1_000_000_000) as u32))
}

fn invalid(text: &str) -> String {
    format!("{text:?} is not a duration: write e.g. 15s, 1m30s, 500ms, or an integer number of seconds")
}

fn too_long(text: &str) -> String {
    format!("{text:?} is too long a duration")
}

/// A decimal number, split into its integer digits and its fraction digits.
struct Amount<'a> {
    whole: &'a str,
    fraction: &'a str,
}

impl Amount<'_> {
    /// The amount times `unit` nanoseconds, fractions of a nanosecond dropped (as Go does).
    fn scale(&self, unit: u128) -> Option<u128> {
        let whole: u128 = if self.whole.is_empty() { 0 } else { self.whole.parse().ok()? };
        let mut total = whole.checked_mul(unit)?;
        let mut place = unit;
        for digit in self.fraction.bytes() {
            place /= 10;
            if place == 0 {
                break;
            }
            total = total.checked_add(u128::from(digit - b'0') * place)?;
        }
        Some(total)
    }
}

/// Splits a leading `123`, `1.5` or `.5` off `text`; None when no digit leads.
fn number(text: &str) -> Option<(Amount<'_>, &str)> {
    let whole_len = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let whole = &text[..whole_len];
    let after = &text[whole_len..];
    let (fraction, rest) = match after.strip_prefix('.') {
        Some(tail) => {
            let len = tail.find(|c: char| !c.is_ascii_digit()).unwrap_or(tail.len());
            (&tail[..len], &tail[len..])
        }
        None => ("", after),
    };
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    Some((Amount { whole, fraction }, rest))
}

/// Nanoseconds per unit, for Go's unit names.
fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        // Go accepts the micro sign and the Greek letter mu as well as "us".
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        _ => return None,
    })
}

/// Parses a boolean as Go's `strconv.ParseBool` does: 1, t, T, TRUE, true, True, and the same
/// for false.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean: write true or false")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(ms(500)));
        assert_eq!(parse_duration("1h2m3s4ms"), Ok(Duration::from_secs(3723) + ms(4)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_duration(".5m"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("2.h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("10us"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("10\u{b5}s"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("+25200s"), Ok(Duration::from_secs(25200)));
        assert_eq!(parse_duration("1.0000000001s"), Ok(Duration::from_secs(1)), "sub-nanosecond digits are dropped");
    }

    #[test]
    fn a_plain_integer_counts_seconds() {
        assert_eq!(parse_duration("15"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(" 600 "), Ok(Duration::from_secs(600)));
    }

    #[test]
    fn malformed_negative_and_huge_durations_are_refused() {
        for bad in ["", "s", "15x", "15 s", "1m30", "ms15", "1..5s", "-1s", "-15", ".s", "1e3s", "15S"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(parse_duration("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration("99999999999999999999999h").unwrap_err().contains("too long"));
    }

    #[test]
    fn booleans_take_gos_spellings() {
        for yes in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(yes), Ok(true), "{yes}");
        }
        for no in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(no), Ok(false), "{no}");
        }
        assert!(parse_bool("yes").is_err());
    }
}
