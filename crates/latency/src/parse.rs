//! Byte-level parsing of one ftrace text line: the `TIMESTAMP: EVENT: PAYLOAD` split, `key:value`
//! fields and the integer and timestamp parsers.
//!
//! No regex and no allocation here: this is the hot path that every input line goes through.

/// One event line cut into its parts; the task, CPU and flags columns before the timestamp are not
/// needed by anything and are never looked at, so a task name with spaces or brackets is harmless.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventLine<'a> {
    /// The timestamp as printed: `SECS.FRACTION` for the ns clocks, a bare integer for counter clocks.
    pub timestamp: &'a [u8],
    /// The event name, e.g. `x86_fpu_latency_xsave`.
    pub event: &'a [u8],
    /// Everything after the event name's colon.
    pub payload: &'a [u8],
}

/// Finds `TIMESTAMP: EVENT:` in a line of `trace_pipe`, the `trace` file or `trace-cmd report`.
///
/// The timestamp is the first token made only of digits and at most one inner dot that is
/// preceded by whitespace (or starts the line) and followed by `": "`, and whose next word is an
/// event name ending in `:`. Candidates that fail are skipped, so a colon inside a task name
/// (`kworker/u8:2`) or a number-like task name does not derail the search.
pub(crate) fn split_event_line(line: &[u8]) -> Option<EventLine<'_>> {
    let mut from = 0;
    while let Some(rel) = find_byte(b':', &line[from..]) {
        let colon = from + rel;
        from = colon + 1;
        if line.get(colon + 1) != Some(&b' ') {
            continue;
        }
        let mut start = colon;
        while start > 0 && (line[start - 1].is_ascii_digit() || line[start - 1] == b'.') {
            start -= 1;
        }
        let timestamp = &line[start..colon];
        if !is_timestamp(timestamp) || (start > 0 && !is_blank(line[start - 1])) {
            continue;
        }
        let rest = trim_start(&line[colon + 2..]);
        // The event name runs to the next `:`, and a blank before it means there is none here.
        let Some(end) = rest.iter().position(|&b| b == b':' || is_blank(b)) else {
            continue;
        };
        if end == 0 || rest[end] != b':' {
            continue;
        }
        return Some(EventLine { timestamp, event: &rest[..end], payload: &rest[end + 1..] });
    }
    None
}

/// `123`, `123.456`: digits, optionally one dot with digits on both sides.
fn is_timestamp(token: &[u8]) -> bool {
    let Some((&first, _)) = token.split_first() else {
        return false;
    };
    let dots = token.iter().filter(|&&b| b == b'.').count();
    first.is_ascii_digit() && token.last().is_some_and(u8::is_ascii_digit) && dots <= 1
}

pub(crate) fn is_blank(byte: u8) -> bool {
    byte == b' ' || byte == b'\t'
}

pub(crate) fn trim_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes.iter().take_while(|&&b| is_blank(b)).count();
    &bytes[skip..]
}

pub(crate) fn trim(bytes: &[u8]) -> &[u8] {
    let bytes = trim_start(bytes);
    let keep = bytes.len() - bytes.iter().rev().take_while(|&&b| is_blank(b)).count();
    &bytes[..keep]
}

pub(crate) fn find_byte(needle: u8, haystack: &[u8]) -> Option<usize> {
    memchr::memchr(needle, haystack)
}

/// Calls `visit(key, value)` for each whitespace-separated `key:value` or `key=value` token of a
/// payload, in order, until `visit` returns `false`. A token without a separator is not a field
/// and is skipped; `x86/fpu:` in the XSAVE payload is a field with an empty value, which is harmless.
pub(crate) fn for_each_field<'a>(
    payload: &'a [u8],
    mut visit: impl FnMut(&'a [u8], &'a [u8]) -> bool,
) {
    // Per token: the blanks, the key up to the first `:` or `=`, the value up to the next
    // blank, each a search over the rest of the slice (every line's payload goes through here,
    // and slice searches check no bounds per byte).
    let mut rest = payload;
    loop {
        let skip = rest.iter().position(|&b| !is_blank(b)).unwrap_or(rest.len());
        rest = &rest[skip..];
        let Some(key_len) = rest.iter().position(|&b| ENDS_KEY[usize::from(b)]) else { return };
        if is_blank(rest[key_len]) {
            rest = &rest[key_len..];
            continue;
        }
        let (key, after) = (&rest[..key_len], &rest[key_len + 1..]);
        let value_len = after.iter().position(|&b| is_blank(b)).unwrap_or(after.len());
        if !visit(key, &after[..value_len]) {
            return;
        }
        rest = &after[value_len..];
    }
}

/// The bytes that end a field's key: a blank or a separator (one table lookup a byte, not
/// four comparisons).
const ENDS_KEY: [bool; 256] = {
    let mut table = [false; 256];
    table[b' ' as usize] = true;
    table[b'\t' as usize] = true;
    table[b':' as usize] = true;
    table[b'=' as usize] = true;
    table
};

/// Why a field value is not an unsigned 64-bit integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberError {
    Empty,
    Negative,
    NotANumber,
    TooLarge,
}

impl NumberError {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            NumberError::Empty => "is empty",
            NumberError::Negative => {
                "is negative (the kernel prints a u64 with %lld, so the clock went backwards or the value wrapped)"
            }
            NumberError::NotANumber => "is not a decimal or 0x-hexadecimal integer",
            NumberError::TooLarge => "does not fit in 64 bits",
        }
    }
}

/// Parses `123` (decimal) or `0x1f` (hexadecimal, either case) into a u64, rejecting signs,
/// junk and overflow rather than wrapping or truncating.
pub(crate) fn parse_u64(text: &[u8]) -> Result<u64, NumberError> {
    match text {
        [] => Err(NumberError::Empty),
        [b'-', ..] => Err(NumberError::Negative),
        [b'0', b'x' | b'X', digits @ ..] => parse_hex(digits),
        digits => parse_decimal(digits),
    }
}

fn parse_decimal(digits: &[u8]) -> Result<u64, NumberError> {
    // Up to 19 digits cannot overflow a u64, which keeps the common case free of checked math.
    if digits.len() <= 19 {
        let mut value = 0u64;
        for &digit in digits {
            let d = digit.wrapping_sub(b'0');
            if d > 9 {
                return Err(NumberError::NotANumber);
            }
            value = value * 10 + u64::from(d);
        }
        return Ok(value);
    }
    let mut value = 0u64;
    for &digit in digits {
        let d = digit.wrapping_sub(b'0');
        if d > 9 {
            return Err(NumberError::NotANumber);
        }
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(NumberError::TooLarge)?;
    }
    Ok(value)
}

fn parse_hex(digits: &[u8]) -> Result<u64, NumberError> {
    if digits.is_empty() {
        return Err(NumberError::NotANumber);
    }
    let mut value = 0u64;
    for &digit in digits {
        let d = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            b'A'..=b'F' => digit - b'A' + 10,
            _ => return Err(NumberError::NotANumber),
        };
        if value >> 60 != 0 {
            return Err(NumberError::TooLarge);
        }
        value = (value << 4) | u64::from(d);
    }
    Ok(value)
}

/// Whether `value` may be within `tolerance` ns of `timestamp` ([`timestamp_ns`]), judged on
/// its seconds alone: the fraction only adds to them, so a value below the whole seconds by
/// more than the tolerance is not near, and most values (latencies of a few hundred ns) are
/// told apart without reading the fraction. `true` leaves the answer to the full comparison.
pub(crate) fn may_be_near(value: u64, timestamp: &[u8], tolerance: u64) -> bool {
    let Some(dot) = find_byte(b'.', timestamp) else { return false };
    let Ok(seconds) = parse_decimal(&timestamp[..dot]) else { return false };
    match seconds.checked_mul(1_000_000_000) {
        Some(floor) => value.saturating_add(tolerance) >= floor,
        None => false,
    }
}

/// Converts a `SECS.FRACTION` timestamp to nanoseconds; `None` for a bare counter (no dot: the
/// `x86-tsc`, `counter` and `uptime` trace clocks, whose unit is not nanoseconds) or on overflow.
/// Fraction digits past the ninth are dropped, which truncates toward zero like the kernel does
/// when it prints microseconds.
pub(crate) fn timestamp_ns(timestamp: &[u8]) -> Option<u64> {
    let dot = find_byte(b'.', timestamp)?;
    let seconds = parse_decimal(&timestamp[..dot]).ok()?;
    let mut fraction = 0u64;
    let mut scale = 1_000_000_000u64;
    for &digit in timestamp[dot + 1..].iter().take(9) {
        if !digit.is_ascii_digit() {
            return None;
        }
        scale /= 10;
        fraction += u64::from(digit - b'0') * scale;
    }
    seconds.checked_mul(1_000_000_000)?.checked_add(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Option<(String, String, String)> {
        split_event_line(line.as_bytes()).map(|e| {
            let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
            (text(e.timestamp), text(e.event), text(e.payload))
        })
    }

    fn owned(ts: &str, event: &str, payload: &str) -> Option<(String, String, String)> {
        Some((ts.to_owned(), event.to_owned(), payload.to_owned()))
    }

    #[test]
    fn splits_trace_pipe_line_with_five_flag_columns() {
        assert_eq!(
            split(
                "  <idle>-0  [002] d..1.  1234.567890: x86_fpu_latency_xsave: x86/fpu: latency:100"
            ),
            owned("1234.567890", "x86_fpu_latency_xsave", " x86/fpu: latency:100")
        );
    }

    #[test]
    fn splits_lines_without_flags_and_with_awkward_task_names() {
        assert_eq!(split("bash-1 [000] 5.000001: ev: a:1"), owned("5.000001", "ev", " a:1"));
        assert_eq!(split("kworker/u8:2-77 [1] d.h1 3.5: ev: a:1"), owned("3.5", "ev", " a:1"));
        // A task name that contains a number and a colon followed by a space.
        assert_eq!(split("weird 12: name-5 [003] 77.25: ev: k=v"), owned("77.25", "ev", " k=v"));
        assert_eq!(split("12345: ev:"), owned("12345", "ev", ""));
    }

    #[test]
    fn rejects_lines_that_are_not_events() {
        assert_eq!(split("# tracer: nop"), None);
        assert_eq!(split("cpus=4"), None);
        assert_eq!(split("CPU:3 [LOST 12 EVENTS]"), None);
        assert_eq!(split("bash-1 [000] 1.2.3: ev: a:1"), None);
        assert_eq!(split("bash-1 [000] 1234.5: no event name here"), None);
    }

    #[test]
    fn fields_are_found_in_order() {
        let mut seen = Vec::new();
        for_each_field(b" x86/fpu: latency:100  RFBM:0x2 k=v:w junk", |k, v| {
            seen.push((
                String::from_utf8_lossy(k).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
            true
        });
        let expected = [("x86/fpu", ""), ("latency", "100"), ("RFBM", "0x2"), ("k", "v:w")];
        assert_eq!(seen, expected.map(|(k, v)| (k.to_owned(), v.to_owned())));
    }

    #[test]
    fn integers_parse_exactly_or_fail_loudly() {
        assert_eq!(parse_u64(b"0"), Ok(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), Err(NumberError::TooLarge));
        assert_eq!(parse_u64(b"9999999999999999999"), Ok(9_999_999_999_999_999_999));
        assert_eq!(parse_u64(b"0x202e7"), Ok(0x202e7));
        assert_eq!(parse_u64(b"0XFFFFFFFFFFFFFFFF"), Ok(u64::MAX));
        assert_eq!(parse_u64(b"0x10000000000000000"), Err(NumberError::TooLarge));
        assert_eq!(parse_u64(b"0x"), Err(NumberError::NotANumber));
        assert_eq!(parse_u64(b"-5"), Err(NumberError::Negative));
        assert_eq!(parse_u64(b""), Err(NumberError::Empty));
        assert_eq!(parse_u64(b"12a"), Err(NumberError::NotANumber));
        assert_eq!(parse_u64(b"+1"), Err(NumberError::NotANumber));
    }

    #[test]
    fn timestamps_convert_to_nanoseconds() {
        assert_eq!(timestamp_ns(b"1234.567890"), Some(1_234_567_890_000));
        assert_eq!(timestamp_ns(b"1.5"), Some(1_500_000_000));
        assert_eq!(timestamp_ns(b"7.1234567891"), Some(7_123_456_789));
        assert_eq!(timestamp_ns(b"123456"), None);
        assert_eq!(timestamp_ns(b"99999999999999999999.0"), None);
    }
}
