//! Errors of the vendor loader: every one names the file, and where it helps the line and the object.

use std::fmt;
use std::path::PathBuf;

/// Why the vendor tree could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VendorError {
    /// A file or directory could not be read, or the tree root is missing.
    #[error("cannot read `{}`: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A `.json` file is not valid JSON, or not of the expected shape (an array of objects, or for
    /// `metricgroups.json` an object of strings).
    #[error(
        "{}:{line}:{column}: malformed JSON: {message}; fix the file (vendor files come from `cargo xtask import-vendor`)",
        path.display()
    )]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// serde_json's description, without its position suffix.
        message: String,
    },
    /// One event or metric object has a bad value.
    #[error("{}:{line}: {object}: {kind}", path.display())]
    Object {
        /// The file holding the object.
        path: PathBuf,
        /// 1-based line of the object (its `EventName`/`MetricName` key, else its `{`).
        line: usize,
        /// Which object: ``event `X` ``, ``metric `Y` `` or `object #N`.
        object: String,
        /// What is wrong.
        kind: ObjectError,
    },
    /// A row of a `mapfile.csv` is malformed.
    #[error("{}:{line}: {message}", path.display())]
    Mapfile {
        /// The mapfile.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// What is wrong and what to do.
        message: String,
    },
    /// A `.json` file sits in a directory that is neither an architecture directory nor a model
    /// directory, so it belongs to no table.
    #[error(
        "`{}` is in `{dir}`, which has model subdirectories; json files belong in a model directory (a leaf, or one holding only `sys/`)",
        path.display()
    )]
    StrayFile {
        /// The file.
        path: PathBuf,
        /// Its directory, relative to the tree root.
        dir: String,
    },
}

/// What is wrong with one JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ObjectError {
    /// `"UMask": 4`: every value must be a JSON string (except the `CountersNum*` counts).
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
                write!(
                    f,
                    "`{key}` is a JSON {found}; write it as a string, e.g. \"{key}\": \"0x1\""
                )
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

    pub(crate) fn json(path: impl Into<PathBuf>, err: &serde_json::Error) -> Self {
        let mut message = err.to_string();
        // serde_json appends " at line L column C"; the position is printed in front instead.
        if let Some(cut) = message.rfind(" at line ") {
            message.truncate(cut);
        }
        Self::Json { path: path.into(), line: err.line(), column: err.column(), message }
    }
}
