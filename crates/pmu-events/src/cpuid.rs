//! `mapfile.csv` rows and perf's cpuid matching rules (per architecture), plus sys-PMU `Compat` matching.

// The catalogue matches cpuids with `regex_lite` (`tmetric_model::cpuid`): validate with it.
use regex_lite::Regex;

use crate::diag::{Diagnostic, Severity};

/// One data row of an architecture's `mapfile.csv`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapRow {
    /// First column: the cpuid regular expression (x86, powerpc, riscv, s390) or MIDR (arm64).
    pub cpuid_regex: String,
    /// Second column, unused by perf.
    pub version: String,
    /// Third column: the model directory relative to `arch/<arch>`, i.e. a [`crate::Table::name`].
    pub dir: String,
    /// Fourth column, e.g. `core`.
    pub event_type: String,
    /// 1-based line in mapfile.csv.
    pub line: usize,
}

/// Parses a mapfile the way jevents.py does: the first line and lines starting with `#` are
/// skipped, as are empty lines. Each row's cpuid pattern is checked so lookups cannot fail later;
/// a bad row is skipped with a diagnostic (`rel` is the mapfile relative to the tree root).
pub(crate) fn parse_mapfile(arch: &str, rel: &str, text: &str) -> (Vec<MapRow>, Vec<Diagnostic>) {
    let mut rows = Vec::new();
    let mut diagnostics = Vec::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line = index + 1;
        let row = raw_line.strip_suffix('\r').unwrap_or(raw_line);
        // jevents.py skips the first row whatever it holds (it is the header).
        if index == 0 || row.is_empty() || row.starts_with('#') {
            continue;
        }
        let mut error = |message: String| {
            diagnostics.push(Diagnostic {
                file: rel.to_string(),
                line,
                object: String::new(),
                severity: Severity::Error,
                message: format!("{message}; row skipped"),
            });
        };
        if row.contains('"') {
            error("quoted CSV fields are not supported; remove the quotes".to_string());
            continue;
        }
        let fields: Vec<&str> = row.split(',').collect();
        if fields.len() < 4 {
            error(format!(
                "expected 4 comma-separated fields (cpuid,version,directory,type), found {}",
                fields.len()
            ));
            continue;
        }
        let cpuid_regex = fields[0].to_string();
        if arch == "arm64" {
            if parse_hex_u64(&cpuid_regex).is_none() {
                error(format!(
                    "arm64 cpuid `{cpuid_regex}` is not a hex MIDR value like 0x00000000410fd0c0"
                ));
                continue;
            }
        } else if let Err(err) = Regex::new(&cpuid_regex) {
            error(format!("cpuid `{cpuid_regex}` is not a valid regular expression: {err}"));
            continue;
        }
        rows.push(MapRow {
            cpuid_regex,
            version: fields[1].to_string(),
            dir: fields[2].to_string(),
            event_type: fields[3].to_string(),
            line,
        });
    }
    (rows, diagnostics)
}

pub use tmetric_model::cpuid::{compat_matches, cpuid_matches, parse_hex_u64};
