//! Unit tests of `crates/cli/stat.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use tmetric::output::plain_number;
    use tmetric::stat::*;
    use tmetric_engine as engine;

    #[test]
    fn numbers_group_like_perf() {
        assert_eq!(grouped_number(1234567.0, 0), "1,234,567");
        assert_eq!(grouped_number(999.0, 0), "999");
        assert_eq!(grouped_number(1000.0, 0), "1,000");
        assert_eq!(grouped_number(1234.567, 2), "1,234.57");
        assert_eq!(grouped_number(0.54, 2), "0.54");
        assert_eq!(grouped_number(-1234.0, 0), "-1,234");
    }

    #[test]
    fn thread_column_matches_perfs_output() {
        // perf's own output, captured on this kind of machine for the perfstat reader.
        let std = include_str!("../../crates/perfstat/tests/data/real/std_per_thread.txt");
        let line = std.lines().find(|l| l.contains("task-clock")).unwrap();
        let ours = format!(
            "{}{:>18} {:<4} task-clock",
            thread_prefix(&Layout::Std, "", "sh", 10057),
            "55.32",
            "msec"
        );
        // The capture is perf 6.1's, which pads the tid to 8 (`%-8d` and a space); perf 6.12
        // pads it to 7 (`%-*d ` with PID_LEN 7), as tmetric does: one space less, the rest
        // the same.
        let perf_6_12 = line.replacen("10057 ", "10057", 1);
        assert!(perf_6_12.starts_with(&ours), "perf: {perf_6_12:?}\nours: {ours:?}");
        let csv = include_str!("../../crates/perfstat/tests/data/real/csv_per_thread.txt");
        let csv_prefix = thread_prefix(&Layout::Csv(",".into()), "", "sh", 10081);
        assert!(csv.lines().all(|l| l.starts_with(&csv_prefix)), "{csv_prefix:?}");
        let json = include_str!("../../crates/perfstat/tests/data/real/json_per_thread.txt");
        let json_prefix = format!("{{{}", thread_prefix(&Layout::Json, "", "sh", 10103));
        assert!(json.lines().all(|l| l.starts_with(&json_prefix)), "{json_prefix:?}");
        // A comm that needs quoting stays valid JSON.
        assert_eq!(thread_prefix(&Layout::Json, "", "a\"b", 7), "\"thread\" : \"a\\\"b-7\", ");
    }

    #[test]
    fn csv_and_json_metrics_keep_plain_number() {
        assert_eq!(plain_number(0.0031234567890123), "0.0031234567890123");
        assert_eq!(plain_number(2.5), "2.5");
        assert_eq!(plain_number(-3.0), "-3");
        assert_eq!(plain_number(f64::NAN), "nan");
    }

    #[test]
    fn tsc_frequency_from_the_model_name() {
        let text = "model name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n";
        assert_eq!(engine::plan::tsc_from_model_name(text), 2.1e9);
        assert!(engine::plan::tsc_from_model_name("model name\t: AMD EPYC\n").is_nan());
    }

    #[test]
    fn floats_print_as_c_does() {
        assert_eq!(c_float(0.5), "0.500000");
        assert_eq!(c_float(f64::NAN), "nan");
    }
}
