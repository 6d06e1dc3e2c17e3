//! perf's built-in ("shadow") metrics, the ones perf prints next to an event without any JSON
//! metric behind them: `insn per cycle`, `GHz`, `stalled cycles per insn`, the cycles-idle and
//! miss ratios, and TopDown from the kernel's `topdown-*` events (the PERF_METRICS events of
//! Ice Lake and later, and perf's `--topdown` patch series' formulas for the older events through [`crate::topdown`]).
//!
//! Pure: a front end passes each input's value (already scaled, clocks in ns) and gets the
//! value in the unit perf prints (percentages as percent). The formulas and labels are those
//! of perf's `util/stat-shadow.c`: 6.1 (which still printed TopDown itself) for the topdown
//! labels, 6.1 and 6.12 (identical) for the others. perf 6.4 and later print TopDown through
//! the JSON metrics (`tma_retiring`, ...) instead, which the catalogue evaluates.

use crate::topdown::{LegacyCounts, level1};
use crate::view::Fmt;

/// The input perf calls `STAT_NSECS`: any clock event, `task-clock` or `cpu-clock` (`perf stat
/// -a` counts `cpu-clock`). [`Builtin::inputs`] lists it by this name.
pub const NSECS: &str = "task-clock|cpu-clock";

/// One built-in metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Builtin {
    /// tmetric's name for it (`insn_per_cycle`).
    pub name: &'static str,
    /// The text perf prints after the value (`insn per cycle`), matched exactly.
    pub label: &'static str,
    /// The event on whose row perf prints it.
    pub carrier: &'static str,
    /// Every event it reads, the carrier first; [`NSECS`] for a clock.
    pub inputs: &'static [&'static str],
    /// Inputs that may be missing (perf reads 0): recovery bubbles on CPUs without them, the
    /// second stalled-cycles event.
    pub optional: &'static [&'static str],
    /// `%` for percentages (the value is in percent), else empty.
    pub unit: &'static str,
    /// Decimals perf prints.
    pub decimals: usize,
    /// perf's printf format for the value when it prints the metric live (`%8.3f` for
    /// `GHz`, `%7.2f ` per instruction, `%7.2f%%` for ratios).
    pub fmt: Fmt,
    /// perf's colour thresholds for a ratio (`get_ratio_color`: red above the first,
    /// magenta above the second, yellow above the third), `None` for an uncoloured value.
    pub colour: Option<[f64; 3]>,
    formula: Formula,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Formula {
    /// `inputs[0] / inputs[1]`, the denominator non-zero (perf prints a blank value
    /// otherwise).
    Ratio,
    /// `inputs[0] / inputs[1]`, both non-zero (`GHz`: perf's `print_cycles` blanks a zero
    /// cycle count too).
    RatioOfNonZero,
    /// `inputs[0] / inputs[1] * 100`, both non-zero.
    Percent,
    /// `max(stalled-cycles-frontend, stalled-cycles-backend) / instructions`.
    StalledPerInsn,
    /// A level-1 PERF_METRICS event over the sum of the four level-1 events.
    TopdownL1(usize),
    /// Level 2 from a PERF_METRICS event: (`parent` index into the level-1 events, `child`
    /// taken directly or as parent minus child).
    TopdownL2 { parent: usize, rest: bool },
    /// The `--topdown` patch series' level 1 from the older events: retiring, bad speculation, frontend,
    /// backend.
    Legacy(usize),
}

const L1: [&str; 4] =
    ["topdown-retiring", "topdown-bad-spec", "topdown-fe-bound", "topdown-be-bound"];

const LEGACY: [&str; 5] = [
    "topdown-total-slots",
    "topdown-slots-issued",
    "topdown-slots-retired",
    "topdown-fetch-bubbles",
    "topdown-recovery-bubbles",
];

const fn ratio(
    name: &'static str,
    label: &'static str,
    inputs: &'static [&'static str],
    fmt: Fmt,
    formula: Formula,
) -> Builtin {
    Builtin {
        name,
        label,
        carrier: inputs[0],
        inputs,
        optional: &[],
        unit: "",
        decimals: fmt.decimals,
        fmt,
        colour: None,
        formula,
    }
}

/// perf's colours for the miss ratios (`print_branch_miss` and the cache printers).
const MISS: [f64; 3] = [20.0, 10.0, 5.0];

const fn percent(
    name: &'static str,
    label: &'static str,
    inputs: &'static [&'static str],
    colour: [f64; 3],
) -> Builtin {
    Builtin {
        name,
        label,
        carrier: inputs[0],
        inputs,
        optional: &[],
        unit: "%",
        decimals: 2,
        fmt: Fmt::PERCENT,
        colour: Some(colour),
        formula: Formula::Percent,
    }
}

/// perf's topdown shares print as `%8.1f%%` (6.1's `print_metric` for TopDown).
const TOPDOWN: Fmt = Fmt { width: 8, decimals: 1, suffix: "%" };

const fn td_l1(name: &'static str, label: &'static str, index: usize) -> Builtin {
    Builtin {
        name,
        label,
        carrier: L1[index],
        inputs: &L1,
        optional: &[],
        unit: "%",
        decimals: 1,
        fmt: TOPDOWN,
        colour: None,
        formula: Formula::TopdownL1(index),
    }
}

const fn td_l2(
    name: &'static str,
    label: &'static str,
    carrier: &'static str,
    inputs: &'static [&'static str],
    parent: usize,
    rest: bool,
) -> Builtin {
    Builtin {
        name,
        label,
        carrier,
        inputs,
        optional: &[],
        unit: "%",
        decimals: 1,
        fmt: TOPDOWN,
        colour: None,
        formula: Formula::TopdownL2 { parent, rest },
    }
}

const fn legacy(
    name: &'static str,
    label: &'static str,
    carrier: &'static str,
    i: usize,
) -> Builtin {
    Builtin {
        name,
        label,
        carrier,
        inputs: &LEGACY,
        optional: &["topdown-recovery-bubbles"],
        unit: "%",
        decimals: 1,
        fmt: TOPDOWN,
        colour: None,
        formula: Formula::Legacy(i),
    }
}

/// Every built-in metric, in the order perf prints them on a row: the one table that both
/// the live view (`view::shadow`, perf 6.12's `stat-shadow.c`) and the log checker
/// (`tmetric-offline`) read labels, inputs, formats and colours from.
pub const BUILTINS: &[Builtin] = &[
    ratio(
        "insn_per_cycle",
        "insn per cycle",
        &["instructions", "cycles"],
        Fmt::PER_INSN,
        Formula::Ratio,
    ),
    Builtin {
        name: "stalled_cycles_per_insn",
        label: "stalled cycles per insn",
        carrier: "instructions",
        inputs: &["instructions", "stalled-cycles-frontend", "stalled-cycles-backend"],
        optional: &["stalled-cycles-frontend", "stalled-cycles-backend"],
        unit: "",
        decimals: 2,
        fmt: Fmt::PER_INSN,
        colour: None,
        formula: Formula::StalledPerInsn,
    },
    // perf's "GHz" is cycles per nanosecond of the clock event.
    ratio("ghz", "GHz", &["cycles", NSECS], Fmt::RATE, Formula::RatioOfNonZero),
    percent(
        "frontend_cycles_idle",
        "frontend cycles idle",
        &["stalled-cycles-frontend", "cycles"],
        [50.0, 30.0, 10.0],
    ),
    percent(
        "backend_cycles_idle",
        "backend cycles idle",
        &["stalled-cycles-backend", "cycles"],
        [75.0, 50.0, 20.0],
    ),
    percent("branch_miss_rate", "of all branches", &["branch-misses", "branches"], MISS),
    percent("cache_miss_rate", "of all cache refs", &["cache-misses", "cache-references"], MISS),
    percent(
        "l1d_miss_rate",
        "of all L1-dcache accesses",
        &["L1-dcache-load-misses", "L1-dcache-loads"],
        MISS,
    ),
    percent(
        "l1i_miss_rate",
        "of all L1-icache accesses",
        &["L1-icache-load-misses", "L1-icache-loads"],
        MISS,
    ),
    percent("llc_miss_rate", "of all LL-cache accesses", &["LLC-load-misses", "LLC-loads"], MISS),
    percent(
        "dtlb_miss_rate",
        "of all dTLB cache accesses",
        &["dTLB-load-misses", "dTLB-loads"],
        MISS,
    ),
    percent(
        "itlb_miss_rate",
        "of all iTLB cache accesses",
        &["iTLB-load-misses", "iTLB-loads"],
        MISS,
    ),
    td_l1("td_retiring", "Retiring", 0),
    td_l1("td_bad_speculation", "Bad Speculation", 1),
    td_l1("td_frontend_bound", "Frontend Bound", 2),
    td_l1("td_backend_bound", "Backend Bound", 3),
    td_l2("td_heavy_operations", "Heavy Operations", "topdown-heavy-ops", &L2_HEAVY, 0, false),
    td_l2("td_light_operations", "Light Operations", "topdown-heavy-ops", &L2_HEAVY, 0, true),
    td_l2("td_branch_mispredict", "Branch Mispredict", "topdown-br-mispredict", &L2_BR, 1, false),
    td_l2("td_machine_clears", "Machine Clears", "topdown-br-mispredict", &L2_BR, 1, true),
    td_l2("td_fetch_latency", "Fetch Latency", "topdown-fetch-lat", &L2_FETCH, 2, false),
    td_l2("td_fetch_bandwidth", "Fetch Bandwidth", "topdown-fetch-lat", &L2_FETCH, 2, true),
    td_l2("td_memory_bound", "Memory Bound", "topdown-mem-bound", &L2_MEM, 3, false),
    td_l2("td_core_bound", "Core Bound", "topdown-mem-bound", &L2_MEM, 3, true),
    legacy("td_legacy_retiring", "retiring", "topdown-slots-retired", 0),
    legacy("td_legacy_bad_speculation", "bad speculation", "topdown-recovery-bubbles", 1),
    legacy("td_legacy_frontend_bound", "frontend bound", "topdown-fetch-bubbles", 2),
    legacy("td_legacy_backend_bound", "backend bound", "topdown-slots-issued", 3),
];

const L2_HEAVY: [&str; 5] = [
    "topdown-heavy-ops",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
];
const L2_BR: [&str; 5] = [
    "topdown-br-mispredict",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
];
const L2_FETCH: [&str; 5] = [
    "topdown-fetch-lat",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
];
const L2_MEM: [&str; 5] = [
    "topdown-mem-bound",
    "topdown-retiring",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-be-bound",
];

/// Why a built-in has no value.
#[derive(Debug, Clone, PartialEq)]
pub enum NoValue {
    /// These inputs have no value.
    Missing(Vec<&'static str>),
    /// perf prints the label with a blank value: a zero denominator (`cycles` 0), or fewer
    /// than two non-zero level-1 topdown events (perf 6.1's `full_td`), or no slot counted.
    Blank(&'static str),
    /// perf prints no line at all: `stalled cycles per insn` without either stalled count.
    NotShown,
}

impl Builtin {
    /// The built-in named `name` (tmetric's name).
    pub fn named(name: &str) -> Option<&'static Builtin> {
        BUILTINS.iter().find(|b| b.name.eq_ignore_ascii_case(name))
    }

    /// The label perf prints, given whether the CPU has `topdown-recovery-bubbles`: the `--topdown` series'
    /// backend line says "backend bound/bad spec" without them.
    pub fn label_for(&self, has_recovery_bubbles: bool) -> &'static str {
        if self.formula == Formula::Legacy(3) && !has_recovery_bubbles {
            "backend bound/bad spec"
        } else {
            self.label
        }
    }

    /// The value in perf's printed unit. `value(input)` gives each input's count (`None`
    /// when the log has no row for it); [`NSECS`] asks for the clock.
    pub fn compute(
        &self,
        value: &mut dyn FnMut(&'static str) -> Option<f64>,
    ) -> Result<f64, NoValue> {
        let mut got = Vec::with_capacity(self.inputs.len());
        let mut missing = Vec::new();
        for &input in self.inputs {
            let v = value(input);
            if v.is_none() && !self.optional.contains(&input) {
                missing.push(input);
            }
            got.push(v);
        }
        if !missing.is_empty() {
            return Err(NoValue::Missing(missing));
        }
        let at = |i: usize| got[i].unwrap_or(0.0);
        match self.formula {
            Formula::Ratio | Formula::RatioOfNonZero | Formula::Percent => {
                let (num, den) = (at(0), at(1));
                // perf: `if (numerator && denominator)`, else a blank value.
                if (num == 0.0 && self.formula != Formula::Ratio) || den == 0.0 {
                    return Err(NoValue::Blank("a zero count"));
                }
                let ratio = num / den;
                Ok(if self.formula == Formula::Percent { ratio * 100.0 } else { ratio })
            }
            Formula::StalledPerInsn => {
                // perf prints this line only when some stalled count and the instructions
                // are non-zero; `max` of a missing count is the other.
                let stalled = at(1).max(at(2));
                if got[1].is_none() && got[2].is_none() {
                    return Err(NoValue::NotShown);
                }
                if stalled == 0.0 || at(0) == 0.0 {
                    return Err(NoValue::Blank("no stalled cycles or no instructions"));
                }
                Ok(stalled / at(0))
            }
            Formula::TopdownL1(i) => {
                let l1 = [at(0), at(1), at(2), at(3)];
                full_td(&l1)?;
                Ok(l1[i] / l1.iter().sum::<f64>() * 100.0)
            }
            Formula::TopdownL2 { parent, rest } => {
                let l1 = [at(1), at(2), at(3), at(4)];
                full_td(&l1)?;
                let sum: f64 = l1.iter().sum();
                let child = at(0) / sum;
                let parent = l1[parent] / sum;
                let value = if rest { parent - child } else { child };
                Ok(value * 100.0)
            }
            Formula::Legacy(i) => {
                let counts = LegacyCounts {
                    total_slots: at(0),
                    slots_issued: at(1),
                    slots_retired: at(2),
                    fetch_bubbles: at(3),
                    recovery_bubbles: got[4],
                };
                let l1 = level1(&counts);
                let v = match i {
                    0 => l1.retiring,
                    1 => l1.bad_speculation,
                    2 => l1.frontend_bound,
                    _ => l1.backend_bound.ok_or(NoValue::Blank("no slot was counted"))?,
                };
                Ok(v * 100.0)
            }
        }
    }
}

/// perf 6.1's `full_td`: the level-1 ratios only when at least two of the four events are
/// positive (their sum is the denominator: the kernel reports each as slots × fraction).
fn full_td(l1: &[f64; 4]) -> Result<(), NoValue> {
    if l1.iter().filter(|v| **v > 0.0).count() >= 2 {
        Ok(())
    } else {
        Err(NoValue::Blank("fewer than two level-1 topdown events are non-zero"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, values: &[(&str, f64)]) -> Result<f64, NoValue> {
        let b = Builtin::named(name).unwrap();
        b.compute(&mut |input| values.iter().find(|(n, _)| *n == input).map(|(_, v)| *v))
    }

    #[test]
    fn ipc_ghz_and_ratios_by_hand() {
        assert_eq!(run("insn_per_cycle", &[("instructions", 3e9), ("cycles", 2e9)]), Ok(1.5));
        assert_eq!(run("ghz", &[("cycles", 2.4e9), (NSECS, 1e9)]), Ok(2.4));
        assert_eq!(
            run("branch_miss_rate", &[("branch-misses", 5.0), ("branches", 200.0)]),
            Ok(2.5)
        );
        assert_eq!(
            run("insn_per_cycle", &[("instructions", 3e9), ("cycles", 0.0)]),
            Err(NoValue::Blank("a zero count"))
        );
        assert_eq!(
            run("insn_per_cycle", &[("instructions", 3e9)]),
            Err(NoValue::Missing(vec!["cycles"]))
        );
        // The larger stalled count over instructions; one of them may be absent.
        assert_eq!(
            run(
                "stalled_cycles_per_insn",
                &[
                    ("instructions", 100.0),
                    ("stalled-cycles-frontend", 30.0),
                    ("stalled-cycles-backend", 50.0)
                ]
            ),
            Ok(0.5)
        );
        assert_eq!(
            run(
                "stalled_cycles_per_insn",
                &[("instructions", 100.0), ("stalled-cycles-frontend", 30.0)]
            ),
            Ok(0.3)
        );
        assert_eq!(
            run("stalled_cycles_per_insn", &[("instructions", 100.0)]),
            Err(NoValue::NotShown)
        );
    }

    #[test]
    fn topdown_over_the_sum_of_level_1() {
        // 1000 slots' worth in total: 400 retiring (100 heavy), 100 bad spec (60 mispredicts),
        // 200 frontend (150 latency), 300 backend (120 memory).
        let v = [
            ("topdown-retiring", 400.0),
            ("topdown-bad-spec", 100.0),
            ("topdown-fe-bound", 200.0),
            ("topdown-be-bound", 300.0),
            ("topdown-heavy-ops", 100.0),
            ("topdown-br-mispredict", 60.0),
            ("topdown-fetch-lat", 150.0),
            ("topdown-mem-bound", 120.0),
        ];
        let want = [
            ("td_retiring", 40.0),
            ("td_bad_speculation", 10.0),
            ("td_frontend_bound", 20.0),
            ("td_backend_bound", 30.0),
            ("td_heavy_operations", 10.0),
            ("td_light_operations", 30.0),
            ("td_branch_mispredict", 6.0),
            ("td_machine_clears", 4.0),
            ("td_fetch_latency", 15.0),
            ("td_fetch_bandwidth", 5.0),
            ("td_memory_bound", 12.0),
            ("td_core_bound", 18.0),
        ];
        for (name, want) in want {
            let got = run(name, &v).unwrap();
            assert!((got - want).abs() < 1e-9, "{name}: {got} != {want}");
        }
        // Only one non-zero level-1 event: perf prints no ratio.
        let one = [
            ("topdown-retiring", 400.0),
            ("topdown-bad-spec", 0.0),
            ("topdown-fe-bound", 0.0),
            ("topdown-be-bound", 0.0),
        ];
        assert!(matches!(run("td_retiring", &one), Err(NoValue::Blank(_))));
    }

    #[test]
    fn legacy_through_seed_000s_level_1() {
        let v = [
            ("topdown-total-slots", 1000.0),
            ("topdown-slots-issued", 600.0),
            ("topdown-slots-retired", 500.0),
            ("topdown-fetch-bubbles", 200.0),
            ("topdown-recovery-bubbles", 20.0),
        ];
        assert_eq!(run("td_legacy_retiring", &v), Ok(50.0));
        assert_eq!(run("td_legacy_bad_speculation", &v), Ok(12.0));
        assert_eq!(run("td_legacy_frontend_bound", &v), Ok(20.0));
        assert!((run("td_legacy_backend_bound", &v).unwrap() - 18.0).abs() < 1e-9);
        // Without recovery bubbles the backend line absorbs bad speculation's recoveries.
        let b = Builtin::named("td_legacy_backend_bound").unwrap();
        assert_eq!(b.label_for(false), "backend bound/bad spec");
        assert_eq!(b.label_for(true), "backend bound");
        assert!((run("td_legacy_backend_bound", &v[..4]).unwrap() - 20.0).abs() < 1e-9);
    }
}
