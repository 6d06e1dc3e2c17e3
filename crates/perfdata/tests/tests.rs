//! Integration tests of the perf.data reader and writer: files perf 6.1 wrote, and files the
//! writer makes read back.
mod read;
mod write;

use std::path::{Path, PathBuf};

/// `tests/data` of this crate.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}
