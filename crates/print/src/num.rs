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
fn push_fixed(out: &mut String, value: f64, decimals: usize, group: bool, locale: &NumericLocale) {
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
    let _ = write!(out, "{value:.decimals$}");
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
    push_fixed(&mut out, value, decimals, group, locale);
    let chars = out.chars().count();
    if chars < width {
        out.insert_str(0, &" ".repeat(width - chars));
    }
    out
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
