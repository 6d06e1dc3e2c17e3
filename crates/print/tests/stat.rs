//! `tmetric_print::stat`: where `stat`'s and `report`'s notes go in each layout, and the
//! `--tree` flags as a [`TreeView`]. The counts, the tree and the legacy columns themselves
//! are checked through the binary (`tests/cli_stat.rs`, `tests/cli_sim.rs`, `cli_record.rs`).

use std::sync::{Arc, Mutex};

use tmetric_print::stat::{Explain, StatPrinter, TreeView};
use tmetric_print::{Config, Layout, Title};

/// A printer over a buffer whose warnings are collected in `warned`.
fn printer(layout: Layout, warned: &Arc<Mutex<Vec<String>>>) -> StatPrinter<Vec<u8>> {
    let title = Title { target: "true".into(), runs: 1 };
    let warned = Arc::clone(warned);
    let warn = Box::new(move |note: &str| warned.lock().unwrap().push(note.to_string()));
    StatPrinter::new(Vec::new(), Config::new(layout), title, warn)
}

fn notes() -> Vec<String> {
    vec!["tma_x: threshold unknown".to_string(), "group {a,b} was split".to_string()]
}

#[test]
fn default_layout_notes_follow_the_footer_in_the_output() {
    let warned = Arc::default();
    let mut p = printer(Layout::Std, &warned);
    assert_eq!(p.explain, Explain::Block);
    p.notes(&notes()).unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    // Flush left after the footer, as perf's own hints.
    assert_eq!(text, "tma_x: threshold unknown\ngroup {a,b} was split\n\n");
    assert!(warned.lock().unwrap().is_empty());
}

/// CSV and JSON on standard error: perf's lines only, unless `-v` or `--full-metrics` asks.
#[test]
fn csv_and_json_notes_join_perfs_lines_only_when_asked() {
    for layout in [Layout::Csv(";".into()), Layout::Json] {
        let warned = Arc::default();
        let mut p = printer(layout.clone(), &warned);
        assert_eq!(p.explain, Explain::Quiet);
        p.notes(&notes()).unwrap();
        assert!(p.into_inner().is_empty(), "{layout:?}");
        assert!(warned.lock().unwrap().is_empty());
    }
    let csv = Layout::Csv(";".into());
    assert_eq!(Explain::choose(&csv, true, true, false), Explain::Comments);
    assert_eq!(Explain::choose(&csv, true, false, true), Explain::Comments);
    assert_eq!(Explain::choose(&Layout::Json, true, false, true), Explain::Json);
    assert_eq!(Explain::choose(&Layout::Json, true, true, false), Explain::Stderr);
    for layout in [csv.clone(), Layout::Json] {
        // `-o FILE`: standard error is free for them.
        assert_eq!(Explain::choose(&layout, false, false, false), Explain::Stderr);
    }
    assert_eq!(Explain::choose(&Layout::Std, true, false, false), Explain::Block);

    let warned = Arc::default();
    let mut p = printer(csv, &warned);
    p.explain = Explain::Comments;
    p.notes(&notes()).unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    assert_eq!(text, "# tma_x: threshold unknown\n# group {a,b} was split\n");

    let mut p = printer(Layout::Json, &warned);
    p.explain = Explain::Json;
    p.notes(&notes()).unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    assert_eq!(
        text,
        "{\"note\":\"tma_x: threshold unknown\"}\n{\"note\":\"group {a,b} was split\"}\n"
    );

    let mut p = printer(Layout::Json, &warned);
    p.explain = Explain::Stderr;
    p.notes(&notes()).unwrap();
    assert!(p.into_inner().is_empty());
    assert_eq!(*warned.lock().unwrap(), notes());
}

#[test]
fn tree_flags() {
    assert_eq!(TreeView::new(false, false), TreeView::Off);
    assert_eq!(TreeView::new(false, true), TreeView::Off);
    assert_eq!(TreeView::new(true, false), TreeView::Pruned);
    assert_eq!(TreeView::new(true, true), TreeView::All);
    assert!(!TreeView::Off.is_on() && TreeView::Pruned.is_on() && TreeView::All.is_on());
    assert_eq!(TreeView::default(), TreeView::Off);
}
