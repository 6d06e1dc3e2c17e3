//! The simulated kernel against the kernel's rules: each refusal with the errno Linux 6.12
//! gives, rotation computing enabled/running times, scaled counts equal to the profile's
//! true counts, software events, the written sysfs trees read back by `Sysfs` and
//! `host_cpuid`, and the runtime's `CounterSet` over `SimKernel`.
//!
//! This file holds the helpers; the tests are by what they check: `trees`, `open` (open-time
//! rules), `schedule` (schedule-time rules), `counting`, `invariants` (random call sequences).

use tmetric_runtime::counter::parse_group_read;
use tmetric_runtime::sys::{READ_FORMAT, TYPE_RAW};
use tmetric_runtime::{Attr, Syscalls};
use tmetric_sim::{Machine, SimKernel};

mod counting;
mod invariants;
mod open;
mod realism;
mod schedule;
mod trees;

/// The default workload's topdown fields in PERF_METRICS order (retiring, bad speculation,
/// frontend bound, backend bound, heavy operations, branch mispredicts, fetch latency, memory
/// bound), as fractions of slots; Golden Cove subtracts no correction at these.
const TOPDOWN: [f64; 8] = [0.40, 0.10, 0.20, 0.30, 0.10, 0.08, 0.12, 0.18];

const MS: u64 = 1_000_000;

fn machine(name: &str, watchdog: bool) -> Machine {
    Machine::named(name).unwrap_or_else(|| panic!("no machine {name}")).with_nmi_watchdog(watchdog)
}

fn kernel(name: &str, watchdog: bool) -> SimKernel {
    SimKernel::manual(machine(name, watchdog))
}

fn typed(type_: u32, config: u64) -> Attr {
    Attr { type_, config, read_format: READ_FORMAT, ..Attr::default() }
}

fn raw(config: u64) -> Attr {
    typed(TYPE_RAW, config)
}

fn type_of(k: &SimKernel, pmu: &str) -> u32 {
    k.machine().pmu(pmu).unwrap_or_else(|| panic!("no pmu {pmu}")).type_
}

/// Opens `attrs` as one group on `cpu` (`pid` -1), leader first and enabled at once. On the
/// first refusal returns the member's position and errno, closing what was opened.
fn group(k: &mut SimKernel, cpu: i32, attrs: &[Attr]) -> Result<Vec<i32>, (usize, i32)> {
    let mut fds: Vec<i32> = Vec::new();
    for (i, attr) in attrs.iter().enumerate() {
        let leader = fds.first().copied().unwrap_or(-1);
        match k.perf_event_open(attr, -1, cpu, leader) {
            Ok(fd) => fds.push(fd),
            Err(e) => {
                for fd in fds.into_iter().rev() {
                    k.close(fd);
                }
                return Err((i, e.0));
            }
        }
    }
    Ok(fds)
}

fn read_group(k: &mut SimKernel, leader: i32, members: usize) -> (u64, u64, Vec<u64>) {
    let mut buf = vec![0u8; 8 * (3 + 2 * members)];
    let n = k.read(leader, &mut buf).expect("read");
    let parsed = parse_group_read(&buf[..n], members).expect("group layout");
    (parsed.enabled, parsed.running, parsed.values.iter().map(|v| v.0).collect())
}

/// `n` distinct GP events with codes from `first` (no fixed-counter or restricted ones when
/// `first` >= 0x90 on Golden Cove).
fn gp_events(first: u64, n: usize) -> Vec<Attr> {
    (0..n as u64).map(|i| raw(first + i)).collect()
}
