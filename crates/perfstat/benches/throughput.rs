//! Import and lookup throughput on a synthetic `perf stat -I 100 -A -M ...` log in each layout.
//!
//! Run with `cargo bench -p tmetric-perfstat`. Prints lines/s, MB/s and the time per interval
//! (the unit `perf stat -I` itself spends 0.2-0.4 ms of CPU on, see docs/benchmarks.md).
use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};
use tmetric_perfstat::{Layout, parse_with};

const INTERVALS: usize = 200;
const CPUS: usize = 16;
const EVENTS: [&str; 12] = [
    "cpu_core/TOPDOWN.SLOTS/",
    "cpu_core/topdown-retiring/",
    "cpu_core/topdown-bad-spec/",
    "cpu_core/topdown-fe-bound/",
    "cpu_core/topdown-be-bound/",
    "cpu_core/INST_RETIRED.ANY/",
    "cpu_core/CPU_CLK_UNHALTED.THREAD/",
    "cpu_core/CPU_CLK_UNHALTED.REF_TSC/",
    "cpu_core/MEM_LOAD_RETIRED.L1_MISS/",
    "cpu_core/MEM_INST_RETIRED.SPLIT_LOADS/",
    "cpu_core/MEM_INST_RETIRED.SPLIT_LOADS/R",
    "TSC",
];

fn count(i: usize, cpu: usize, e: usize) -> u64 {
    (i as u64 * 7919 + cpu as u64 * 104_729 + e as u64 * 1_299_709) % 987_654_321
}

fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn synth(layout: &Layout) -> String {
    let mut out = String::new();
    for i in 0..INTERVALS {
        let ts = format!("{}.{:09}", (i + 1) / 10, ((i + 1) % 10) * 100_000_000 + 1234);
        for (e, event) in EVENTS.iter().enumerate() {
            for cpu in 0..CPUS {
                let n = count(i, cpu, e);
                let _ = match layout {
                    Layout::Std if e == 0 => writeln!(
                        out,
                        "{ts:>15} CPU{cpu:<4}{:>18}      {event:<32} #     25.0 %  tma_retiring             (50.00%)",
                        grouped(n)
                    ),
                    Layout::Std => writeln!(
                        out,
                        "{ts:>15} CPU{cpu:<4}{:>18}      {event:<32}  (50.00%)",
                        grouped(n)
                    ),
                    Layout::Csv(sep) => {
                        let (mv, mu) = if e == 0 { ("25.0", "%  tma_retiring") } else { ("", "") };
                        writeln!(
                            out,
                            "{ts:>15}{sep}CPU{cpu}{sep}{n}{sep}{sep}{event}{sep}50000000{sep}50.00{sep}{mv}{sep}{mu}"
                        )
                    }
                    Layout::Json => {
                        let mu = if e == 0 { "%  tma_retiring" } else { "" };
                        writeln!(
                            out,
                            "{{\"interval\" : {ts}, \"cpu\" : \"{cpu}\", \"counter-value\" : \"{n}.000000\", \"unit\" : \"\", \"event\" : \"{event}\", \"event-runtime\" : 50000000, \"pcnt-running\" : 50.00, \"metric-value\" : \"25.000000\", \"metric-unit\" : \"{mu}\"}}"
                        )
                    }
                };
            }
        }
    }
    out
}

fn time<T>(mut f: impl FnMut() -> T) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..7 {
        let start = Instant::now();
        black_box(f());
        best = best.min(start.elapsed());
    }
    best
}

fn main() {
    let ids = [
        "cpu_core@TOPDOWN.SLOTS@",
        r"cpu_core@topdown\-retiring@",
        "cpu_core@CPU_CLK_UNHALTED.THREAD@",
        "cpu_core@MEM_INST_RETIRED.SPLIT_LOADS@R",
        "TSC",
        "duration_time",
    ];
    for layout in [Layout::Std, Layout::Csv(",".into()), Layout::Json] {
        let input = synth(&layout);
        let lines = input.lines().count();
        let parsed =
            parse_with(&input, "bench", Some(layout.clone())).expect("synthetic log reads");
        assert_eq!(parsed.blocks.len(), INTERVALS * CPUS);
        let took =
            time(|| parse_with(&input, "bench", Some(layout.clone())).map(|l| l.blocks.len()));
        let secs = took.as_secs_f64();
        println!(
            "{layout:?}: {lines} lines, {:.1} MB: {:.2} ms, {:.2} M lines/s, {:.0} MB/s, {:.1} us per interval of {CPUS} CPUs",
            input.len() as f64 / 1e6,
            secs * 1e3,
            lines as f64 / secs / 1e6,
            input.len() as f64 / secs / 1e6,
            secs / INTERVALS as f64 * 1e6
        );
        let lookups = time(|| {
            let mut sum = 0.0;
            for block in &parsed.blocks {
                for id in ids {
                    sum += block
                        .lookup_on_pmu(id, Some("tma_retiring"), Some("cpu_core"))
                        .perf_value()
                        .unwrap_or(0.0);
                }
            }
            sum
        });
        let n = parsed.blocks.len() * ids.len();
        println!(
            "  lookups: {n} in {:.2} ms, {:.0} ns each",
            lookups.as_secs_f64() * 1e3,
            lookups.as_secs_f64() / n as f64 * 1e9
        );
    }
}
