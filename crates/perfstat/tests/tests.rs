//! Integration tests of the perf stat importer: real perf 6.1 captures, hand-written logs in each
//! layout, the Meteor Lake blocks of perf's TPEBS patch series, errors, and a no-panic property test.
mod common;
mod errors;
mod fuzz;
mod hand;
mod kept;
mod real;
mod robust;
mod seed;
