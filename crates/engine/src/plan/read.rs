//! A [`Plan`]'s read accessors: its fields are the engine's, and front ends (the printers, the
//! exporter, record files, the region API, the CLI) read them here, by the fields' names.

use tmetric_catalog::Model;
use tmetric_model::Literal;
use tmetric_runtime::{CounterEvent, CounterSpec};

use super::{Plan, PlanRow, RetireEvent, Root, Warning};
use crate::schedule::{Request, Schedule};

impl Plan {
    /// Inputs, in print order.
    pub fn rows(&self) -> &[PlanRow] {
        &self.rows
    }

    /// Counters to open.
    pub fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }

    /// The events behind the specs.
    pub fn events(&self) -> &[CounterEvent] {
        &self.events
    }

    /// Groups: spec indices, leader first.
    pub fn groups(&self) -> &[Vec<usize>] {
        &self.groups
    }

    /// Per spec: it must stay in its group with the `slots` leader if the group is split.
    pub fn sticky(&self) -> &[bool] {
        &self.sticky
    }

    /// The selected metrics.
    pub fn roots(&self) -> &[Root] {
        &self.roots
    }

    /// The scheduler's output for the metrics' hardware events (`None` before any metric).
    pub fn schedule(&self) -> Option<&Schedule> {
        self.schedule.as_ref()
    }

    /// The scheduler's request (for `plan` output).
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Machine literals, by [`Literal::index`].
    pub fn literals(&self) -> &[f64; Literal::COUNT] {
        &self.literals
    }

    /// Per model of the roots: its probe values on the machine.
    pub fn probes(&self) -> &[(&'static Model, Vec<f64>)] {
        &self.probes
    }

    /// Retire latencies in cycles by event name (from sampling or `--retire-latency`).
    pub fn retire_latency(&self) -> &[(String, f64)] {
        &self.retire_latency
    }

    /// Warnings to print once before counting.
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// Per `:R` input: its name, the metrics that read it, and the event to sample for it.
    pub fn retire_events(&self) -> &[RetireEvent] {
        &self.retire_events
    }

    /// The roots are perf's `Default` metric group (no `-e`, no `-M`).
    pub fn default_metrics(&self) -> bool {
        self.default_metrics
    }

    /// perf's `-A`/`--no-merge`: the boxes of an uncore row print one line each.
    pub fn per_box(&self) -> bool {
        self.per_box
    }

    /// The perf release whose output the plan is printed as.
    pub fn contract(&self) -> &'static crate::Contract {
        self.contract
    }
}
