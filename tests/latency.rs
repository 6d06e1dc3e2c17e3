//! `tmetric latency` end to end through the binary.
