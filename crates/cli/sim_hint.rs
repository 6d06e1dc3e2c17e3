//! "Try it there" advice: the simulated machines (`--pmu-sim`) whose catalogue model defines
//! a metric, for the messages of `stat`, `plan`, `describe` and `-M` misses. The engine does
//! not know the simulator, so the CLI, which links both, answers for it.

use tmetric_catalog::Model;

/// The advice below as the engine's plan set-up takes it (`-M` and `-e` misses).
pub const HINTS: tmetric_engine::setup::Hints =
    tmetric_engine::setup::Hints { metric: Some(simulated_hint), event: Some(simulated_for_event) };

/// The simulated machines (`--pmu-sim NAME`) whose catalogue model defines `item` (a metric or
/// metric group, by perf's `-M` matching), each with that model's `arch/name`: one machine
/// per model, in [`tmetric_sim::Machine::names`] order, a machine of `prefer`'s model first
/// (this machine's model, or `--model`'s, when it is simulated).
pub fn simulated_for(item: &str, prefer: Option<&Model>) -> Vec<(&'static str, String)> {
    use tmetric_engine::Select;
    let mut found: Vec<(&'static str, String)> = Vec::new();
    for &name in tmetric_sim::Machine::names() {
        let Some(machine) = tmetric_sim::Machine::named(name) else { continue };
        let Some(model) = tmetric_catalog::model(&machine.catalogue_model) else { continue };
        if model.select(item).is_empty() || found.iter().any(|(_, m)| *m == model.path()) {
            continue;
        }
        let preferred = prefer.is_some_and(|p| std::ptr::eq(p, model));
        let entry = (name, model.path());
        if preferred { found.insert(0, entry) } else { found.push(entry) }
    }
    found
}

/// `--pmu-sim amdzen4` (x86/amdzen4's metrics): the first of [`simulated_for`], as a flag
/// with its model, for "try it there" advice; `None` when no simulated machine's model
/// defines `item`.
pub fn simulated_hint(item: &str, prefer: Option<&Model>) -> Option<(String, String)> {
    simulated_for(item, prefer)
        .into_iter()
        .next()
        .map(|(name, model)| (format!("--pmu-sim {name}"), model))
}

/// The first simulated machine (`--pmu-sim NAME`) whose catalogue model has the vendor event
/// `event` (by name, ignoring case), with that model's `arch/name`.
pub fn simulated_for_event(event: &str) -> Option<(&'static str, String)> {
    tmetric_sim::Machine::names().iter().find_map(|&name| {
        let machine = tmetric_sim::Machine::named(name)?;
        let model = tmetric_catalog::model(&machine.catalogue_model)?;
        let found = model.events.iter().any(|e| model.str(e.name).eq_ignore_ascii_case(event));
        found.then(|| (name, model.path()))
    })
}
