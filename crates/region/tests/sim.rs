//! Regions on the simulated kernel (Sapphire Rapids): TopdownL1 through `read()` sums to
//! 100%, a selection that needs two groups is refused, and the `rdpmc` topdown path end to
//! end with hand-built pages standing in for the kernel's (the simulator's descriptors cannot
//! be mapped), including the reset schedule and a reschedule between start and stop.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;

use tmetric_region::topdown::{self, METRICS_SELECTOR, SLOTS_SELECTOR};
use tmetric_region::{Measurement, NoPages, Pages, ReadPath, RegionError};
use tmetric_runtime::mmap::{self, PageCount, PageImage, Unreadable, offsets};
use tmetric_runtime::{Attr, Errno, Syscalls};
use tmetric_sim::{Machine, SimKernel};

/// A simulated machine's tree in a private temporary directory, removed on drop.
struct Tree(tempfile::TempDir);

impl Tree {
    fn new(name: &str, tag: &str) -> Tree {
        let dir = tempfile::Builder::new()
            .prefix(&format!("tmetric-region-sim-{name}-{tag}-"))
            .tempdir()
            .expect("a temp dir");
        Machine::named(name)
            .expect("machine")
            .write_sysfs(&dir.path().join("sys"), &dir.path().join("proc"))
            .expect("sysfs");
        Tree(dir)
    }
    fn sys(&self) -> PathBuf {
        self.0.path().join("sys")
    }
    fn proc_root(&self) -> PathBuf {
        self.0.path().join("proc")
    }
}

const L1: [&str; 4] =
    ["tma_retiring", "tma_bad_speculation", "tma_frontend_bound", "tma_backend_bound"];

#[test]
fn topdown_l1_region_on_sapphire_rapids_sums_to_100_percent() {
    let tree = Tree::new("sapphirerapids", "l1");
    let kernel = SimKernel::manual(Machine::named("sapphirerapids").unwrap());
    let mut m = Measurement::with_machine(
        &["TopdownL1"],
        &tree.sys(),
        &tree.proc_root(),
        kernel.clone(),
        NoPages,
    )
    .expect("TopdownL1 fits one group on SPR");
    assert_eq!(m.path(), ReadPath::Read);
    // Time before the region must not count in it.
    kernel.advance(5_000_000);
    let ((), sample) = m.measure("loop", || kernel.advance(50_000_000)).unwrap();
    let values: Vec<f64> = L1.iter().map(|n| sample.metric(n).unwrap()).collect();
    let sum: f64 = values.iter().sum();
    assert!((sum - 100.0).abs() < 1e-6, "{L1:?} = {values:?}, sum {sum}");
    // The simulator's profile: retiring 30% etc.; none is zero and each is a percentage.
    for (n, v) in L1.iter().zip(&values) {
        assert!(*v > 0.0 && *v < 100.0, "{n} = {v}");
    }
    let slots = sample.count("TOPDOWN.SLOTS").unwrap_or_else(|| panic!("{sample:#?}"));
    // slots over the region's 50 ms of simulated time, not over 55 ms.
    let spec = m.plan().specs().iter().find(|s| s.name == "TOPDOWN.SLOTS").unwrap();
    let rate = kernel.true_count(&spec.attr, 0, 50_000_000);
    assert_eq!(slots, rate.unwrap() as f64);
    // Totals accumulate counts, and the report prints the region.
    m.measure("loop", || kernel.advance(50_000_000)).unwrap();
    let totals = m.totals();
    assert_eq!(totals.len(), 1);
    assert_eq!(totals[0].runs, 2);
    assert_eq!(totals[0].count("TOPDOWN.SLOTS"), Some(2.0 * slots));
    let mut out = Vec::new();
    m.report(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Region 'loop': 2 runs"), "{text}");
    assert!(text.contains("tma_retiring"), "{text}");
}

#[test]
fn a_selection_that_needs_two_groups_is_refused() {
    let tree = Tree::new("sapphirerapids", "two");
    let kernel = SimKernel::manual(Machine::named("sapphirerapids").unwrap());
    let err = Measurement::with_machine(
        &["TopdownL2", "TopdownL3", "TopdownL4"],
        &tree.sys(),
        &tree.proc_root(),
        kernel,
        NoPages,
    )
    .map(|m| format!("{:?}", m.plan().groups()))
    .expect_err("too much for one group");
    assert!(matches!(err, RegionError::TooManyGroups { .. }), "{err}");
    assert!(err.to_string().contains("never multiplexed"), "{err}");
}

#[test]
fn nesting_is_an_error() {
    let tree = Tree::new("sapphirerapids", "nest");
    let kernel = SimKernel::manual(Machine::named("sapphirerapids").unwrap());
    let mut m =
        Measurement::with_machine(&["cycles"], &tree.sys(), &tree.proc_root(), kernel, NoPages)
            .unwrap();
    m.begin("a").unwrap();
    assert!(matches!(m.begin("b"), Err(RegionError::Nesting(_))));
    m.end().unwrap();
    assert!(matches!(m.end(), Err(RegionError::Nesting(_))));
}

/// The hardware as the fake pages see it: raw slots and PERF_METRICS, the page lock.
#[derive(Default)]
struct Hw {
    slots: Cell<u64>,
    metrics: Cell<u64>,
    lock: Cell<u32>,
    resets: Cell<u32>,
    attrs: RefCell<HashMap<i32, Attr>>,
}

/// The simulated kernel, recording each descriptor's attributes and zeroing the fake
/// hardware on `PERF_EVENT_IOC_RESET`, as the kernel does for slots and PERF_METRICS.
struct Recorder {
    kernel: SimKernel,
    hw: Rc<Hw>,
}

impl Syscalls for Recorder {
    fn perf_event_open(&mut self, a: &Attr, pid: i32, cpu: i32, g: i32) -> Result<i32, Errno> {
        let fd = self.kernel.perf_event_open(a, pid, cpu, g)?;
        self.hw.attrs.borrow_mut().insert(fd, a.clone());
        Ok(fd)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        panic!("a group read with rdpmc must never be read with read() (fd {fd}, {})", buf.len())
    }
    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.kernel.enable(fd, group)
    }
    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.kernel.disable(fd, group)
    }
    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.hw.slots.set(0);
        self.hw.metrics.set(0);
        self.hw.resets.set(self.hw.resets.get() + 1);
        self.kernel.reset(fd, group)
    }
    fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
        self.kernel.event_id(fd)
    }
    fn close(&mut self, fd: i32) {
        self.kernel.close(fd)
    }
}

/// Pages as the x86 kernel publishes them: slots with index (1<<30 | 3) + 1, metric events
/// with (1<<29) + 1.
struct FakePages(Rc<Hw>);

impl Pages for FakePages {
    type Page = PageImage;
    fn map(&mut self, fd: i32) -> Option<PageImage> {
        let attrs = self.0.attrs.borrow();
        let attr = attrs.get(&fd)?;
        let index = if attr.config == topdown::SLOTS_CONFIG {
            SLOTS_SELECTOR + 1
        } else if topdown::field_of_config(attr.config).is_some() {
            METRICS_SELECTOR + 1
        } else {
            1
        };
        Some(PageImage::counter(index, 0, 48, mmap::CAP_USER_RDPMC))
    }
    fn read(&self, page: &PageImage) -> Result<PageCount, Unreadable> {
        page.set(offsets::LOCK, u64::from(self.0.lock.get()), 4);
        mmap::read_page(
            page,
            |selector| match selector {
                SLOTS_SELECTOR => self.0.slots.get(),
                METRICS_SELECTOR => self.0.metrics.get(),
                _ => 0,
            },
            || 0,
        )
    }
}

fn fields(f: [u8; 8]) -> u64 {
    f.iter().enumerate().map(|(i, &x)| u64::from(x) << (8 * i)).sum()
}

#[test]
fn rdpmc_topdown_region_with_level2_and_resets() {
    let tree = Tree::new("sapphirerapids", "rdpmc");
    let hw = Rc::new(Hw::default());
    let kernel = SimKernel::manual(Machine::named("sapphirerapids").unwrap());
    let sys = Recorder { kernel, hw: hw.clone() };
    let items = [
        "topdown-retiring",
        "topdown-bad-spec",
        "topdown-fe-bound",
        "topdown-be-bound",
        "topdown-heavy-ops",
        "topdown-br-mispredict",
        "topdown-fetch-lat",
        "topdown-mem-bound",
    ];
    // Events only: the group the user names, led by slots as the kernel requires.
    let list = format!("{{slots,{}}}", items.join(","));
    let mut m = Measurement::with_machine(
        &[list.as_str()],
        &tree.sys(),
        &tree.proc_root(),
        sys,
        FakePages(hw.clone()),
    )
    .expect("the topdown group opens");
    assert_eq!(m.path(), ReadPath::Rdpmc);
    // Before the first region: 5000 slots accumulated, all retiring.
    hw.slots.set(5000);
    hw.metrics.set(fields([255, 0, 0, 0, 0, 0, 0, 0]));
    m.begin("r").unwrap();
    // The first start resets (nothing known yet), so the region starts from 0.
    assert_eq!(hw.resets.get(), 1);
    hw.slots.set(2550);
    hw.metrics.set(fields([102, 51, 51, 51, 51, 26, 0, 51]));
    let s = m.end().unwrap();
    let t = s.topdown.expect("topdown from PERF_METRICS");
    assert_eq!(t.slots, 2550);
    assert_eq!(t.level1.retiring, 0.4);
    assert_eq!(t.level1.bad_speculation, 0.2);
    assert!((t.level1.sum() - 1.0).abs() < 1e-12);
    let l2 = t.level2.expect("SPR has level 2");
    assert_eq!(l2.heavy_operations, 0.2);
    assert!((l2.light_operations - 0.2).abs() < 1e-15);
    assert!((l2.machine_clears - 25.0 / 255.0).abs() < 1e-15);
    assert!((l2.core_bound - 0.0).abs() < 1e-15);
    // The metric events' counts are the slots-scaled fields: 102 * 2550 / 255 = 1020.
    assert_eq!(s.count("slots"), Some(2550.0));
    assert_eq!(s.count("topdown-retiring"), Some(1020.0));
    assert_eq!(s.count("topdown-br-mispredict"), Some(260.0));

    // Second region: 2550 slots since the reset, last region 2550: no reset. The region
    // adds 2550 slots of pure backend bound: fields at b are (102*2550)/(5100) = 51 etc.
    m.begin("r").unwrap();
    assert_eq!(hw.resets.get(), 1);
    hw.slots.set(5100);
    hw.metrics.set(fields([51, 25, 26, 153, 25, 13, 0, 25]));
    let s2 = m.end().unwrap();
    let t2 = s2.topdown.unwrap();
    assert_eq!(t2.slots, 2550);
    // retiring: (51*5100 - 102*2550) / (255*2550) = 0.
    assert_eq!(t2.level1.retiring, 0.0);
    // backend: (153*5100 - 51*2550) / (255*2550) = (780300 - 130050) / 650250 = 1.
    assert_eq!(t2.level1.backend_bound, 1.0);
    // The rounding bound: (2550 + 5100) / (2 * 255 * 2550).
    assert!((t2.error_bound - 7650.0 / 1_300_500.0).abs() < 1e-15);

    // Third start: 5100 > 1 * 2550 slots since the reset: the schedule resets.
    m.begin("r").unwrap();
    assert_eq!(hw.resets.get(), 2);
    hw.slots.set(1000);
    hw.metrics.set(fields([255, 0, 0, 0, 0, 0, 0, 0]));
    // The kernel rewrote the page meanwhile (a reschedule zeroes the hardware): the region
    // has no valid topdown and says so instead of returning a number.
    hw.lock.set(4);
    let err = m.end().expect_err("a reschedule inside the region");
    assert!(matches!(err, RegionError::Rdpmc { .. }), "{err}");

    // The total of the two good runs weights by slots: 1020 + 0 retiring slots of 5100.
    let total = m.totals().remove(0);
    assert_eq!(total.runs, 2);
    let tt = total.topdown.unwrap();
    assert_eq!(tt.slots, 5100);
    assert!((tt.level1.retiring - 0.2).abs() < 1e-12);
}

/// A kernel at `perf_event_paranoid` 2 for an unprivileged caller: kernel counting refused.
struct Paranoid(SimKernel);

impl Syscalls for Paranoid {
    fn perf_event_open(&mut self, a: &Attr, pid: i32, cpu: i32, g: i32) -> Result<i32, Errno> {
        if !a.exclude_kernel {
            return Err(Errno(13));
        }
        self.0.perf_event_open(a, pid, cpu, g)
    }
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        self.0.read(fd, buf)
    }
    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.0.enable(fd, group)
    }
    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.0.disable(fd, group)
    }
    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        self.0.reset(fd, group)
    }
    fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
        self.0.event_id(fd)
    }
    fn close(&mut self, fd: i32) {
        self.0.close(fd)
    }
}

#[test]
fn denied_kernel_counting_falls_back_to_user_mode_and_says_so() {
    let tree = Tree::new("sapphirerapids", "paranoid");
    let kernel = SimKernel::manual(Machine::named("sapphirerapids").unwrap());
    let mut m = Measurement::with_machine(
        &["{cycles,instructions}"],
        &tree.sys(),
        &tree.proc_root(),
        Paranoid(kernel.clone()),
        NoPages,
    )
    .expect("opens with exclude_kernel");
    assert_eq!(m.plan().warnings().len(), 2, "{:?}", m.plan().warnings());
    assert!(
        matches!(&m.plan().warnings()[0], tmetric_engine::Warning::UserOnly { event } if event == "cycles"),
        "{:?}",
        m.plan().warnings()
    );
    let ((), s) = m.measure("r", || kernel.advance(1_000_000)).unwrap();
    assert!(s.count("cycles").unwrap() > 0.0);
}

/// The region API reads its events as `stat -e` does under the output contract in use
/// (`tmetric_engine::events::resolver`): under perf 7.2's a tool PMU event is known and refused
/// as a tool event, under perf 6.12's it is no event at all.
#[test]
fn events_are_read_by_the_contract_in_use() {
    let tree = Tree::new("sapphirerapids", "tool");
    let why = |contract: &'static tmetric_catalog::Vintage| {
        tmetric_catalog::use_vintages(tmetric_catalog::default_vintage(), contract);
        let kernel = SimKernel::manual(Machine::named("sapphirerapids").unwrap());
        let err = Measurement::with_machine(
            &["tool/num_cpus/"],
            &tree.sys(),
            &tree.proc_root(),
            kernel,
            NoPages,
        )
        .map(|_| ())
        .expect_err("not a counter");
        tmetric_catalog::clear_inferred_vintage();
        match err {
            RegionError::Unknown { why, .. } => why,
            other => panic!("{other}"),
        }
    };
    let v72 = why(tmetric_catalog::vintage_for("7.2").unwrap());
    assert!(v72.starts_with("tool events are not counters"), "{v72}");
    let v612 = why(tmetric_catalog::base_vintage());
    assert!(v612.contains("neither a PMU"), "{v612}");
}

/// A region's plan is `stat`'s: the one list `page-faults, TopdownL1` gives the groups, in
/// order and by event, that `tmetric stat -M TopdownL1 -e page-faults` plans on the same
/// machine (`tmetric_engine::setup::build` over one probe of it).
#[test]
fn a_region_plans_the_groups_stat_plans_for_the_same_selection() {
    use tmetric_engine::Host;
    use tmetric_engine::setup::{self, Hints, Metrics, Request};
    let tree = Tree::new("sapphirerapids", "same");
    let kernel = SimKernel::manual(Machine::named("sapphirerapids").unwrap());
    let m = Measurement::with_machine(
        &["page-faults", "TopdownL1"],
        &tree.sys(),
        &tree.proc_root(),
        kernel,
        NoPages,
    )
    .expect("TopdownL1 and a software event fit on SPR");
    let named = |plan: &tmetric_engine::Plan| -> Vec<Vec<String>> {
        let specs = plan.specs();
        plan.groups().iter().map(|g| g.iter().map(|&s| specs[s].name.clone()).collect()).collect()
    };
    let host = Host::probe(&tmetric_runtime::Sysfs::new(tree.sys()), &tree.proc_root(), None);
    let stat = Request {
        events: vec!["page-faults".into()],
        metrics: Metrics::Items(vec!["TopdownL1".into()]),
        ..Request::default()
    };
    let stat = setup::build(&stat, &host, Hints::default()).expect("stat's plan").plan;
    let specs = |plan: &tmetric_engine::Plan| -> Vec<String> {
        plan.specs().iter().map(|s| s.name.clone()).collect()
    };
    // The software event opens alone, outside the groups; the hardware group is led by slots.
    assert!(specs(m.plan()).contains(&"page-faults".to_string()), "{:?}", specs(m.plan()));
    assert_eq!(specs(m.plan()), specs(&stat));
    let (region, stat) = (named(m.plan()), named(&stat));
    assert!(region.iter().any(|g| g.first().is_some_and(|l| l == "TOPDOWN.SLOTS")), "{region:?}");
    assert_eq!(region, stat);
}
