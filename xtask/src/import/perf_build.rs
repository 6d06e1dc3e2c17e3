//! perf's build-time JSON generators: the Python scripts perf 7.x's `tools/perf/pmu-events/Build`
//! runs before jevents.py (`extra-metrics.json` and `extra-metricgroups.json` per model, the
//! `lpm_*` metrics among them, and `common/common/legacy-cache.json`), run here at import so the
//! stored tree is the one perf compiles and `regen` never needs Python.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// Scripts perf's `Build` names that write no JSON of their own: jevents.py compiles the tree,
/// the others are libraries of the generators or perf's self-tests.
const NOT_GENERATORS: &[&str] =
    &["jevents.py", "metric.py", "metric_test.py", "common_metrics.py", "models.py"];

/// Where this module's rules come from, for the error that asks for a new one.
const RULES_AT: &str = "xtask/src/import/perf_build.rs";

/// What one generator run must print: perf writes its standard output to `out` unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// A list of metrics or events.
    Array,
    /// Metric group name to description.
    Object,
}

/// One run of a generator, as perf's `Build` makes it:
/// `$(PYTHON) pmu-events/<script> <args...> pmu-events/arch > $(OUTPUT)pmu-events/arch/<out>`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Job {
    script: &'static str,
    /// The arguments before the tree's path (none for `make_legacy_cache.py`, which takes no path).
    args: Vec<String>,
    takes_tree: bool,
    /// The file written, relative to the tree.
    out: String,
    shape: Shape,
}

impl Job {
    fn shown(&self) -> String {
        let mut words = vec![self.script.to_string()];
        words.extend(self.args.iter().cloned());
        if self.takes_tree {
            words.push("pmu-events/arch".to_string());
        }
        words.join(" ")
    }
}

/// What the generators added to a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generated {
    /// Files written per script, by script name.
    pub files: BTreeMap<String, usize>,
}

impl Generated {
    /// One line for UPSTREAM.md and the import's summary, or `None` when nothing ran.
    pub fn describe(&self) -> Option<String> {
        if self.files.is_empty() {
            return None;
        }
        let parts: Vec<String> =
            self.files.iter().map(|(script, n)| format!("{n} from `{script}`")).collect();
        let total: usize = self.files.values().sum();
        Some(format!(
            "{total} files written by perf's build-time generators (as `tools/perf/pmu-events/Build` runs them): {}",
            parts.join(", ")
        ))
    }
}

/// The generators `pmu-events/Build` runs, in script name order; `None` without a `Build` file.
/// A script `Build` names that is neither a known generator nor a known library is an error,
/// so a perf release with a new generator cannot be imported without its output.
fn generators_in_build(pmu_events: &Path) -> Result<Option<Vec<Rule>>> {
    let build = pmu_events.join("Build");
    let text = match fs::read_to_string(&build) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("reading {}", build.display())),
    };
    let mut found = Vec::new();
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_-./".contains(c);
    for word in text.split(|c: char| !is_path_char(c)) {
        let Some(script) = word.strip_prefix("pmu-events/") else { continue };
        if !script.ends_with(".py") || script.contains('/') || NOT_GENERATORS.contains(&script) {
            continue;
        }
        let Some(rule) = Rule::of(script) else {
            bail!(
                "`{}` runs `{script}`, a generator import-vendor does not know, so its JSON would be missing from the imported tree; add its rule (which models, which arguments, which output file) to {RULES_AT}",
                build.display()
            );
        };
        if !found.iter().any(|r: &Rule| r.script() == script) {
            found.push(rule);
        }
    }
    found.sort_unstable_by_key(|r| r.script());
    Ok(Some(found))
}

/// perf 7.2's generator rules (`tools/perf/pmu-events/Build`, `JEVENTS_ARCH=all`).
#[derive(Debug, Clone, Copy)]
enum Rule {
    LegacyCache,
    Amd,
    Arm64,
    Intel,
}

impl Rule {
    const ALL: [Rule; 4] = [Rule::LegacyCache, Rule::Amd, Rule::Arm64, Rule::Intel];

    fn script(self) -> &'static str {
        match self {
            Rule::LegacyCache => "make_legacy_cache.py",
            Rule::Amd => "amd_metrics.py",
            Rule::Arm64 => "arm64_metrics.py",
            Rule::Intel => "intel_metrics.py",
        }
    }

    fn of(script: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.script() == script)
    }

    /// The runs for `tree`, as the `Build` rule's `$(shell ls -d ...)` lists the models.
    fn jobs(self, tree: &Path) -> Result<Vec<Job>> {
        let script = self.script();
        let metric_jobs = |prefix: &[&str], dir: &str, model: &str| {
            let args: Vec<String> =
                prefix.iter().map(|s| s.to_string()).chain([model.to_string()]).collect();
            let metricgroups = std::iter::once("-metricgroups".to_string()).chain(args.clone());
            [
                Job {
                    script,
                    args: args.clone(),
                    takes_tree: true,
                    out: format!("{dir}/{model}/extra-metrics.json"),
                    shape: Shape::Array,
                },
                Job {
                    script,
                    args: metricgroups.collect(),
                    takes_tree: true,
                    out: format!("{dir}/{model}/extra-metricgroups.json"),
                    shape: Shape::Object,
                },
            ]
        };
        let mut jobs = Vec::new();
        match self {
            Rule::LegacyCache => jobs.push(Job {
                script,
                args: Vec::new(),
                takes_tree: false,
                out: "common/common/legacy-cache.json".to_string(),
                shape: Shape::Array,
            }),
            // `ls -d pmu-events/arch/x86/amdzen*`
            Rule::Amd => {
                for model in subdirs(tree, "x86")?.iter().filter(|m| m.starts_with("amdzen")) {
                    jobs.extend(metric_jobs(&[], "x86", model));
                }
            }
            // `ls -d pmu-events/arch/x86/* | grep -v amdzen | grep -v mapfile.csv`
            Rule::Intel => {
                for model in subdirs(tree, "x86")?.iter().filter(|m| !m.contains("amdzen")) {
                    jobs.extend(metric_jobs(&[], "x86", model));
                }
            }
            // `ls -d pmu-events/arch/arm64/arm/* | grep -v cmn`, run with the vendor `arm`.
            Rule::Arm64 => {
                for model in subdirs(tree, "arm64/arm")?.iter().filter(|m| !m.contains("cmn")) {
                    jobs.extend(metric_jobs(&["arm"], "arm64/arm", model));
                }
            }
        }
        Ok(jobs)
    }
}

/// The directories in `tree/rel`, sorted (as `ls` lists them); none when it does not exist.
fn subdirs(tree: &Path, rel: &str) -> Result<Vec<String>> {
    let dir = tree.join(rel);
    let Ok(entries) = fs::read_dir(&dir) else { return Ok(Vec::new()) };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        if entry.path().is_dir() {
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The interpreter perf's build would use: `PYTHON` as perf's Makefile takes it, else `python3`.
pub fn python_from_env() -> OsString {
    std::env::var_os("PYTHON").filter(|p| !p.is_empty()).unwrap_or_else(|| "python3".into())
}

/// Builds the tree perf compiles from the vendor tree `arch` (`tools/perf/pmu-events/arch`):
/// when `arch`'s parent holds perf's `Build` and it names generators, a copy of `arch` with their
/// output in `scratch`, else `arch` itself. The scripts run from a copy in `scratch`, each against
/// the untouched vendor tree (as perf's out-of-tree build reads the source while writing the
/// output tree), with the hash seed fixed so the result depends on the inputs only.
pub fn build_tree(python: &OsString, arch: &Path, scratch: &Path) -> Result<(PathBuf, Generated)> {
    let pmu_events = arch.parent().unwrap_or(arch);
    let scripts = match generators_in_build(pmu_events)? {
        Some(scripts) => scripts,
        // perf 7.x's vendor tree has `common/`; without `Build` beside it the generators'
        // metrics would be silently missing.
        None if arch.join("common").is_dir() => bail!(
            "`{}` has no `Build` beside the vendor tree `{}`, so perf's build-time generators (the `lpm_*` metrics of perf 7.x) cannot be run; give the whole Linux source tree, its tarball or its .deb",
            pmu_events.display(),
            arch.display()
        ),
        None => Vec::new(),
    };
    if scripts.is_empty() {
        return Ok((arch.to_path_buf(), Generated::default()));
    }
    let tools = scratch.join("generators");
    let copy = tools.join("pmu-events");
    fs::create_dir_all(&copy).with_context(|| format!("creating {}", copy.display()))?;
    for entry in
        fs::read_dir(pmu_events).with_context(|| format!("reading {}", pmu_events.display()))?
    {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".py") && entry.path().is_file() {
            fs::copy(entry.path(), copy.join(&name))
                .with_context(|| format!("copying {}", entry.path().display()))?;
        }
    }
    let tree = fs::canonicalize(arch).with_context(|| format!("reading {}", arch.display()))?;
    let mut jobs = Vec::new();
    for rule in &scripts {
        let script = rule.script();
        if !copy.join(script).is_file() {
            bail!(
                "`{}` runs `{script}`, but `{}` does not exist: the source tree is incomplete; unpack all of tools/perf/pmu-events",
                pmu_events.join("Build").display(),
                pmu_events.join(script).display()
            );
        }
        jobs.extend(rule.jobs(&tree)?);
    }
    let outputs = run_jobs(python, &tools, &tree, &jobs)?;
    let built = scratch.join("built-arch");
    copy_tree(&tree, &built)?;
    let mut generated = Generated::default();
    for (job, bytes) in jobs.iter().zip(outputs) {
        let path = built.join(&job.out);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
        *generated.files.entry(job.script.to_string()).or_default() += 1;
    }
    Ok((built, generated))
}

/// Runs every job (two at a time: each is a Python start-up and a walk of its architecture) and
/// returns their outputs in job order, checked to be the JSON perf would compile.
fn run_jobs(python: &OsString, tools: &Path, tree: &Path, jobs: &[Job]) -> Result<Vec<Vec<u8>>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<Vec<u8>>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let result = run_job(python, tools, tree, job);
                    let failed = result.is_err();
                    *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                    if failed {
                        // Stop handing out work; the first error in job order is reported.
                        next.store(jobs.len(), std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        }
    });
    let mut outputs = Vec::with_capacity(jobs.len());
    for slot in results {
        match slot.into_inner().unwrap_or_else(|e| e.into_inner()) {
            Some(result) => outputs.push(result?),
            None => bail!("a generator failed before this one ran"),
        }
    }
    Ok(outputs)
}

fn run_job(python: &OsString, tools: &Path, tree: &Path, job: &Job) -> Result<Vec<u8>> {
    let mut command = Command::new(python);
    command
        .current_dir(tools)
        .arg(format!("pmu-events/{}", job.script))
        .args(&job.args)
        .env("PYTHONHASHSEED", "0")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONSTARTUP");
    if job.takes_tree {
        command.arg(tree);
    }
    let step = format!("perf's build step `{}` (writing `{}`)", job.shown(), job.out);
    let output = match command.output() {
        Ok(output) => output,
        Err(err) => bail!(
            "{step} could not start the Python interpreter `{}`: {err}; perf 7.x generates metrics at build time with Python, so import-vendor needs python3 (install it, or name the interpreter with PYTHON=/path/to/python3)",
            python.to_string_lossy()
        ),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lines: Vec<&str> = stderr.trim_end().lines().collect();
        let tail = lines[lines.len().saturating_sub(8)..].join("\n");
        bail!(
            "{step} failed ({}); its last words:\n{tail}\nperf's own build would stop here too: check that the source tree is complete and unmodified, or try another interpreter with PYTHON=/path/to/python3",
            output.status
        );
    }
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|err| {
        anyhow::anyhow!(
            "{step} printed what is not JSON (line {}, column {}: {err}); expected {}, as jevents.py reads the file",
            err.line(),
            err.column(),
            expected(job.shape)
        )
    })?;
    let shape_ok = match job.shape {
        Shape::Array => value.is_array(),
        Shape::Object => value.is_object(),
    };
    if !shape_ok {
        bail!("{step} printed JSON that is not {}", expected(job.shape));
    }
    Ok(output.stdout)
}

fn expected(shape: Shape) -> &'static str {
    match shape {
        Shape::Array => "a JSON array of metric or event objects",
        Shape::Object => "a JSON object of metric group names to descriptions",
    }
}

/// Copies `from` to `to`: directories made, files (and links to files, as their contents) copied.
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if src.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).with_context(|| format!("copying {}", src.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    /// perf 7.2's `Build` rules give one pair of runs per model, with perf's arguments.
    #[test]
    fn jobs_follow_perfs_build_rules() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path();
        for model in ["x86/amdzen4", "x86/skylake", "arm64/arm/cortex-a76", "arm64/arm/cmn"] {
            fs::create_dir_all(tree.join(model)).unwrap();
        }
        write(&tree.join("x86/mapfile.csv"), "");
        let shown = |rule: Rule| -> Vec<(String, String)> {
            rule.jobs(tree).unwrap().into_iter().map(|j| (j.shown(), j.out)).collect()
        };
        let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            shown(Rule::Amd),
            [
                pair("amd_metrics.py amdzen4 pmu-events/arch", "x86/amdzen4/extra-metrics.json"),
                pair(
                    "amd_metrics.py -metricgroups amdzen4 pmu-events/arch",
                    "x86/amdzen4/extra-metricgroups.json"
                ),
            ]
        );
        assert_eq!(
            shown(Rule::Intel).into_iter().map(|(s, _)| s).collect::<Vec<_>>(),
            [
                "intel_metrics.py skylake pmu-events/arch",
                "intel_metrics.py -metricgroups skylake pmu-events/arch"
            ]
        );
        assert_eq!(
            shown(Rule::Arm64)[0],
            pair(
                "arm64_metrics.py arm cortex-a76 pmu-events/arch",
                "arm64/arm/cortex-a76/extra-metrics.json"
            )
        );
        assert_eq!(shown(Rule::Arm64).len(), 2);
        assert_eq!(
            shown(Rule::LegacyCache),
            [pair("make_legacy_cache.py", "common/common/legacy-cache.json")]
        );
    }
}
