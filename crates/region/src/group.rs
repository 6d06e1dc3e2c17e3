//! A measurement's counter groups: which groups a plan may open (one hardware group, never
//! multiplexed, plus one of software events; the engine session opens them, the hardware
//! one pinned), the user pages that decide `rdpmc`, and reading every group at a region
//! boundary with `rdpmc` or one `read()`.

use std::time::Instant;

use tmetric_engine::session::{OwnGroup, counts_on_hardware};
use tmetric_engine::{Placement, Plan};
use tmetric_runtime::Syscalls;
use tmetric_runtime::counter::{RawCount, parse_group_read};
use tmetric_runtime::mmap::{PageCount, PageRead, Unreadable, UserPage};

use crate::topdown::{self, TopdownRead};
use crate::{Group, MAX_MEMBERS, Measurement, Reading, RegionError, TopdownLayout};

/// How a [`Measurement`] maps the user pages of its counters.
pub trait Pages {
    /// A mapped page.
    type Page: PageRead;
    /// Maps `fd`'s page; `None` when there is none (the caller then reads with `read()`).
    fn map(&mut self, fd: i32) -> Option<Self::Page>;
    /// Reads a page by the seqlock protocol.
    fn read(&self, page: &Self::Page) -> Result<PageCount, Unreadable>;
}

/// The kernel's pages and the `rdpmc` instruction.
#[derive(Debug, Default, Clone, Copy)]
pub struct KernelPages;

impl Pages for KernelPages {
    type Page = UserPage;
    fn map(&mut self, fd: i32) -> Option<UserPage> {
        UserPage::map(fd).ok()
    }
    fn read(&self, page: &UserPage) -> Result<PageCount, Unreadable> {
        page.read()
    }
}

/// No user pages: every group is read with `read()` (the simulated kernel's descriptors
/// are not files and cannot be mapped).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoPages;

impl Pages for NoPages {
    type Page = tmetric_runtime::mmap::PageImage;
    fn map(&mut self, _fd: i32) -> Option<Self::Page> {
        None
    }
    fn read(&self, _page: &Self::Page) -> Result<PageCount, Unreadable> {
        Err(Unreadable::NoUserRdpmc)
    }
}

impl<S: Syscalls, P: Pages> Measurement<S, P> {
    /// Maps the user pages of the session's groups: a hardware group is read with `rdpmc`
    /// only if every member's page allows it now; otherwise with `read()` for good.
    pub(crate) fn map_groups(&mut self, level2: bool) {
        let Some(own) = self.session.own_groups() else { return };
        let specs = self.session.plan().specs();
        for g in own {
            let (pages, topdown) = if g.pinned {
                rdpmc_pages(&mut self.pages, g, specs, level2)
            } else {
                (None, None)
            };
            let (specs, fds, ids) = (g.specs.clone(), g.fds.clone(), g.ids.clone());
            self.groups.push(Group { specs, fds, ids, pages, topdown });
        }
    }

    /// Reads every group into `reading` (buffers reused: the hot path allocates nothing).
    pub(crate) fn read_into(&mut self, reading: &mut Reading) -> Result<(), RegionError> {
        let (plan, sys) = self.session.plan_and_syscalls();
        reading.values.resize(plan.specs().len(), RawCount::default());
        reading.topdown.clear();
        let at = Instant::now();
        for group in &self.groups {
            let leader = &plan.specs()[group.specs[0]].name;
            match &group.pages {
                None => {
                    reading.topdown.push(None);
                    let mut buf = [0u8; 8 * (3 + 2 * MAX_MEMBERS)];
                    let want = 8 * (3 + 2 * group.fds.len());
                    let buf = &mut buf[..want];
                    let got = sys.read(group.fds[0], buf).map_err(|errno| {
                        RegionError::Syscall { what: "reading", event: leader.clone(), errno }
                    })?;
                    if got == 0 {
                        return Err(RegionError::Layout {
                            event: leader.clone(),
                            problem: "the pinned group could not be kept on the counters (the kernel put it in error state)".into(),
                        });
                    }
                    // The layout is checked as the runtime's parser does, without its
                    // allocation: nr, time_enabled, time_running, then (value, id) pairs.
                    let word = |i: usize| {
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&buf[i * 8..i * 8 + 8]);
                        u64::from_ne_bytes(w)
                    };
                    if got != want || word(0) as usize != group.fds.len() {
                        let problem = parse_group_read(&buf[..got], group.fds.len())
                            .err()
                            .unwrap_or_else(|| format!("{got} bytes, expected {want}"));
                        return Err(RegionError::Layout { event: leader.clone(), problem });
                    }
                    let (enabled, running) = (word(1), word(2));
                    for i in 0..group.fds.len() {
                        let (value, id) = (word(3 + 2 * i), word(4 + 2 * i));
                        let Some(m) = group.ids.iter().position(|&x| x == id) else {
                            return Err(RegionError::Layout {
                                event: leader.clone(),
                                problem: format!(
                                    "the kernel returned id {id}, which no member has"
                                ),
                            });
                        };
                        reading.values[group.specs[m]] = RawCount { value, enabled, running };
                    }
                }
                Some(pages) => {
                    // A pinned group that is on its counters at both ends of a region with
                    // the page unchanged (checked in `end`) ran all along: its enabled and
                    // running times are the wall clock's.
                    let ns = at.duration_since(self.epoch).as_nanos() as u64;
                    let mut slots = None;
                    let mut metrics = 0;
                    let mut metrics_read = false;
                    for (m, page) in pages.iter().enumerate() {
                        let field = group.topdown.as_ref().and_then(|l| l.fields[m]);
                        if field.is_some() && metrics_read {
                            // Every metric event reads the same PERF_METRICS register: one
                            // rdpmc serves them all (their counts come from the fields).
                            continue;
                        }
                        let c = self.pages.read(page).map_err(|why| RegionError::Rdpmc {
                            event: plan.specs()[group.specs[m]].name.clone(),
                            why,
                        })?;
                        reading.values[group.specs[m]] =
                            RawCount { value: c.value, enabled: ns, running: ns };
                        if group.topdown.is_some() {
                            if m == 0 {
                                slots = Some((c.raw, c.seq));
                            } else if field.is_some() {
                                metrics = c.raw;
                                metrics_read = true;
                            }
                        }
                    }
                    if let Some(layout) = &group.topdown {
                        // The metric events' values are replaced by slots-scaled fields in
                        // `end_total`; keep their times consistent with the group's.
                        for (m, f) in layout.fields.iter().enumerate() {
                            if f.is_some() {
                                reading.values[group.specs[m]] =
                                    RawCount { value: 0, enabled: ns, running: ns };
                            }
                        }
                    }
                    reading
                        .topdown
                        .push(slots.map(|(raw, seq)| (TopdownRead { slots: raw, metrics }, seq)));
                }
            }
        }
        reading.at = Some(at);
        Ok(())
    }
}

/// The groups a region opens: at most one hardware group plus one group of software events.
/// Anything more would be multiplexed or read at different moments, so it is an error.
pub(crate) fn region_groups(plan: &Plan) -> Result<Vec<Vec<usize>>, RegionError> {
    let mut hardware: Vec<Vec<usize>> = Vec::new();
    let mut software: Vec<usize> = Vec::new();
    let mut grouped = vec![false; plan.specs().len()];
    for g in plan.groups() {
        for &s in g {
            grouped[s] = true;
        }
        if g.iter().any(|&s| counts_on_hardware(&plan.events()[s].kind)) {
            hardware.push(g.clone());
        } else {
            software.extend(g.iter().copied());
        }
    }
    for (s, done) in grouped.iter().enumerate() {
        if *done {
            continue;
        }
        if counts_on_hardware(&plan.events()[s].kind) {
            hardware.push(vec![s]);
        } else {
            software.push(s);
        }
    }
    let name = |r: &tmetric_engine::Root| r.model.str(r.model.metric(r.metric).name).to_string();
    if let Some((root, why)) = plan.roots().iter().find_map(|r| match &r.placement {
        Placement::Impossible { why } => Some((r, why)),
        _ => None,
    }) {
        return Err(RegionError::Impossible { metric: name(root), why: why.clone() });
    }
    let spread: Vec<String> = plan
        .roots()
        .iter()
        .filter(|r| matches!(r.placement, Placement::Spread { .. }))
        .map(name)
        .collect();
    if hardware.len() > 1 || !spread.is_empty() {
        let mut why = format!("{} hardware groups", hardware.len());
        if !spread.is_empty() {
            why += &format!("; not counted together: {}", spread.join(", "));
        }
        return Err(RegionError::TooManyGroups { why });
    }
    let mut groups = hardware;
    if !software.is_empty() {
        software.sort_unstable();
        software.dedup();
        groups.push(software);
    }
    if let Some(big) = groups.iter().find(|g| g.len() > MAX_MEMBERS) {
        return Err(RegionError::TooManyGroups {
            why: format!("a group of {} events; at most {MAX_MEMBERS} are read at once", big.len()),
        });
    }
    Ok(groups)
}

/// The user pages of hardware group `g` when every member's page allows `rdpmc` now (and a
/// group with topdown metric events is led by `slots` and publishes the documented
/// selectors), with the group's topdown layout; `(None, None)` leaves it to `read()`.
fn rdpmc_pages<P: Pages>(
    pages: &mut P,
    g: &OwnGroup,
    specs: &[tmetric_runtime::CounterSpec],
    level2: bool,
) -> (Option<Vec<P::Page>>, Option<TopdownLayout>) {
    let mapped: Vec<P::Page> = g.fds.iter().filter_map(|&fd| pages.map(fd)).collect();
    let reads: Vec<Result<PageCount, Unreadable>> = mapped.iter().map(|p| pages.read(p)).collect();
    if mapped.len() != g.fds.len() || !reads.iter().all(Result::is_ok) {
        return (None, None);
    }
    let counts: Vec<PageCount> = reads.into_iter().flatten().collect();
    let attrs: Vec<&tmetric_runtime::Attr> = g.specs.iter().map(|&s| &specs[s].attr).collect();
    let fields: Vec<Option<usize>> =
        attrs.iter().map(|a| topdown::field_of_config(a.config)).collect();
    let led_by_slots =
        attrs[0].config == topdown::SLOTS_CONFIG && counts[0].selector == topdown::SLOTS_SELECTOR;
    let metrics_ok = fields
        .iter()
        .zip(&counts)
        .all(|(f, c)| f.is_none() || c.selector == topdown::METRICS_SELECTOR);
    if !fields.iter().any(Option::is_some) {
        return (Some(mapped), None);
    }
    if !(led_by_slots && metrics_ok) {
        // Metric events whose pages do not publish the documented selectors: read().
        return (None, None);
    }
    (Some(mapped), Some(TopdownLayout { fields, level2 }))
}
