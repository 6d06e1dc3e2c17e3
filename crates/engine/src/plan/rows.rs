//! A plan's rows and counters: adding an input (each uncore box its own counter), a second
//! counter of an input for another group, `-e` event lists, and the row a metric prints on.

use tmetric_runtime::event::{self, EventError, ResolvedEvent};
use tmetric_runtime::{CounterEvent, CounterSpec, ToolEvent};

use super::{Key, Plan, PlanRow, Resolution, RowBox, Source, Warning};
use crate::compiled::Select;

impl Plan {
    /// Puts root `r` on the row perf prints a metric on: its first directly read counter, else
    /// any counted input, else any input, else a `duration_time` row added for it; where the
    /// contract prints metrics beside events that were not counted (perf 7.x), its first
    /// directly read input that is not a tool value, counted or not. `probes` are the root's
    /// model's probe values.
    pub fn host_root(&mut self, r: usize, probes: &[f64]) {
        let root = &self.roots[r];
        let model = root.model;
        let facts = tmetric_catalog::Facts { literals: &self.literals, probes };
        let direct: Vec<u16> = model
            .metric(root.metric)
            .needed_refs(&facts)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|x| match x {
                tmetric_catalog::Ref::Id(slot) => Some(slot),
                tmetric_catalog::Ref::Metric(_) => None,
            })
            .collect();
        let all = model.needed_ids(root.metric, &facts, false).unwrap_or_default();
        let leader = direct
            .iter()
            .filter_map(|&s| root.slot_rows[s as usize])
            .find(|&row| !matches!(self.rows[row].source, Source::Tool(_)))
            .filter(|_| self.contract.metrics_on_uncounted_lines);
        let host = leader
            .or_else(|| {
                direct
                    .iter()
                    .chain(all.iter())
                    .filter_map(|&s| root.slot_rows[s as usize])
                    .find(|&row| matches!(self.rows[row].source, Source::Counter(_)))
            })
            .or_else(|| all.iter().filter_map(|&s| root.slot_rows[s as usize]).next());
        match host {
            Some(row) => {
                self.rows[row].show = true;
                self.rows[row].roots.push(r);
            }
            None => {
                let row = self.add(
                    Resolution::Tool(ToolEvent::DurationTime),
                    "duration_time".into(),
                    true,
                );
                self.rows[row].key = Key::Named(format!("metric host {r}"));
                self.rows[row].roots.push(r);
            }
        }
    }

    pub(super) fn find(&self, key: &Key) -> Option<usize> {
        self.rows.iter().position(|r| &r.key == key && r.copy_of.is_none())
    }

    /// Adds an input row; counters get a spec (each box of [`Resolution::Boxes`] one).
    /// Returns the row.
    pub fn add(&mut self, resolution: Resolution, name: String, show: bool) -> usize {
        let resolution = match resolution {
            Resolution::Boxes(boxes) => {
                let mut boxes = boxes.into_iter();
                let Some(first) = boxes.next() else {
                    return self.add(Resolution::Missing("no box".into()), name, show);
                };
                let row = self.add(Resolution::Counter(first.event), name, show);
                if let Source::Counter(spec) = self.rows[row].source {
                    self.rows[row].boxes.push(RowBox { spec, name: first.name });
                }
                for b in boxes {
                    self.add_box(row, b.event, b.name);
                }
                return row;
            }
            other => other,
        };
        let (source, key, unit, scale) = match resolution {
            Resolution::Counter(event) => {
                let key = Key::Counter(event.attr.clone(), event.cpus.clone());
                // perf's `evsel__is_clock` reads the attribute, however the event was named
                // (`software/task-clock/` as well as `task-clock`).
                let clock = event.attr.type_ == tmetric_runtime::sys::TYPE_SOFTWARE
                    && event.attr.config <= 1;
                let (unit, scale) = if clock {
                    ("msec".to_string(), 1e-6)
                } else {
                    (event.unit.clone().unwrap_or_default(), event.scale.unwrap_or(1.0))
                };
                self.specs.push(CounterSpec::from(&event));
                self.events.push(event);
                self.sticky.push(false);
                (Source::Counter(self.specs.len() - 1), key, unit, scale)
            }
            Resolution::Tool(tool) => {
                // perf 7.x's tool.json gives its events no unit; perf 6.12 printed `ns`.
                let unit = if self.contract.tool_pmu { "" } else { "ns" };
                (Source::Tool(tool), Key::Tool(tool), unit.to_string(), 1.0)
            }
            Resolution::RetireLatency => {
                (Source::RetireLatency, Key::Named(name.clone()), "cycles".to_string(), 1.0)
            }
            Resolution::Missing(reason) => {
                (Source::Missing(reason), Key::Named(name.clone()), String::new(), 1.0)
            }
            Resolution::Boxes(_) => unreachable!("boxes are added above"),
        };
        self.rows.push(PlanRow {
            name,
            source,
            unit,
            scale,
            show,
            roots: Vec::new(),
            copy_of: None,
            cgroup: None,
            boxes: Vec::new(),
            key,
        });
        self.rows.len() - 1
    }

    /// Adds a further uncore box to counter row `row` (whose first box is its own counter):
    /// a spec for `event`, printed as `name` under `-A`/`--no-merge`. Returns the spec.
    pub fn add_box(&mut self, row: usize, event: CounterEvent, name: String) -> usize {
        self.specs.push(CounterSpec::from(&event));
        self.events.push(event);
        self.sticky.push(false);
        let spec = self.specs.len() - 1;
        if self.rows[row].boxes.is_empty()
            && let Source::Counter(first) = self.rows[row].source
        {
            let name = self.rows[row].name.clone();
            self.rows[row].boxes.push(RowBox { spec: first, name });
        }
        self.rows[row].boxes.push(RowBox { spec, name });
        let types = self.rows[row].boxes.iter().map(|b| self.events[b.spec].attr.type_).collect();
        let first = self.events[self.rows[row].boxes[0].spec].attr.clone();
        self.rows[row].key = Key::Boxes(first, types);
        spec
    }

    /// A second counter for `row`'s event (every box of it), for another group.
    pub(super) fn duplicate(&mut self, row: usize) -> usize {
        let Source::Counter(_) = self.rows[row].source else { return row };
        let mut copy = self.rows[row].clone();
        let mut again = |spec: usize| {
            self.specs.push(self.specs[spec].clone());
            self.events.push(self.events[spec].clone());
            self.sticky.push(false);
            self.specs.len() - 1
        };
        if let Source::Counter(spec) = copy.source {
            copy.source = Source::Counter(again(spec));
        }
        for (k, b) in copy.boxes.iter_mut().enumerate() {
            b.spec = match copy.source {
                Source::Counter(first) if k == 0 => first,
                _ => again(b.spec),
            };
        }
        copy.copy_of = Some(row);
        copy.roots.clear();
        self.rows.push(copy);
        self.rows.len() - 1
    }

    /// Adds `-e` event lists as `resolver` reads them (perf 6.12's grammar, hybrid
    /// expansion, `--cputype`, perf's regrouping): user groups are opened as regrouped, and
    /// their topdown events are sticky, so that if the kernel refuses the group they stay
    /// behind `slots`. The resolver's warnings go to [`Plan::warnings`].
    pub fn add_event_lists(
        &mut self,
        lists: &[String],
        resolver: &event::Resolver<'_>,
    ) -> Result<(), EventError> {
        for list in lists {
            let parsed = resolver.list(list)?;
            // The row of each written uncore event opened on several boxes: its further
            // boxes are added to it, as perf merges them into one line.
            let mut box_rows: Vec<(usize, usize)> = Vec::new();
            for warning in parsed.warnings {
                let warning = Warning::EventList { list: list.clone(), warning };
                if !self.warnings.contains(&warning) {
                    self.warnings.push(warning);
                }
            }
            for group in parsed.groups {
                let mut specs = Vec::new();
                for ev in &group.events {
                    if let (ResolvedEvent::Counter(c), Some(b)) = (&ev.event, &ev.uncore_box)
                        && let Some(&(_, row)) = box_rows.iter().find(|(o, _)| *o == b.origin)
                    {
                        specs.push(self.add_box(row, c.clone(), b.name.clone()));
                        continue;
                    }
                    let (resolution, name) = match &ev.event {
                        ResolvedEvent::Counter(c) => {
                            (Resolution::Counter(c.clone()), c.name.clone())
                        }
                        ResolvedEvent::Tool(t) => (
                            Resolution::Tool(*t),
                            ev.tool_name.clone().unwrap_or_else(|| t.name().to_string()),
                        ),
                    };
                    let row = self.add(resolution, name, true);
                    if let Some(b) = &ev.uncore_box
                        && let Source::Counter(spec) = self.rows[row].source
                    {
                        box_rows.push((b.origin, row));
                        self.rows[row].boxes.push(RowBox { spec, name: b.name.clone() });
                    }
                    if let Source::Counter(s) = self.rows[row].source {
                        specs.push(s);
                        self.sticky[s] = group.grouped && ev.topdown.is_some();
                    }
                }
                if specs.len() > 1 || group.grouped {
                    self.groups.push(specs);
                }
            }
        }
        Ok(())
    }
}
