//! The exporter on the simulated kernel (a manual clock): TopdownL1/L2 on sapphirerapids
//! served with the workload's true values, exposition that parses in both formats, the JSON
//! view agreeing with the text, error bars under multiplexing, and a counter that stops being
//! scheduled (another user pins every general counter) said on /metrics while the text stays
//! valid.

use std::collections::HashMap;

use tmetric_engine::Host;
use tmetric_runtime::Sysfs;
use tmetric_runtime::sys::{Attr, Syscalls, TYPE_RAW};
use tmetric_serve::cgroups::Selection;
use tmetric_serve::expo::{self, Format};
use tmetric_serve::{Collector, MachineInfo, Options};
use tmetric_sim::{Machine as SimMachine, SimKernel};

struct Sim {
    _dir: tempfile::TempDir,
    kernel: SimKernel,
    collector: Collector<SimKernel>,
}

fn sim(name: &str, metrics: &str, reads: u32) -> Sim {
    sim_with(name, metrics, &[], reads).unwrap()
}

/// [`sim`] with `-e` lists `events` beside the metrics (none when `metrics` is empty), or the
/// collector's refusal.
fn sim_with(
    name: &str,
    metrics: &str,
    events: &[&str],
    reads: u32,
) -> Result<Sim, tmetric_serve::collector::CollectError> {
    let dir = tempfile::Builder::new().prefix("tmetric-serve-test-").tempdir().unwrap();
    let (sys, proc_root) = (dir.path().join("sys"), dir.path().join("proc"));
    let machine = SimMachine::named(name).unwrap();
    machine.write_sysfs(&sys, &proc_root).unwrap();
    let sysfs = Sysfs::new(&sys);
    let kernel = SimKernel::manual(machine);
    let m = Host::probe(&sysfs, &proc_root, None);
    let model = m.model().unwrap();
    let mut picks = Vec::new();
    for item in metrics.split(',').filter(|m| !m.is_empty()) {
        tmetric_engine::select::add_unique(
            &mut picks,
            tmetric_engine::select::find(item, tmetric_catalog::common(), Some(model)),
        );
    }
    assert!(!picks.is_empty() || !events.is_empty());
    let request = tmetric_engine::setup::Request {
        events: events.iter().map(|e| e.to_string()).collect(),
        metrics: tmetric_engine::setup::Metrics::Picks(picks),
        model: Some(model),
        all_cpus: true,
        ..Default::default()
    };
    let plan = tmetric_engine::setup::build(&request, &m, Default::default()).unwrap().plan;
    let info = MachineInfo {
        sysfs: sysfs.clone(),
        proc_root: proc_root.clone(),
        host: "test".into(),
        model: Some(model),
        simulated: Some(name.into()),
        cgroup_mount: None,
        kubelet_log_dir: None,
    };
    let options = Options {
        interval: std::time::Duration::from_secs(1),
        reads,
        max_descriptors: None,
        per: None,
        host: true,
        selection: Selection::None,
        detail: tmetric_serve::Detail::Events,
    };
    let collector = Collector::new(kernel.clone(), plan, m.env().clone(), info, options)?;
    Ok(Sim { _dir: dir, kernel, collector })
}

impl Sim {
    /// One interval of `reads` reads, `ms` simulated milliseconds apart.
    fn interval(&mut self, reads: u32, ms: u64) {
        for _ in 1..reads {
            self.kernel.advance(ms * 1_000_000);
            self.collector.read();
        }
        self.kernel.advance(ms * 1_000_000);
        self.collector.end_interval();
    }
}

/// Samples of a Prometheus text: `name{labels}` to value, checking every line's shape and
/// that each family's samples follow its own `# TYPE` line.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut samples = HashMap::new();
    let mut family = String::new();
    let mut typed: Vec<String> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            family = rest.split(' ').next().unwrap().to_string();
            assert!(!typed.contains(&family), "family {family} typed twice");
            typed.push(family.clone());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad line {line}"));
        let name = series.split('{').next().unwrap();
        assert!(name.starts_with(&family), "{name} outside its family {family}");
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line}"));
        assert!(samples.insert(series.to_string(), v).is_none(), "{series} twice");
    }
    samples
}

#[test]
fn topdown_is_served_with_the_workloads_true_values() {
    let mut s = sim("sapphirerapids", "TopdownL1,TopdownL2", 4);
    s.interval(4, 250);
    let text = expo::render(&s.collector, Format::Prometheus, false);
    let samples = parse(&text);
    let get = |k: &str| *samples.get(k).unwrap_or_else(|| panic!("no {k} in\n{text}"));
    // The default workload's tree (crates/sim/workloads/default.json).
    for (family, truth) in [
        ("tmetric_tma_retiring_ratio", 0.40),
        ("tmetric_tma_backend_bound_ratio", 0.30),
        ("tmetric_tma_frontend_bound_ratio", 0.20),
        ("tmetric_tma_bad_speculation_ratio", 0.10),
        ("tmetric_tma_memory_bound_ratio", 0.18),
        ("tmetric_tma_fetch_latency_ratio", 0.12),
    ] {
        let v = get(&format!("{family}{{model=\"x86/sapphirerapids\"}}"));
        assert!((v - truth).abs() < 1e-6, "{family} = {v}, truth {truth}");
    }
    // The `metric` label is the family's name without `tmetric_`.
    let per = |family: &str, metric: &str| {
        get(&format!("{family}{{model=\"x86/sapphirerapids\",metric=\"{metric}_ratio\"}}"))
    };
    // One group on sapphirerapids: measured all the time, together, exact.
    assert_eq!(per("tmetric_metric_running_ratio", "tma_retiring"), 1.0);
    assert_eq!(per("tmetric_metric_inputs_together", "tma_retiring"), 1.0);
    // The error bar in its metric's own family and unit: counting's own error only (the
    // 8-bit rounding of PERF_METRICS, a fraction of a point).
    let bar = get("tmetric_tma_retiring_error_bar_ratio{model=\"x86/sapphirerapids\"}");
    assert!(bar > 0.0 && bar < 0.005, "{bar}");
    // Thresholds: tma_bad_speculation > 0.15 (not crossed at 0.1), tma_backend_bound > 0.2
    // (crossed at 0.3).
    assert_eq!(per("tmetric_metric_threshold_crossed", "tma_bad_speculation"), 0.0);
    assert_eq!(per("tmetric_metric_threshold_crossed", "tma_backend_bound"), 1.0);
    // HELP carries the description and the formula.
    assert!(text.contains("# HELP tmetric_tma_retiring_ratio This category represents fraction of slots utilized by useful work"));
    assert!(text.contains(
        "Formula (x86/sapphirerapids): topdown\\\\-retiring / (topdown\\\\-fe\\\\-bound"
    ));
    // Raw counts: integers, with their times.
    let slots = samples
        .iter()
        .find(|(k, _)| k.starts_with("tmetric_event_total{event=\"TOPDOWN.SLOTS\""))
        .map(|(_, v)| *v)
        .unwrap();
    assert!(slots > 0.0 && slots.fract() == 0.0);
    // OpenMetrics: the same samples, counters typed without `_total`, and `# EOF`.
    let om = expo::render(&s.collector, Format::OpenMetrics, false);
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE tmetric_event counter\n"));
    assert!(om.contains("# TYPE tmetric_host info\n"));
    // The JSON view has the same values.
    let json = expo::json(&s.collector);
    let metrics = &json["targets"][0]["units"][0]["metrics"];
    let retiring =
        metrics.as_array().unwrap().iter().find(|m| m["metric"] == "tma_retiring").unwrap();
    assert_eq!(
        retiring["value"].as_f64().unwrap(),
        get("tmetric_tma_retiring_ratio{model=\"x86/sapphirerapids\"}")
    );
}

#[test]
fn multiplexed_metrics_have_error_bars_and_running_shares() {
    // TopdownL3 needs more general counters than sapphirerapids has: groups rotate.
    let mut s = sim("sapphirerapids", "TopdownL3", 6);
    s.interval(6, 200);
    s.interval(6, 200);
    let text = expo::render(&s.collector, Format::Prometheus, false);
    let samples = parse(&text);
    let shares: Vec<f64> = samples
        .iter()
        .filter(|(k, _)| k.starts_with("tmetric_metric_running_ratio{"))
        .map(|(_, v)| *v)
        .collect();
    assert!(!shares.is_empty());
    assert!(shares.iter().any(|&s| s < 0.99), "nothing multiplexed: {shares:?}");
    assert!(shares.iter().all(|&s| s > 0.0 && s <= 1.0));
    let bars: Vec<f64> = samples
        .iter()
        .filter(|(k, _)| k.contains("_error_bar_") || k.contains("_error_bar{"))
        .map(|(_, v)| *v)
        .collect();
    assert!(bars.iter().all(|b| b.is_finite() && *b >= 0.0));
    let apart = samples
        .iter()
        .filter(|(k, v)| k.starts_with("tmetric_metric_inputs_together{") && **v == 0.0)
        .count();
    let shares_below = shares.iter().filter(|&&s| s < 0.99).count();
    assert!(apart + shares_below > 0);
}

#[test]
fn a_counter_that_stops_being_scheduled_is_said_and_the_text_stays_valid() {
    let mut s = sim("sapphirerapids", "TopdownL1", 4);
    s.interval(4, 250);
    let before = parse(&expo::render(&s.collector, Format::Prometheus, false));
    assert!(before.contains_key("tmetric_tma_retiring_ratio{model=\"x86/sapphirerapids\"}"));
    // Another user pins an event on every general counter of every CPU: tmetric's group,
    // which needs one (INT_MISC.UOP_DROPPING), can no longer be scheduled.
    let mut other = s.kernel.clone();
    let cpus = SimMachine::named("sapphirerapids").unwrap().cpu_ids();
    let mut fds = Vec::new();
    for cpu in cpus {
        let mut attr = Attr { type_: TYPE_RAW, config: 0x00c4, pinned: true, ..Attr::default() };
        let leader = other.perf_event_open(&attr, -1, cpu as i32, -1).unwrap();
        fds.push(leader);
        attr.pinned = false;
        for _ in 1..8 {
            fds.push(other.perf_event_open(&attr, -1, cpu as i32, leader).unwrap());
        }
        other.enable(leader, true).unwrap();
    }
    s.interval(4, 250);
    let text = expo::render(&s.collector, Format::Prometheus, false);
    let after = parse(&text);
    // No value that would hide the gap: the metric is missing, with the reason.
    assert!(
        !after.contains_key("tmetric_tma_retiring_ratio{model=\"x86/sapphirerapids\"}"),
        "{text}"
    );
    let missing = after
        .keys()
        .find(|k| k.starts_with("tmetric_metric_missing_info{") && k.contains("tma_retiring"))
        .unwrap_or_else(|| panic!("no missing_info in {text}"));
    assert!(missing.contains("never ran on a counter"), "{missing}");
    assert!(text.contains("<not counted>"), "{text}");
    // The raw counters are still there (their group's running time stopped), and the metric
    // without a value has no running share, grouping or error bar to claim.
    assert!(after.keys().any(|k| k.starts_with("tmetric_group_running_seconds_total{")));
    assert!(
        !after.keys().any(|k| k.starts_with("tmetric_metric_inputs_together{")
            && k.contains("\"tma_retiring_ratio\"")),
        "{text}"
    );
    for fd in fds.into_iter().rev() {
        other.close(fd);
    }
    s.interval(4, 250);
    let back = parse(&expo::render(&s.collector, Format::Prometheus, false));
    let v = back["tmetric_tma_retiring_ratio{model=\"x86/sapphirerapids\"}"];
    assert!((v - 0.4).abs() < 1e-6, "{v}");
}

#[test]
fn counters_that_are_never_multiplexed_are_read_once_per_interval_with_exact_bars() {
    // Software events always count: one read per interval, whatever --reads says.
    let mut once = sim("sapphirerapids", "Software", 5);
    assert_eq!(once.collector.reads_per_interval(), 1);
    // The same selection read five times an interval, for comparison.
    let mut five = sim("sapphirerapids", "Software", 5);
    for _ in 0..2 {
        once.interval(1, 1000);
        five.interval(5, 200);
    }
    let one = parse(&expo::render(&once.collector, Format::Prometheus, false));
    let many = parse(&expo::render(&five.collector, Format::Prometheus, false));
    let bars: Vec<(&String, &f64)> =
        one.iter().filter(|(k, _)| k.contains("_error_bar_")).collect();
    assert!(!bars.is_empty(), "no error bar in {one:?}");
    for (series, bar) in bars {
        assert_eq!(*bar, 0.0, "{series}: a count never multiplexed has no multiplexing error");
        assert_eq!(many.get(series), Some(&0.0), "{series} with five reads");
    }
    let shares: Vec<f64> = one
        .iter()
        .filter(|(k, _)| k.starts_with("tmetric_metric_running_ratio{"))
        .map(|(_, v)| *v)
        .collect();
    assert!(!shares.is_empty() && shares.iter().all(|&s| s == 1.0), "{shares:?}");
    // Every metric has the same value however often the interval was read.
    let mut compared = 0;
    for (series, v) in &one {
        let gauge = series.starts_with("tmetric_")
            && !series.starts_with("tmetric_metric_")
            && series.contains("model=\"common/common\"")
            && !series.contains("_error_bar_");
        if gauge {
            let w = many[series];
            assert!(
                (v - w).abs() <= 1e-9 * v.abs().max(1.0),
                "{series}: {v} read once, {w} five times"
            );
            compared += 1;
        }
    }
    assert!(compared >= 3, "{compared} metrics compared in {one:?}");
    assert_eq!(one["tmetric_interval_reads"], 1.0);

    // A hardware counter can be multiplexed: --reads stays, for its error bars.
    let mut mixed = sim("sapphirerapids", "TopdownL1,Software", 5);
    assert_eq!(mixed.collector.reads_per_interval(), 5);
    mixed.interval(5, 200);
    let text = expo::render(&mixed.collector, Format::Prometheus, false);
    assert_eq!(parse(&text)["tmetric_interval_reads"], 5.0);
}

/// The series of an exposition, `name{labels}`, and the families they belong to.
fn series(s: &Sim) -> Vec<String> {
    let mut v: Vec<String> =
        parse(&expo::render(&s.collector, Format::Prometheus, false)).into_keys().collect();
    v.sort();
    v
}

#[test]
fn each_metrics_detail_level_holds_its_series_and_the_rules_find_theirs() {
    use tmetric_serve::Detail;
    let at = |detail: Detail| {
        let mut s = sim("sapphirerapids", "TopdownL3", 6);
        s.collector.options.detail = detail;
        s.interval(6, 200);
        s
    };
    let (metrics, quality, events) = (at(Detail::Metrics), at(Detail::Quality), at(Detail::Events));
    let (m, q, e) = (series(&metrics), series(&quality), series(&events));
    let family = |k: &String| k.split('{').next().unwrap().to_string();
    // Each level adds to the one before, series for series (the same counts at each level).
    let added = |low: &[String], high: &[String]| -> std::collections::BTreeSet<String> {
        assert!(low.iter().all(|k| high.contains(k)), "a series of the lower level is missing");
        high.iter().filter(|k| !low.contains(k)).map(family).collect()
    };
    let by_quality = added(&m, &q);
    for f in [
        "tmetric_metric_running_ratio",
        "tmetric_metric_inputs_together",
        "tmetric_metric_threshold_crossed",
    ] {
        assert!(by_quality.contains(f), "quality adds {f}: {by_quality:?}");
    }
    let bar_families: Vec<&String> =
        by_quality.iter().filter(|f| f.contains("_error_bar_")).collect();
    assert!(!bar_families.is_empty(), "quality adds the error bars: {by_quality:?}");
    assert_eq!(by_quality.len(), 3 + bar_families.len(), "{by_quality:?}");
    let by_events = added(&q, &e);
    let raw: std::collections::BTreeSet<String> = [
        "tmetric_event_total",
        "tmetric_group_enabled_seconds_total",
        "tmetric_group_running_seconds_total",
    ]
    .map(String::from)
    .into();
    assert_eq!(by_events, raw);
    // The metrics level has every metric's gauge (or why it has none) and nothing per metric
    // beside it.
    let roots = metrics.collector.base_plan().roots().len();
    let gauges = m
        .iter()
        .filter(|k| {
            let f = family(k);
            metrics.collector.exports.iter().any(|x| x.family == f)
                || f == "tmetric_metric_missing_info"
        })
        .count();
    assert_eq!(gauges, roots, "{m:?}");

    // What the rules read is served at the default level, and they say which level that is.
    let model = events.collector.base_plan().roots()[0].model;
    let picked: Vec<usize> =
        events.collector.base_plan().roots().iter().map(|r| r.metric).collect();
    let set = tmetric_serve::rules::rules(model, &picked, "1m");
    let texts = [
        tmetric_serve::rules::events_yaml("1m", "tmetric rules --events"),
        tmetric_serve::rules::yaml(&[(model, set)], "tmetric rules -M TopdownL3", false),
    ];
    let families_at = |k: &[String]| -> std::collections::BTreeSet<String> {
        k.iter().map(|s| family(s).trim_end_matches("_total").to_string()).collect()
    };
    let (served, served_low) = (families_at(&e), families_at(&q));
    for text in &texts {
        assert!(text.contains("--metrics-detail events (the default) only"), "{text}");
        let mut read = std::collections::BTreeSet::new();
        for line in text.lines().filter(|l| l.trim_start().starts_with("expr:")) {
            let mut rest = line;
            while let Some(i) = rest.find("tmetric_") {
                let name: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[i + name.len()..];
                read.insert(name.trim_end_matches("_total").to_string());
            }
        }
        assert!(!read.is_empty());
        for name in &read {
            assert!(served.contains(name), "the rules read {name}, not served at events");
        }
        if text.contains("tmetric_event_total") {
            assert!(!served_low.contains("tmetric_event"), "quality serves no raw counter");
        }
    }
}

/// `serve -e` reads event lists as `stat -e` does under the output contract in use
/// (`tmetric_engine::events::resolver`): perf 7.x's tool PMU under `--perf-version 7.2`, where
/// `tool/num_cpus/` is the 1 perf 7.2 reads system-wide, and not under perf 6.12's.
#[test]
fn event_lists_are_read_by_the_contract_in_use() {
    use tmetric_engine::Source;
    use tmetric_engine::view::PrintedCount;
    let dir = tempfile::Builder::new().prefix("tmetric-serve-test-").tempdir().unwrap();
    let (sys, proc_root) = (dir.path().join("sys"), dir.path().join("proc"));
    SimMachine::named("sapphirerapids").unwrap().write_sysfs(&sys, &proc_root).unwrap();
    let m = Host::probe(&Sysfs::new(&sys), &proc_root, None);
    let events = ["tool/num_cpus/,cycles".to_string()];
    let v72 = tmetric_catalog::vintage_for("7.2").unwrap();
    tmetric_catalog::use_vintages(tmetric_catalog::default_vintage(), v72);
    // As `serve` builds its plan: system-wide, no metric chosen beside the lists.
    let request = tmetric_engine::setup::Request {
        events: events.to_vec(),
        metrics: tmetric_engine::setup::Metrics::Picks(Vec::new()),
        all_cpus: true,
        ..Default::default()
    };
    let build = || tmetric_engine::setup::build(&request, &m, Default::default()).map(|s| s.plan);
    let plan = build();
    tmetric_catalog::use_vintages(
        tmetric_catalog::default_vintage(),
        tmetric_catalog::base_vintage(),
    );
    let refused = build();
    tmetric_catalog::clear_inferred_vintage();
    let plan = plan.expect("perf 7.2's tool PMU");
    let row = plan.rows().iter().find(|r| r.name == "tool/num_cpus/").expect("a row");
    assert!(matches!(row.source, Source::Tool(_)), "{row:?}");
    let snapshot = tmetric_runtime::Snapshot::default();
    let shown = tmetric_engine::plan_eval::row_count(
        &plan,
        row,
        &tmetric_engine::EvalInput::new(&snapshot, 1.0),
    );
    assert_eq!(shown.count, PrintedCount::Value(1.0), "{shown:?}");
    let err = refused.map(|_| ()).expect_err("no tool PMU in perf 6.12");
    assert!(
        matches!(&err, tmetric_engine::setup::SetupError::Events { list, .. } if list == &events[0]),
        "{err:?}"
    );
}

/// perf 7.2's tables (the default) renamed two of the common metrics `serve` counts by default:
/// their perf 6.12 families stay on `/metrics` beside the new ones with the same samples (the
/// value, the quality series, the error bar), their HELP saying they are deprecated and what
/// replaces them, so a dashboard or alert made before the upgrade keeps its series; under
/// perf 6.12's tables only the earlier names are served.
#[test]
fn renamed_metrics_keep_their_earlier_series_beside_the_new_ones() {
    use tmetric_serve::Detail;
    let renamed = [
        ("tmetric_cs_per_second", "tmetric_context_switches_per_second"),
        ("tmetric_migrations_per_second", "tmetric_cpu_migrations_per_second"),
    ];
    let render = |vintage: &'static tmetric_catalog::Vintage| {
        tmetric_catalog::use_vintage(vintage);
        let mut s = sim("sapphirerapids", "Software", 2);
        s.collector.options.detail = Detail::Quality;
        s.interval(2, 200);
        let text = expo::render(&s.collector, Format::Prometheus, false);
        tmetric_catalog::clear_inferred_vintage();
        text
    };
    let text = render(tmetric_catalog::vintage_for("7.2").unwrap());
    let samples = parse(&text);
    let model = "{model=\"common/common\"}";
    for (new, old) in renamed {
        let now = samples[&format!("{new}{model}")];
        assert!(now > 0.0, "{new}: {text}");
        assert_eq!(samples[&format!("{old}{model}")], now, "{old}");
        let (new_metric, old_metric) = (&new["tmetric_".len()..], &old["tmetric_".len()..]);
        let share = |m: &str| {
            samples
                [&format!("tmetric_metric_running_ratio{{model=\"common/common\",metric=\"{m}\"}}")]
        };
        assert_eq!(share(old_metric), share(new_metric), "{old}");
        let help = text.lines().find(|l| l.starts_with(&format!("# HELP {old} "))).unwrap();
        assert!(
            help.contains(&format!("Deprecated: {new}'s name in perf 6.12's tables")),
            "{help}"
        );
        let bar = old.replace("_per_second", "_error_bar_per_second");
        assert!(samples.contains_key(&format!("{bar}{model}")), "{bar}: {text}");
    }
    let text = render(tmetric_catalog::base_vintage());
    let samples = parse(&text);
    for (new, old) in renamed {
        assert!(samples.contains_key(&format!("{old}{model}")), "{old}: {text}");
        assert!(!text.contains(new), "{new} under perf 6.12's tables");
        assert!(!text.contains("Deprecated"), "{text}");
    }
}

/// `serve -e` with tool events, which no counter counts: `duration_time` is the wall-clock
/// seconds counted (a counter since the target was opened; with `--once` the interval's), perf
/// 7.x's tool PMU facts are gauges of what perf 7.2 reads at open (`tool/num_cpus/` is 1
/// system-wide), and `user_time`/`system_time`, a workload's CPU time, are refused: serve runs
/// no workload.
#[test]
fn tool_events_export_the_time_counted_and_the_facts_perf_reads() {
    let opened = std::time::Instant::now();
    let mut s = sim_with("sapphirerapids", "", &["duration_time,task-clock"], 1).unwrap();
    s.interval(1, 1000);
    s.interval(1, 1000);
    let text = expo::render(&s.collector, Format::Prometheus, false);
    let samples = parse(&text);
    let key = r#"tmetric_tool_seconds_total{event="duration_time",model="x86/sapphirerapids"}"#;
    let counted = *samples.get(key).unwrap_or_else(|| panic!("no {key} in {text}"));
    let interval = s.collector.host.as_ref().unwrap().last.as_ref().unwrap().seconds;
    // Counted from the open, before the first interval began, to this scrape.
    assert!(interval > 0.0 && counted >= interval, "{counted} for an interval of {interval}");
    assert!(counted <= opened.elapsed().as_secs_f64(), "{counted}");
    assert!(text.contains("# TYPE tmetric_tool_seconds_total counter"), "{text}");
    let once = parse(&expo::render(&s.collector, Format::Prometheus, true));
    let key = r#"tmetric_tool_seconds{event="duration_time",model="x86/sapphirerapids"}"#;
    assert_eq!(once[key], interval);

    let v72 = tmetric_catalog::vintage_for("7.2").unwrap();
    tmetric_catalog::use_vintages(tmetric_catalog::default_vintage(), v72);
    let facts = sim_with("sapphirerapids", "", &["tool/num_cpus/,cycles"], 1);
    tmetric_catalog::clear_inferred_vintage();
    let mut facts = facts.unwrap();
    facts.interval(1, 1000);
    let samples = parse(&expo::render(&facts.collector, Format::Prometheus, false));
    let key = r#"tmetric_tool_value{event="tool/num_cpus/",model="x86/sapphirerapids"}"#;
    assert_eq!(samples.get(key), Some(&1.0), "{samples:?}");

    for time in ["user_time", "system_time"] {
        let err = sim_with("sapphirerapids", "", &[time], 1).err().expect("refused");
        assert_eq!(
            err.to_string(),
            format!(
                "-e {time}: perf's {time} is the CPU time of the workload perf runs, and serve runs none; count the CPU time of the host or of each cgroup with -e task-clock (exported as tmetric_event_total, in ns), or leave {time} out"
            )
        );
    }
}

/// perf 7.2's `-M Software` has every event alone in the plan (its metrics' `NO_GROUP_EVENTS`),
/// but per-CPU software events are read as one group per CPU and cgroup: the group times are
/// exported once per group the kernel reads, not once per event, and each event's `group`
/// label finds its pair, as the recording rules' join needs.
#[test]
fn group_times_are_exported_once_per_group_read() {
    tmetric_catalog::use_vintage(tmetric_catalog::vintage_for("7.2").unwrap());
    let mut s = sim("sapphirerapids", "Software", 1);
    s.interval(1, 500);
    let text = expo::render(&s.collector, Format::Prometheus, false);
    tmetric_catalog::clear_inferred_vintage();
    let samples = parse(&text);
    // `name{labels}` without the label `drop`, for the rules' `ignoring(event)`.
    let labels = |series: &str| -> Vec<(String, String)> {
        let inner = series.split_once('{').map_or("", |(_, l)| l.trim_end_matches('}'));
        inner
            .split(',')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.to_string(), v.trim_matches('"').to_string())
            })
            .collect()
    };
    let of = |family: &str| -> Vec<(Vec<(String, String)>, f64)> {
        samples
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(family))
            .map(|(k, v)| (labels(k), *v))
            .collect()
    };
    let label = |l: &[(String, String)], key: &str| {
        l.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()).unwrap_or_default()
    };
    let events = of("tmetric_event_total");
    let software = [
        "cpu-clock",
        "task-clock",
        "context-switches",
        "cpu-migrations",
        "page-faults",
        "major-faults",
    ];
    let group_of = |event: &str| {
        let e = events.iter().find(|(l, _)| label(l, "event") == event);
        label(&e.unwrap_or_else(|| panic!("no {event} in\n{text}")).0, "group")
    };
    for e in software {
        assert_eq!(group_of(e), group_of("cpu-clock"), "{e} is read with the software group");
    }
    assert_ne!(group_of("msr/tsc/"), group_of("cpu-clock"), "msr is another PMU's event");
    let enabled = of("tmetric_group_enabled_seconds_total");
    let running = of("tmetric_group_running_seconds_total");
    // Two groups read per CPU: the six software events, and msr/tsc alone.
    assert_eq!(enabled.len(), 2, "{text}");
    assert_eq!(running.len(), 2, "{text}");
    // Every event finds exactly one pair of times on its labels but `event`.
    for (l, _) in &events {
        let key: Vec<&(String, String)> = l.iter().filter(|(k, _)| k != "event").collect();
        let matches = |times: &[(Vec<(String, String)>, f64)]| {
            times.iter().filter(|(t, _)| t.iter().collect::<Vec<_>>() == key).count()
        };
        assert_eq!(matches(&enabled), 1, "{l:?} in\n{text}");
        assert_eq!(matches(&running), 1, "{l:?} in\n{text}");
    }
    // Each group counted the 500 simulated ms on every CPU, enabled and running alike.
    let cpus = SimMachine::named("sapphirerapids").unwrap().cpus.len() as f64;
    for (_, v) in enabled.iter().chain(&running) {
        assert!((v - 0.5 * cpus).abs() < 1e-6, "{v} s for {cpus} CPUs in\n{text}");
    }
}
