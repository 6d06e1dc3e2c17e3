//! The event string perf builds from an object (its fixed encodings and the term fields, numbers
//! read as Python's `int()` reads them), and the counter and flag fields.

use super::object::{Failure, strip_period};
use super::{CounterField, Event, Problem, Source};
use crate::error::ObjectError;
use crate::raw::{Key, RawObject};

impl Event {
    /// perf's description (`perf list`): `brief` without a trailing period, plus [`Event::desc_note`].
    pub fn perf_desc(&self) -> Option<String> {
        let brief = strip_period(self.brief.as_deref()?);
        (!brief.is_empty()).then(|| format!("{brief}{}", self.desc_note))
    }

    /// perf's long description: `public` without a trailing period, plus [`Event::long_desc_note`].
    pub fn perf_long_desc(&self) -> Option<String> {
        let public = strip_period(self.public.as_deref()?);
        (!public.is_empty()).then(|| format!("{public}{}", self.long_desc_note))
    }
}

/// jevents.py `real_event`: names whose event string is fixed regardless of the JSON fields.
pub(super) fn fixed_encoding(name: &str) -> Option<&'static str> {
    match name.to_lowercase().as_str() {
        "inst_retired.any" | "inst_retired.any_p" => Some("event=0xc0,period=2000003"),
        "cpu_clk_unhalted.ref" => Some("event=0x0,umask=0x03,period=2000003"),
        "cpu_clk_unhalted.thread" | "cpu_clk_unhalted.core" => Some("event=0x3c,period=2000003"),
        "cpu_clk_unhalted.thread_any" => Some("event=0x3c,any=1,period=2000003"),
        _ => None,
    }
}

/// The optional terms, in jevents.py's fixed order (not sorted by name).
const TERM_FIELDS: [(Key, &str); 14] = [
    (Key::AnyThread, "any"),
    (Key::PortMask, "ch_mask"),
    (Key::CounterMask, "cmask"),
    (Key::EdgeDetect, "edge"),
    (Key::FcMask, "fc_mask"),
    (Key::Invert, "inv"),
    (Key::SampleAfterValue, "period"),
    (Key::UMask, "umask"),
    (Key::NodeType, "type"),
    (Key::RdWrMask, "rdwrmask"),
    (Key::EnAllCores, "enallcores"),
    (Key::EnAllSlices, "enallslices"),
    (Key::SliceId, "sliceid"),
    (Key::ThreadMask, "threadmask"),
];

/// The event string of one object on its own (jevents.py before `ArchStdEvent` and `real_event`).
/// A bad `SampleAfterValue` only loses the sampling period, so it is dropped with a [`Problem`];
/// any other bad term fails the event, whose string would otherwise select something else.
pub(super) fn encode(object: &RawObject, problems: &mut Vec<Problem>) -> Result<String, Failure> {
    let number = |key: Key, text: &str, base: u32| {
        py_int(text, base).ok_or_else(|| {
            (Some(key), ObjectError::BadNumber { key: key.json_name(), value: text.to_string() })
        })
    };
    let mut event_code = match object.get(Key::EventCode) {
        Some(code) => number(Key::EventCode, first_of_list(code), 0)?,
        None => 0,
    };
    if let Some(ext) = object.get(Key::ExtSel) {
        event_code |= number(Key::ExtSel, ext, 10)?.checked_shl(8).unwrap_or(0);
    }
    let mut encoding = if let Some(config) = object.get(Key::ConfigCode) {
        format!("config={}", llx(number(Key::ConfigCode, config, 0)?))
    } else if let Some(eventid) = object.get(Key::EventidCode) {
        format!("eventid={}", llx(number(Key::EventidCode, eventid, 0)?))
    } else if let Some(code) = object.get(Key::LegacyConfigCode) {
        // perf 7.x's legacy events as JSON (`arch/common/common/legacy-hardware.json`): the
        // core PMU's generic hardware event of that number (`PERF_TYPE_HARDWARE`).
        format!("legacy-hardware-config={}", llx(number(Key::LegacyConfigCode, code, 0)?))
    } else if let Some(code) = object.get(Key::LegacyCacheCode) {
        format!("legacy-cache-config={}", llx(number(Key::LegacyCacheCode, code, 0)?))
    } else {
        format!("event={}", llx(event_code))
    };
    for (key, term) in TERM_FIELDS {
        let Some(value) = object.get(key) else { continue };
        // "0x.." is read as hex and re-printed with llx; anything else is read as decimal.
        // Surrounding blanks and an upper-case "0X" are read as Python's int() reads them.
        let trimmed = value.trim();
        let parsed = if trimmed.starts_with("0x") || trimmed.starts_with("0X") {
            number(key, trimmed, 16).map(llx)
        } else {
            number(key, trimmed, 10).map(|n| n.to_string())
        };
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err((_, kind)) if key == Key::SampleAfterValue => {
                problems.push(Problem::ignored(Some(key), kind, "no sampling period"));
                continue;
            }
            Err(failure) => return Err(failure),
        };
        if parsed != "0" {
            encoding.push(',');
            encoding.push_str(term);
            encoding.push('=');
            encoding.push_str(&parsed);
        }
    }
    if let Some(filter) = object.get(Key::Filter).filter(|f| !f.is_empty()) {
        encoding.push(',');
        encoding.push_str(filter);
    }
    if let Some(index) = object.get(Key::MsrIndex).filter(|i| !i.is_empty()) {
        let msr = number(Key::MsrIndex, first_of_list(index), 0)?;
        let term = match msr {
            0x3F6 => "ldlat=",
            0x1A6 | 0x1A7 => "offcore_rsp=",
            0x3F7 => "frontend=",
            _ => {
                return Err((
                    Some(Key::MsrIndex),
                    ObjectError::UnknownMsrIndex { value: index.to_string() },
                ));
            }
        };
        encoding.push(',');
        encoding.push_str(term);
        // jevents.py formats a missing MSRValue as Python's "None" (5 westmere/nehalem events);
        // kept so the strings stay identical, and perf then rejects the event when opening it.
        encoding.push_str(object.get(Key::MsrValue).unwrap_or("None"));
    }
    Ok(encoding)
}

/// "0x1a6,0x1a7" -> "0x1a6": jevents.py uses the first value of a list.
fn first_of_list(text: &str) -> &str {
    text.split_once(',').map_or(text, |(first, _)| first)
}

/// `%#llx` as jevents.py emulates it: decimal below 10, else lower-case hex with 0x.
fn llx(value: u64) -> String {
    if value < 10 { value.to_string() } else { format!("{value:#x}") }
}

/// Python's `int(text, base)` for non-negative values that fit in u64. `base` 0 detects the
/// prefix (0x, 0o, 0b) and rejects decimal leading zeros; base 16 allows a 0x prefix.
pub(crate) fn py_int(text: &str, base: u32) -> Option<u64> {
    let text = text.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    let lower = text.to_ascii_lowercase();
    let (radix, digits, prefixed) = match base {
        0 => {
            if let Some(rest) = lower.strip_prefix("0x") {
                (16, rest, true)
            } else if let Some(rest) = lower.strip_prefix("0o") {
                (8, rest, true)
            } else if let Some(rest) = lower.strip_prefix("0b") {
                (2, rest, true)
            } else {
                (10, lower.as_str(), false)
            }
        }
        16 => match lower.strip_prefix("0x") {
            Some(rest) => (16, rest, true),
            None => (16, lower.as_str(), false),
        },
        _ => (base, lower.as_str(), false),
    };
    // Python allows single underscores between digits, and one right after a prefix.
    let digits = if prefixed { digits.strip_prefix('_').unwrap_or(digits) } else { digits };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    if base == 0
        && radix == 10
        && clean.len() > 1
        && clean.starts_with('0')
        && clean.chars().any(|c| c != '0')
    {
        return None;
    }
    u64::from_str_radix(&clean, radix).ok()
}

pub(super) fn parse_counters(value: Option<&str>) -> Result<CounterField, ObjectError> {
    let Some(value) = value else { return Ok(CounterField::Any) };
    let bad = || ObjectError::BadCounter { value: value.to_string() };
    let lower = value.trim().to_ascii_lowercase();
    if lower == "fixed" {
        return Ok(CounterField::Fixed(None));
    }
    if let Some(index) = lower.strip_prefix("fixed counter") {
        return index.trim().parse().map(|i| CounterField::Fixed(Some(i))).map_err(|_| bad());
    }
    // "0," (perf 6.1's broadwell and haswell uncore files): empty pieces are dropped, as any
    // reader that splits at commas and skips blanks would; perf 6.12 does not read the key at all.
    let list: Result<Vec<u8>, _> =
        value.split(',').map(str::trim).filter(|n| !n.is_empty()).map(str::parse::<u8>).collect();
    match list {
        Ok(list) if !list.is_empty() => Ok(CounterField::Generic(list)),
        _ => Err(bad()),
    }
}

/// A "0"/"1" flag of the object itself (`max` 2 for PEBS).
pub(super) fn parse_flag(object: &RawObject, key: Key, max: u8) -> Result<u8, ObjectError> {
    match object.get(key) {
        None => Ok(0),
        Some(value) => {
            value.trim().parse::<u8>().ok().filter(|&v| v <= max).ok_or_else(|| {
                ObjectError::BadFlag { key: key.json_name(), value: value.to_string() }
            })
        }
    }
}

pub(super) fn parse_merged_flag(
    value: Option<(&str, Source<'_>)>,
    key: Key,
) -> Result<bool, ObjectError> {
    match value.map(|(v, _)| v.trim()) {
        None | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(other) => Err(ObjectError::BadFlag { key: key.json_name(), value: other.to_string() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn py_int_follows_python() {
        assert_eq!(py_int("0x2A", 0), Some(42));
        assert_eq!(py_int(" 0x1a7", 0), Some(0x1a7));
        assert_eq!(py_int("10", 0), Some(10));
        assert_eq!(py_int("0", 0), Some(0));
        assert_eq!(py_int("00", 0), Some(0));
        assert_eq!(py_int("010", 0), None);
        assert_eq!(py_int("010", 10), Some(10));
        assert_eq!(py_int("0x_1f", 0), Some(31));
        assert_eq!(py_int("1_000", 10), Some(1000));
        assert_eq!(py_int("1__0", 10), None);
        assert_eq!(py_int("0x", 16), None);
        assert_eq!(py_int("0X1F", 16), Some(31));
        assert_eq!(py_int("-1", 10), None);
        assert_eq!(py_int("zz", 10), None);
    }

    #[test]
    fn counters() {
        assert_eq!(parse_counters(None), Ok(CounterField::Any));
        assert_eq!(parse_counters(Some("0,1,2,3")), Ok(CounterField::Generic(vec![0, 1, 2, 3])));
        assert_eq!(parse_counters(Some("Fixed counter 2")), Ok(CounterField::Fixed(Some(2))));
        assert_eq!(parse_counters(Some("FIXED")), Ok(CounterField::Fixed(None)));
        assert!(parse_counters(Some("0,x")).is_err());
        assert_eq!(parse_counters(Some("0,")), Ok(CounterField::Generic(vec![0])));
        assert_eq!(parse_counters(Some(" 0, 1 ,")), Ok(CounterField::Generic(vec![0, 1])));
        assert!(parse_counters(Some(",")).is_err());
        assert!(parse_counters(Some("256")).is_err());
    }
}
