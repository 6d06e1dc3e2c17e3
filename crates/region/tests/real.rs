//! Regions on this machine's kernel through the `read()` fallback: page faults of touching
//! fresh pages and task-clock of burning CPU time agree with the workload.

use std::time::Duration;

use tmetric_engine::MetricWhy;
use tmetric_region::workload::{burn, thread_cpu_time, touch_pages};
use tmetric_region::{Measurement, ReadPath};

#[test]
fn page_faults_and_task_clock_agree_with_the_workload() {
    let mut m = match Measurement::new(&["page-faults", "task-clock"]) {
        Ok(m) => m,
        Err(e) => panic!("software events must open on any Linux kernel: {e}"),
    };
    // Software events have no rdpmc page: read() it is.
    assert_eq!(m.path(), ReadPath::Read);

    let pages = 5000;
    let (touched, s) = m.measure("touch", || touch_pages(pages)).unwrap();
    assert_eq!(touched, pages);
    let faults = s.count("page-faults").unwrap();
    // One per fresh page, plus a little for the allocator and the test harness thread's
    // stack; not ten times more.
    assert!(faults >= pages as f64, "{faults} page faults for {pages} pages");
    assert!(faults < 2.0 * pages as f64, "{faults} page faults for {pages} pages");

    // An empty region has next to no faults: the count is the region's, not the thread's.
    let ((), empty) = m.measure("empty", || ()).unwrap();
    assert!(empty.count("page-faults").unwrap() < 10.0);

    let before = thread_cpu_time().expect("schedstat");
    let (cpu, s) = m.measure("burn", || burn(Duration::from_millis(100))).unwrap();
    let after = thread_cpu_time().unwrap();
    assert!(cpu >= Duration::from_millis(100));
    let task_ms = s.count("task-clock").unwrap();
    // task-clock counts the scheduler's run time to the nanosecond; schedstat reports the
    // same sum as of the last tick or switch, so each schedstat read lags by up to one tick
    // (4 ms at HZ=250): allow two ticks of 10 ms.
    let outer_ms = (after - before).as_secs_f64() * 1e3;
    let inner_ms = cpu.as_secs_f64() * 1e3;
    assert!(task_ms <= outer_ms + 10.0, "task-clock {task_ms} ms > {outer_ms} ms around it");
    assert!(task_ms >= inner_ms - 10.0, "task-clock {task_ms} ms < {inner_ms} ms burnt");
    // Elapsed time covers the CPU time.
    assert!(s.seconds * 1e3 >= 0.99 * task_ms);

    // Totals sum runs.
    m.measure("touch", || touch_pages(100)).unwrap();
    let totals = m.totals();
    let touch = totals.iter().find(|t| t.region == "touch").unwrap();
    assert_eq!(touch.runs, 2);
    assert!(touch.count("page-faults").unwrap() >= (pages + 100) as f64);
}

#[test]
fn unknown_items_name_what_was_searched() {
    let err = Measurement::new(&["no-such-thing"]).map(|_| ()).unwrap_err().to_string();
    // The `-M` miss as every front end words it, then why it is no event either.
    assert!(
        err.contains("cannot find metric or group `no-such-thing` among the common metrics"),
        "{err}"
    );
    assert!(err.contains("; nor is `no-such-thing` an event: "), "{err}");
}

/// A metric whose events this machine cannot count (this VM has no hardware PMU; a machine
/// that counts them, or whose model has no `backend_bound`, skips): its value is `nan` and
/// its reason is the engine's typed `MetricWhy`, worded as `tmetric stat`'s notes word it.
#[test]
fn a_metric_that_cannot_be_counted_says_why_as_stat_does() {
    let mut m = match Measurement::new(&["task-clock", "backend_bound"]) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skipped: this machine cannot plan backend_bound here: {e}");
            return;
        }
    };
    let ((), s) = m.measure("r", || ()).unwrap();
    let metric = s.metrics.iter().find(|v| v.name == "backend_bound").expect("the metric");
    if !metric.value.is_nan() {
        eprintln!("skipped: this machine counts backend_bound ({})", metric.value);
        return;
    }
    // Its inputs, in the order the formula names them: nothing counted them here.
    let inputs = ["ls_not_halted_cyc", "de_no_dispatch_per_slot.backend_stalls"];
    let rows: Vec<String> = inputs.iter().map(|i| i.to_string()).collect();
    assert_eq!(metric.why, Some(MetricWhy::NanWithout(rows)), "{metric:?}");
    let mut out = Vec::new();
    s.print(&mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let line = text.lines().find(|l| l.contains("backend_bound")).expect(&text);
    let note =
        format!("backend_bound  (nan: needs {} which could not be counted)", inputs.join(", "));
    assert!(line.ends_with(&note), "{line}");
}
