//! Machine files: the built-in ones match their names, a user's file loads as the machine it
//! describes, and every kind of bad file is an error naming the file, the line and what was
//! expected.

use tmetric_sim::{MACHINE_FILES, Machine};

/// `text` written to a private temporary file named `name`, loaded as `--pmu-sim` loads it.
fn load(name: &str, text: &str) -> (Result<Machine, String>, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(name);
    std::fs::write(&path, text).expect("the file");
    let path = path.display().to_string();
    let loaded = Machine::load(&path).expect("a path is loaded as a file");
    (loaded.map_err(|e| e.to_string()), path)
}

fn builtin(name: &str) -> &'static str {
    MACHINE_FILES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t).expect("a built-in file")
}

/// The 1-based line of `text` holding `needle`.
fn line_with(text: &str, needle: &str) -> usize {
    text.lines().position(|l| l.contains(needle)).expect("the needle") + 1
}

#[test]
fn every_built_in_name_has_its_file_and_only_those() {
    let mut names: Vec<&str> = Machine::names().iter().chain(Machine::guests()).copied().collect();
    names.sort_unstable();
    let mut files: Vec<&str> = MACHINE_FILES.iter().map(|(n, _)| *n).collect();
    files.sort_unstable();
    assert_eq!(names, files);
    for (name, _) in MACHINE_FILES {
        assert_eq!(Machine::named(name).unwrap().name, *name);
    }
}

#[test]
fn a_users_machine_file_is_the_machine_it_describes() {
    let text = builtin("amdzen4").replace("\"name\": \"amdzen4\"", "\"name\": \"my-zen4\"");
    let (loaded, _) = load("my-zen4.json", &text);
    let mine = loaded.expect("a good file loads");
    let zen4 = Machine::named("amdzen4").unwrap();
    assert_eq!(mine.name, "my-zen4");
    assert_eq!(Machine { name: "amdzen4".into(), ..mine }, zen4);
    // A name that is no machine and no path is left to the caller to list the machines.
    assert!(Machine::load("pentium").is_none());
    let missing = Machine::load("/nonexistent/zen.json").expect("a path").unwrap_err();
    assert!(
        missing.to_string().starts_with("cannot read the machine file `/nonexistent/zen.json`")
    );
    assert!(missing.to_string().contains("amdzen5"), "{missing}");
}

/// Each mistake gives the file, the line (and for syntax the column) and what was expected.
#[test]
fn bad_machine_files_name_the_file_the_line_and_what_was_expected() {
    let good = builtin("amdzen5");
    // (what is replaced, by what, the line the message must name (the replacement's, unless
    // another needle is given; `+` after the needle: the line after it, where a checked
    // object ends), what the message says)
    let cases: &[(&str, &str, Option<&str>, &str)] = &[
        // A syntax error: a comma is gone, found at the next key.
        (
            "\"nmi_watchdog\": true,",
            "\"nmi_watchdog\": true",
            Some("\"pmus\""),
            "expected `,` or `}`",
        ),
        ("\"Zen5\"", "\"Zen6\"", None, "unknown variant `Zen6`, expected one of `Skylake`"),
        (
            "\"gp\": 6",
            "\"gp\": 40",
            Some("\"files\"+"),
            "gp 40: a Zen5 core has 1 to 15 general counters (CPUID 0x80000022 EBX num_core_pmc)",
        ),
        (
            "\"umask\": \"config:8-15,24-27\"",
            "\"umask\": \"config:0-15,24-27\"",
            Some("\"umask\": \"config:0-15,24-27\"+"),
            "format `umask`: bit 0 of config is already `event`'s",
        ),
        (
            "\"event=0x120,umask=0x01\"",
            "\"event=0x120,unmask=0x01\"",
            Some("\"files\"+"),
            "event `ref-cycles`: `unmask` is not a format of the PMU (its formats: event, umask, edge, inv, cmask)",
        ),
        (
            "\"irperf\"",
            "\"irperf2\"",
            Some("\"msr\""),
            "`irperf2` is not an event of `msr`; the kernel's are tsc, aperf, mperf, pperf, smi, ptsc, irperf, cpu_thermal_margin",
        ),
        (
            "\"amd_l3\", \"counters\": 6, \"config_mask\": \"0x0307fc000000ffff\", \"cpumask\": \"0\"",
            "\"amd_l3\", \"counters\": 6, \"config_mask\": \"0x0307fc000000ffff\", \"cpumask\": \"9\"",
            None,
            "`9`: `9` is not a CPU of the machine (0 to 7)",
        ),
        (
            "\"nmi_watchdog\": true,",
            "\"nmi_watchdog\": true, \"hz\": 123,",
            None,
            "`hz`: 123 is not a CONFIG_HZ",
        ),
        (
            "\"edge\": \"config:18\",",
            "\"edge\": \"config:18\", \"edge\": \"config:19\",",
            None,
            "`edge` is given twice",
        ),
        // The line of the first PMU of the name.
        (
            "\"name\": \"amd_df\"",
            "\"name\": \"amd_l3\"",
            Some("\"amd_l3\", \"counters\": 6"),
            "PMU `amd_l3` is given twice",
        ),
        (
            "\"counters\": 4, \"config_mask\": \"0x3f0f00ffff\"",
            "\"counters\": 80, \"config_mask\": \"0x3f0f00ffff\"",
            Some("\"formats\": { \"event\": \"config:0-7,32-37\"+"),
            "uncore `amd_df`: counters 80: a box has at most 63 general counters",
        ),
        (
            "\"name\": \"amdzen5\"",
            "\"name\": \"../amdzen5\"",
            None,
            "`name`: `../amdzen5` is not a machine name",
        ),
        (
            "\"catalogue_model\": \"amdzen5\"",
            "\"catalogue_model\": \"amdzen4\"",
            Some("none"),
            "`catalogue_model` is `amdzen4`, but perf's mapfile picks x86/amdzen5 for the cpuid `AuthenticAMD-26-44-0`",
        ),
    ];
    for (from, to, line_of, says) in cases {
        assert!(good.contains(from), "{from}");
        let text = good.replacen(from, to, 1);
        let (loaded, path) = load("bad.json", &text);
        let err = loaded.expect_err(to);
        assert!(err.contains(says), "{to}: {err}");
        match line_of {
            Some("none") => assert!(err.starts_with(&format!("{path}: ")), "{to}: {err}"),
            _ => {
                let needle = line_of.unwrap_or(to);
                let line = match needle.strip_suffix('+') {
                    Some(needle) => line_with(&text, needle) + 1,
                    None => line_with(&text, needle),
                };
                assert!(err.starts_with(&format!("{path}:{line}:")), "{to}: line {line}: {err}");
            }
        }
    }
}

/// A hybrid's core PMUs each cover their own CPUs: two that share one are refused.
#[test]
fn core_pmus_covering_one_cpu_twice_are_refused() {
    let text = builtin("alderlake").replace("\"cpus\": \"4-7\"", "\"cpus\": \"3-7\"");
    let (loaded, path) = load("hybrid.json", &text);
    let err = loaded.unwrap_err();
    assert!(
        err.starts_with(&format!(
            "{path}:{}: core PMUs `cpu_core` and `cpu_atom` both cover CPU 3",
            line_with(&text, "\"cpu_atom\"")
        )),
        "{err}"
    );
}

/// An Arm PMU's `caps/threshold_max` bounds the `threshold` field (12 bits): a value the
/// kernel could not print, or one past the field, is refused naming the PMU and the cap.
#[test]
fn an_arm_threshold_max_past_the_field_is_refused() {
    for bad in ["0x00001000", "many"] {
        let text = builtin("neoverse-n2")
            .replace("\"threshold_max\": \"0x00000000\"", &format!("\"threshold_max\": \"{bad}\""));
        let (loaded, path) = load("n2.json", &text);
        let err = loaded.unwrap_err();
        assert!(err.starts_with(&format!("{path}:")), "{err}");
        assert!(
            err.contains("arm64 PMU `armv8_pmuv3_0` cap `threshold_max`")
                && err.contains("give a number up to 0xfff"),
            "{err}"
        );
    }
}
