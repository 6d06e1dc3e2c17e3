//! The root package's one integration-test binary: the `tmetric` CLI end to end.

mod catalogue;
mod latency;
mod trees;
