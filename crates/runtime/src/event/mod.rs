//! Naming events: perf 6.12's event grammar ([`grammar`]: `-e` lists with groups, modifiers
//! and terms, located errors), the legacy names ([`legacy`]: `cs`, `cycles`,
//! `L1-dcache-loads`, ...), resolution on a machine ([`resolve`]: sysfs aliases and formats,
//! vendor tables, hybrid core PMUs, `--cputype`, perf's regrouping), and why the kernel
//! refused an event ([`Environment::explain`]).
//!
//! [`Resolver`] is the one entry point for user event text: `tmetric stat`/`record`'s `-e`,
//! the region API's items, metric `has_event()` probes, and (through [`legacy::legacy`]) the
//! readers of perf's output that must see `cs` and `context-switches` as one event.

use std::path::{Path, PathBuf};

use crate::sys::{Attr, Errno};
use crate::sysfs::{Sysfs, SysfsError};

pub mod grammar;
pub mod legacy;
pub mod resolve;

pub use grammar::Span;
pub use legacy::{DETAILED, Legacy, hardware_config, legacy, legacy_name, software_config};
pub use resolve::{
    EventList, EventTables, ListEvent, ListGroup, PmuFacts, Resolver, TableEvent, Topdown,
    UncoreBox,
};

/// Errors naming an event.
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The text is not an event string.
    #[error("event `{text}`: {message}")]
    Syntax {
        /// The event text.
        text: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An error at a place of an event list: the error, then the list with a caret under the
    /// place.
    #[error("{}\n{}", located_message(error), grammar::caret(list, span))]
    Located {
        /// The whole list as given.
        list: String,
        /// The bad spot.
        span: Span,
        /// What is wrong there.
        error: Box<EventError>,
    },
    /// No software, hardware, tool or PMU event has this name.
    #[error(
        "unknown event `{name}`; expected a perf event (task-clock, cs, cycles, instructions, \
         L1-dcache-loads, ...), {}, `pmu/event=...,umask=.../`, a raw `rNNNN`, a tool event \
         (duration_time) or `subsystem:tracepoint`",
        if *tables { "a vendor event of this CPU (`tmetric list events`), a sysfs event of a PMU" } else { "a sysfs event of a PMU" }
    )]
    Unknown {
        /// The name.
        name: String,
        /// Vendor tables were searched too.
        tables: bool,
    },
    /// The event exists, but not on the PMU `--cputype` chose.
    #[error(
        "event `{name}` is not an event of `{filter}`, the PMU --cputype chose; it is on {pmus}"
    )]
    Filtered {
        /// The name.
        name: String,
        /// The PMU of `--cputype`.
        filter: String,
        /// The PMUs that have it.
        pmus: String,
    },
    /// `head/terms/` whose head is neither a PMU nor an event.
    #[error(
        "`{name}` is neither a PMU (see {}) nor an event of one; expected `pmu/terms/` or `event/terms/`",
        dir.display()
    )]
    NoPmuOrEvent {
        /// The head.
        name: String,
        /// Where PMUs were looked for.
        dir: PathBuf,
    },
    /// A term inside an event alias failed.
    #[error("event `{alias}` (`{terms}`): {error}")]
    InAlias {
        /// The alias name.
        alias: String,
        /// Its terms.
        terms: String,
        /// What failed.
        error: Box<EventError>,
    },
    /// `subsystem:tracepoint` whose id cannot be read.
    #[error("tracepoint `{text}`: {problem}")]
    Tracepoint {
        /// The event text.
        text: String,
        /// Why there is no id.
        problem: crate::sysfs::TracefsProblem,
    },
    /// The event names a PMU sysfs does not have.
    #[error("no PMU `{pmu}` in {}", dir.display())]
    NoPmu {
        /// The PMU name.
        pmu: String,
        /// Where PMUs were looked for.
        dir: PathBuf,
    },
    /// A bare name exists as an alias on several PMUs.
    #[error("event `{name}` exists on several PMUs ({pmus}); name one, as `pmu/{name}/`")]
    Ambiguous {
        /// The name.
        name: String,
        /// The PMUs, comma-separated.
        pmus: String,
    },
    /// A term the PMU has no format for.
    #[error("event `{event}`: PMU `{pmu}` has no term `{term}`; its terms are: {known}")]
    UnknownTerm {
        /// The event text.
        event: String,
        /// The PMU.
        pmu: String,
        /// The term.
        term: String,
        /// The PMU's format terms, comma-separated.
        known: String,
    },
    /// A term value that is not a number, or does not fit its format.
    #[error("event `{event}`: {term}={value} {why}")]
    BadValue {
        /// The event text.
        event: String,
        /// The term.
        term: String,
        /// The value text.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// An event modifier tmetric does not count with.
    #[error("event `{event}`: modifier `{modifier}` {why}")]
    Modifier {
        /// The event text.
        event: String,
        /// The modifier character.
        modifier: char,
        /// Why it is refused.
        why: &'static str,
    },
    /// Reading sysfs failed.
    #[error(transparent)]
    Sysfs(#[from] SysfsError),
}

/// The message of a located error: a syntax error's message alone (the caret shows the
/// event), anything else in full.
fn located_message(error: &EventError) -> String {
    match error {
        EventError::Syntax { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

impl EventError {
    /// The error without its location.
    pub fn inner(&self) -> &EventError {
        match self {
            EventError::Located { error, .. } => error.inner(),
            other => other,
        }
    }
}

/// Values perf computes itself instead of counting (`duration_time`, `user_time`, ...: tools/perf/util/expr.c and stat-shadow.c).
/// A user's `-e` event resolved to one (the catalogue's metric inputs name the same values as
/// `tmetric_model::catalog::Tool`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolEvent {
    /// `duration_time`: wall-clock time.
    DurationTime,
    /// `user_time`: the workload's user CPU time (rusage).
    UserTime,
    /// `system_time`: the workload's system CPU time (rusage).
    SystemTime,
    /// One of perf 7.x's tool PMU events that is a fact about the machine or the run
    /// (`num_cpus`, `smt_on`, `target_cpu`, ...): a constant perf reads when it opens the
    /// event, never a counter.
    Fact(&'static tmetric_names::ToolPmuEvent),
}

impl ToolEvent {
    /// The event name.
    pub fn name(self) -> &'static str {
        match self {
            ToolEvent::DurationTime => "duration_time",
            ToolEvent::UserTime => "user_time",
            ToolEvent::SystemTime => "system_time",
            ToolEvent::Fact(event) => event.name,
        }
    }

    /// The tool event of this name: perf 6.12's three, as its lexer spells them.
    pub fn from_name(name: &str) -> Option<ToolEvent> {
        [ToolEvent::DurationTime, ToolEvent::UserTime, ToolEvent::SystemTime]
            .into_iter()
            .find(|t| t.name() == name)
    }

    /// The event of perf 7.x's tool PMU `name` names, in any case (`NUM_CPUS`), as perf 7.x
    /// finds it: the three times, or a fact.
    pub fn on_tool_pmu(name: &str) -> Option<ToolEvent> {
        let event = tmetric_names::tool_pmu_event(name)?;
        Some(ToolEvent::from_name(event.name).unwrap_or(ToolEvent::Fact(event)))
    }
}

/// Where an event's counter comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// `PERF_TYPE_SOFTWARE`: counted by the kernel, on every machine.
    Software,
    /// `PERF_TYPE_HARDWARE`: a generic event of the core PMU.
    Hardware,
    /// An event of a sysfs PMU (the core PMU, `msr`, uncore, ...).
    Pmu(String),
    /// A tracepoint.
    Tracepoint,
}

/// An event that is counted with a counter.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterEvent {
    /// The name to print.
    pub name: String,
    /// Type, config words and exclude bits; the open flags are added when counting.
    pub attr: Attr,
    /// Where it comes from.
    pub kind: EventKind,
    /// The sysfs `.unit` of an alias.
    pub unit: Option<String>,
    /// The sysfs `.scale` of an alias.
    pub scale: Option<f64>,
    /// The PMU's `cpumask`: system-wide counting opens it on these CPUs only.
    pub cpus: Option<Vec<u32>>,
}

/// What an event name resolves to: a counter or a tool event.
#[derive(Debug, Clone, PartialEq)]
pub enum ResolvedEvent {
    /// A counter.
    Counter(CounterEvent),
    /// A tool value.
    Tool(ToolEvent),
}

impl ResolvedEvent {
    /// The printed name: the counter's, or the tool event's.
    pub fn name(&self) -> &str {
        match self {
            ResolvedEvent::Counter(c) => &c.name,
            ResolvedEvent::Tool(t) => t.name(),
        }
    }
}

/// Checks the syntax of an `-e` list without resolving a name (what can be said before a
/// machine is known).
pub fn check_syntax(list: &str) -> Result<(), EventError> {
    grammar::parse(list).map(|_| ()).map_err(|e| EventError::Located {
        list: list.to_string(),
        span: e.span,
        error: Box::new(EventError::Syntax { text: list.to_string(), message: e.message }),
    })
}

/// Resolves one event written alone (no commas outside `pmu/.../`): a legacy event without a
/// PMU type, a sysfs alias on the core PMU or on the only PMU that has it, `pmu/terms/`, a
/// tracepoint, a tool event. Lists, vendor events and hybrid expansion need a [`Resolver`].
pub fn resolve(text: &str, sysfs: &Sysfs) -> Result<ResolvedEvent, EventError> {
    Resolver::new(sysfs).single(text)
}

/// Resolves `pmu/terms/modifiers`: `terms` are `term=value` pairs placed by the PMU's
/// `format/*` files, aliases from its `events/*`, raw `config*=` words, and `name=` for the
/// printed name. `display` is the name to print unless a `name=` term says otherwise.
pub fn resolve_on_pmu(
    pmu_name: &str,
    terms: &str,
    modifiers: &str,
    display: &str,
    sysfs: &Sysfs,
) -> Result<CounterEvent, EventError> {
    if !sysfs.has_pmu(pmu_name) {
        return Err(EventError::NoPmu { pmu: pmu_name.to_string(), dir: sysfs.pmu_devices() });
    }
    Resolver::new(sysfs).on_pmu(pmu_name, terms, modifiers, display)
}

/// One uncore box of an event a PMU name without its box number opened
/// ([`resolve_on_boxes`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BoxEvent {
    /// The event on this box, named `display`.
    pub event: CounterEvent,
    /// The name perf prints for this box alone under `-A`/`--no-merge`
    /// (`UNC_M_CAS_COUNT.RD [uncore_imc_0]`, `uncore_imc_0/event=0x5/`).
    pub name: String,
}

/// [`resolve_on_pmu`], where `pmu_name` may also name the numbered boxes of an uncore PMU
/// without the number (`uncore_cha` or `cha` for `uncore_cha_0`, `uncore_cha_1`, ...; `imc_0`
/// for `uncore_imc_0`), as perf matches a metric's event to every box and merges their
/// counts: the event on each box, in perf's PMU order. A PMU of that exact name is the only
/// one; a name that matches nothing is [`EventError::NoPmu`].
pub fn resolve_on_boxes(
    pmu_name: &str,
    terms: &str,
    modifiers: &str,
    display: &str,
    sysfs: &Sysfs,
) -> Result<Vec<BoxEvent>, EventError> {
    if sysfs.has_pmu(pmu_name) {
        let event = resolve_on_pmu(pmu_name, terms, modifiers, display, sysfs)?;
        return Ok(vec![BoxEvent { name: event.name.clone(), event }]);
    }
    let resolver = Resolver::new(sysfs);
    let boxes = resolver.uncore_boxes(pmu_name);
    if boxes.is_empty() {
        return Err(EventError::NoPmu { pmu: pmu_name.to_string(), dir: sysfs.pmu_devices() });
    }
    let many = boxes.len() > 1;
    boxes
        .iter()
        .map(|p| {
            let event = resolver.on_pmu(p, terms, modifiers, display)?;
            let name = if many { resolve::box_name(display, p) } else { display.to_string() };
            Ok(BoxEvent { event, name })
        })
        .collect()
}

/// Facts that decide how an open error is explained.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Environment {
    /// sysfs has a core PMU (`cpu`, `cpu_core`, `armv*`).
    pub has_core_pmu: bool,
    /// `/proc/cpuinfo` has the `hypervisor` flag.
    pub virtualized: bool,
    /// `/proc/sys/kernel/perf_event_paranoid`.
    pub paranoid: Option<i32>,
}

impl Environment {
    /// Reads the facts from a sysfs tree and a procfs root.
    pub fn probe(sysfs: &Sysfs, proc_root: &Path) -> Environment {
        let cpuinfo = crate::input::read_sysfs(proc_root.join("cpuinfo")).unwrap_or_default();
        Environment::with_cpuinfo(sysfs, proc_root, &cpuinfo)
    }

    /// [`Environment::probe`] with `/proc/cpuinfo`'s text already read.
    pub fn with_cpuinfo(sysfs: &Sysfs, proc_root: &Path, cpuinfo: &str) -> Environment {
        Environment {
            has_core_pmu: sysfs.core_pmu().is_some(),
            virtualized: crate::sysfs::cpuinfo_says_virtual(cpuinfo),
            paranoid: crate::input::read_sysfs(proc_root.join("sys/kernel/perf_event_paranoid"))
                .ok()
                .and_then(|t| t.trim().parse().ok()),
        }
    }

    /// Why a hardware event cannot be counted when there is no core PMU.
    pub fn no_hardware_pmu(&self) -> &'static str {
        if self.virtualized {
            "no hardware PMU on this machine (PMU not available due to virtualization: the \
             hypervisor exposes no virtual PMU)"
        } else {
            "no hardware PMU on this machine (the kernel has no PMU driver for this CPU)"
        }
    }

    /// Why the kernel refused to open `event` with `errno`: the errno name and a hint.
    pub fn explain(&self, errno: Errno, event: &CounterEvent) -> String {
        let core_pmu_event = match &event.kind {
            EventKind::Hardware => true,
            EventKind::Pmu(pmu) => {
                pmu == "cpu" || pmu.starts_with("cpu_") || pmu.starts_with("armv")
            }
            _ => false,
        } || event.attr.type_ == crate::sys::TYPE_HW_CACHE
            || event.attr.type_ == crate::sys::TYPE_RAW;
        let hint = match errno.0 {
            libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV
                if core_pmu_event && !self.has_core_pmu =>
            {
                self.no_hardware_pmu().to_string()
            }
            libc::ENOENT => "the kernel or the PMU does not implement this event".into(),
            libc::EOPNOTSUPP => "the PMU does not support this event or counting mode".into(),
            libc::ENODEV => "the CPU is offline or the PMU cannot count there".into(),
            libc::EINVAL if event.attr.precise_ip > 0 && event.attr.sample_period == 0 => {
                "a precise event (`:p`) only samples, and the kernel refuses to count one: drop \
                 the `p` modifier to count it"
                    .into()
            }
            libc::EINVAL
                if core_pmu_event
                    && event.attr.type_ == crate::sys::TYPE_RAW
                    && resolve::topdown_of_config(event.attr.config) == Some(Topdown::Metric) =>
            {
                format!(
                    "a topdown metric event is counted only in a group led by `slots` (write \
                     `{{slots,{}}}`), without exclude modifiers",
                    event.name
                )
            }
            libc::EINVAL => "the PMU rejected the attributes (a config value out of range, \
                             exclude modifiers on a PMU without them, or a group that does not fit)"
                .into(),
            libc::EACCES | libc::EPERM => format!(
                "not permitted (perf_event_paranoid is {}): run as root or lower \
                 /proc/sys/kernel/perf_event_paranoid",
                self.paranoid.map_or_else(|| "unknown".to_string(), |p| p.to_string())
            ),
            libc::EMFILE => "too many open files: raise the limit with `ulimit -n`".into(),
            libc::EBUSY => "the PMU is in use by another tool".into(),
            libc::ENXIO => "an MSR the event needs cannot be accessed (common in VMs)".into(),
            libc::ENOSYS => "the kernel has no perf_event_open (CONFIG_PERF_EVENTS off or a \
                             seccomp filter)"
                .into(),
            _ => errno.text(),
        };
        format!("{}: {hint}", errno.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{TYPE_HARDWARE, TYPE_SOFTWARE};

    fn counter(name: &str, type_: u32, config: u64, kind: EventKind) -> CounterEvent {
        CounterEvent {
            name: name.to_string(),
            attr: Attr { type_, config, ..Attr::default() },
            kind,
            unit: None,
            scale: None,
            cpus: None,
        }
    }

    #[test]
    fn names_resolve_to_types_and_configs() {
        let sysfs = Sysfs::new("/nonexistent");
        let ResolvedEvent::Counter(cs) = resolve("cs", &sysfs).unwrap() else { panic!() };
        assert_eq!((cs.attr.type_, cs.attr.config), (TYPE_SOFTWARE, 3));
        let ResolvedEvent::Counter(cycles) = resolve("cycles:u", &sysfs).unwrap() else { panic!() };
        assert_eq!((cycles.attr.type_, cycles.attr.config), (TYPE_HARDWARE, 0));
        assert!(cycles.attr.exclude_kernel && cycles.attr.exclude_hv && !cycles.attr.exclude_user);
        assert!(
            cycles.attr.exclude_guest,
            "perf's `u` also excludes guests when not in guest mode"
        );
        assert_eq!(
            resolve("duration_time", &sysfs).unwrap(),
            ResolvedEvent::Tool(ToolEvent::DurationTime)
        );
        assert!(matches!(resolve("nonsense", &sysfs), Err(EventError::Unknown { .. })));
        assert!(matches!(resolve("msr/tsc/", &sysfs), Err(EventError::NoPmu { .. })));
        let ResolvedEvent::Counter(pp) = resolve("cycles:pp", &sysfs).unwrap() else { panic!() };
        assert_eq!(pp.attr.precise_ip, 2);
        assert!(matches!(resolve("cycles:R", &sysfs), Err(EventError::Modifier { .. })));
        let ResolvedEvent::Counter(raw) = resolve("r100003c", &sysfs).unwrap() else { panic!() };
        assert_eq!((raw.attr.type_, raw.attr.config), (crate::sys::TYPE_RAW, 0x100003c));
        let ResolvedEvent::Counter(l1) = resolve("L1-dcache-load-misses:k", &sysfs).unwrap() else {
            panic!()
        };
        assert_eq!((l1.attr.type_, l1.attr.config), (crate::sys::TYPE_HW_CACHE, 1 << 16));
        assert!(l1.attr.exclude_user && !l1.attr.exclude_kernel);
    }

    #[test]
    fn list_errors_point_at_the_bad_spot() {
        let err = check_syntax("cycles,instructions:uu").unwrap_err().to_string();
        assert!(err.contains("duplicate modifier `u`"), "{err}");
        assert!(err.ends_with("  cycles,instructions:uu\n                       ^"), "{err}");
    }

    #[test]
    fn explanations_name_the_errno() {
        let env = Environment { has_core_pmu: false, virtualized: true, paranoid: Some(2) };
        let cycles = counter("cycles", TYPE_HARDWARE, 0, EventKind::Hardware);
        let text = env.explain(Errno(libc::ENOENT), &cycles);
        assert!(text.starts_with("ENOENT: no hardware PMU"), "{text}");
        assert!(text.contains("virtualization"), "{text}");
        let cs = counter("cs", TYPE_SOFTWARE, 3, EventKind::Software);
        let text = env.explain(Errno(libc::EACCES), &cs);
        assert!(text.starts_with("EACCES: not permitted (perf_event_paranoid is 2)"), "{text}");
        let env = Environment { has_core_pmu: true, ..env };
        let mut retiring = counter("topdown-retiring", 4, 0x8000, EventKind::Pmu("cpu".into()));
        let text = env.explain(Errno(libc::EINVAL), &retiring);
        assert!(text.contains("`slots`") && !text.contains("out of range"), "{text}");
        retiring.attr.config = 0x3c;
        retiring.attr.precise_ip = 2;
        let text = env.explain(Errno(libc::EINVAL), &retiring);
        assert!(text.contains("precise"), "{text}");
    }

    /// The tool events of a list as (event, printed name), each alone in its group.
    fn tools(resolver: &Resolver<'_>, list: &str) -> Result<Vec<(ToolEvent, String)>, EventError> {
        let parsed = resolver.list(list)?;
        Ok(parsed
            .groups
            .iter()
            .flat_map(|g| &g.events)
            .map(|e| match &e.event {
                ResolvedEvent::Tool(t) => (*t, e.tool_name.clone().unwrap()),
                other => panic!("{list}: {other:?} is not a tool event"),
            })
            .collect())
    }

    #[test]
    fn perf_7_reads_its_tool_pmu_and_6_12_refuses_it() {
        let sysfs = Sysfs::new("/nonexistent");
        let v7 = Resolver::new(&sysfs).with_tool_pmu(true);
        let fact = |name: &str| ToolEvent::Fact(tmetric_names::tool_pmu_event(name).unwrap());
        let got =
            tools(&v7, "tool/num_cpus/,smt_on,NUM_CPUS,tool/duration_time/,user_time").unwrap();
        let want = [
            (fact("num_cpus"), "tool/num_cpus/"),
            (fact("smt_on"), "smt_on"),
            (fact("num_cpus"), "NUM_CPUS"),
            (ToolEvent::DurationTime, "tool/duration_time/"),
            (ToolEvent::UserTime, "user_time"),
        ];
        let want: Vec<(ToolEvent, String)> =
            want.iter().map(|(t, n)| (*t, n.to_string())).collect();
        assert_eq!(got, want);
        assert_eq!(fact("target_cpu").name(), "target_cpu");
        // In a group with other events, perf 7.x keeps it there (it reads like software).
        let parsed = v7.list("{cs,num_cores}").unwrap();
        assert_eq!(parsed.groups.len(), 1, "{parsed:?}");
        // One of its events and nothing else, no modifiers.
        for bad in ["tool/nope/", "tool//", "tool/num_cpus,name=x/", "tool/config=6/"] {
            let err = v7.list(bad).unwrap_err();
            assert!(err.to_string().contains("expected `tool/EVENT/`"), "{bad}: {err}");
        }
        assert!(v7.list("num_cpus:u").unwrap_err().to_string().contains("no modifiers"));
        // perf builds `slots` for arm64 only, `system_tsc_freq` for x86 only.
        if cfg!(target_arch = "x86_64") {
            assert!(matches!(v7.single("slots"), Err(EventError::Unknown { .. })));
            assert_eq!(tools(&v7, "system_tsc_freq").unwrap()[0].0, fact("system_tsc_freq"));
        }

        // perf 6.12: its three lower-case tool events, no tool PMU.
        let v6 = Resolver::new(&sysfs);
        assert_eq!(
            tools(&v6, "duration_time,system_time").unwrap(),
            [
                (ToolEvent::DurationTime, "duration_time".to_string()),
                (ToolEvent::SystemTime, "system_time".to_string())
            ]
        );
        assert!(matches!(v6.single("num_cpus"), Err(EventError::Unknown { .. })));
        assert!(matches!(v6.single("DURATION_TIME"), Err(EventError::Unknown { .. })));
        let err = v6.list("tool/num_cpus/").unwrap_err();
        assert!(matches!(err.inner(), EventError::NoPmuOrEvent { .. }), "{err}");
    }
}
