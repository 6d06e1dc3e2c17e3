//! `--pmu-sim MODEL`: a simulated machine (the simulated kernel and a sysfs tree written for
//! it) that `stat`, `record`, `plan` and `serve` count on, so hardware paths can be tried on
//! any machine. Every output says that it is simulated.
//!
//! tmetric often runs as root, and the tree goes to the temporary directory, which other
//! users can write. So it is written only inside a private directory that this run creates
//! (`mkdtemp`: mode 0700, a fresh random name, never an existing directory, no parents
//! created): nobody else can plant a link in it, so nothing written there lands elsewhere.
//! The directory is removed however the run ends, also when descriptors have run out.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context;
use tmetric_runtime::Sysfs;
use tmetric_sim::{Machine, SimKernel, Workload};

use tmetric_print::out::warn;

/// The simulated machine's private directory, removed on drop.
pub struct PrivateTree {
    root: PathBuf,
    /// Every file and directory written, deepest last (listed right after writing, while
    /// descriptors were to be had), so removal needs no descriptor at all.
    written: Vec<(PathBuf, bool)>,
}

impl PrivateTree {
    /// Creates a private directory in `base` (the temporary directory).
    pub fn create(base: &Path, name: &str) -> anyhow::Result<PrivateTree> {
        use std::os::unix::fs::PermissionsExt;
        // mkdir(2) with mode 0700 creates it private from the first instant (tempfile's
        // default would be 0777 less the umask).
        let dir = tempfile::Builder::new()
            .prefix(&format!("tmetric-pmu-sim-{name}-"))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)
            .map_err(|e| {
                let why = if out_of_descriptors(&e) {
                    "descriptors ran out: raise `ulimit -n`".to_string()
                } else {
                    e.to_string()
                };
                anyhow::anyhow!(
                    "cannot create a private directory for the simulated machine in {} ({why}); set TMPDIR to an existing directory tmetric may write",
                    base.display()
                )
            })?;
        Ok(PrivateTree { root: dir.keep(), written: Vec::new() })
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
            warn(&format!(
                "cannot remove the simulated machine's directory {}: {e}",
                self.root.display()
            ));
        }
    }
}

/// EMFILE or ENFILE: the process's or the system's descriptors ran out (std has no stable
/// `ErrorKind` for them).
pub fn out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(23 | 24))
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

/// Writes the simulated PMU `name`'s tree into a private directory and makes its kernel,
/// running `workload` (a built-in name or a file; the default workload without one).
pub fn simulated(name: &str, workload: Option<&str>) -> anyhow::Result<Simulated> {
    let machine = Machine::named(name).with_context(|| {
        format!(
            "no simulated PMU `{name}`; the simulated machines are {}",
            Machine::names().join(", ")
        )
    })?;
    let mut dir = PrivateTree::create(&std::env::temp_dir(), name)?;
    let (sys, proc_root) = (dir.path().join("sys"), dir.path().join("proc"));
    let written = machine.write_sysfs(&sys, &proc_root);
    // Listed even when writing failed part way, so what was written is removed.
    let listed = dir.note_contents();
    written.map_err(|e| {
        let why = if out_of_descriptors(&e) {
            "descriptors ran out: raise `ulimit -n`".to_string()
        } else {
            e.to_string()
        };
        anyhow::anyhow!(
            "cannot write the simulated sysfs tree under {} ({why})",
            dir.path().display()
        )
    })?;
    listed.with_context(|| format!("cannot list {}", dir.path().display()))?;
    let sysfs = Sysfs::new(&sys);
    let workload = match workload {
        Some(w) => Workload::load(w).context("--pmu-sim-workload")?,
        None => Workload::default_workload(),
    };
    let kernel = SimKernel::with_workload(machine, workload);
    Ok(Simulated { dir, sysfs, proc_root, kernel })
}
