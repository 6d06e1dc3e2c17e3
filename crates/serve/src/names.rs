//! Prometheus names for compiled metrics: a family name in snake case with a base-unit suffix
//! (ratios 0-1, seconds, bytes, hertz), the factor from a metric's value to that base unit,
//! and label-value and HELP escaping.

use tmetric_catalog::Model;

/// How a compiled metric is exported.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The family name (`tmetric_tma_retiring_ratio`).
    pub family: String,
    /// Multiplies the metric's value before `ScaleUnit` into the base unit.
    pub factor: f64,
    /// The base unit (`ratio`, `seconds`, ...), or the catalogue's unit text when it has no
    /// base unit (`per_instr`), or empty.
    pub unit: String,
    /// Whether `unit` is a Prometheus base unit (and so the family's suffix).
    pub base: bool,
    /// The family of its error bar's half width, in the same unit
    /// (`tmetric_tma_retiring_error_bar_ratio`): one family per metric, so no family mixes
    /// units.
    pub bar_family: String,
    /// The family perf 6.12's tables (the default until perf 7.2's) exported the same quantity
    /// under, when perf 7.x renamed the metric (`tmetric_context_switches_per_second` for
    /// `tmetric_cs_per_second`): exported beside it, its HELP saying so, so that dashboards and
    /// alerts made with it keep their series.
    pub earlier: Option<Earlier>,
}

/// A renamed metric's names in perf 6.12's tables ([`Exported::earlier`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Earlier {
    /// Its family (`tmetric_context_switches_per_second`).
    pub family: String,
    /// Its error bar's family.
    pub bar_family: String,
}

fn bar_family(family: &str, base: Option<&str>) -> String {
    match base {
        Some(b) => match family.strip_suffix(&format!("_{b}")) {
            Some(stem) => format!("{stem}_error_bar_{b}"),
            None => format!("{family}_error_bar"),
        },
        None => format!("{family}_error_bar"),
    }
}

/// Name tokens that Prometheus' linter reads as unit abbreviations, and what they become. A
/// unit is a name's last word: inside a name the same letters are something else (`ms` in
/// `tma_ms_switches` is the microcode sequencer), except `percent`, which means a share
/// anywhere.
const TOKENS: &[(&str, &str)] = &[
    ("sec", "second"),
    ("secs", "seconds"),
    ("ms", "milliseconds"),
    ("us", "microseconds"),
    ("ns", "nanoseconds"),
    ("kb", "kilobytes"),
    ("mb", "megabytes"),
    ("gb", "gigabytes"),
    ("percent", "share"),
    ("pct", "share"),
];

/// `text` as a Prometheus name part: lower case, runs of anything but `[a-z0-9]` as one `_`,
/// unit abbreviations spelled out (`per_sec` is `per_second`).
pub fn snake(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut gap = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    let split: Vec<&str> = out.split('_').collect();
    let last = split.len().saturating_sub(1);
    let parts: Vec<&str> = split
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let anywhere = p == "percent" || p == "pct";
            if i == last || anywhere {
                TOKENS.iter().find(|(t, _)| *t == p).map_or(p, |(_, w)| w)
            } else {
                p
            }
        })
        .collect();
    parts.join("_")
}

/// The base unit of a `ScaleUnit` unit text and the factor from the printed value to it.
pub fn base_unit(unit: &str) -> Option<(&'static str, f64)> {
    let u = unit.trim();
    let lower = u.to_ascii_lowercase();
    if u.starts_with('%') || lower.starts_with("percent") {
        return Some(("ratio", 0.01));
    }
    Some(match u {
        "ns" => ("seconds", 1e-9),
        "us" => ("seconds", 1e-6),
        "ms" => ("seconds", 1e-3),
        "s" | "sec" => ("seconds", 1.0),
        "GHz" => ("hertz", 1e9),
        "MHz" => ("hertz", 1e6),
        "Hz" => ("hertz", 1.0),
        "Bytes" | "B" => ("bytes", 1.0),
        "KB" => ("bytes", 1e3),
        "MB" => ("bytes", 1e6),
        "GB" => ("bytes", 1e9),
        "KiB" => ("bytes", 1024.0),
        "MiB" => ("bytes", 1024.0 * 1024.0),
        "GiB" => ("bytes", 1024.0 * 1024.0 * 1024.0),
        "MB/s" | "MB/sec" => ("bytes_per_second", 1e6),
        "GB/s" | "GB/sec" => ("bytes_per_second", 1e9),
        "KB/s" | "KB/sec" => ("bytes_per_second", 1e3),
        "/sec" | "/s" => ("per_second", 1.0),
        _ => return None,
    })
}

/// How `model`'s metric `metric` is exported, with the family perf 6.12's tables gave it
/// when that differs ([`Exported::earlier`]).
pub fn exported(model: &Model, metric: usize) -> Exported {
    let mut e = exported_as(model, metric);
    e.earlier = earlier_family(model, metric, &e);
    e
}

/// The family tmetric's generic metric that perf 7.x's common metric `metric` of `model`
/// replaced had in perf 6.12's tables, when it differs.
fn earlier_family(model: &Model, metric: usize, now: &Exported) -> Option<Earlier> {
    if (model.arch, model.name) != ("common", "common") {
        return None;
    }
    let ours = tmetric_model::generic::generic_name(model.str(model.metric(metric).name))?;
    let base = tmetric_catalog::base_vintage();
    let common = base.models.iter().copied().find(|m| (m.arch, m.name) == ("common", "common"))?;
    if std::ptr::eq(common, model) {
        return None;
    }
    let m = (0..common.metric_count()).find(|&m| common.str(common.metric(m).name) == ours)?;
    let then = exported_as(common, m);
    // The same quantity (perf's formula for tmetric's), so the same number when both bring
    // their values to the exported unit alike (`cs/sec` and `1/sec` are both per second).
    (then.family != now.family && then.factor == now.factor)
        .then_some(Earlier { family: then.family, bar_family: then.bar_family })
}

fn exported_as(model: &Model, metric: usize) -> Exported {
    let m = model.metric(metric);
    let unit = model.str(m.unit);
    let name = snake(model.str(m.name));
    match base_unit(unit) {
        Some((base, factor)) => {
            let family = if name.ends_with(base) {
                format!("tmetric_{name}")
            } else {
                format!("tmetric_{name}_{base}")
            };
            let bar = bar_family(&family, Some(base));
            Exported {
                family,
                factor: m.scale * factor,
                unit: base.to_string(),
                base: true,
                bar_family: bar,
                earlier: None,
            }
        }
        None => {
            let family = format!("tmetric_{name}");
            let bar = bar_family(&family, None);
            Exported {
                family,
                factor: m.scale,
                unit: unit.to_string(),
                base: false,
                bar_family: bar,
                earlier: None,
            }
        }
    }
}

/// A label value as the exposition formats quote it.
pub fn label_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// HELP text: one line, `\` and line ends escaped, and `"` too when `quote` (OpenMetrics
/// escapes it; Prometheus text refuses an escaped `"`).
pub fn help_text(text: &str, quote: bool) -> String {
    let mut out = String::with_capacity(text.len());
    push_help(&mut out, text, quote);
    out
}

/// [`help_text`] appended to `out`, copied in runs between the bytes to escape: every family's
/// HELP is written at every render, and formulas are long and rarely hold one.
pub fn push_help(out: &mut String, text: &str, quote: bool) {
    let mut rest = text;
    // Every byte escaped is ASCII, so a byte position is a character boundary.
    while let Some(i) =
        rest.bytes().position(|b| matches!(b, b'\\' | b'\n' | b'\r') || (quote && b == b'"'))
    {
        out.push_str(&rest[..i]);
        out.push_str(match rest.as_bytes()[i] {
            b'\\' => "\\\\",
            b'"' => "\\\"",
            _ => "\\n",
        });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
}

/// A sample value as Prometheus and OpenMetrics parse it.
pub fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else if value == value.trunc() && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unescaped `"` in an OpenMetrics HELP line (`"Bus lock" per kilo instruction`)
    /// broke strict parsers; Prometheus text must keep it bare.
    #[test]
    fn help_lines_escape_what_each_format_needs() {
        let text = "\"Bus lock\" per\\kilo\ninstruction";
        assert_eq!(help_text(text, true), "\\\"Bus lock\\\" per\\\\kilo\\ninstruction");
        assert_eq!(help_text(text, false), "\"Bus lock\" per\\\\kilo\\ninstruction");
    }

    #[test]
    fn names_are_snake_case_without_unit_abbreviations() {
        assert_eq!(snake("tma_retiring"), "tma_retiring");
        assert_eq!(snake("C2_Pkg_Residency"), "c2_pkg_residency");
        assert_eq!(snake("context_switches_per_sec"), "context_switches_per_second");
        assert_eq!(snake("insn per cycle"), "insn_per_cycle");
        assert_eq!(snake("l2 miss %"), "l2_miss");
        // `ms` inside a name is the microcode sequencer, not milliseconds.
        assert_eq!(snake("tma_ms_switches"), "tma_ms_switches");
        assert_eq!(snake("latency_ms"), "latency_milliseconds");
        assert_eq!(snake("br_misprediction_percent"), "br_misprediction_share");
    }

    #[test]
    fn units_go_to_base_units() {
        assert_eq!(base_unit("%"), Some(("ratio", 0.01)));
        assert_eq!(base_unit("%slots"), Some(("ratio", 0.01)));
        assert_eq!(base_unit("percent of cycles"), Some(("ratio", 0.01)));
        assert_eq!(base_unit("GHz"), Some(("hertz", 1e9)));
        assert_eq!(base_unit("MB/s"), Some(("bytes_per_second", 1e6)));
        assert_eq!(base_unit("per_instr"), None);
        let common = tmetric_catalog::common();
        let i = common.metrics().position(|m| common.str(m.name) == "tsc_rate").unwrap();
        let e = exported(common, i);
        assert_eq!(e.family, "tmetric_tsc_rate_hertz");
        // tsc_rate's ScaleUnit is `1GHz`: a value of 2 GHz is 2e9 Hz.
        assert_eq!(e.factor, 1e9);
    }

    #[test]
    fn numbers_parse_back_exactly() {
        for v in [0.1, 1.0 / 3.0, 1e-300, 12345.0, 1e20, 0.0] {
            assert_eq!(number(v).parse::<f64>().unwrap(), v);
        }
        assert_eq!(number(f64::NAN), "NaN");
        assert_eq!(number(f64::INFINITY), "+Inf");
        assert_eq!(label_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
