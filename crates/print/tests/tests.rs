//! The printer's tests: perf 6.12's layouts over hand-made views.

mod captures;
mod layouts;
