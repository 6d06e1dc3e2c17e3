//! Values checked for range: durations, read counts and simulated workloads that cannot be
//! meant are refused with what would be accepted, never a panic, an endless wait or a
//! silent wrong number.
