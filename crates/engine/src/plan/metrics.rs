//! Adding metric roots to a plan: each input resolved once, the hardware events scheduled,
//! the scheduler's groups turned into counter groups (a copy of an event per further group,
//! every uncore box its group), software inputs grouped, and each root reading its own group.

use tmetric_catalog::{Id, IdKind, Model};
use tmetric_runtime::event::EventKind;
use tmetric_runtime::{CounterEvent, Sysfs};

use super::{
    Key, Names, Pick, Plan, PlanOptions, Resolution, Root, RowBox, Source, demand_of, grouping,
    id_name, machine_probes, needed_slots, packs, perf_ids, resolve_id,
};
use crate::Host;
use crate::schedule::{
    self, Opened, PerfMetric, Placement, Request, SchedEvent, SchedMetric, Schedule, Strategy,
};

/// The PMUs whose topdown metric events a metric reads (value or threshold) without reading
/// that PMU's `slots`: perf adds `slots` for them (`Plan::add_required_slots`).
pub(super) fn lacking_slots(
    events: &[usize],
    threshold_events: &[usize],
    request: &Request,
) -> Vec<usize> {
    let all = || events.iter().chain(threshold_events).map(|&e| &request.events[e]);
    let mut pmus: Vec<usize> =
        all().filter(|e| e.demand.topdown_metric).filter_map(|e| e.pmu).collect();
    pmus.sort_unstable();
    pmus.dedup();
    pmus.retain(|&p| !all().any(|e| e.demand.slots && e.pmu == Some(p)));
    pmus
}

/// `slots` as perf names it on PMU `pmu`.
pub(super) fn slots_name(pmu: &str) -> String {
    if pmu == "cpu" { "slots".to_string() } else { format!("{pmu}/slots/") }
}

/// Puts `slots` (request event `slot`, on PMU `p`) first in the list that holds the metric's
/// topdown metric events: its value's, else its threshold's.
pub(super) fn insert_slots(
    slot: usize,
    p: usize,
    events: &mut Vec<usize>,
    threshold_events: &mut Vec<usize>,
    request: &Request,
) {
    let topdown =
        |e: &usize| request.events[*e].demand.topdown_metric && request.events[*e].pmu == Some(p);
    if events.iter().any(topdown) {
        events.insert(0, slot);
    } else {
        threshold_events.insert(0, slot);
    }
}

/// The PMU a resolved counter lives on, by sysfs name (`None` for counterless kinds).
fn counter_pmu(event: &CounterEvent, sysfs: &Sysfs) -> Option<String> {
    match &event.kind {
        EventKind::Software | EventKind::Tracepoint => None,
        // A hybrid legacy event names its core PMU in the config's upper half.
        EventKind::Hardware if event.attr.config >> 32 != 0 => {
            sysfs.pmu_by_type((event.attr.config >> 32) as u32).or_else(|| sysfs.core_pmu())
        }
        EventKind::Hardware => sysfs.core_pmu(),
        EventKind::Pmu(p) if p == "msr" || p.starts_with("cstate") || p == "power" => None,
        EventKind::Pmu(p) => Some(p.clone()),
    }
}

/// tmetric's schedule, on an anchored Intel PMU: the counters its rotated `groups` leave
/// free take copies of events of the other groups, those most metrics read first, while the
/// group still fits. A copy counts its event in more of the turns, and where an event's copies
/// together count in every turn its total is known outright ([`crate::estimate`] adds them
/// up); the slices stay as they are.
fn fill_free_counters(
    schedule: &mut Schedule,
    request: &Request,
    pmu: &crate::pmu::PmuCounters,
    p: usize,
    groups: &[usize],
) {
    let readers = |e: usize| request.metrics.iter().filter(|m| m.events.contains(&e)).count();
    let mut candidates: Vec<usize> =
        groups.iter().flat_map(|&g| schedule.groups[g].events.iter().copied()).collect();
    candidates.sort_unstable();
    candidates.dedup();
    candidates.retain(|&e| {
        request.events[e].pmu == Some(p)
            && !request.events[e].demand.topdown_metric
            && !request.events[e].demand.slots
    });
    // Most read first; then in request order, so the plan is deterministic.
    candidates.sort_by_key(|&e| (std::cmp::Reverse(readers(e)), e));
    for &g in groups {
        for &e in &candidates {
            if schedule.groups[g].events.contains(&e) {
                continue;
            }
            let mut events = schedule.groups[g].events.clone();
            events.push(e);
            if let Some(slots) = schedule::assign(pmu, &request.events, &events, false) {
                schedule.groups[g].events = events;
                schedule.groups[g].slots = slots;
            }
        }
    }
}

/// A group with its new members and their counters.
type Placed = (usize, Vec<usize>, Vec<schedule::Slot>);

/// The event counted in every rotated group of an Intel core PMU ([`Plan::add_anchors`]).
pub const ANCHOR: &str = "INST_RETIRED.ANY";

/// The events tmetric adds to every rotated group of a core PMU as its anchor
/// ([`Plan::add_anchors`]), by vendor: Intel's retired instructions on fixed counter 0; on
/// Arm the retired instructions (`INST_RETIRED`) on a general counter of every rotated group
/// where that costs at most one more time slice ([`INSTRUCTIONS_SLICE`]), which tell phases
/// apart by their instructions per cycle as Intel's do, else CPU_CYCLES on the dedicated cycle counter
/// (`armv8pmu_get_event_idx` puts it there when it is free, which the NMI watchdog's cycles
/// would not leave it), which tells only phases at other clocks apart; AMD has neither, so
/// its cycles anchor only where every group already holds them or has a general counter
/// left for them.
pub const ANCHORS: [&str; 4] = [ANCHOR, "INST_RETIRED", "CPU_CYCLES", "ls_not_halted_cyc"];

/// The anchors core PMU `pmu` may have ([`ANCHORS`]), the one tried first first.
pub fn anchors_of(pmu: &crate::pmu::PmuCounters) -> &'static [&'static str] {
    if !pmu.core {
        return &[];
    }
    use crate::pmu::Vendor;
    match pmu.vendor {
        Vendor::Intel if pmu.fixed > 0 => &ANCHORS[0..1],
        Vendor::Arm if pmu.cycle_counter => &ANCHORS[1..3],
        Vendor::Arm => &ANCHORS[1..2],
        Vendor::Amd => &ANCHORS[3..4],
        _ => &[],
    }
}

/// Whether event `name` (as the plan prints it, with or without its PMU: `cpu_core/X/`)
/// is `anchor`, ignoring case (vendor files and formulas spell Arm's events either way).
pub fn names_anchor(name: &str, anchor: &str) -> bool {
    let bare = name.trim_end_matches('/').rsplit('/').next().unwrap_or(name);
    bare.eq_ignore_ascii_case(anchor)
}

/// Whether `name` is one of [`ANCHORS`] ([`names_anchor`]), and which: what the estimate
/// regresses on.
pub fn anchor_named(name: &str) -> Option<crate::estimate::Anchor> {
    let i = ANCHORS.iter().position(|a| names_anchor(name, a))?;
    Some(if i <= 1 {
        crate::estimate::Anchor::Instructions
    } else {
        crate::estimate::Anchor::Cycles
    })
}

/// Events the kernel lets into any group: software events, tracepoints and `msr`.
fn software_context(event: &CounterEvent) -> bool {
    match &event.kind {
        EventKind::Software | EventKind::Tracepoint => true,
        EventKind::Pmu(p) => p == "msr",
        EventKind::Hardware => false,
    }
}

/// The input of `model` naming `anchor` on core PMU `p` (a hybrid model names one per core
/// type), with its event in the scheduler's request and the request it is in: `request`
/// itself where a metric already reads it, else a copy with the event added, so that where
/// it is then not placed nothing of it is left in the plan.
fn anchor_event<'m>(
    model: &'m Model,
    anchor: &str,
    p: usize,
    machine: &Host,
    request: &Request,
) -> Option<(&'m Id, usize, Request)> {
    let pmu = machine.pmus().pmus.get(p)?;
    let id = model.ids.iter().find(|id| {
        let name = id_name(model, id);
        names_anchor(&name, anchor)
            && matches!(
                resolve_id(model, id, machine.sysfs(), machine.env()),
                Resolution::Counter(e) if counter_pmu(&e, machine.sysfs()).as_deref() == Some(pmu.name.as_str())
            )
    })?;
    let name = id_name(model, id);
    if let Some(e) = request.events.iter().position(|ev| ev.pmu == Some(p) && ev.name == name) {
        return Some((id, e, request.clone()));
    }
    let (at, demand) = demand_of(model, id, &pmu.name, machine.pmus())?;
    if at != p {
        return None;
    }
    let mut probe = request.clone();
    probe.events.push(SchedEvent { name, pmu: Some(p), demand });
    Some((id, probe.events.len() - 1, probe))
}

/// How many more time slices Arm's retired instructions may cost as the anchor: on
/// neoverse-n2's TopdownL1, Operation_Mix and Cycle_Accounting (four groups, five with them,
/// level 1 then over two groups), the multiplexed values' mean error was 41.5 % of perf's
/// where the cycles on the cycle counter gave 104.4 % (`--machine neoverse-n2`, 3 seeds):
/// the cycles run at one clock there and tell nothing time does not, the instructions tell
/// the phases apart by what they retire per cycle, worth a fifth of each group's turns.
const INSTRUCTIONS_SLICE: usize = 1;

/// Event `e` of `request` added to every group of PMU `p` in `schedule`: each group with
/// it and its counters. Where some group has no counter for it and `repack`, the groups
/// packed again as if every metric on `p` read it, taken only where that costs `p` at most
/// [`INSTRUCTIONS_SLICE`] more slices, the other PMUs none, and keeps every metric whole
/// that was; then that schedule is returned too.
fn place_anchor(
    schedule: &Schedule,
    request: &Request,
    machine: &Host,
    p: usize,
    e: usize,
    repack: bool,
) -> Option<(Option<Schedule>, Vec<Placed>)> {
    let pmu = machine.pmus().pmus.get(p)?;
    let place = |schedule: &Schedule| -> Option<Vec<Placed>> {
        (0..schedule.groups.len())
            .filter(|&g| schedule.groups[g].pmu == Some(p))
            .map(|g| {
                let mut events = schedule.groups[g].events.clone();
                if !events.contains(&e) {
                    events.push(e);
                }
                let slots = schedule::assign(pmu, &request.events, &events, false)?;
                Some((g, events, slots))
            })
            .collect()
    };
    if let Some(placed) = place(schedule) {
        return Some((None, placed));
    }
    if !repack {
        return None;
    }
    // Every metric with an event on the PMU packed as if it read the anchor too, so that
    // the groups keep a counter for it and share the one a metric reads already.
    let mut with = request.clone();
    for m in &mut with.metrics {
        if m.events.iter().any(|&x| request.events[x].pmu == Some(p)) && !m.events.contains(&e) {
            m.events.push(e);
        }
    }
    let packed = schedule::schedule(&with, machine.pmus(), Strategy::Tmetric);
    let whole =
        |s: &Schedule, m: usize| matches!(s.placements.get(m), Some(Placement::Together { .. }));
    let no_worse = packed.slices_per_pmu.len() == schedule.slices_per_pmu.len()
        && packed
            .slices_per_pmu
            .iter()
            .zip(&schedule.slices_per_pmu)
            .enumerate()
            .all(|(q, (a, b))| *a <= *b + if q == p { INSTRUCTIONS_SLICE } else { 0 })
        && packed.singles.len() <= schedule.singles.len()
        && packed.open.is_empty()
        && (0..schedule.placements.len()).all(|m| !whole(schedule, m) || whole(&packed, m));
    if !no_worse {
        return None;
    }
    let placed = place(&packed)?;
    Some((Some(packed), placed))
}

impl Plan {
    /// For every group with a member whose row has several uncore boxes, the same group on
    /// each further box (perf opens a metric's group of uncore events on every box). Members
    /// without that box (an event of one box only) are left out of the box's group.
    fn replicate_box_groups(&mut self, from: usize) {
        let box_of: std::collections::HashMap<usize, &Vec<RowBox>> = self
            .rows
            .iter()
            .filter(|r| r.boxes.len() > 1)
            .map(|r| (r.boxes[0].spec, &r.boxes))
            .collect();
        let mut more = Vec::new();
        for group in &self.groups[from..] {
            let boxes = group.iter().filter_map(|s| box_of.get(s)).map(|b| b.len()).max();
            let Some(n) = boxes else { continue };
            for k in 1..n {
                let g: Vec<usize> = group
                    .iter()
                    .filter_map(|s| box_of.get(s).and_then(|b| b.get(k)).map(|b| b.spec))
                    .collect();
                if !g.is_empty() {
                    more.push(g);
                }
            }
        }
        self.groups.extend(more);
    }

    /// Adds metric roots: resolves their inputs on `machine`, schedules their hardware events
    /// and turns the groups into counter specs.
    pub fn add_metrics(
        &mut self,
        picks: &[Pick],
        machine: &Host,
        options: &PlanOptions,
        show_tools: bool,
    ) {
        self.add_metrics_with(
            picks,
            machine,
            options,
            show_tools,
            options.strategy == Strategy::Perf,
        );
    }

    /// [`Plan::add_metrics`], with perf 6.12's view of every root in the request when
    /// `perf_view` (its identifiers in perf's order: what perf's strategy needs to order
    /// events as perf does).
    pub(crate) fn add_metrics_with(
        &mut self,
        picks: &[Pick],
        machine: &Host,
        options: &PlanOptions,
        show_tools: bool,
        perf_view: bool,
    ) {
        let first_root = self.roots.len();
        let first_row = self.rows.len();
        self.tick_hz = machine.tick_hz();
        if options.strategy == Strategy::Tmetric && self.siblings.is_empty() {
            self.siblings = machine.smt_siblings().to_vec();
        }
        // Resolve every needed input once.
        let mut root_rows: Vec<Vec<(u16, usize)>> = Vec::new();
        let mut request = Request::default();
        request.perf.no_merge = options.no_merge;
        request.perf.default = !picks.is_empty() && picks.iter().all(|p| p.item == "Default");
        let mut sched_of_row: Vec<Option<usize>> = Vec::new();
        let mut items: Vec<&str> = Vec::new();
        let mut names: Vec<(&'static tmetric_catalog::Model, Names)> = Vec::new();
        for pick in picks {
            let rows =
                self.pick_rows(pick, machine, options, show_tools, &mut request, &mut sched_of_row);
            if perf_view {
                if !items.contains(&pick.item.as_str()) {
                    items.push(&pick.item);
                }
                let item = items.iter().position(|i| *i == pick.item).unwrap_or(0);
                if !names.iter().any(|(m, _)| std::ptr::eq(*m, pick.model)) {
                    names.push((pick.model, Names::of(pick.model)));
                }
                let names =
                    &names.iter().find(|(m, _)| std::ptr::eq(*m, pick.model)).expect("added").1;
                let view =
                    self.perf_view(pick, item, names, &rows, &sched_of_row, options.thresholds);
                if let Some(last) = request.metrics.last_mut() {
                    last.perf = view;
                }
            }
            root_rows.push(rows);
        }
        let mut schedule = schedule::schedule(&request, machine.pmus(), options.strategy);
        let anchors = if options.strategy == Strategy::Tmetric {
            self.add_anchors(&mut schedule, &mut request, &mut sched_of_row, picks, machine)
        } else {
            Vec::new()
        };
        let first_rotated = self.rotated.len();
        let (group_rows, open_rows) = self.add_scheduled_groups(&schedule, &request, &sched_of_row);
        self.find_anchors(first_rotated, &anchors);
        self.group_software_inputs(&root_rows, &sched_of_row);
        self.add_roots(picks, &schedule, &root_rows, (&group_rows, &open_rows));
        // Copies that only fill free counters (and anchors no metric reads) are tmetric's
        // own: perf would not have opened them, and they do not print.
        let read: std::collections::BTreeSet<usize> = self.roots[first_root..]
            .iter()
            .flat_map(|r| r.slot_rows.iter().flatten().copied())
            .collect();
        for r in first_row..self.rows.len() {
            if self.rows[r].copy_of.is_some() && !read.contains(&r) {
                self.rows[r].show = false;
            }
        }
        self.note_retire_latency(first_root, machine);
        self.request = request;
        self.schedule = Some(schedule);
    }

    /// tmetric's schedule: on each core PMU whose groups take turns, its anchor
    /// ([`ANCHORS`]: the retired instructions on Intel's fixed counter or Arm's general
    /// counters, else the cycles on Arm's cycle counter or, on AMD, where a group has room)
    /// joins every group that does not hold it, so it is counted in every turn. The
    /// instructions in each turn tell the phases of the workload apart (each phase retires
    /// at its own rate), the cycles where the clock changes; the estimate of the turns a
    /// group missed regresses on them ([`crate::estimate`]), and on time alone where they
    /// tell nothing apart. Nothing is added where a group would not fit with them, but that
    /// Arm's instructions may have the groups packed again with them ([`place_anchor`]).
    /// Returns each anchored PMU with the anchor's row; a row added only for this is not
    /// printed.
    fn add_anchors(
        &mut self,
        schedule: &mut Schedule,
        request: &mut Request,
        sched_of_row: &mut Vec<Option<usize>>,
        picks: &[Pick],
        machine: &Host,
    ) -> Vec<(usize, usize)> {
        let mut anchors = Vec::new();
        if !schedule.open.is_empty() {
            return anchors;
        }
        for p in 0..schedule.slices_per_pmu.len() {
            let Some(pmu) = machine.pmus().pmus.get(p) else { continue };
            if schedule.slices_per_pmu[p] < 2 || !pmu.core {
                continue;
            }
            // The catalogue model of a metric with events on this PMU names the event.
            let Some(model) = request.metrics.iter().zip(picks).find_map(|(m, pick)| {
                m.events.iter().any(|&e| request.events[e].pmu == Some(p)).then_some(pick.model)
            }) else {
                continue;
            };
            for &anchor in anchors_of(pmu) {
                let Some((id, e, probe)) = anchor_event(model, anchor, p, machine, request) else {
                    continue;
                };
                let Some((packed, placed)) =
                    place_anchor(schedule, &probe, machine, p, e, anchor == ANCHORS[1])
                else {
                    continue;
                };
                let rows_before = self.rows.len();
                let row = self.input_row(model, id, machine, false, request, sched_of_row);
                if self.rows.len() > rows_before {
                    self.rows[row].show = false;
                }
                // The row is the event the placement was tried with.
                if sched_of_row.get(row).copied().flatten() != Some(e) {
                    continue;
                }
                if let Some(packed) = packed {
                    *schedule = packed;
                }
                let groups: Vec<usize> = placed.iter().map(|p| p.0).collect();
                for (g, events, slots) in placed {
                    schedule.groups[g].events = events;
                    schedule.groups[g].slots = slots;
                }
                anchors.push((p, row));
                // Copies on free counters make the events they copy exact and leave the rest
                // estimated, so a level that sums to the slots stops summing where they
                // differ: on AMD, PipelineL1 intervals summed up to 2 points off (14 of 640
                // values impossible), and the totals' bars held the truth 99.5 % of the time
                // at 2 sigma, against 98.6 % without them (`--machine amdzen4`, 3 seeds). On
                // Intel, where the anchor tells phases apart, they stay, as measured there.
                if pmu.vendor == crate::pmu::Vendor::Intel {
                    fill_free_counters(schedule, request, pmu, p, &groups);
                }
                break;
            }
        }
        anchors
    }

    /// Each rotated group from `first` on: its copy of its PMU's anchor row, if it has one.
    fn find_anchors(&mut self, first: usize, anchors: &[(usize, usize)]) {
        for k in first..self.rotated.len() {
            let (p, leader) = self.rotated[k];
            let anchor = anchors.iter().find(|a| a.0 == p).and_then(|&(_, row)| {
                let group = self.groups.iter().find(|g| g.first() == Some(&leader))?;
                group.iter().copied().find(|&s| {
                    self.rows.iter().enumerate().any(|(r, pr)| {
                        pr.source == Source::Counter(s) && (r == row || pr.copy_of == Some(row))
                    })
                })
            });
            self.anchors.resize(self.rotated.len(), None);
            self.anchors[k] = anchor;
        }
    }

    /// The rows (by input slot) `pick` reads, resolved on `machine` and added where new; its
    /// hardware events and the metric itself go into the scheduler's `request`
    /// (`sched_of_row`: each row's event there).
    fn pick_rows(
        &mut self,
        pick: &Pick,
        machine: &Host,
        options: &PlanOptions,
        show_tools: bool,
        request: &mut Request,
        sched_of_row: &mut Vec<Option<usize>>,
    ) -> Vec<(u16, usize)> {
        let model = pick.model;
        if !self.probes.iter().any(|(m, _)| std::ptr::eq(*m, model)) {
            self.probes.push((model, machine_probes(model, machine)));
        }
        let probes = self.probes_of(model).to_vec();
        let value_slots = needed_slots(model, pick.metric, &self.literals, &probes, false);
        let slots = needed_slots(model, pick.metric, &self.literals, &probes, options.thresholds);
        let mut rows = Vec::new();
        for slot in slots {
            let id = &model.ids[slot as usize];
            if id.kind == IdKind::Probe {
                continue;
            }
            let row = self.input_row(model, id, machine, show_tools, request, sched_of_row);
            rows.push((slot, row));
        }
        sched_of_row.resize(self.rows.len(), None);
        let mut events: Vec<usize> = rows
            .iter()
            .filter(|(slot, _)| value_slots.contains(slot))
            .filter_map(|&(_, r)| sched_of_row[r])
            .collect();
        let mut threshold_events: Vec<usize> = rows
            .iter()
            .filter(|(slot, _)| !value_slots.contains(slot))
            .filter_map(|&(_, r)| sched_of_row[r])
            .collect();
        self.add_required_slots(
            model,
            &mut events,
            &mut threshold_events,
            machine,
            request,
            sched_of_row,
        );
        let why = grouping(pick, options, machine.pmus()).err();
        request.metrics.push(SchedMetric {
            name: model.str(model.metric(pick.metric).name).to_string(),
            events,
            threshold_events,
            grouped: why.is_none(),
            pack: packs(pick, options),
            perf: PerfMetric::default(),
        });
        rows
    }

    /// perf's `arch_evlist__add_required_events` (tools/perf/arch/x86/util/evlist.c, perf
    /// 6.12): topdown metric events on a PMU whose `slots` the metric lacks get that `slots`,
    /// which the kernel requires as their group's leader. perf 6.12's vendor formulas read
    /// `slots` themselves (`+ 0 * slots`); perf 7.x's dropped the term and rely on this.
    fn add_required_slots(
        &mut self,
        model: &'static Model,
        events: &mut Vec<usize>,
        threshold_events: &mut Vec<usize>,
        machine: &Host,
        request: &mut Request,
        sched_of_row: &mut Vec<Option<usize>>,
    ) {
        for p in lacking_slots(events, threshold_events, request) {
            let pmu = &machine.pmus().pmus[p];
            // The model's own identifier for it (`TOPDOWN.SLOTS`), where another metric reads
            // one: the row is then the one that metric's input finds, under the same name.
            let own = model.ids.iter().find(|id| {
                demand_of(model, id, &pmu.name, machine.pmus())
                    .is_some_and(|(at, d)| at == p && d.slots)
            });
            if let Some(id) = own {
                let row = self.input_row(model, id, machine, false, request, sched_of_row);
                if let Some(e) = sched_of_row.get(row).copied().flatten() {
                    insert_slots(e, p, events, threshold_events, request);
                    continue;
                }
            }
            let pmu = &machine.pmus().pmus[p];
            let name = slots_name(&pmu.name);
            let sysfs = machine.sysfs();
            let Ok(event) =
                tmetric_runtime::event::resolve_on_pmu(&pmu.name, "slots", "", &name, sysfs)
            else {
                continue;
            };
            let Some(demand) = crate::pmu::named_demand("slots", pmu.vendor, pmu.metric_events)
            else {
                continue;
            };
            let key = Key::Counter(event.attr.clone(), event.cpus.clone());
            let row = match self.find(&key) {
                Some(row) => row,
                None => self.add(Resolution::Counter(event), name.clone(), true),
            };
            sched_of_row.resize(self.rows.len(), None);
            let e = match sched_of_row[row] {
                Some(e) => e,
                None => {
                    request.events.push(SchedEvent { name, pmu: Some(p), demand });
                    sched_of_row[row] = Some(request.events.len() - 1);
                    request.events.len() - 1
                }
            };
            insert_slots(e, p, events, threshold_events, request);
        }
    }

    /// perf's view of root `pick` (its identifiers in perf's order and which of them are
    /// events of the request), or an empty view when perf could not collect them.
    fn perf_view(
        &self,
        pick: &Pick,
        item: usize,
        names: &Names,
        rows: &[(u16, usize)],
        sched_of_row: &[Option<usize>],
        thresholds: bool,
    ) -> PerfMetric {
        let model = pick.model;
        let desc = model.metric(pick.metric);
        let probes = self.probes_of(model);
        let Ok(ids) = perf_ids(model, names, pick.metric, &self.literals, probes, thresholds)
        else {
            return PerfMetric::default();
        };
        let events = ids
            .iter()
            .filter_map(|key| {
                let slot = names.slot(key)? as u16;
                let row = rows.iter().find(|(s, _)| *s == slot)?.1;
                Some((key.clone(), sched_of_row.get(row).copied().flatten()?))
            })
            .collect();
        PerfMetric {
            item,
            table: (model.str(desc.pmu).to_string(), model.str(desc.name).to_string()),
            default_group: model.str(desc.default_group).to_string(),
            modifier: None,
            ids,
            events,
        }
    }

    /// The row of input `id`: the one already resolved to the same counter, box set, tool or
    /// name, else a new row, whose hardware event joins the scheduler's `request`.
    fn input_row(
        &mut self,
        model: &'static Model,
        id: &Id,
        machine: &Host,
        show_tools: bool,
        request: &mut Request,
        sched_of_row: &mut Vec<Option<usize>>,
    ) -> usize {
        let name = id_name(model, id);
        let resolution = resolve_id(model, id, machine.sysfs(), machine.env());
        let key = match &resolution {
            Resolution::Counter(e) => Key::Counter(e.attr.clone(), e.cpus.clone()),
            Resolution::Boxes(b) => {
                Key::Boxes(b[0].event.attr.clone(), b.iter().map(|b| b.event.attr.type_).collect())
            }
            Resolution::Tool(t) => Key::Tool(*t),
            Resolution::RetireLatency | Resolution::Missing(_) => Key::Named(name.clone()),
        };
        match self.find(&key) {
            Some(row) => {
                if matches!(self.rows[row].source, Source::Tool(_)) && show_tools {
                    self.rows[row].show = true;
                }
                row
            }
            None => {
                let show = show_tools || !matches!(resolution, Resolution::Tool(_));
                let pmu_name = match &resolution {
                    Resolution::Counter(e) => counter_pmu(e, machine.sysfs()),
                    // Scheduled on box 0; every box gets the same groups.
                    Resolution::Boxes(b) => counter_pmu(&b[0].event, machine.sysfs()),
                    _ => None,
                };
                let row = self.add(resolution, name.clone(), show);
                sched_of_row.resize(self.rows.len(), None);
                if let Some(pmu_name) = pmu_name
                    && let Some((p, demand)) = demand_of(model, id, &pmu_name, machine.pmus())
                {
                    request.events.push(SchedEvent { name, pmu: Some(p), demand });
                    sched_of_row[row] = Some(request.events.len() - 1);
                }
                row
            }
        }
    }

    /// Turns the scheduled groups into spec groups, in the schedule's open order when it has
    /// one (lone events then become groups of one, so they open in their place): the first
    /// group an event is in uses its row, later ones a copy. Returns each scheduled group's
    /// rows and each open-order entry's rows.
    fn add_scheduled_groups(
        &mut self,
        schedule: &Schedule,
        request: &Request,
        sched_of_row: &[Option<usize>],
    ) -> (Vec<Vec<usize>>, Vec<Vec<usize>>) {
        let row_of_sched: Vec<usize> = {
            let mut v = vec![usize::MAX; request.events.len()];
            for (r, s) in sched_of_row.iter().enumerate() {
                if let Some(s) = s {
                    v[*s] = r;
                }
            }
            v
        };
        // Rows already in a user's `-e` group count as used.
        let mut used: Vec<bool> = (0..self.rows.len())
            .map(|r| match self.rows[r].source {
                Source::Counter(s) => self.groups.iter().any(|g| g.contains(&s)),
                _ => false,
            })
            .collect();
        let units: Vec<(Option<usize>, Vec<usize>)> = if schedule.open.is_empty() {
            schedule
                .groups
                .iter()
                .enumerate()
                .map(|(g, group)| (Some(g), group.events.clone()))
                .collect()
        } else {
            schedule
                .open
                .iter()
                .map(|o| match *o {
                    Opened::Group(g) => (Some(g), schedule.groups[g].events.clone()),
                    Opened::Single(e) => (None, vec![e]),
                })
                .collect()
        };
        let mut group_rows: Vec<Vec<usize>> = vec![Vec::new(); schedule.groups.len()];
        let mut unit_rows: Vec<Vec<usize>> = Vec::new();
        let first_group = self.groups.len();
        for (g, events) in units {
            if g.is_some_and(|g| schedule.groups[g].pmu.is_none()) {
                unit_rows.push(Vec::new());
                continue;
            }
            let mut rows = Vec::new();
            for &e in &events {
                let base = row_of_sched[e];
                let row = if used[base] { self.duplicate(base) } else { base };
                used[base] = true;
                used.resize(self.rows.len(), true);
                rows.push(row);
            }
            let specs: Vec<usize> = rows
                .iter()
                .filter_map(|&r| match self.rows[r].source {
                    Source::Counter(s) => Some(s),
                    _ => None,
                })
                .collect();
            for (&s, &e) in specs.iter().zip(&events) {
                let d = request.events[e].demand;
                self.sticky[s] = d.slots || d.topdown_metric;
            }
            // tmetric's own rotation takes the groups of a PMU that cannot count at once
            // (its strategy only: perf's leaves rotation to the kernel), core PMUs only.
            if let Some(g) = g
                && schedule.open.is_empty()
                && let Some(p) = schedule.groups[g].pmu
                && schedule.slices_per_pmu.get(p).is_some_and(|&n| n > 1)
                && rows.iter().all(|&r| self.rows[r].boxes.len() < 2)
                && let Some(&leader) = specs.first()
            {
                self.rotated.push((p, leader));
            }
            self.groups.push(specs);
            if let Some(g) = g {
                group_rows[g] = rows.clone();
            }
            unit_rows.push(rows);
        }
        self.replicate_box_groups(first_group);
        let open_rows = if schedule.open.is_empty() { Vec::new() } else { unit_rows };
        (group_rows, open_rows)
    }

    /// Puts the software and msr inputs of the roots (`root_rows`) that no group holds into
    /// one group.
    fn group_software_inputs(
        &mut self,
        root_rows: &[Vec<(u16, usize)>],
        sched_of_row: &[Option<usize>],
    ) {
        // Software and msr inputs of metrics share one group: they take no hardware counter
        // and may join any group. Other counterless PMUs (cstate, power) are separate
        // hardware PMUs the kernel will not mix in one group, so they are opened alone.
        let soft: Vec<usize> = root_rows
            .iter()
            .flatten()
            .filter_map(|&(_, r)| match self.rows[r].source {
                Source::Counter(s)
                    if sched_of_row[r].is_none()
                        && software_context(&self.events[s])
                        && !self.groups.iter().any(|g| g.contains(&s)) =>
                {
                    Some(s)
                }
                _ => None,
            })
            .collect::<std::collections::BTreeSet<usize>>()
            .into_iter()
            .collect();
        if !soft.is_empty() {
            let mut soft = soft;
            let names: Vec<String> = self.specs.iter().map(|s| s.name.clone()).collect();
            soft.sort_by_key(|&s| (crate::default_rank(&names[s]), s));
            self.groups.push(soft);
        }
    }

    /// Adds a root per pick: each reads its inputs from its own group.
    fn add_roots(
        &mut self,
        picks: &[Pick],
        schedule: &Schedule,
        root_rows: &[Vec<(u16, usize)>],
        rows_of: (&[Vec<usize>], &[Vec<usize>]),
    ) {
        let (group_rows, open_rows) = rows_of;
        for (i, pick) in picks.iter().enumerate() {
            let model = pick.model;
            let placement = schedule.placements[i].clone();
            let mut slot_rows = vec![None; model.ids.len()];
            // The rows it reads: its own list's in perf's strategy (`setup_metric_events`:
            // the first event of the list with the identifier), else its group's.
            let own: Vec<usize> = match (&placement, schedule.reads.get(i)) {
                (_, Some(reads)) if !open_rows.is_empty() => {
                    reads.iter().flat_map(|&u| open_rows[u].clone()).collect()
                }
                (Placement::Together { groups }, _) => {
                    groups.iter().flat_map(|&g| group_rows[g].clone()).collect()
                }
                _ => Vec::new(),
            };
            for &(slot, row) in &root_rows[i] {
                let mine =
                    own.iter().copied().find(|&r| r == row || self.rows[r].copy_of == Some(row));
                slot_rows[slot as usize] = Some(mine.unwrap_or(row));
            }
            self.roots.push(Root { model, metric: pick.metric, slot_rows, placement });
        }
    }
}
