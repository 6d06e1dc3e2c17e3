//! The counts file of `tmetric eval --counts` (format: docs/counts-format.md): parsed into
//! entries, literals and instance counts ([`parse`]), its keys mapped to a model's input slots
//! ([`keys`]) and a model's metrics evaluated over them ([`eval`]), or an ad-hoc expression
//! over them and given values ([`ExprValues`]). Reading the file is the front end's; nothing
//! here prints.
//!
//! Key spelling is canonicalised by `tmetric_perfstat::EventKey`, the same normaliser the
//! perf stat importer uses, so `cpu_core/TOPDOWN.SLOTS/`, `cpu_core@TOPDOWN.SLOTS@`,
//! `topdown.slots` and `slots` are one event.

pub mod eval;
pub mod keys;
mod tree;

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Unexpected, Visitor};
use tmetric_model::Literal;
use tmetric_perfstat::EventKey;

pub use keys::{Assigned, SlotName, assign, key_of, slot_matches, slots_for_key};
use tmetric_engine::literals::{literal_named, literal_names};
pub use tree::evaluate_tree;

/// Why a counts file cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CountsError {
    /// The text is not a counts file; `message` is serde_json's, without its position.
    #[error(
        "{name}:{line}:{column}: {message} (see docs/counts-format.md or `tmetric eval --help`)"
    )]
    Syntax {
        /// The file's name.
        name: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong there.
        message: String,
    },
    /// A key without a PMU names an input on two core PMUs of a hybrid model.
    #[error(
        "`{written}` is ambiguous on {model}: it is an input on PMUs {}; prefix it with the PMU, e.g. `{}/{written}/`",
        cores.join(" and "),
        cores[0]
    )]
    Ambiguous {
        /// The key as written.
        written: String,
        /// The model, as `arch/name`.
        model: String,
        /// The core PMUs, sorted (at least two).
        cores: Vec<String>,
    },
    /// Two keys give the same input.
    #[error(
        "{path}: `{first}` and `{second}` both give `{input}` of {model}; keep one (numbered uncore instances such as `uncore_imc_0/X/` are summed)"
    )]
    Clash {
        /// The file's name.
        path: String,
        /// The first key, as written.
        first: String,
        /// The other key, as written.
        second: String,
        /// The input slot's text.
        input: String,
        /// The model, as `arch/name`.
        model: String,
    },
}

/// One value of the counts file.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The key as written in the file, for messages.
    pub written: String,
    /// The value; NaN for `null` or `"<not supported>"`.
    pub value: f64,
    /// The key matched against inputs (`duration_time` for `duration_time_ns`), canonicalised
    /// once per file; a key of the `retire_latency` object names a retire latency.
    pub event: EventKey,
}

impl Entry {
    fn new(key: &str, written: String, value: f64, retire_latency: bool) -> Entry {
        Entry { event: key_of(key, retire_latency), written, value }
    }

    /// An entry matched as written.
    fn as_written(written: String, value: f64, retire_latency: bool) -> Entry {
        Entry { event: key_of(&written, retire_latency), written, value }
    }
}

/// A parsed counts file.
#[derive(Debug, Clone, Default)]
pub struct CountsFile {
    /// Where it came from, for messages.
    pub path: String,
    /// Counts, retire latencies and tool-event values, in file order.
    pub entries: Vec<Entry>,
    /// The `literals` object.
    pub literals: Vec<(Literal, f64)>,
    /// The `source_count` object: how many PMU instances were merged into a count.
    pub source_counts: Vec<(String, f64)>,
    /// The `aggr_nr` object (perf 7.x's `aggr_nr()`): how many counters, one per PMU
    /// instance and CPU it was read on, were summed into a count.
    pub aggr_nrs: Vec<(String, f64)>,
    /// The `model` string.
    pub model: Option<String>,
    /// What the `target` string (perf stat's target options) says of system-wide counting.
    pub counting: tmetric_engine::Counting,
}

impl CountsFile {
    /// The value the file gives the expression identifier `id` (`INST_RETIRED.ANY`,
    /// `cpu@TOPDOWN.SLOTS@`), matched as [`assign`] matches a model's inputs, summed over the
    /// entries that match (numbered uncore instances), with how many there were; `None` when
    /// no entry matches.
    pub fn value_of(&self, id: &str) -> Option<(f64, usize)> {
        let slot = SlotName::of_expr_id(id);
        let matched: Vec<f64> = self
            .entries
            .iter()
            .filter(|e| slot_matches(&slot, &e.event).is_some())
            .map(|e| e.value)
            .collect();
        (!matched.is_empty()).then(|| (matched.iter().sum(), matched.len()))
    }
}

/// A value given as text that is not a count; each holds the text, quoted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadNumber {
    /// It does not parse.
    #[error("{0} is not a number")]
    NotANumber(String),
    /// `inf`, `NaN`.
    #[error("{0} is not a finite number")]
    NotFinite(String),
    /// Beyond a double (`1e400`).
    #[error("{0} is out of the range of a double")]
    OutOfRange(String),
    /// Below zero.
    #[error("{0} is negative; counts cannot be")]
    Negative(String),
}

/// A value of the counts file or of `--var`/`--literal` given as text: a finite number that
/// is not negative. `NaN`, `inf` and numbers beyond a double (`1e400`) are refused, as the
/// expression parser refuses `1e999`; a count has no value through `null` or
/// `"<not supported>"` instead.
pub fn number(text: &str) -> Result<f64, BadNumber> {
    let trimmed = text.trim();
    let shown = tmetric_text::quote(trimmed);
    let Ok(value) = trimmed.parse::<f64>() else { return Err(BadNumber::NotANumber(shown)) };
    if !trimmed.bytes().any(|b| b.is_ascii_digit()) {
        // `inf`, `NaN`, `infinity`: Rust parses them, the format does not have them.
        return Err(BadNumber::NotFinite(shown));
    }
    if value.is_infinite() {
        return Err(BadNumber::OutOfRange(shown));
    }
    finite_count(value).map_err(|_| BadNumber::Negative(shown))
}

/// `--var`'s and `--literal`'s `NAME=VALUE` (`flag` names which in errors), split at the last
/// `=` because event names may hold `=` (`cmask=1`). The value follows the counts file's rule
/// ([`number`]): a finite, non-negative number.
pub fn assignment<'a>(text: &'a str, flag: &str) -> Result<(&'a str, f64), String> {
    let shown = tmetric_text::quote(text);
    let (name, value) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{flag} {shown}: expected NAME=VALUE, e.g. `{flag} smt_on=1`"))?;
    if name.trim().is_empty() {
        return Err(format!(
            "{flag} {shown}: the name is empty; expected NAME=VALUE, e.g. `{flag} smt_on=1`"
        ));
    }
    // A negative value is refused as the counts file refuses one, but said in the flag's words:
    // what `--var` and `--literal` give are not counts.
    if value.trim().parse::<f64>().is_ok_and(|v| v < 0.0) {
        let what = if flag == "--literal" {
            "literals (#smt_on, #num_cpus, #system_tsc_freq, ...) are never negative".to_string()
        } else {
            format!(
                "a variable stands for an event, a time or a latency, none of which is ever negative (put the minus in the expression instead: `-{}`)",
                name.trim()
            )
        };
        return Err(format!(
            "{flag} {shown}: {} is negative; {what}",
            tmetric_text::quote(value.trim())
        ));
    }
    let number = number(value).map_err(|e| format!("{flag} {shown}: {e}"))?;
    Ok((name.trim(), number))
}

/// The rule for numeric values: not negative (counts, latencies and instance counts never
/// are). `-0` reads as `0`, so that no division by it yields `-inf`.
fn finite_count(value: f64) -> Result<f64, &'static str> {
    if value < 0.0 { Err("is negative; counts cannot be") } else { Ok(value + 0.0) }
}

/// Parses counts-file text; `name` is used in errors. A UTF-8 byte-order mark is skipped.
pub fn parse(text: &str, name: &str) -> Result<CountsFile, CountsError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut file: CountsFile = match serde_json::from_str::<RawFile>(text) {
        Ok(raw) => raw.0,
        Err(err) => {
            let message = err.to_string();
            // serde_json appends the position to its message; put it in front, compiler style.
            let suffix = format!(" at line {} column {}", err.line(), err.column());
            let message = message.strip_suffix(&suffix).unwrap_or(&message);
            return Err(CountsError::Syntax {
                name: name.to_string(),
                line: err.line(),
                column: err.column(),
                message: message.to_string(),
            });
        }
    };
    file.path = name.to_string();
    Ok(file)
}

struct RawFile(CountsFile);

impl<'de> Deserialize<'de> for RawFile {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(FileVisitor)
    }
}

struct FileVisitor;

impl<'de> Visitor<'de> for FileVisitor {
    type Value = RawFile;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object of event counts, such as {\"INST_RETIRED.ANY\": 123}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawFile, A::Error> {
        let mut file = CountsFile::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "counts" => {
                    let counts: NumberMap = map.next_value()?;
                    file.entries.extend(
                        counts
                            .0
                            .into_iter()
                            .map(|(key, value)| Entry::as_written(key, value, false)),
                    );
                }
                "retire_latency" => {
                    let latencies: NumberMap = map.next_value()?;
                    file.entries.extend(
                        latencies
                            .0
                            .into_iter()
                            .map(|(key, value)| Entry::as_written(key, value, true)),
                    );
                }
                "literals" => file.literals.extend(map.next_value::<LiteralMap>()?.0),
                "source_count" => file.source_counts.extend(map.next_value::<NumberMap>()?.0),
                "aggr_nr" => file.aggr_nrs.extend(map.next_value::<NumberMap>()?.0),
                "model" => file.model = Some(map.next_value::<String>()?),
                "target" => file.counting = target_counting(&map.next_value::<String>()?)?,
                "duration_time_ns" => {
                    let ns = map.next_value::<Count>()?.0;
                    file.entries.push(Entry::new("duration_time", key, ns / 1e9, false));
                }
                _ => {
                    let value = map.next_value::<Count>()?.0;
                    file.entries.push(Entry::as_written(key, value, false));
                }
            }
        }
        Ok(RawFile(file))
    }
}

/// The `target` key: the perf stat options that chose what was counted (`-a`, `-a -C 0-3`,
/// `-C 0-3`, `-p 1234`, `--per-thread -p 1`), or `command` for a workload perf ran: `-a`
/// (`--all-cpus`) is a system-wide count, as perf's `core_wide()` needs.
fn target_counting<E: de::Error>(text: &str) -> Result<tmetric_engine::Counting, E> {
    use tmetric_engine::Counting;
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return Err(E::custom(
            "`target` is empty; expected perf stat's target options (`-a`, `-C 0-3`, `-p PID`) or `command`",
        ));
    }
    Ok(if words.iter().any(|w| matches!(*w, "-a" | "--all-cpus")) {
        Counting::SystemWide("the counts file's `target` (-a)")
    } else {
        Counting::NotSystemWide("the counts file's `target` (no -a)")
    })
}

/// A count: a number, `null` (not supported: NaN), or perf's `-j` strings.
struct Count(f64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CountVisitor)
    }
}

struct CountVisitor;

impl Visitor<'_> for CountVisitor {
    type Value = Count;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, null, \"<not counted>\" or \"<not supported>\"")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Count, E> {
        Ok(Count(v as f64))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Count, E> {
        finite_count(v as f64).map(Count).map_err(|why| E::custom(format!("{v} {why}")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Count, E> {
        finite_count(v).map(Count).map_err(|why| E::custom(format!("{v} {why}")))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Count, E> {
        Ok(Count(f64::NAN))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Count, E> {
        // perf -j prints counts as strings, and these two markers for events without a count;
        // perf's metrics read them as 0 and NaN.
        match v.trim() {
            "<not counted>" => Ok(Count(0.0)),
            "<not supported>" => Ok(Count(f64::NAN)),
            other => number(other).map(Count).map_err(|why| {
                if other.parse::<f64>().is_ok() {
                    E::custom(format!("{why}; expected {}", CountExpecting))
                } else {
                    E::invalid_value(Unexpected::Str(&tmetric_text::quote(v)), &self)
                }
            }),
        }
    }
}

/// [`CountVisitor`]'s expectation, for custom messages.
struct CountExpecting;

impl fmt::Display for CountExpecting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number, null, \"<not counted>\" or \"<not supported>\"")
    }
}

/// An object of counts, in file order.
struct NumberMap(Vec<(String, f64)>);

impl<'de> Deserialize<'de> for NumberMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NumberMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of event names to numbers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NumberMap, A::Error> {
                let mut out = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, Count>()? {
                    out.push((key, value.0));
                }
                Ok(NumberMap(out))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// The `literals` object: names with or without `#`, any case; numbers or booleans.
struct LiteralMap(Vec<(Literal, f64)>);

impl<'de> Deserialize<'de> for LiteralMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LiteralMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of literal names to numbers, such as {\"smt_on\": 1}")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LiteralMap, A::Error> {
                let mut out = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    let Some(literal) = literal_named(&key) else {
                        return Err(de::Error::custom(format!(
                            "unknown literal `{key}`: expected one of {}",
                            literal_names()
                        )));
                    };
                    let value = map.next_value::<LiteralValue>()?.0;
                    out.push((literal, value));
                }
                Ok(LiteralMap(out))
            }
        }
        deserializer.deserialize_map(V)
    }
}

struct LiteralValue(f64);

impl<'de> Deserialize<'de> for LiteralValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LiteralValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a boolean")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LiteralValue, E> {
                Ok(LiteralValue(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LiteralValue, E> {
                finite_count(v as f64)
                    .map(LiteralValue)
                    .map_err(|why| E::custom(format!("{v} {why}")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LiteralValue, E> {
                finite_count(v).map(LiteralValue).map_err(|why| E::custom(format!("{v} {why}")))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<LiteralValue, E> {
                Ok(LiteralValue(f64::from(u8::from(v))))
            }
        }
        deserializer.deserialize_any(V)
    }
}

/// What `eval --expr` reads: given values first (`--var`), then the counts file's keys; the
/// literals.
pub struct ExprValues<'a> {
    /// Values by name, normalised as `tmetric_expr::normalize` does.
    pub vars: std::collections::HashMap<String, f64>,
    /// The counts file, when one is given.
    pub file: Option<&'a CountsFile>,
    /// Every literal's value.
    pub literals: &'a tmetric_engine::Literals,
}

impl tmetric_expr::adhoc::Given for ExprValues<'_> {
    fn value(&self, name: &str) -> Option<(f64, usize)> {
        if let Some(&value) = self.vars.get(name) {
            return Some((value, 1));
        }
        self.file?.value_of(name)
    }

    fn literal(&self, literal: Literal) -> Option<f64> {
        Some(self.literals.get(literal))
    }
}
