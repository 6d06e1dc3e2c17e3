//! Naming events: splitting `-e` lists, resolving a name to the `perf_event_attr` fields that
//! count it (software and generic hardware events, sysfs PMU events `pmu/terms/`,
//! tracepoints) or to a tool event, and explaining why the kernel refused one.

use std::fs;
use std::path::{Path, PathBuf};

use crate::sys::{Attr, Errno, TYPE_HARDWARE, TYPE_SOFTWARE, TYPE_TRACEPOINT};
use crate::sysfs::{Format, Pmu, Sysfs, SysfsError, parse_number, parse_terms};

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
    /// No software, hardware, tool or PMU event has this name.
    #[error(
        "unknown event `{name}`; expected a software event (task-clock, context-switches, \
         page-faults, ...), a hardware event (cycles, instructions, ...), duration_time, \
         `pmu/event/` or `subsystem:tracepoint`"
    )]
    Unknown {
        /// The name.
        name: String,
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

/// Values perf computes itself instead of counting (spec A6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    /// `duration_time`: wall-clock time.
    DurationTime,
    /// `user_time`: the workload's user CPU time (rusage).
    UserTime,
    /// `system_time`: the workload's system CPU time (rusage).
    SystemTime,
}

impl Tool {
    /// The event name.
    pub fn name(self) -> &'static str {
        match self {
            Tool::DurationTime => "duration_time",
            Tool::UserTime => "user_time",
            Tool::SystemTime => "system_time",
        }
    }

    /// The tool event of this name.
    pub fn from_name(name: &str) -> Option<Tool> {
        [Tool::DurationTime, Tool::UserTime, Tool::SystemTime]
            .into_iter()
            .find(|t| t.name() == name)
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

/// What an event name resolves to.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// A counter.
    Counter(CounterEvent),
    /// A tool value.
    Tool(Tool),
}

const SOFTWARE: &[(&str, u64)] = &[
    ("cpu-clock", 0),
    ("task-clock", 1),
    ("page-faults", 2),
    ("faults", 2),
    ("context-switches", 3),
    ("cs", 3),
    ("cpu-migrations", 4),
    ("migrations", 4),
    ("minor-faults", 5),
    ("major-faults", 6),
    ("alignment-faults", 7),
    ("emulation-faults", 8),
    ("dummy", 9),
    ("bpf-output", 10),
    ("cgroup-switches", 11),
];

const HARDWARE: &[(&str, u64)] = &[
    ("cpu-cycles", 0),
    ("cycles", 0),
    ("instructions", 1),
    ("cache-references", 2),
    ("cache-misses", 3),
    ("branch-instructions", 4),
    ("branches", 4),
    ("branch-misses", 5),
    ("bus-cycles", 6),
    ("stalled-cycles-frontend", 7),
    ("idle-cycles-frontend", 7),
    ("stalled-cycles-backend", 8),
    ("idle-cycles-backend", 8),
    ("ref-cycles", 9),
];

/// The `PERF_COUNT_SW_*` config of a software event name (perf's names and aliases).
pub fn software_config(name: &str) -> Option<u64> {
    SOFTWARE.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, c)| c)
}

/// The `PERF_COUNT_HW_*` config of a generic hardware event name.
pub fn hardware_config(name: &str) -> Option<u64> {
    HARDWARE.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, c)| c)
}

/// Splits an `-e` list at top-level commas: commas inside `pmu/.../` terms stay, and
/// `{a,b}` makes one group. Each returned entry is one group; an ungrouped event is a group
/// of one.
pub fn split_list(list: &str) -> Result<Vec<Vec<String>>, EventError> {
    let syntax =
        |message: &str| EventError::Syntax { text: list.to_string(), message: message.into() };
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut current = String::new();
    let mut in_group: Option<Vec<String>> = None;
    let mut slashes = 0usize;
    let mut chars = list.chars().peekable();
    let flush = |current: &mut String,
                 in_group: &mut Option<Vec<String>>,
                 groups: &mut Vec<Vec<String>>| {
        let item = current.trim().to_string();
        current.clear();
        if item.is_empty() {
            return;
        }
        match in_group {
            Some(members) => members.push(item),
            None => groups.push(vec![item]),
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '/' => {
                slashes += 1;
                current.push(c);
            }
            ',' if slashes.is_multiple_of(2) => {
                flush(&mut current, &mut in_group, &mut groups);
                slashes = 0;
            }
            '{' if slashes.is_multiple_of(2) => {
                if in_group.is_some() {
                    return Err(syntax("groups cannot nest"));
                }
                if !current.trim().is_empty() {
                    return Err(syntax("`{` must start a list item"));
                }
                in_group = Some(Vec::new());
            }
            '}' if slashes.is_multiple_of(2) => {
                flush(&mut current, &mut in_group, &mut groups);
                slashes = 0;
                let Some(members) = in_group.take() else {
                    return Err(syntax("`}` without `{`"));
                };
                if members.is_empty() {
                    return Err(syntax("an empty group `{}`"));
                }
                // `:W` (weak) is how groups are opened anyway; other group modifiers would
                // have to be spread over the members, which tmetric does not do.
                let mut suffix = String::new();
                while let Some(&next) = chars.peek() {
                    if next == ',' {
                        break;
                    }
                    suffix.push(next);
                    chars.next();
                }
                if !matches!(suffix.trim(), "" | ":W") {
                    return Err(syntax(
                        "only `:W` may follow a group; put other modifiers on each event",
                    ));
                }
                groups.push(members);
            }
            _ => current.push(c),
        }
    }
    if in_group.is_some() {
        return Err(syntax("`{` without `}`"));
    }
    if !slashes.is_multiple_of(2) {
        return Err(syntax("a `pmu/terms/` event is missing its closing `/`"));
    }
    flush(&mut current, &mut in_group, &mut groups);
    Ok(groups)
}

/// Applies perf's event modifiers: `u`, `k`, `h` keep only those modes; `G` counts only in
/// guests and `H` only in the host.
pub fn apply_modifiers(event: &str, modifiers: &str, attr: &mut Attr) -> Result<(), EventError> {
    let (mut user, mut kernel, mut hv) = (false, false, false);
    for m in modifiers.chars() {
        match m {
            'u' => user = true,
            'k' => kernel = true,
            'h' => hv = true,
            'G' => attr.exclude_host = true,
            'H' => attr.exclude_guest = true,
            'p' | 'P' => {
                return Err(EventError::Modifier {
                    event: event.into(),
                    modifier: m,
                    why: "asks for precise sampling, which counting does not use",
                });
            }
            'R' => {
                return Err(EventError::Modifier {
                    event: event.into(),
                    modifier: m,
                    why: "asks for a retire latency, which needs sampling; tmetric stat only counts",
                });
            }
            _ => {
                return Err(EventError::Modifier {
                    event: event.into(),
                    modifier: m,
                    why: "is not one of the counting modifiers u, k, h, G, H",
                });
            }
        }
    }
    if user || kernel || hv {
        attr.exclude_user = !user;
        attr.exclude_kernel = !kernel;
        attr.exclude_hv = !hv;
    }
    Ok(())
}

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

/// Resolves one event of an `-e` list (no commas outside `pmu/.../`).
pub fn resolve(text: &str, sysfs: &Sysfs) -> Result<Resolved, EventError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(EventError::Syntax { text: text.into(), message: "empty event name".into() });
    }
    if let Some((pmu, rest)) = text.split_once('/') {
        let Some((terms, modifiers)) = rest.rsplit_once('/') else {
            return Err(EventError::Syntax {
                text: text.into(),
                message: "expected `pmu/terms/` with a closing `/`".into(),
            });
        };
        let modifiers = modifiers.strip_prefix(':').unwrap_or(modifiers);
        return resolve_on_pmu(pmu, terms, modifiers, text, sysfs).map(Resolved::Counter);
    }
    let (name, modifiers) = text.split_once(':').unwrap_or((text, ""));
    if let Some(tool) = Tool::from_name(name) {
        if !modifiers.is_empty() {
            return Err(EventError::Syntax {
                text: text.into(),
                message: "tool events take no modifiers".into(),
            });
        }
        return Ok(Resolved::Tool(tool));
    }
    let known = software_config(name)
        .map(|c| counter(text, TYPE_SOFTWARE, c, EventKind::Software))
        .or_else(|| {
            hardware_config(name).map(|c| counter(text, TYPE_HARDWARE, c, EventKind::Hardware))
        });
    if let Some(mut event) = known {
        apply_modifiers(text, modifiers, &mut event.attr)?;
        return Ok(Resolved::Counter(event));
    }
    if !modifiers.is_empty() {
        // `subsystem:tracepoint`: perf's other use of `:`.
        match sysfs.tracepoint(name, modifiers) {
            Ok(id) => {
                return Ok(Resolved::Counter(counter(
                    text,
                    TYPE_TRACEPOINT,
                    id,
                    EventKind::Tracepoint,
                )));
            }
            // Not a tracepoint: it may still be an alias with modifiers (`slots:u`); if it
            // is not, say why the tracepoint is missing rather than "unknown event".
            Err(problem) => {
                return match resolve_alias(name, modifiers, text, sysfs) {
                    Err(EventError::Unknown { .. }) => {
                        Err(EventError::Tracepoint { text: text.into(), problem })
                    }
                    other => other.map(Resolved::Counter),
                };
            }
        }
    }
    resolve_alias(name, modifiers, text, sysfs).map(Resolved::Counter)
}

/// A bare name that is a sysfs alias: the core PMU's first, else the one PMU that has it.
fn resolve_alias(
    name: &str,
    modifiers: &str,
    text: &str,
    sysfs: &Sysfs,
) -> Result<CounterEvent, EventError> {
    if let Some(core) = sysfs.core_pmu() {
        let pmu = sysfs.pmu(&core)?;
        if pmu.alias(name)?.is_some() {
            return resolve_on_pmu(&core, name, modifiers, text, sysfs);
        }
    }
    let mut found = Vec::new();
    for pmu_name in sysfs.pmu_names() {
        if let Ok(pmu) = sysfs.pmu(&pmu_name)
            && pmu.alias(name)?.is_some()
        {
            found.push(pmu_name);
        }
    }
    match found.as_slice() {
        [] => Err(EventError::Unknown { name: text.to_string() }),
        [one] => resolve_on_pmu(one, name, modifiers, text, sysfs),
        many => Err(EventError::Ambiguous { name: name.to_string(), pmus: many.join(", ") }),
    }
}

fn bad_value(event: &str, term: &str, value: &str, why: impl Into<String>) -> EventError {
    EventError::BadValue {
        event: event.into(),
        term: term.into(),
        value: value.into(),
        why: why.into(),
    }
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
    let pmu = sysfs.pmu(pmu_name)?;
    let mut event = CounterEvent {
        name: display.to_string(),
        attr: Attr { type_: pmu.type_, ..Attr::default() },
        kind: EventKind::Pmu(pmu_name.to_string()),
        unit: None,
        scale: None,
        cpus: pmu.cpumask.clone(),
    };
    let mut config = [0u64; 4];
    apply_terms(&pmu, terms, display, &mut config, &mut event, true)?;
    [event.attr.config, event.attr.config1, event.attr.config2, event.attr.config3] = config;
    apply_modifiers(display, modifiers, &mut event.attr)?;
    Ok(event)
}

fn apply_terms(
    pmu: &Pmu,
    terms: &str,
    display: &str,
    config: &mut [u64; 4],
    event: &mut CounterEvent,
    aliases_allowed: bool,
) -> Result<(), EventError> {
    for term in parse_terms(terms) {
        let value_text = term.value.clone().unwrap_or_else(|| "1".into());
        if term.value.is_none()
            && aliases_allowed
            && pmu.format(&term.name).is_none()
            && let Some(alias) = pmu.alias(&term.name)?
        {
            event.unit = alias.unit.clone().or(event.unit.take());
            event.scale = alias.scale.or(event.scale);
            // An alias is written in terms of formats only; it never names another alias.
            apply_terms(pmu, &alias.terms, display, config, event, false)?;
            continue;
        }
        match term.name.as_str() {
            "name" => {
                event.name = value_text;
                continue;
            }
            // Sampling terms mean nothing to a counter; JSON encodings carry `period`.
            "period" | "freq" | "no-overwrite" | "overwrite" => continue,
            "config" | "config1" | "config2" | "config3" => {
                let word = match term.name.as_str() {
                    "config" => 0,
                    "config1" => 1,
                    "config2" => 2,
                    _ => 3,
                };
                config[word] = parse_number(&value_text).ok_or_else(|| {
                    bad_value(display, &term.name, &value_text, "is not a number")
                })?;
                continue;
            }
            _ => {}
        }
        let Some(format) = pmu.format(&term.name) else {
            let known: Vec<&str> = pmu.formats.iter().map(|f| f.name.as_str()).collect();
            let mut known = known.join(", ");
            let aliases = pmu.alias_names();
            if !aliases.is_empty() {
                known.push_str(&format!("; events: {}", aliases.join(", ")));
            }
            return Err(EventError::UnknownTerm {
                event: display.into(),
                pmu: pmu.name.clone(),
                term: term.name.clone(),
                known,
            });
        };
        let value = parse_number(&value_text).ok_or_else(|| {
            bad_value(display, &term.name, &value_text, "is not a number (decimal or 0x hex)")
        })?;
        place(format, value, config)
            .ok_or_else(|| bad_value(display, &term.name, &value_text, too_wide(format)))?;
    }
    Ok(())
}

fn place(format: &Format, value: u64, config: &mut [u64; 4]) -> Option<()> {
    format.place(value, config)
}

fn too_wide(format: &Format) -> String {
    format!("does not fit the {} bits of the `{}` format", format.bits.len(), format.name)
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
        let cpuinfo = fs::read_to_string(proc_root.join("cpuinfo")).unwrap_or_default();
        Environment {
            has_core_pmu: sysfs.core_pmu().is_some(),
            virtualized: crate::sysfs::cpuinfo_says_virtual(&cpuinfo),
            paranoid: fs::read_to_string(proc_root.join("sys/kernel/perf_event_paranoid"))
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

    #[test]
    fn lists_split_at_top_level_commas() {
        let groups =
            split_list("task-clock,cpu/event=0x3c,umask=1/u,{cs,faults}:W,msr/tsc/").unwrap();
        assert_eq!(
            groups,
            vec![
                vec!["task-clock".to_string()],
                vec!["cpu/event=0x3c,umask=1/u".to_string()],
                vec!["cs".to_string(), "faults".to_string()],
                vec!["msr/tsc/".to_string()],
            ]
        );
        assert!(split_list("{a,b").is_err());
        assert!(split_list("a}").is_err());
        assert!(split_list("cpu/event=1").is_err());
        assert!(split_list("{a}:u").is_err());
    }

    #[test]
    fn names_resolve_to_types_and_configs() {
        let sysfs = Sysfs::new("/nonexistent");
        let Resolved::Counter(cs) = resolve("cs", &sysfs).unwrap() else { panic!() };
        assert_eq!((cs.attr.type_, cs.attr.config), (TYPE_SOFTWARE, 3));
        let Resolved::Counter(cycles) = resolve("cycles:u", &sysfs).unwrap() else { panic!() };
        assert_eq!((cycles.attr.type_, cycles.attr.config), (TYPE_HARDWARE, 0));
        assert!(cycles.attr.exclude_kernel && cycles.attr.exclude_hv && !cycles.attr.exclude_user);
        assert_eq!(resolve("duration_time", &sysfs).unwrap(), Resolved::Tool(Tool::DurationTime));
        assert!(matches!(resolve("nonsense", &sysfs), Err(EventError::Unknown { .. })));
        assert!(matches!(resolve("msr/tsc/", &sysfs), Err(EventError::NoPmu { .. })));
        assert!(matches!(resolve("cycles:p", &sysfs), Err(EventError::Modifier { .. })));
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
    }
}
