//! `tmetric record`'s files: perf.data as `perf stat record` writes it with tmetric's plan
//! inside (the default), or JSON lines (docs/record-format.md).
//!
//! * [`format`]: the content as serde types (header, reading lines).
//! * [`header`]: the header from what a run knows ([`HeaderFacts`], built by `stat`).
//! * [`write`]: where and how a run records ([`RecordTo`]), the sink `stat`'s run loop feeds
//!   ([`RecordSink`], [`RunEnd`]) and the JSON-lines writer.
//! * [`perf`]: the perf.data writer, perf's `perf.data.old` handling, the header features from
//!   the machine, and the reading back of tmetric's and perf's files.
//! * [`read`]: a record read back ([`Recording`]) and the JSON-lines reader.
//! * [`playback`]: what `report` prints: the input told apart ([`open`]), the recorded plan
//!   rebuilt through the engine's `Replay` ([`Playback`]).
//! * [`error`]: why a file cannot be read ([`ReadError`]: the file, the line, the kind).
//!
//! The writer takes data (a plan, a target, counts, intervals), never command-line flags, so
//! the CLI's `stat` and `record` depend on this crate and not on each other.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod error;
pub mod format;
pub mod header;
pub mod perf;
pub mod playback;
pub mod read;
pub mod write;

pub use error::{At, Kind, ReadError};
pub use format::{FORMAT, Header, Line, VERSION};
pub use header::HeaderFacts;
pub use playback::{Input, Options, Playback, SplitError, Step, Warning, open};
pub use read::{Interval, Recording, read_jsonl};
pub use write::{Format, RecordSink, RecordTo, RunEnd, WriteError};
