//! `models` and `defaults`: a model by a typed name, the model of a machine, and the choices
//! `stat` makes for perf's built-in flags (`--topdown`, the default and `-d` events), on
//! simulated machines' trees.

use tmetric_engine::Host;
use tmetric_engine::defaults::{TopdownError, TopdownMode, default_events, detailed_events};
use tmetric_engine::defaults::{core_map, topdown_mode};
use tmetric_engine::models::{HostModelError, ModelError, find_model, host_model};
use tmetric_runtime::Sysfs;
use tmetric_sim::private::{PrivateTree, machine, private_tree};

/// A simulated machine's sysfs and procfs tree, removed on drop.
fn tree(name: &str) -> (PrivateTree, Sysfs) {
    let dir = private_tree(&machine(name).unwrap(), name, |w| panic!("{w}")).unwrap();
    let sysfs = Sysfs::new(dir.path().join("sys"));
    (dir, sysfs)
}

#[test]
fn unknown_models_list_near_names() {
    let err = find_model("x86/nonexist").unwrap_err();
    assert!(matches!(&err, ModelError::Unknown { near, .. } if !near.is_empty()), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("unknown model `x86/nonexist`; the nearest names are `x86/"),
        "{text}"
    );
    let text = find_model("x86/skylakx").unwrap_err().to_string();
    assert!(text.contains("`x86/skylake`") || text.contains("`x86/skylakex`"), "{text}");
}

#[test]
fn models_are_found_by_path_leaf_and_case() {
    assert_eq!(find_model("x86/sapphirerapids").unwrap().path(), "x86/sapphirerapids");
    assert_eq!(find_model(" SapphireRapids ").unwrap().path(), "x86/sapphirerapids");
}

#[test]
fn tsc_frequency_from_the_model_name() {
    use tmetric_engine::plan::tsc_from_model_name;
    let text = "model name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n";
    assert_eq!(tsc_from_model_name(text), 2.1e9);
    assert!(tsc_from_model_name("model name\t: AMD EPYC\n").is_nan());
}

#[test]
fn the_machines_model_comes_from_its_cpuid_unless_named() {
    let (dir, sysfs) = tree("sapphirerapids");
    let proc_root = dir.path().join("proc");
    assert_eq!(host_model(None, &sysfs, &proc_root).unwrap().path(), "x86/sapphirerapids");
    assert_eq!(host_model(Some("icelake"), &sysfs, &proc_root).unwrap().path(), "x86/icelake");
    let err = host_model(Some("nonexist"), &sysfs, &proc_root).unwrap_err();
    assert!(matches!(err, HostModelError::Named(_)), "{err:?}");
    // The host a run probes finds the same models, and sizes its PMUs by the one it found.
    let host = Host::probe(&sysfs, &proc_root, None);
    assert_eq!(host.model().unwrap().path(), "x86/sapphirerapids");
    assert!(!host.model_named());
    let named = Host::probe(&sysfs, &proc_root, Some("icelake"));
    assert_eq!(named.model().unwrap().path(), "x86/icelake");
    assert!(named.model_named());
    let err = Host::probe(&sysfs, &proc_root, Some("nonexist")).model().unwrap_err();
    assert!(matches!(err, HostModelError::Named(_)), "{err:?}");
}

/// The literals a host gives metric expressions: its topology, the core PMU's slots, the TSC
/// from cpuinfo's model name; `#target_cpu` and `#core_wide` by whether the run is system-wide.
#[test]
fn the_hosts_literals_come_from_its_trees() {
    use tmetric_model::Literal;
    let (dir, sysfs) = tree("sapphirerapids");
    let host = Host::probe(&sysfs, &dir.path().join("proc"), None);
    let topology = host.topology().unwrap();
    let per_task = host.literals(false, None);
    let all = host.literals(true, None);
    assert_eq!(per_task[Literal::NumCpus.index()], topology.num_cpus as f64);
    assert_eq!(per_task[Literal::NumCores.index()], topology.cores as f64);
    assert!(topology.smt_on && topology.cores * 2 == topology.online.len(), "{topology:?}");
    assert_eq!(host.smt_siblings().len(), topology.online.len());
    assert_eq!(per_task[Literal::SmtOn.index()], 1.0);
    assert_eq!((per_task[Literal::TargetCpu.index()], all[Literal::TargetCpu.index()]), (0.0, 1.0));
    // perf's core_wide(): with SMT on, only a system-wide run counts whole cores.
    assert_eq!((per_task[Literal::CoreWide.index()], all[Literal::CoreWide.index()]), (0.0, 1.0));
    let tsc = tmetric_engine::plan::tsc_from_model_name(host.cpuinfo());
    assert!(tsc > 1e9, "{tsc}");
    assert_eq!(all[Literal::SystemTscFreq.index()], tsc);
    // The simulated tree has no `caps/slots`: unknown, not a guess.
    assert!(all[Literal::Slots.index()].is_nan());
}

#[test]
fn topdown_uses_the_models_groups_to_their_depth() {
    let (dir, sysfs) = tree("sapphirerapids");
    let proc_root = dir.path().join("proc");
    let host = Host::probe(&sysfs, &proc_root, None);
    let mode = topdown_mode(None, false, &host).unwrap();
    assert_eq!(mode, Some(TopdownMode::Json("TopdownL1".into())));
    let mode = topdown_mode(Some(2), false, &host).unwrap();
    assert_eq!(mode, Some(TopdownMode::Json("TopdownL2".into())));
    let err = topdown_mode(Some(9), false, &host).unwrap_err();
    assert!(
        matches!(&err, TopdownError::TooDeep { level: 9, model, .. } if model == "x86/sapphirerapids"),
        "{err:?}"
    );
}

#[test]
fn perfs_default_and_detailed_events() {
    let (_dir, sysfs) = tree("sapphirerapids");
    let events = default_events(true, &sysfs);
    assert_eq!(events[0], "cpu-clock");
    assert_eq!(default_events(false, &sysfs)[0], "task-clock");
    assert_eq!(events.last(), Some(&"branch-misses"));
    assert!(events.contains(&"cycles") && events.contains(&"instructions"), "{events:?}");
    let (one, three) = (detailed_events(1), detailed_events(3));
    assert!(one.contains(&"L1-dcache-loads"), "{one:?}");
    assert!(three.len() > one.len() && three.starts_with(&one), "{three:?}");
    assert_eq!(detailed_events(9), three);
}

#[test]
fn the_core_map_places_every_online_cpu() {
    let (_dir, sysfs) = tree("sapphirerapids");
    let map = core_map(&sysfs);
    assert_eq!(map.len(), sysfs.online_cpus().unwrap().len());
    assert!(map.iter().any(|&(_, (package, _))| package == 0), "{map:?}");
}

/// `#core_wide` is perf's `core_wide()` (util/smt.c) for each target: 0 per task and with `-C`
/// alone, 1 with `-a` on a machine without SMT, and with SMT only when `-C` (if given) names
/// every thread of the cores it names. Read by perf 6.12's Skylake-X
/// `tma_info_core_core_clks`, whose value is checked against its formula worked by hand over
/// given counts on the simulated SMT and non-SMT machines.
#[test]
fn core_wide_is_perfs_for_each_target_in_the_metrics_that_read_it() {
    use tmetric_engine::{MetricEval, Select};
    use tmetric_model::Literal;

    let model = tmetric_catalog::model_in(tmetric_catalog::base_vintage(), "x86/skylakex")
        .expect("perf 6.12's Skylake-X");
    let metric = model.metrics_named("tma_info_core_core_clks")[0];
    let (thread, thread_any, one_thread, ref_xclk) = (4.0e9, 7.0e9, 1.0e8, 4.0e8);
    let counts = [
        ("CPU_CLK_UNHALTED.THREAD", thread),
        ("CPU_CLK_UNHALTED.THREAD_ANY", thread_any),
        ("CPU_CLK_UNHALTED.ONE_THREAD_ACTIVE", one_thread),
        ("CPU_CLK_UNHALTED.REF_XCLK", ref_xclk),
    ];
    for (name, smt) in [("skylakex", true), ("skylakex-nosmt", false)] {
        let (dir, sysfs) = tree(name);
        let host = Host::probe(&sysfs, &dir.path().join("proc"), None);
        assert_eq!(host.topology().unwrap().smt_on, smt, "{name}");
        let sibling = host.smt_siblings().iter().find(|(cpu, _)| *cpu == 0).map(|&(_, s)| s);
        assert_eq!(sibling.is_some(), smt, "{name}");
        let mut targets: Vec<(&str, bool, Option<Vec<u32>>, bool)> = vec![
            ("per task", false, None, false),
            ("-C 0", false, Some(vec![0]), false),
            ("-a", true, None, true),
            ("-a -C 0", true, Some(vec![0]), !smt),
        ];
        if let Some(s) = sibling {
            targets.push(("-a -C 0 and its sibling", true, Some(vec![0, s]), true));
        }
        for (target, all_cpus, cpus, whole) in targets {
            let literals = host.literals(all_cpus, cpus.as_deref());
            let at = format!("{name} {target}");
            assert_eq!(literals[Literal::CoreWide.index()], f64::from(u8::from(whole)), "{at}");
            let mut eval = MetricEval::new(model, literals, None);
            for (slot, id) in model.ids.iter().enumerate() {
                if let Some((_, v)) = counts.iter().find(|(n, _)| *n == model.str(id.text)) {
                    eval.set_input(slot as u16, *v, 1.0);
                }
            }
            // The vendor formula: `THREAD / 2 * (1 + ONE_THREAD_ACTIVE / REF_XCLK) if
            // #core_wide < 1 else (THREAD_ANY / 2 if #SMT_on else tma_info_thread_clks)`.
            let want = if !whole {
                thread / 2.0 * (1.0 + one_thread / ref_xclk)
            } else if smt {
                thread_any / 2.0
            } else {
                thread
            };
            let got = eval.evaluate_one(metric);
            assert_eq!(got.value, want, "{at}: {got:?}");
        }
    }
}
