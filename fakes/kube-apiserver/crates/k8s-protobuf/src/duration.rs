//! Go's `time.Duration` text (`metav1.Duration`'s JSON form): `1h2m3.5s`, `500ms`, `0s`.

const UNITS: &[(&str, i64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Nanoseconds as Go's `Duration.String()` writes them.
pub fn format(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, scale) = match n {
            0..1_000 => ("ns", 1u64),
            1_000..1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", fraction(n, scale));
    }
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let secs = fraction(rest, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{secs}s"),
        (0, m) => format!("{sign}{m}m{secs}s"),
        (h, m) => format!("{sign}{h}h{m}m{secs}s"),
    }
}

/// `n / scale` with the fraction's trailing zeros cut (`1.5`, `2`).
fn fraction(n: u64, scale: u64) -> String {
    let (whole, frac) = (n / scale, n % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let digits = scale.ilog10() as usize;
    let f = format!("{frac:0digits$}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units; `None` when malformed.
pub fn parse(text: &str) -> Option<i64> {
    let (neg, mut s) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if s == "0" {
        return Some(0);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !s.is_empty() {
        let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let number: f64 = s[..end].parse().ok()?;
        s = &s[end..];
        let (unit, scale) = UNITS
            .iter()
            .filter(|(u, _)| s.starts_with(u))
            .max_by_key(|(u, _)| u.len())?;
        total += number * *scale as f64;
        s = &s[unit.len()..];
    }
    let n = total.round() as i64;
    Some(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_text_round_trips() {
        for (text, nanos) in [
            ("0s", 0),
            ("500ms", 500_000_000),
            ("1.5s", 1_500_000_000),
            ("1m0s", 60_000_000_000),
            ("1h2m3s", 3_723_000_000_000),
            ("-2s", -2_000_000_000),
        ] {
            assert_eq!(format(nanos), text);
            assert_eq!(parse(text), Some(nanos), "{text}");
        }
        assert_eq!(parse("1h"), Some(3_600_000_000_000));
        assert_eq!(parse("soon"), None);
    }
}
