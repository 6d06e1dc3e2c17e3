//! The printer's tests: perf 6.12's layouts over hand-made views, and `list`'s counter text.

mod captures;
mod layouts;
mod list;
