//! Workloads with known costs, for the example and the real-machine test: touching fresh
//! pages (one page fault each) and burning a measured amount of this thread's CPU time.

use std::time::Duration;

/// The page size assumed for touching (x86-64 and most arm64 kernels).
pub const PAGE: usize = 4096;

/// glibc serves allocations from its heap, whose pages may already be mapped, below a
/// threshold that adapts up to 32 MiB (`DEFAULT_MMAP_THRESHOLD_MAX` on 64-bit); above it,
/// an allocation is a fresh anonymous mapping that nothing has touched.
const FRESH: usize = 64 << 20;

/// Writes one byte in each of `pages` fresh pages; returns how many it wrote. The memory is a
/// zeroed allocation of at least [`FRESH`] bytes, which the allocator maps fresh from the
/// kernel without touching, and an anonymous page faults on its first write, so this makes
/// at least `pages` page faults (transparent huge pages set to `always` could merge them;
/// Debian's default is `madvise`).
pub fn touch_pages(pages: usize) -> usize {
    let mut memory = vec![0u8; (pages * PAGE).max(FRESH)];
    for p in 0..pages {
        memory[p * PAGE] = 1;
    }
    std::hint::black_box(&mut memory);
    memory.iter().step_by(PAGE).take(pages).filter(|&&b| b == 1).count()
}

/// This thread's CPU time so far, from `/proc/thread-self/schedstat` (its first field is
/// the nanoseconds the scheduler ran it, what `task-clock` counts, as of the last tick or
/// switch: it lags the truth by up to one tick).
pub fn thread_cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Spins until this thread has used `cpu` more CPU time; returns the CPU time used.
pub fn burn(cpu: Duration) -> Duration {
    let start = thread_cpu_time().unwrap_or_default();
    let mut x = 0u64;
    loop {
        for i in 0..10_000u64 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
        }
        let now = thread_cpu_time().unwrap_or_default();
        if now.saturating_sub(start) >= cpu {
            return now - start;
        }
    }
}
