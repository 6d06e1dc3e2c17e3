//! `tmetric_print::stat`: where `stat`'s and `report`'s notes go in each layout, and the
//! `--tree` flags as a [`TreeView`]. The counts, the tree and the legacy columns themselves
//! are checked through the binary (`tests/cli_stat.rs`, `tests/cli_sim.rs`, `cli_record.rs`).

use std::sync::{Arc, Mutex};

use tmetric_print::stat::{StatPrinter, TreeView};
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
    p.notes(&notes()).unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    assert_eq!(text, " Notes:\n   tma_x: threshold unknown\n   group {a,b} was split\n\n");
    assert!(warned.lock().unwrap().is_empty());
}

#[test]
fn csv_notes_are_comment_lines_in_the_output() {
    let warned = Arc::default();
    let mut p = printer(Layout::Csv(";".into()), &warned);
    p.notes(&notes()).unwrap();
    let text = String::from_utf8(p.into_inner()).unwrap();
    assert_eq!(text, "# tma_x: threshold unknown\n# group {a,b} was split\n");
    assert!(warned.lock().unwrap().is_empty());
}

#[test]
fn json_notes_are_warnings_unless_they_would_share_the_jsons_stream() {
    let warned = Arc::default();
    let mut p = printer(Layout::Json, &warned);
    p.notes(&notes()).unwrap();
    assert!(p.into_inner().is_empty());
    assert_eq!(*warned.lock().unwrap(), notes());

    let warned = Arc::default();
    let mut p = printer(Layout::Json, &warned);
    p.json_notes = false;
    p.notes(&notes()).unwrap();
    assert!(p.into_inner().is_empty());
    assert!(warned.lock().unwrap().is_empty());
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
