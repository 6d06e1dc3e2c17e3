//! Runs N start/stop pairs on the `rdpmc` path with hand-built pages standing in for the
//! kernel's (this VM has no user rdpmc), so an instruction counter can measure the path's
//! user-space instructions: run it under `valgrind --tool=callgrind` with two values of N and
//! divide the difference in instructions by the difference in N (setup cancels out). The
//! instruction itself is replaced by a load in `read_page`'s callback: add one `rdpmc` per
//! page per read.
//!
//! `cargo build --release -p tmetric-region --example rdpmc_cost`, then
//! `valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/rdpmc_cost 1000`
//! (and 3000): "Collected" is the instruction count.

use std::cell::Cell;

use tmetric_region::{Measurement, Pages};
use tmetric_runtime::mmap::{self, PageCount, PageImage, Unreadable};

/// Pages as the x86 kernel publishes them for a topdown group: slots on fixed counter 3,
/// metric events on the PERF_METRICS selector.
struct Images {
    slots: Cell<u64>,
    next: Cell<u32>,
}

impl Pages for Images {
    type Page = PageImage;
    fn map(&mut self, _fd: i32) -> Option<PageImage> {
        let i = self.next.get();
        self.next.set(i + 1);
        let selector = if i == 0 {
            tmetric_region::topdown::SLOTS_SELECTOR
        } else {
            tmetric_region::topdown::METRICS_SELECTOR
        };
        Some(PageImage::counter(selector + 1, 0, 48, mmap::CAP_USER_RDPMC))
    }
    fn read(&self, page: &PageImage) -> Result<PageCount, Unreadable> {
        mmap::read_page(
            page,
            |selector| {
                if selector == tmetric_region::topdown::SLOTS_SELECTOR {
                    self.slots.set(self.slots.get() + 2550);
                    self.slots.get()
                } else {
                    0x0000_0000_3333_3366
                }
            },
            || 0,
        )
    }
}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let scratch =
        tempfile::Builder::new().prefix("tmetric-rdpmc-cost-").tempdir().expect("a temp dir");
    let dir = scratch.path();
    let machine = tmetric_sim::Machine::named("sapphirerapids").expect("spr");
    machine.write_sysfs(&dir.join("sys"), &dir.join("proc")).expect("sysfs");
    let kernel = tmetric_sim::SimKernel::manual(machine);
    let mut m = Measurement::with_machine(
        &["{slots,topdown-retiring,topdown-bad-spec,topdown-fe-bound,topdown-be-bound}"],
        &dir.join("sys"),
        &dir.join("proc"),
        kernel,
        Images { slots: Cell::new(0), next: Cell::new(0) },
    )
    .expect("the topdown group opens on the simulated SPR");
    drop(scratch);
    assert_eq!(m.path(), tmetric_region::ReadPath::Rdpmc);
    // The reset schedule would make a system call at a start now and then; a ratio this large
    // keeps the loop to the rdpmc reads (the first start resets once, in both runs).
    m.set_reset_schedule(tmetric_region::topdown::ResetSchedule { ratio: u64::MAX });
    for _ in 0..n {
        m.begin("r").expect("begin");
        m.end_total().expect("end");
    }
    let total = m.totals().remove(0);
    println!("{n} pairs, {} slots", total.topdown.map_or(0, |t| t.slots));
}
