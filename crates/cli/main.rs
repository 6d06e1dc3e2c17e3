//! The `tmetric` binary: the global allocator and a call into the CLI library (`lib.rs`).
#![forbid(unsafe_code)]

// Readers of long logs allocate per row and per line: mimalloc made `eval --from-perf` a fifth
// faster than glibc's allocator (docs/from-perf.md, "Long logs"). `ExitOnOom` turns a failed
// allocation into one line and exit 2 instead of an abort with a backtrace (`ulimit -v`).
#[global_allocator]
static GLOBAL: tmetric_runtime::alloc::ExitOnOom<mimalloc::MiMalloc> =
    tmetric_runtime::alloc::ExitOnOom(mimalloc::MiMalloc);

fn main() -> std::process::ExitCode {
    tmetric::main()
}
