//! Schedule-time rules: the NMI watchdog's counter, rotation and the multiplexing interval,
//! flexible and pinned groups, CPU before task contexts, and the enable, disable and reset ioctls.

use tmetric_runtime::sys::{READ_FORMAT, TYPE_SOFTWARE};
use tmetric_runtime::{Attr, Syscalls};
use tmetric_sim::SimState;

use super::{MS, gp_events, group, kernel, raw, read_group, typed};

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
