//! What a run's output explains, as data below the session, the evaluation and the views:
//! why rows print `<not supported>` or `<not counted>` ([`Note::Rows`] with [`RowWhy`]), why a
//! metric has no value or one to treat with care ([`MetricWhy`]), the kernel's refusal of one
//! counter ([`Refusal`]) and of a group ([`RefusedGroup`], [`Reopened`]). The session and the
//! evaluation decide them; printers and exporters word them through `Display` only. Record
//! files keep refusals in this form.

use tmetric_model::Literal;

use crate::metric_eval::Why;

/// Why the kernel refused to open one counter: data, worded only by its `Display` (the text
/// notes put after the event's name: ` (on CPU 3): EACCES: not permitted ...`, or `: why` for
/// a task counter). Record files keep it in this form.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// The CPU the open failed on (`None` for a task counter).
    pub cpu: Option<u32>,
    /// The errno `perf_event_open` returned (0 when unknown: a record file written before
    /// refusals were kept as data, whose text names no errno this build knows).
    pub errno: i32,
    /// The errno's name and what it means for this event
    /// ([`tmetric_runtime::Environment::explain`]).
    pub why: String,
}

impl Refusal {
    /// A refusal from its text (` (on CPU n): why` or `: why`), as record files kept it before
    /// it was data; the errno is read back from the name `why` starts with.
    pub fn from_text(text: &str) -> Refusal {
        let (cpu, why) = match text.strip_prefix(" (on CPU ").and_then(|r| r.split_once("): ")) {
            Some((cpu, why)) if cpu.parse::<u32>().is_ok() => (cpu.parse().ok(), why),
            _ => (None, text.strip_prefix(": ").unwrap_or(text)),
        };
        let name = why.split(':').next().unwrap_or_default();
        let errno = errno_named(name).unwrap_or(0);
        Refusal { cpu, errno, why: why.to_string() }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(cpu) = self.cpu {
            write!(f, " (on CPU {cpu})")?;
        }
        write!(f, ": {}", self.why)
    }
}

/// A group the kernel refused to open together, and where its events went: data, worded only
/// by its `Display` (`the kernel refused the group {a,b} (EINVAL (...)): it does not fit the
/// counters together, so ...`). Record files keep it in this form.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusedGroup {
    /// The group's events by name, leader first.
    pub events: Vec<String>,
    /// The errno the kernel refused the group with.
    pub errno: i32,
    /// Where its events went.
    pub reopened: Reopened,
    /// The metrics that read those events, now from counts of different time slices.
    pub multiplexed: Vec<String>,
}

/// Where the events of a [`RefusedGroup`] went.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reopened {
    /// Every event was counted alone.
    Alone,
    /// The group was reopened with these events (all of them, topdown events behind `slots`).
    Together(Vec<String>),
    /// Split: `kept` stayed together behind their `slots` leader, `alone` were counted alone.
    Split {
        /// The events kept behind `slots`.
        kept: Vec<String>,
        /// The events counted alone.
        alone: Vec<String>,
    },
}

impl RefusedGroup {
    /// A refused group from its text, as record files kept it before it was data; `None`
    /// when the text is not one (a damaged file).
    pub fn from_text(text: &str) -> Option<RefusedGroup> {
        let rest = text.strip_prefix("the kernel refused the group {")?;
        let (events, rest) = rest.split_once("} (")?;
        let (errno, rest) = rest.split_once("): it does not fit the counters together, ")?;
        let (how, multiplexed) = match rest.split_once("; ") {
            Some((how, m)) => {
                let m =
                    m.strip_suffix(" now read counts from different time slices (multiplexed)")?;
                (how, names(m, ", "))
            }
            None => (rest, Vec::new()),
        };
        let reopened = if how == "so its events were counted alone" {
            Reopened::Alone
        } else if let Some(kept) = how.strip_prefix("so it was reopened as {") {
            Reopened::Together(names(kept.strip_suffix('}')?, ","))
        } else {
            let how = how.strip_prefix("so it was split: ")?;
            let (kept, alone) = how.split_once(" stayed together behind their `slots` leader, ")?;
            let alone = alone
                .strip_suffix(" were counted alone")
                .or_else(|| alone.strip_suffix(" was counted alone"))?;
            Reopened::Split { kept: names(kept, ", "), alone: names(alone, ", ") }
        };
        let name = errno.split(" (").next().unwrap_or_default();
        Some(RefusedGroup {
            events: names(events, ","),
            errno: errno_named(name).unwrap_or_default(),
            reopened,
            multiplexed,
        })
    }
}

/// `text` split at `sep`, except inside a PMU event's `pmu/terms/`, whose terms are
/// comma-separated (`cpu/event=0xd1,umask=0x1/`).
fn names(text: &str, sep: &str) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    for part in text.split(sep) {
        if !current.is_empty() {
            current.push_str(sep);
        }
        current.push_str(part);
        // An odd number of slashes: inside `pmu/.../`.
        if current.matches('/').count().is_multiple_of(2) {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The errno `name` spells ([`tmetric_runtime::Errno::name`]: `EINVAL`, or `errno N`).
fn errno_named(name: &str) -> Option<i32> {
    match name.strip_prefix("errno ") {
        Some(n) => n.parse().ok(),
        // `Errno::name` knows a few dozen names, all below 134 (Linux's last errno).
        None => (1..134).find(|&n| tmetric_runtime::Errno(n).name() == name),
    }
}

impl std::fmt::Display for RefusedGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the kernel refused the group {{{}}} ({}): it does not fit the counters together, ",
            self.events.join(","),
            tmetric_runtime::Errno(self.errno)
        )?;
        match &self.reopened {
            Reopened::Alone => f.write_str("so its events were counted alone")?,
            Reopened::Together(kept) => write!(f, "so it was reopened as {{{}}}", kept.join(","))?,
            Reopened::Split { kept, alone } => write!(
                f,
                "so it was split: {} stayed together behind their `slots` leader, {} {} counted alone",
                kept.join(", "),
                alone.join(", "),
                if alone.len() == 1 { "was" } else { "were" }
            )?,
        }
        if !self.multiplexed.is_empty() {
            write!(
                f,
                "; {} now read counts from different time slices (multiplexed)",
                self.multiplexed.join(", ")
            )?;
        }
        Ok(())
    }
}

/// A note on what a run printed: why rows print `<not supported>` or `<not counted>` (or are
/// left out), why a metric has no value, `nan`, or a value to treat with care, and which
/// groups the kernel refused. The
/// engine decides; the printers word it through `Display`.
#[derive(Debug, Clone, PartialEq)]
pub enum Note {
    /// Rows (event names) that share one reason.
    Rows {
        /// The rows' names, in plan order.
        rows: Vec<String>,
        /// Why.
        why: RowWhy,
    },
    /// A metric's value.
    Metric {
        /// The metric's printed name.
        metric: String,
        /// Why.
        why: MetricWhy,
    },
    /// A group the kernel refused, and where its events went.
    Group(RefusedGroup),
}

/// Why rows print as they do.
#[derive(Debug, Clone, PartialEq)]
pub enum RowWhy {
    /// None of the counted CPUs has the rows' PMU (a hybrid core type): neither printed nor
    /// called uncounted.
    OtherCpusOnly {
        /// The CPUs the rows' PMU counts on.
        cpus: Vec<u32>,
    },
    /// `<not supported>`: this machine has no such input (the resolver's reason).
    Missing(String),
    /// `<not supported>`: the kernel refused the counter.
    Refused(Refusal),
    /// `<not counted>`: the counter never ran.
    NeverRan,
    /// An `-I` interval held too few turns of tmetric's rotation for the estimate: the
    /// rows' counts were scaled by time, as perf scales them (said under `-v` only).
    ScaledByTime,
}

/// Why a metric's value needs a note.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricWhy {
    /// No value at all (the evaluation's failure, worded).
    NoValue(String),
    /// `nan`: needs these rows, which could not be counted.
    NanWithout(Vec<String>),
    /// A number computed without these rows (perf's min/max/if dropped the NaN).
    ComputedWithout(Vec<String>),
    /// Not shown: its inputs are another core type's.
    OtherCoreType,
    /// These rows never ran and read as 0.
    NeverRan(Vec<String>),
    /// A `nan` or 0 a literal, a probe or a division by a counted 0 decided (worded).
    Decided(String),
    /// A value that cannot be true (a TMA share outside 0-100 %, above its parent, a level 1
    /// that does not sum to 100 %), worded: its inputs were counted over different time.
    Impossible(String),
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::Rows { rows, why } => {
                write!(f, "{}: ", rows.join(", "))?;
                match why {
                    RowWhy::OtherCpusOnly { cpus } => write!(
                        f,
                        "not counted and not shown: none of the CPUs counted has their PMU (they count on CPUs {} only)",
                        tmetric_runtime::sysfs::format_cpu_list(cpus)
                    ),
                    RowWhy::Missing(reason) => write!(f, "<not supported>: {reason}"),
                    RowWhy::Refused(refusal) => write!(f, "<not supported>{refusal}"),
                    RowWhy::NeverRan => f.write_str(
                        "<not counted>: it never ran on a counter (its task did not run while counting: asleep, or ended before counting started; or its group never fit)",
                    ),
                    RowWhy::ScaledByTime => write!(
                        f,
                        "fewer than {} turns of the rotation counted them in this interval, so their counts are scaled by time, as perf does, not estimated: a longer -I interval gives the estimate",
                        crate::estimate::MIN_TURNS
                    ),
                }
            }
            Note::Metric { metric, why } => write!(f, "{metric}: {why}"),
            Note::Group(group) => group.fmt(f),
        }
    }
}

/// What a metric's note says after its name: `tmetric stat` puts the metric's name before
/// it, the region API puts it in parentheses after the value.
impl std::fmt::Display for MetricWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MetricWhy::NoValue(fail) => write!(f, "no value: {fail}"),
            MetricWhy::NanWithout(rows) => {
                write!(f, "nan: needs {} which could not be counted", rows.join(", "))
            }
            MetricWhy::ComputedWithout(rows) => write!(
                f,
                "computed without {}, which could not be counted (perf's rules read it as NaN and min/max/if then drop it): treat the value with care",
                rows.join(", ")
            ),
            MetricWhy::OtherCoreType => {
                f.write_str("not shown: it is for another core type's PMU than the CPUs counted")
            }
            MetricWhy::NeverRan(rows) => write!(
                f,
                "{} never ran on a counter and read as 0, so the value is not measured",
                rows.join(", ")
            ),
            MetricWhy::Decided(text) => f.write_str(text),
            MetricWhy::Impossible(text) => write!(
                f,
                "impossible: {text}; its events were counted over different time (multiplexed), so treat it with care"
            ),
        }
    }
}

/// The text of a [`Why`] for a metric whose value is `value` (NaN or 0); `zeros` names the
/// inputs and metrics that are 0 in a division by zero.
pub(crate) fn explanation(why: &Why, value: f64, zeros: &[String]) -> String {
    let shown = if value.is_nan() { "nan" } else { "0" };
    match why {
        Why::Literal(lit, held) => {
            // As the JSON spells them.
            let name = match lit {
                Literal::SmtOn => "SMT_on",
                Literal::SystemTscFreq => "SYSTEM_TSC_FREQ",
                _ => lit.name(),
            };
            let hint = match (lit, held.is_nan()) {
                (Literal::HasPmem, false) => {
                    ": this machine has no persistent memory (no ACPI NFIT table)"
                }
                (Literal::SmtOn, false) => ": SMT is off",
                (Literal::CoreWide, false) => ": SMT is on and the count is not system-wide (-a)",
                (Literal::SystemTscFreq, true) => ": /proc/cpuinfo's model name gives no `@ N GHz`",
                (Literal::Slots, true) => ": the core PMU has no caps/slots file",
                (_, true) => ": the CPU topology could not be read from sysfs",
                _ => "",
            };
            let held = if held.is_nan() { "unknown".to_string() } else { held.to_string() };
            format!("{shown} because #{name} is {held} on this machine{hint}")
        }
        Why::Probe { call, arg, value: held } => {
            let what = match (*call, held.is_nan()) {
                ("has_event", _) => {
                    format!("has_event({arg}) is false: this machine has no `{arg}` event")
                }
                (_, true) => format!("{call}({arg}) is unknown: the CPU's identifier is not known"),
                _ => format!("{call}({arg}) is false: this CPU is not {arg}"),
            };
            format!("{shown} because {what}")
        }
        Why::DivisionByZero { .. } => {
            let verb = if zeros.len() == 1 && !zeros[0].contains(", ") { "is" } else { "are" };
            format!(
                "nan (a division by zero): every input was counted, and {} {verb} 0",
                zeros.join(", ")
            )
        }
    }
}
