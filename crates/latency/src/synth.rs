//! Synthetic XSAVES/XRSTORS trace text for tests and benchmarks: deterministic for a seed, in the
//! three text layouts the parser accepts, each line paired with the sample it encodes.
//!
//! Not used by `tmetric latency` itself; public so the benchmark and tests share one generator.

use std::io::{self, Write};

/// Which tool's text to imitate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceLayout {
    /// `cat trace_pipe`: no header, with the irq-info flags column (`d..1.`).
    TracePipe,
    /// `cat trace` with the `noirq-info` option: the `#` header, no flags column.
    TraceFile,
    /// `trace-cmd report`: a `cpus=` preamble, no flags column, short pid padding.
    TraceCmd,
}

/// The latency sample behind one generated ftrace event line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthSample {
    /// `true` for `x86_fpu_latency_xsave`, `false` for `x86_fpu_latency_xrstor`.
    pub xsave: bool,
    /// The RFBM mask.
    pub rfbm: u64,
    /// The XINUSE mask.
    pub xinuse: u64,
    /// The logged latency.
    pub latency: u64,
    /// Whether this is the enable-time noise sample (`trace_clock() + 1`).
    pub noise: bool,
}

/// A generator configuration.
#[derive(Debug, Clone, Copy)]
pub struct Synth {
    /// Total lines, headers included.
    pub lines: usize,
    /// PRNG seed.
    pub seed: u64,
    /// Text layout.
    pub layout: TraceLayout,
    /// Make the first event line the enable-time noise sample.
    pub enable_noise: bool,
}

/// (xsave, RFBM, XINUSE, weight out of 100, base latency): a mix like the seed's sample output.
const GROUPS: [(bool, u64, u64, u64, u64); 6] = [
    (true, 0x206e7, 0x202, 38, 80),
    (true, 0x206e7, 0x246, 15, 108),
    (true, 0x60ee7, 0x602a2, 9, 140),
    (false, 0x206e7, 0x202, 30, 112),
    (false, 0x206e7, 0x0, 1, 300),
    (false, 0x60ee7, 0x602a2, 7, 150),
];

const TASKS: [(&str, u32); 4] =
    [("bash", 4242), ("<idle>", 0), ("kworker/u8:2", 133), ("Web Content", 7001)];

const TRACE_FILE_HEADER: [&str; 6] = [
    "# tracer: nop",
    "#",
    "# entries-in-buffer/entries-written: 0/0   #P:4",
    "#",
    "#           TASK-PID     CPU#     TIMESTAMP  FUNCTION",
    "#              | |         |         |         |",
];

impl Synth {
    /// The lines (without newline) and the sample each event line encodes.
    pub fn lines(&self) -> impl Iterator<Item = (String, Option<SynthSample>)> + use<> {
        let header: Vec<String> = match self.layout {
            TraceLayout::TracePipe => Vec::new(),
            TraceLayout::TraceFile => TRACE_FILE_HEADER.iter().map(|h| (*h).to_owned()).collect(),
            TraceLayout::TraceCmd => vec!["cpus=4".to_owned()],
        };
        let header_len = header.len().min(self.lines);
        let events = self.lines - header_len;
        let mut rng = SplitMix64(self.seed);
        let layout = self.layout;
        let enable_noise = self.enable_noise;
        let mut clock_us: u64 = 1_234_000_000 + rng.next() % 1_000_000;
        let header = header.into_iter().take(header_len).map(|line| (line, None));
        let body = (0..events).map(move |idx| {
            clock_us += 1 + rng.next() % 40;
            let pick = rng.next() % 100;
            let mut acc = 0;
            let &(xsave, rfbm, xinuse, _, base) = GROUPS
                .iter()
                .find(|g| {
                    acc += g.3;
                    pick < acc
                })
                .expect("weights add up to 100");
            let jitter = rng.next() % 100;
            // About 2% interrupted measurements form the tail that the 97% average removes.
            let spike = if rng.next().is_multiple_of(50) { 500 + rng.next() % 3000 } else { 0 };
            let noise = enable_noise && idx == 0;
            // trace_clock() ran a few hundred ns before the ring buffer stamped the event.
            let latency = if noise { clock_us * 1000 - 317 + 1 } else { base + jitter + spike };
            let (comm, pid) = TASKS[(rng.next() % TASKS.len() as u64) as usize];
            let cpu = rng.next() % 4;
            let event = if xsave { "x86_fpu_latency_xsave" } else { "x86_fpu_latency_xrstor" };
            let (secs, micros) = (clock_us / 1_000_000, clock_us % 1_000_000);
            let fields = format!("x86/fpu: latency:{latency} RFBM:{rfbm:#x} XINUSE:{xinuse:#x}");
            let text = match layout {
                TraceLayout::TracePipe => {
                    format!("{comm:>16}-{pid:<7} [{cpu:03}] d..1. {secs:5}.{micros:06}: {event}: {fields}")
                }
                TraceLayout::TraceFile => format!("{comm:>16}-{pid:<7} [{cpu:03}] {secs:5}.{micros:06}: {event}: {fields}"),
                TraceLayout::TraceCmd => format!("{comm:>16}-{pid:<5} [{cpu:03}] {secs:5}.{micros:06}: {event}:   {fields}"),
            };
            (text, Some(SynthSample { xsave, rfbm, xinuse, latency, noise }))
        });
        header.chain(body)
    }

    /// Writes the lines, each ending in `\n`.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        for (line, _) in self.lines() {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }
}

/// Steele, Lea and Flood's SplitMix64: tiny, fast and good enough for test data.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::{Options, analyze};

    /// Every layout parses back to exactly the generated samples, grouped and summed.
    #[test]
    fn generated_logs_round_trip_in_every_layout() {
        for layout in [TraceLayout::TracePipe, TraceLayout::TraceFile, TraceLayout::TraceCmd] {
            let synth = Synth { lines: 3000, seed: 7, layout, enable_noise: true };
            let mut expected: BTreeMap<(bool, u64, u64), (u64, u64)> = BTreeMap::new();
            for sample in synth.lines().filter_map(|(_, s)| s).filter(|s| !s.noise) {
                let entry = expected.entry((sample.xsave, sample.rfbm, sample.xinuse)).or_default();
                entry.0 += 1;
                entry.1 = entry.1.max(sample.latency);
            }
            let mut text = Vec::new();
            synth.write(&mut text).unwrap();
            let report = analyze(text.as_slice(), Options::xsave_default(), "synth").unwrap();
            assert_eq!(
                (report.malformed_count, report.noise_count, report.lines),
                (0, 1, 3000),
                "{layout:?}"
            );
            let got: Vec<(u64, u64)> =
                report.rows.iter().map(|r| (r.stats.count, r.stats.max)).collect();
            // `false` (xrstor) sorts first, as `x86_fpu_latency_xrstor` does.
            assert_eq!(got, expected.into_values().collect::<Vec<_>>(), "{layout:?}");
        }
    }
}
