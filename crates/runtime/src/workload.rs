//! The workload: a child forked before the counters open, held at a pipe until they are, then
//! exec'ed (as perf's `evlist__prepare_workload` does), so `enable_on_exec` counters see the
//! command from its first instruction and nothing of the fork. Also its exit status and
//! resource usage.

use std::ffi::{CString, OsStr, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::Duration;

use crate::inherit;
use crate::sys::Errno;

/// Errors running the workload.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// No command was given.
    #[error("no command to run")]
    Empty,
    /// The program is not in `PATH`.
    #[error("`{0}`: command not found in PATH")]
    NotFound(String),
    /// An argument has a NUL byte, which `exec` cannot pass.
    #[error("argument `{0}` contains a NUL byte, which cannot be passed to a program")]
    Nul(String),
    /// A system call failed.
    #[error("{what} failed: {errno}")]
    Sys {
        /// The call.
        what: &'static str,
        /// The errno.
        errno: Errno,
    },
    /// `exec` failed in the child.
    #[error("cannot run `{program}`: {errno}")]
    Exec {
        /// The program.
        program: String,
        /// The errno.
        errno: Errno,
    },
}

/// How the workload ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// The raw `wait` status.
    pub status: i32,
    /// User CPU time of the workload and its waited-for children.
    pub user: Duration,
    /// System CPU time of the workload and its waited-for children.
    pub system: Duration,
}

impl WorkloadError {
    /// The errno behind the failure, for callers that decide on it (descriptors running out
    /// get the `ulimit -n` advice) rather than on the message's words.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            WorkloadError::Sys { errno, .. } | WorkloadError::Exec { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

impl Exit {
    /// The exit code, when it exited normally.
    pub fn code(&self) -> Option<i32> {
        libc::WIFEXITED(self.status).then(|| libc::WEXITSTATUS(self.status))
    }

    /// The signal that ended it, if one did.
    pub fn signal(&self) -> Option<i32> {
        libc::WIFSIGNALED(self.status).then(|| libc::WTERMSIG(self.status))
    }

    /// The shell's convention: the exit code, or 128 + the signal number.
    pub fn shell_code(&self) -> i32 {
        self.code().or_else(|| self.signal().map(|s| 128 + s)).unwrap_or(1)
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), WorkloadError> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(WorkloadError::Sys { what: "pipe2", errno: Errno::last() });
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `PATH` lookup as `execvp` does it, done before forking because the child may only make
/// async-signal-safe calls.
fn find_program(name: &OsStr) -> Option<PathBuf> {
    if name.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(name));
    }
    let path =
        std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn c_string(bytes: &[u8]) -> Result<CString, WorkloadError> {
    CString::new(bytes).map_err(|_| WorkloadError::Nul(String::from_utf8_lossy(bytes).into_owned()))
}

/// A forked child waiting to exec its command.
#[derive(Debug)]
pub struct Workload {
    pid: i32,
    program: String,
    go: Option<OwnedFd>,
    exec_errors: Option<OwnedFd>,
    pidfd: Option<OwnedFd>,
    exit: Option<Exit>,
}

impl Workload {
    /// Forks a child that waits until [`Workload::start`] and then execs `argv`.
    pub fn prepare(argv: &[OsString]) -> Result<Workload, WorkloadError> {
        let Some(first) = argv.first() else { return Err(WorkloadError::Empty) };
        let program = first.to_string_lossy().into_owned();
        let path = find_program(first).ok_or_else(|| WorkloadError::NotFound(program.clone()))?;
        // Everything the child needs is built here: after fork it may not allocate.
        let path = c_string(path.as_os_str().as_bytes())?;
        let args: Vec<CString> =
            argv.iter().map(|a| c_string(a.as_bytes())).collect::<Result<_, _>>()?;
        let env: Vec<CString> = std::env::vars_os()
            .map(|(k, v)| {
                let mut pair = k.as_bytes().to_vec();
                pair.push(b'=');
                pair.extend_from_slice(v.as_bytes());
                c_string(&pair)
            })
            .collect::<Result<_, _>>()?;
        let mut arg_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        arg_ptrs.push(std::ptr::null());
        // execvp's way with a file the kernel cannot execute (ENOEXEC: a script without
        // `#!`), which perf's workloads get: `/bin/sh FILE ARGS...`.
        let shell = c_string(b"/bin/sh")?;
        let mut script_ptrs: Vec<*const libc::c_char> = vec![shell.as_ptr(), path.as_ptr()];
        script_ptrs.extend(args.iter().skip(1).map(|a| a.as_ptr()));
        script_ptrs.push(std::ptr::null());
        let mut env_ptrs: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
        env_ptrs.push(std::ptr::null());
        let (go_read, go_write) = pipe()?;
        let (err_read, err_write) = pipe()?;

        inherit::keep_children_waitable();
        // No handler of tmetric's may run in the child before its dispositions are put back.
        let mask = inherit::block_all();
        // SAFETY: fork is called with every buffer the child uses already built; the child
        // only calls async-signal-safe functions (close, read, sigaction, sigprocmask,
        // setrlimit, execve, write, _exit).
        let pid = unsafe { libc::fork() };
        let fork_errno = Errno::last();
        if pid != 0 {
            inherit::restore_mask(&mask);
        }
        if pid < 0 {
            return Err(WorkloadError::Sys { what: "fork", errno: fork_errno });
        }
        if pid == 0 {
            // SAFETY: the child side; see above. The descriptors are valid copies.
            unsafe {
                // Our copy of the write end must go, or dropping the parent's would never
                // reach end-of-file here.
                libc::close(go_write.as_raw_fd());
                libc::close(err_read.as_raw_fd());
                let mut byte = 0u8;
                loop {
                    let n = libc::read(go_read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1);
                    if n == 1 {
                        break;
                    }
                    if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    }
                    // The parent gave up before starting us.
                    libc::_exit(127);
                }
                // What tmetric was started with: signals (SIGPIPE not ignored), mask,
                // descriptor limit, closed standard descriptors. A signal that came while
                // the child was held is delivered now, with the workload's dispositions.
                inherit::restore_in_child();
                libc::execve(path.as_ptr(), arg_ptrs.as_ptr(), env_ptrs.as_ptr());
                let mut errno: i32 = *libc::__errno_location();
                if errno == libc::ENOEXEC {
                    libc::execve(shell.as_ptr(), script_ptrs.as_ptr(), env_ptrs.as_ptr());
                    errno = *libc::__errno_location();
                }
                libc::write(err_write.as_raw_fd(), (&errno as *const i32).cast(), 4);
                libc::_exit(127);
            }
        }
        drop(go_read);
        drop(err_write);
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a non-negative result is a descriptor we now own.
        let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) });
        Ok(Workload {
            pid,
            program,
            go: Some(go_write),
            exec_errors: Some(err_read),
            pidfd,
            exit: None,
        })
    }

    /// The child's pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// A descriptor that becomes readable when the child exits (Linux 5.3+), for `poll`.
    pub fn exit_fd(&self) -> Option<RawFd> {
        self.pidfd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Lets the child exec its command, and reports an exec failure.
    pub fn start(&mut self) -> Result<(), WorkloadError> {
        let Some(go) = self.go.take() else { return Ok(()) };
        let byte = 1u8;
        // SAFETY: writes one byte from a local to a descriptor we own.
        if unsafe { libc::write(go.as_raw_fd(), (&byte as *const u8).cast(), 1) } != 1 {
            return Err(WorkloadError::Sys { what: "starting the workload", errno: Errno::last() });
        }
        drop(go);
        let Some(errors) = self.exec_errors.take() else { return Ok(()) };
        let mut buf = [0u8; 4];
        let mut got = 0;
        while got < 4 {
            // SAFETY: reads into the unfilled tail of `buf`.
            let n =
                unsafe { libc::read(errors.as_raw_fd(), buf[got..].as_mut_ptr().cast(), 4 - got) };
            if n == 0 {
                break;
            }
            if n < 0 {
                if Errno::last().0 == libc::EINTR {
                    continue;
                }
                return Err(WorkloadError::Sys {
                    what: "reading the exec status",
                    errno: Errno::last(),
                });
            }
            got += n as usize;
        }
        if got == 4 {
            // Reap it now so it does not linger as a zombie.
            let _ = self.wait();
            return Err(WorkloadError::Exec {
                program: self.program.clone(),
                errno: Errno(i32::from_ne_bytes(buf)),
            });
        }
        Ok(())
    }

    fn wait_flags(&mut self, flags: libc::c_int) -> Result<Option<Exit>, WorkloadError> {
        if let Some(exit) = self.exit {
            return Ok(Some(exit));
        }
        loop {
            let mut status = 0;
            // SAFETY: rusage is plain data that wait4 fills in.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: both pointers point at locals that live across the call.
            let pid = unsafe { libc::wait4(self.pid, &mut status, flags, &mut usage) };
            if pid == 0 {
                return Ok(None);
            }
            if pid < 0 {
                let errno = Errno::last();
                if errno.0 == libc::EINTR {
                    continue;
                }
                return Err(WorkloadError::Sys { what: "waiting for the workload", errno });
            }
            let time = |t: libc::timeval| {
                Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
            };
            let exit = Exit { status, user: time(usage.ru_utime), system: time(usage.ru_stime) };
            self.exit = Some(exit);
            return Ok(Some(exit));
        }
    }

    /// The exit, if the child has ended (reaping it).
    pub fn try_wait(&mut self) -> Result<Option<Exit>, WorkloadError> {
        self.wait_flags(libc::WNOHANG)
    }

    /// Waits for the child to end.
    pub fn wait(&mut self) -> Result<Exit, WorkloadError> {
        match self.wait_flags(0)? {
            Some(exit) => Ok(exit),
            None => Err(WorkloadError::Sys {
                what: "waiting for the workload",
                errno: Errno(libc::ECHILD),
            }),
        }
    }

    /// Sends `signal` to the child, unless it has been reaped (its pid may be reused).
    pub fn signal(&self, signal: i32) {
        if self.exit.is_none() {
            // SAFETY: kill takes plain integers.
            unsafe {
                libc::kill(self.pid, signal);
            }
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if self.exit.is_some() {
            return;
        }
        if self.go.take().is_none() {
            // Started: it runs the user's command, which must not outlive us unnoticed.
            self.signal(libc::SIGKILL);
        }
        // Unstarted, closing the go pipe made it exit on its own.
        let _ = self.wait();
    }
}
