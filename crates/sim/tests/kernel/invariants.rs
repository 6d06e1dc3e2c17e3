//! Random call sequences: whatever the order of opens, closes, ioctls, reads and clock steps,
//! nothing panics and enabled, running and the counts stay within their bounds.

use tmetric_runtime::sys::{TYPE_HARDWARE, TYPE_RAW, TYPE_SOFTWARE};
use tmetric_runtime::{Attr, Syscalls};
use tmetric_sim::Machine;

use super::{MS, kernel, typed};

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
