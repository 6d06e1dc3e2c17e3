//! A minimal work-sharing parallel map over a slice, keeping input order (no extra crate:
//! the generator stays light to build).

use std::sync::atomic::{AtomicUsize, Ordering};

/// `items.iter().map(f).collect()`, on up to 8 threads, results in input order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
    let next = AtomicUsize::new(0);
    let work = || {
        let mut done = Vec::new();
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(index) else { break };
            done.push((index, f(item)));
        }
        done
    };
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut all = work();
        for helper in helpers {
            all.extend(helper.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        all
    });
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, r)| r).collect()
}
