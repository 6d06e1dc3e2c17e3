//! The counts file of `eval --counts` (`tmetric_offline::counts`): key matching, positioned parse
//! errors, the value rule, and a fuzzer of the reader.

mod tests {
    use tmetric_offline::counts::*;

    fn expr_slot(text: &str) -> SlotName {
        SlotName::of_expr_id(text)
    }

    #[test]
    fn pmu_rules() {
        let bare = expr_slot("INST_RETIRED.ANY");
        assert_eq!(slot_matches(&bare, &key_of("cpu/INST_RETIRED.ANY/", false)), Some(false));
        assert_eq!(slot_matches(&bare, &key_of("inst_retired.any", false)), Some(false));
        assert_eq!(slot_matches(&bare, &key_of("INST_RETIRED.ANY:k", false)), None);
        assert_eq!(slot_matches(&bare, &key_of("msr/INST_RETIRED.ANY/", false)), None);
        let core = expr_slot("cpu_core@TOPDOWN.SLOTS@");
        assert_eq!(slot_matches(&core, &key_of("cpu_core/slots/", false)), Some(false));
        assert_eq!(slot_matches(&core, &key_of("cpu_atom/TOPDOWN.SLOTS/", false)), None);
        let tsc = expr_slot("TSC");
        assert_eq!(slot_matches(&tsc, &key_of("msr/tsc/", false)), Some(false));
        let imc = expr_slot("uncore_imc@UNC_M_CAS_COUNT.RD@");
        assert_eq!(
            slot_matches(&imc, &key_of("uncore_imc_3/UNC_M_CAS_COUNT.RD/", false)),
            Some(true)
        );
        assert_eq!(slot_matches(&imc, &key_of("uncore_imc_x/UNC_M_CAS_COUNT.RD/", false)), None);
        let latency = expr_slot("MEM_LOAD_RETIRED.L3_HIT:R");
        assert_eq!(slot_matches(&latency, &key_of("MEM_LOAD_RETIRED.L3_HIT", true)), Some(false));
        assert_eq!(slot_matches(&latency, &key_of("MEM_LOAD_RETIRED.L3_HIT", false)), None);
        let tool = expr_slot("duration_time");
        assert_eq!(slot_matches(&tool, &key_of("cpu/duration_time/", false)), None);
        assert_eq!(slot_matches(&tool, &key_of("duration_time", false)), Some(false));
    }

    #[test]
    fn parse_errors_have_positions() {
        let err = parse("{\n  \"A\": 1,\n  \"B\": \"x\"\n}", "f.json").unwrap_err().to_string();
        assert!(err.starts_with("f.json:3:"), "{err}");
        let err = parse("{\"literals\": {\"smt\": 1}}", "f.json").unwrap_err().to_string();
        assert!(err.contains("unknown literal `smt`"), "{err}");
        let file = parse("{\"A\": null, \"duration_time_ns\": 2e9, \"B\": \"<not counted>\"}", "f")
            .unwrap();
        assert!(file.entries[0].value.is_nan());
        assert_eq!(file.entries[1].event, key_of("duration_time", false));
        assert_eq!(file.entries[1].value, 2.0);
        assert_eq!(file.entries[2].value, 0.0);
    }

    #[test]
    fn values_follow_one_rule() {
        assert_eq!(number(" 12.5 "), Ok(12.5));
        assert_eq!(number("0"), Ok(0.0));
        assert!(number("NaN").unwrap_err().to_string().contains("not a finite number"));
        assert!(number("inf").unwrap_err().to_string().contains("not a finite number"));
        assert!(number("1e400").unwrap_err().to_string().contains("out of the range of a double"));
        assert!(number("-1").unwrap_err().to_string().contains("is negative"));
        assert!(number("x").unwrap_err().to_string().contains("is not a number"));
        let err = parse("{\"A\": -1}", "f").unwrap_err().to_string();
        assert!(err.starts_with("f:1:8: -1 is negative"), "{err}");
        let bom = parse("\u{feff}{\"A\": 1}", "f").unwrap();
        assert_eq!(bom.entries[0].value, 1.0);
    }
}

/// Fuzzing the counts-file reader (and the key-to-input mapping of what it accepts) with
/// proptest, on the stable toolchain. CI runs a short pass; `FUZZ_CASES=N` sets the cases per
/// property for a long run (`cargo test -p tmetric-engine --test tests counts::fuzz`). Shrunk failures are
/// kept in `crates/offline/tests/counts.proptest-regressions` and replayed first.
mod fuzz {
    use proptest::prelude::*;
    use proptest::test_runner::FileFailurePersistence;

    use tmetric_offline::counts::*;

    fn cases() -> u32 {
        std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
    }

    /// Parses; on success maps the keys onto a hybrid model, an uncore-heavy one and the
    /// common metrics; on failure checks the message is short and positioned.
    fn exercise(text: &str) -> Result<(), TestCaseError> {
        match parse(text, "fuzz.json") {
            Ok(file) => {
                for entry in &file.entries {
                    prop_assert!(!entry.value.is_sign_negative() || entry.value.is_nan());
                    prop_assert!(!entry.value.is_infinite());
                }
                for model in ["x86/meteorlake", "x86/sapphirerapids", "common/common"] {
                    if let Some(model) = tmetric_catalog::model(model) {
                        let _ = assign(model, &file);
                    }
                }
            }
            Err(err) => {
                let message = err.to_string();
                prop_assert!(message.starts_with("fuzz.json:"), "{message}");
                prop_assert!(message.len() < 2000, "{} bytes", message.len());
            }
        }
        Ok(())
    }

    const PIECES: &[&str] = &[
        "{",
        "}",
        "[",
        "]",
        ":",
        ",",
        " ",
        "\"",
        "\u{feff}",
        "null",
        "true",
        "1",
        "-1",
        "0.5",
        "1e400",
        "-0",
        "2e9",
        "\"NaN\"",
        "\"inf\"",
        "\"<not counted>\"",
        "\"<not supported>\"",
        "\"123.000000\"",
        "\"counts\"",
        "\"retire_latency\"",
        "\"literals\"",
        "\"source_count\"",
        "\"aggr_nr\"",
        "\"model\"",
        "\"duration_time\"",
        "\"duration_time_ns\"",
        "\"smt_on\"",
        "\"#num_cpus\"",
        "\"cpu_core/TOPDOWN.SLOTS/\"",
        "\"cpu_atom/TOPDOWN.SLOTS/\"",
        "\"slots\"",
        "\"uncore_imc_0/UNC_M_CAS_COUNT.RD/\"",
        "\"UNC_M_CAS_COUNT.RD\"",
        "\"INST_RETIRED.ANY\"",
        "\"cpu@X\\\\,cmask\\\\=1@\"",
        "\"MEM_LOAD_RETIRED.L3_HIT:R\"",
        "\"msr/tsc/\"",
        "\"é\"",
    ];

    fn soup() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(PIECES), 0..80).prop_map(|v| v.concat())
    }

    /// Well-formed files: keys and values from the pieces, in the flat or the structured form.
    fn objects() -> impl Strategy<Value = String> {
        let key = prop::sample::select(&PIECES[20..]);
        let value = prop::sample::select(&PIECES[9..24]);
        let pairs = prop::collection::vec((key, value), 0..30);
        (pairs, any::<bool>()).prop_map(|(pairs, nested)| {
            let body: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            if nested {
                format!("{{\"counts\": {{{}}}}}", body.join(", "))
            } else {
                format!("{{{}}}", body.join(", "))
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: cases(),
            failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
            ..ProptestConfig::default()
        })]

        #[test]
        fn random_bytes(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
            exercise(&String::from_utf8_lossy(&bytes))?;
        }

        #[test]
        fn json_soup(text in soup()) {
            exercise(&text)?;
        }

        #[test]
        fn shaped_files(text in objects()) {
            exercise(&text)?;
        }
    }

    /// Inputs that failed once, kept as regression cases.
    #[test]
    fn regressions() {
        for text in [
            "{\"NaN\": \"NaN\"}".to_string(),
            "{\"A\": \"inf\"}".to_string(),
            "{\"A\": \"1e400\"}".to_string(),
            "{\"A\": -3}".to_string(),
            "[".repeat(100_000),
            "{\"A\": {\"B\": ".repeat(50_000),
            format!("{{\"A\": \"{}\"}}", "z".repeat(1_000_000)),
        ] {
            let err = parse(&text, "f").unwrap_err().to_string();
            assert!(err.len() < 2000, "{} bytes", err.len());
        }
        // Found by `shaped_files`: `-0` was kept negative, and x / -0 is -inf.
        let zero = parse("{\"<not supported>\": -0, \"B\": -0.0}", "f").unwrap();
        assert!(zero.entries.iter().all(|e| e.value.to_bits() == 0));
        let both = parse("{\"duration_time\": 1, \"duration_time_ns\": 2e9}", "f").unwrap();
        let err = assign(tmetric_catalog::common(), &both).unwrap_err().to_string();
        assert!(err.contains("`duration_time` and `duration_time_ns` both give"), "{err}");
    }
}
