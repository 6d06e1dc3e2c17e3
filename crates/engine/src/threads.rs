//! The threads a run counts apart (`-p`, `-t`, `--per-thread -a`), listed once at the start
//! under a tasks root the caller passes: the real `/proc` normally, even with a simulated PMU
//! (whose machine-description proc root is a tree of its own, while `-p PID` names a real
//! process), or a test's tree.

use std::io;
use std::path::{Path, PathBuf};

/// Which threads to list.
#[derive(Debug, Clone, Copy)]
pub enum Threads<'a> {
    /// Every thread of a process at the start (perf's `-p`).
    Process(i32),
    /// These threads (perf's `-t`), each once, in the order given.
    Listed(&'a [i32]),
    /// Every thread of every process (`--per-thread -a`).
    All,
}

/// A thread as listed: its id and `comm`.
pub type Thread = (i32, String);

/// Why the threads cannot be listed. Worded with perf's flags, as the CLI's users give them.
#[derive(Debug, thiserror::Error)]
pub enum ThreadsError {
    /// `-p PID` names no process.
    #[error("-p {pid}: no such process")]
    NoProcess {
        /// The process.
        pid: i32,
        /// The error listing its `task` directory.
        #[source]
        source: io::Error,
    },
    /// The process exists and every thread's `comm` is gone: it is exiting.
    #[error("-p {pid}: the process has no threads left (it is exiting)")]
    Exiting {
        /// The process.
        pid: i32,
    },
    /// `-t TID` names no thread.
    #[error("-t {tid}: no such thread ({} has no comm)", dir.display())]
    NoThread {
        /// The thread.
        tid: i32,
        /// Its directory under the tasks root.
        dir: PathBuf,
    },
    /// The tasks root cannot be listed.
    #[error("cannot list {}", root.display())]
    List {
        /// The tasks root.
        root: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// Lists `which` threads under `tasks_root`, each with its `comm`, in ascending order per
/// process. A thread or process that ends while it is read is left out.
pub fn list_threads(tasks_root: &Path, which: Threads<'_>) -> Result<Vec<Thread>, ThreadsError> {
    let comm = |path: PathBuf| {
        std::fs::read_to_string(path).map(|c| c.trim_end_matches('\n').to_string()).ok()
    };
    let of_process = |pid: i32, tids: Vec<i32>| -> Vec<Thread> {
        tids.into_iter()
            .filter_map(|t| comm(tasks_root.join(format!("{pid}/task/{t}/comm"))).map(|c| (t, c)))
            .collect()
    };
    match which {
        Threads::Process(pid) => {
            let tids = task_ids(&tasks_root.join(pid.to_string()).join("task"))
                .map_err(|source| ThreadsError::NoProcess { pid, source })?;
            let threads = of_process(pid, tids);
            if threads.is_empty() {
                return Err(ThreadsError::Exiting { pid });
            }
            Ok(threads)
        }
        Threads::Listed(tids) => {
            let mut threads: Vec<Thread> = Vec::new();
            for &tid in tids {
                let dir = tasks_root.join(tid.to_string());
                let Some(name) = comm(dir.join("comm")).filter(|_| tid > 0) else {
                    return Err(ThreadsError::NoThread { tid, dir });
                };
                if !threads.iter().any(|(t, _)| *t == tid) {
                    threads.push((tid, name));
                }
            }
            Ok(threads)
        }
        Threads::All => {
            let entries = std::fs::read_dir(tasks_root)
                .map_err(|source| ThreadsError::List { root: tasks_root.to_path_buf(), source })?;
            let mut pids: Vec<i32> =
                entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
            pids.sort_unstable();
            let mut threads = Vec::new();
            for pid in pids {
                // A process that ended while the root was read has no threads to count.
                let Ok(tids) = task_ids(&tasks_root.join(format!("{pid}/task"))) else { continue };
                threads.extend(of_process(pid, tids));
            }
            Ok(threads)
        }
    }
}

/// The numeric entries of a `PID/task` directory, in ascending order.
pub fn task_ids(dir: &Path) -> io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}
