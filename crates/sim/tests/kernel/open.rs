//! Open-time rules: each refusal with the errno Linux 6.12 gives (group sizes, counter
//! constraints, topdown leaders, extra registers, formats, hybrid PMUs, foreign attributes), and
//! generic hardware events per vendor.

use tmetric_runtime::sys::{TYPE_HARDWARE, TYPE_SOFTWARE};
use tmetric_runtime::{Attr, Syscalls};
use tmetric_sim::{SimKernel, SimState};

use super::{MS, gp_events, group, kernel, machine, raw, read_group, type_of, typed};

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

/// The N2 machine file with `long_counters` and `caps/threshold_max` as given: an earlier
/// PMUv3 (32-bit counters, as before FEAT_PMUv3p5) or one with FEAT_PMUv3_TH.
fn n2_variant(long_counters: bool, threshold_max: &str) -> SimKernel {
    let (_, text) = tmetric_sim::MACHINE_FILES.iter().find(|(n, _)| *n == "neoverse-n2").unwrap();
    let mut json: serde_json::Value = serde_json::from_str(text).unwrap();
    let arm = &mut json["pmus"][0]["arm_pmuv3"];
    arm["long_counters"] = serde_json::json!(long_counters);
    arm["caps"]["threshold_max"] = serde_json::json!(threshold_max);
    SimKernel::manual(tmetric_sim::Machine::parse(&json.to_string(), "n2 variant").unwrap())
}

/// `armv8pmu_get_event_idx` and `__armv8_pmuv3_map_event` (drivers/perf/arm_pmuv3.c,
/// Linux 6.12) on the cycle counter, chained 64-bit events, thresholds and user reads.
#[test]
fn arm_places_cycles_chains_and_thresholds_as_armv8pmu_get_event_idx() {
    const LONG: u64 = 1;
    const RDPMC: u64 = 2;
    let th = |t: u64| t << 5;
    let e = |r: Result<i32, tmetric_runtime::Errno>| r.map(|_| ()).map_err(|e| e.0);
    let mut k = kernel("neoverse-n2", false);
    let arm = type_of(&k, "armv8_pmuv3_0");
    let ev = |c: u64, config1: u64| Attr { config1, ..typed(arm, c) };
    let six: Vec<Attr> = (0..6).map(|i| ev(0x20 + i, 0)).collect();
    // A second CPU_CYCLES in a group goes to a programmable counter: two cycles and five
    // others fit, two cycles and six do not.
    let with = |first: Vec<Attr>, n: usize| [first, six[..n].to_vec()].concat();
    assert!(group(&mut k, 0, &with(vec![ev(0x11, 0), ev(0x11, 0)], 5)).is_ok());
    assert_eq!(group(&mut k, 0, &with(vec![ev(0x11, 0), ev(0x11, 0)], 6)), Err((7, libc::EINVAL)));
    // CHAIN, the odd half of a pair, never opens.
    assert_eq!(e(k.perf_event_open(&ev(0x1e, 0), -1, 0, -1)), Err(libc::EINVAL));
    // N2 has no FEAT_PMUv3_TH (threshold_max 0): any threshold is refused.
    assert_eq!(e(k.perf_event_open(&ev(0x11, th(1)), -1, 0, -1)), Err(libc::EINVAL));
    // rdpmc only on a task's event.
    assert_eq!(e(k.perf_event_open(&ev(0x11, RDPMC), -1, 0, -1)), Err(libc::EINVAL));
    let task = k.perf_event_open(&ev(0x11, RDPMC), 0, -1, -1);
    assert!(task.is_ok());
    k.close(task.unwrap());
    // 64-bit counters (PMUv3p5): a long event takes one counter.
    assert!(group(&mut k, 0, &six.iter().map(|a| ev(a.config, LONG)).collect::<Vec<_>>()).is_ok());

    // 32-bit counters: a long event chains an odd counter with the even one below it.
    let mut old = n2_variant(false, "0x00000000");
    let longs = |n: u64| (0..n).map(|i| ev(0x20 + i, LONG)).collect::<Vec<_>>();
    assert!(group(&mut old, 0, &longs(3)).is_ok());
    assert_eq!(group(&mut old, 0, &longs(4)), Err((3, libc::EINVAL)));
    // One plain event on counter 0 leaves the pairs (3, 2) and (5, 4): counter 1 is lost.
    let plain_first = [vec![ev(0x30, 0)], longs(2)].concat();
    assert!(group(&mut old, 0, &plain_first).is_ok());
    assert_eq!(group(&mut old, 0, &[plain_first, longs(1)].concat()), Err((3, libc::EINVAL)));
    // Long cycles take the 64-bit cycle counter; a second pair takes two counters.
    assert!(group(&mut old, 0, &[vec![ev(0x11, LONG), ev(0x11, LONG)], longs(2)].concat()).is_ok());
    // A long user-read event cannot chain: only CPU_CYCLES may be one (EOPNOTSUPP), and a
    // second one finds the cycle counter taken (EAGAIN, so the group is refused).
    assert_eq!(e(old.perf_event_open(&ev(0x20, LONG | RDPMC), 0, -1, -1)), Err(libc::EOPNOTSUPP));
    let lead = old.perf_event_open(&ev(0x11, LONG | RDPMC), 0, -1, -1).unwrap();
    assert_eq!(e(old.perf_event_open(&ev(0x11, LONG | RDPMC), 0, -1, lead)), Err(libc::EINVAL));
    assert!(old.perf_event_open(&ev(0x11, RDPMC), 0, -1, lead).is_ok());

    // With FEAT_PMUv3_TH, CPU_CYCLES with a threshold is counted on a programmable counter.
    let mut th_pmu = n2_variant(true, "0x000000ff");
    assert!(group(&mut th_pmu, 0, &with(vec![ev(0x11, th(4))], 6)).is_err());
    assert!(group(&mut th_pmu, 0, &with(vec![ev(0x11, 0)], 6)).is_ok());
    assert_eq!(e(th_pmu.perf_event_open(&ev(0x11, th(0x100)), -1, 0, -1)), Err(libc::EINVAL));
}

/// A cgroup's descriptor belongs to the simulated kernel: it was the machine's own directory
/// descriptor, whose number could be a simulated event's, so closing it (a cgroup that went
/// away) closed that event, and the host target never counted again. Now closing it closes
/// no event, and a cgroup event on a descriptor that is no cgroup is EBADF as in
/// `perf_cgroup_connect`.
#[test]
fn closing_a_cgroup_descriptor_closes_no_event() {
    let mut k = kernel("sapphirerapids", false);
    let clock = typed(TYPE_SOFTWARE, 0);
    let host: Vec<i32> = (0..64).map(|_| k.perf_event_open(&clock, -1, 0, -1).unwrap()).collect();
    let mut in_cgroup = clock.clone();
    in_cgroup.pid_is_cgroup = true;
    for _ in 0..3 {
        let cgroup = k.open_cgroup("/").unwrap();
        let fd = k.perf_event_open(&in_cgroup, cgroup, 0, -1).unwrap();
        k.close(fd);
        k.close(cgroup);
    }
    let mut buf = [0u8; 64];
    for &fd in &host {
        assert!(k.read(fd, &mut buf).is_ok(), "host event {fd} was closed with a cgroup");
    }
    assert_eq!(
        k.perf_event_open(&in_cgroup, host[0], 0, -1),
        Err(tmetric_runtime::Errno(libc::EBADF))
    );
    assert_eq!(
        k.perf_event_open(&in_cgroup, 1000, 0, -1),
        Err(tmetric_runtime::Errno(libc::EBADF))
    );
}

/// A cgroup made for one test under the machine's cgroup2 mount, removed at the end; `None`
/// (the test says so and passes) where cgroups cannot be made (not root, no cgroup2).
struct TestCgroup(std::path::PathBuf);

impl TestCgroup {
    fn make(tag: &str) -> Option<TestCgroup> {
        let mount = tmetric_runtime::sys::cgroup_mount()?;
        let path = mount.join(format!("tmetric-sim-{tag}-{}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => Some(TestCgroup(path)),
            Err(e) => {
                eprintln!("skipped: cannot make a cgroup under {}: {e}", mount.display());
                None
            }
        }
    }

    fn name(&self) -> String {
        self.0.file_name().unwrap().to_string_lossy().into_owned()
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `perf_cgroup_connect`: a group member counts in its leader's cgroup or is refused with
/// EINVAL, as is a member without a cgroup behind a cgroup leader.
#[test]
fn a_group_member_in_another_cgroup_than_its_leader_is_refused() {
    let Some(other) = TestCgroup::make("member") else { return };
    let mut k = kernel("sapphirerapids", false);
    let mut in_cgroup = typed(TYPE_SOFTWARE, 1);
    in_cgroup.pid_is_cgroup = true;
    let root = k.open_cgroup("/").unwrap();
    let elsewhere = k.open_cgroup(&other.name()).unwrap();
    let leader = k.perf_event_open(&in_cgroup, root, 0, -1).unwrap();
    assert!(k.perf_event_open(&in_cgroup, root, 0, leader).is_ok(), "same cgroup");
    assert_eq!(
        k.perf_event_open(&in_cgroup, elsewhere, 0, leader),
        Err(tmetric_runtime::Errno(libc::EINVAL))
    );
    assert_eq!(
        k.perf_event_open(&typed(TYPE_SOFTWARE, 3), -1, 0, leader),
        Err(tmetric_runtime::Errno(libc::EINVAL))
    );
}

/// Software events opened alone, in two cgroups, are read as one group per cgroup and CPU
/// when asked (`Opening::software_together`): the kernel takes each, and each event counts
/// what it counts alone.
#[test]
fn software_events_of_several_cgroups_read_as_one_group_per_cgroup_and_cpu() {
    use tmetric_runtime::{CounterSet, CounterSpec, Target};
    let Some(other) = TestCgroup::make("together") else { return };
    let spec = |name: &str, config: u64, cgroup: &str| CounterSpec {
        name: name.into(),
        attr: typed(TYPE_SOFTWARE, config),
        cpus: None,
        cgroup: Some(cgroup.to_string()),
        filter: None,
    };
    let specs = || {
        vec![
            spec("task-clock", 1, "/"),
            spec("context-switches", 3, "/"),
            spec("task-clock", 1, &other.name()),
            spec("context-switches", 3, &other.name()),
        ]
    };
    let how =
        |together| tmetric_runtime::counter::Opening { inherit: true, software_together: together };
    let k = kernel("sapphirerapids", false);
    let handle = k.clone();
    let target = Target::Cpus(vec![0, 1]);
    let mut together =
        CounterSet::open_as(k, specs(), &[], &[false; 4], target.clone(), how(true)).unwrap();
    assert_eq!(
        together.layout(),
        vec![(0, vec![0, 1]), (1, vec![0, 1]), (0, vec![2, 3]), (1, vec![2, 3])]
    );
    let k = kernel("sapphirerapids", false);
    let alone_handle = k.clone();
    let mut alone = CounterSet::open_as(k, specs(), &[], &[false; 4], target, how(false)).unwrap();
    assert!(alone.layout().iter().all(|(_, events)| events.len() == 1));
    handle.advance(30 * MS);
    alone_handle.advance(30 * MS);
    let (a, b) = (together.read().unwrap(), alone.read().unwrap());
    for event in 0..4 {
        let values = |s: &tmetric_runtime::counter::Snapshot| -> Vec<(i32, u64, u64)> {
            s.events[event]
                .as_ref()
                .unwrap()
                .iter()
                .map(|c| (c.cpu, c.raw.value, c.raw.running))
                .collect()
        };
        assert_eq!(values(&a), values(&b), "event {event}");
    }
}
