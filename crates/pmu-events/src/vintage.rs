//! Other perf vintages stored beside the base tree: `pmu-events/vintage/X.Y/` holds only what
//! differs from `pmu-events/arch` (whole new files, line deltas of changed files, the list of
//! removed files), and [`materialize`] rebuilds the vintage's tree byte for byte.
//!
//! Storing deltas keeps four vintages of vendor data at about the size of one: perf's files change
//! a few lines at a time between releases. A delta names the length and hash of the base file it
//! was made from, so a base that changed since is an error naming the file, never a silently
//! different tree.

use std::collections::BTreeSet;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

/// Under `pmu-events/`: one directory per stored vintage.
pub const VINTAGE_DIR: &str = "vintage";
/// The same, from the workspace root.
pub const VINTAGE_DIR_PATH: &str = "pmu-events/vintage";
/// Under `pmu-events/`: the base vintage's tree.
pub const BASE_DIR: &str = "arch";
/// In a vintage directory: base files this vintage does not have, one relative path a line.
pub const REMOVED_FILE: &str = "removed.txt";
/// In a vintage directory: where it came from (written by `cargo xtask import-vendor`).
pub const UPSTREAM_FILE: &str = "UPSTREAM.md";
/// The suffix of a delta file: `x86/skylake/cache.json.delta` rebuilds `x86/skylake/cache.json`.
pub const DELTA_SUFFIX: &str = ".delta";
/// The first line of every delta file.
const DELTA_MAGIC: &str = "tmetric vendor delta 1";

/// A stored vintage that cannot be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VintageError {
    /// The file at fault.
    pub file: PathBuf,
    /// Its line (1-based), 0 when the whole file is meant.
    pub line: usize,
    /// What is wrong and what to do.
    pub message: String,
}

impl fmt::Display for VintageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "{}: {}", self.file.display(), self.message),
            line => write!(f, "{}:{line}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for VintageError {}

fn error(file: &Path, line: usize, message: impl Into<String>) -> VintageError {
    VintageError { file: file.to_path_buf(), line, message: message.into() }
}

/// A vintage's version as numbers, for sorting (`5.10` before `6.1` before `6.12`).
pub fn version_key(version: &str) -> Vec<u32> {
    version.split('.').map(|part| part.parse().unwrap_or(u32::MAX)).collect()
}

/// The vintages stored under `pmu_events/vintage/`, oldest first.
pub fn stored(pmu_events: &Path) -> Vec<String> {
    let mut versions: Vec<String> = fs::read_dir(pmu_events.join(VINTAGE_DIR))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    versions.sort_by_key(|v| version_key(v));
    versions
}

/// The full kernel version (`7.2.13`) an `UPSTREAM.md` in `dir` names.
pub fn kernel_of(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(dir.join(UPSTREAM_FILE)).ok()?;
    text.lines().find_map(|line| {
        Some(line.strip_prefix("- Kernel version: ")?.split_whitespace().next()?.to_string())
    })
}

/// `6.12` from `6.12.117-rc1`.
pub fn major_minor(kernel: &str) -> Option<String> {
    let mut parts = kernel.split(|c: char| !c.is_ascii_digit());
    let (major, minor) = (parts.next()?, parts.next()?);
    (!major.is_empty() && !minor.is_empty()).then(|| format!("{major}.{minor}"))
}

/// The base tree's version and full kernel version (`6.12`, `6.12.117`), from
/// `pmu-events/UPSTREAM.md`.
pub fn base_version(pmu_events: &Path) -> Option<(String, String)> {
    let kernel = kernel_of(pmu_events)?;
    Some((major_minor(&kernel)?, kernel))
}

/// 64-bit FNV-1a: a delta's check that its base file is the one it was made from.
pub fn fnv64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, &b| (hash ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// One step of a delta over the base file's lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step<'a> {
    /// Copy this many base lines.
    Keep(usize),
    /// Skip this many base lines.
    Drop(usize),
    /// Insert these lines.
    Add(Vec<&'a str>),
}

/// Splits text into lines such that joining them with `\n` gives the text back exactly.
pub fn lines(text: &str) -> Vec<&str> {
    text.split('\n').collect()
}

/// Writes a delta from `base` to the steps' result (the writer is `cargo xtask import-vendor`).
pub fn render_delta(base: &[u8], steps: &[Step<'_>]) -> String {
    let mut out = format!("{DELTA_MAGIC}\nbase {} {:016x}\n", base.len(), fnv64(base));
    for step in steps {
        match step {
            Step::Keep(n) => out.push_str(&format!("= {n}\n")),
            Step::Drop(n) => out.push_str(&format!("- {n}\n")),
            Step::Add(lines) => {
                out.push_str(&format!("+ {}\n", lines.len()));
                for line in lines {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
    }
    out
}

/// Applies a delta (`delta_path` names it in errors) to the base file's bytes.
pub fn apply_delta(base: &[u8], delta: &str, delta_path: &Path) -> Result<Vec<u8>, VintageError> {
    let base_text = std::str::from_utf8(base)
        .map_err(|_| error(delta_path, 0, "its base file is not UTF-8; re-import this vintage"))?;
    let mut rows = delta.split('\n').enumerate().map(|(i, row)| (i + 1, row));
    let (_, magic) = rows.next().unwrap_or((1, ""));
    if magic != DELTA_MAGIC {
        return Err(error(delta_path, 1, format!("expected `{DELTA_MAGIC}`, found `{magic}`")));
    }
    let (line, header) = rows.next().unwrap_or((2, ""));
    let expected = format!("base {} {:016x}", base.len(), fnv64(base));
    if header != expected {
        return Err(error(
            delta_path,
            line,
            format!(
                "made from another base file (`{header}`, the base now gives `{expected}`): `pmu-events/arch` changed since this vintage was imported; re-import it with `cargo xtask import-vendor`"
            ),
        ));
    }
    let base_lines = lines(base_text);
    let mut at = 0;
    let mut out: Vec<&str> = Vec::with_capacity(base_lines.len());
    while let Some((line, row)) = rows.next() {
        if row.is_empty() {
            // The final newline of the delta itself.
            if rows.next().is_none() {
                break;
            }
            return Err(error(delta_path, line, "an empty line where a step was expected"));
        }
        let (op, count) = row.split_once(' ').unwrap_or((row, ""));
        let count: usize = count.parse().map_err(|_| {
            error(delta_path, line, format!("expected `= N`, `- N` or `+ N`, found `{row}`"))
        })?;
        match op {
            "=" | "-" => {
                if at + count > base_lines.len() {
                    return Err(error(
                        delta_path,
                        line,
                        format!(
                            "steps past the end of the base file ({} lines); re-import this vintage",
                            base_lines.len()
                        ),
                    ));
                }
                if op == "=" {
                    out.extend_from_slice(&base_lines[at..at + count]);
                }
                at += count;
            }
            "+" => {
                for _ in 0..count {
                    let Some((_, text)) = rows.next() else {
                        return Err(error(
                            delta_path,
                            line,
                            "fewer added lines than the step says",
                        ));
                    };
                    out.push(text);
                }
            }
            _ => {
                return Err(error(
                    delta_path,
                    line,
                    format!("expected `= N`, `- N` or `+ N`, found `{row}`"),
                ));
            }
        }
    }
    if at != base_lines.len() {
        return Err(error(
            delta_path,
            0,
            format!(
                "covers {at} of the base file's {} lines; re-import this vintage",
                base_lines.len()
            ),
        ));
    }
    Ok(out.join("\n").into_bytes())
}

/// Files under `dir`, relative with `/`, sorted (none when `dir` is absent).
pub fn list_files(dir: &Path) -> Result<BTreeSet<String>, VintageError> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeSet<String>) -> Result<(), VintageError> {
        let entries = fs::read_dir(dir).map_err(|e| error(dir, 0, format!("cannot read: {e}")))?;
        for entry in entries {
            let entry = entry.map_err(|e| error(dir, 0, format!("cannot read: {e}")))?;
            let Ok(name) = entry.file_name().into_string() else {
                return Err(error(&entry.path(), 0, "not a UTF-8 name"));
            };
            let rel = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let kind = entry.file_type().map_err(|e| error(&entry.path(), 0, e.to_string()))?;
            if kind.is_dir() {
                walk(&entry.path(), &rel, out)?;
            } else if kind.is_file() {
                out.insert(rel);
            } else {
                return Err(error(&entry.path(), 0, "neither a file nor a directory"));
            }
        }
        Ok(())
    }
    let mut files = BTreeSet::new();
    if dir.exists() {
        walk(dir, "", &mut files)?;
    }
    Ok(files)
}

/// Every file of vintage `version` as (relative path, bytes), sorted by path: the base tree's
/// files without those listed removed, overridden by the vintage's whole files and deltas.
pub fn files(pmu_events: &Path, version: &str) -> Result<Vec<(String, Vec<u8>)>, VintageError> {
    let base_dir = pmu_events.join(BASE_DIR);
    let dir = pmu_events.join(VINTAGE_DIR).join(version);
    if !dir.is_dir() {
        return Err(error(&dir, 0, format!("no stored vintage {version}")));
    }
    let read =
        |path: &Path| fs::read(path).map_err(|e| error(path, 0, format!("cannot read: {e}")));
    let removed_path = dir.join(REMOVED_FILE);
    let removed: BTreeSet<String> = match fs::read_to_string(&removed_path) {
        Ok(text) => text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect(),
        Err(_) => BTreeSet::new(),
    };
    let mut out = std::collections::BTreeMap::new();
    for rel in list_files(&base_dir)? {
        if !removed.contains(&rel) {
            out.insert(rel.clone(), read(&base_dir.join(&rel))?);
        }
    }
    for rel in list_files(&dir)? {
        if rel == REMOVED_FILE || rel == UPSTREAM_FILE {
            continue;
        }
        let path = dir.join(&rel);
        match rel.strip_suffix(DELTA_SUFFIX) {
            Some(target) => {
                let Some(base) = out.get(target) else {
                    return Err(error(
                        &path,
                        0,
                        format!("its base file `arch/{target}` is missing"),
                    ));
                };
                let text =
                    String::from_utf8(read(&path)?).map_err(|_| error(&path, 0, "not UTF-8"))?;
                let bytes = apply_delta(base, &text, &path)?;
                out.insert(target.to_string(), bytes);
            }
            None => {
                out.insert(rel, read(&path)?);
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// Writes vintage `version`'s tree into `dest` (an empty directory the caller owns).
pub fn materialize(pmu_events: &Path, version: &str, dest: &Path) -> Result<(), VintageError> {
    for (rel, bytes) in files(pmu_events, version)? {
        let path = dest.join(&rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|e| error(parent, 0, e.to_string()))?;
        }
        fs::write(&path, bytes).map_err(|e| error(&path, 0, e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_rebuilds_the_file_and_refuses_another_base() {
        let base = "a\nb\nc\nd\n";
        let steps = [Step::Keep(1), Step::Drop(1), Step::Add(vec!["B", "B2"]), Step::Keep(3)];
        let delta = render_delta(base.as_bytes(), &steps);
        let out = apply_delta(base.as_bytes(), &delta, Path::new("x.delta")).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a\nB\nB2\nc\nd\n");
        let err = apply_delta(b"a\nb\n", &delta, Path::new("x.delta")).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("re-import"), "{err}");
        let short = render_delta(base.as_bytes(), &[Step::Keep(2)]);
        let err = apply_delta(base.as_bytes(), &short, Path::new("x.delta")).unwrap_err();
        assert!(err.message.contains("covers 2 of the base file's 5 lines"), "{err}");
    }

    #[test]
    fn versions_sort_as_numbers() {
        let mut v = vec!["7.2", "6.12", "5.10", "6.1"];
        v.sort_by_key(|v| version_key(v));
        assert_eq!(v, ["5.10", "6.1", "6.12", "7.2"]);
    }
}
