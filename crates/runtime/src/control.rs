//! perf's `--control`: a descriptor or FIFO the run loop reads commands from while it counts
//! (`enable`, `disable`, `enable NAME`, `disable NAME`, `snapshot`, `ping`, `stop`, `evlist`),
//! answering each handled command with perf's acknowledgement on a second descriptor. The
//! wire format is perf 6.12's (`evlist__parse_control`, `evlist__ctlfd_recv`,
//! `evlist__ctlfd_ack` in tools/perf/util/evlist.c): a command is the bytes up to a newline or
//! NUL (at most 63), matched by prefix; the acknowledgement is the five bytes `ack\n\0`.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys::Errno;

/// perf's `EVLIST_CTL_CMD_ACK_TAG` written with its terminating NUL, as perf writes
/// `sizeof("ack\n")` bytes.
pub const ACK: &[u8] = b"ack\n\0";

/// perf's `EVLIST_CTL_CMD_MAX_LEN` less its NUL: the longest command read at once.
const MAX_COMMAND: usize = 63;

/// The descriptors of a `--control`: commands are read from `ctl`, acknowledgements written
/// to `ack`. Plain numbers: whoever opened them (the caller, or the shell for `fd:`) keeps
/// them open for the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlFds {
    /// Where commands are read.
    pub ctl: RawFd,
    /// Where `ack\n` is written after each handled command, if anywhere.
    pub ack: Option<RawFd>,
}

/// A `--control` argument that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Neither `fd:` nor `fifo:` with what perf requires after it.
    #[error(
        "expected fd:CTL[,ACK] (descriptor numbers this process inherited) or fifo:CTL[,ACK] (paths of FIFOs made with mkfifo)"
    )]
    Syntax,
    /// An `fd:` number that is not an open descriptor.
    #[error(
        "descriptor {0} is not open in tmetric: open it in the shell that starts tmetric (`exec {0}<>ctl.fifo`)"
    )]
    NotOpen(RawFd),
    /// A `fifo:` path that cannot be opened.
    #[error("cannot open `{path}`: {errno}")]
    Open {
        /// The path.
        path: String,
        /// Why.
        errno: Errno,
    },
    /// A `fifo:` path that is not a FIFO.
    #[error("`{0}` is not a FIFO: make one with `mkfifo {0}`")]
    NotFifo(String),
    /// A `fifo:` path that is a symbolic link: tmetric runs as root and follows no link it
    /// did not make (one planted in a shared directory would redirect the commands).
    #[error("`{0}` is a symbolic link: name the FIFO itself")]
    Link(String),
}

/// An opened `--control`: its descriptors, and those tmetric opened itself (`fifo:`), closed
/// when this drops.
#[derive(Debug)]
pub struct Control {
    /// The descriptors to pass to the run loop.
    pub fds: ControlFds,
    _owned: Vec<OwnedFd>,
}

impl Control {
    /// Parses and opens perf's `--control` argument: `fd:CTL[,ACK]` names descriptors tmetric
    /// inherited (numbers as C's `strtoul` with base 0 reads them: `10`, `0x0a`, `012`), or
    /// `fifo:CTL[,ACK]` names FIFOs, opened read-write and non-blocking as perf opens them, so
    /// that writers may come and go and the other end need not be open yet.
    pub fn open(spec: &str) -> Result<Control, ControlError> {
        if let Some(rest) = spec.strip_prefix("fd:") {
            let (ctl, ack) = match rest.split_once(',') {
                Some((ctl, ack)) => (ctl, Some(ack)),
                None => (rest, None),
            };
            let ctl = c_number(ctl).ok_or(ControlError::Syntax)?;
            let ack = ack.map(|a| c_number(a).ok_or(ControlError::Syntax)).transpose()?;
            for fd in std::iter::once(ctl).chain(ack) {
                if !is_open(fd) {
                    return Err(ControlError::NotOpen(fd));
                }
            }
            return Ok(Control { fds: ControlFds { ctl, ack }, _owned: Vec::new() });
        }
        let rest = spec.strip_prefix("fifo:").ok_or(ControlError::Syntax)?;
        if rest.is_empty() || rest.starts_with(',') {
            return Err(ControlError::Syntax);
        }
        let (ctl, ack) = match rest.split_once(',') {
            Some((ctl, "")) => (ctl, None),
            Some((ctl, ack)) => (ctl, Some(ack)),
            None => (rest, None),
        };
        let ctl = open_fifo(Path::new(ctl))?;
        let ack = ack.map(|a| open_fifo(Path::new(a))).transpose()?;
        let fds = ControlFds {
            ctl: std::os::fd::AsRawFd::as_raw_fd(&ctl),
            ack: ack.as_ref().map(std::os::fd::AsRawFd::as_raw_fd),
        };
        Ok(Control { fds, _owned: std::iter::once(ctl).chain(ack).collect() })
    }
}

/// C's `strtoul(s, &end, 0)` over the whole of `s`: decimal, `0x` hexadecimal or `0` octal;
/// `None` for anything else or a value that is no descriptor number.
fn c_number(s: &str) -> Option<RawFd> {
    let s = s.trim_start();
    let value = if let Some(hex) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(hex, 16).ok()?
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()?
    } else {
        s.parse::<u32>().ok()?
    };
    RawFd::try_from(value).ok()
}

/// Whether `fd` is an open descriptor of this process.
fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD reads the descriptor's flags and touches no memory.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

/// Opens a FIFO as perf does (`O_RDWR | O_NONBLOCK | O_CLOEXEC`), refusing anything else:
/// opening a device can have effects of its own, a regular file would never wait, and a
/// symbolic link is not followed.
fn open_fifo(path: &Path) -> Result<OwnedFd, ControlError> {
    let shown = path.display().to_string();
    let is_fifo = |mode: libc::mode_t| mode & libc::S_IFMT == libc::S_IFIFO;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => return Err(ControlError::Link(shown)),
        Ok(meta) if is_fifo(std::os::unix::fs::MetadataExt::mode(&meta)) => {}
        Ok(_) => return Err(ControlError::NotFifo(shown)),
        Err(e) => {
            let errno = Errno(e.raw_os_error().unwrap_or(libc::ENOENT));
            return Err(ControlError::Open { path: shown, errno });
        }
    }
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| ControlError::Open { path: shown.clone(), errno: Errno(libc::EINVAL) })?;
    let flags =
        libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NOFOLLOW;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let fd = unsafe { libc::open(c.as_ptr(), flags) };
    if fd < 0 {
        return Err(ControlError::Open { path: shown, errno: Errno::last() });
    }
    // SAFETY: a non-negative result is a descriptor we now own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // The path may have been replaced between the look and the open: check what was opened.
    // SAFETY: fstat writes one stat struct, which `st` is.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is a valid stat struct.
    if unsafe { libc::fstat(fd, &mut st) } < 0 || !is_fifo(st.st_mode) {
        return Err(ControlError::NotFifo(shown));
    }
    Ok(owned)
}

/// One command read from the control descriptor, as perf 6.12 tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `enable` (every event) or `enable NAME` (the events named so).
    Enable(Option<String>),
    /// `disable` or `disable NAME`.
    Disable(Option<String>),
    /// `enable`, `disable` or `evlist` followed by something other than a space and an
    /// argument (`enablex`): perf says "failed: wrong command" and acknowledges it.
    Malformed,
    /// `snapshot`: nothing for `stat` to do, and not acknowledged.
    Snapshot,
    /// `evlist` (with `-v`, `-g` or `-F`, or none): the events, listed on standard error.
    Evlist(Option<String>),
    /// `stop`: nothing for `stat` to do (it stops `perf record`'s recording), acknowledged.
    Stop,
    /// `ping`: acknowledged.
    Ping,
    /// Anything else: ignored, not acknowledged.
    Unsupported(String),
}

impl Command {
    /// Reads a command's bytes as perf's `evlist__ctlfd_recv` does: by prefix, in perf's
    /// order; the argument after a space.
    pub fn parse(data: &[u8]) -> Command {
        let text = String::from_utf8_lossy(data);
        // perf's `get_cmd_arg`: nothing, or a space and the argument.
        let arg = |tag: &str| -> Result<Option<String>, ()> {
            match &text[tag.len()..] {
                "" => Ok(None),
                rest => rest.strip_prefix(' ').map(|a| Some(a.to_string())).ok_or(()),
            }
        };
        if text.starts_with("enable") {
            arg("enable").map_or(Command::Malformed, Command::Enable)
        } else if text.starts_with("disable") {
            arg("disable").map_or(Command::Malformed, Command::Disable)
        } else if text.starts_with("snapshot") {
            Command::Snapshot
        } else if text.starts_with("evlist") {
            match arg("evlist") {
                Ok(None) => Command::Evlist(None),
                Ok(Some(a)) if ["-v", "-g", "-F"].contains(&a.as_str()) => Command::Evlist(Some(a)),
                _ => Command::Malformed,
            }
        } else if text.starts_with("stop") {
            Command::Stop
        } else if text.starts_with("ping") {
            Command::Ping
        } else {
            Command::Unsupported(text.into_owned())
        }
    }

    /// Whether perf acknowledges it: every command but `snapshot` and unsupported ones.
    pub fn acknowledged(&self) -> bool {
        !matches!(self, Command::Snapshot | Command::Unsupported(_))
    }
}

/// The run loop's reader of a [`ControlFds`]: one command at a time, until the descriptor
/// reaches its end (every writer of a pipe gone), after which it is no longer polled.
#[derive(Debug)]
pub struct ControlReader {
    fds: ControlFds,
    open: bool,
}

impl ControlReader {
    /// A reader of `fds`.
    pub fn new(fds: ControlFds) -> ControlReader {
        ControlReader { fds, open: true }
    }

    /// The acknowledgement descriptor, -1 for none (as perf names it in its messages).
    pub fn ack_fd(&self) -> RawFd {
        self.fds.ack.unwrap_or(-1)
    }

    /// The descriptor to poll, while it is still read.
    pub fn fd(&self) -> Option<RawFd> {
        self.open.then_some(self.fds.ctl)
    }

    /// The next whole command, if one is waiting: bytes up to a newline or NUL, at most 63
    /// (the rest is the next command, as in perf). Never blocks: each byte is read only when
    /// the descriptor says one is there. An empty line is no command.
    pub fn next_command(&mut self) -> Option<Command> {
        while self.open {
            let mut data = Vec::new();
            loop {
                if !readable(self.fds.ctl) {
                    break;
                }
                let mut byte = 0u8;
                // SAFETY: reads one byte into a local.
                let n = unsafe { libc::read(self.fds.ctl, (&mut byte as *mut u8).cast(), 1) };
                if n == 1 {
                    if byte == b'\n' || byte == 0 {
                        break;
                    }
                    data.push(byte);
                    if data.len() == MAX_COMMAND {
                        break;
                    }
                    continue;
                }
                if n < 0 {
                    match Errno::last().0 {
                        libc::EINTR => continue,
                        libc::EAGAIN => break,
                        _ => self.open = false,
                    }
                } else {
                    // The end: every writer has gone (perf stops polling on POLLHUP).
                    self.open = false;
                }
                break;
            }
            if !data.is_empty() {
                return Some(Command::parse(&data));
            }
            if !readable(self.fds.ctl) {
                return None;
            }
        }
        None
    }

    /// Writes perf's acknowledgement, if there is an ack descriptor; a failure is returned
    /// for the caller to say (perf prints it and goes on).
    pub fn ack(&self) -> Result<(), Errno> {
        let Some(fd) = self.fds.ack else { return Ok(()) };
        // SAFETY: writes from a static buffer of `ACK.len()` bytes.
        let n = unsafe { libc::write(fd, ACK.as_ptr().cast(), ACK.len()) };
        if n < 0 { Err(Errno::last()) } else { Ok(()) }
    }
}

/// Whether a read of `fd` would not block: data, or the end.
fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no wait.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_told_apart_as_perf_does() {
        assert_eq!(Command::parse(b"enable"), Command::Enable(None));
        assert_eq!(Command::parse(b"enable cs"), Command::Enable(Some("cs".into())));
        assert_eq!(
            Command::parse(b"disable task-clock"),
            Command::Disable(Some("task-clock".into()))
        );
        assert_eq!(Command::parse(b"enablex"), Command::Malformed);
        assert_eq!(Command::parse(b"pingpong"), Command::Ping);
        assert_eq!(Command::parse(b"snapshot"), Command::Snapshot);
        assert_eq!(Command::parse(b"evlist -g"), Command::Evlist(Some("-g".into())));
        assert_eq!(Command::parse(b"evlist -x"), Command::Malformed);
        assert_eq!(Command::parse(b"start"), Command::Unsupported("start".into()));
        assert!(!Command::Snapshot.acknowledged() && Command::Malformed.acknowledged());
    }

    #[test]
    fn descriptor_numbers_read_as_strtoul_with_base_0() {
        assert_eq!(c_number("10"), Some(10));
        assert_eq!(c_number("0x0a"), Some(10));
        assert_eq!(c_number("012"), Some(10));
        assert_eq!(c_number("0"), Some(0));
        assert_eq!(c_number(""), None);
        assert_eq!(c_number("10x"), None);
        assert!(matches!(Control::open("fd:"), Err(ControlError::Syntax)));
        assert!(matches!(Control::open("fd:3,"), Err(ControlError::Syntax)));
        assert!(matches!(Control::open("fifo:"), Err(ControlError::Syntax)));
        assert!(matches!(Control::open("fifo:,a"), Err(ControlError::Syntax)));
        assert!(matches!(Control::open("pipe:3"), Err(ControlError::Syntax)));
    }
}
