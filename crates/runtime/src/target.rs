//! Which CPUs and tasks a run counts and until when: `-C` CPU lists checked against the online
//! CPUs (without enumerating a huge range), and the tasks of `-p`/`-t` whose exit ends the
//! run, as perf 6.12 ends it.

use crate::run::Watched;

/// Why a `-C` list cannot be counted. Its `Display` names the list and says what to write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("-C `{list}`: {problem}")]
pub struct CpuListError {
    /// The list as given.
    pub list: String,
    /// What is wrong with it.
    pub problem: CpuListProblem,
}

/// What is wrong with a `-C` list; `online` is the online CPUs as a kernel-style list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuListProblem {
    /// Nothing was given.
    #[error("no CPU given; expected a CPU list such as `0-3,8` (online: {online})")]
    Empty {
        /// The online CPUs.
        online: String,
    },
    /// Two commas with nothing between them.
    #[error("an empty item between commas; expected a CPU list such as `0-3,8`")]
    EmptyItem,
    /// A number past `u32`.
    #[error("CPU {cpu} is too large (online: {online})")]
    TooLarge {
        /// The number as written.
        cpu: String,
        /// The online CPUs.
        online: String,
    },
    /// An item that is neither a number nor a range.
    #[error("`{part}` is not a CPU number or range; expected a CPU list such as `0-3,8`")]
    NotCpu {
        /// The item.
        part: String,
    },
    /// `hi-lo`.
    #[error("the range `{part}` runs backwards; write it as `{hi}-{lo}`")]
    Backwards {
        /// The item.
        part: String,
        /// Its first number (the larger).
        lo: u32,
        /// Its second number (the smaller).
        hi: u32,
    },
    /// CPUs that are not online, as a kernel-style list.
    #[error(
        "{} {cpus} {} not online (online: {online})",
        if *.count == 1 { "CPU" } else { "CPUs" },
        if *.count == 1 { "is" } else { "are" }
    )]
    Offline {
        /// The CPUs named that are not online.
        cpus: String,
        /// How many they are.
        count: u64,
        /// The online CPUs.
        online: String,
    },
}

/// `-C LIST` as perf 7.x reads it: the online CPUs it names, and, when it also names CPUs
/// that are not online, that as an error to warn with (perf 7.x counts on the online ones).
/// A list that names none or a malformed one is an error.
pub fn cpu_list_online(
    list: &str,
    online: &[u32],
) -> Result<(Vec<u32>, Option<CpuListError>), CpuListError> {
    let fail = |problem| CpuListError { list: list.to_string(), problem };
    let text = list.trim();
    let online_text = format_cpus(online.iter().map(|&c| (c, c)));
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for part in text.split(',').map(str::trim) {
        if part.is_empty() {
            if text.is_empty() {
                return Err(fail(CpuListProblem::Empty { online: online_text }));
            }
            return Err(fail(CpuListProblem::EmptyItem));
        }
        let number = |t: &str| -> Result<u32, CpuListError> {
            match t.trim().parse::<u32>() {
                Ok(n) => Ok(n),
                Err(_) if !t.trim().is_empty() && t.trim().bytes().all(|b| b.is_ascii_digit()) => {
                    Err(fail(CpuListProblem::TooLarge {
                        cpu: t.trim().to_string(),
                        online: online_text.clone(),
                    }))
                }
                Err(_) => Err(fail(CpuListProblem::NotCpu { part: part.to_string() })),
            }
        };
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (number(lo)?, number(hi)?),
            None => {
                let n = number(part)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(fail(CpuListProblem::Backwards { part: part.to_string(), lo, hi }));
        }
        ranges.push((lo, hi));
    }
    // What the ranges name beyond the online CPUs, as ranges (never one number per CPU).
    let mut sorted = online.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut offline: Vec<(u32, u32)> = Vec::new();
    for &(lo, hi) in &ranges {
        let mut from = u64::from(lo);
        for &c in sorted.iter().filter(|&&c| (lo..=hi).contains(&c)) {
            if u64::from(c) > from {
                offline.push((from as u32, c - 1));
            }
            from = u64::from(c) + 1;
        }
        if from <= u64::from(hi) {
            offline.push((from as u32, hi));
        }
    }
    let named: Vec<u32> = sorted
        .into_iter()
        .filter(|c| ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(c)))
        .collect();
    if !offline.is_empty() {
        offline.sort_unstable();
        let count: u64 = offline.iter().map(|&(a, b)| u64::from(b - a) + 1).sum();
        let cpus = format_cpus(offline.into_iter());
        let problem = CpuListProblem::Offline { cpus, count, online: online_text };
        return Ok((named, Some(fail(problem))));
    }
    Ok((named, None))
}

/// `-C LIST`: the CPUs it names, every one online. A list that names none, a malformed one
/// and CPUs that are not online (however many: `0-99999999` is valid syntax) are told apart.
pub fn cpu_list(list: &str, online: &[u32]) -> Result<Vec<u32>, CpuListError> {
    match cpu_list_online(list, online)? {
        (_, Some(offline)) => Err(offline),
        (cpus, None) => Ok(cpus),
    }
}

/// Sorted, possibly overlapping ranges as a kernel-style CPU list (`0-3,8`).
fn format_cpus(ranges: impl Iterator<Item = (u32, u32)>) -> String {
    let mut merged: Vec<(u32, u32)> = Vec::new();
    let mut all: Vec<(u32, u32)> = ranges.collect();
    all.sort_unstable();
    for (lo, hi) in all {
        match merged.last_mut() {
            Some(last) if u64::from(lo) <= u64::from(last.1) + 1 => last.1 = last.1.max(hi),
            _ => merged.push((lo, hi)),
        }
    }
    if merged.is_empty() {
        return "none".into();
    }
    merged
        .iter()
        .map(|&(lo, hi)| if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") })
        .collect::<Vec<_>>()
        .join(",")
}

/// The tasks whose exit ends a run without a command: `-p PID` (the process) or `-t TID,...`
/// (each thread), as perf stops once every target is gone. With a command, the command is
/// the run's timer and the targets' exits do not end it (perf's `-p PID sleep 5`).
pub fn watched(pid: Option<i32>, tids: &[i32], has_command: bool) -> Vec<Watched> {
    if has_command {
        return Vec::new();
    }
    match pid {
        Some(pid) => vec![Watched::Process(pid)],
        None => tids.iter().map(|&t| Watched::Thread(t)).collect(),
    }
}
