//! perf's config file syntax and booleans as tmetric reads them (`crates/cli/perfconfig.rs`),
//! checked against what perf's `util/config.c` accepts and refuses.

use tmetric::for_tests::{parse_config as parse, parse_config_bool as parse_bool};

#[test]
fn perfs_syntax_reads_sections_values_quotes_and_comments() {
    let text = "# perf config\n[stat]\n\tbig-num = false ; why\n  No-csv-summary\n[core \"x\"]\nproc-map-timeout = \"5 00\"\n";
    let (items, bad) = parse(text);
    assert_eq!(bad, None);
    let keys: Vec<(&str, Option<&str>, usize)> =
        items.iter().map(|i| (i.key.as_str(), i.value.as_deref(), i.line)).collect();
    assert_eq!(
        keys,
        [
            ("stat.big-num", Some("false"), 3),
            ("stat.no-csv-summary", None, 4),
            ("core.x.proc-map-timeout", Some("5 00"), 6)
        ]
    );
}

#[test]
fn a_line_that_does_not_parse_stops_the_file_where_it_is() {
    let (items, bad) = parse("[stat]\nbig-num = no\nbig-num false\nno-csv-summary\n");
    assert_eq!(items.len(), 1);
    let (line, why) = bad.expect("line 3 is bad");
    assert_eq!(line, 3);
    assert!(why.contains("expected `=` after `big-num`"), "{why}");
    let (_, bad) = parse("[stat\n");
    assert_eq!(bad.map(|b| b.0), Some(1));
    let (_, bad) = parse("[stat]\nx = \"open\n");
    assert_eq!(bad.map(|b| b.0), Some(2));
    let (_, bad) = parse("[stat]\n=1\n");
    assert_eq!(bad.map(|b| b.0), Some(2));
}

#[test]
fn booleans_are_perfs() {
    assert_eq!(parse_bool("Yes"), Some(true));
    assert_eq!(parse_bool("off"), Some(false));
    assert_eq!(parse_bool(""), Some(false));
    assert_eq!(parse_bool("0"), Some(false));
    assert_eq!(parse_bool("2k"), Some(true));
    assert_eq!(parse_bool("0x0"), Some(false));
    assert_eq!(parse_bool("maybe"), None);
}
