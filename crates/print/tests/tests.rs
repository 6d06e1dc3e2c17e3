//! The printer's tests: perf 6.12's layouts over hand-made views, `stat`'s notes, names.

mod captures;
mod layouts;
mod names;
mod stat;
