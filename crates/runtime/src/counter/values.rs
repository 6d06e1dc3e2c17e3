//! What counters read: one `read()` of a group in the
//! `GROUP|ID|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING` layout, raw values scaled for
//! multiplexing as perf does, and snapshots by CPU and thread with their deltas.

/// One raw reading: the count and the times it was enabled and running, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawCount {
    /// The count.
    pub value: u64,
    /// Nanoseconds enabled.
    pub enabled: u64,
    /// Nanoseconds on a counter.
    pub running: u64,
}

/// Whether counts are scaled for multiplexing (perf's default; off with `--no-scale`, a
/// setting of the whole process as perf's `stat_config.scale` is).
static SCALING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// perf's `--no-scale`: from now on [`RawCount::scaled`] gives the raw count of a counter that
/// ran, however briefly, instead of extrapolating it to the time it was enabled.
pub fn set_scaling(scale: bool) {
    SCALING.store(scale, std::sync::atomic::Ordering::Relaxed);
}

/// Whether counts are scaled for multiplexing now ([`set_scaling`]), for writers that record
/// it (perf.data's `STAT_CONFIG`).
pub fn scaling() -> bool {
    SCALING.load(std::sync::atomic::Ordering::Relaxed)
}

impl RawCount {
    /// perf's scaling: `None` (not counted) when it never ran, `value * enabled / running`
    /// (truncated, as perf's double-to-u64 cast does) when multiplexed, else the value;
    /// the raw value when scaling is off ([`set_scaling`]).
    pub fn scaled(self) -> Option<u64> {
        if self.running == 0 {
            None
        } else if self.running < self.enabled && SCALING.load(std::sync::atomic::Ordering::Relaxed)
        {
            Some((self.value as f64 * self.enabled as f64 / self.running as f64) as u64)
        } else {
            Some(self.value)
        }
    }

    /// `self - earlier`, field by field; counters only grow, so a smaller later value (a
    /// counter that was reset) gives zero rather than a wrapped huge number.
    pub fn since(self, earlier: RawCount) -> RawCount {
        RawCount {
            value: self.value.saturating_sub(earlier.value),
            enabled: self.enabled.saturating_sub(earlier.enabled),
            running: self.running.saturating_sub(earlier.running),
        }
    }
}

/// One event's reading on one CPU (`cpu` is -1 for a task counter) or one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuCount {
    /// The CPU, or -1.
    pub cpu: i32,
    /// The thread of a [`Target::Threads`](super::Target::Threads) counter, or -1.
    pub thread: i32,
    /// The reading.
    pub raw: RawCount,
}

/// An event's readings summed over CPUs, each CPU scaled first as perf does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aggregate {
    /// Sum of the scaled per-CPU counts (CPUs that never ran add 0).
    pub value: u64,
    /// Sum of the enabled times.
    pub enabled: u64,
    /// Sum of the running times.
    pub running: u64,
    /// How many CPUs were summed.
    pub cpus: usize,
}

impl Aggregate {
    /// perf's `<not counted>` test: it was enabled and ran at some point.
    pub fn counted(&self) -> bool {
        self.running > 0 && self.enabled > 0
    }

    /// `100 * running / enabled`, the `(xx.xx%)` perf prints when they differ.
    pub fn running_percent(&self) -> f64 {
        if self.enabled == 0 { 0.0 } else { 100.0 * self.running as f64 / self.enabled as f64 }
    }
}

/// The readings of every event at one moment; `None` for events that are not open.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Per event, its per-CPU readings.
    pub events: Vec<Option<Vec<CpuCount>>>,
}

impl Snapshot {
    /// The change since `earlier`, CPU by CPU (thread by thread).
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let events = self
            .events
            .iter()
            .enumerate()
            .map(|(i, now)| {
                let before = earlier.events.get(i).and_then(Option::as_ref);
                now.as_ref().map(|cpus| {
                    cpus.iter()
                        .map(|c| {
                            let old = before
                                .and_then(|b| {
                                    b.iter().find(|o| o.cpu == c.cpu && o.thread == c.thread)
                                })
                                .map_or(RawCount::default(), |o| o.raw);
                            CpuCount { cpu: c.cpu, thread: c.thread, raw: c.raw.since(old) }
                        })
                        .collect()
                })
            })
            .collect();
        Snapshot { events }
    }

    /// [`Snapshot::since`] into `out`, reusing its vectors (a reader that keeps its snapshots
    /// allocates nothing once they have their shape).
    pub fn since_into(&self, earlier: &Snapshot, out: &mut Snapshot) {
        out.events.resize_with(self.events.len(), || None);
        for (i, (now, slot)) in self.events.iter().zip(&mut out.events).enumerate() {
            let Some(cpus) = now else {
                *slot = None;
                continue;
            };
            let before = earlier.events.get(i).and_then(Option::as_ref);
            let into = slot.get_or_insert_with(Vec::new);
            into.clear();
            into.extend(cpus.iter().map(|c| {
                let old = before
                    .and_then(|b| b.iter().find(|o| o.cpu == c.cpu && o.thread == c.thread))
                    .map_or(RawCount::default(), |o| o.raw);
                CpuCount { cpu: c.cpu, thread: c.thread, raw: c.raw.since(old) }
            }));
        }
    }

    /// The readings on `cpus` only (an aggregation unit of `-A`, `--per-core`, ...).
    pub fn on_cpus(&self, cpus: &[i32]) -> Snapshot {
        self.only(|c| cpus.contains(&c.cpu))
    }

    /// The readings of thread `tid` only (`--per-thread`).
    pub fn of_thread(&self, tid: i32) -> Snapshot {
        self.only(|c| c.thread == tid)
    }

    fn only(&self, keep: impl Fn(&CpuCount) -> bool) -> Snapshot {
        let events = self
            .events
            .iter()
            .map(|e| e.as_ref().map(|per| per.iter().copied().filter(|c| keep(c)).collect()))
            .collect();
        Snapshot { events }
    }

    /// Event `event` summed over CPUs; `None` when it is not open.
    pub fn aggregate(&self, event: usize) -> Option<Aggregate> {
        let cpus = self.events.get(event)?.as_ref()?;
        let mut total = Aggregate { cpus: cpus.len(), ..Aggregate::default() };
        for c in cpus {
            total.value += c.raw.scaled().unwrap_or(0);
            total.enabled += c.raw.enabled;
            total.running += c.raw.running;
        }
        Some(total)
    }
}

/// The parsed result of one `read()` of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupRead {
    /// `time_enabled`.
    pub enabled: u64,
    /// `time_running`.
    pub running: u64,
    /// `(value, id)` per member, leader first.
    pub values: Vec<(u64, u64)>,
}

/// Parses the `GROUP|ID|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING` layout: `nr`,
/// `time_enabled`, `time_running`, then `nr` pairs of `value, id` (`read_format` in include/uapi/linux/perf_event.h).
pub fn parse_group_read(bytes: &[u8], expected_members: usize) -> Result<GroupRead, String> {
    let (enabled, running) = group_read_times(bytes, expected_members)?;
    let values = group_read_members(bytes).collect();
    Ok(GroupRead { enabled, running, values })
}

/// The 8-byte word `i` of a group read (0 past its end).
fn group_word(bytes: &[u8], i: usize) -> u64 {
    bytes.get(i * 8..i * 8 + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
}

/// Checks one `read()` of a group leader (`PERF_FORMAT_GROUP` with both times and ids) against
/// the members opened, and returns its `time_enabled` and `time_running`; the members' values
/// are then [`group_read_members`]'s. Nothing is allocated: a reader of many groups reads every
/// interval without a heap.
pub fn group_read_times(bytes: &[u8], expected_members: usize) -> Result<(u64, u64), String> {
    if !bytes.len().is_multiple_of(8) || bytes.len() < 24 {
        return Err(format!(
            "{} bytes is not a group read (8-byte words, at least 3 of them)",
            bytes.len()
        ));
    }
    let nr = group_word(bytes, 0) as usize;
    if nr != expected_members {
        return Err(format!("the kernel reports {nr} members, {expected_members} were opened"));
    }
    let want = 8 * (3 + 2 * nr);
    if bytes.len() != want {
        return Err(format!("{} bytes for {nr} members, expected {want}", bytes.len()));
    }
    Ok((group_word(bytes, 1), group_word(bytes, 2)))
}

/// The `(value, id)` of each member of a group read [`group_read_times`] accepted.
pub fn group_read_members(bytes: &[u8]) -> impl Iterator<Item = (u64, u64)> + '_ {
    let nr = (bytes.len() / 8).saturating_sub(3) / 2;
    (0..nr).map(move |i| (group_word(bytes, 3 + 2 * i), group_word(bytes, 4 + 2 * i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_follows_perf() {
        assert_eq!(RawCount { value: 100, enabled: 10, running: 0 }.scaled(), None);
        assert_eq!(RawCount { value: 100, enabled: 10, running: 10 }.scaled(), Some(100));
        assert_eq!(RawCount { value: 100, enabled: 30, running: 10 }.scaled(), Some(300));
        // 7 * 3 / 2 = 10.5, truncated.
        assert_eq!(RawCount { value: 7, enabled: 3, running: 2 }.scaled(), Some(10));
    }

    #[test]
    fn deltas_pair_readings_by_cpu_and_thread() {
        let reading = |thread: i32, value: u64| CpuCount {
            cpu: -1,
            thread,
            raw: RawCount { value, enabled: value, running: value },
        };
        let before = Snapshot { events: vec![Some(vec![reading(10, 5), reading(11, 100)])] };
        // A thread's readings may come in another order (a group reopened per thread).
        let after = Snapshot { events: vec![Some(vec![reading(11, 130), reading(10, 9)])] };
        let delta = after.since(&before);
        assert_eq!(delta.events[0].as_ref().unwrap(), &vec![reading(11, 30), reading(10, 4)]);
    }

    #[test]
    fn group_layout_is_checked() {
        let words = |w: &[u64]| w.iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<u8>>();
        let ok = parse_group_read(&words(&[2, 50, 40, 7, 1001, 9, 1002]), 2).unwrap();
        assert_eq!(ok, GroupRead { enabled: 50, running: 40, values: vec![(7, 1001), (9, 1002)] });
        assert!(parse_group_read(&words(&[2, 50, 40, 7, 1001]), 2).is_err());
        assert!(parse_group_read(&words(&[1, 50, 40, 7, 1001]), 2).is_err());
        assert!(parse_group_read(&[0u8; 20], 1).is_err());
    }
}
