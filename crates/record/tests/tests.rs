//! The record crate's tests, in one binary: the JSON-lines reader (`jsonl`), perf.data's
//! cpuid spelling and file handling (`perf`), and refusals of events and groups kept as data
//! (`refusals`).

mod jsonl;
mod perf;
mod refusals;
