//! Retire latencies for `:R` inputs: `--record-tpebs` sampling and `--retire-latency FILE`.

use super::*;

/// `--record-tpebs`: one precise sampling event per `:R` input, on the CPUs or task counted.
pub(super) fn start_sampler<S: Syscalls>(
    plan: &Plan,
    sys: S,
    target: &Target,
    sysfs: &Sysfs,
) -> anyhow::Result<Sampler<S>> {
    let mut specs = Vec::new();
    for r in plan.retire_events() {
        let event = r.event.as_ref().map_err(|why| {
            anyhow::anyhow!(
                "--record-tpebs: cannot sample `{}` (for {}): {why}",
                r.name,
                r.metrics.join(", ")
            )
        })?;
        let mut attr = event.attr.clone();
        // Timed PEBS: a precise event; the retire latency is the weight struct's var3_w.
        attr.precise_ip = 1;
        specs.push(SampleSpec { name: r.name.clone(), attr, cpus: event.cpus.clone() });
    }
    if specs.is_empty() {
        bail!("--record-tpebs: no selected metric has a retire-latency (`:R`) input");
    }
    // The sampler follows a task with `inherit`: the process of -p, the first thread of -t.
    let target = match target {
        Target::Threads(tids) => {
            Target::Task { pid: tids.first().copied().unwrap_or(0), on_exec: false }
        }
        other => other.clone(),
    };
    let options = SamplerOptions {
        task_cpus: match target {
            Target::Task { .. } | Target::Threads(_) => sysfs.online_cpus().unwrap_or_default(),
            Target::Cpus(_) => Vec::new(),
        },
        ..SamplerOptions::default()
    };
    Sampler::start(sys, &specs, &target, &options).map_err(|e| {
        anyhow::anyhow!("--record-tpebs: the sampler cannot start: {e}; without it, --retire-latency FILE gives the values")
    })
}

/// The retire latency each `:R` input gets from its samples (0 with none, as perf does).
pub(super) fn latencies(
    reports: &[EventReport],
    mode: TpebsMode,
    interval: bool,
) -> Vec<(String, f64)> {
    reports
        .iter()
        .map(|r| {
            let summary = if interval { &r.interval } else { &r.total };
            let value = summary.value(mode).unwrap_or(0.0);
            (r.name.clone(), value)
        })
        .collect()
}

/// `-v` (and `-j`): per sampled event, the sample statistics.
pub(super) fn report_samples(
    reports: &[EventReport],
    verbose: bool,
    json: bool,
    out: &mut Sink,
) -> io::Result<()> {
    for r in reports {
        let t = &r.total;
        if json {
            let line = serde_json::json!({
                "tpebs-event": r.name, "samples": t.count, "lost": r.kernel_lost.unwrap_or(t.lost),
                "mean": t.mean, "min": t.min, "max": t.max, "last": t.last, "p97": t.p97,
            });
            writeln!(out, "{line}")?;
        } else if verbose {
            let show = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
            warn(&format!(
                "retire latency of {}: {} samples ({} lost), mean {}, min {}, max {}, last {}, p97 (mean of the lowest 97%) {} cycles",
                r.name,
                t.count,
                r.kernel_lost.unwrap_or(t.lost),
                show(t.mean),
                show(t.min),
                show(t.max),
                show(t.last),
                show(t.p97)
            ));
        }
        if r.kernel_lost.unwrap_or(t.lost) > 0 {
            warn(&format!(
                "--record-tpebs: {} samples of {} were lost (the reader fell behind)",
                r.kernel_lost.unwrap_or(t.lost),
                r.name
            ));
        }
    }
    Ok(())
}

/// `--retire-latency FILE`: `{"EVENT": cycles}`. A key names a `:R` input as printed
/// (`cpu_core/MEM_INST_RETIRED.STLB_HIT_LOADS/R`) or just its event (`MEM_INST_RETIRED.STLB_HIT_LOADS`),
/// in any case.
pub(super) fn apply_retire_latency_file(plan: &mut Plan, path: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--retire-latency {}: cannot read it", path.display()))?;
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text.trim_start_matches('\u{feff}')).with_context(|| {
            format!(
                "--retire-latency {}: expected a JSON object {{\"EVENT\": cycles, ...}}",
                path.display()
            )
        })?;
    let bare = |name: &str| -> String {
        let name = name.trim_end_matches('/').trim_end_matches(":R").trim_end_matches("/R");
        let name = name.rsplit('/').next().unwrap_or(name);
        name.to_ascii_lowercase()
    };
    let mut unused = Vec::new();
    for (key, value) in &map {
        let Some(cycles) = value.as_f64().filter(|v| v.is_finite() && *v >= 0.0) else {
            bail!(
                "--retire-latency {}: `{key}` must be a number of cycles, not {value}",
                path.display()
            );
        };
        let matched: Vec<String> = plan
            .retire_events()
            .iter()
            .filter(|r| r.name.eq_ignore_ascii_case(key) || bare(&r.name) == bare(key))
            .map(|r| r.name.clone())
            .collect();
        if matched.is_empty() {
            unused.push(key.as_str());
        }
        for name in matched {
            plan.set_retire_latency_of(name, cycles);
        }
    }
    if !unused.is_empty() {
        warn(&format!(
            "--retire-latency {}: no selected metric reads {}",
            path.display(),
            unused.join(", ")
        ));
    }
    Ok(())
}

/// `--retire-latency FILE` and `--record-tpebs`: the file's latencies into the plan, and the
/// generic "read as 0" warning replaced by one naming what is still unknown.
pub(super) fn apply_latency_flags(args: &StatArgs, plan: &mut Plan) -> anyhow::Result<()> {
    if let Some(path) = &args.retire_latency {
        apply_retire_latency_file(plan, path)?;
    }
    if !(args.record_tpebs || args.retire_latency.is_some()) {
        return Ok(());
    }
    plan.retain_warnings(|w| !matches!(w, engine::Warning::RetireLatencyUnsampled { .. }));
    let unknown: Vec<String> = plan
        .retire_events()
        .iter()
        .filter(|r| !args.record_tpebs && !plan.retire_latency().iter().any(|(n, _)| *n == r.name))
        .map(|r| r.name.clone())
        .collect();
    if !unknown.is_empty() {
        plan.add_warning(engine::Warning::RetireLatencyUnknown {
            events: unknown,
            file: args.retire_latency.as_ref().map_or(String::new(), |p| p.display().to_string()),
        });
    }
    Ok(())
}
