//! `tmetric stat`'s flags and the rules perf 6.12 applies to them before counting.

use super::*;

/// Count events for a command (or system-wide) and print them with metrics, as perf stat does.
#[derive(Debug, Clone, clap::Args)]
#[command(
    mut_arg("color", |a| a.help("Colour metric values by their thresholds: auto (when the counts go to a terminal: standard error, unless -o names a file), always or never")),
    after_help = "Counts go to standard error, as perf's do, unless -o names a file.\n\
    Without -e or -M: perf's default events (task-clock, context-switches, cpu-migrations, \
    page-faults, cycles, instructions, branches, branch-misses) with perf's built-in metrics, \
    and the model's `Default` metric group where it has one.\n\
    Examples:\n  tmetric stat -- make -j4\n  tmetric stat -a -I 1000 -M Software\n  \
    tmetric stat -e task-clock,cs -x, -- ./bench"
)]
pub struct StatArgs {
    /// Count every task on every online CPU instead of the command and its children.
    #[arg(short = 'a', long = "all-cpus")]
    pub all_cpus: bool,
    /// Print the counts of every MS milliseconds (0: no intervals; 100 or less may cost
    /// noticeable overhead).
    #[arg(short = 'I', long = "interval-print", value_name = "MS")]
    pub interval: Option<u64>,
    /// With -I, print the totals at the end too.
    #[arg(long)]
    pub summary: bool,
    /// Events to count, comma-separated, in perf's grammar: perf's names (`cycles`, `cs`,
    /// `L1-dcache-loads`), vendor events (`INST_RETIRED.ANY`), `pmu/event/`,
    /// `pmu/term=value,.../`, raw `rNNN`, `subsystem:tracepoint`, tool events, modifiers
    /// (`:u`, `:k`, ...) and `{a,b}[:mods]` groups.
    #[arg(short = 'e', long = "event", value_name = "EVENTS")]
    pub events: Vec<String>,
    /// A filter for the tracepoints of the -e just before it, in the kernel's filter language
    /// over the tracepoint's fields (`--filter 'flags & 0x40'`, `--filter 'common_pid != 1'`);
    /// a second one joins the first with `&&`.
    #[arg(long = "filter", value_name = "FILTER")]
    pub filter: Vec<String>,
    /// Where options stand relative to each other (perf reads them in order).
    #[arg(skip)]
    pub order: Order,
    #[command(flatten)]
    pub metric: crate::args::MetricArgs,
    #[command(flatten)]
    pub out: crate::args::OutputArgs,
    #[command(flatten)]
    pub grouping: crate::args::GroupingArgs,
    /// Write the counts to FILE instead of standard error.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Count on a simulated PMU instead of this machine's (sapphirerapids, icelake,
    /// skylakex, skylakex-nosmt, alderlake, meteorlake, amdzen4, amdzen5, neoverse-n2), or on
    /// the machine a JSON file describes (as in `crates/sim/machines/`); every output then
    /// says it is simulated.
    #[arg(long, value_name = "MODEL|FILE")]
    pub pmu_sim: Option<String>,
    /// With --pmu-sim: what the simulated machine runs, a built-in workload (`default`,
    /// `phased`, `memory-bound`) or a workload JSON file (its TMA tree and other metrics'
    /// true values; see `crates/sim/src/workload.rs`). Its `kernel` object sets the simulated
    /// kernel's HZ (rotation every 1000/HZ ms) and turns on hardware's unkindness
    /// (`"realistic": true`: timer lateness, per-CPU phases, overcount, 8-bit PERF_METRICS);
    /// without it the kernel is exact and rotates every CPU in step (`-v` says which).
    #[arg(long, value_name = "NAME|FILE", requires = "pmu_sim")]
    pub pmu_sim_workload: Option<String>,
    /// Give each metric an error bar: how far multiplexing may have moved it from the value
    /// its events would give counted all the time (reads the counters every 100 ms to see
    /// how their rates vary; also with -v).
    #[arg(long)]
    pub errors: bool,
    /// Who rotates groups of events that cannot count at once: `tmetric` (the default)
    /// switches them itself at random intervals around 4 ms, so a workload whose phases
    /// repeat with the kernel's rotation period cannot bias them; `kernel` leaves it to the
    /// kernel's fixed timer, as perf does.
    #[arg(long, value_name = "WHO", default_value = "tmetric", value_parser = ["tmetric", "kernel"])]
    pub rotation: String,
    /// TopDown level 1 (or --td-level N): the model's TopdownLN metrics through a
    /// `slots`-led group; on CPUs with only the kernel's older `topdown-*` events, perf's
    /// level-1 formulas per core (needs -a). Implies --metric-only.
    #[arg(long)]
    pub topdown: bool,
    /// The TopDown level for --topdown (1 when 0 or not given).
    #[arg(long, value_name = "N", requires = "topdown")]
    pub td_level: Option<u8>,
    /// Print the metrics as the TMA tree: children under parents, nodes below their threshold
    /// hidden (see --all), the bottleneck path marked `<==` (the default for --topdown on a
    /// terminal).
    #[arg(
        long,
        conflicts_with = "no_tree",
        default_value_if("all", clap::builder::ArgPredicate::IsPresent, "true")
    )]
    pub tree: bool,
    /// With --topdown on a terminal: columns, not the tree.
    #[arg(long)]
    pub no_tree: bool,
    /// The TMA tree with every node, those below their threshold too (marked `(below)`, or
    /// dimmed on a terminal); implies --tree.
    #[arg(long, conflicts_with = "no_tree")]
    pub all: bool,
    /// Print only metrics: one column each, with a header.
    #[arg(long)]
    pub metric_only: bool,
    /// Sample the retire latency of every `:R` input in-process (Timed PEBS, a precise
    /// sampling event with the weight struct), instead of reading it as 0 as perf does
    /// without `--record-tpebs`.
    #[arg(long)]
    pub record_tpebs: bool,
    /// Which statistic of the sampled latencies the metrics use: mean, min, max, last, or p97,
    /// the mean of the lowest 97% of the samples (the highest 3% left out; not the 97th
    /// percentile).
    #[arg(long, value_name = "MODE", default_value = "mean", value_parser = ["mean", "min", "max", "last", "p97"], requires = "record_tpebs")]
    pub tpebs_mode: String,
    /// Retire latencies in cycles from a JSON file `{"EVENT": cycles, ...}`, for `:R` inputs
    /// when they are not sampled.
    #[arg(long, value_name = "FILE", conflicts_with = "record_tpebs")]
    pub retire_latency: Option<PathBuf>,
    /// Start counting MS milliseconds after the command starts (-1: start with the events
    /// disabled, for --control's `enable`); says `Events disabled` and `Events enabled`.
    #[arg(short = 'D', long = "delay", value_name = "MS", allow_negative_numbers = true)]
    pub delay: Option<i64>,
    /// With -I: print N intervals, then no more (a command runs on to its end); 0: no limit.
    #[arg(long, value_name = "N")]
    pub interval_count: Option<u64>,
    /// Run the command N times and print the mean counts with their spread (0: again and
    /// again, each run's counts as it ends, until Ctrl-C, as perf's `-r 0`).
    #[arg(short = 'r', long = "repeat", value_name = "N", default_value_t = 1, allow_hyphen_values = true, value_parser = tmetric_perfopts::rules::run_count)]
    pub repeat: u32,
    /// Count on these CPUs only (a list such as `0-3,8`); implies system-wide counting there.
    #[arg(short = 'C', long = "cpu", value_name = "CPUS")]
    pub cpu_list: Option<String>,
    /// Per CPU: no aggregation over CPUs (perf's `-A`, `--no-aggr`).
    #[arg(short = 'A', long = "no-aggr", conflicts_with_all = ["per_core", "per_socket", "per_die", "per_node", "per_cache", "per_cluster"])]
    pub no_aggr: bool,
    /// The same as -A (perf's `--no-merge`).
    #[arg(long = "no-merge", conflicts_with_all = ["per_core", "per_socket", "per_die", "per_node", "per_cache", "per_cluster"])]
    pub no_merge: bool,
    /// Aggregate per physical core.
    #[arg(long, conflicts_with_all = ["per_socket", "per_die", "per_node", "per_cache", "per_cluster"])]
    pub per_core: bool,
    /// Aggregate per die.
    #[arg(long, conflicts_with_all = ["per_socket", "per_node", "per_cache", "per_cluster"])]
    pub per_die: bool,
    /// Aggregate per socket (package).
    #[arg(long, conflicts_with_all = ["per_node", "per_cache", "per_cluster"])]
    pub per_socket: bool,
    /// Aggregate per NUMA node.
    #[arg(long, conflicts_with_all = ["per_cache", "per_cluster"])]
    pub per_node: bool,
    /// Aggregate per cache instance of this level (`L2`, `2`; default: the last level).
    #[arg(long, value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "", conflicts_with = "per_cluster")]
    pub per_cache: Option<String>,
    /// Aggregate per cluster (CPUs sharing a cluster id).
    #[arg(long)]
    pub per_cluster: bool,
    /// Count an existing process (every thread it has at the start) until it exits or
    /// Ctrl-C; with a command, while the command runs (`-p PID sleep 5`: the command is only
    /// the timer and is not counted).
    #[arg(short = 'p', long = "pid", value_name = "PID", conflicts_with = "tid")]
    pub pid: Option<i32>,
    /// Count existing threads (comma-separated ids) until they all exit or Ctrl-C; with a
    /// command, while the command runs.
    #[arg(short = 't', long = "tid", value_name = "TID", value_delimiter = ',')]
    pub tid: Vec<i32>,
    /// Per thread: one row per thread and event, `comm-tid` first, with -p or -t (the
    /// threads they have at the start), or with -a (every thread, rows that counted nothing
    /// left out).
    #[arg(long, conflicts_with_all = ["no_aggr", "per_core", "per_socket", "per_die"])]
    pub per_thread: bool,
    /// Only this core PMU: legacy and bare events open on it alone, and only its metrics
    /// (`core`, `atom`, or a PMU name such as `cpu_core`, `cpu_atom`, `cpu`), as perf's.
    #[arg(long, value_name = "TYPE")]
    pub cputype: Option<String>,
    /// Detailed run: also L1 and last-level data cache events (-dd: instruction cache and
    /// TLB events too; -ddd: L1 prefetch events too).
    #[arg(short = 'd', long = "detailed", action = clap::ArgAction::Count)]
    pub detailed: u8,
    /// Null run: count no events, print only the elapsed time.
    #[arg(short = 'n', long = "null")]
    pub null_run: bool,
    /// Print no counts, messages or warnings (useful with record).
    #[arg(short = 'q', long)]
    pub quiet: bool,
    /// Group digits with the locale's thousands separator (the default without -x).
    #[arg(short = 'B', long = "big-num", overrides_with = "no_big_num")]
    pub big_num: bool,
    /// Do not group digits.
    #[arg(long = "no-big-num", overrides_with = "big_num")]
    pub no_big_num: bool,
    /// Count every event in user mode only.
    #[arg(long, conflicts_with = "all_kernel")]
    pub all_user: bool,
    /// Count every event in kernel mode only.
    #[arg(long)]
    pub all_kernel: bool,
    /// Count the events given before it only in these cgroups (names relative to the cgroup
    /// root, comma-separated: one per event, the last repeating); system-wide only.
    #[arg(short = 'G', long = "cgroup", value_name = "NAMES", value_delimiter = ',')]
    pub cgroup: Vec<String>,
    /// Count every event once per cgroup in the list (comma-separated); system-wide only.
    #[arg(long, value_name = "NAMES", value_delimiter = ',', conflicts_with = "cgroup")]
    pub for_each_cgroup: Vec<String>,
    /// With -o: append to the file instead of replacing it (ignored without -o, as perf).
    #[arg(long)]
    pub append: bool,
    /// With -I on a terminal: clear the screen before each interval.
    #[arg(long)]
    pub interval_clear: bool,
    /// Stop the command (SIGTERM) and print the counts after MS milliseconds (at least 10).
    #[arg(long, value_name = "MS")]
    pub timeout: Option<u64>,
    /// With --summary and -x: no `summary` first field on the totals' lines.
    #[arg(long, overrides_with = "csv_summary")]
    pub no_csv_summary: bool,
    /// perf's negation of --no-csv-summary: the `summary` field again, also over perf's
    /// config key `stat.no-csv-summary` (options win over the config, as in perf).
    #[arg(long, overrides_with = "no_csv_summary", hide = true)]
    pub csv_summary: bool,
    /// With -r: print each run's elapsed time in a table.
    #[arg(long)]
    pub table: bool,
    /// tmetric's additions to perf's layouts: each metric's name beside perf's label, values
    /// at full precision, and a metric's unit and name as separate CSV fields and JSON keys
    /// (`metric-name`).
    #[arg(long)]
    pub full_metrics: bool,
    /// Say how the events were grouped and why, before counting.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// perf's options of how a run is made: `--log-fd`, `--pre`/`--post`, `-S`, `-i`,
    /// `--no-scale`, `-T`, `--smi-cost`.
    #[command(flatten)]
    pub perf: tmetric_perfopts::run::PerfOptions,
    /// The command to run and count (after `--` when it has options of its own).
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
    /// Take commands while counting, as perf does: `fd:CTL[,ACK]` (descriptor numbers the
    /// shell opened) or `fifo:CTL[,ACK]` (FIFOs made with mkfifo). Commands, one per line:
    /// `enable`, `disable`, `enable NAME`, `disable NAME`, `ping`, `stop`, `snapshot`,
    /// `evlist`; each but `snapshot` is answered with `ack\n` on ACK. With -D -1 counting
    /// starts at the first `enable`.
    #[arg(long, value_name = "fd:CTL[,ACK]|fifo:CTL[,ACK]")]
    pub control: Option<String>,
}

/// What the order of the options says, as perf reads them one by one: which `-e` list each
/// `--filter` follows, and whether `-G` or `--cputype` stand where perf refuses them.
#[derive(Debug, Clone, Default)]
pub struct Order {
    /// Per `--filter`, in order: the index of the `-e` list it follows (`None` before any).
    pub filters: Vec<(Option<usize>, String)>,
    /// `-G` came before any `-e` (perf: "must define events before cgroups").
    pub cgroup_before_events: bool,
    /// `--cputype` came after an `-e` (perf: "Must define cputype before events/metrics").
    pub cputype_after_events: bool,
}

impl StatArgs {
    /// Reads [`Order`] from clap's matches of this command.
    pub fn read_order(&mut self, matches: &clap::ArgMatches) {
        let at = |id: &str| -> Vec<usize> {
            matches.indices_of(id).map(Iterator::collect).unwrap_or_default()
        };
        let events = at("events");
        let lists_before = |index: usize| events.iter().filter(|&&e| e < index).count();
        self.order.filters = at("filter")
            .into_iter()
            .zip(self.filter.iter())
            .map(|(index, filter)| (lists_before(index).checked_sub(1), filter.clone()))
            .collect();
        self.order.cgroup_before_events =
            at("cgroup").first().is_some_and(|&g| events.first().is_none_or(|&e| g < e));
        self.order.cputype_after_events =
            at("cputype").first().is_some_and(|&c| events.first().is_some_and(|&e| e < c));
    }
}

/// Flag checks made before anything runs: empty `-e`/`-M` lists and an unknown `--model`
/// are usage errors even where nothing would read them.
pub(super) fn validate_flags(args: &StatArgs) -> anyhow::Result<()> {
    if args.repeat > 1 && args.command.is_empty() {
        bail!(
            "-r {} repeats a command and prints the mean of its counts: give a command",
            args.repeat
        );
    }
    for list in &args.events {
        if list.chars().all(|c| c == ',' || c.is_whitespace()) {
            bail!(
                "-e `{}` names no event; give a comma-separated list such as `-e task-clock,page-faults` (`tmetric list events` lists them)",
                list.escape_debug()
            );
        }
        tmetric_runtime::event::check_syntax(list).with_context(|| format!("-e {list}"))?;
    }
    args.metric.check()?;
    if let Some(name) = &args.metric.model {
        tmetric_engine::models::find_model(name).context("--model")?;
    }
    Ok(())
}

/// `--per-thread`'s rules, perf 6.12's: only with -p, -t or -a (not -C), because a
/// command's threads do not exist yet when counting starts and -C counts CPUs, not threads;
/// and not with the metric-only layouts, which have no thread column.
pub(super) fn check_per_thread(args: &StatArgs, attach: bool) -> anyhow::Result<()> {
    if !args.per_thread {
        return Ok(());
    }
    if !(attach || (args.all_cpus && args.cpu_list.is_none())) {
        bail!(
            "The --per-thread option is only available when monitoring via -p -t -a options: a command's threads do not exist yet when counting starts and -C counts CPUs, so start the command first and give -p PID"
        );
    }
    if args.metric_only {
        bail!("--metric-only is not supported with --per-thread");
    }
    if args.topdown {
        bail!("--topdown is not supported with --per-thread: it prints metric-only columns");
    }
    if args.tree {
        bail!("--tree is not supported with --per-thread");
    }
    Ok(())
}

/// perf's checks of flags that go together, with perf's messages (and what to do).
pub(super) fn check_perf_flags(args: &StatArgs) -> anyhow::Result<()> {
    if args.metric_only && args.repeat > 1 {
        bail!("--metric-only is not supported with -r");
    }
    if args.table && args.repeat <= 1 {
        bail!("--table is only supported with -r");
    }
    if args.big_num && args.out.separator.is_some() {
        bail!("-B option not supported with -x");
    }
    if let Some(ms) = args.timeout {
        if ms < 10 {
            bail!("timeout must be >= 10ms.");
        }
        if args.interval.is_some() {
            bail!("timeout option is not supported with interval-print.");
        }
        if ms < 100 {
            warn(
                "timeout < 100ms. The overhead percentage could be high in some cases. Please proceed with caution.",
            );
        }
    }
    if args.order.cgroup_before_events {
        bail!(
            "must define events before cgroups: -G applies to the -e events given before it, so put -e EVENTS first"
        );
    }
    if args.order.cputype_after_events {
        bail!(
            "Must define cputype before events/metrics: --cputype applies to the -e events given after it, so put it first"
        );
    }
    if args.order.filters.iter().any(|(list, _)| list.is_none()) {
        bail!("{}", tmetric_engine::FilterError::NoEvent);
    }
    for (flag, names) in [("-G", &args.cgroup), ("--for-each-cgroup", &args.for_each_cgroup)] {
        for name in names.iter().filter(|n| !n.is_empty()) {
            check_cgroup(flag, name)?;
        }
    }
    if let Some(level) = &args.per_cache
        && !level.is_empty()
    {
        check_cache_level(level)?;
    }
    Ok(())
}

/// `-a` or `-C`: counting CPUs rather than a task.
pub(super) fn system_wide(args: &StatArgs) -> bool {
    args.all_cpus || args.cpu_list.is_some()
}

/// perf's aggregation mode for the flags: the first of these that is given.
pub fn aggregation(args: &StatArgs) -> Aggregation {
    let modes = [
        (args.per_thread, Aggregation::Thread),
        (args.no_aggr || args.no_merge, Aggregation::Cpu),
        (args.per_core, Aggregation::Core),
        (args.per_cache.is_some(), Aggregation::Cache),
        (args.per_cluster, Aggregation::Cluster),
        (args.per_die, Aggregation::Die),
        (args.per_socket, Aggregation::Socket),
        (args.per_node, Aggregation::Node),
    ];
    modes.into_iter().find(|(on, _)| *on).map_or(Aggregation::Global, |(_, mode)| mode)
}

/// How often to read the counters for error bars: with `--errors` or `-v`.
pub(super) fn error_bar_reads(args: &StatArgs) -> Option<Duration> {
    (args.errors || args.verbose).then(|| Duration::from_millis(100))
}

/// Whether the metrics print as the TMA tree: `--tree` (or `--all`), or `--topdown` in the
/// default layout on a terminal unless `--no-tree`.
pub(super) fn prints_tree(args: &StatArgs, layout: &Layout) -> bool {
    let to_terminal = crate::args::counts_to_terminal(args.output.as_deref());
    args.tree || (args.topdown && !args.no_tree && *layout == Layout::Std && to_terminal)
}
