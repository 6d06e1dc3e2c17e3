//! The user's numeric locale (`LC_ALL`, `LC_NUMERIC`, `LANG`), read through the C library as
//! perf reads it: perf calls `setlocale(LC_ALL, "")` and prints counts with `printf`'s `%'`
//! flag, so its thousands separator, grouping and decimal mark are the user's. tmetric's
//! printers format with these values; nothing else in the process depends on the C locale.

use std::ffi::CStr;

/// The marks and grouping of numbers in one locale (`localeconv()`'s numeric fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumericLocale {
    /// The decimal mark (`.` in C, `,` in `de_DE`).
    pub decimal_point: String,
    /// The thousands separator (empty in C: no grouping).
    pub thousands_sep: String,
    /// Digits per group from the right, the last size repeating (C's `grouping`: `[3]` for
    /// most locales, `[3, 2]` for `en_IN`); empty: no grouping.
    pub grouping: Vec<u8>,
}

impl Default for NumericLocale {
    /// The C locale: `.` and no grouping.
    fn default() -> NumericLocale {
        NumericLocale::c()
    }
}

impl NumericLocale {
    /// The C (POSIX) locale.
    pub fn c() -> NumericLocale {
        NumericLocale { decimal_point: ".".into(), thousands_sep: String::new(), grouping: vec![] }
    }

    /// `en_US`-style marks (`1,234,567.89`): what tests and documentation use.
    pub fn en_us() -> NumericLocale {
        NumericLocale { decimal_point: ".".into(), thousands_sep: ",".into(), grouping: vec![3] }
    }

    /// The locale the environment names for `LC_NUMERIC`, as the C library resolves it; the
    /// C locale when it names none or one that is not installed (the C library's rule too).
    ///
    /// The process's C locale is set back to "C" afterwards, so nothing else changes.
    pub fn from_env() -> NumericLocale {
        // SAFETY: `setlocale` and `localeconv` are called with valid NUL-terminated strings;
        // the strings `localeconv` returns are copied before the locale is set back, which
        // is when they could be invalidated. tmetric calls this once, on the main thread,
        // before any thread that formats numbers through the C library starts.
        unsafe {
            if libc::setlocale(libc::LC_NUMERIC, c"".as_ptr()).is_null() {
                return NumericLocale::c();
            }
            let conv = libc::localeconv();
            let locale = if conv.is_null() {
                NumericLocale::c()
            } else {
                let text = |p: *const libc::c_char| {
                    if p.is_null() {
                        String::new()
                    } else {
                        CStr::from_ptr(p).to_string_lossy().into_owned()
                    }
                };
                let grouping_bytes = if (*conv).grouping.is_null() {
                    Vec::new()
                } else {
                    CStr::from_ptr((*conv).grouping).to_bytes().to_vec()
                };
                NumericLocale {
                    decimal_point: text((*conv).decimal_point),
                    thousands_sep: text((*conv).thousands_sep),
                    grouping: grouping_bytes,
                }
            };
            libc::setlocale(libc::LC_NUMERIC, c"C".as_ptr());
            locale.sanitized()
        }
    }

    /// A locale without marks C would not print: an empty decimal mark becomes `.`, and a
    /// grouping of `CHAR_MAX` (no further grouping) ends the list.
    fn sanitized(mut self) -> NumericLocale {
        if self.decimal_point.is_empty() {
            self.decimal_point = ".".into();
        }
        if let Some(end) = self.grouping.iter().position(|&g| g == 0 || g == 127 || g == 255) {
            // 0 repeats the previous size (C's rule), CHAR_MAX stops grouping: both end the
            // explicit list, and only 0 keeps repeating.
            if self.grouping[end] != 0 {
                self.grouping.truncate(end);
                self.grouping.push(u8::MAX);
            } else {
                self.grouping.truncate(end);
            }
        }
        self
    }

    /// Whether `%'` groups digits at all.
    pub fn groups(&self) -> bool {
        !self.thousands_sep.is_empty() && self.grouping.first().is_some_and(|&g| g > 0 && g < 127)
    }

    /// `digits` (ASCII digits only) with thousands separators, as `%'` prints them.
    pub fn group(&self, digits: &str) -> String {
        if !self.groups() {
            return digits.to_string();
        }
        // Split from the right: sizes from `grouping`, the last repeating; `u8::MAX` stops.
        let bytes = digits.as_bytes();
        let mut cuts = Vec::new();
        let mut end = bytes.len();
        let mut sizes = self.grouping.iter().copied();
        let mut size = sizes.next().unwrap_or(3);
        while size != u8::MAX && end > size as usize {
            end -= size as usize;
            cuts.push(end);
            if let Some(next) = sizes.next() {
                size = next;
            }
        }
        let mut out = String::with_capacity(digits.len() + cuts.len() * self.thousands_sep.len());
        let mut start = 0;
        for &cut in cuts.iter().rev() {
            out.push_str(&digits[start..cut]);
            out.push_str(&self.thousands_sep);
            start = cut;
        }
        out.push_str(&digits[start..]);
        out
    }
}

/// The current local time as C's `ctime` prints it, without its newline
/// (`Tue Dec  1 22:14:32 2026`): perf's `# started on` line.
pub fn ctime_now() -> String {
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: `time` accepts a null pointer; `ctime_r` writes at most 26 bytes (its
    // documented maximum) into the 64-byte buffer and NUL-terminates it, or returns null.
    let text = unsafe {
        let now = libc::time(std::ptr::null_mut());
        let p = libc::ctime_r(&now, buf.as_mut_ptr());
        if p.is_null() {
            return String::new();
        }
        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned()
    };
    text.trim_end_matches('\n').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_by_the_locales_sizes() {
        let us = NumericLocale::en_us();
        assert_eq!(us.group("1234567"), "1,234,567");
        assert_eq!(us.group("123"), "123");
        assert_eq!(us.group("1000"), "1,000");
        let india = NumericLocale {
            decimal_point: ".".into(),
            thousands_sep: ",".into(),
            grouping: vec![3, 2],
        };
        assert_eq!(india.group("4595014128"), "4,59,50,14,128");
        let c = NumericLocale::c();
        assert_eq!(c.group("1234567"), "1234567");
        let de = NumericLocale {
            decimal_point: ",".into(),
            thousands_sep: ".".into(),
            grouping: vec![3, 3],
        };
        assert_eq!(de.group("4595014128"), "4.595.014.128");
    }

    #[test]
    fn char_max_stops_grouping() {
        let once = NumericLocale {
            decimal_point: ".".into(),
            thousands_sep: " ".into(),
            grouping: vec![3, 127],
        }
        .sanitized();
        assert_eq!(once.group("1234567"), "1234 567");
    }
}
