//! `out`: a sink's file gets every report and is private.
//!
//! A file that cannot be written falls back to standard error: that is tested through the
//! binary (`cli_harden::a_full_output_file_is_named_and_the_counts_go_to_standard_error`),
//! whose standard error the test captures; here it would write into the test run's own.

mod tests {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use tmetric_print::out::*;

    #[test]
    fn a_working_file_gets_everything_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("counts");
        let mut sink = Sink::create(&path).unwrap();
        write!(sink, "a").unwrap();
        sink.flush().unwrap();
        write!(sink, "b").unwrap();
        sink.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "ab");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
}
