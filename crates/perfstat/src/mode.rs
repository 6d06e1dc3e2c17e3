//! perf stat's output modes, one type each for every reader, writer and printer of perf's
//! output: the [`Layout`] (default, `-x SEP`, `-j`) and the [`Aggregation`] mode (`-A`,
//! `--per-*`, `--per-thread`) with perf's `enum aggr_mode` numbers, which perf.data's
//! `STAT_CONFIG` record carries, and perf's column headers for each mode.

/// perf stat's output layout: what `tmetric stat` prints and what a log was read in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// perf's default layout, for people.
    Std,
    /// `-x SEP`: one row per line, fields separated by `SEP`.
    Csv(String),
    /// `-j`: one JSON object per line.
    Json,
}

/// perf's aggregation modes (`enum aggr_mode` in `tools/perf/util/stat.h`): how counts are
/// summed over CPUs (or threads) before they print.
///
/// The declaration order is the order blocks of a log sort in; perf's numbers are
/// [`Aggregation::code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Aggregation {
    /// `-A`, `--no-aggr`, `--no-merge` (perf's `AGGR_NONE`): every CPU apart, `CPU3`.
    Cpu,
    /// `--per-core`: `S0-D0-C1`.
    Core,
    /// `--per-die`: `S0-D0`.
    Die,
    /// `--per-socket`: `S0`.
    Socket,
    /// `--per-node`: `N0`.
    Node,
    /// `--per-cluster`: `S0-D0-CLS0`.
    Cluster,
    /// `--per-cache[=L]`: `S0-D0-L3-ID0`.
    Cache,
    /// `--per-thread`: `comm-tid`.
    Thread,
    /// One total over every CPU: perf's default (`AGGR_GLOBAL`).
    Global,
}

/// Which numbering of `enum aggr_mode` a perf.data file was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numbering {
    /// perf before 6.5 (6.1's `stat.h`): no cache or cluster modes, `AGGR_CORE` 4.
    Before6_5,
    /// perf 6.8 and later (6.12's and 7.2's `stat.h`): cluster and cache before core.
    Since6_8,
    /// Unknown (no version, or 6.5 to 6.7, whose numbering the sources at hand do not
    /// show): only the codes every numbering agrees on (none, global, socket, die) are read.
    Unknown,
}

impl Numbering {
    /// The numbering of a file whose `HEADER_VERSION` says `version` (`6.1.76`,
    /// `6.12.9`); [`Numbering::Unknown`] without one.
    pub fn of_version(version: Option<&str>) -> Numbering {
        let Some(version) = version else { return Numbering::Unknown };
        // tmetric writes perf 6.12's numbering and names itself.
        if version.starts_with("tmetric") {
            return Numbering::Since6_8;
        }
        let mut parts = version.trim().split(|c: char| !c.is_ascii_digit());
        let major: Option<u32> = parts.next().and_then(|p| p.parse().ok());
        let minor: Option<u32> = parts.next().and_then(|p| p.parse().ok());
        match (major, minor) {
            (Some(major), Some(minor)) if (major, minor) < (6, 5) => Numbering::Before6_5,
            (Some(major), Some(minor)) if (major, minor) >= (6, 8) => Numbering::Since6_8,
            _ => Numbering::Unknown,
        }
    }
}

impl Aggregation {
    /// Every mode, in perf 6.12's numbering order.
    pub const ALL: [Aggregation; 9] = [
        Aggregation::Cpu,
        Aggregation::Global,
        Aggregation::Socket,
        Aggregation::Die,
        Aggregation::Cluster,
        Aggregation::Cache,
        Aggregation::Core,
        Aggregation::Thread,
        Aggregation::Node,
    ];

    /// perf 6.12's `enum aggr_mode` number, as `perf stat record` writes it into
    /// `STAT_CONFIG` (`AGGR_UNSET` is 8, never a mode).
    pub fn code(self) -> u64 {
        match self {
            Aggregation::Cpu => 0,
            Aggregation::Global => 1,
            Aggregation::Socket => 2,
            Aggregation::Die => 3,
            Aggregation::Cluster => 4,
            Aggregation::Cache => 5,
            Aggregation::Core => 6,
            Aggregation::Thread => 7,
            Aggregation::Node => 9,
        }
    }

    /// The mode numbered `code` in `numbering`; `None` for `AGGR_UNSET`, a number no mode has,
    /// or one the numbering cannot tell.
    pub fn from_code(code: u64, numbering: Numbering) -> Option<Aggregation> {
        match (code, numbering) {
            (0, _) => Some(Aggregation::Cpu),
            (1, _) => Some(Aggregation::Global),
            (2, _) => Some(Aggregation::Socket),
            (3, _) => Some(Aggregation::Die),
            (4, Numbering::Before6_5) => Some(Aggregation::Core),
            (5, Numbering::Before6_5) => Some(Aggregation::Thread),
            (7, Numbering::Before6_5) => Some(Aggregation::Node),
            (_, Numbering::Since6_8) => Aggregation::ALL.into_iter().find(|a| a.code() == code),
            _ => None,
        }
    }

    /// The flag that asks for the mode (`-A`, `--per-core`, ...; empty for the default).
    pub fn flag(self) -> &'static str {
        match self {
            Aggregation::Cpu => "-A",
            Aggregation::Core => "--per-core",
            Aggregation::Die => "--per-die",
            Aggregation::Socket => "--per-socket",
            Aggregation::Node => "--per-node",
            Aggregation::Cluster => "--per-cluster",
            Aggregation::Cache => "--per-cache",
            Aggregation::Thread => "--per-thread",
            Aggregation::Global => "",
        }
    }

    /// Whether lines print unit by unit (every event of a unit together) rather than event
    /// by event (every unit of an event together), as perf orders them.
    pub fn unit_major(self) -> bool {
        matches!(
            self,
            Aggregation::Core
                | Aggregation::Cache
                | Aggregation::Cluster
                | Aggregation::Die
                | Aggregation::Socket
                | Aggregation::Node
        )
    }

    /// perf's `aggr_header_lens`: the width of the unit column in the default layout.
    pub fn header_len(self) -> usize {
        match self {
            Aggregation::Core => 18,
            Aggregation::Cache => 22,
            Aggregation::Cluster => 20,
            Aggregation::Die => 12,
            Aggregation::Socket | Aggregation::Node | Aggregation::Cpu => 6,
            Aggregation::Thread => 16,
            Aggregation::Global => 0,
        }
    }

    /// perf's `aggr_header_std`.
    pub fn header_std(self) -> &'static str {
        match self {
            Aggregation::Core => "core",
            Aggregation::Cache => "cache",
            Aggregation::Cluster => "cluster",
            Aggregation::Die => "die",
            Aggregation::Socket => "socket",
            Aggregation::Node => "node",
            Aggregation::Cpu => "cpu",
            Aggregation::Thread => "comm-pid",
            Aggregation::Global => "",
        }
    }

    /// perf's `aggr_header_csv`, fields without their separators.
    pub fn header_csv(self) -> &'static [&'static str] {
        match self {
            Aggregation::Core => &["core", "cpus"],
            Aggregation::Cache => &["cache", "cpus"],
            Aggregation::Cluster => &["cluster", "cpus"],
            Aggregation::Die => &["die", "cpus"],
            Aggregation::Socket => &["socket", "cpus"],
            Aggregation::Cpu => &["cpu"],
            Aggregation::Thread => &["comm-pid"],
            Aggregation::Node => &["node"],
            Aggregation::Global => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf 6.12's `enum aggr_mode`: NONE, GLOBAL, SOCKET, DIE, CLUSTER, CACHE, CORE, THREAD,
    /// UNSET, NODE; perf 6.1's: NONE, GLOBAL, SOCKET, DIE, CORE, THREAD, UNSET, NODE.
    #[test]
    fn codes_are_perfs_in_each_numbering() {
        let codes: Vec<u64> = Aggregation::ALL.iter().map(|a| a.code()).collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 7, 9]);
        for a in Aggregation::ALL {
            assert_eq!(Aggregation::from_code(a.code(), Numbering::Since6_8), Some(a));
        }
        assert_eq!(Aggregation::from_code(8, Numbering::Since6_8), None, "AGGR_UNSET");
        let old = |c| Aggregation::from_code(c, Numbering::Before6_5);
        assert_eq!(old(4), Some(Aggregation::Core));
        assert_eq!(old(5), Some(Aggregation::Thread));
        assert_eq!(old(6), None, "AGGR_UNSET in 6.1");
        assert_eq!(old(7), Some(Aggregation::Node));
        assert_eq!(Aggregation::from_code(3, Numbering::Unknown), Some(Aggregation::Die));
        assert_eq!(Aggregation::from_code(6, Numbering::Unknown), None);
        assert_eq!(Numbering::of_version(Some("6.1.76")), Numbering::Before6_5);
        assert_eq!(Numbering::of_version(Some("6.12.9-tmetric")), Numbering::Since6_8);
        assert_eq!(Numbering::of_version(Some("7.2")), Numbering::Since6_8);
        assert_eq!(Numbering::of_version(Some("6.6.1")), Numbering::Unknown);
        assert_eq!(Numbering::of_version(None), Numbering::Unknown);
        assert_eq!(Numbering::of_version(Some("tmetric 0.1.0")), Numbering::Since6_8);
    }
}
