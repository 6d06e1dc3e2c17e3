//! Notes appended after a metric, truncated last lines, mixed layouts, and
//! damaged counts or run shares.
use crate::common::{found, row, value};
use tmetric_perfstat::{Layout, parse};

const ROWS: &str = "\
 Performance counter stats for './bench':

         3,000,000      EXE_ACTIVITY.2_PORTS_UTIL        #     12.0 %  tma_ports_utilized_2  (60.00%)
        25,000,000      CPU_CLK_UNHALTED.THREAD                                              (60.00%)
";

#[test]
fn a_note_after_the_metric_name_does_not_hide_it() {
    // Appended after the name, and after the run share.
    for (tail, share) in [
        ("%  tma_ports_utilized_2   <- checked by Bob  (60.00%)", Some(60.0)),
        ("%  tma_ports_utilized_2  (60.00%)   <- checked by Bob", Some(60.0)),
    ] {
        let text = format!(
            "         3,000,000      EXE_ACTIVITY.2_PORTS_UTIL        #     12.0 {tail}\n        25,000,000      CPU_CLK_UNHALTED.THREAD   (60.00%)\n"
        );
        let log = parse(&text, "note.txt").unwrap();
        let block = &log.blocks[0];
        let (printed_row, metric) = block.printed_metric("tma_ports_utilized_2", None).unwrap();
        assert_eq!((metric.value, metric.unit.as_str()), (Some(12.0), "%"));
        assert_eq!(metric.note.as_deref(), Some("<- checked by Bob"), "{tail}");
        assert_eq!(printed_row.running_pct, share, "{tail}");
        assert_eq!(log.warnings.len(), 1, "{:?}", log.warnings);
        assert_eq!(log.warnings[0].line, 1);
        assert!(log.warnings[0].message.contains("`<- checked by Bob`"), "{:?}", log.warnings);
        // Both rows stay in one group (same share), so the metric's inputs are its own.
        let clk = found(block.lookup("CPU_CLK_UNHALTED.THREAD", Some("tma_ports_utilized_2")));
        assert!(clk.in_metric_group);
        assert_eq!(clk.value, 25e6);
    }
}

#[test]
fn a_truncated_last_line_is_reported() {
    // Cut inside the event name: kept, with a warning naming the last line.
    let cut_name = format!("{ROWS}        25,000,000      CPU_CLK_UNHA");
    let log = parse(&cut_name, "cut.txt").unwrap();
    let last = log.warnings.last().unwrap();
    assert_eq!(last.line, 5);
    assert!(last.message.contains("ends without a newline"), "{last}");
    assert!(last.message.contains("truncated"), "{last}");
    assert_eq!(row(&log.blocks[0], "CPU_CLK_UNHA").line, 5);
    // Cut after the count: cannot be read, so it is skipped as truncated instead of failing.
    let cut_count = format!("{ROWS}        25,000,0");
    let log = parse(&cut_count, "cut.txt").unwrap();
    assert_eq!(log.blocks[0].rows.len(), 2);
    let last = log.warnings.last().unwrap();
    assert_eq!(last.line, 5);
    assert!(last.message.starts_with("truncated last line `25,000,0`"), "{last}");
    assert_eq!(value(&log.blocks[0], "CPU_CLK_UNHALTED.THREAD", None), 25e6);
    // A complete log ends with a newline: no warning.
    assert!(parse(ROWS, "ok.txt").unwrap().warnings.is_empty());
}

#[test]
fn a_mix_of_layouts_is_reported() {
    let csv = "3000000,,EXE_ACTIVITY.2_PORTS_UTIL,600000,60.00,12.0,%  tma_ports_utilized_2\n25000000,,CPU_CLK_UNHALTED.THREAD,600000,60.00,,\n";
    // CSV rows after text rows: not rows of the text layout, so they are skipped, and the
    // mix is named.
    let mixed = format!("{ROWS}\n{csv}");
    let log = parse(&mixed, "mixed.txt").unwrap();
    assert_eq!(log.layout, Layout::Std);
    assert_eq!(log.blocks[0].rows.len(), 2);
    assert_eq!(log.skipped.after.ranges, [(6, 7)]);
    let mix = &log.warnings[0];
    assert_eq!(mix.line, 6);
    assert!(
        mix.message.contains("2 line(s) from line 6 on are rows of the -x , (CSV) layout"),
        "{mix}"
    );
    assert!(mix.message.contains("read in the default text layout"), "{mix}");

    // JSON rows after CSV rows: the CSV reader skips them, and the mix is reported once.
    let json = "{\"counter-value\" : \"3000000.000000\", \"unit\" : \"\", \"event\" : \"EXE_ACTIVITY.2_PORTS_UTIL\", \"event-runtime\" : 600000, \"pcnt-running\" : 60.00}\n";
    let log = parse(&format!("{csv}{json}"), "mixed.csv").unwrap();
    assert_eq!(log.layout, Layout::Csv(",".into()));
    let mix = log.warnings.iter().find(|w| w.message.starts_with("a mix of layouts")).unwrap();
    assert_eq!(mix.line, 3);
    assert!(mix.message.contains("-j (JSON)"), "{mix}");
}

#[test]
fn damaged_counts_and_run_shares_are_warned_about() {
    let text = "\
        -1,000      INST_RETIRED.ANY
         2,000      CPU_CLK_UNHALTED.THREAD          (120.00%)
         3,000      EXE_ACTIVITY.1_PORTS_UTIL        (0.00%)
         4,000      CPU_CLK_UNHALTED.REF_TSC         (50.00%)
";
    let log = parse(text, "bad.txt").unwrap();
    let lines: Vec<usize> = log.warnings.iter().map(|w| w.line).collect();
    assert_eq!(lines, [1, 2, 3], "{:?}", log.warnings);
    assert!(log.warnings[0].message.contains("not a non-negative number"));
    assert!(log.warnings[1].message.contains("120.00% is outside 0-100%"));
    assert!(log.warnings[2].message.contains("ran 0.00% of the time"));
    let events: Vec<&str> = log.blocks[0].rows.iter().map(|r| r.event.as_str()).collect();
    assert_eq!(events, ["CPU_CLK_UNHALTED.REF_TSC"]);
}
