//! The simulated kernel against the kernel's rules: each refusal with the errno Linux 6.12
//! gives, rotation computing enabled/running times, scaled counts equal to the profile's
//! true counts, software events, the written sysfs trees read back by `Sysfs` and
//! `host_cpuid`, and the runtime's `CounterSet` over `SimKernel`.

use std::path::{Path, PathBuf};

use tmetric_runtime::counter::parse_group_read;
use tmetric_runtime::sys::{READ_FORMAT, TYPE_HARDWARE, TYPE_RAW, TYPE_SOFTWARE};
use tmetric_runtime::sysfs::{host_cpuid, parse_cpu_list};
use tmetric_runtime::{Attr, CounterSet, CounterSpec, Syscalls, Sysfs, Target};
use tmetric_sim::{Machine, SimKernel, SimState};

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

// ---- sysfs trees ----

/// A sysfs and proc tree in a private temporary directory, removed on drop.
struct TempTree(tempfile::TempDir);

impl TempTree {
    fn new(tag: &str) -> TempTree {
        let dir = tempfile::Builder::new().prefix(&format!("tmetric-sim-{tag}-")).tempdir();
        TempTree(dir.expect("a temporary directory"))
    }
    fn sys(&self) -> PathBuf {
        self.0.path().join("sys")
    }
    fn proc(&self) -> PathBuf {
        self.0.path().join("proc")
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_machine_writes_a_tree_that_sysfs_and_the_catalogue_read_back() {
    assert_eq!(Machine::names().len(), 8);
    for &name in Machine::names() {
        let m = Machine::named(name).unwrap();
        let tree = TempTree::new(name);
        m.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
        let sysfs = Sysfs::new(tree.sys());
        let names = sysfs.pmu_names();
        for pmu in &m.pmus {
            assert!(names.contains(&pmu.name), "{name}: {} missing", pmu.name);
            let read_back = sysfs.pmu(&pmu.name).unwrap();
            assert_eq!(read_back.type_, pmu.type_, "{name}/{}", pmu.name);
            // A core PMU's `cpus` (hybrid, Arm) limits where its events open, as `cpumask` does.
            let expected = pmu.cpumask.clone().or_else(|| pmu.cpus.clone());
            assert_eq!(read_back.cpumask, expected, "{name}/{}", pmu.name);
            if let Some(cpus) = &pmu.cpus {
                let text = read(&read_back.dir().join("cpus"));
                assert_eq!(parse_cpu_list(&text).as_ref(), Some(cpus), "{name}/{}", pmu.name);
            }
        }
        let cpuid = host_cpuid(&sysfs, &tree.proc()).expect("cpuid");
        assert_eq!(cpuid, m.cpuid(), "{name}");
        let model = tmetric_catalog::model_for_cpuid(&cpuid).expect("catalogue model");
        assert_eq!(model.name, m.catalogue_model, "{name}: {cpuid}");
        let topology = sysfs.topology().unwrap();
        assert_eq!(topology.online.len(), m.cpus.len(), "{name}");
        assert_eq!(topology.smt_on, m.smt, "{name}");
        let watchdog = read(&tree.proc().join("sys/kernel/nmi_watchdog"));
        assert_eq!(watchdog.trim(), if m.nmi_watchdog { "1" } else { "0" }, "{name}");
    }
}

#[test]
fn written_trees_carry_the_kernel_files() {
    let tree = TempTree::new("files");
    let spr = machine("sapphirerapids", false);
    spr.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    assert_eq!(sysfs.core_pmu().as_deref(), Some("cpu"));
    let cpu = sysfs.pmu("cpu").unwrap();
    assert_eq!(cpu.type_, 4);
    assert_eq!(cpu.alias("slots").unwrap().unwrap().terms, "event=0x00,umask=0x4");
    assert_eq!(cpu.alias("topdown-mem-bound").unwrap().unwrap().terms, "event=0x00,umask=0x87");
    assert!(cpu.alias_names().contains(&"ref-cycles".to_string()));
    assert!(cpu.format("any").is_none(), "no AnyThread on perfmon v5");
    assert_eq!(cpu.format("offcore_rsp").unwrap().word, 1);
    assert_eq!(read(&cpu.dir().join("caps/pmu_name")).trim(), "sapphire_rapids");
    let imc = sysfs.pmu("uncore_imc_0").unwrap();
    assert_eq!(imc.cpumask, Some(vec![0, 4]), "one reader CPU per package");
    let energy = sysfs.pmu("power").unwrap().alias("energy-pkg").unwrap().unwrap();
    assert_eq!(energy.unit.as_deref(), Some("Joules"));
    let topology = sysfs.topology().unwrap();
    assert_eq!((topology.cores, topology.packages, topology.num_cpus), (4, 2, 8));
    assert_eq!(read(&tree.proc().join("sys/kernel/nmi_watchdog")).trim(), "0");

    let tree = TempTree::new("files-adl");
    machine("alderlake", true).write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    assert_eq!(sysfs.core_pmu().as_deref(), Some("cpu_core"));
    assert!(!sysfs.has_pmu("cpu"));
    let atom = sysfs.pmu("cpu_atom").unwrap();
    assert_eq!(atom.type_, 10);
    assert_eq!(atom.alias("topdown-retiring").unwrap().unwrap().terms, "event=0xc2,umask=0x0");
    assert!(atom.alias("slots").unwrap().is_none(), "no PERF_METRICS on the atom PMU");

    let tree = TempTree::new("files-skx");
    machine("skylakex", true).write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let cpu = Sysfs::new(tree.sys()).pmu("cpu").unwrap();
    let slots = cpu.alias("topdown-total-slots").unwrap().unwrap();
    assert_eq!((slots.terms.as_str(), slots.scale), ("event=0x3c,umask=0x0,any=1", Some(2.0)));

    let tree = TempTree::new("files-n2");
    machine("neoverse-n2", true).write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    assert_eq!(sysfs.core_pmu().as_deref(), Some("armv8_pmuv3_0"));
    let arm = sysfs.pmu("armv8_pmuv3_0").unwrap();
    assert_eq!(read(&arm.dir().join("caps/slots")).trim(), "0x00000005");
    assert_eq!(host_cpuid(&sysfs, &tree.proc()).as_deref(), Some("0x00000000410fd493"));
}

// ---- open-time rules ----

#[test]
fn a_group_larger_than_the_counters_is_refused_with_einval() {
    let mut k = kernel("sapphirerapids", true);
    // 8 GP counters: the 9th general event does not fit. The watchdog is not part of
    // validate_group, so it does not change the answer at open time.
    assert_eq!(group(&mut k, 0, &gp_events(0x90, 9)), Err((8, libc::EINVAL)));
    // 8 general events plus instructions, cycles, ref-cycles and slots on the fixed ones.
    let mut fits = gp_events(0x90, 8);
    fits.extend([raw(0xc0), raw(0x3c), raw(0x0300), raw(0x0400)]);
    assert!(group(&mut k, 0, &fits).is_ok());
    let mut amd = kernel("amdzen4", false);
    assert_eq!(group(&mut amd, 0, &gp_events(0x90, 7)), Err((6, libc::EINVAL)));
    // Zen has no fixed counters: cycles and instructions take GP counters too.
    let mut amd_fixed = gp_events(0x90, 4);
    amd_fixed.extend([raw(0x76), raw(0xc0), raw(0xc2)]);
    assert_eq!(group(&mut amd, 0, &amd_fixed), Err((6, libc::EINVAL)));
}

#[test]
fn pair_events_take_two_counters_on_zen4() {
    let mut amd = kernel("amdzen4", false);
    let flops = |umask: u64| raw(0x03 | umask << 8);
    // Three 0x003 FLOPs events fill the 6 counters, each on an even counter and the odd one
    // above it: a fourth event of any kind does not fit.
    let pairs = [flops(1), flops(2), flops(4)];
    assert!(group(&mut amd, 0, &pairs).is_ok());
    let mut more = pairs.to_vec();
    more.push(raw(0x90));
    assert_eq!(group(&mut amd, 0, &more), Err((3, libc::EINVAL)));
    // One pair leaves 4 counters.
    let mut one = vec![flops(1)];
    one.extend(gp_events(0x90, 4));
    assert!(group(&mut amd, 0, &one).is_ok());
    one.push(raw(0x95));
    assert_eq!(group(&mut amd, 0, &one), Err((5, libc::EINVAL)));
    // Alone it opens, and the FLOPs event with the extended event-code bits (0xf00 in
    // config bits 32-35) is not 0x003.
    assert!(group(&mut amd, 0, &[flops(1)]).is_ok());
    let mut six: Vec<Attr> = vec![raw(0x03 | 1 << 8 | 1 << 32)];
    six.extend(gp_events(0x90, 5));
    assert!(group(&mut amd, 0, &six).is_ok(), "event 0x103 takes one counter");
    // Intel has no pair events: 0x03 is an ordinary event there.
    let mut spr = kernel("sapphirerapids", false);
    let mut eight = vec![raw(0x0103)];
    eight.extend(gp_events(0x90, 7));
    assert!(group(&mut spr, 0, &eight).is_ok());
}

#[test]
fn skylake_has_four_gp_counters_with_smt_and_eight_without() {
    let mut smt = kernel("skylakex", false);
    assert_eq!(group(&mut smt, 0, &gp_events(0x90, 5)), Err((4, libc::EINVAL)));
    let mut nosmt = kernel("skylakex-nosmt", false);
    assert!(group(&mut nosmt, 0, &gp_events(0x90, 8)).is_ok());
    // MEM_INST_RETIRED.* (0xd0) and friends run on counters 0-3 only.
    let restricted: Vec<Attr> = (0..5).map(|i| raw(0xd0 | (1 + i) << 8)).collect();
    assert_eq!(group(&mut nosmt, 0, &restricted), Err((4, libc::EINVAL)));
    assert_eq!(nosmt.machine().cpus.len(), 4);
    assert_eq!(smt.machine().cpus.len(), 8);
}

#[test]
fn fixed_only_events_and_counter_masks_follow_the_constraint_tables() {
    let mut k = kernel("sapphirerapids", false);
    // REF_TSC pseudo-encoding 0x0300 and SLOTS 0x0400 have only their fixed counter.
    assert_eq!(group(&mut k, 0, &[raw(0x0300), raw(0x0300)]), Err((1, libc::EINVAL)));
    assert_eq!(group(&mut k, 0, &[raw(0x0400), raw(0x0400)]), Err((1, libc::EINVAL)));
    // cycles and instructions have a real event code: fixed or any GP counter.
    assert!(group(&mut k, 0, &[raw(0x3c), raw(0x3c), raw(0xc0), raw(0xc0)]).is_ok());
    // A flag disqualifies cycles from the fixed counter: 8 GP + cycles:cmask=1 does not fit.
    let mut flagged = gp_events(0x90, 8);
    flagged.push(raw(0x3c | 1 << 24));
    assert_eq!(group(&mut k, 0, &flagged), Err((8, libc::EINVAL)));
    // Golden Cove: codes below 0x90 (except 0x2e, 0x3c) on counters 0-3.
    assert_eq!(group(&mut k, 0, &gp_events(0x10, 5)), Err((4, libc::EINVAL)));
    assert!(group(&mut k, 0, &gp_events(0x10, 4)).is_ok());
    // 0x02cd on counter 0 only.
    assert_eq!(group(&mut k, 0, &[raw(0x02cd), raw(0x02cd)]), Err((1, libc::EINVAL)));
    // Ice Lake: 0xd0-0xe6 on counters 0-3.
    let mut icl = kernel("icelake", false);
    let loads: Vec<Attr> = (0..5).map(|i| raw(0xd1 | (1 << i) << 8)).collect();
    assert_eq!(group(&mut icl, 0, &loads), Err((4, libc::EINVAL)));
    // Without PERF_METRICS 0x0400 is no fixed-only event: an ordinary GP event on Skylake.
    let mut skx = kernel("skylakex", false);
    assert!(group(&mut skx, 0, &[raw(0x0400), raw(0x0400)]).is_ok());
}

#[test]
fn topdown_events_need_a_slots_leader() {
    let mut k = kernel("sapphirerapids", false);
    let td = |n: u64| raw(0x8000 + (n << 8));
    assert_eq!(group(&mut k, 0, &[td(0)]), Err((0, libc::EINVAL)));
    assert_eq!(group(&mut k, 0, &[raw(0x3c), td(0)]), Err((1, libc::EINVAL)));
    // slots must lead: as a sibling it does not help.
    assert_eq!(group(&mut k, 0, &[raw(0x3c), raw(0x0400), td(0)]), Err((2, libc::EINVAL)));
    let mut all = vec![raw(0x0400)];
    all.extend((0..8).map(td));
    all.extend(gp_events(0x90, 8));
    assert!(group(&mut k, 0, &all).is_ok(), "slots + 8 metrics + 8 GP events");
    // Each metric has one pseudo counter.
    assert_eq!(group(&mut k, 0, &[raw(0x0400), td(0), td(0)]), Err((2, libc::EINVAL)));
    // No config1/config2 and no filter bits on topdown events.
    let mut with_config1 = td(1);
    with_config1.config1 = 1;
    assert_eq!(group(&mut k, 0, &[raw(0x0400), with_config1]), Err((1, libc::EINVAL)));
    // ... and none on slots either, alone or as a leader.
    for (config1, config2) in [(1, 0), (0, 1)] {
        let slots = Attr { config1, config2, ..raw(0x0400) };
        assert_eq!(group(&mut k, 0, std::slice::from_ref(&slots)), Err((0, libc::EINVAL)));
        assert_eq!(group(&mut k, 0, &[slots, td(0)]), Err((0, libc::EINVAL)));
    }
    assert_eq!(group(&mut k, 0, &[raw(0x0400 | 1 << 18)]), Err((0, libc::EINVAL)));
    // Ice Lake has only the four level-1 metrics; level-2 configs are no metric events
    // there (they open as event code 0 on a GP counter, undefined in hardware).
    let mut icl = kernel("icelake", false);
    assert!(group(&mut icl, 0, &[raw(0x0400), td(0), td(1), td(2), td(3)]).is_ok());
    assert!(group(&mut icl, 0, &[raw(0x3c), td(4)]).is_ok());
    // The atom PMU has no PERF_METRICS: its topdown events are ordinary GP events.
    let mut adl = kernel("alderlake", false);
    let atom = type_of(&adl, "cpu_atom");
    assert!(group(&mut adl, 4, &[typed(atom, 0x3c), typed(atom, 0xc2)]).is_ok());
}

#[test]
fn a_lone_event_whose_constraint_leaves_no_counter_is_refused() {
    // x86_pmu_event_init's validate_event: a constraint of weight 0 fits nowhere, even on an
    // empty PMU. intel_pmu_check_event_constraints empties the slots and metric constraints
    // when fixed counter 3 is missing and drops fixed counters the CPU lacks, so a guest with
    // 3 fixed counters refuses slots and topdown metric events alone.
    let guest = machine("sapphirerapids", false).with_fixed_counters(3);
    assert!(guest.pmu("cpu").unwrap().events.iter().all(|(name, _)| name != "slots"));
    let mut k = SimKernel::manual(guest);
    assert_eq!(group(&mut k, 0, &[raw(0x0400)]), Err((0, libc::EINVAL)), "slots");
    assert_eq!(group(&mut k, 0, &[raw(0x8000)]), Err((0, libc::EINVAL)), "topdown-retiring");
    assert_eq!(group(&mut k, 0, &[raw(0x8700)]), Err((0, libc::EINVAL)), "topdown-mem-bound");
    assert!(group(&mut k, 0, &[raw(0x0300)]).is_ok(), "ref-cycles keep fixed counter 2");
    assert!(group(&mut k, 0, &[raw(0x3c), raw(0xc0), raw(0xc4)]).is_ok());
    // With 2, the ref-cycles pseudo-encoding has no counter (it is not widened to the GP
    // counters); 0x013c, a real event code, falls back to them.
    let mut two = SimKernel::manual(machine("sapphirerapids", false).with_fixed_counters(2));
    assert_eq!(group(&mut two, 0, &[raw(0x0300)]), Err((0, libc::EINVAL)), "ref-cycles");
    assert!(group(&mut two, 0, &[raw(0x013c)]).is_ok());
    // The full machine opens all of them.
    let mut full = kernel("sapphirerapids", false);
    for config in [0x0400, 0x0300, 0x013c] {
        assert!(group(&mut full, 0, &[raw(config)]).is_ok(), "{config:#x}");
    }
}

#[test]
fn two_slots_groups_on_one_cpu_take_turns() {
    // SLOTS has only fixed counter 3 and each metric one pseudo counter: two topdown groups
    // on a CPU multiplex even though both would fit the GP counters many times over.
    let mut k = kernel("sapphirerapids", true);
    let a = group(&mut k, 3, &[raw(0x0400), raw(0x8000), raw(0x8100)]).unwrap();
    let b = group(&mut k, 3, &[raw(0x0400), raw(0x8200), raw(0x8300)]).unwrap();
    k.advance(400 * MS);
    for g in [&a, &b] {
        let (enabled, running, values) = read_group(&mut k, g[0], 3);
        assert_eq!((enabled, running), (400 * MS, 200 * MS));
        let scaled = values[0] * enabled / running;
        assert_eq!(scaled, k.true_count(&raw(0x0400), 3, 400 * MS).unwrap());
    }
}

#[test]
fn topdown_metrics_go_to_error_when_their_slots_leader_closes() {
    let mut k = kernel("sapphirerapids", false);
    let fds = group(&mut k, 0, &[raw(0x0400), raw(0x8000), raw(0xc4)]).unwrap();
    k.close(fds[0]);
    assert_eq!(k.state_of(fds[1]), Some(SimState::Error));
    assert_eq!(k.state_of(fds[2]), Some(SimState::Active), "an ordinary sibling is promoted");
    let mut buf = [0u8; 64];
    assert_eq!(k.read(fds[1], &mut buf), Ok(0));
}

#[test]
fn extra_registers_check_config1_and_hold_one_value() {
    let mut k = kernel("sapphirerapids", false);
    let offcore = |config1: u64| Attr { config1, ..raw(0x012a) };
    assert_eq!(group(&mut k, 0, &[offcore(1 << 63)]), Err((0, libc::EINVAL)));
    assert!(group(&mut k, 0, &[offcore(0x10001), offcore(0x10002)]).is_ok(), "RSP_0 and RSP_1");
    assert_eq!(
        group(&mut k, 0, &[offcore(0x10001), offcore(0x10002), offcore(0x10004)]),
        Err((2, libc::EINVAL))
    );
    assert!(group(&mut k, 0, &[offcore(0x10001), offcore(0x10001), offcore(0x10001)]).is_ok());
    let ldlat = |config1: u64| Attr { config1, ..raw(0x01cd) };
    assert_eq!(group(&mut k, 0, &[ldlat(3), ldlat(128)]), Err((1, libc::EINVAL)));
    assert_eq!(group(&mut k, 0, &[ldlat(0x10000)]), Err((0, libc::EINVAL)));
    // Events without an extra register ignore config1.
    assert!(group(&mut k, 0, &[Attr { config1: u64::MAX, ..raw(0xc4) }]).is_ok());
    let ignored = k.true_count(&Attr { config1: 7, ..raw(0xc4) }, 0, MS).unwrap();
    assert_eq!(ignored, k.true_count(&raw(0xc4), 0, MS).unwrap());
    // For an offcore event config1 selects what is counted.
    let a = k.true_count(&offcore(0x10001), 0, MS).unwrap();
    let b = k.true_count(&offcore(0x10002), 0, MS).unwrap();
    assert_ne!(a, b);
}

#[test]
fn config_bits_outside_the_format_are_dropped_as_the_kernel_does() {
    // x86_pmu_hw_config keeps only event, umask, edge, inv and cmask (and AnyThread or
    // in_tx where the PMU has them): the `pc` bit and bits above 31 vanish, no EINVAL.
    let mut k = kernel("sapphirerapids", false);
    let noisy = raw(0xc4 | 1 << 19 | 1 << 40);
    assert!(group(&mut k, 0, std::slice::from_ref(&noisy)).is_ok());
    assert_eq!(k.true_count(&noisy, 0, MS), k.true_count(&raw(0xc4), 0, MS));
    // AnyThread counts both threads on Skylake with SMT (and is dropped on perfmon v5).
    let skx = kernel("skylakex", false);
    let any = skx.true_count(&raw(0x3c | 1 << 21), 0, MS).unwrap();
    assert_eq!(any, 2 * skx.true_count(&raw(0x3c), 0, MS).unwrap());
    // Where the kernel does check the range, it refuses: msr and RAPL.
    let power = type_of(&k, "power");
    let e = k.perf_event_open(&typed(power, 0x102), -1, 0, -1);
    assert_eq!(e, Err(tmetric_runtime::Errno(libc::EINVAL)));
    // An uncore event on any CPU of a package moves to the package's reader CPU.
    let imc = type_of(&k, "uncore_imc_0");
    let leader = k.perf_event_open(&typed(imc, 0x05), -1, 6, -1).unwrap();
    let sibling = k.perf_event_open(&typed(TYPE_SOFTWARE, 0), -1, 6, leader);
    assert_eq!(sibling, Err(tmetric_runtime::Errno(libc::EINVAL)), "leader now on CPU 4");
    assert!(k.perf_event_open(&typed(TYPE_SOFTWARE, 0), -1, 4, leader).is_ok());
}

#[test]
fn task_events_count_on_a_cpu_of_their_pmu() {
    let mut k = kernel("alderlake", false);
    let atom = type_of(&k, "cpu_atom");
    let task = 4242;
    let core = k.perf_event_open(&raw(0x3c), task, -1, -1).unwrap();
    let small = k.perf_event_open(&typed(atom, 0x3c), task, -1, -1).unwrap();
    // A software task group that gets an atom sibling moves to the atom CPU.
    let clock = k.perf_event_open(&typed(TYPE_SOFTWARE, 1), task, -1, -1).unwrap();
    k.perf_event_open(&typed(atom, 0xc0), task, -1, clock).unwrap();
    k.advance(10 * MS);
    let (_, _, core_cycles) = read_group(&mut k, core, 1);
    let (_, _, atom_cycles) = read_group(&mut k, small, 1);
    assert_eq!(core_cycles[0], k.true_count(&raw(0x3c), 0, 10 * MS).unwrap());
    assert_eq!(atom_cycles[0], k.true_count(&typed(atom, 0x3c), 4, 10 * MS).unwrap());
    let (enabled, running, values) = read_group(&mut k, clock, 2);
    assert_eq!((enabled, running, values[0]), (10 * MS, 10 * MS, 10 * MS));
    assert_eq!(values[1], k.true_count(&typed(atom, 0xc0), 4, 10 * MS).unwrap());
}

#[test]
fn hybrid_pmus_refuse_foreign_cpus_and_mixed_groups() {
    let mut k = kernel("alderlake", false);
    let atom = type_of(&k, "cpu_atom");
    // cpu_core is type 4 and covers CPUs 0-3; cpu_atom covers 4-7.
    assert_eq!(k.perf_event_open(&raw(0xc4), -1, 5, -1), Err(tmetric_runtime::Errno(libc::ENOENT)));
    assert_eq!(
        k.perf_event_open(&typed(atom, 0xc4), -1, 1, -1),
        Err(tmetric_runtime::Errno(libc::ENOENT))
    );
    assert!(k.perf_event_open(&typed(atom, 0xc4), -1, 5, -1).is_ok());
    // A generic cycles event on an atom CPU falls back to cpu_atom and may lead atom events
    // (perf_init_event: ENOENT from cpu_core, retried on every PMU); it counts the atom
    // core's cycles there and the P core's on CPU 0.
    assert!(group(&mut k, 5, &[typed(TYPE_HARDWARE, 0), typed(atom, 0xc4)]).is_ok());
    assert!(group(&mut k, 0, &[typed(TYPE_HARDWARE, 0), raw(0xc4)]).is_ok());
    assert_eq!(
        group(&mut k, 0, &[typed(TYPE_HARDWARE, 0), typed(atom, 0xc4)]),
        Err((1, libc::ENOENT))
    );
    let legacy = typed(TYPE_HARDWARE, 0);
    let (p_cycles, e_cycles) = (k.profile().cycles_on(0), k.profile().cycles_on(5));
    assert_ne!(p_cycles, e_cycles, "the core types run at different clocks");
    assert_eq!(k.true_count(&legacy, 0, 1_000 * MS), Ok(p_cycles));
    assert_eq!(k.true_count(&legacy, 5, 1_000 * MS), Ok(e_cycles));
    assert_eq!(k.true_count(&raw(0x3c), 0, 1_000 * MS), Ok(p_cycles));
    assert_eq!(k.true_count(&typed(atom, 0x3c), 5, 1_000 * MS), Ok(e_cycles));
    // ... but the extended type pins it to cpu_core, which does not cover CPU 5.
    let core_cycles = typed(TYPE_HARDWARE, 4 << 32);
    assert_eq!(group(&mut k, 5, &[core_cycles]), Err((0, libc::ENOENT)));
    // Task events: one group may not mix cpu_core and cpu_atom.
    let leader = k.perf_event_open(&raw(0xc4), 4242, -1, -1).unwrap();
    assert_eq!(
        k.perf_event_open(&typed(atom, 0xc4), 4242, -1, leader),
        Err(tmetric_runtime::Errno(libc::EINVAL))
    );
    // Software and msr events may join a hardware group.
    let msr = type_of(&k, "msr");
    assert!(k.perf_event_open(&typed(TYPE_SOFTWARE, 1), 4242, -1, leader).is_ok());
    assert!(k.perf_event_open(&typed(msr, 0), 4242, -1, leader).is_ok());
    // Core and uncore in one group: two hardware PMUs.
    let imc = type_of(&k, "uncore_imc_free_running_0");
    let imc_attr = Attr { type_: imc, config: 0x20ff, ..Attr::default() };
    assert_eq!(group(&mut k, 0, &[raw(0xc4), imc_attr]), Err((1, libc::EINVAL)));
}

#[test]
fn other_pmus_and_attributes_are_refused_as_the_kernel_does() {
    let mut k = kernel("sapphirerapids", false);
    let e = |r: Result<i32, tmetric_runtime::Errno>| r.map(|_| ()).map_err(|e| e.0);
    assert_eq!(e(k.perf_event_open(&typed(999, 0), -1, 0, -1)), Err(libc::ENOENT));
    assert_eq!(e(k.perf_event_open(&typed(TYPE_SOFTWARE, 99), -1, 0, -1)), Err(libc::ENOENT));
    assert_eq!(e(k.perf_event_open(&typed(TYPE_HARDWARE, 7), -1, 0, -1)), Err(libc::ENOENT));
    assert_eq!(e(k.perf_event_open(&typed(TYPE_HARDWARE, 42), -1, 0, -1)), Err(libc::EINVAL));
    assert_eq!(e(k.perf_event_open(&raw(0xc4), -1, -1, -1)), Err(libc::EINVAL));
    assert_eq!(e(k.perf_event_open(&raw(0xc4), -1, 8, -1)), Err(libc::EINVAL));
    assert_eq!(e(k.perf_event_open(&raw(0xc4), -1, 0, 77)), Err(libc::EBADF));
    let msr = type_of(&k, "msr");
    assert_eq!(e(k.perf_event_open(&typed(msr, 3), -1, 0, -1)), Err(libc::EINVAL), "no pperf");
    let guest = Attr { exclude_guest: true, ..typed(msr, 0) };
    assert_eq!(e(k.perf_event_open(&guest, -1, 0, -1)), Err(libc::EINVAL));
    let imc = type_of(&k, "uncore_imc_0");
    assert_eq!(e(k.perf_event_open(&typed(imc, 0x05), 4242, -1, -1)), Err(libc::EINVAL));
    // Uncore boxes: 4 general counters and the fixed clockticks counter (config 0xff).
    let box_events: Vec<Attr> = (1..=5).map(|i| typed(imc, i)).collect();
    assert_eq!(group(&mut k, 1, &box_events), Err((4, libc::EINVAL)));
    let mut with_fixed: Vec<Attr> = (1..=4).map(|i| typed(imc, i)).collect();
    with_fixed.push(typed(imc, 0xff));
    assert!(group(&mut k, 1, &with_fixed).is_ok());
    // pinned only on a leader.
    let leader = k.perf_event_open(&raw(0xc4), -1, 0, -1).unwrap();
    let pinned = Attr { pinned: true, ..raw(0xc5) };
    assert_eq!(e(k.perf_event_open(&pinned, -1, 0, leader)), Err(libc::EINVAL));
    // A sibling on another CPU.
    assert_eq!(e(k.perf_event_open(&raw(0xc5), -1, 1, leader)), Err(libc::EINVAL));
    // Generic cache events: valid ids open on the core PMU, others are EINVAL.
    let l1d_read_miss = typed(tmetric_runtime::sys::TYPE_HW_CACHE, 0x10000);
    let llc_read_access = typed(tmetric_runtime::sys::TYPE_HW_CACHE, 0x2);
    assert!(group(&mut k, 0, &[l1d_read_miss.clone(), llc_read_access.clone()]).is_ok());
    assert_ne!(k.true_count(&l1d_read_miss, 0, MS), k.true_count(&llc_read_access, 0, MS));
    let bad_cache = typed(tmetric_runtime::sys::TYPE_HW_CACHE, 0x7);
    assert_eq!(e(k.perf_event_open(&bad_cache, -1, 0, -1)), Err(libc::EINVAL));
}

#[test]
fn generic_hardware_events_map_per_vendor() {
    let cycles = typed(TYPE_HARDWARE, 0);
    let instructions = typed(TYPE_HARDWARE, 1);
    for name in ["sapphirerapids", "amdzen4", "neoverse-n2", "alderlake"] {
        let k = kernel(name, false);
        let cpu = if name == "alderlake" { 5 } else { 1 };
        let p = k.profile();
        assert_eq!(k.true_count(&cycles, cpu, 1_000 * MS), Ok(p.cycles_on(cpu)), "{name}");
        assert_eq!(k.true_count(&instructions, cpu, 1_000 * MS), Ok(p.instructions_on(cpu)));
    }
    // AMD has no bus-cycles; Intel has no stalled-cycles on Skylake and later.
    let amd = kernel("amdzen4", false);
    assert_eq!(
        amd.true_count(&typed(TYPE_HARDWARE, 6), 0, MS),
        Err(tmetric_runtime::Errno(libc::ENOENT))
    );
    let skx = kernel("skylakex", false);
    assert_eq!(
        skx.true_count(&typed(TYPE_HARDWARE, 7), 0, MS),
        Err(tmetric_runtime::Errno(libc::ENOENT))
    );
    // The N2 cycle counter holds generic cycles beside 6 programmable counters.
    let mut n2 = kernel("neoverse-n2", false);
    let mut attrs = vec![cycles];
    attrs.extend((0..6).map(|i| typed(TYPE_HARDWARE, [1, 2, 3, 4, 5, 8][i])));
    assert!(group(&mut n2, 0, &attrs).is_ok());
    attrs.push(typed(TYPE_HARDWARE, 7));
    assert_eq!(group(&mut n2, 0, &attrs), Err((7, libc::EINVAL)));
}

#[test]
fn arm_validates_with_the_cycle_counter_and_skips_a_disabled_leader() {
    let mut k = kernel("neoverse-n2", false);
    let arm = type_of(&k, "armv8_pmuv3_0");
    let ev = |c: u64| typed(arm, c);
    // CPU_CYCLES takes the cycle counter: cycles + 6 events fit; a 7th does not.
    let mut fits = vec![ev(0x11)];
    fits.extend((0..6).map(|i| ev(0x20 + i)));
    assert!(group(&mut k, 0, &fits).is_ok());
    let too_many: Vec<Attr> = (0..7).map(|i| ev(0x20 + i)).collect();
    assert_eq!(group(&mut k, 0, &too_many), Err((6, libc::EINVAL)));
    // arm_pmu.c validate_event skips OFF events without enable_on_exec, so 7 events behind
    // a disabled leader open, and then can never be scheduled.
    let mut behind_disabled = too_many.clone();
    behind_disabled[0].disabled = true;
    let fds = group(&mut k, 0, &behind_disabled).unwrap();
    k.enable(fds[0], true).unwrap();
    k.advance(20 * MS);
    let (enabled, running, _) = read_group(&mut k, fds[0], 7);
    assert_eq!((enabled, running), (20 * MS, 0));
}

// ---- schedule-time rules ----

#[test]
fn the_nmi_watchdog_takes_fixed_counter_one_on_intel() {
    // 8 GP events + cycles: fits an empty PMU (validate_group), but with the watchdog's
    // cycles on fixed counter 1 the group's cycles need a 9th GP counter: never counted.
    let mut cycles_group = gp_events(0x90, 8);
    cycles_group.push(raw(0x3c));
    for watchdog in [false, true] {
        let mut k = kernel("sapphirerapids", watchdog);
        let fds = group(&mut k, 0, &cycles_group).unwrap();
        let other = group(&mut k, 1, &gp_events(0x90, 8)).unwrap();
        k.advance(40 * MS);
        let (enabled, running, values) = read_group(&mut k, fds[0], 9);
        assert_eq!(enabled, 40 * MS);
        if watchdog {
            assert_eq!((running, values[8]), (0, 0), "never scheduled");
        } else {
            assert_eq!(running, 40 * MS);
        }
        // Without cycles, 8 GP events run alongside the watchdog.
        let (_, running, _) = read_group(&mut k, other[0], 8);
        assert_eq!(running, 40 * MS, "watchdog {watchdog}");
    }
    // AMD: the watchdog holds one of the 6 GP counters.
    let mut amd = kernel("amdzen4", true);
    let six = group(&mut amd, 0, &gp_events(0x90, 6)).unwrap();
    let five = group(&mut amd, 1, &gp_events(0x90, 5)).unwrap();
    amd.advance(40 * MS);
    assert_eq!(read_group(&mut amd, six[0], 6).1, 0);
    assert_eq!(read_group(&mut amd, five[0], 5).1, 40 * MS);
}

#[test]
fn rotation_gives_each_of_three_full_groups_a_third() {
    let mut k = kernel("sapphirerapids", false);
    let groups: Vec<Vec<i32>> =
        (0..3).map(|g| group(&mut k, 2, &gp_events(0x90 + 8 * g, 8)).unwrap()).collect();
    assert_eq!(k.state_of(groups[0][0]), Some(SimState::Active));
    assert_eq!(k.state_of(groups[1][0]), Some(SimState::Inactive));
    k.advance(1200 * MS + 1);
    let profile = k.profile();
    for g in &groups {
        let (enabled, running, values) = read_group(&mut k, g[0], 8);
        assert_eq!(enabled, 1200 * MS + 1);
        let third = enabled / 3;
        assert!(running.abs_diff(third) <= 4 * MS, "running {running} of {enabled}");
        for (i, &value) in values.iter().enumerate() {
            let scaled = (value as f64 * enabled as f64 / running as f64) as u64;
            let fd_attr =
                raw(0x90 + 8 * (groups.iter().position(|x| x == g).unwrap() as u64) + i as u64);
            let truth = k.true_count(&fd_attr, 2, enabled).unwrap();
            assert!(scaled.abs_diff(truth) <= 4, "scaled {scaled} true {truth}");
            assert!(truth > 0);
        }
    }
    assert!(profile.cycles_on(2) > profile.cycles_on(0));
}

#[test]
fn the_mux_interval_sets_the_rotation_period() {
    let mut k = kernel("amdzen4", false);
    k.set_mux_interval_ms(10);
    let a = group(&mut k, 0, &gp_events(0x90, 6)).unwrap();
    let b = group(&mut k, 0, &gp_events(0xa0, 6)).unwrap();
    k.advance(9 * MS);
    assert_eq!(k.state_of(a[0]), Some(SimState::Active));
    k.advance(MS);
    assert_eq!(k.state_of(b[0]), Some(SimState::Active));
    assert_eq!(k.times(a[0]), Some((10 * MS, 10 * MS)));
    k.advance(25 * MS);
    // a: 0-10 and 20-30 ms; b: 10-20 and 30-35 ms.
    assert_eq!(k.times(a[0]), Some((35 * MS, 20 * MS)));
    assert_eq!(k.times(b[0]), Some((35 * MS, 15 * MS)));
}

#[test]
fn after_a_flexible_group_fails_later_groups_wait_for_rotation() {
    // merge_sched_in: once a flexible group does not fit, can_add_hw is cleared and later
    // hardware groups of the pass are not tried, even one that would fit.
    let mut k = kernel("sapphirerapids", false);
    let full = group(&mut k, 0, &gp_events(0x90, 8)).unwrap();
    let one_more = group(&mut k, 0, &[raw(0xc4)]).unwrap();
    let fixed_only = group(&mut k, 0, &[raw(0x0100)]).unwrap();
    let software = group(&mut k, 0, &[typed(TYPE_SOFTWARE, 0)]).unwrap();
    assert_eq!(k.state_of(full[0]), Some(SimState::Active));
    assert_eq!(k.state_of(one_more[0]), Some(SimState::Inactive));
    assert_eq!(k.state_of(fixed_only[0]), Some(SimState::Inactive));
    assert_eq!(k.state_of(software[0]), Some(SimState::Active));
    // After one tick the first active group moved to the end: [one_more, fixed_only, full].
    k.advance(4 * MS);
    assert_eq!(k.state_of(one_more[0]), Some(SimState::Active));
    assert_eq!(k.state_of(fixed_only[0]), Some(SimState::Active));
    assert_eq!(k.state_of(full[0]), Some(SimState::Inactive));
    let (enabled, running) = k.times(fixed_only[0]).unwrap();
    assert_eq!((enabled, running), (4 * MS, 0));
}

#[test]
fn cpu_context_groups_go_on_before_task_groups() {
    // perf_event_sched_in: CPU pinned, task pinned, CPU flexible, task flexible. A CPU-wide
    // group holding every GP counter leaves a task's group on that CPU no room, and rotating
    // a single group changes nothing, so the task group never counts.
    let mut k = kernel("sapphirerapids", false);
    let wide = group(&mut k, 0, &gp_events(0x90, 8)).unwrap();
    let task_leader = k.perf_event_open(&raw(0xc4), 4242, -1, -1).unwrap();
    k.advance(40 * MS);
    assert_eq!(k.times(wide[0]), Some((40 * MS, 40 * MS)));
    assert_eq!(k.times(task_leader), Some((40 * MS, 0)));
    // On another CPU the task would count, but the simulator places it on CPU 0.
    k.close(wide[0]);
    for &fd in &wide[1..] {
        k.close(fd);
    }
    k.advance(MS);
    assert_eq!(k.times(task_leader), Some((41 * MS, MS)));
}

#[test]
fn a_pinned_group_that_does_not_fit_is_in_error_and_reads_eof() {
    let mut k = kernel("sapphirerapids", false);
    group(&mut k, 0, &[Attr { pinned: true, ..raw(0x0300) }]).unwrap();
    let second = group(&mut k, 0, &[Attr { pinned: true, ..raw(0x0300) }]).unwrap();
    assert_eq!(k.state_of(second[0]), Some(SimState::Error));
    let mut buf = [0u8; 64];
    assert_eq!(k.read(second[0], &mut buf), Ok(0));
}

#[test]
fn disable_enable_and_reset_follow_the_ioctls() {
    let mut k = kernel("sapphirerapids", false);
    let fds = group(&mut k, 0, &[raw(0x3c), raw(0xc0)]).unwrap();
    k.advance(10 * MS);
    k.disable(fds[0], true).unwrap();
    k.advance(10 * MS);
    let (enabled, running, values) = read_group(&mut k, fds[0], 2);
    assert_eq!((enabled, running), (10 * MS, 10 * MS));
    assert_eq!(values[0], 25_000_000, "2.5 GHz for 10 ms on CPU 0");
    assert_eq!(values[1], 40_000_000, "IPC 1.6");
    k.reset(fds[0], true).unwrap();
    assert_eq!(read_group(&mut k, fds[0], 2).2, vec![0, 0]);
    k.enable(fds[0], true).unwrap();
    k.advance(MS);
    let (enabled, _, values) = read_group(&mut k, fds[0], 2);
    assert_eq!((enabled, values[0]), (11 * MS, 2_500_000));
    // A plain read of one member: value, enabled, running, id.
    let mut plain = raw(0xc4);
    plain.read_format = READ_FORMAT & !tmetric_runtime::sys::FORMAT_GROUP;
    let fd = k.perf_event_open(&plain, -1, 0, -1).unwrap();
    k.advance(MS);
    let mut buf = [0u8; 32];
    assert_eq!(k.read(fd, &mut buf), Ok(32));
    let mut small = [0u8; 16];
    assert_eq!(k.read(fds[0], &mut small), Err(tmetric_runtime::Errno(libc::ENOSPC)));
    let id = k.event_id(fd).unwrap();
    assert_eq!(u64::from_ne_bytes(buf[24..32].try_into().unwrap()), id);
}

#[test]
fn ioctls_without_the_group_flag_touch_one_event() {
    let mut k = kernel("sapphirerapids", false);
    let fds = group(&mut k, 0, &[raw(0x3c), raw(0xc0), raw(0xc4)]).unwrap();
    k.advance(MS);
    // Disabling one sibling stops its count; the group goes on.
    k.disable(fds[1], false).unwrap();
    k.reset(fds[2], false).unwrap();
    k.advance(MS);
    let (enabled, running, values) = read_group(&mut k, fds[0], 3);
    assert_eq!((enabled, running), (2 * MS, 2 * MS));
    assert_eq!(values[0], 5_000_000);
    assert_eq!(values[1], 4_000_000, "instructions stopped after 1 ms");
    assert_eq!(values[2], k.true_count(&raw(0xc4), 0, MS).unwrap(), "reset at 1 ms");
    // Disabling the leader alone stops the whole group: its siblings cannot run.
    k.enable(fds[1], false).unwrap();
    k.disable(fds[0], false).unwrap();
    k.advance(MS);
    let (enabled, _, values) = read_group(&mut k, fds[0], 3);
    assert_eq!((enabled, values[0], values[1]), (2 * MS, 5_000_000, 4_000_000));
    assert_eq!(k.state_of(fds[1]), Some(SimState::Inactive));
    assert_eq!(k.event_id(999), Err(tmetric_runtime::Errno(libc::EBADF)));
}

#[test]
fn counters_count_a_task_over_the_simulated_kernel() {
    let k = kernel("alderlake", true);
    let handle = k.clone();
    let specs = vec![
        CounterSpec {
            name: "task-clock".into(),
            attr: typed(TYPE_SOFTWARE, 1),
            cpus: None,
            cgroup: None,
        },
        CounterSpec { name: "cycles".into(), attr: raw(0x3c), cpus: None, cgroup: None },
        CounterSpec { name: "instructions".into(), attr: raw(0xc0), cpus: None, cgroup: None },
    ];
    let target = Target::Task { pid: 4242, on_exec: true };
    let mut counters = CounterSet::open(k, specs, &[vec![0, 1, 2]], target).expect("open");
    handle.advance(50 * MS);
    let snapshot = counters.read().unwrap();
    let cycles = snapshot.aggregate(1).unwrap();
    assert_eq!(cycles.running, 50 * MS);
    // The task group moved to the first cpu_core CPU, 0.
    assert_eq!(cycles.value, handle.true_count(&raw(0x3c), 0, 50 * MS).unwrap());
    assert_eq!(snapshot.aggregate(0).unwrap().value, 50 * MS);
}

#[test]
fn software_events_always_run_and_count_time() {
    let mut k = kernel("amdzen4", true);
    let fds = group(
        &mut k,
        3,
        &[typed(TYPE_SOFTWARE, 1), typed(TYPE_SOFTWARE, 3), typed(TYPE_SOFTWARE, 2)],
    )
    .unwrap();
    let task = k.perf_event_open(&typed(TYPE_SOFTWARE, 0), 4242, -1, -1).unwrap();
    k.advance(1_000 * MS);
    let (enabled, running, values) = read_group(&mut k, fds[0], 3);
    assert_eq!((enabled, running), (1_000 * MS, 1_000 * MS));
    assert_eq!(values, vec![1_000_000_000, 500, 2_000]);
    assert_eq!(read_group(&mut k, task, 1).2, vec![1_000_000_000]);
}

#[test]
fn topdown_reads_are_slots_times_the_workload_fractions() {
    let mut k = kernel("sapphirerapids", true);
    let mut attrs = vec![raw(0x0400)];
    attrs.extend((0..8).map(|n| raw(0x8000 + (n << 8))));
    let fds = group(&mut k, 1, &attrs).unwrap();
    k.advance(100 * MS);
    let (_, _, values) = read_group(&mut k, fds[0], 9);
    let slots = values[0];
    assert_eq!(slots, k.true_count(&raw(0x0400), 1, 100 * MS).unwrap());
    assert_eq!(slots, 6 * 2_625_000_000 / 10, "6-wide, CPU 1 at 105 % of 2.5 GHz, 100 ms");
    for (n, fraction) in TOPDOWN.iter().enumerate() {
        let want = slots as f64 * fraction;
        assert!(
            (values[n + 1] as f64 - want).abs() <= 1.0,
            "field {n}: {} vs {want}",
            values[n + 1]
        );
    }
    let level1: u64 = values[1..5].iter().sum();
    assert!(slots - level1 <= 4, "level 1 sums to slots up to rounding");
}

#[test]
fn counters_run_over_the_simulated_kernel() {
    let k = kernel("sapphirerapids", true);
    let handle = k.clone();
    let spec = |name: &str, config: u64| CounterSpec {
        name: name.into(),
        attr: Attr { type_: TYPE_RAW, config, ..Attr::default() },
        cpus: None,
        cgroup: None,
    };
    let mut specs = vec![
        spec("slots", 0x0400),
        spec("topdown-retiring", 0x8000),
        spec("topdown-bad-spec", 0x8100),
        spec("topdown-fe-bound", 0x8200),
        spec("topdown-be-bound", 0x8300),
    ];
    // A group with a topdown event led by something else fails as a whole and is split
    // into single events by the runtime's weak-group fallback.
    specs.push(spec("cycles", 0x3c));
    specs.push(spec("retiring-again", 0x8000));
    let groups = vec![vec![0, 1, 2, 3, 4], vec![5, 6]];
    let mut counters =
        CounterSet::open(k, specs, &groups, Target::Cpus(vec![0, 1, 2, 3])).expect("open");
    assert_eq!(counters.broken_groups(), 1);
    assert_eq!(counters.failure(6).map(|f| f.errno.0), Some(libc::EINVAL));
    counters.enable().unwrap();
    let before = counters.read().unwrap();
    handle.advance(200 * MS);
    let delta = counters.read().unwrap().since(&before);
    let slots = delta.aggregate(0).unwrap();
    assert!(slots.counted() && slots.running == slots.enabled);
    let expected: u64 =
        (0..4).map(|c| handle.true_count(&spec("", 0x400).attr, c, 200 * MS).unwrap()).sum();
    assert_eq!(slots.value, expected);
    for (i, want) in TOPDOWN[..4].iter().enumerate() {
        let fraction = delta.aggregate(1 + i).unwrap().value as f64 / slots.value as f64;
        assert!((fraction - want).abs() < 1e-6, "metric {i}: {fraction}");
    }
    drop(counters);
    assert_eq!(handle.open_count(), 0);
}

#[test]
fn the_real_clock_moves_with_wall_time() {
    let mut k = SimKernel::new(machine("icelake", true));
    let fd = k.perf_event_open(&typed(TYPE_SOFTWARE, 1), 4242, -1, -1).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (enabled, running, values) = read_group(&mut k, fd, 1);
    assert!(enabled >= 20 * MS && running == enabled, "{enabled}");
    assert!(values[0] >= 20 * MS);
}

/// The machine's PMU for a catalogue PMU name: itself, the core PMU for `default_core`, or
/// the first instance (`uncore_cha` -> `uncore_cha_0`, `cha_0` -> `uncore_cha_0`).
fn pmu_instance(sysfs: &Sysfs, json_pmu: &str) -> Option<String> {
    if sysfs.has_pmu(json_pmu) {
        return Some(json_pmu.to_string());
    }
    if json_pmu == "default_core" || json_pmu == "cpu" {
        return sysfs.core_pmu();
    }
    let prefixed = format!("uncore_{json_pmu}");
    sysfs.pmu_names().into_iter().find(|n| {
        [json_pmu, prefixed.as_str()]
            .iter()
            .any(|p| n == p || n.strip_prefix(p).is_some_and(|rest| rest.starts_with('_')))
    })
}

#[test]
fn catalogue_events_resolve_and_open_alone_and_metric_pmus_exist() {
    use tmetric_catalog::IdKind;
    use tmetric_runtime::event;
    for &name in Machine::names() {
        let m = machine(name, false);
        let tree = TempTree::new(&format!("events-{name}"));
        m.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
        let sysfs = Sysfs::new(tree.sys());
        let model = tmetric_catalog::model_for_cpuid(&m.cpuid()).unwrap();
        let mut k = SimKernel::manual(m.clone());
        let mut opened = 0;
        let mut failures = Vec::new();
        for e in model.events.iter() {
            let Some(pmu) = pmu_instance(&sysfs, model.str(e.pmu)) else { continue };
            let terms = model.str(e.encoding);
            let result = event::resolve_on_pmu(&pmu, terms, "", "x", &sysfs)
                .map_err(|err| err.to_string())
                .and_then(|c| {
                    let (_, p) = m.pmu_by_type(c.attr.type_).expect("a PMU of the machine");
                    let cpu = p.cpus.as_ref().map_or(0, |c| c[0]);
                    let attr = Attr { read_format: READ_FORMAT, ..c.attr };
                    k.perf_event_open(&attr, -1, cpu as i32, -1).map_err(|e| e.to_string())
                });
            match result {
                Ok(fd) => {
                    opened += 1;
                    k.close(fd);
                }
                Err(err) => failures.push(format!("{} {pmu}/{terms}: {err}", model.str(e.name))),
            }
        }
        // The SPR IIO JSON puts channel bits into `umask`, wider than the kernel's 8-bit
        // IIO umask format: perf refuses those the same way.
        for id in model.ids {
            if let IdKind::Event(i) = id.kind {
                let event = model.str(model.events.at(i as usize).name);
                let prefix = format!("{event} ");
                assert!(
                    !failures.iter().any(|f| f.starts_with(&prefix)),
                    "{name}: metric input {event} does not open"
                );
            }
        }
        let before = failures.len();
        failures.retain(|f| {
            !(name == "sapphirerapids"
                && f.starts_with("UNC_IIO_")
                && f.ends_with("does not fit the 8 bits of the `umask` format"))
        });
        assert!(before - failures.len() <= 200, "{name}: {} IIO events", before - failures.len());
        assert!(failures.is_empty(), "{name}: {failures:#?}");
        assert!(opened > 150, "{name}: {opened}");
        for id in model.ids {
            let pmu = match id.kind {
                IdKind::Event(i) => model.str(model.events.at(i as usize).pmu),
                IdKind::Sysfs => model.str(id.pmu),
                _ => continue,
            };
            assert!(pmu_instance(&sysfs, pmu).is_some(), "{name}: a metric input on `{pmu}`");
        }
    }
}

#[test]
fn random_call_sequences_keep_the_invariants() {
    // A fixed linear congruential sequence: opens (alone or into groups, per CPU or per
    // task, any PMU), closes, ioctls, reads and clock steps in random order. Nothing may
    // panic, running never exceeds enabled, enabled never exceeds the time since the open,
    // and no count exceeds the event's true count over its running time.
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    for &name in Machine::names() {
        let mut k = kernel(name, next(2) == 0);
        let m = k.machine();
        let types: Vec<u32> = m.pmus.iter().map(|p| p.type_).collect();
        let ncpus = m.cpus.len() as u64;
        let mut open: Vec<(i32, Attr, u64, i32, i32)> = Vec::new();
        let (mut opened, mut grouped) = (0, 0);
        for _ in 0..400 {
            match next(10) {
                0..=3 => {
                    let type_ = match next(4) {
                        0 => TYPE_SOFTWARE,
                        1 => TYPE_HARDWARE,
                        2 => TYPE_RAW,
                        _ => types[next(types.len() as u64) as usize],
                    };
                    let config = match next(3) {
                        0 => next(12),
                        1 => 0x3c | next(4) << 8,
                        _ => next(0x10000),
                    };
                    let attr = Attr { disabled: next(4) == 0, ..typed(type_, config) };
                    let (mut pid, mut cpu) =
                        if next(3) == 0 { (4242, -1) } else { (-1, next(ncpus) as i32) };
                    let mut leader = -1;
                    if !open.is_empty() && next(3) != 0 {
                        // Join a group with the leader's own pid and CPU.
                        let pick = &open[next(open.len() as u64) as usize];
                        (leader, pid, cpu) = (pick.0, pick.3, pick.4);
                    }
                    if let Ok(fd) = k.perf_event_open(&attr, pid, cpu, leader) {
                        open.push((fd, attr, k.now(), pid, cpu));
                        opened += 1;
                        grouped += usize::from(leader >= 0);
                    }
                }
                4 if !open.is_empty() => {
                    let (fd, ..) = open.remove(next(open.len() as u64) as usize);
                    k.close(fd);
                }
                5 if !open.is_empty() => {
                    let fd = open[next(open.len() as u64) as usize].0;
                    let group = next(2) == 0;
                    match next(3) {
                        0 => k.enable(fd, group).unwrap(),
                        1 => k.disable(fd, group).unwrap(),
                        _ => k.reset(fd, group).unwrap(),
                    }
                }
                6 if !open.is_empty() => {
                    let (fd, ..) = open[next(open.len() as u64) as usize];
                    let mut buf = vec![0u8; 8 * (3 + 2 * 64)];
                    let n = k.read(fd, &mut buf).unwrap();
                    assert!(n == 0 || n % 8 == 0);
                }
                _ => k.advance(next(10 * MS)),
            }
            let now = k.now();
            for (fd, attr, since, ..) in &open {
                let Some((enabled, running)) = k.times(*fd) else { continue };
                assert!(running <= enabled && enabled <= now - since, "{name} fd {fd}");
                let mut buf = vec![0u8; 8 * (3 + 2 * 64)];
                let n = k.read(*fd, &mut buf).unwrap();
                let id = k.event_id(*fd).unwrap();
                let words: Vec<u64> =
                    buf[..n].chunks(8).map(|w| u64::from_ne_bytes(w.try_into().unwrap())).collect();
                let Some(value) = words.get(3..).and_then(|pairs| {
                    pairs.chunks(2).find(|p| p.get(1) == Some(&id)).map(|p| p[0])
                }) else {
                    continue;
                };
                let bound = (0..ncpus as u32)
                    .filter_map(|c| k.true_count(attr, c, running).ok())
                    .max()
                    .unwrap_or(0);
                assert!(value <= bound, "{name} fd {fd}: {value} > {bound}");
            }
        }
        assert!(opened >= 40 && grouped >= 10, "{name}: {opened} opened, {grouped} in groups");
        for (fd, ..) in open {
            k.close(fd);
        }
        assert_eq!(k.open_count(), 0);
    }
}
