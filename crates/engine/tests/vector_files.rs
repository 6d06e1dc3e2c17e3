//! The vector files both data-driven runners read (`tests/vectors/<kind>/*.toml`): every file
//! parsed, and every case named once and citing where its expectation comes from.

use std::path::Path;

use serde::de::DeserializeOwned;

/// Every `*.toml` file in `dir`, in name order, parsed as `F`, with its file name. A file
/// that does not parse is a failure naming it.
pub(crate) fn load<F: DeserializeOwned>(
    dir: &Path,
    failures: &mut Vec<String>,
) -> Vec<(String, F)> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no vector files in {}", dir.display());
    let mut files = Vec::new();
    for path in &paths {
        let file_name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).expect("vector file readable");
        match toml::from_str(&text) {
            Ok(file) => files.push((file_name, file)),
            Err(e) => failures.push(format!("{file_name}: {e}")),
        }
    }
    files
}

/// A case's label (`file: name`), after checking that `seen` (the file's earlier names) does
/// not hold its name and that it cites its `source`.
pub(crate) fn label(
    file_name: &str,
    name: &str,
    source: &str,
    seen: &mut Vec<String>,
    failures: &mut Vec<String>,
) -> String {
    let at = format!("{file_name}: {name}");
    if seen.iter().any(|s| s == name) {
        failures.push(format!("{at}: the case name is used twice"));
    }
    seen.push(name.to_string());
    if source.trim().is_empty() {
        failures.push(format!("{at}: `source` must say where the expectation comes from"));
    }
    at
}
