//! The `#literals` a front end evaluates with when no machine is at hand (`eval`, `report`,
//! exporters reading logs): each value with where it came from, and perf's defaults and
//! derivations for what nobody gave. A value is never a silent guess: its source says whether
//! it was given, defaulted, derived, inferred from a log or documented by the vendor.

use tmetric_model::Literal;

/// Two different values given for one literal, each named by what gave it (`--cpus`,
/// `--literal num_cpus`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("#{} is given twice with different values ({first} and {second})", literal.name())]
pub struct Conflict {
    /// The literal.
    pub literal: Literal,
    /// What gave the first value.
    pub first: String,
    /// What gave the other.
    pub second: String,
}

/// A literal by name, with or without `#`, ignoring case (unlike perf's lexer, because these
/// names come from users and files, not from the vendor JSON).
pub fn literal_named(name: &str) -> Option<Literal> {
    let name = name.trim().trim_start_matches('#');
    Literal::ALL.into_iter().find(|lit| lit.name().eq_ignore_ascii_case(name))
}

/// Every literal name, comma-separated, for messages.
pub fn literal_names() -> String {
    Literal::ALL.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ")
}

/// Where a literal's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiteralSource {
    /// Given on the command line (or by an API caller).
    Flag,
    /// Given by the input file (a counts file's `literals`).
    File,
    /// A stated default (`#smt_on=1`).
    Default,
    /// Derived from another literal (`#core_wide` from `#smt_on`).
    Derived(Literal),
    /// The one value that reproduces this metric as perf printed it on this line of a log.
    Inferred(&'static str, usize),
    /// The value the vendor documents for this CPU.
    Vendor(&'static str),
    /// Nobody knows: metrics that read it fail and say so.
    Unknown,
    /// `#core_wide` as perf's `core_wide()` gives it from `#smt_on` and this: whether the
    /// counts were counted system-wide.
    Counting(Counting),
}

/// Whether the counts were counted system-wide (perf stat's `-a`, its `system_wide`), which
/// `#core_wide` needs ([`crate::host::core_wide`]), as the input says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Counting {
    /// With `-a`, as `said` says (`the log's header 'system wide'`).
    SystemWide(&'static str),
    /// Without `-a` (a command, a process, threads, or `-C` alone), as `said` says.
    NotSystemWide(&'static str),
    /// Nothing says: a count per task, perf's target for a command, is assumed.
    #[default]
    Unsaid,
}

impl LiteralSource {
    /// Whether a log may correct the value: it was not given, only assumed.
    pub fn is_assumed(self) -> bool {
        matches!(
            self,
            LiteralSource::Unknown
                | LiteralSource::Default
                | LiteralSource::Derived(_)
                | LiteralSource::Counting(Counting::Unsaid)
        )
    }
}

/// Every literal's value (NaN when unknown) and where it came from.
#[derive(Debug, Clone)]
pub struct Literals {
    /// By [`Literal::index`].
    pub values: [f64; Literal::COUNT],
    /// By [`Literal::index`].
    pub sources: [LiteralSource; Literal::COUNT],
    /// Whether the counts were counted system-wide, for `#core_wide`.
    pub counting: Counting,
}

impl Default for Literals {
    fn default() -> Literals {
        Literals {
            values: [f64::NAN; Literal::COUNT],
            sources: [LiteralSource::Unknown; Literal::COUNT],
            counting: Counting::Unsaid,
        }
    }
}

impl Literals {
    /// The value of `literal` (NaN when unknown).
    pub fn get(&self, literal: Literal) -> f64 {
        self.values[literal.index()]
    }

    /// Where the value of `literal` came from.
    pub fn source(&self, literal: Literal) -> LiteralSource {
        self.sources[literal.index()]
    }

    /// Sets `literal`.
    pub fn set(&mut self, literal: Literal, value: f64, source: LiteralSource) {
        self.values[literal.index()] = value;
        self.sources[literal.index()] = source;
    }

    /// Every literal's value: `given` (each value with what gave it, such as a flag) wins over
    /// `file` (a counts file's `literals`), and perf's defaults fill the rest
    /// ([`Literals::apply_defaults`]). One literal given twice with different values is a
    /// [`Conflict`].
    pub fn resolve(
        given: &[(Literal, f64, String)],
        file: &[(Literal, f64)],
    ) -> Result<Literals, Conflict> {
        let mut literals = Literals::default();
        let mut set_by: Vec<Option<&str>> = vec![None; Literal::COUNT];
        for (literal, value, name) in given {
            let i = literal.index();
            if let Some(previous) = set_by[i]
                && literals.get(*literal).to_bits() != value.to_bits()
            {
                return Err(Conflict {
                    literal: *literal,
                    first: previous.to_string(),
                    second: name.clone(),
                });
            }
            literals.set(*literal, *value, LiteralSource::Flag);
            set_by[i] = Some(name);
        }
        for &(literal, value) in file {
            if matches!(literals.source(literal), LiteralSource::Unknown | LiteralSource::File) {
                literals.set(literal, value, LiteralSource::File);
            }
        }
        literals.apply_defaults();
        Ok(literals)
    }

    /// Sets `literal` only when it is unknown and `value` is known.
    pub fn default_to(&mut self, literal: Literal, value: f64, source: LiteralSource) {
        if self.source(literal) == LiteralSource::Unknown && !value.is_nan() {
            self.set(literal, value, source);
        }
    }

    /// Says how the counts were counted and derives `#core_wide` again from it.
    pub fn set_counting(&mut self, counting: Counting) {
        self.counting = counting;
        self.derive_core_wide();
    }

    /// `#core_wide` as perf's `core_wide()` gives it (the one definition,
    /// [`crate::host::core_wide`]): 1 only for a system-wide count of whole cores, which it is
    /// without SMT; a count per task is never core-wide. Leaves a value a flag, the file, a
    /// log's printed values or the vendor gave; an unknown `#smt_on` leaves it unknown.
    pub fn derive_core_wide(&mut self) {
        let source = self.source(Literal::CoreWide);
        if !source.is_assumed() && !matches!(source, LiteralSource::Counting(_)) {
            return;
        }
        let smt = self.get(Literal::SmtOn);
        if smt.is_nan() {
            return;
        }
        let system_wide = matches!(self.counting, Counting::SystemWide(_));
        let whole = crate::host::core_wide(system_wide, smt != 0.0, None, &[]);
        self.set(
            Literal::CoreWide,
            f64::from(u8::from(whole)),
            LiteralSource::Counting(self.counting),
        );
    }

    /// Fills what nobody gave with perf's defaults and what follows from the rest:
    /// `#smt_on=1`, `#has_pmem=0`, `#core_wide` from `#smt_on` and [`Literals::counting`]
    /// ([`Literals::derive_core_wide`]), `#num_cpus` and
    /// `#num_cpus_online` from each other, `#num_cores` from the online CPUs without SMT,
    /// `#num_dies` from `#num_packages`.
    pub fn apply_defaults(&mut self) {
        use LiteralSource::{Default, Derived};
        self.default_to(Literal::SmtOn, 1.0, Default);
        self.default_to(Literal::HasPmem, 0.0, Default);
        // A count per task unless said otherwise (perf's default target).
        self.default_to(Literal::TargetCpu, 0.0, Default);
        self.derive_core_wide();
        let online = self.get(Literal::NumCpusOnline);
        let all = self.get(Literal::NumCpus);
        self.default_to(Literal::NumCpusOnline, all, Derived(Literal::NumCpus));
        self.default_to(Literal::NumCpus, online, Derived(Literal::NumCpusOnline));
        if self.get(Literal::SmtOn) == 0.0 {
            let online = self.get(Literal::NumCpusOnline);
            self.default_to(Literal::NumCores, online, Derived(Literal::NumCpusOnline));
        }
        let packages = self.get(Literal::NumPackages);
        self.default_to(Literal::NumDies, packages, Derived(Literal::NumPackages));
    }
}
