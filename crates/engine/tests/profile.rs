//! Metrics of the catalogue over the simulated kernel's true counts: on every simulated
//! machine the tree's metrics (TopdownL1..L6, AMD's PipelineL1/L2) equal the truth the
//! simulator derived from its workload with its own reading of the vendor formulas, so the
//! catalogue, tmetric's evaluator, sysfs resolution and the simulator's encodings agree.

use std::path::PathBuf;

use tmetric_engine::{Evaluator, Select};
use tmetric_runtime::Sysfs;
use tmetric_sim::{Machine, SimKernel};

const MS: u64 = 1_000_000;

fn machine(name: &str, watchdog: bool) -> Machine {
    Machine::named(name).unwrap_or_else(|| panic!("no machine {name}")).with_nmi_watchdog(watchdog)
}

/// A sysfs and proc tree in a private temporary directory, removed on drop.
struct TempTree(tempfile::TempDir);

impl TempTree {
    fn new(tag: &str) -> TempTree {
        let dir = tempfile::Builder::new().prefix(&format!("tmetric-profile-{tag}-")).tempdir();
        TempTree(dir.expect("a temporary directory"))
    }
    fn sys(&self) -> PathBuf {
        self.0.path().join("sys")
    }
    fn proc(&self) -> PathBuf {
        self.0.path().join("proc")
    }
}

/// Evaluates the metrics of `group` of `machine`'s catalogue model from the simulator's true
/// counts over one second as `tmetric stat -a` sees them: each input resolved through the
/// written sysfs tree as `tmetric stat` resolves it and summed over the CPUs it is opened on
/// (its PMU's `cpumask` or `cpus`, else every CPU).
fn evaluate_group(name: &str, group_name: &str) -> Vec<(String, String, f64)> {
    use tmetric_catalog::IdKind;
    use tmetric_model::Literal;
    use tmetric_runtime::event::{self, ResolvedEvent};
    let m = machine(name, true);
    let tree = TempTree::new(&format!("eval-{name}"));
    m.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    let model = tmetric_catalog::model_for_cpuid(&m.cpuid()).unwrap();
    let k = SimKernel::manual(m.clone());
    let mut evaluator = Evaluator::new(model);
    let topology = sysfs.topology().unwrap();
    evaluator.literals[Literal::SmtOn.index()] = f64::from(u8::from(topology.smt_on));
    evaluator.literals[Literal::NumCpus.index()] = topology.num_cpus as f64;
    evaluator.literals[Literal::NumCpusOnline.index()] = topology.num_cpus as f64;
    evaluator.literals[Literal::NumCores.index()] = topology.cores as f64;
    evaluator.literals[Literal::NumPackages.index()] = topology.packages as f64;
    evaluator.literals[Literal::CoreWide.index()] = 1.0;
    evaluator.literals[Literal::HasPmem.index()] = 0.0;
    if let Some(core) = sysfs.core_pmu()
        && let Ok(text) = std::fs::read_to_string(sysfs.pmu_devices().join(core).join("caps/slots"))
    {
        let slots = tmetric_runtime::sysfs::parse_number(&text).unwrap();
        evaluator.literals[Literal::Slots.index()] = slots as f64;
    }
    let roots = model.select(group_name);
    assert!(!roots.is_empty(), "{name}: no {group_name}");
    let all: Vec<u32> = m.cpu_ids();
    for &root in &roots {
        let ids = model.needed_ids(root, &evaluator.facts(), false).unwrap();
        for slot in ids {
            let id = &model.ids[slot as usize];
            let pmu = model.str(id.pmu);
            let resolved = match id.kind {
                IdKind::Event(index) => {
                    let json = &model.events.at(index as usize);
                    let json_pmu = model.str(json.pmu);
                    let pmu = if sysfs.has_pmu(json_pmu) {
                        json_pmu.to_string()
                    } else {
                        sysfs.core_pmu().unwrap()
                    };
                    // The identifier's own terms (`cmask=1`) follow the JSON encoding's.
                    let terms = match model.str(id.terms) {
                        "" => model.str(json.encoding).to_string(),
                        extra => format!("{},{extra}", model.str(json.encoding)),
                    };
                    event::resolve_on_pmu(&pmu, &terms, "", "x", &sysfs).map(ResolvedEvent::Counter)
                }
                IdKind::Kernel if !pmu.is_empty() => {
                    event::resolve_on_pmu(pmu, model.str(id.event), "", "x", &sysfs)
                        .map(ResolvedEvent::Counter)
                }
                IdKind::Kernel | IdKind::Sysfs => event::resolve(model.str(id.text), &sysfs),
                IdKind::Tool(_) => {
                    evaluator.values[slot as usize] = 1.0;
                    continue;
                }
                _ => continue,
            };
            let Ok(ResolvedEvent::Counter(counter)) = resolved else { continue };
            let on: Vec<u32> = match m.pmu_by_type(counter.attr.type_).map(|(_, p)| p) {
                Some(p) if p.cpumask.is_some() => p.cpumask.clone().unwrap_or_default(),
                Some(p) if p.cpus.is_some() => p.cpus.clone().unwrap_or_default(),
                _ => all.clone(),
            };
            let count: u64 = on
                .iter()
                .map(|&cpu| k.true_count(&counter.attr, cpu, 1_000 * MS).unwrap_or(0))
                .sum();
            evaluator.values[slot as usize] = count as f64;
        }
    }
    evaluator
        .evaluate(model, &roots)
        .into_iter()
        .map(|r| {
            let metric = model.metric(r.metric);
            (model.str(metric.name).to_string(), model.str(metric.pmu).to_string(), r.value)
        })
        .collect()
}

#[test]
fn tree_metrics_evaluate_to_the_derived_truth_on_every_machine() {
    // perf 6.12's tables: this harness feeds tool events a constant, which 7.2's `tma_info_system_time` turns into NaN for the latency metrics (the CLI's `cli_sim::truth` runs the default vintage end to end).
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let machines = [
        ("sapphirerapids", "TopdownL1"),
        ("sapphirerapids", "TopdownL4"),
        ("icelake", "TopdownL2"),
        ("alderlake", "TopdownL3"),
        ("meteorlake", "TopdownL1"),
        ("skylakex", "TopdownL3"),
        ("skylakex-nosmt", "TopdownL1"),
        ("amdzen4", "PipelineL2"),
        ("amdzen5", "PipelineL2"),
        ("neoverse-n2", "TopdownL1"),
    ];
    for (name, group_name) in machines {
        let k = SimKernel::manual(machine(name, true));
        let profile = k.profile();
        let derivation = profile.derivation();
        let results = evaluate_group(name, group_name);
        let mut checked = 0;
        for (metric, pmu, value) in &results {
            let Some(truth) = derivation.truth(0, metric, pmu) else { continue };
            if !truth.tree {
                continue;
            }
            // Counts are whole numbers per CPU: rare events count some ten thousand times a
            // second, so a relative 1e-3 is rounding.
            assert!(
                (value - truth.value).abs() <= 1e-3 * truth.value.abs().max(1e-3),
                "{name} {pmu} {metric}: tmetric {value} vs the simulator's {}",
                truth.value
            );
            assert!(truth.in_range(), "{name} {pmu} {metric}: {} out of range", truth.value);
            checked += 1;
        }
        assert!(checked >= 4, "{name} {group_name}: {checked} tree metrics in {results:?}");
    }
}

#[test]
fn level_one_sums_to_all_slots_and_equals_the_workload_on_every_machine() {
    // The simulator's machines derive their counts from perf 6.12's formulas.
    tmetric_catalog::use_vintage(tmetric_catalog::base_vintage());
    let machines = [
        ("sapphirerapids", "TopdownL1", 1.0),
        ("icelake", "TopdownL1", 1.0),
        ("alderlake", "TopdownL1", 1.0),
        ("meteorlake", "TopdownL1", 1.0),
        ("skylakex", "TopdownL1", 1.0),
        ("skylakex-nosmt", "TopdownL1", 1.0),
        ("amdzen4", "PipelineL1", 1.0),
        ("amdzen5", "PipelineL1", 1.0),
        ("neoverse-n2", "TopdownL1", 100.0),
    ];
    // The default workload's level 1, in percent.
    let want = |metric: &str| match metric.trim_start_matches("tma_") {
        "retiring" => Some(0.40),
        "bad_speculation" => Some(0.10),
        "frontend_bound" => Some(0.20),
        "backend_bound" => Some(0.30),
        "smt_contention" => Some(0.0),
        _ => None,
    };
    for (name, group_name, unit) in machines {
        let results = evaluate_group(name, group_name);
        let mut per_pmu: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
        for (metric, pmu, value) in &results {
            let Some(expected) = want(metric) else { continue };
            let value = value / unit;
            assert!(
                (value - expected).abs() < 1e-6,
                "{name} {pmu} {metric}: {value} vs {expected}"
            );
            let entry = per_pmu.entry(pmu.clone()).or_default();
            entry.0 += value;
            entry.1 += 1;
        }
        assert!(!per_pmu.is_empty(), "{name}: {results:?}");
        for (pmu, (sum, count)) in per_pmu {
            assert!(count >= 4, "{name} {pmu}: {count} level-1 metrics");
            assert!((sum - 1.0).abs() < 1e-6, "{name} {pmu}: level 1 sums to {sum}");
        }
    }
}

#[test]
fn probes_follow_the_simulated_machine() {
    use tmetric_catalog::catalog::id_calls;
    use tmetric_engine::Host;
    use tmetric_engine::plan::{machine_probes, offline_probes};
    let m = machine("neoverse-n2", false);
    let tree = TempTree::new("probes");
    m.write_sysfs(&tree.sys(), &tree.proc()).unwrap();
    let sysfs = Sysfs::new(tree.sys());
    let model = tmetric_catalog::model_for_cpuid(&m.cpuid()).unwrap();
    let on = Host::probe(&sysfs, &tree.proc(), None);
    let probes = machine_probes(model, &on);
    let cpuid = m.cpuid();
    let mut seen = 0;
    for (slot, id) in model.ids.iter().enumerate() {
        if id.calls & id_calls::STRCMP_CPUID_STR == 0 {
            continue;
        }
        seen += 1;
        // The arm64 rule: implementer, architecture and part equal, variant/revision at least
        // the given one. The simulated N2's MIDR decides each argument.
        let want = tmetric_model::cpuid::cpuid_matches("arm64", model.str(id.text), &cpuid);
        assert_eq!(probes[slot], f64::from(u8::from(want)), "{}", model.str(id.text));
    }
    assert!(seen >= 2, "neoverse-n2-v2 compares two MIDRs");
    assert!(
        model
            .ids
            .iter()
            .enumerate()
            .filter(|(_, id)| id.calls & id_calls::STRCMP_CPUID_STR != 0)
            .any(|(slot, _)| probes[slot] == 1.0),
        "the simulated N2 ({cpuid}) matches one of them"
    );
    // Without a machine the cpuid is unknown.
    assert!(
        offline_probes(model)
            .iter()
            .enumerate()
            .filter(|(slot, _)| model.ids[*slot].calls & id_calls::STRCMP_CPUID_STR != 0)
            .all(|(_, v)| v.is_nan())
    );
}
