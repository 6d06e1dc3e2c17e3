//! The `tmetric` binary: the global allocator and a call into the CLI library (`lib.rs`).
#![forbid(unsafe_code)]

// Readers of long logs allocate per row and per line: mimalloc made `eval --from-perf` a fifth
// faster than glibc's allocator (docs/from-perf.md, "Long logs").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tmetric::main()
}
