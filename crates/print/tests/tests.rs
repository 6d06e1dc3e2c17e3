//! The printer's tests: perf 6.12's layouts over hand-made views, `stat`'s notes, names,
//! `list`'s counter text, `out`'s sink.

mod captures;
mod layouts;
mod list;
mod names;
mod out;
mod stat;
