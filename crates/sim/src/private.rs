//! `--pmu-sim MODEL`'s machine on disk: the simulated kernel and a sysfs and procfs tree
//! written for it ([`simulated`]), which `stat`, `record`, `plan` and `serve` count on, so
//! hardware paths can be tried on any machine.
//!
//! tmetric often runs as root, and the tree goes to the temporary directory, which other
//! users can write. So it is written only inside a private directory that this run creates
//! ([`PrivateTree`], `mkdtemp`: mode 0700, a fresh random name, never an existing directory,
//! no parents created): nobody else can plant a link in it, so nothing written there lands
//! elsewhere. The directory is removed however the run ends, also when descriptors have run
//! out. Failures are typed ([`SetupError`]).

use std::io;
use std::path::{Path, PathBuf};

use tmetric_runtime::Sysfs;
use tmetric_runtime::sys::out_of_descriptors;

use crate::{Machine, MachineError, SimKernel, SimWorkload, SimWorkloadError};

/// Why the simulated machine cannot be set up; its `Display` says what to do.
#[derive(Debug)]
pub enum SetupError {
    /// No simulated machine has this name.
    NoMachine(String),
    /// The private directory cannot be created in `base` (the temporary directory).
    TempDir {
        /// The directory it was to be created in.
        base: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// The tree cannot be written into the private directory.
    Write {
        /// The private directory.
        dir: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// What was written cannot be listed (for its removal).
    List {
        /// The private directory.
        dir: PathBuf,
        /// The I/O error.
        source: io::Error,
    },
    /// `--pmu-sim-workload` cannot be loaded.
    Workload(SimWorkloadError),
    /// `--pmu-sim`'s machine file cannot be loaded.
    Machine(MachineError),
}

/// An I/O error's text, or the remedy when descriptors ran out.
fn why(e: &io::Error) -> String {
    if out_of_descriptors(e) {
        "descriptors ran out: raise `ulimit -n`".to_string()
    } else {
        e.to_string()
    }
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupError::NoMachine(name) => write!(
                f,
                "no simulated PMU `{name}`; the simulated machines are {}, and the guests without a virtual PMU {}; or give a machine file (`FILE.json`, as in crates/sim/machines/)",
                Machine::names().join(", "),
                Machine::guests().join(", ")
            ),
            SetupError::TempDir { base, source } => write!(
                f,
                "cannot create a private directory for the simulated machine in {} ({}); set TMPDIR to an existing directory tmetric may write",
                base.display(),
                why(source)
            ),
            SetupError::Write { dir, source } => write!(
                f,
                "cannot write the simulated sysfs tree under {} ({})",
                dir.display(),
                why(source)
            ),
            SetupError::List { dir, .. } => write!(f, "cannot list {}", dir.display()),
            SetupError::Workload(_) => f.write_str("--pmu-sim-workload"),
            SetupError::Machine(_) => f.write_str("--pmu-sim"),
        }
    }
}

impl std::error::Error for SetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SetupError::List { source, .. } => Some(source),
            SetupError::Workload(e) => Some(e),
            SetupError::Machine(e) => Some(e),
            _ => None,
        }
    }
}

/// The simulated machine's private directory, removed on drop.
pub struct PrivateTree {
    root: PathBuf,
    /// Says on drop that the directory could not be removed (the front end's warning).
    warn: fn(&str),
    /// Every file and directory written, deepest last (listed right after writing, while
    /// descriptors were to be had), so removal needs no descriptor at all.
    written: Vec<(PathBuf, bool)>,
    /// Stop signals caught from before the directory exists until it is removed: one that
    /// came during set-up killed tmetric and left the directory behind. Caught, it waits in
    /// the self-pipe for the run loop, which ends the run; dropped after the removal.
    _signals: Option<tmetric_runtime::signal::SignalGuard>,
}

impl PrivateTree {
    /// Creates a private directory in `base` (the temporary directory); `warn` says on drop
    /// when it cannot be removed.
    pub fn create(base: &Path, name: &str, warn: fn(&str)) -> Result<PrivateTree, SetupError> {
        use std::os::unix::fs::PermissionsExt;
        let signals = tmetric_runtime::signal::catch_stop_signals_early().ok();
        // `name` may be a machine file's path: only its last part, in plain characters, names
        // the directory, which must stay a child of `base`.
        let tag: String = Path::new(name)
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default()
            .chars()
            .take(32)
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .collect();
        // mkdir(2) with mode 0700 creates it private from the first instant (tempfile's
        // default would be 0777 less the umask).
        let dir = tempfile::Builder::new()
            .prefix(&format!("tmetric-pmu-sim-{tag}-"))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)
            .map_err(|source| SetupError::TempDir { base: base.to_path_buf(), source })?;
        Ok(PrivateTree { root: dir.keep(), warn, written: Vec::new(), _signals: signals })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Lists what is in the directory now, one directory handle open at a time.
    pub fn note_contents(&mut self) -> io::Result<()> {
        let mut written = Vec::new();
        list(&self.root, &mut written)?;
        self.written = written;
        Ok(())
    }

    /// Removes the directory and everything in it; links are removed, never followed.
    fn remove(&self) -> io::Result<()> {
        // By name first (no descriptor needed), children before their directories.
        for (path, is_dir) in self.written.iter().rev() {
            let _ = if *is_dir { std::fs::remove_dir(path) } else { std::fs::remove_file(path) };
        }
        match std::fs::remove_dir(&self.root) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            // Something not listed: walk what is left.
            Err(_) => remove_listed(&self.root),
        }
    }
}

impl Drop for PrivateTree {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            (self.warn)(&format!(
                "cannot remove the simulated machine's directory {}: {e}",
                self.root.display()
            ));
        }
    }
}

/// Appends the entries under `dir` (parents before children), closing each directory
/// handle before descending, so at most one is open.
fn list(dir: &Path, out: &mut Vec<(PathBuf, bool)>) -> io::Result<()> {
    let entries: Vec<(PathBuf, bool)> = std::fs::read_dir(dir)?
        .map(|e| {
            let e = e?;
            // The entry's own type: a link is a file here, never followed.
            Ok((e.path(), e.file_type()?.is_dir()))
        })
        .collect::<io::Result<_>>()?;
    for (path, is_dir) in entries {
        out.push((path.clone(), is_dir));
        if is_dir {
            list(&path, out)?;
        }
    }
    Ok(())
}

/// Removes `dir` and what is in it, one directory handle at a time.
fn remove_listed(dir: &Path) -> io::Result<()> {
    let mut entries = Vec::new();
    list(dir, &mut entries)?;
    for (path, is_dir) in entries.iter().rev() {
        if *is_dir {
            std::fs::remove_dir(path)?;
        } else {
            std::fs::remove_file(path)?;
        }
    }
    std::fs::remove_dir(dir)
}

/// A simulated machine: its private sysfs and procfs tree (removed on drop) and its kernel.
pub struct Simulated {
    /// The private directory.
    pub dir: PrivateTree,
    /// Its sysfs tree.
    pub sysfs: Sysfs,
    /// Its procfs root.
    pub proc_root: PathBuf,
    /// The simulated kernel.
    pub kernel: SimKernel,
}

/// Writes `machine`'s sysfs and procfs tree (`sys/`, `proc/`) into a new private directory
/// in the temporary directory; `warn` says on drop when it cannot be removed.
pub fn private_tree(
    machine: &Machine,
    name: &str,
    warn: fn(&str),
) -> Result<PrivateTree, SetupError> {
    let mut dir = PrivateTree::create(&std::env::temp_dir(), name, warn)?;
    let written = machine.write_sysfs(&dir.path().join("sys"), &dir.path().join("proc"));
    // Listed even when writing failed part way, so what was written is removed.
    let listed = dir.note_contents();
    written.map_err(|source| SetupError::Write { dir: dir.path().to_path_buf(), source })?;
    listed.map_err(|source| SetupError::List { dir: dir.path().to_path_buf(), source })?;
    Ok(dir)
}

/// The simulated machine `name` (a built-in name or a machine file), or the error that lists
/// the machines there are or says what is wrong with the file.
pub fn machine(name: &str) -> Result<Machine, SetupError> {
    match Machine::load(name) {
        Some(loaded) => loaded.map_err(SetupError::Machine),
        None => Err(SetupError::NoMachine(name.to_string())),
    }
}

/// Writes the simulated PMU `name`'s (a built-in name or a machine file) tree into a private directory and makes its kernel,
/// running `workload` (a built-in name or a file; the default workload without one); `warn`
/// says on drop when the directory cannot be removed.
pub fn simulated(
    name: &str,
    workload: Option<&str>,
    warn: fn(&str),
) -> Result<Simulated, SetupError> {
    let workload = match workload {
        Some(w) => SimWorkload::load(w).map_err(SetupError::Workload)?,
        None => SimWorkload::default_workload(),
    };
    // The workload's `kernel.hz` is the kernel's, so the tree's
    // `perf_event_mux_interval_ms` says the interval the kernel rotates at.
    let machine = match workload.kernel.hz {
        Some(hz) => machine(name)?.with_hz(hz),
        None => machine(name)?,
    };
    let dir = private_tree(&machine, name, warn)?;
    let sysfs = Sysfs::new(dir.path().join("sys"));
    let proc_root = dir.path().join("proc");
    let kernel = SimKernel::with_workload(machine, workload);
    Ok(Simulated { dir, sysfs, proc_root, kernel })
}
