//! Unit tests of `crates/cli/out.rs`, through the CLI's library (kept out of the crate so
//! that a clean `cargo test` compiles the CLI once, not a second time in test mode).

mod tests {
    use std::io::Write;
    use std::path::Path;
    use tmetric::out::*;

    #[test]
    fn a_full_file_falls_back_and_is_reported() {
        let mut sink = Sink::create(Path::new("/dev/full")).unwrap();
        writeln!(sink, "1,msec,task-clock").unwrap();
        sink.flush().unwrap();
        assert!(matches!(sink.dest, Dest::Stderr));
        let err = sink.finish().unwrap_err().to_string();
        assert_eq!(
            err,
            "/dev/full is incomplete (No space left on device); the counts were printed to standard error"
        );
    }

    #[test]
    fn a_working_file_gets_everything() {
        let path = std::env::temp_dir().join(format!("tmetric-sink-{}", std::process::id()));
        let mut sink = Sink::create(&path).unwrap();
        write!(sink, "a").unwrap();
        sink.flush().unwrap();
        write!(sink, "b").unwrap();
        sink.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "ab");
        let _ = std::fs::remove_file(&path);
    }
}
