//! The `#literal` names perf 6.12 knows, and their matching rules.

/// A machine fact an expression can name with `#`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Literal {
    /// `#num_cpus`: highest present CPU number + 1.
    NumCpus,
    /// `#num_cpus_online`.
    NumCpusOnline,
    /// `#num_cores`: distinct core sibling sets.
    NumCores,
    /// `#num_dies`.
    NumDies,
    /// `#num_packages`.
    NumPackages,
    /// `#smt_on`: 1 when SMT is active.
    SmtOn,
    /// `#core_wide`: 1 when counting covers whole cores.
    CoreWide,
    /// `#slots`: the core PMU's `caps/slots`.
    Slots,
    /// `#has_pmem`.
    HasPmem,
    /// `#system_tsc_freq`, in Hz.
    SystemTscFreq,
    /// `#target_cpu` (perf 7.x): 1 when the count is per CPU (`-a`, `-C`), not per task, so
    /// that perf 7.x's common metrics divide by `cpu-clock` rather than `task-clock`.
    TargetCpu,
}

impl Literal {
    /// Every literal, in a fixed order (the order of machine literal vectors).
    pub const ALL: [Literal; 11] = [
        Literal::NumCpus,
        Literal::NumCpusOnline,
        Literal::NumCores,
        Literal::NumDies,
        Literal::NumPackages,
        Literal::SmtOn,
        Literal::CoreWide,
        Literal::Slots,
        Literal::HasPmem,
        Literal::SystemTscFreq,
        Literal::TargetCpu,
    ];

    /// The canonical name, without `#`.
    pub fn name(self) -> &'static str {
        match self {
            Literal::NumCpus => "num_cpus",
            Literal::NumCpusOnline => "num_cpus_online",
            Literal::NumCores => "num_cores",
            Literal::NumDies => "num_dies",
            Literal::NumPackages => "num_packages",
            Literal::SmtOn => "smt_on",
            Literal::CoreWide => "core_wide",
            Literal::Slots => "slots",
            Literal::HasPmem => "has_pmem",
            Literal::SystemTscFreq => "system_tsc_freq",
            Literal::TargetCpu => "target_cpu",
        }
    }

    /// Looks a name up as perf's lexer does: case-sensitive, except `smt_on` and
    /// `system_tsc_freq` which the JSON spells `#SMT_on` and `#SYSTEM_TSC_FREQ`.
    pub fn from_name(name: &str) -> Option<Literal> {
        Literal::ALL.into_iter().find(|lit| match lit {
            Literal::SmtOn | Literal::SystemTscFreq => lit.name().eq_ignore_ascii_case(name),
            _ => lit.name() == name,
        })
    }

    /// Position in [`Literal::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl Literal {
    /// How many literals there are.
    pub const COUNT: usize = Literal::ALL.len();
}
