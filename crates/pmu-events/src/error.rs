//! Errors of the vendor loader: the one fatal error (no tree), and what can be wrong with one object.

use std::fmt;
use std::path::PathBuf;

/// Why the vendor tree could not be loaded at all. Everything below the root is tolerated and
/// reported as a [`crate::Diagnostic`] instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VendorError {
    /// The tree root is missing or unreadable.
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// What is wrong with one JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectError {
    /// `"UMask": null`, `"PerPkg": true`, `"UMask": [1]`: a value must be a string (or a number,
    /// read as its decimal text).
    NotString {
        /// The key.
        key: &'static str,
        /// The JSON type found.
        found: &'static str,
    },
    /// `"EventCode": "0xZZ"`, `"UMask": "010"`: not an integer as jevents.py reads it.
    BadNumber {
        /// The key.
        key: &'static str,
        /// The value.
        value: String,
    },
    /// `"MSRIndex": "0x123"`: only 0x1A6/0x1A7 (offcore_rsp), 0x3F6 (ldlat) and 0x3F7 (frontend) are known.
    UnknownMsrIndex {
        /// The value.
        value: String,
    },
    /// `"ArchStdEvent": "NO_SUCH_EVENT"` names no event or metric in the architecture's top-level json files.
    UnknownArchStdEvent {
        /// The name.
        name: String,
    },
    /// `{"EventName": "X", "ArchStdEvent": "frontend_bound"}` where the standard entry is a metric,
    /// so there is no event string to copy.
    ArchStdNotEvent {
        /// The name.
        name: String,
    },
    /// `"PerPkg": "yes"`: a flag must be "0" or "1" (`PEBS`: "0", "1" or "2").
    BadFlag {
        /// The key.
        key: &'static str,
        /// The value.
        value: String,
    },
    /// `"ScaleUnit": "GHz"`: must start with a number, as perf reads it with strtod.
    BadScaleUnit {
        /// The value.
        value: String,
    },
    /// `"MetricConstraint": "NO_GROUP"`.
    BadConstraint {
        /// The value.
        value: String,
    },
    /// `"AggregationMode": "PerSocket"`: only PerChip and PerCore exist.
    BadAggregationMode {
        /// The value.
        value: String,
    },
    /// `"Counter": "0,x"`: neither a list of counter indices nor "Fixed counter N".
    BadCounter {
        /// The value.
        value: String,
    },
    /// `"Compat": "(43"`: not a regular expression.
    BadCompat {
        /// The value.
        value: String,
        /// The regex error.
        message: String,
    },
    /// A metric (`MetricName`, possibly via `ArchStdEvent`) with no `MetricExpr`, or a `MetricExpr` with no name.
    MetricWithoutExpr,
    /// `MetricExpr` on an object with neither `MetricName` nor `ArchStdEvent`.
    ExprWithoutName,
    /// An object with none of `EventName`, `MetricName`, `ArchStdEvent` (outside counter.json).
    Nameless,
    /// A counter.json entry without `Unit` or a count.
    BadCounterInfo,
    /// A key neither perf nor tmetric reads, e.g. the typo `PublicDescrition`.
    UnknownKey {
        /// The key as written.
        key: String,
        /// How many objects have it.
        objects: usize,
        /// In how many files.
        files: usize,
        /// A known key within two edits, when there is one (the likely intent of a typo).
        near: Option<&'static str>,
    },
    /// The same key twice in one object; Python's json (so perf) keeps the last value.
    DuplicateKey {
        /// The key.
        key: &'static str,
    },
    /// An element of the file's array that is not an object.
    NotAnObject {
        /// The JSON type found.
        found: &'static str,
    },
    /// Two events of one table and PMU have the same name (case-insensitively); jevents.py rejects this too.
    DuplicateEvent {
        /// `file:line` of the first one.
        first: String,
    },
}

impl fmt::Display for ObjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotString { key, found } => {
                write!(f, "`{key}` is a JSON {found}; write it as a string, e.g. \"{key}\": \"1\"")
            }
            Self::BadNumber { key, value } => write!(
                f,
                "`{key}` value `{value}` is not an integer (expected decimal without leading zeros, or 0x hex)"
            ),
            Self::UnknownMsrIndex { value } => write!(
                f,
                "unknown `MSRIndex` `{value}`; perf knows 0x1A6/0x1A7 (offcore_rsp), 0x3F6 (ldlat) and 0x3F7 (frontend)"
            ),
            Self::UnknownArchStdEvent { name } => write!(
                f,
                "no event or metric `{name}` in the json files directly in the architecture directory; fix the name"
            ),
            Self::ArchStdNotEvent { name } => write!(
                f,
                "`ArchStdEvent` `{name}` is a metric, so this object (which has `EventName`) gets no event string"
            ),
            Self::BadFlag { key, value } => {
                write!(f, "`{key}` value `{value}` is not a flag; expected \"0\" or \"1\"")
            }
            Self::BadScaleUnit { value } => write!(
                f,
                "`ScaleUnit` `{value}` does not start with a number; write e.g. \"1GHz\" or \"100%\""
            ),
            Self::BadConstraint { value } => write!(
                f,
                "unknown `MetricConstraint` `{value}`; expected NO_GROUP_EVENTS, NO_GROUP_EVENTS_NMI, NO_NMI_WATCHDOG or NO_GROUP_EVENTS_SMT"
            ),
            Self::BadAggregationMode { value } => {
                write!(f, "unknown `AggregationMode` `{value}`; expected PerChip or PerCore")
            }
            Self::BadCounter { value } => write!(
                f,
                "`Counter` `{value}` is neither a list of counter numbers (\"0,1,2,3\") nor \"Fixed counter N\""
            ),
            Self::BadCompat { value, message } => {
                write!(f, "`Compat` `{value}` is not a valid regular expression: {message}")
            }
            Self::MetricWithoutExpr => write!(f, "metric has no `MetricExpr`"),
            Self::ExprWithoutName => write!(f, "`MetricExpr` without `MetricName`; add a name"),
            Self::Nameless => {
                write!(f, "object has no `EventName`, `MetricName` or `ArchStdEvent`; add a name")
            }
            Self::BadCounterInfo => write!(
                f,
                "counter.json entry needs `Unit`, `CountersNumFixed` and `CountersNumGeneric` (non-negative integers)"
            ),
            Self::UnknownKey { key, objects, files, near } => {
                let objects =
                    if *objects == 1 { "1 object".into() } else { format!("{objects} objects") };
                let files = if *files == 1 {
                    String::new()
                } else {
                    format!(" in {files} files, the first here")
                };
                write!(f, "unknown key `{key}` ({objects}{files}), ignored as perf does")?;
                match near {
                    Some(near) => write!(f, "; a typo of `{near}`? Fix the spelling upstream"),
                    None => Ok(()),
                }
            }
            Self::DuplicateKey { key } => write!(
                f,
                "key `{key}` appears more than once; the last value is used, as perf's json reader does"
            ),
            Self::NotAnObject { found } => {
                write!(f, "array element is a JSON {found}, not an event or metric object")
            }
            Self::DuplicateEvent { first } => {
                write!(f, "event name already used in this table and PMU at {first}; rename one")
            }
        }
    }
}

impl VendorError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

/// serde_json's description without its " at line L column C" suffix (the position is printed
/// in front instead).
pub(crate) fn json_message(err: &serde_json::Error) -> String {
    let mut message = err.to_string();
    if let Some(cut) = message.rfind(" at line ") {
        message.truncate(cut);
    }
    message
}
