//! The offline crate's integration tests (`counts`, `perflog`) in one binary: each
//! integration-test file would otherwise be compiled and linked on its own.

mod counts;
mod perflog;
