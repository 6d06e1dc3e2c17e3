//! Walks `pmu-events/arch` and turns every file into tables, expanding `ArchStdEvent` on the way.
//!
//! The walk follows jevents.py: json files directly in `arch/<arch>/` are the architecture-standard
//! entries; a directory with no subdirectory other than `sys` is a model table; a `sys` directory is
//! its own table. Files and directories are visited in name order so the result is deterministic.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::Path;

use serde_json::Value;

use crate::cpuid::parse_mapfile;
use crate::error::{ObjectError, VendorError};
use crate::event::{Location, Source, build, topic_of};
use crate::raw::{CounterJson, JsonObject, Key, RawObject};
use crate::scan::object_positions;
use crate::tree::{Arch, CounterInfo, Table, Tree, abs, rel_join};
use crate::unit::unit_to_pmu;

/// The directory under the tree root that holds tmetric's own metrics rather than an architecture.
pub const COMMON_DIR: &str = "common";

/// Loads the whole tree rooted at `root` (the `pmu-events/arch` directory).
pub fn load_tree(root: &Path) -> Result<Tree, VendorError> {
    let (dirs, _files) = list_dir(root, "")?;
    // Walk the directories first (cheap), then read the tables on all cores.
    let no_std = StdEntries::default();
    let mut arches = Vec::new();
    let mut jobs: Vec<TableJob<'_>> = Vec::new();
    let mut std_by_arch = Vec::new();
    for dir in &dirs {
        if dir != COMMON_DIR {
            let (arch, std_entries, paths) = scan_arch(root, dir)?;
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
    let common_job = dirs.iter().any(|d| d == COMMON_DIR).then_some(TableJob {
        arch_index: usize::MAX,
        arch: COMMON_DIR,
        rel: COMMON_DIR,
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
    // Jobs are in tree order, so the first error reported is the first in the tree.
    for (job, table) in jobs.iter().zip(tables) {
        let table = table?;
        match arch_tables.get_mut(job.arch_index) {
            Some(list) => list.push(table),
            None => common = table,
        }
    }
    for (arch, mut tables) in arches.iter_mut().zip(arch_tables) {
        tables.sort_by(|a, b| a.path.cmp(&b.path));
        arch.tables = tables;
    }
    Ok(Tree { root: root.to_path_buf(), arches, common })
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
fn run_jobs(root: &Path, jobs: &[TableJob<'_>]) -> Vec<Result<Table, VendorError>> {
    crate::par::par_map(jobs, |job| load_table(root, job.arch, job.rel, job.name, job.std_entries))
}

/// Subdirectory names and file names of `root/rel`, each sorted.
fn list_dir(root: &Path, rel: &str) -> Result<(Vec<String>, Vec<String>), VendorError> {
    let path = abs(root, rel);
    let entries = fs::read_dir(&path).map_err(|err| VendorError::io(&path, err))?;
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|err| VendorError::io(&path, err))?;
        let file_type = entry.file_type().map_err(|err| VendorError::io(entry.path(), err))?;
        // Non-UTF-8 names cannot be vendor files; skip them like any other stray file.
        let Ok(name) = entry.file_name().into_string() else { continue };
        // Follow symlinks so a linked tree loads like a copied one.
        let is_dir = file_type.is_dir() || (file_type.is_symlink() && entry.path().is_dir());
        if is_dir {
            dirs.push(name);
        } else {
            files.push(name);
        }
    }
    dirs.sort();
    files.sort();
    Ok((dirs, files))
}

/// Architecture-standard entries of one architecture: lower-case name to (file, object).
#[derive(Default)]
struct StdEntries {
    by_name: HashMap<String, (String, RawObject)>,
}

/// Reads an architecture's mapfile and standard entries, and finds its table directories
/// (relative path and table name, in walk order).
#[allow(clippy::type_complexity)]
fn scan_arch(
    root: &Path,
    arch: &str,
) -> Result<(Arch, StdEntries, Vec<(String, String)>), VendorError> {
    let (dirs, files) = list_dir(root, arch)?;
    let mut mapfile = Vec::new();
    let mut std_entries = StdEntries::default();
    let mut std_files = Vec::new();
    for file in &files {
        let rel = rel_join(arch, file);
        if file == "mapfile.csv" {
            let path = abs(root, &rel);
            let text = fs::read_to_string(&path).map_err(|err| VendorError::io(&path, err))?;
            mapfile = parse_mapfile(arch, &path, &text)?;
        } else if file.ends_with(".json") {
            // Later files win on a name clash, like the dict in jevents.py (sorted here for determinism).
            for object in read_objects(root, &rel)? {
                // Standard entries are built once on their own so their errors point at their file.
                build(Source { file: &rel, object: &object }, None, "")
                    .map_err(|kind| object_error(root, &rel, &object, kind))?;
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
        walk(root, arch, &rel_join(arch, &dir), &mut paths)?;
    }
    Ok((
        Arch { name: arch.to_string(), mapfile, tables: Vec::new(), std_files },
        std_entries,
        paths,
    ))
}

/// Visits `rel` (below an architecture directory): a model directory is a table; other
/// directories are walked into.
fn walk(
    root: &Path,
    arch: &str,
    rel: &str,
    paths: &mut Vec<(String, String)>,
) -> Result<(), VendorError> {
    let (dirs, files) = list_dir(root, rel)?;
    let name = rel.strip_prefix(arch).and_then(|r| r.strip_prefix('/')).unwrap_or(rel);
    let is_model = dirs.iter().all(|d| d == "sys");
    if is_model {
        paths.push((rel.to_string(), name.to_string()));
    } else if let Some(file) = files.iter().find(|f| f.ends_with(".json")) {
        return Err(VendorError::StrayFile {
            path: abs(root, &rel_join(rel, file)),
            dir: rel.to_string(),
        });
    }
    for dir in dirs {
        walk(root, arch, &rel_join(rel, &dir), paths)?;
    }
    Ok(())
}

/// Reads the json files of one directory into a table.
fn load_table(
    root: &Path,
    arch: &str,
    rel: &str,
    name: &str,
    std_entries: &StdEntries,
) -> Result<Table, VendorError> {
    let (_dirs, files) = list_dir(root, rel)?;
    let mut table = Table {
        arch: arch.to_string(),
        path: rel.to_string(),
        name: name.to_string(),
        is_sys: rel.rsplit('/').next() == Some("sys"),
        ..Table::default()
    };
    // (pmu, lower-case name) -> location of the first event, to reject duplicates as jevents.py does.
    let mut seen: HashMap<(String, String), Location> = HashMap::new();
    for file in files.iter().filter(|f| f.ends_with(".json")) {
        let file_rel = rel_join(rel, file);
        match file.as_str() {
            "metricgroups.json" => table.metric_groups = read_metric_groups(root, &file_rel)?,
            "counter.json" => table.counters = read_counters(root, &file_rel)?,
            _ => {
                let topic = topic_of(file);
                for object in read_objects(root, &file_rel)? {
                    let std = match object.get(Key::ArchStdEvent) {
                        None => None,
                        Some(std_name) => match std_entries.by_name.get(&std_name.to_lowercase()) {
                            Some((std_file, std_object)) => {
                                Some(Source { file: std_file, object: std_object })
                            }
                            None => {
                                let kind =
                                    ObjectError::UnknownArchStdEvent { name: std_name.to_string() };
                                return Err(object_error(root, &file_rel, &object, kind));
                            }
                        },
                    };
                    let (event, metric) =
                        build(Source { file: &file_rel, object: &object }, std, &topic)
                            .map_err(|kind| object_error(root, &file_rel, &object, kind))?;
                    if event.is_none() && metric.is_none() {
                        return Err(object_error(root, &file_rel, &object, ObjectError::Nameless));
                    }
                    if let Some(event) = event {
                        let key = (event.pmu.clone(), event.name.to_lowercase());
                        let here = Location { file: event.file.clone(), line: event.line };
                        if let Some(first) = seen.get(&key) {
                            let kind = ObjectError::DuplicateEvent { first: first.to_string() };
                            return Err(object_error(root, &file_rel, &object, kind));
                        }
                        seen.insert(key, here);
                        table.events.push(event);
                    }
                    if let Some(metric) = metric {
                        table.metrics.push(metric);
                    }
                }
            }
        }
    }
    Ok(table)
}

fn object_error(root: &Path, rel: &str, object: &RawObject, kind: ObjectError) -> VendorError {
    VendorError::Object {
        path: abs(root, rel),
        line: object.name_line(),
        object: object.describe(),
        kind,
    }
}

fn read_bytes(root: &Path, rel: &str) -> Result<Vec<u8>, VendorError> {
    let path = abs(root, rel);
    fs::read(&path).map_err(|err| VendorError::io(&path, err))
}

/// Reads a json array file into checked objects with their line numbers.
fn read_objects(root: &Path, rel: &str) -> Result<Vec<RawObject>, VendorError> {
    let bytes = read_bytes(root, rel)?;
    let objects: Vec<JsonObject> =
        serde_json::from_slice(&bytes).map_err(|err| VendorError::json(abs(root, rel), &err))?;
    let positions = object_positions(&bytes);
    let mut result = Vec::with_capacity(objects.len());
    for (index, object) in objects.into_iter().enumerate() {
        // The scanner finds one position per object of valid JSON; fall back to line 0 if not.
        let position = positions.get(index).cloned().unwrap_or_default();
        let raw = RawObject::new(object, index, position.line, position.key_lines).map_err(
            |(object, kind)| {
                let line = position.key_lines[..2]
                    .iter()
                    .copied()
                    .find(|&l| l != 0)
                    .unwrap_or(position.line);
                VendorError::Object { path: abs(root, rel), line, object, kind }
            },
        )?;
        result.push(raw);
    }
    Ok(result)
}

fn read_metric_groups(root: &Path, rel: &str) -> Result<BTreeMap<String, String>, VendorError> {
    let bytes = read_bytes(root, rel)?;
    serde_json::from_slice(&bytes).map_err(|err| VendorError::json(abs(root, rel), &err))
}

fn read_counters(root: &Path, rel: &str) -> Result<Vec<CounterInfo>, VendorError> {
    let bytes = read_bytes(root, rel)?;
    let entries: Vec<CounterJson> =
        serde_json::from_slice(&bytes).map_err(|err| VendorError::json(abs(root, rel), &err))?;
    let positions = object_positions(&bytes);
    let count = |value: &Option<Value>| match value {
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()),
        Some(Value::String(s)) => s.trim().parse().ok(),
        _ => None,
    };
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| {
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
                    Ok(CounterInfo {
                        unit,
                        pmu,
                        fixed,
                        generic,
                        at: Location { file: rel.to_string(), line },
                    })
                }
                _ => Err(VendorError::Object {
                    path: abs(root, rel),
                    line,
                    object: format!("object #{index}"),
                    kind: ObjectError::BadCounterInfo,
                }),
            }
        })
        .collect()
}
