//! Region boundaries: `begin` and `end` read the groups (resetting topdown counters when the
//! schedule says so), take the difference with PERF_METRICS decoded between the reads, add it
//! to the region's total, and the `Running` guard that ends a region when dropped.

use tmetric_runtime::Syscalls;
use tmetric_runtime::counter::RawCount;
use tmetric_runtime::mmap::Unreadable;

use crate::topdown;
use crate::{Measurement, Pages, Region, RegionError, Sample};

impl<S: Syscalls, P: Pages> Measurement<S, P> {
    /// Opens region `name`: reads the counters (resetting topdown counters first when the
    /// schedule says so).
    pub fn begin(&mut self, name: &str) -> Result<(), RegionError> {
        if let Some(open) = self.open {
            return Err(RegionError::Nesting(format!(
                "region `{name}` started while `{}` is open: regions do not nest",
                self.regions[open].name
            )));
        }
        let region = match self.regions.iter().position(|r| r.name == name) {
            Some(r) => r,
            None => {
                self.regions.push(Region {
                    name: name.to_string(),
                    runs: 0,
                    seconds: 0.0,
                    total: vec![RawCount::default(); self.session.plan().specs().len()],
                    topdown: None,
                });
                self.regions.len() - 1
            }
        };
        let mut before = std::mem::take(&mut self.before);
        let result = self.read_into(&mut before);
        let mut reset = false;
        if result.is_ok() {
            for (g, td) in before.topdown.iter().enumerate() {
                if let Some((read, _)) = td
                    && self.schedule.due(read.slots, self.last_slots)
                {
                    let fd = self.groups[g].fds[0];
                    if let Err(errno) = self.session.syscalls().reset(fd, true) {
                        self.before = before;
                        return Err(RegionError::Syscall {
                            what: "resetting",
                            event: self.session.plan().specs()[self.groups[g].specs[0]]
                                .name
                                .clone(),
                            errno,
                        });
                    }
                    reset = true;
                }
            }
        }
        let result = if reset && result.is_ok() { self.read_into(&mut before) } else { result };
        self.before = before;
        result?;
        self.open = Some(region);
        Ok(())
    }

    /// Closes the open region and adds it to the region's total, without building a
    /// [`Sample`] (the cheapest stop; [`Measurement::last`] builds one afterwards).
    pub fn end_total(&mut self) -> Result<(), RegionError> {
        self.last = None;
        let Some(region) = self.open else {
            return Err(RegionError::Nesting("stop without a started region".into()));
        };
        let mut after = std::mem::take(&mut self.after);
        let result = self.read_into(&mut after);
        self.after = after;
        self.open = None;
        result?;
        let (before, after) = (&self.before, &self.after);
        let seconds = match (before.at, after.at) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        self.delta.clear();
        self.delta.extend(after.values.iter().zip(&before.values).map(|(b, a)| b.since(*a)));
        let mut topdown_acc: Option<([i128; 8], u64, bool, f64)> = None;
        let mut topdown = None;
        for (g, group) in self.groups.iter().enumerate() {
            let (Some(layout), Some((a, seq_a)), Some((b, seq_b))) =
                (&group.topdown, before.topdown[g], after.topdown[g])
            else {
                continue;
            };
            if seq_a != seq_b {
                // The kernel rescheduled the group (folding and zeroing slots and
                // PERF_METRICS): the raw values no longer share a base.
                return Err(RegionError::Rdpmc {
                    event: self.session.plan().specs()[group.specs[0]].name.clone(),
                    why: Unreadable::Unstable,
                });
            }
            let t = topdown::between(a, b, layout.level2).ok();
            let mut fields = [0i128; 8];
            for (i, f) in fields.iter_mut().enumerate() {
                *f = topdown::field_slots(a, b, i);
            }
            // The metric events' counts for the compiled formulas: slots-scaled fields, as
            // the kernel's own read() computes them.
            for (m, field) in layout.fields.iter().enumerate() {
                if let Some(i) = field {
                    self.delta[group.specs[m]].value = (fields[*i].max(0) / 255) as u64;
                }
            }
            self.delta[group.specs[0]].value = b.slots.saturating_sub(a.slots);
            if let Some(t) = t {
                self.last_slots = Some(t.slots);
                topdown_acc = Some((fields, t.slots, layout.level2, t.error_bound));
            }
            topdown = t;
        }
        let r = &mut self.regions[region];
        r.runs += 1;
        r.seconds += seconds;
        for (t, d) in r.total.iter_mut().zip(&self.delta) {
            t.value += d.value;
            t.enabled += d.enabled;
            t.running += d.running;
        }
        r.topdown = match (r.topdown.take(), topdown_acc) {
            (Some((mut f, s, l2, e)), Some((g, t, _, e2))) => {
                for i in 0..8 {
                    f[i] += g[i];
                }
                Some((f, s + t, l2, e.max(e2)))
            }
            (x, y) => x.or(y),
        };
        self.last = Some((region, seconds, topdown));
        Ok(())
    }

    /// Closes the open region: reads the counters and returns its sample, which is also
    /// added to the region's total.
    pub fn end(&mut self) -> Result<Sample, RegionError> {
        self.end_total()?;
        Ok(self.last().expect("a region just ended"))
    }

    /// Starts region `name`; the guard's [`Running::stop`] returns the sample.
    pub fn start(&mut self, name: &str) -> Result<Running<'_, S, P>, RegionError> {
        self.begin(name)?;
        Ok(Running { m: Some(self) })
    }

    /// Runs `work` as region `name`.
    pub fn measure<T>(
        &mut self,
        name: &str,
        work: impl FnOnce() -> T,
    ) -> Result<(T, Sample), RegionError> {
        self.begin(name)?;
        let value = work();
        let sample = self.end()?;
        Ok((value, sample))
    }
}

/// An open region; [`Running::stop`] ends it (dropping it ends it too, discarding errors).
pub struct Running<'a, S: Syscalls, P: Pages> {
    m: Option<&'a mut Measurement<S, P>>,
}

impl<S: Syscalls, P: Pages> Running<'_, S, P> {
    /// Ends the region and returns its sample.
    pub fn stop(mut self) -> Result<Sample, RegionError> {
        let m = self.m.take().expect("a running region has its measurement");
        m.end()
    }

    /// Ends the region, adding it to the region's total only (no [`Sample`] is built).
    pub fn finish(mut self) -> Result<(), RegionError> {
        let m = self.m.take().expect("a running region has its measurement");
        m.end_total()
    }
}

impl<S: Syscalls, P: Pages> Drop for Running<'_, S, P> {
    fn drop(&mut self) {
        if let Some(m) = self.m.take() {
            let _ = m.end_total();
        }
    }
}
