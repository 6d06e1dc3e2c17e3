//! Signals while counting: SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGUSR1 are caught and written to a self-pipe the
//! run loop polls, so Ctrl-C ends a run with its counts printed instead of killing tmetric.
//! The handler also records whether a process sent the signal (`kill`), which a terminal's
//! Ctrl-C does not: only the former has to be passed on to the workload, since the terminal
//! already signals the whole foreground process group.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::time::Duration;

use crate::sys::Errno;

static WRITE_FD: AtomicI32 = AtomicI32::new(-1);
static READ_FD: AtomicI32 = AtomicI32::new(-1);
static PIPE_LOCK: Mutex<()> = Mutex::new(());
/// A signal caught before the self-pipe exists ([`catch_stop_signals_early`]), written to
/// the pipe once it is made.
static PENDING: AtomicU8 = AtomicU8::new(0);
/// Set by the handler once a signal's byte is in the pipe (or [`PENDING`]), cleared by
/// [`SignalGuard::arrived`]: a signal handled as `poll` returns is in the pipe, but not in
/// what `poll` said was readable.
static ARRIVED: AtomicBool = AtomicBool::new(false);
/// Set while the process is in a call that may block on output or input ([`blocking`]).
static BLOCKING: AtomicBool = AtomicBool::new(false);
/// A signal that came while [`BLOCKING`]: it ends tmetric if the call is still blocked when
/// the alarm it set goes off (0: none).
static DOOMED_BY: AtomicI32 = AtomicI32::new(0);

/// One caught signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// The signal number.
    pub signal: i32,
    /// Sent by a process with `kill`/`sigqueue`, not by the kernel (a terminal's Ctrl-C).
    pub from_process: bool,
}

extern "C" fn on_signal(
    signal: libc::c_int,
    info: *mut libc::siginfo_t,
    _context: *mut libc::c_void,
) {
    // SAFETY: only async-signal-safe calls; errno is saved and restored around the write.
    unsafe {
        let errno = *libc::__errno_location();
        // SI_USER (0), SI_QUEUE (-1) and SI_TKILL (-6) are process-sent; SI_KERNEL is not.
        let from_process = !info.is_null() && (*info).si_code <= 0;
        let byte = (signal as u8 & 0x7f) | if from_process { 0x80 } else { 0 };
        let fd = WRITE_FD.load(Ordering::Relaxed);
        if fd >= 0 {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        } else {
            PENDING.store(byte, Ordering::SeqCst);
        }
        ARRIVED.store(true, Ordering::SeqCst);
        // Blocked on a write no one reads (a FIFO without a reader, a stopped pipe) or an
        // open that waits for one, the run loop never sees the pipe: end as perf does, by
        // the signal's default action. Not at once: the signal may have come while a write
        // that does not block was under way (a reader that saw the line and sent Ctrl-C at
        // once), and then the run loop must still print what was counted. An alarm a
        // moment later ends tmetric only if it is still in that call ([`on_alarm`]).
        if BLOCKING.load(Ordering::SeqCst) && ENDS_WHEN_BLOCKED.contains(&signal) {
            DOOMED_BY.store(signal, Ordering::SeqCst);
            libc::alarm(1);
        }
        *libc::__errno_location() = errno;
    }
}

/// SIGALRM after a stop signal came during [`blocking`]: still blocked a second later, the
/// call is a write or open that nothing will finish, so tmetric ends by that signal's default
/// action, as perf does.
extern "C" fn on_alarm(_signal: libc::c_int) {
    let signal = DOOMED_BY.load(Ordering::SeqCst);
    if signal != 0 && BLOCKING.load(Ordering::SeqCst) {
        // SAFETY: sigaction with a plain-data struct and raise are async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
            libc::raise(signal);
        }
    }
}

fn ensure_pipe() -> Result<(), Errno> {
    let _lock = PIPE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if READ_FD.load(Ordering::Relaxed) >= 0 {
        return Ok(());
    }
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(Errno::last());
    }
    // The pipe lives as long as the process: the handler may run at any time.
    READ_FD.store(fds[0], Ordering::Relaxed);
    WRITE_FD.store(fds[1], Ordering::Relaxed);
    // SAFETY: a plain-data sigaction whose handler only makes async-signal-safe calls. No
    // SA_RESTART, so a write blocked when it fires returns to be ended.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_alarm as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGALRM, &action, std::ptr::null_mut());
    }
    let pending = PENDING.swap(0, Ordering::SeqCst);
    if pending != 0 {
        // SAFETY: writes one byte from a local to the pipe just made.
        unsafe {
            libc::write(fds[1], (&pending as *const u8).cast(), 1);
        }
    }
    Ok(())
}

/// Creates the signal self-pipe now. `tmetric stat` calls this before opening its events, so
/// that when descriptors run out it is the events that report it (with how many are needed),
/// never the signal set-up ("cannot catch signals: EMFILE").
pub fn prepare() -> Result<(), Errno> {
    ensure_pipe()
}

/// The signals that end a run with its counts printed: SIGINT, SIGTERM, SIGHUP and SIGQUIT
/// (passed on to the workload when a process sent them), and SIGUSR1 (perf 6.12 ends its run
/// on it and prints the counts; the workload then gets SIGTERM). SIGQUIT is caught rather
/// than left as inherited: a shell starts background jobs with it ignored, and `kill -QUIT`
/// must still end the run. SIGUSR2 keeps its default action, as in perf.
pub const STOP_SIGNALS: &[i32] =
    &[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGUSR1];

/// The signals that end tmetric while it is blocked in [`blocking`], as they end perf.
const ENDS_WHEN_BLOCKED: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// Runs `f`, a call that may block on output or input (a write to a pipe, FIFO or terminal,
/// opening a FIFO). While it runs, SIGINT, SIGTERM and SIGHUP end tmetric by their default
/// action (a second later, if the call is still blocked then) instead of waiting in the
/// self-pipe for a run loop that cannot look: a blocked write is then never left holding the
/// process (only SIGKILL ended it).
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    let was = BLOCKING.swap(true, Ordering::SeqCst);
    let result = f();
    BLOCKING.store(was, Ordering::SeqCst);
    // The call finished after all: the signal waits in the pipe for the run loop, which
    // prints what was counted; the alarm is no longer needed.
    if !was && DOOMED_BY.swap(0, Ordering::SeqCst) != 0 {
        // SAFETY: alarm(0) only cancels a pending alarm.
        unsafe {
            libc::alarm(0);
        }
    }
    result
}

/// Makes an exceeded file size limit (`ulimit -f`) a write error (EFBIG) instead of the
/// SIGXFSZ that kills the process, so what was written stays and the error is said. The
/// workload gets the disposition tmetric was started with (`inherit::restore_in_child`).
pub fn file_size_limit_is_an_error() {
    // SAFETY: sigaction with a plain-data struct setting SIG_IGN.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_IGN;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

/// Catches [`STOP_SIGNALS`] from now on (until the guard drops). `tmetric stat` calls this
/// first thing, so a Ctrl-C or `kill` that comes while it is still planning or forking the
/// workload waits in the pipe for the run loop instead of killing tmetric and orphaning the
/// held workload.
pub fn catch_stop_signals() -> Result<SignalGuard, Errno> {
    SignalGuard::install(STOP_SIGNALS)
}

/// Catches [`STOP_SIGNALS`] without making the self-pipe yet (no descriptor is taken, so set-up
/// that runs short of descriptors fails as it would have): a signal that comes before the
/// pipe exists is kept and written to it when [`catch_stop_signals`] or [`prepare`] makes it.
/// For set-up that must not be killed half way (the simulated machine's private directory).
pub fn catch_stop_signals_early() -> Result<SignalGuard, Errno> {
    SignalGuard::handlers(STOP_SIGNALS)
}

/// Catches the given signals until dropped, then restores the previous handlers.
#[derive(Debug)]
pub struct SignalGuard {
    previous: Vec<(i32, libc::sigaction)>,
}

impl SignalGuard {
    /// Installs the handler for `signals`.
    pub fn install(signals: &[i32]) -> Result<SignalGuard, Errno> {
        ensure_pipe()?;
        SignalGuard::handlers(signals)
    }

    fn handlers(signals: &[i32]) -> Result<SignalGuard, Errno> {
        let mut guard = SignalGuard { previous: Vec::new() };
        for &signal in signals {
            // SAFETY: sigaction structs are plain data; the handler has the SA_SIGINFO
            // signature and only makes async-signal-safe calls.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as *const () as usize;
                // No SA_RESTART: a blocking call should return so the loop sees the signal.
                action.sa_flags = libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, &action, &mut old) < 0 {
                    return Err(Errno::last());
                }
                guard.previous.push((signal, old));
            }
        }
        Ok(guard)
    }

    /// The descriptor to poll: readable when a signal arrived.
    pub fn fd(&self) -> i32 {
        READ_FD.load(Ordering::Relaxed)
    }

    /// Whether a signal was caught since the last call: the pipe then holds it for
    /// [`SignalGuard::drain`]. A flag, not a system call.
    pub fn arrived(&self) -> bool {
        ARRIVED.swap(false, Ordering::SeqCst)
    }

    /// The signals caught since the last call.
    pub fn drain(&self) -> Vec<Received> {
        let mut received = Vec::new();
        let fd = self.fd();
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reads into a local buffer from our non-blocking pipe.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            received.extend(
                buf[..n as usize].iter().map(|&b| Received {
                    signal: i32::from(b & 0x7f),
                    from_process: b & 0x80 != 0,
                }),
            );
        }
        received
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        for (signal, old) in self.previous.drain(..).rev() {
            // SAFETY: restores an action the kernel gave us.
            unsafe {
                libc::sigaction(signal, &old, std::ptr::null_mut());
            }
        }
    }
}

/// Waits until one of `fds` is readable or `timeout` passes (`None`: no limit). Interrupted
/// waits return early; the caller re-checks its state either way. Returns which of `fds`
/// were readable, bit `i` for `fds[i]` (the first 64): every bit when the wait failed or a
/// signal interrupted it, since nothing was looked at then.
pub fn wait_readable(fds: &[i32], timeout: Option<Duration>) -> u64 {
    const ON_STACK: usize = 8;
    let mut stack = [libc::pollfd { fd: -1, events: 0, revents: 0 }; ON_STACK];
    let mut heap = Vec::new();
    let polls: &mut [libc::pollfd] = if fds.len() <= ON_STACK {
        &mut stack[..fds.len()]
    } else {
        heap.resize(fds.len(), libc::pollfd { fd: -1, events: 0, revents: 0 });
        &mut heap
    };
    for (p, &fd) in polls.iter_mut().zip(fds) {
        *p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    }
    let millis = timeout.map_or(-1, |t| {
        // Round up so a wait never ends just before its deadline and spins.
        let ms = t.as_nanos().div_ceil(1_000_000);
        ms.min(i32::MAX as u128) as i32
    });
    // SAFETY: `polls` is a valid array of `polls.len()` pollfd structs.
    let n = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, millis) };
    if n < 0 {
        return u64::MAX;
    }
    // POLLHUP and POLLERR count as readable: a read then says what happened.
    polls
        .iter()
        .take(64)
        .enumerate()
        .filter(|(_, p)| p.revents != 0)
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

/// The C library's description of a signal (`Killed`, `Segmentation fault`), as `psignal`
/// prints it after the program's name.
pub fn describe(signal: i32) -> String {
    // SAFETY: strsignal returns a pointer to a NUL-terminated string (a static table entry
    // or a thread-local buffer), read at once before any other call can change it.
    unsafe {
        let text = libc::strsignal(signal);
        if text.is_null() {
            return format!("Unknown signal {signal}");
        }
        std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}

/// Ends the process by `signal`, as perf's `sig_atexit` does after an interrupted
/// system-wide run: the default action restored, the signal unblocked and raised, so the
/// parent sees the signal (a shell's 130 for SIGINT). Returns only if the signal's default
/// action does not end a process.
pub fn die_by(signal: i32) {
    // SAFETY: plain-data sigaction and sigset structs; restoring SIG_DFL and raising a
    // signal at ourselves touch no memory of ours.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(signal, &action, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        // Aimed at this thread, so it is delivered before `raise` returns.
        libc::raise(signal);
    }
}
