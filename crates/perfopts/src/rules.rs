//! perf 6.12's rules for option values that need no run, with perf's messages and what to do:
//! `-r`'s count, `--per-cache`'s level, the cgroups `-G` and `--for-each-cgroup` name, and
//! `perf stat report`'s input without `-i`.

use std::path::PathBuf;

use anyhow::bail;

use crate::exits::perf_exit;

/// `-r N` as perf reads it: any count that is not negative (0 repeats until Ctrl-C; perf
/// documents 100 as the maximum but does not hold to it).
pub fn run_count(text: &str) -> Result<u32, String> {
    match text.trim().parse::<i64>() {
        Ok(n) if n < 0 => {
            Err("Run count must be a positive number (0 repeats until Ctrl-C)".into())
        }
        Ok(n) => u32::try_from(n).map_err(|_| format!("{n} runs are more than tmetric counts")),
        Err(_) => Err(format!("`{text}` is not a number of runs, as in -r 5")),
    }
}

/// `--per-cache=L2` (or `l2`): the cache level; `None` for the last level or a level perf
/// refuses ([`check_cache_level`]).
pub fn cache_level(text: &str) -> Option<u32> {
    let level = text.strip_prefix(['L', 'l'])?;
    (level.len() == 1).then(|| level.parse().ok()).flatten().filter(|l| (1..=4).contains(l))
}

/// perf's `parse_cache_level`: `L` or `l` and one digit, 1 to 4 (`MAX_CACHE_LVL`), with
/// perf's messages.
pub fn check_cache_level(text: &str) -> anyhow::Result<()> {
    let digits = text.strip_prefix(['L', 'l']).filter(|d| d.len() == 1);
    match digits.and_then(|d| d.parse::<u32>().ok()) {
        // perf's option callback refuses it: a usage error, 129.
        Some(level) if level > 4 => Err(perf_exit(
            129,
            format!(
                "--per-cache={text}: perf only supports max cache level of 4 (L1 to L4; without a level, the last level)"
            ),
        )),
        Some(level) if level >= 1 => Ok(()),
        _ => Err(perf_exit(
            129,
            format!(
                "--per-cache={text}: Cache level must be of form L[1-4], or l[1-4] (as --per-cache=L2; without a level, the last level)"
            ),
        )),
    }
}

/// A cgroup named with `-G` or `--for-each-cgroup` must exist (perf stops too: "no access
/// to cgroup").
pub fn check_cgroup(flag: &str, name: &str) -> anyhow::Result<()> {
    let Some(mount) = tmetric_runtime::sys::cgroup_mount() else {
        bail!(
            "{flag} {name}: no cgroup2 (or cgroup v1 perf_event) mount in /proc/self/mounts: mount one, or count without cgroups"
        );
    };
    match tmetric_runtime::sys::open_cgroup_dir(name) {
        Ok(fd) => {
            tmetric_runtime::sys::close_fd(fd);
            Ok(())
        }
        Err(errno) => bail!(
            "{flag} {name}: no access to cgroup {} ({errno}); names are paths under {}, such as `system.slice/ssh.service`",
            mount.join(name.trim_start_matches('/')).display(),
            mount.display()
        ),
    }
}

/// `perf stat report`'s input without `-i`: standard input when it is a pipe, else perf.data.
pub fn report_input() -> PathBuf {
    use std::os::unix::fs::FileTypeExt;
    let piped = std::fs::metadata("/dev/stdin").is_ok_and(|m| m.file_type().is_fifo());
    PathBuf::from(if piped { "-" } else { "perf.data" })
}

#[cfg(test)]
mod tests {
    use super::{cache_level, check_cache_level, run_count};
    use crate::exits::PerfExit;

    #[test]
    fn run_counts_are_whole_numbers_from_zero() {
        assert_eq!(run_count("5"), Ok(5));
        assert_eq!(run_count(" 0 "), Ok(0));
        assert!(run_count("-1").unwrap_err().contains("positive"));
        assert!(run_count("five").unwrap_err().contains("not a number of runs"));
        assert!(run_count("4294967296").unwrap_err().contains("more than tmetric counts"));
    }

    #[test]
    fn cache_levels_are_l1_to_l4_and_others_are_perfs_usage_errors() {
        assert_eq!(cache_level("L2"), Some(2));
        assert_eq!(cache_level("l4"), Some(4));
        assert_eq!(cache_level("L5"), None);
        assert_eq!(cache_level("L"), None);
        assert!(check_cache_level("L3").is_ok());
        for bad in ["L5", "L0", "3", "L12"] {
            let err = check_cache_level(bad).unwrap_err();
            let exit = err.downcast_ref::<PerfExit>().expect("a usage error with perf's code");
            assert_eq!(exit.code, 129, "{bad}");
            assert!(exit.message.starts_with(&format!("--per-cache={bad}: ")), "{}", exit.message);
        }
    }
}
