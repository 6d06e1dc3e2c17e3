//! `tmetric list`'s text for an event's counters (`print::list`).

use tmetric_catalog::catalog::CounterMask;
use tmetric_print::list::{counters_text, ranges};

#[test]
fn counter_ranges() {
    assert_eq!(ranges(&[0, 1, 2, 3]), "0-3");
    assert_eq!(ranges(&[0, 1, 3]), "0,1,3");
    assert_eq!(ranges(&[1, 2, 3, 4, 5, 6, 7]), "1-7");
    assert_eq!(counters_text(CounterMask { generic: 0, fixed: 2 }), "fixed 1");
    assert_eq!(counters_text(CounterMask::ANY), "any");
    assert_eq!(counters_text(CounterMask { generic: 0xf, fixed: 0 }), "0-3");
}
