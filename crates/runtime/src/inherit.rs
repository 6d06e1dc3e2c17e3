//! What tmetric itself was started with, so that the workload gets exactly that, as perf's
//! workload gets what perf was started with: signal dispositions (which were ignored, less
//! those perf's workload always gets with their default action: [`DEFAULT_IN_WORKLOAD`]) and
//! the signal mask, the `RLIMIT_NOFILE` soft limit, and which standard descriptors were
//! closed.
//!
//! Rust's runtime changes some of these before `main`: it ignores SIGPIPE (so a workload such
//! as `seq 1000000 | head -1` would see EPIPE instead of dying of the signal) and opens
//! `/dev/null` on a closed descriptor 0, 1 or 2; tmetric later raises its own `RLIMIT_NOFILE`
//! and catches signals. So the state is captured by a function in `.init_array`, which the
//! C runtime calls before Rust's `main` wrapper runs (std itself reads `argv` the same way),
//! and put back in the forked child just before `exec` ([`restore_in_child`]).
//!
//! Without the capture (a platform whose C runtime skips `.init_array`), the child falls back
//! to default dispositions, an empty mask and the soft limit seen before tmetric raised it.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

/// The highest signal number restored (Linux's `_NSIG - 1`).
const LAST_SIGNAL: i32 = 64;

/// Signals perf 6.12's workload always gets with their default action, whatever perf was
/// started with: `cmd_stat` catches SIGINT, SIGCHLD, SIGALRM and SIGABRT before it forks, and
/// `exec` resets caught signals; its child sets SIGTERM to default. Every other signal keeps
/// what perf inherited (SIGHUP under `nohup`, SIGQUIT in a background job, and SIGUSR1, whose
/// exec-error handler perf installs only after the fork).
pub const DEFAULT_IN_WORKLOAD: [i32; 5] =
    [libc::SIGINT, libc::SIGCHLD, libc::SIGALRM, libc::SIGABRT, libc::SIGTERM];

static CAPTURED: AtomicBool = AtomicBool::new(false);
/// Bit `n - 1`: signal `n` was ignored at start.
static IGNORED: AtomicU64 = AtomicU64::new(0);
/// Bit `n - 1`: signal `n` was blocked at start.
static BLOCKED: AtomicU64 = AtomicU64::new(0);
/// `RLIMIT_NOFILE` at start (`u64::MAX` for `RLIM_INFINITY`).
static NOFILE_SOFT: AtomicU64 = AtomicU64::new(0);
static NOFILE_HARD: AtomicU64 = AtomicU64::new(0);
static NOFILE_KNOWN: AtomicBool = AtomicBool::new(false);
/// Bit `fd`: standard descriptor `fd` (0, 1, 2) was closed at start.
static CLOSED_STD: AtomicU8 = AtomicU8::new(0);

/// Records the state at process start (called from `.init_array`, before Rust's runtime).
extern "C" fn capture_at_start() {
    capture();
}

// The C runtime calls every `.init_array` entry before `main`; `#[used]` keeps the entry
// although nothing names it. It lives in this module, next to `restore_in_child`, so the
// object file holding it is linked whenever the workload code is.
#[used]
#[unsafe(link_section = ".init_array")]
static CAPTURE_AT_START: extern "C" fn() = capture_at_start;

fn capture() {
    let mut ignored = 0u64;
    let mut blocked = 0u64;
    // SAFETY: sigaction with a null new action only reads the current one into `old`;
    // sigprocmask with a null new set only reads the mask; both write plain-data locals.
    unsafe {
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        if libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask) == 0 {
            for signal in 1..=LAST_SIGNAL {
                if libc::sigismember(&mask, signal) == 1 {
                    blocked |= 1 << (signal - 1);
                }
            }
        }
        for signal in 1..=LAST_SIGNAL {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
            {
                ignored |= 1 << (signal - 1);
            }
        }
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            NOFILE_SOFT.store(limit.rlim_cur, Ordering::Relaxed);
            NOFILE_HARD.store(limit.rlim_max, Ordering::Relaxed);
            NOFILE_KNOWN.store(true, Ordering::Relaxed);
        }
        let mut closed = 0u8;
        for fd in 0..3 {
            if libc::fcntl(fd, libc::F_GETFD) < 0 {
                closed |= 1 << fd;
            }
        }
        CLOSED_STD.store(closed, Ordering::Relaxed);
    }
    IGNORED.store(ignored, Ordering::Relaxed);
    BLOCKED.store(blocked, Ordering::Relaxed);
    CAPTURED.store(true, Ordering::Release);
}

/// Records the `RLIMIT_NOFILE` limits before tmetric changes them, when the start-up capture
/// did not run (the first record wins).
pub(crate) fn note_nofile(soft: u64, hard: u64) {
    if !NOFILE_KNOWN.swap(true, Ordering::AcqRel) {
        NOFILE_SOFT.store(soft, Ordering::Relaxed);
        NOFILE_HARD.store(hard, Ordering::Relaxed);
    }
}

/// Whether standard descriptor `fd` (0, 1 or 2) was closed when tmetric started (Rust's
/// runtime then put `/dev/null` there, where writes would vanish without an error).
pub fn closed_at_start(fd: i32) -> bool {
    (0..3).contains(&fd) && CLOSED_STD.load(Ordering::Relaxed) & (1 << fd) != 0
}

/// Whether the start-up state was captured (the `.init_array` entry ran).
pub fn captured() -> bool {
    CAPTURED.load(Ordering::Acquire)
}

/// The signals ignored when tmetric started, as the bit mask `/proc/PID/status` prints as
/// `SigIgn` (bit `n - 1` for signal `n`).
pub fn ignored_at_start() -> u64 {
    IGNORED.load(Ordering::Relaxed)
}

/// Makes tmetric's own children waitable: started with SIGCHLD ignored (or with
/// `SA_NOCLDWAIT`), the kernel would reap the workload itself and `wait4` would fail with
/// ECHILD. perf catches SIGCHLD, which has the same effect.
pub(crate) fn keep_children_waitable() {
    // SAFETY: sigaction reads and writes plain-data structs.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGCHLD, std::ptr::null(), &mut old) == 0
            && (old.sa_sigaction == libc::SIG_IGN || old.sa_flags & libc::SA_NOCLDWAIT != 0)
        {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGCHLD, &action, std::ptr::null_mut());
        }
    }
}

/// Blocks every signal in the calling thread; returns the previous mask. Called around
/// `fork`, so that no handler of tmetric's runs in the child before [`restore_in_child`]
/// has put the dispositions back.
pub(crate) fn block_all() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; pthread_sigmask reads `all` and writes `old`.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    }
}

/// Restores the calling thread's mask saved by [`block_all`].
pub(crate) fn restore_mask(old: &libc::sigset_t) {
    // SAFETY: `old` is a mask pthread_sigmask gave us.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, old, std::ptr::null_mut());
    }
}

/// In the forked child (all signals blocked by [`block_all`]): puts back what tmetric was
/// started with. Only async-signal-safe system calls (sigaction, setrlimit, close,
/// sigprocmask), no allocation.
///
/// # Safety
/// Call only in a child of `fork`, before `exec`, with signals blocked.
pub(crate) unsafe fn restore_in_child() {
    let captured = CAPTURED.load(Ordering::Acquire);
    let ignored = if captured { IGNORED.load(Ordering::Relaxed) } else { 0 };
    let blocked = if captured { BLOCKED.load(Ordering::Relaxed) } else { 0 };
    // SAFETY: the caller is a fork child before exec; these calls take plain data.
    unsafe {
        for signal in 1..=LAST_SIGNAL {
            if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            let keep_ignored =
                ignored & (1 << (signal - 1)) != 0 && !DEFAULT_IN_WORKLOAD.contains(&signal);
            action.sa_sigaction = if keep_ignored { libc::SIG_IGN } else { libc::SIG_DFL };
            libc::sigemptyset(&mut action.sa_mask);
            // Signals the C library reserves (32, 33) refuse; nothing to restore there.
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
        if NOFILE_KNOWN.load(Ordering::Relaxed) {
            let limit = libc::rlimit {
                rlim_cur: NOFILE_SOFT.load(Ordering::Relaxed),
                rlim_max: NOFILE_HARD.load(Ordering::Relaxed),
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
        let closed = if captured { CLOSED_STD.load(Ordering::Relaxed) } else { 0 };
        for fd in 0..3 {
            if closed & (1 << fd) != 0 {
                libc::close(fd);
            }
        }
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut mask);
        for signal in 1..=LAST_SIGNAL {
            if blocked & (1 << (signal - 1)) != 0 {
                libc::sigaddset(&mut mask, signal);
            }
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
    }
}
