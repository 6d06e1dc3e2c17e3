//! Changes to a built plan that front ends ask for: per-box uncore lines (`-A`), cgroups
//! (`-G`, `--for-each-cgroup`), tracepoint filters (`--filter`), perf 6.12's `Default` metric
//! view and perf 7.x's default metric groups, and `--all-user`/`--all-kernel`.

use tmetric_runtime::sys::TYPE_SOFTWARE;

use super::{Key, Plan, PlanRow, Root, Source};

impl Plan {
    /// perf's `-A`/`--no-merge` for uncore rows ([`Plan::per_box`]).
    pub fn set_per_box(&mut self, per_box: bool) {
        self.per_box = per_box;
    }

    /// perf's `-i`/`--no-inherit` when `false`: a task's counters count it alone, not the
    /// children it creates.
    pub fn set_inherit(&mut self, inherit: bool) {
        self.inherit = inherit;
    }

    /// Whether per-CPU software events that would each be opened alone are opened as one
    /// group per CPU, read with one `read()` per CPU (`tmetric_runtime::counter::Opening`).
    /// Only for runs that never switch one event on or off by itself (`--control`'s
    /// `enable NAME`) and rotate no group: switching a group's leader switches the group.
    pub fn set_software_together(&mut self, together: bool) {
        self.software_together = together;
    }

    /// perf's `--filter`: `filter` on every counter of `rows` (the rows one `-e` list added),
    /// which must all be tracepoints; a second filter on an event joins the first as perf's
    /// `evsel__append_tp_filter` does: `(first) && (second)`.
    pub fn set_filter(
        &mut self,
        rows: std::ops::Range<usize>,
        filter: &str,
    ) -> Result<(), crate::FilterError> {
        let specs: Vec<usize> = rows
            .filter_map(|r| self.rows.get(r))
            .filter(|row| matches!(row.source, Source::Counter(_)))
            .flat_map(|row| row.specs())
            .collect();
        if specs.is_empty() {
            return Err(crate::FilterError::NoEvent);
        }
        if let Some(&s) = specs
            .iter()
            .find(|&&s| self.specs[s].attr.type_ != tmetric_runtime::sys::TYPE_TRACEPOINT)
        {
            return Err(crate::FilterError::NotTracepoint {
                event: self.specs[s].name.clone(),
                filter: filter.to_string(),
            });
        }
        for s in specs {
            let spec = &mut self.specs[s];
            spec.filter = Some(match spec.filter.take() {
                Some(first) => format!("({first}) && ({filter})"),
                None => filter.to_string(),
            });
        }
        Ok(())
    }

    /// perf's `--for-each-cgroup`: every row, counter, group and root once per cgroup, in
    /// cgroup order (perf's `evlist__expand_cgroup`), each counting in its cgroup only.
    pub fn expand_cgroups(&mut self, cgroups: &[String]) {
        let (rows, specs, events, groups, sticky, roots) = (
            std::mem::take(&mut self.rows),
            std::mem::take(&mut self.specs),
            std::mem::take(&mut self.events),
            std::mem::take(&mut self.groups),
            std::mem::take(&mut self.sticky),
            std::mem::take(&mut self.roots),
        );
        for cgroup in cgroups {
            let (row0, spec0, root0) = (self.rows.len(), self.specs.len(), self.roots.len());
            for row in &rows {
                let mut row = row.clone();
                if let Source::Counter(s) = &mut row.source {
                    *s += spec0;
                }
                for b in &mut row.boxes {
                    b.spec += spec0;
                }
                row.copy_of = row.copy_of.map(|r| r + row0);
                row.roots = row.roots.iter().map(|r| r + root0).collect();
                row.cgroup = Some(cgroup.clone());
                if let Key::Named(name) = &mut row.key {
                    *name = format!("{name}\u{0}{cgroup}");
                }
                self.rows.push(row);
            }
            for spec in &specs {
                let mut spec = spec.clone();
                spec.cgroup = Some(cgroup.clone());
                self.specs.push(spec);
            }
            self.events.extend(events.iter().cloned());
            self.sticky.extend(sticky.iter().copied());
            self.groups.extend(groups.iter().map(|g| g.iter().map(|s| s + spec0).collect()));
            for root in &roots {
                let mut root = root.clone();
                root.slot_rows = root.slot_rows.iter().map(|r| r.map(|r| r + row0)).collect();
                self.roots.push(root);
            }
        }
    }

    /// perf's view of its `Default` metric group: the metrics print under their group's
    /// name on the line of their first event, and none of their other events (rows from
    /// `first_row` on, which the metrics added) print. perf's metrics of one group share
    /// their first event (the group's leader), so they print together: each group under its
    /// name, in name order, its metrics in name order; per PMU, as hybrid machines have one
    /// leader per core type. Only metrics with a `DefaultMetricgroupName` print so (every one
    /// of perf 6.12's `Default` groups has one); perf 7.x's common `Default` metrics print
    /// beside their events ([`Plan::show_default_events`]).
    pub fn show_as_default_view(&mut self, first_row: usize) {
        self.default_metrics = true;
        let roots = &self.roots;
        let headed = |r: usize| has_default_group(&roots[r]);
        let key = |r: usize| {
            let root = &roots[r];
            let m = root.model.metric(root.metric);
            (root.model.str(m.default_group), root.model.str(m.name))
        };
        let pmu_of = |r: usize| {
            let root = &roots[r];
            root.model.str(root.model.metric(root.metric).pmu).to_string()
        };
        // The row that hosts a PMU's first root hosts them all.
        let mut hosts: Vec<(String, usize, Vec<usize>)> = Vec::new();
        for (row, r) in
            self.rows.iter().enumerate().flat_map(|(i, row)| row.roots.iter().map(move |&r| (i, r)))
        {
            if !headed(r) {
                continue;
            }
            let pmu = pmu_of(r);
            match hosts.iter_mut().find(|h| h.0 == pmu) {
                Some(h) => h.2.push(r),
                None => hosts.push((pmu, row, vec![r])),
            }
        }
        for row in &mut self.rows {
            row.roots.retain(|&r| !headed(r));
        }
        for (_, host, mut roots) in hosts {
            roots.sort_by(|&a, &b| key(a).cmp(&key(b)));
            self.rows[host].roots.extend(roots);
        }
        for row in &mut self.rows[first_row..] {
            if row.roots.is_empty() {
                row.show = false;
            }
        }
    }

    /// Whether root `r` prints under its `Default` group's name ([`Plan::show_as_default_view`]).
    pub(crate) fn prints_under_group(&self, r: usize) -> bool {
        self.default_metrics && has_default_group(&self.roots[r])
    }

    /// perf 7.x's view of its default metric groups (`Default`, `Default2`, ...): their
    /// events print with the metrics beside them, but only those that host a metric (rows
    /// from `first_row` on, which the metrics added), and a row that could not be opened only
    /// when it is `cycles` (perf marks every other default event skippable).
    /// The rows print in perf's order of its default events (`default_evlist_evsel_cmp`):
    /// software events first, by name, then the others as the metrics added them, tool
    /// values last.
    pub fn show_default_events(&mut self, first_row: usize) {
        self.default_events = true;
        for row in &mut self.rows[first_row..] {
            if row.roots.is_empty() {
                row.show = false;
            }
        }
        let software = |row: &PlanRow| match row.source {
            Source::Counter(spec) => self.events[spec].attr.type_ == TYPE_SOFTWARE,
            _ => false,
        };
        let mut order: Vec<usize> = (first_row..self.rows.len()).collect();
        order.sort_by_key(|&r| {
            let row = &self.rows[r];
            match row.source {
                _ if software(row) => (0, row.name.clone()),
                Source::Tool(_) => (2, String::new()),
                _ => (1, String::new()),
            }
        });
        let mut new_index: Vec<usize> = (0..self.rows.len()).collect();
        for (k, &old) in order.iter().enumerate() {
            new_index[old] = first_row + k;
        }
        let mut old_rows: Vec<Option<PlanRow>> =
            std::mem::take(&mut self.rows).into_iter().map(Some).collect();
        let mut rows: Vec<PlanRow> = Vec::with_capacity(old_rows.len());
        for old in (0..first_row).chain(order.iter().copied()) {
            rows.push(old_rows[old].take().expect("each row once"));
        }
        for row in &mut rows {
            row.copy_of = row.copy_of.map(|r| new_index[r]);
        }
        for root in &mut self.roots {
            for slot in root.slot_rows.iter_mut().flatten() {
                *slot = new_index[*slot];
            }
        }
        self.rows = rows;
    }

    /// Sets every counter's `exclude_user` and `exclude_kernel`: perf's `--all-kernel`
    /// excludes user mode, `--all-user` kernel mode.
    pub fn exclude_modes(&mut self, exclude_user: bool, exclude_kernel: bool) {
        for (spec, event) in self.specs.iter_mut().zip(self.events.iter_mut()) {
            for attr in [&mut spec.attr, &mut event.attr] {
                attr.exclude_user = exclude_user;
                attr.exclude_kernel = exclude_kernel;
            }
        }
    }

    /// perf's `-G`: the i-th cgroup for the i-th counted row (an empty name leaves that row
    /// counting every task); one cgroup alone applies to every row. Rows in a group must
    /// share a cgroup: the kernel counts a group in one.
    pub fn assign_cgroups(&mut self, cgroups: &[String]) -> Result<(), crate::CgroupError> {
        let counters: Vec<usize> = (0..self.rows.len())
            .filter(|&r| matches!(self.rows[r].source, Source::Counter(_)))
            .collect();
        if counters.is_empty() {
            return Err(crate::CgroupError::NoEvents);
        }
        for (i, &r) in counters.iter().enumerate() {
            let name = if cgroups.len() == 1 { cgroups.first() } else { cgroups.get(i) };
            let Some(name) = name.filter(|n| !n.is_empty()) else { continue };
            self.rows[r].cgroup = Some(name.clone());
            for s in self.rows[r].specs() {
                self.specs[s].cgroup = Some(name.clone());
            }
        }
        for group in &self.groups {
            let first = group.first().map(|&s| &self.specs[s].cgroup);
            if let Some(first) = first
                && group.iter().any(|&s| &self.specs[s].cgroup != first)
            {
                let events = group.iter().map(|&s| self.specs[s].name.clone()).collect();
                return Err(crate::CgroupError::GroupSplit { events });
            }
        }
        Ok(())
    }
}

/// Whether a metric has a `DefaultMetricgroupName` to print under.
fn has_default_group(root: &Root) -> bool {
    !root.model.str(root.model.metric(root.metric).default_group).is_empty()
}
