//! Memory that runs out (`ulimit -v`): an allocation that fails ([`ExitOnOom`], the global
//! allocator's wrapper) or a main thread's stack that cannot grow ([`report_stack_exhaustion`])
//! ends tmetric with one line on standard error and exit code 2, instead of Rust's abort
//! (SIGABRT, a core and, with `RUST_BACKTRACE` set, a backtrace) or a bare SIGSEGV.
//!
//! Rust's allocation error handler cannot be replaced on stable, but it only runs when the
//! global allocator returns null, so the wrapper checks for null first. It lives here, in the
//! one crate allowed `unsafe`, because implementing `GlobalAlloc` is unsafe and the binary's
//! `main.rs` forbids it. Nothing on the way out may allocate: the line is built in a fixed
//! buffer and written with `write(2)`, and the process ends with `_exit(2)` (no destructors,
//! no `atexit` handlers, which could allocate again).
//!
//! The code is tmetric's for every error it reports (2), which is also what perf 6.1 exits with
//! when it runs out of memory (its event parser's "out of dynamic memory", flex's exit code).
//! The cost: a fallible allocation (`try_reserve`) ends the process too instead of returning an
//! error; tmetric makes none, and its dependencies' would be on memory it cannot get anyway.
//! Buffered standard output is lost, and `--pmu-sim`'s private directory in `$TMPDIR` is left
//! behind (mode 0700, nobody else's to use).
//!
//! The main thread's stack is mapped as it grows, and under `ulimit -v` the kernel refuses to
//! grow it once the heap took the rest: a SIGSEGV at an address in the stack's own range,
//! which Rust's handler (it only knows the guard page at the bottom) turns into a bare
//! SIGSEGV. Other threads' stacks are mapped whole when they start, so a failure there is
//! `thread::spawn`'s error, which the callers word.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};

/// The exit code of a run that ran out of memory.
pub const EXIT_CODE: i32 = 2;

/// A global allocator that ends the process with one line and [`EXIT_CODE`] when the
/// allocator it wraps returns null: `#[global_allocator] static A: ExitOnOom<M> = ExitOnOom(M);`.
pub struct ExitOnOom<A>(pub A);

// SAFETY: every method forwards to the wrapped allocator with the caller's arguments and
// returns its pointer unchanged; a null pointer never returns, so the contracts of `A` hold.
unsafe impl<A: GlobalAlloc> GlobalAlloc for ExitOnOom<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's `layout` obeys `alloc`'s contract, which `A::alloc` shares.
        let ptr = unsafe { self.0.alloc(layout) };
        if ptr.is_null() {
            out_of_memory(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let ptr = unsafe { self.0.alloc_zeroed(layout) };
        if ptr.is_null() {
            out_of_memory(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `A`, with `layout`.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's arguments obey `realloc`'s contract, which `A::realloc` shares.
        let new = unsafe { self.0.realloc(ptr, layout, new_size) };
        if new.is_null() {
            out_of_memory(new_size);
        }
        new
    }
}

/// Set by the first thread to run out: another that runs out meanwhile leaves the line to it.
static REPORTING: AtomicBool = AtomicBool::new(false);

const PREFIX: &[u8] = b"tmetric: out of memory: could not allocate ";
const SUFFIX: &[u8] =
    b" bytes; raise the virtual memory limit (`ulimit -v`) or the cgroup's memory.max\n";

/// The line for a failed allocation of `size` bytes in `buf`, without allocating; its length.
fn line(size: usize, buf: &mut [u8; 160]) -> usize {
    let mut digits = [0u8; 20];
    let mut n = size;
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut len = 0;
    for part in [PREFIX, &digits[start..], SUFFIX] {
        buf[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    len
}

/// Says that `size` bytes could not be had and ends the process with [`EXIT_CODE`].
#[cold]
fn out_of_memory(size: usize) -> ! {
    let mut buf = [0u8; 160];
    let len = line(size, &mut buf);
    // Standard error's lock, held until the process ends: another thread's line (serve's
    // `serving on`, a warning) cannot follow this one, nor be cut by it. It allocates nothing,
    // and it is reentrant, so a thread that ran out while writing takes it again. (Not in the
    // stack overflow's signal handler: the interrupted code may hold it half-updated.)
    let guard = std::io::stderr().lock();
    std::mem::forget(guard);
    say_and_exit(&buf[..len])
}

/// Writes `text` to standard error (once in the process, whichever thread comes first) and
/// ends the process with [`EXIT_CODE`]; async-signal-safe and allocation-free.
fn say_and_exit(text: &[u8]) -> ! {
    if !REPORTING.swap(true, Ordering::SeqCst) {
        let mut done = 0;
        while done < text.len() {
            let rest = &text[done..];
            // SAFETY: `rest` is initialised memory of `rest.len()` bytes.
            let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
            if n > 0 {
                done += n as usize;
            } else if n < 0
                && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
            {
                continue;
            } else {
                // Standard error closed, full or non-blocking and full: nothing more to say.
                break;
            }
        }
    }
    // SAFETY: `_exit` ends the process without running anything that could allocate.
    unsafe { libc::_exit(EXIT_CODE) }
}

const STACK_LINE: &[u8] = b"tmetric: out of memory: could not grow the stack; raise the virtual memory limit (`ulimit -v`) or the cgroup's memory.max\n";

/// The registered thread's stack: the lowest address it may grow to (its `RLIMIT_STACK` for
/// the main thread) and its top, and the thread's id; set once by [`report_stack_exhaustion`],
/// 0 before.
static STACK_LOW: AtomicUsize = AtomicUsize::new(0);
static STACK_TOP: AtomicUsize = AtomicUsize::new(0);
static STACK_TID: AtomicI64 = AtomicI64::new(0);
/// The SIGSEGV action before ours (Rust's stack-overflow handler), given every other fault.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// `SEGV_MAPERR`, the `si_code` of a fault at an address nothing is mapped at (the libc crate
/// does not define it for Linux).
const SEGV_MAPERR: libc::c_int = 1;

/// A fault this close above the stack's lowest address is the stack reaching its own limit
/// (`ulimit -s`), which Rust's handler reports as an overflow: left to it.
const OVERFLOW_MARGIN: usize = 64 * 1024;

/// Makes a SIGSEGV from the calling thread's stack failing to grow print one line and exit 2;
/// every other SIGSEGV goes, as before, to the handler that was there (Rust's, which reports a
/// stack overflow or dies by the signal). Call once, first thing, on the main thread (the one
/// whose stack grows on demand). Does nothing where the stack cannot be found.
pub fn report_stack_exhaustion() {
    let Some((low, top)) = this_threads_stack() else { return };
    if !have_alternate_stack() {
        return;
    }
    STACK_LOW.store(low, Ordering::SeqCst);
    STACK_TOP.store(top, Ordering::SeqCst);
    STACK_TID.store(gettid(), Ordering::SeqCst);
    // SAFETY: plain `sigaction` calls with zeroed, then filled, structures; the handler only
    // makes async-signal-safe calls and reads atomics and a set `OnceLock`.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_segv as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGSEGV, &action, &mut previous) == 0 {
            let _ = PREVIOUS.set(previous);
        }
    }
}

/// The calling thread's id.
fn gettid() -> i64 {
    // SAFETY: `gettid` takes no argument and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// The calling thread's stack as glibc sees it: the lowest address it may take (for the main
/// thread: its top less `RLIMIT_STACK`) and its top.
fn this_threads_stack() -> Option<(usize, usize)> {
    // SAFETY: `pthread_getattr_np` fills the zeroed attribute for the calling thread, which is
    // read with `pthread_attr_getstack` and then destroyed.
    unsafe {
        let mut attr: libc::pthread_attr_t = std::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return None;
        }
        let mut addr: *mut libc::c_void = std::ptr::null_mut();
        let mut size: libc::size_t = 0;
        let got = libc::pthread_attr_getstack(&attr, &mut addr, &mut size);
        libc::pthread_attr_destroy(&mut attr);
        (got == 0 && !addr.is_null()).then(|| (addr as usize, addr as usize + size))
    }
}

/// Whether this thread has a signal stack to run a handler on when its own is exhausted
/// (Rust's runtime gives the main thread one); one is made if not.
fn have_alternate_stack() -> bool {
    const SIZE: usize = 64 * 1024;
    // SAFETY: `sigaltstack` reads into a zeroed `stack_t`; the mapping given to it is this
    // function's own, never unmapped, so it stays valid for the process's life.
    unsafe {
        let mut current: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut current) != 0 {
            return false;
        }
        if current.ss_flags & libc::SS_DISABLE == 0 {
            return true;
        }
        let map = libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if map == libc::MAP_FAILED {
            return false;
        }
        let stack = libc::stack_t { ss_sp: map, ss_flags: 0, ss_size: SIZE };
        libc::sigaltstack(&stack, std::ptr::null_mut()) == 0
    }
}

extern "C" fn on_segv(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an `SA_SIGINFO` handler; only
    // async-signal-safe calls follow.
    unsafe {
        let addr = (*info).si_addr() as usize;
        let low = STACK_LOW.load(Ordering::Relaxed);
        let top = STACK_TOP.load(Ordering::Relaxed);
        if gettid() == STACK_TID.load(Ordering::Relaxed)
            && (*info).si_code == SEGV_MAPERR
            && addr >= low.saturating_add(OVERFLOW_MARGIN)
            && addr < top
        {
            say_and_exit(STACK_LINE);
        }
        // Any other fault: the handler before ours decides, as if ours were never there (a
        // stack overflow into the guard page is Rust's message and SIGABRT, anything else
        // death by SIGSEGV). It is called directly, so it sees this very fault; without one,
        // the default action runs when the faulting instruction runs again.
        match PREVIOUS.get() {
            Some(previous)
                if previous.sa_sigaction != libc::SIG_DFL
                    && previous.sa_sigaction != libc::SIG_IGN =>
            {
                if previous.sa_flags & libc::SA_SIGINFO != 0 {
                    let handler: extern "C" fn(
                        libc::c_int,
                        *mut libc::siginfo_t,
                        *mut libc::c_void,
                    ) = std::mem::transmute(previous.sa_sigaction);
                    handler(signal, info, context);
                } else {
                    let handler: extern "C" fn(libc::c_int) =
                        std::mem::transmute(previous.sa_sigaction);
                    handler(signal);
                }
            }
            _ => {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGSEGV, &default, std::ptr::null_mut());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    use super::*;

    /// Runs [`child`] in a process of its own doing `what`; its signal and standard error.
    fn in_child(what: &str) -> (Option<i32>, String) {
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "alloc::tests::child", "--ignored", "--nocapture"])
            .args(["--test-threads", "1"])
            .env("TMETRIC_ALLOC_CHILD", what)
            .output()
            .unwrap();
        (out.status.signal(), String::from_utf8_lossy(&out.stderr).into_owned())
    }

    #[test]
    #[ignore = "run by the tests below in a process of its own"]
    fn child() {
        report_stack_exhaustion();
        assert_eq!(STACK_TID.load(Ordering::SeqCst), gettid(), "the stack was not found");
        match std::env::var("TMETRIC_ALLOC_CHILD").as_deref() {
            Ok("overflow") => {
                // Endless on purpose: it ends in the guard page.
                #[allow(unconditional_recursion)]
                fn deeper(n: u64) -> u64 {
                    let frame = std::hint::black_box([n; 64]);
                    frame[0] + deeper(n + 1) + std::hint::black_box(frame[63])
                }
                deeper(0);
            }
            Ok("null") => {
                // SAFETY: none: the point is the fault.
                let _ = unsafe {
                    std::ptr::read_volatile(std::hint::black_box(
                        std::ptr::null::<u64>().wrapping_add(1),
                    ))
                };
            }
            other => panic!("unknown child {other:?}"),
        }
    }

    /// Faults the handler does not own reach the handler before it, as if it were not there:
    /// a stack overflow is still Rust's message and SIGABRT, a stray pointer SIGSEGV.
    #[test]
    fn other_faults_are_left_to_the_handler_before() {
        let (signal, text) = in_child("overflow");
        assert_eq!(signal, Some(libc::SIGABRT), "{text}");
        assert!(text.contains("has overflowed its stack"), "{text}");
        assert!(!text.contains("out of memory"), "{text}");
        let (signal, text) = in_child("null");
        assert_eq!(signal, Some(libc::SIGSEGV), "{text}");
        assert!(!text.contains("out of memory"), "{text}");
    }

    #[test]
    fn the_line_names_the_size_and_the_remedy_without_allocating() {
        let mut buf = [0u8; 160];
        let len = line(19200, &mut buf);
        assert_eq!(
            std::str::from_utf8(&buf[..len]).unwrap(),
            "tmetric: out of memory: could not allocate 19200 bytes; raise the virtual memory limit (`ulimit -v`) or the cgroup's memory.max\n"
        );
        let len = line(0, &mut buf);
        assert!(std::str::from_utf8(&buf[..len]).unwrap().contains(" allocate 0 bytes;"));
        // The longest size still fits the buffer.
        let len = line(usize::MAX, &mut buf);
        assert!(
            std::str::from_utf8(&buf[..len])
                .unwrap()
                .contains(" allocate 18446744073709551615 bytes;")
        );
    }
}
