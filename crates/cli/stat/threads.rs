//! The threads of `-p`, `-t` and `--per-thread -a`, listed once from procfs at the start.

use super::*;

/// The threads of `-p`, `-t` and `--per-thread -a`, each with its `comm`, listed once under
/// the real `/proc` (a simulated PMU still counts real tasks); `None` for other targets.
pub(super) fn listed_threads(args: &StatArgs) -> anyhow::Result<Option<Vec<(i32, String)>>> {
    let proc_root = Path::new("/proc");
    let comm = |path: PathBuf| {
        std::fs::read_to_string(path).map(|c| c.trim_end_matches('\n').to_string()).ok()
    };
    if let Some(pid) = args.pid {
        let tids = task_ids(&proc_root.join(pid.to_string()).join("task"))
            .with_context(|| format!("-p {pid}: no such process"))?;
        let threads: Vec<(i32, String)> = tids
            .into_iter()
            .filter_map(|t| comm(proc_root.join(format!("{pid}/task/{t}/comm"))).map(|c| (t, c)))
            .collect();
        if threads.is_empty() {
            bail!("-p {pid}: the process has no threads left (it is exiting)");
        }
        return Ok(Some(threads));
    }
    if !args.tid.is_empty() {
        let mut threads = Vec::new();
        for &tid in &args.tid {
            let name = comm(proc_root.join(format!("{tid}/comm")))
                .filter(|_| tid > 0)
                .with_context(|| {
                    format!(
                        "-t {tid}: no such thread ({} has no comm)",
                        proc_root.join(tid.to_string()).display()
                    )
                })?;
            if !threads.iter().any(|(t, _)| *t == tid) {
                threads.push((tid, name));
            }
        }
        return Ok(Some(threads));
    }
    if args.per_thread && args.all_cpus {
        let mut threads = Vec::new();
        let entries = std::fs::read_dir(proc_root).context("cannot list /proc")?;
        let mut pids: Vec<i32> =
            entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect();
        pids.sort_unstable();
        for pid in pids {
            // A process that ended while /proc was read has no threads to count.
            let Ok(tids) = task_ids(&proc_root.join(format!("{pid}/task"))) else { continue };
            threads.extend(tids.into_iter().filter_map(|t| {
                comm(proc_root.join(format!("{pid}/task/{t}/comm"))).map(|c| (t, c))
            }));
        }
        return Ok(Some(threads));
    }
    Ok(None)
}

/// The numeric entries of a `/proc/PID/task` directory, in ascending order.
pub(super) fn task_ids(dir: &Path) -> io::Result<Vec<i32>> {
    let mut tids: Vec<i32> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    Ok(tids)
}
