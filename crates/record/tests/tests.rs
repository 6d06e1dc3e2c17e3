//! The record crate's tests, in one binary: the JSON-lines reader (`jsonl`), perf.data's
//! cpuid spelling and file handling (`perf`), and refusals kept as data (`refusals`).

mod jsonl;
mod perf;
mod refusals;
