//! Numbers as C's `printf` prints them in the user's locale: `%.Nf` with the locale's
//! decimal mark, `%'.Nf` with its digit grouping, and `nan`/`-nan`/`inf` spelled as glibc
//! spells them. perf prints every number through these, so tmetric's text equals perf's.
//! Also a metric value as perf's `%8.2f` prints it without a locale ([`perf_number`]), at
//! full precision ([`plain_number`]) and for JSON ([`json_number`]), as `stat --tree` and
//! `eval` print them.

use tmetric_runtime::locale::NumericLocale;

/// `%.<decimals>f` (with `group`: `%'.<decimals>f`) of `value` under `locale`.
pub fn fixed(value: f64, decimals: usize, group: bool, locale: &NumericLocale) -> String {
    let mut out = String::new();
    push_fixed(&mut out, value, decimals, group, locale);
    out
}

/// [`fixed`] appended to `out`. Printed every interval for every row, so a locale that
/// neither groups nor changes the decimal mark costs one formatting and no allocation.
pub(crate) fn push_fixed(
    out: &mut String,
    value: f64,
    decimals: usize,
    group: bool,
    locale: &NumericLocale,
) {
    use std::fmt::Write;
    if value.is_nan() {
        out.push_str(if value.is_sign_negative() { "-nan" } else { "nan" });
        return;
    }
    if value.is_infinite() {
        out.push_str(if value > 0.0 { "inf" } else { "-inf" });
        return;
    }
    let start = out.len();
    if !push_rounded(out, value, decimals) {
        let _ = write!(out, "{value:.decimals$}");
    }
    if (!group || !locale.groups()) && locale.decimal_point == "." {
        return;
    }
    let text = out.split_off(start);
    let (sign, digits) = match text.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", text.as_str()),
    };
    let (int, frac) = match digits.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (digits, None),
    };
    out.push_str(sign);
    if group {
        out.push_str(&locale.group(int));
    } else {
        out.push_str(int);
    }
    if let Some(f) = frac {
        out.push_str(&locale.decimal_point);
        out.push_str(f);
    }
}

/// `%<width>.<decimals>f`: [`fixed`] right-aligned in `width` characters.
pub fn padded(
    value: f64,
    width: usize,
    decimals: usize,
    group: bool,
    locale: &NumericLocale,
) -> String {
    let mut out = String::with_capacity(width.max(24));
    push_padded(&mut out, value, width, decimals, group, locale);
    out
}

/// `%.<decimals>f` of a finite `value` in the C locale, without `core::fmt`'s exact
/// algorithms, where rounding the scaled value in `f64` is sure to give the digits exact
/// rounding gives: `false` (nothing written) elsewhere. Counts and metric values are printed
/// every interval, and `format!("{:.2}")` falls back to big-number arithmetic for many of
/// them.
fn push_rounded(out: &mut String, value: f64, decimals: usize) -> bool {
    const POW10: [u64; 10] =
        [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000, 1_000_000_000];
    // Below 2^40 the product's rounding error is under 2^-13, so a fraction more than 1e-3
    // away from one half rounds the same way in `f64` as in exact arithmetic.
    const LIMIT: f64 = (1u64 << 40) as f64;
    let Some(&pow) = POW10.get(decimals) else { return false };
    let scaled = value.abs() * pow as f64;
    if scaled >= LIMIT {
        return false;
    }
    let floor = scaled.floor();
    let fraction = scaled - floor;
    if (fraction - 0.5).abs() <= 1e-3 {
        return false;
    }
    let n = floor as u64 + u64::from(fraction > 0.5);
    if value.is_sign_negative() {
        out.push('-');
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n;
    // The fraction's digits, zeros included, then the integer part (at least one digit).
    for _ in 0..decimals {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let fraction_at = at;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    let text =
        |range: std::ops::Range<usize>| std::str::from_utf8(&digits[range]).expect("ASCII digits");
    out.push_str(text(at..fraction_at));
    if decimals > 0 {
        out.push('.');
        out.push_str(text(fraction_at..digits.len()));
    }
    true
}

/// [`padded`] appended to `out`.
pub(crate) fn push_padded(
    out: &mut String,
    value: f64,
    width: usize,
    decimals: usize,
    group: bool,
    locale: &NumericLocale,
) {
    let start = out.len();
    push_fixed(out, value, decimals, group, locale);
    right_align_since(out, start, width);
}

/// Blanks for the fields below: every printed line pads several, so they are copied from
/// here rather than written one character at a time, as `format!("{:<w$}")` does.
const BLANKS: &str = "                                                                ";

/// `n` blanks appended to `out`.
pub(crate) fn push_blanks(out: &mut String, mut n: usize) {
    while n > 0 {
        let k = n.min(BLANKS.len());
        out.push_str(&BLANKS[..k]);
        n -= k;
    }
}

/// Characters (not bytes) of `text`, as printf's and Rust's field widths count them.
fn width_of(text: &str) -> usize {
    if text.is_ascii() { text.len() } else { text.chars().count() }
}

/// `%-<width>s`: `text` and blanks up to `width` characters (none when it is wider).
pub(crate) fn push_left(out: &mut String, text: &str, width: usize) {
    out.push_str(text);
    push_blanks(out, width.saturating_sub(width_of(text)));
}

/// `%<width>s`: blanks up to `width` characters, then `text`.
pub(crate) fn push_right(out: &mut String, text: &str, width: usize) {
    push_blanks(out, width.saturating_sub(width_of(text)));
    out.push_str(text);
}

/// Left-aligns what was appended to `out` since byte `start` in `width` characters.
pub(crate) fn left_align_since(out: &mut String, start: usize, width: usize) {
    let n = width.saturating_sub(width_of(&out[start..]));
    push_blanks(out, n);
}

/// Right-aligns what was appended to `out` since byte `start` in `width` characters.
pub(crate) fn right_align_since(out: &mut String, start: usize, width: usize) {
    let n = width.saturating_sub(width_of(&out[start..]));
    if n > 0 {
        out.insert_str(start, &BLANKS[..n.min(BLANKS.len())]);
        if n > BLANKS.len() {
            let rest = " ".repeat(n - BLANKS.len());
            out.insert_str(start, &rest);
        }
    }
}

/// `%f` under `locale`: six decimals.
pub fn c_f(value: f64, locale: &NumericLocale) -> String {
    fixed(value, 6, false, locale)
}

/// A number in full precision, as a person would write it (`7`, `0.25`, the shortest text
/// that reads back as the same double); NaN and infinities as `nan`, `inf`, `-inf`. CSV and
/// JSON metric values and `eval` use it (perf prints `%.2f`, so 0.003 becomes `0.0`).
pub fn plain_number(value: f64) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        value.to_string()
    }
}

/// A metric value as perf prints it: `%8.1f` with a ScaleUnit, `%8.2f` without; NaN and
/// infinities as C's printf spells them.
pub fn perf_number(value: f64, has_scale_unit: bool) -> String {
    let mut out = String::with_capacity(8);
    push_perf_number(&mut out, value, has_scale_unit);
    out
}

/// [`perf_number`] appended to `out`.
pub fn push_perf_number(out: &mut String, value: f64, has_scale_unit: bool) {
    use std::fmt::Write;
    let _ = if value.is_nan() {
        write!(out, "{:>8}", "nan")
    } else if value.is_infinite() {
        write!(out, "{:>8}", if value > 0.0 { "inf" } else { "-inf" })
    } else if has_scale_unit {
        write!(out, "{value:8.1}")
    } else {
        write!(out, "{value:8.2}")
    };
}

/// A finite number for JSON; `None` (printed `null`) for NaN and infinities, which JSON lacks.
pub fn json_number(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_as_glibc_does() {
        let c = NumericLocale::c();
        let us = NumericLocale::en_us();
        assert_eq!(fixed(1234567.456, 2, true, &us), "1,234,567.46");
        assert_eq!(fixed(1234567.456, 2, true, &c), "1234567.46");
        assert_eq!(fixed(-1234.5, 0, true, &us), "-1,234");
        assert_eq!(fixed(0.5, 0, false, &c), "0");
        assert_eq!(fixed(1.5, 0, false, &c), "2");
        assert_eq!(fixed(f64::NAN, 2, false, &c), "nan");
        assert_eq!(fixed(-f64::NAN, 2, false, &c), "-nan");
        assert_eq!(fixed(f64::NEG_INFINITY, 2, false, &c), "-inf");
        let de = NumericLocale {
            decimal_point: ",".into(),
            thousands_sep: ".".into(),
            grouping: vec![3, 3],
        };
        assert_eq!(fixed(4595014128.0, 0, true, &de), "4.595.014.128");
        assert_eq!(fixed(2.1554, 3, false, &de), "2,155");
        assert_eq!(padded(0.486, 8, 3, false, &c), "   0.486");
        assert_eq!(c_f(2.0527421, &c), "2.052742");
    }

    #[test]
    fn rounds_as_exact_formatting_does() {
        // Random magnitudes and decimals, and the ties and near-ties that decide rounding,
        // against `core::fmt`'s exact algorithm.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut values =
            vec![0.0, -0.0, 0.005, 0.015, 0.125, 2.5, -2.5, 1.005, 0.045, 1e12, 999.995];
        for _ in 0..200_000 {
            let bits = next();
            let mantissa = (bits >> 11) as f64 / (1u64 << 53) as f64;
            let exponent = (bits % 40) as i32 - 12;
            let sign = if bits & 1 == 1 { -1.0 } else { 1.0 };
            values.push(sign * mantissa * 10f64.powi(exponent));
            // Exact halves at some decimal place.
            values.push((next() % 100_000) as f64 / 8.0);
        }
        let mut fast = 0;
        for value in values {
            for decimals in [0, 1, 2, 3, 6, 9, 10] {
                let mut out = String::new();
                if push_rounded(&mut out, value, decimals) {
                    fast += 1;
                    assert_eq!(out, format!("{value:.decimals$}"), "{value:e} to {decimals}");
                }
            }
        }
        // About half of these 2.8 million cases are too large for the fast path (up to
        // 10^27 with 10 decimals); it must still take most of the rest.
        assert!(fast > 1_200_000, "{fast}");
    }

    #[test]
    fn fields_pad_as_format_does() {
        // Each helper against the `format!` width it replaces, in characters, not bytes.
        for text in ["", "cycles", "µs", "a-name-wider-than-the-field", "Ünïcödé"] {
            for width in [0, 1, 6, 18, 25, 70, 140] {
                let mut out = String::from("x");
                push_left(&mut out, text, width);
                assert_eq!(out, format!("x{text:<width$}"));
                let mut out = String::from("x");
                push_right(&mut out, text, width);
                assert_eq!(out, format!("x{text:>width$}"));
                let mut out = String::from("x");
                out.push_str(text);
                left_align_since(&mut out, 1, width);
                assert_eq!(out, format!("x{text:<width$}"));
                let mut out = String::from("x");
                out.push_str(text);
                right_align_since(&mut out, 1, width);
                assert_eq!(out, format!("x{text:>width$}"));
            }
        }
        let c = NumericLocale::c();
        let mut out = String::from("#");
        push_padded(&mut out, -1234.5678, 100, 3, false, &c);
        assert_eq!(out, format!("#{:>100.3}", -1234.5678));
    }

    #[test]
    fn metric_values_as_perf_eval_and_json_print_them() {
        assert_eq!(perf_number(19.04, true), "    19.0");
        assert_eq!(perf_number(1.234, false), "    1.23");
        assert_eq!(perf_number(f64::NAN, false), "     nan");
        assert_eq!(perf_number(f64::NEG_INFINITY, false), "    -inf");
        assert_eq!(plain_number(0.003), "0.003");
        assert_eq!(plain_number(7.0), "7");
        assert_eq!(plain_number(f64::INFINITY), "inf");
        // CSV and JSON metrics keep every digit.
        assert_eq!(plain_number(0.0031234567890123), "0.0031234567890123");
        assert_eq!(plain_number(-3.0), "-3");
        assert_eq!(plain_number(f64::NAN), "nan");
        assert_eq!(json_number(f64::NAN), None);
        assert_eq!(json_number(2.5), Some(2.5));
    }
}
