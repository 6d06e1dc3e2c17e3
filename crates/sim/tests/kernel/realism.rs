//! The realistic kernel's rules each do what they claim: the rotation interval follows HZ,
//! rotation timers sit on the grid since boot with per-CPU lateness (not in lockstep), CPUs
//! and SMT siblings run their own phases, core events overcount a little, PERF_METRICS
//! gives multiples of 1/255 of the slots; and on a phased workload a schedule that splits a
//! ratio's events over groups really errs more than one that keeps them together.

use tmetric_runtime::Syscalls;
use tmetric_sim::{KernelSpec, Machine, SimKernel, SimWorkload};

use super::{MS, TOPDOWN, gp_events, group, raw, read_group};

/// Two phases (compute at IPC 2.6, memory at IPC 0.5) following `schedule` (JSON fields of
/// `phases`), with the `kernel` object `kernel` and any further top-level fields.
fn workload(schedule: &str, kernel: &str, extra: &str) -> SimWorkload {
    let text = format!(
        r#"{{ "phases": {{ {schedule}, "list": [ {{ "name": "compute", "ipc": 2.6 }},
              {{ "name": "memory", "ipc": 0.5 }} ] }}, "kernel": {kernel} {extra} }}"#
    );
    SimWorkload::parse(&text, "test").unwrap_or_else(|e| panic!("{e}"))
}

fn sim(name: &str, workload: SimWorkload) -> SimKernel {
    let machine = Machine::named(name).expect("a machine").with_nmi_watchdog(false);
    SimKernel::manual_with_workload(machine, workload)
}

/// The simulated times (ns from now) at which the state of `fd` changes while time advances
/// in `step` ns up to `until` ns.
fn switches(k: &SimKernel, fd: i32, step: u64, until: u64) -> Vec<u64> {
    let start = k.now();
    let mut last = k.state_of(fd);
    let mut out = Vec::new();
    while k.now() - start < until {
        k.advance(step);
        let now = k.state_of(fd);
        if now != last {
            out.push(k.now() - start);
            last = now;
        }
    }
    out
}

/// Two groups of 6 GP events on `cpu` of an AMD Zen 4 (6 GP counters, no watchdog): they
/// rotate; the first group's leader.
fn two_full_groups(k: &mut SimKernel, cpu: i32) -> i32 {
    let a = group(k, cpu, &gp_events(0x90, 6)).unwrap();
    group(k, cpu, &gp_events(0xa0, 6)).unwrap();
    a[0]
}

#[test]
fn the_rotation_interval_is_a_thousand_over_hz_ms() {
    for (hz, interval) in [(250, 4 * MS), (1000, MS), (300, 3 * MS)] {
        let w = workload(r#""switch_every_ms": 4"#, &format!(r#"{{ "hz": {hz} }}"#), "");
        let mut k = sim("amdzen4", w);
        assert_eq!(k.machine().hz, hz);
        assert_eq!(k.machine().mux_interval_ms * MS, interval);
        let summary = k.summary();
        assert!(summary.contains(&format!("HZ {hz}")), "{summary}");
        assert!(summary.contains(&format!("every {} ms", interval / MS)), "{summary}");
        let a = two_full_groups(&mut k, 0);
        // The exact model: the timer starts one interval after the group is left out.
        let at = switches(&k, a, MS / 10, 12 * interval + MS / 20);
        let want: Vec<u64> = (1..=12).map(|n| n * interval).collect();
        assert_eq!(at, want, "HZ {hz}");
        // time_running grows by one interval in two.
        let (enabled, running) = k.times(a).unwrap();
        assert_eq!(running, 6 * interval + (enabled - 12 * interval), "HZ {hz}");
    }
    // The realistic kernel: every switch one interval after the last, up to the lateness.
    let mut firsts = Vec::new();
    for seed in 0..5 {
        let kernel = format!(r#"{{ "hz": 1000, "realistic": true, "seed": {seed} }}"#);
        let mut k = sim("amdzen4", workload(r#""switch_every_ms": 4"#, &kernel, ""));
        let a = two_full_groups(&mut k, 0);
        let at = switches(&k, a, 1_000, 10 * MS);
        assert!(at.len() >= 9, "{at:?}");
        for pair in at.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap.abs_diff(MS) <= 30_000, "seed {seed}: {at:?}");
        }
        firsts.push(at[0]);
    }
    // Where the run starts on the grid is random: the first rotation comes at different times.
    firsts.sort_unstable();
    firsts.dedup();
    assert!(firsts.len() >= 4, "{firsts:?}");
    assert!(firsts.iter().any(|&t| t < 900_000), "{firsts:?}");
}

#[test]
fn rotation_timers_of_different_cpus_are_late_by_different_amounts() {
    let on = |realistic: bool| {
        let kernel = format!(r#"{{ "hz": 1000, "realistic": {realistic}, "seed": 11 }}"#);
        let mut k = sim("amdzen4", workload(r#""switch_every_ms": 4"#, &kernel, ""));
        let a = two_full_groups(&mut k, 0);
        let b = two_full_groups(&mut k, 2);
        // Both CPUs' switches, one microsecond apart at most.
        let start = k.now();
        let (mut last_a, mut last_b) = (k.state_of(a), k.state_of(b));
        let (mut at_a, mut at_b) = (Vec::new(), Vec::new());
        while k.now() - start < 5 * MS {
            k.advance(1_000);
            let (sa, sb) = (k.state_of(a), k.state_of(b));
            if sa != last_a {
                at_a.push(k.now() - start);
                last_a = sa;
            }
            if sb != last_b {
                at_b.push(k.now() - start);
                last_b = sb;
            }
        }
        (at_a, at_b)
    };
    let (a, b) = on(false);
    assert_eq!(a, b, "the exact model rotates every CPU in lockstep");
    let (a, b) = on(true);
    assert_eq!(a.len(), b.len(), "{a:?} {b:?}");
    assert!(a.len() >= 4);
    // One grid (CLOCK_MONOTONIC since boot) for both, each CPU late by its own amount.
    assert!(a.iter().zip(&b).all(|(x, y)| x.abs_diff(*y) <= 30_000), "{a:?} {b:?}");
    assert!(a.iter().zip(&b).any(|(x, y)| x != y), "{a:?} {b:?}");
}

#[test]
fn cpus_and_smt_siblings_run_their_own_phases() {
    // Phases of 10 ms in turn: a cycle of 20 ms.
    let schedule = r#""switch_every_ms": 10"#;
    // Given offsets: CPU 1 half a cycle ahead of CPU 0, so always in the other phase.
    let k = sim("skylakex", workload(schedule, "{}", r#", "cpu_offsets_ms": [0, 10]"#));
    for t in (0..60).map(|ms| ms * MS + MS / 2) {
        assert_eq!(k.phase_on(1, t), 1 - k.phase_on(0, t), "at {t} ns");
    }
    // CPU 1's instructions over the first 10 ms are the memory phase's (IPC 0.5), CPU 0's
    // the compute phase's (2.6); CPU 1 runs 5 % faster.
    let instructions = raw(0xc0);
    let i0 = k.true_count_between(&instructions, 0, 0, 10 * MS).unwrap() as f64;
    let i1 = k.true_count_between(&instructions, 1, 0, 10 * MS).unwrap() as f64;
    assert!((i1 / i0 - 0.5 / 2.6 * 1.05).abs() < 1e-3, "{i0} {i1}");
    // An AnyThread event counts its SMT sibling too, at the sibling's phases: CPU 0 and its
    // sibling half a cycle apart count both phases' instructions at once.
    let machine = k.machine();
    let sibling = *machine.siblings(0).iter().find(|&&c| c != 0).expect("SMT on skylakex");
    let mut offsets = ["0"; 8];
    offsets[sibling as usize] = "10";
    let extra = format!(r#", "cpu_offsets_ms": [{}]"#, offsets.join(", "));
    let k = sim("skylakex", workload(schedule, "{}", &extra));
    let any = raw(0xc0 | 1 << 21);
    let both = k.true_count_between(&any, 0, 0, 10 * MS).unwrap() as f64;
    let compute = k.true_count_between(&instructions, 0, 0, 10 * MS).unwrap() as f64;
    let memory = k.true_count_between(&instructions, 0, 10 * MS, 20 * MS).unwrap() as f64;
    assert!((both - compute - memory).abs() <= 2.0, "{both} {compute} {memory}");
    // Realistic: random offsets, SMT siblings of one core included.
    let kernel = r#"{ "realistic": true, "seed": 5 }"#;
    let k = sim("skylakex", workload(schedule, kernel, ""));
    let machine = k.machine();
    let sibling = *machine.siblings(0).iter().find(|&&c| c != 0).expect("SMT on skylakex");
    let differ =
        |a: u32, b: u32| (0..40).any(|ms| k.phase_on(a, ms * MS) != k.phase_on(b, ms * MS));
    assert!(differ(0, sibling), "CPU 0 and its sibling {sibling} run one phase");
    let distinct: std::collections::BTreeSet<u64> = machine
        .cpu_ids()
        .iter()
        .map(|&cpu| (0..20).map(|ms| k.phase_on(cpu, ms * MS) as u64).fold(0, |a, p| a * 2 + p))
        .collect();
    assert!(distinct.len() >= 3, "{distinct:?}");
    // Without realism every CPU runs the same phase at one time.
    let k = sim("skylakex", workload(schedule, "{}", ""));
    assert!(
        !(1..8).any(|cpu| (0..40).any(|ms| k.phase_on(cpu, ms * MS) != k.phase_on(0, ms * MS)))
    );
}

#[test]
fn core_events_overcount_a_little_and_deterministically() {
    let count = |seed: u64| {
        let kernel = format!(r#"{{ "hz": 250, "realistic": true, "seed": {seed} }}"#);
        let mut k = sim("sapphirerapids", workload(r#""switch_every_ms": 4"#, &kernel, ""));
        let cycles = raw(0x3c);
        let fd = k.perf_event_open(&cycles, -1, 0, -1).unwrap();
        k.advance(1_000 * MS);
        let (_, running, values) = read_group(&mut k, fd, 1);
        assert_eq!(running, 1_000 * MS);
        (values[0], k.true_count(&cycles, 0, 1_000 * MS).unwrap())
    };
    let (value, truth) = count(1);
    assert!(value > truth, "{value} {truth}");
    // At most 0.1 % plus one count per tick (250) in the second (no rotation: one group).
    assert!(value as f64 <= truth as f64 * 1.001 + 250.0 + 1.0, "{value} {truth}");
    assert!(value as f64 >= truth as f64 + 250.0 - 1.0, "{value} {truth}");
    assert_eq!(count(1), (value, truth), "the same seed counts the same");
    assert_ne!(count(2).0, value, "another seed counts differently");
}

/// An event's overcount is a share of its own for the run: the same on every CPU and in every
/// group it is opened in, drawn anew per seed, and it does not average away over the second
/// (a draw per span would leave every run at half the bound).
#[test]
fn an_events_overcount_is_its_own_on_every_cpu_and_does_not_average_away() {
    let shares = |seed: u64| {
        let kernel = format!(r#"{{ "hz": 250, "realistic": true, "seed": {seed} }}"#);
        let mut k = sim("sapphirerapids", workload(r#""switch_every_ms": 4"#, &kernel, ""));
        let cycles = raw(0x3c);
        let fds: Vec<(i32, i32)> = [0, 1]
            .iter()
            .map(|&cpu| (cpu, k.perf_event_open(&cycles, -1, cpu, -1).unwrap()))
            .collect();
        k.advance(1_000 * MS);
        fds.iter()
            .map(|&(cpu, fd)| {
                let (_, running, values) = read_group(&mut k, fd, 1);
                assert_eq!(running, 1_000 * MS);
                let truth = k.true_count(&cycles, cpu as u32, 1_000 * MS).unwrap() as f64;
                // Less the tick's one count per interrupt (no rotation: one group per CPU).
                (values[0] as f64 - 250.0 - truth) / truth
            })
            .collect::<Vec<f64>>()
    };
    let mut all = Vec::new();
    for seed in 1..=12 {
        let s = shares(seed);
        assert!((s[0] - s[1]).abs() < 1e-6, "seed {seed}: CPU 0 {} CPU 1 {}", s[0], s[1]);
        assert!((0.0..0.001 + 1e-6).contains(&s[0]), "seed {seed}: {}", s[0]);
        all.push(s[0]);
    }
    let (lo, hi) = all.iter().fold((1.0f64, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    assert!(hi - lo > 0.0005, "shares over 12 seeds stay within {lo}..{hi}");
}

#[test]
fn perf_metrics_give_multiples_of_one_255th_of_the_slots() {
    let mut attrs = vec![raw(0x0400)];
    attrs.extend((0..8).map(|n| raw(0x8000 + (n << 8))));
    let constant = |quantised: bool| {
        let mut w = SimWorkload::default_workload();
        w.kernel = KernelSpec { quantised_metrics: Some(quantised), ..KernelSpec::default() };
        let mut k = sim("sapphirerapids", w);
        let fds = group(&mut k, 1, &attrs).unwrap();
        k.advance(100 * MS);
        read_group(&mut k, fds[0], 9).2
    };
    let exact = constant(false);
    let quantised = constant(true);
    assert_eq!(exact[0], quantised[0], "slots are counted alike");
    let slots = quantised[0];
    for (i, (&q, &fraction)) in quantised[1..].iter().zip(&TOPDOWN).enumerate() {
        // icl_get_metrics_event_value: slots * byte / 0xff, truncated.
        let byte = (q as f64 * 255.0 / slots as f64).round() as u64;
        assert_eq!(q, slots * byte / 255, "metric {i}: {q} of {slots}");
        assert!((byte as f64 / 255.0 - fraction).abs() <= 1.0 / 255.0 + 1e-9, "metric {i}");
    }
    // The level-1 fields add up to 0xff, so their counts to the slots less truncation.
    let level1: u64 = quantised[1..5].iter().sum();
    assert!(level1 <= slots && level1 + 4 >= slots, "{level1} of {slots}");
    // With every rule on the metrics are read from the same overcounted FIXED_CTR3.
    let mut w = SimWorkload::default_workload();
    w.kernel = KernelSpec { realistic: true, seed: 9, ..KernelSpec::default() };
    let mut k = sim("sapphirerapids", w);
    let fds = group(&mut k, 1, &attrs).unwrap();
    k.advance(100 * MS);
    let values = read_group(&mut k, fds[0], 9).2;
    let level1: u64 = values[1..5].iter().sum();
    assert!(values[0] > slots, "overcount: {} against {slots}", values[0]);
    assert!(level1 <= values[0] && level1 + 4 >= values[0], "{level1} of {}", values[0]);
    // 10 % of the slots is 25.5 / 255: the 8-bit field cannot hold it.
    let bad_spec = (quantised[2] as f64, exact[2] as f64);
    assert!((bad_spec.0 - bad_spec.1).abs() > 1e-3 * bad_spec.1, "{bad_spec:?}");
    // Every read resets PERF_METRICS: what each read adds is its own slots' multiple.
    let mut w = SimWorkload::default_workload();
    w.kernel = KernelSpec { quantised_metrics: Some(true), ..KernelSpec::default() };
    let mut k = sim("sapphirerapids", w);
    let fds = group(&mut k, 1, &attrs).unwrap();
    let mut last = vec![0; 9];
    for n in 1..=10 {
        k.advance(n * MS);
        let now = read_group(&mut k, fds[0], 9).2;
        let (s, m) = (now[0] - last[0], now[2] - last[2]);
        assert_eq!(m, s * ((m as f64 * 255.0 / s as f64).round() as u64) / 255, "read {n}");
        last = now;
    }
}

/// Where instructions and cycles are counted on CPU 0 of Sapphire Rapids (no watchdog).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// A group of their own, nothing else: never multiplexed.
    Alone,
    /// Together in one of two groups of 8 GP fillers that rotate.
    Together,
    /// One in each of the two rotating groups.
    Split,
}

/// The error of IPC from the time-scaled counts of instructions and cycles against the
/// truth over the same second, relative.
fn ipc_error(w: SimWorkload, layout: Layout) -> f64 {
    let mut k = sim("sapphirerapids", w);
    let (instructions, cycles) = (raw(0xc0), raw(0x3c));
    let (mut first, mut second) = match layout {
        Layout::Alone => (Vec::new(), Vec::new()),
        _ => (gp_events(0x90, 8), gp_events(0xa0, 8)),
    };
    first.insert(0, instructions.clone());
    if layout == Layout::Split {
        second.insert(0, cycles.clone());
    } else {
        first.insert(1, cycles.clone());
    }
    let g1 = group(&mut k, 0, &first).unwrap();
    let g2 = if second.is_empty() { None } else { Some(group(&mut k, 0, &second).unwrap()) };
    let start = k.now();
    k.advance(1_000 * MS);
    let scaled = |k: &mut SimKernel, leader: i32, n: usize, i: usize| {
        let (enabled, running, values) = read_group(k, leader, n);
        assert_eq!(running < enabled, layout != Layout::Alone, "rotation");
        values[i] as f64 * enabled as f64 / running as f64
    };
    let inst = scaled(&mut k, g1[0], first.len(), 0);
    let cyc = match &g2 {
        Some(g2) if layout == Layout::Split => scaled(&mut k, g2[0], second.len(), 0),
        _ => scaled(&mut k, g1[0], first.len(), 1),
    };
    let end = k.now();
    let truth = k.true_count_between(&instructions, 0, start, end).unwrap() as f64
        / k.true_count_between(&cycles, 0, start, end).unwrap() as f64;
    (inst / cyc - truth).abs() / truth
}

/// Compute at IPC 2.6 and 3.5 GHz, memory at IPC 0.5 and 1.5 GHz: both of IPC's inputs
/// change with the phase.
fn frequency_phases(schedule: &str, seed: u64) -> SimWorkload {
    let text = format!(
        r#"{{ "phases": {{ {schedule}, "seed": {seed}, "list": [
              {{ "name": "compute", "ipc": 2.6, "cycles_ghz": 3.5 }},
              {{ "name": "memory", "ipc": 0.5, "cycles_ghz": 1.5 }} ] }},
            "kernel": {{ "hz": 250, "realistic": true, "seed": {seed} }} }}"#
    );
    SimWorkload::parse(&text, "test").unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_bad_schedule_errs_more_than_a_good_one_on_a_phased_workload() {
    // Phases of one rotation interval (aliasing: each of the two groups sees the same
    // phases again and again) and random phases of 2 to 40 ms, over five seeds (random
    // places on the rotation grid).
    let mean = |layout: Layout| {
        let mut sum = 0.0;
        for seed in 0..5 {
            for schedule in [r#""switch_every_ms": 4"#, r#""switch_random_ms": [2, 40]"#] {
                sum += ipc_error(frequency_phases(schedule, seed), layout);
            }
        }
        sum / 10.0
    };
    let (alone, together, split) =
        (mean(Layout::Alone), mean(Layout::Together), mean(Layout::Split));
    // Never multiplexed: only the overcount, alike on both inputs.
    assert!(alone < 1e-3, "alone {alone}");
    // Multiplexed together: the ratio over the slices its group ran, not the whole second.
    assert!(together > 0.01, "together {together}");
    // Split: each input from other phases.
    assert!(split > 2.0 * together, "split {split}, together {together}");
    // On a constant workload splitting costs nothing beyond the overcount.
    let constant = SimWorkload::parse(r#"{ "kernel": { "realistic": true, "seed": 1 } }"#, "test");
    let split = ipc_error(constant.unwrap(), Layout::Split);
    assert!(split < 2e-3, "{split}");
}

#[test]
fn the_workloads_kernel_object_is_checked() {
    for (text, field) in [
        (r#"{ "kernel": { "hz": 512 } }"#, "hz"),
        (r#"{ "kernel": { "noise_percent": 50 } }"#, "noise_percent"),
        (r#"{ "kernel": { "timer_lateness_us": -1 } }"#, "timer_lateness_us"),
        (r#"{ "cpu_offsets_ms": [1, -2] }"#, "cpu_offsets_ms"),
    ] {
        let e = SimWorkload::parse(text, "w.json").unwrap_err().to_string();
        assert!(e.starts_with("w.json:1: `") && e.contains(field), "{e}");
    }
    let e =
        SimWorkload::parse(r#"{ "kernel": { "hz": 250, "jitter": 1 } }"#, "w.json").unwrap_err();
    assert!(e.to_string().contains("jitter"), "{e}");
    let e = SimWorkload::parse(
        r#"{ "phases": { "lengths_ms": [[1, 2]], "list": [ {}, {} ] } }"#,
        "w.json",
    )
    .unwrap_err();
    assert!(e.to_string().contains("lengths_ms") && e.to_string().contains("2 phases"), "{e}");
    // Phases in turn, each for its own length.
    let w = SimWorkload::parse(
        r#"{ "phases": { "lengths_ms": [[5, 5], [1, 1]], "list": [ {}, {} ] } }"#,
        "w.json",
    )
    .unwrap();
    let mut t = tmetric_sim::Timeline::new(&w);
    let phases: Vec<usize> = (0..12).map(|ms| t.phase_at(ms * MS)).collect();
    assert_eq!(phases, [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]);
}
