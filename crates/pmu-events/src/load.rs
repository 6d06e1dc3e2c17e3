//! Walks `pmu-events/arch` and turns every file into tables, expanding `ArchStdEvent` on the way.
//!
//! The walk follows jevents.py: json files directly in `arch/<arch>/` are the architecture-standard
//! entries; a directory with no subdirectory other than `sys` is a model table; a `sys` directory is
//! its own table. Files and directories are visited in name order so the result is deterministic.
//!
//! Only a missing root stops the load. Every other problem (a file that is not JSON, a bad value,
//! an unknown key, a bad mapfile row) becomes a [`Diagnostic`] in [`Tree::diagnostics`], and what
//! still makes sense is kept.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::cpuid::parse_mapfile;
use crate::diag::{Diagnostic, Severity};
use crate::error::{ObjectError, VendorError, json_message};
use crate::event::{Built, Location, Problem, Source, build, topic_of};
use crate::raw::{CounterJson, JsonObject, Key, RawObject};
use crate::scan::{key_line, object_positions};
use crate::tree::{Arch, CounterInfo, Table, Tree, abs, rel_join};
use crate::unit::unit_to_pmu;

/// The directory under the tree root that holds perf's common table (perf 7.x's
/// `arch/common/common/`: the metrics, tool, software and legacy events of every machine)
/// rather than an architecture. Older trees in tmetric's tests hold json files directly in it.
pub const COMMON_DIR: &str = "common";

/// Under `pmu-events/`: tmetric's own generic metrics, merged into every vintage's common table
/// where perf's own common table does not define the same metric.
pub const GENERIC_DIR: &str = "generic";

/// Loads the whole tree rooted at `root` (the `pmu-events/arch` directory).
///
/// Fails only when `root` cannot be read; everything else is tolerated and listed in
/// [`Tree::diagnostics`].
pub fn load_tree(root: &Path) -> Result<Tree, VendorError> {
    let entries = fs::read_dir(root).map_err(|err| VendorError::io(root, err))?;
    drop(entries);
    let mut findings = Findings::default();
    let (dirs, _files) = list_dir(root, "", &mut findings);
    // Walk the directories first (cheap), then read the tables on all cores.
    let no_std = StdEntries::default();
    let mut arches = Vec::new();
    let mut jobs: Vec<TableJob<'_>> = Vec::new();
    let mut std_by_arch = Vec::new();
    for dir in &dirs {
        if dir != COMMON_DIR {
            let (arch, std_entries, paths) = scan_arch(root, dir, &mut findings);
            arches.push(arch);
            std_by_arch.push((std_entries, paths));
        }
    }
    for (arch_index, (std_entries, paths)) in std_by_arch.iter().enumerate() {
        for (rel, name) in paths {
            jobs.push(TableJob {
                arch_index,
                arch: &arches[arch_index].name,
                rel,
                name,
                std_entries,
            });
        }
    }
    // perf 7.x keeps its common table in `common/common/`.
    let common_rel = if abs(root, "common/common").is_dir() { "common/common" } else { COMMON_DIR };
    let common_job = dirs.iter().any(|d| d == COMMON_DIR).then_some(TableJob {
        arch_index: usize::MAX,
        arch: COMMON_DIR,
        rel: common_rel,
        name: COMMON_DIR,
        std_entries: &no_std,
    });
    jobs.extend(common_job);
    let tables = run_jobs(root, &jobs);
    let mut common = Table {
        arch: COMMON_DIR.into(),
        path: COMMON_DIR.into(),
        name: COMMON_DIR.into(),
        ..Table::default()
    };
    let mut arch_tables: Vec<Vec<Table>> = arches.iter().map(|_| Vec::new()).collect();
    // Jobs are in tree order, so the first occurrence of an unknown key is the first in the tree.
    for (job, (table, table_findings)) in jobs.iter().zip(tables) {
        findings.merge(table_findings);
        match arch_tables.get_mut(job.arch_index) {
            Some(list) => list.push(table),
            None => common = table,
        }
    }
    for (arch, mut tables) in arches.iter_mut().zip(arch_tables) {
        tables.sort_by(|a, b| a.path.cmp(&b.path));
        arch.tables = tables;
    }
    Ok(Tree { root: root.to_path_buf(), arches, common, diagnostics: findings.finish() })
}

/// Loads vintage `version` of `pmu_events` (`None`: the base tree `pmu-events/arch`), rebuilt in
/// `scratch` (an empty directory the caller owns, which must outlive the tree: resolving reads
/// files again), with tmetric's generic metrics merged into its common table.
pub fn load_vintage(
    pmu_events: &Path,
    version: Option<&str>,
    scratch: &Path,
) -> Result<Tree, String> {
    let root = match version {
        None => pmu_events.join(crate::vintage::BASE_DIR),
        Some(version) => {
            crate::vintage::materialize(pmu_events, version, scratch).map_err(|e| e.to_string())?;
            scratch.to_path_buf()
        }
    };
    let mut tree = load_tree(&root).map_err(|e| e.to_string())?;
    let generic = pmu_events.join(GENERIC_DIR);
    if generic.is_dir() {
        merge_generic(&mut tree, pmu_events);
    }
    Ok(tree)
}

/// Appends tmetric's generic metrics to the tree's common table, except those the table (perf's)
/// already defines, under their own or perf's name.
fn merge_generic(tree: &mut Tree, pmu_events: &Path) {
    let no_std = StdEntries::default();
    let job = TableJob {
        arch_index: usize::MAX,
        arch: COMMON_DIR,
        rel: GENERIC_DIR,
        name: COMMON_DIR,
        std_entries: &no_std,
    };
    let mut findings = Findings::default();
    let table = load_table(pmu_events, &job, &mut findings);
    let perf_has = |name: &str| {
        let perf_name = tmetric_model::generic::perf_name(name).unwrap_or(name);
        tree.common
            .metrics
            .iter()
            .any(|m| m.name.eq_ignore_ascii_case(name) || m.name.eq_ignore_ascii_case(perf_name))
    };
    let (dropped, keep): (Vec<_>, Vec<_>) =
        table.metrics.into_iter().partition(|m| perf_has(&m.name));
    // perf's metric keeps the groups of tmetric's copy it stands for (`Software`), so a group
    // selects the same quantities in every vintage (`serve`'s default, `-M Software`).
    for ours in &dropped {
        let perf_name = tmetric_model::generic::perf_name(&ours.name).unwrap_or(ours.name.as_str());
        for perf in tree.common.metrics.iter_mut().filter(|m| {
            m.name.eq_ignore_ascii_case(&ours.name) || m.name.eq_ignore_ascii_case(perf_name)
        }) {
            for group in &ours.groups {
                if !perf.groups.contains(group) {
                    perf.groups.push(group.clone());
                }
            }
        }
    }
    if tree.common.arch.is_empty() {
        tree.common.arch = COMMON_DIR.into();
        tree.common.name = COMMON_DIR.into();
        tree.common.path = GENERIC_DIR.into();
    }
    tree.common.metrics.extend(keep);
    tree.common.metric_groups.extend(table.metric_groups);
    tree.diagnostics.extend(findings.finish());
    tree.diagnostics.sort();
}

/// Diagnostics collected so far, plus unknown keys counted over the whole tree (a tree of
/// another vintage can carry the same unused key in thousands of objects: one line per key).
#[derive(Default)]
struct Findings {
    diagnostics: Vec<Diagnostic>,
    /// Unknown key -> its first place and object, and how many objects and files have it.
    unknown_keys: BTreeMap<String, UnknownKey>,
}

struct UnknownKey {
    first: Location,
    object: String,
    objects: usize,
    files: usize,
}

impl Findings {
    fn push(
        &mut self,
        severity: Severity,
        file: &str,
        line: usize,
        object: String,
        message: String,
    ) {
        self.diagnostics.push(Diagnostic {
            file: file.to_string(),
            line,
            object,
            severity,
            message,
        });
    }

    fn merge(&mut self, other: Findings) {
        self.diagnostics.extend(other.diagnostics);
        // Merged in tree order, so the place kept is the first in the tree.
        for (key, unknown) in other.unknown_keys {
            match self.unknown_keys.get_mut(&key) {
                Some(known) => {
                    known.objects += unknown.objects;
                    known.files += unknown.files;
                }
                None => {
                    self.unknown_keys.insert(key, unknown);
                }
            }
        }
    }

    /// Records the unknown keys of one file's objects.
    fn unknown_keys_of(&mut self, rel: &str, bytes: &[u8], objects: &[RawObject]) {
        let mut in_file: BTreeMap<&str, (usize, &RawObject)> = BTreeMap::new();
        for object in objects {
            for key in &object.unknown {
                in_file.entry(key).or_insert((0, object)).0 += 1;
            }
        }
        for (key, (count, object)) in in_file {
            match self.unknown_keys.get_mut(key) {
                Some(known) => {
                    known.objects += count;
                    known.files += 1;
                }
                None => {
                    let line = key_line(bytes, object.start, object.line, key)
                        .unwrap_or_else(|| object.name_line());
                    self.unknown_keys.insert(
                        key.to_string(),
                        UnknownKey {
                            first: Location { file: rel.to_string(), line },
                            object: object.describe(),
                            objects: count,
                            files: 1,
                        },
                    );
                }
            }
        }
    }

    /// All diagnostics, sorted by place so the report is stable.
    fn finish(mut self) -> Vec<Diagnostic> {
        for (key, unknown) in std::mem::take(&mut self.unknown_keys) {
            let near = crate::raw::nearest_key(&key);
            let note = unread_key_note(&key);
            let kind = ObjectError::UnknownKey {
                key,
                objects: unknown.objects,
                files: unknown.files,
                near,
            };
            self.push(
                Severity::Warning,
                &unknown.first.file,
                unknown.first.line,
                unknown.object,
                format!("{kind}{note}"),
            );
        }
        self.diagnostics.sort();
        self.diagnostics.dedup();
        self.diagnostics
    }
}

/// What ignoring a key means, for the unread keys of older trees that change what is counted.
fn unread_key_note(key: &str) -> &'static str {
    match key {
        // perf 6.1's cascadelakex, icelakex, sapphirerapids, skylakex and snowridgex uncore files;
        // newer files fold these bits into `UMask`.
        "UMaskExt" => {
            "; the event strings lack these extended umask bits, so those events count what perf 6.1 counted, not what newer files (which fold them into `UMask`) select"
        }
        _ => "",
    }
}

/// One directory to read into a table.
struct TableJob<'a> {
    /// Index into the architectures, `usize::MAX` for the common table.
    arch_index: usize,
    arch: &'a str,
    rel: &'a str,
    name: &'a str,
    std_entries: &'a StdEntries,
}

/// Loads every job's table in parallel, results in job order.
fn run_jobs(root: &Path, jobs: &[TableJob<'_>]) -> Vec<(Table, Findings)> {
    crate::par::par_map(jobs, |job| {
        let mut findings = Findings::default();
        let table = load_table(root, job, &mut findings);
        (table, findings)
    })
}

/// Subdirectory names and file names of `root/rel`, each sorted; unreadable entries are reported.
fn list_dir(root: &Path, rel: &str, findings: &mut Findings) -> (Vec<String>, Vec<String>) {
    let path = abs(root, rel);
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut unreadable = |err: std::io::Error| {
        let message = format!("cannot read the directory: {err}; skipped");
        findings.push(Severity::Error, rel, 0, String::new(), message);
    };
    let entries = match fs::read_dir(&path) {
        Ok(entries) => entries,
        Err(err) => {
            unreadable(err);
            return (dirs, files);
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                unreadable(err);
                continue;
            }
        };
        // Non-UTF-8 names cannot be vendor files; skip them like any other stray file.
        let Ok(name) = entry.file_name().into_string() else { continue };
        // Follow symlinks so a linked tree loads like a copied one.
        let is_dir = entry.path().is_dir();
        if is_dir {
            dirs.push(name);
        } else {
            files.push(name);
        }
    }
    dirs.sort();
    files.sort();
    (dirs, files)
}

/// Architecture-standard entries of one architecture: lower-case name to (file, object).
#[derive(Default)]
struct StdEntries {
    by_name: HashMap<String, (String, RawObject)>,
}

/// Reads an architecture's mapfile and standard entries, and finds its table directories
/// (relative path and table name, in walk order).
fn scan_arch(
    root: &Path,
    arch: &str,
    findings: &mut Findings,
) -> (Arch, StdEntries, Vec<(String, String)>) {
    let (dirs, files) = list_dir(root, arch, findings);
    let mut mapfile = Vec::new();
    let mut std_entries = StdEntries::default();
    let mut std_files = Vec::new();
    for file in &files {
        let rel = rel_join(arch, file);
        if file == "mapfile.csv" {
            let Some(bytes) = read_bytes(root, &rel, findings) else { continue };
            let text = String::from_utf8_lossy(&bytes);
            let (rows, diagnostics) = parse_mapfile(arch, &rel, &text);
            mapfile = rows;
            findings.diagnostics.extend(diagnostics);
        } else if file.ends_with(".json") {
            let Some((objects, bytes)) = read_objects(root, &rel, findings) else { continue };
            findings.unknown_keys_of(&rel, &bytes, &objects);
            // Later files win on a name clash, like the dict in jevents.py (sorted here for determinism).
            for object in objects {
                // Standard entries are built once on their own so their findings point at their file.
                let built = build(Source { file: &rel, object: &object }, None, "");
                report(findings, &rel, &bytes, &object, built.problems);
                for key in [Key::EventName, Key::MetricName] {
                    if let Some(name) = object.get(key) {
                        std_entries
                            .by_name
                            .insert(name.to_lowercase(), (rel.clone(), object.clone()));
                    }
                }
            }
            std_files.push(rel);
        }
    }
    let mut paths = Vec::new();
    for dir in dirs {
        walk(root, arch, &rel_join(arch, &dir), &mut paths, findings);
    }
    (Arch { name: arch.to_string(), mapfile, tables: Vec::new(), std_files }, std_entries, paths)
}

/// Visits `rel` (below an architecture directory): a model directory is a table; other
/// directories are walked into.
fn walk(
    root: &Path,
    arch: &str,
    rel: &str,
    paths: &mut Vec<(String, String)>,
    findings: &mut Findings,
) {
    let (dirs, files) = list_dir(root, rel, findings);
    let name = rel.strip_prefix(arch).and_then(|r| r.strip_prefix('/')).unwrap_or(rel);
    let is_model = dirs.iter().all(|d| d == "sys");
    if is_model {
        paths.push((rel.to_string(), name.to_string()));
    } else {
        for file in files.iter().filter(|f| f.ends_with(".json")) {
            let message = format!(
                "`{rel}` has model subdirectories, so this file belongs to no table (json files belong in a model directory: a leaf, or one holding only `sys/`); file ignored"
            );
            findings.push(Severity::Error, &rel_join(rel, file), 0, String::new(), message);
        }
    }
    for dir in dirs {
        walk(root, arch, &rel_join(rel, &dir), paths, findings);
    }
}

/// Reads the json files of one directory into a table.
fn load_table(root: &Path, job: &TableJob<'_>, findings: &mut Findings) -> Table {
    let rel = job.rel;
    let (_dirs, files) = list_dir(root, rel, findings);
    let mut table = Table {
        arch: job.arch.to_string(),
        path: rel.to_string(),
        name: job.name.to_string(),
        is_sys: rel.rsplit('/').next() == Some("sys"),
        ..Table::default()
    };
    // (pmu, lower-case name) -> location of the first event, to reject duplicates as jevents.py does.
    let mut seen: HashMap<(String, String), Location> = HashMap::new();
    for file in files.iter().filter(|f| f.ends_with(".json")) {
        let file_rel = rel_join(rel, file);
        match file.as_str() {
            // jevents.py 7.x takes every `*metricgroups.json` as group descriptions (perf's build
            // writes `extra-metricgroups.json` beside the vendor's `metricgroups.json`); files are
            // read in name order and a later description wins, as in its one global dictionary.
            _ if file.ends_with("metricgroups.json") => {
                table.metric_groups.extend(read_metric_groups(root, &file_rel, findings));
            }
            "counter.json" => table.counters = read_counters(root, &file_rel, findings),
            _ => {
                let topic = topic_of(file);
                let Some((objects, bytes)) = read_objects(root, &file_rel, findings) else {
                    continue;
                };
                findings.unknown_keys_of(&file_rel, &bytes, &objects);
                for object in &objects {
                    let own = Source { file: &file_rel, object };
                    let built = match object.get(Key::ArchStdEvent) {
                        None => build(own, None, &topic),
                        Some(std_name) => {
                            match job.std_entries.by_name.get(&std_name.to_lowercase()) {
                                Some((std_file, std_object)) => build(
                                    own,
                                    Some(Source { file: std_file, object: std_object }),
                                    &topic,
                                ),
                                None => unknown_arch_std(own, std_name, &topic),
                            }
                        }
                    };
                    let Built { event, metric, mut problems } = built;
                    if let Some(event) = event {
                        let key = (event.pmu.clone(), event.name.to_lowercase());
                        let here = Location { file: event.file.clone(), line: event.line };
                        if let Some(first) = seen.get(&key) {
                            problems.push(Problem {
                                key: Some(Key::EventName),
                                kind: ObjectError::DuplicateEvent { first: first.to_string() },
                                severity: Severity::Error,
                                outcome: "event dropped, the first one is kept",
                            });
                        } else {
                            seen.insert(key, here);
                            table.events.push(event);
                        }
                    }
                    table.metrics.extend(metric);
                    report(findings, &file_rel, &bytes, object, problems);
                }
            }
        }
    }
    table
}

/// An object whose `ArchStdEvent` names nothing: perf 6.1 ignored the key and kept the object's
/// own fields, perf 6.12 stops. tmetric keeps what the object defines itself, if anything.
fn unknown_arch_std(own: Source<'_>, std_name: &str, topic: &str) -> Built {
    let kind = ObjectError::UnknownArchStdEvent { name: std_name.to_string() };
    let object = own.object;
    let has_own = object.get(Key::EventName).is_some() || object.get(Key::MetricName).is_some();
    if !has_own {
        let problem = Problem {
            key: Some(Key::ArchStdEvent),
            kind,
            severity: Severity::Error,
            outcome: "object dropped",
        };
        return Built { problems: vec![problem], ..Built::default() };
    }
    let mut built = build(own, None, topic);
    built.problems.insert(
        0,
        Problem {
            key: Some(Key::ArchStdEvent),
            kind,
            severity: Severity::Warning,
            outcome: "built from the object's own fields, as perf 6.1 did",
        },
    );
    built
}

/// Turns an object's problems into diagnostics, each at the line of the key it is about.
fn report(
    findings: &mut Findings,
    rel: &str,
    bytes: &[u8],
    object: &RawObject,
    problems: Vec<Problem>,
) {
    for problem in problems {
        let line = problem
            .key
            .and_then(|key| key_line(bytes, object.start, object.line, key.json_name()))
            .unwrap_or_else(|| object.name_line());
        let message = format!("{}; {}", problem.kind, problem.outcome);
        findings.push(problem.severity, rel, line, object.describe(), message);
    }
}

fn read_bytes(root: &Path, rel: &str, findings: &mut Findings) -> Option<Vec<u8>> {
    match fs::read(abs(root, rel)) {
        Ok(bytes) => Some(bytes),
        Err(err) => {
            let message = format!("cannot read the file: {err}; file skipped");
            findings.push(Severity::Error, rel, 0, String::new(), message);
            None
        }
    }
}

/// Parses a whole file. A JSON syntax error skips the file, except trailing commas (a common
/// hand edit that Python's json, and so perf, rejects), which are read as absent with a warning.
fn parse_json<T: serde::de::DeserializeOwned>(
    rel: &str,
    bytes: &[u8],
    findings: &mut Findings,
) -> Option<T> {
    let err = match serde_json::from_slice(bytes) {
        Ok(value) => return Some(value),
        Err(err) => err,
    };
    if err.is_syntax() {
        let (repaired, lines) = strip_trailing_commas(bytes);
        if !lines.is_empty()
            && let Ok(value) = serde_json::from_slice(&repaired)
        {
            for line in lines {
                let message = "trailing comma, which JSON forbids (perf's reader rejects the file); read as absent".to_string();
                findings.push(Severity::Warning, rel, line, String::new(), message);
            }
            return Some(value);
        }
    }
    let message = format!(
        "malformed JSON at column {}: {}; file skipped (fix the file upstream, or in pmu-events/ and re-import)",
        err.column(),
        json_message(&err)
    );
    findings.push(Severity::Error, rel, err.line(), String::new(), message);
    None
}

/// Replaces every comma that is followed (after blanks) by `]` or `}` with a space, outside
/// strings. Returns the new text and the 1-based lines of the commas removed.
pub(crate) fn strip_trailing_commas(bytes: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let mut out = bytes.to_vec();
    let mut lines = Vec::new();
    let mut line = 1;
    let mut pos = 0;
    let mut in_string = false;
    while pos < bytes.len() {
        let byte = bytes[pos];
        if byte == b'\n' {
            line += 1;
        }
        if in_string {
            match byte {
                b'\\' => pos += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if byte == b'"' {
            in_string = true;
        } else if byte == b',' {
            let next = bytes[pos + 1..].iter().find(|b| !b.is_ascii_whitespace());
            if matches!(next, Some(b']' | b'}')) {
                out[pos] = b' ';
                lines.push(line);
            }
        }
        pos += 1;
    }
    (out, lines)
}

/// Reads a json array file into objects with their positions, and the file's bytes (to find key
/// lines for findings). `None` when the file cannot be read or parsed.
fn read_objects(
    root: &Path,
    rel: &str,
    findings: &mut Findings,
) -> Option<(Vec<RawObject>, Vec<u8>)> {
    let bytes = read_bytes(root, rel, findings)?;
    let elements: Vec<JsonObject> = parse_json(rel, &bytes, findings)?;
    let positions = object_positions(&bytes);
    let mut objects = Vec::with_capacity(elements.len());
    // Positions are found for objects only; other elements do not advance through them.
    let mut next_position = 0;
    for (index, element) in elements.into_iter().enumerate() {
        let position = positions.get(next_position).cloned().unwrap_or_default();
        match RawObject::new(element, index, position.line, position.start, position.key_lines) {
            Ok(object) => {
                next_position += 1;
                objects.push(object);
            }
            Err(found) => {
                let kind = ObjectError::NotAnObject { found };
                findings.push(
                    Severity::Warning,
                    rel,
                    0,
                    format!("element #{index}"),
                    format!("{kind}; ignored"),
                );
            }
        }
    }
    Some((objects, bytes))
}

fn read_metric_groups(root: &Path, rel: &str, findings: &mut Findings) -> BTreeMap<String, String> {
    let Some(bytes) = read_bytes(root, rel, findings) else { return BTreeMap::new() };
    let Some(groups) = parse_json::<BTreeMap<String, Value>>(rel, &bytes, findings) else {
        return BTreeMap::new();
    };
    let mut result = BTreeMap::new();
    for (group, description) in groups {
        match description {
            Value::String(text) => {
                result.insert(group, text);
            }
            other => {
                let message = format!(
                    "the description of metric group `{group}` is {}, not a string; group description ignored",
                    json_type(&other)
                );
                findings.push(Severity::Warning, rel, 0, String::new(), message);
            }
        }
    }
    result
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn read_counters(root: &Path, rel: &str, findings: &mut Findings) -> Vec<CounterInfo> {
    let Some(bytes) = read_bytes(root, rel, findings) else { return Vec::new() };
    let Some(entries) = parse_json::<Vec<CounterJson>>(rel, &bytes, findings) else {
        return Vec::new();
    };
    let positions = object_positions(&bytes);
    let count = |value: &Option<Value>| match value {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    let mut counters = Vec::new();
    for (index, entry) in entries.iter().enumerate() {
        let line = positions.get(index).map_or(0, |p| p.line);
        let unit = match &entry.Unit {
            Some(Value::String(unit)) => Some(unit.clone()),
            _ => None,
        };
        match (unit, count(&entry.CountersNumFixed), count(&entry.CountersNumGeneric)) {
            (Some(unit), Some(fixed), Some(generic)) => {
                let pmu = if unit == "core" {
                    "default_core".to_string()
                } else {
                    unit_to_pmu(Some(&unit))
                };
                counters.push(CounterInfo {
                    unit,
                    pmu,
                    fixed,
                    generic,
                    at: Location { file: rel.to_string(), line },
                });
            }
            _ => {
                let message = format!("{}; entry skipped", ObjectError::BadCounterInfo);
                findings.push(Severity::Error, rel, line, format!("object #{index}"), message);
            }
        }
    }
    counters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_commas_are_found_outside_strings() {
        let text = b"[\n {\"A\": \"x,]\",\n  \"B\": \"1\",\n },\n]\n";
        let (out, lines) = strip_trailing_commas(text);
        assert_eq!(lines, [3, 4]);
        assert_eq!(out.len(), text.len());
        let value: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value[0]["A"], "x,]");
        assert_eq!(value.as_array().unwrap().len(), 1);
    }
}
