//! perf's built-in level-1 TopDown from the kernel's older `topdown-*` events (perf's `--topdown` patch series, for
//! CPUs before Ice Lake that have no PERF_METRICS): the formulas, the sanitising of small
//! negative values, the "backend bound/bad spec" fallback and the colour thresholds.
//!
//! All inputs are counts already scaled by their sysfs `.scale` (total slots are cycles times
//! the pipeline width the kernel reports). A value is `None` when nothing was counted.

/// The five kernel events, by sysfs alias.
pub const LEGACY_EVENTS: [&str; 5] = [
    "topdown-total-slots",
    "topdown-slots-issued",
    "topdown-slots-retired",
    "topdown-fetch-bubbles",
    "topdown-recovery-bubbles",
];

/// One aggregation unit's counts of the five events (scaled); `recovery_bubbles` is `None`
/// on CPUs without that event.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LegacyCounts {
    /// `topdown-total-slots`.
    pub total_slots: f64,
    /// `topdown-slots-issued`.
    pub slots_issued: f64,
    /// `topdown-slots-retired`.
    pub slots_retired: f64,
    /// `topdown-fetch-bubbles`.
    pub fetch_bubbles: f64,
    /// `topdown-recovery-bubbles`, when the CPU has it.
    pub recovery_bubbles: Option<f64>,
}

/// Level 1 as fractions of the slots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LegacyLevel1 {
    /// Retiring.
    pub retiring: f64,
    /// Bad speculation.
    pub bad_speculation: f64,
    /// Frontend bound.
    pub frontend_bound: f64,
    /// Backend bound; `None` when no slot was counted (perf prints no value then).
    pub backend_bound: Option<f64>,
    /// The backend line's label: "backend bound", or "backend bound/bad spec" when recovery
    /// bubbles are missing and bad speculation cannot be separated from it.
    pub backend_label: &'static str,
}

/// perf's sanitising: values in [-0.02, 0) are rounding noise and read as 0; and there is no
/// `-0.0`, which would print as `-0.0`.
pub fn sanitize(x: f64) -> f64 {
    if (-0.02..=0.0).contains(&x) { 0.0 } else { x }
}

/// The `--topdown` patch series' formulas.
pub fn level1(c: &LegacyCounts) -> LegacyLevel1 {
    let ratio = |x: f64| if c.total_slots != 0.0 { x / c.total_slots } else { 0.0 };
    let bad_speculation =
        sanitize(ratio(c.slots_issued - c.slots_retired + c.recovery_bubbles.unwrap_or(0.0)));
    let retiring = sanitize(ratio(c.slots_retired));
    let frontend_bound = sanitize(ratio(c.fetch_bubbles));
    let sum = frontend_bound + bad_speculation + retiring;
    let backend_bound = if c.total_slots > 0.0 {
        Some(if sum == 0.0 { 0.0 } else { sanitize(1.0 - sum) })
    } else {
        None
    };
    LegacyLevel1 {
        retiring,
        bad_speculation,
        frontend_bound,
        backend_bound,
        backend_label: if c.recovery_bubbles.is_some() {
            "backend bound"
        } else {
            "backend bound/bad spec"
        },
    }
}

/// The colour perf gives a level-1 value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Colour {
    /// A bottleneck worth a look.
    Red,
    /// Mostly useful work.
    Green,
    /// Nothing to flag.
    Plain,
}

/// Red over 20% frontend or backend bound and over 10% bad speculation; green over 70%
/// retiring (perf's `--topdown` patch series).
pub fn colour(label: &str, fraction: f64) -> Colour {
    match label {
        "frontend bound" | "backend bound" | "backend bound/bad spec" if fraction > 0.2 => {
            Colour::Red
        }
        "bad speculation" if fraction > 0.1 => Colour::Red,
        "retiring" if fraction > 0.7 => Colour::Green,
        _ => Colour::Plain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(
        total: f64,
        issued: f64,
        retired: f64,
        fetch: f64,
        recovery: Option<f64>,
    ) -> LegacyCounts {
        LegacyCounts {
            total_slots: total,
            slots_issued: issued,
            slots_retired: retired,
            fetch_bubbles: fetch,
            recovery_bubbles: recovery,
        }
    }

    #[test]
    fn formulas_by_hand() {
        // 1000 slots: 500 retired, 600 issued, 20 recovery bubbles, 200 fetch bubbles.
        let l1 = level1(&counts(1000.0, 600.0, 500.0, 200.0, Some(20.0)));
        assert_eq!(l1.retiring, 0.5);
        assert_eq!(l1.bad_speculation, 0.12);
        assert_eq!(l1.frontend_bound, 0.2);
        assert!((l1.backend_bound.unwrap() - 0.18).abs() < 1e-12);
        assert_eq!(l1.backend_label, "backend bound");
    }

    #[test]
    fn small_negatives_read_as_zero_and_never_minus_zero() {
        // Retired exceeds issued by 1% of the slots: bad speculation -0.01 -> 0.
        let l1 = level1(&counts(1000.0, 490.0, 500.0, 100.0, Some(0.0)));
        assert_eq!(l1.bad_speculation, 0.0);
        assert!(l1.bad_speculation.is_sign_positive());
        // Beyond -0.02 the value stays, as perf leaves it.
        let l1 = level1(&counts(1000.0, 400.0, 500.0, 100.0, Some(0.0)));
        assert!((l1.bad_speculation + 0.1).abs() < 1e-12);
        assert!(sanitize(-0.0).is_sign_positive());
        // A backend share of -0.01 from rounding is 0.
        let l1 = level1(&counts(1000.0, 500.0, 500.0, 510.0, Some(0.0)));
        assert_eq!(l1.backend_bound, Some(0.0));
    }

    #[test]
    fn without_recovery_bubbles_backend_includes_bad_spec() {
        let l1 = level1(&counts(1000.0, 600.0, 500.0, 200.0, None));
        assert_eq!(l1.backend_label, "backend bound/bad spec");
        assert_eq!(l1.bad_speculation, 0.1);
    }

    #[test]
    fn nothing_counted_gives_no_backend_value() {
        let l1 = level1(&counts(0.0, 0.0, 0.0, 0.0, Some(0.0)));
        assert_eq!(l1.backend_bound, None);
        assert_eq!(l1.retiring, 0.0);
    }

    #[test]
    fn colours_follow_seed_000() {
        assert_eq!(colour("frontend bound", 0.21), Colour::Red);
        assert_eq!(colour("frontend bound", 0.2), Colour::Plain);
        assert_eq!(colour("backend bound/bad spec", 0.5), Colour::Red);
        assert_eq!(colour("bad speculation", 0.11), Colour::Red);
        assert_eq!(colour("retiring", 0.71), Colour::Green);
        assert_eq!(colour("retiring", 0.5), Colour::Plain);
    }
}
