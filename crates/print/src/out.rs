//! Where a front end's output goes. `tmetric stat` writes its counts so that none are lost: a
//! [`Sink`] buffers each report and delivers it at `flush`, and a failed delivery never
//! aborts the run.
//!
//! * A closed pipe (`tmetric stat ... 2>&1 | head`) silences the rest quietly: the workload
//!   runs on and its exit status stays tmetric's.
//! * A file given with `-o` that cannot be written (a full disk, `/dev/full`) is named once
//!   on standard error, and its reports go to standard error instead.
//! * Standard error itself failing (other than a closed pipe) is remembered; the run goes
//!   on, and [`Sink::finish`] reports it so tmetric exits 2.
//!
//! [`warn`] prints a line on standard error and never panics (`eprintln!` does when standard
//! error is `/dev/full`); `--quiet` ([`set_quiet`]) silences it and CSV counts on standard
//! error make it a `#` comment ([`set_comment_warnings`]). New files are created 0600
//! ([`create_private`]). Failures are typed ([`SinkError`]). [`NamedStdout`] is standard
//! output that names itself in its errors.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use tmetric_runtime::signal::blocking;

/// `--quiet`: warnings and messages are not printed (errors still are).
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Silences [`warn`] for the rest of the process (`stat --quiet`, as perf's).
pub fn set_quiet() {
    QUIET.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Before reading `what` from standard input: when that is a terminal, says so and how the
/// input ends, so that a command waiting for typed input is not taken for a hung one.
/// `example` shows how it is usually given.
pub fn stdin_hint(what: &str, example: &str) {
    if io::IsTerminal::is_terminal(&io::stdin()) {
        warn(&format!(
            "reading {what} from standard input, which is the terminal: type or paste it and end with Ctrl-D, or give it as {example}"
        ));
    }
}

/// Prints `tmetric: {message}` on standard error, ignoring failure (there is nowhere else
/// to say it); nothing with `--quiet`; a JSON object (`{"warning" : ...}`) after
/// [`set_json_warnings`].
pub fn warn(message: &str) {
    if QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    if JSON.load(std::sync::atomic::Ordering::Relaxed) {
        let line = format!("{}\n", serde_json::json!({ "warning": message }));
        let _ = blocking(|| io::stderr().lock().write_all(line.as_bytes()));
        return;
    }
    error(message);
}

/// Warnings as JSON objects (`-j --full-metrics` counts on standard error).
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes [`warn`] write each warning as a JSON object of its own, `{"warning" : "..."}`, a
/// line readers of JSON counts can tell from perf's.
pub fn set_json_warnings() {
    JSON.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Warnings as `#` comment lines (CSV counts on standard error).
static COMMENTS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes [`warn`] and [`error`] write `# tmetric: ...`, a comment line to readers of CSV.
pub fn set_comment_warnings() {
    COMMENTS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Prints an error as [`warn`] does, even with `--quiet`.
pub fn error(message: &str) {
    let hash = if COMMENTS.load(std::sync::atomic::Ordering::Relaxed) { "# " } else { "" };
    // One write of the whole line: written in pieces, another thread's line (the allocator's
    // out-of-memory line, which ends the process) could land between `tmetric: ` and the rest.
    let line = format!("{hash}tmetric: {message}\n");
    let _ = blocking(|| io::stderr().lock().write_all(line.as_bytes()));
}

/// Where a [`Sink`] delivers.
pub enum Dest {
    /// Standard error (perf's default for `stat`'s counts).
    Stderr,
    /// A file (`-o`).
    File {
        /// Its path, for messages.
        path: PathBuf,
        /// The open file.
        file: File,
    },
    /// Nothing is printed (`tmetric record -o -`, as perf prints nothing when it records to
    /// a pipe).
    Nowhere,
}

/// Creates (or truncates) `path` for writing; a new file gets mode 0600, as perf creates
/// perf.data: counts and record files name the command and what it did, and tmetric often
/// runs as root. An existing file keeps the mode its owner gave it. A link or file another
/// user planted in a shared sticky directory is refused (`tmetric_runtime::output`).
pub fn create_private(path: &Path) -> io::Result<File> {
    tmetric_runtime::output::create(path, false)
}

/// A destination for reports that survives write errors (see the module documentation).
pub struct Sink {
    /// Where reports go now (a file that failed is replaced by standard error).
    pub dest: Dest,
    buf: Vec<u8>,
    /// A reader closed the pipe: discard everything from now on.
    closed: bool,
    /// The first write error that was not a closed pipe, for [`Sink::finish`].
    failed: Option<SinkError>,
}

impl Sink {
    /// Reports to standard error.
    pub fn stderr() -> Sink {
        Sink { dest: Dest::Stderr, buf: Vec::new(), closed: false, failed: None }
    }

    /// Reports nowhere: everything written is dropped, but the writer is not `closed`.
    pub fn nowhere() -> Sink {
        Sink { dest: Dest::Nowhere, buf: Vec::new(), closed: false, failed: None }
    }

    /// Reports to a new file at `path` (truncated if it exists; created 0600).
    pub fn create(path: &Path) -> Result<Sink, SinkError> {
        let file = create_private(path)
            .map_err(|source| SinkError::Create { path: path.to_path_buf(), source })?;
        Ok(Sink {
            dest: Dest::File { path: path.to_path_buf(), file },
            buf: Vec::new(),
            closed: false,
            failed: None,
        })
    }

    /// Reports appended to the file at `path` (`--append`), created if it does not exist.
    pub fn append(path: &Path) -> Result<Sink, SinkError> {
        let file = tmetric_runtime::output::create(path, true)
            .map_err(|source| SinkError::Append { path: path.to_path_buf(), source })?;
        Ok(Sink {
            dest: Dest::File { path: path.to_path_buf(), file },
            buf: Vec::new(),
            closed: false,
            failed: None,
        })
    }

    /// Reports to `file`, an open descriptor's duplicate (perf's `--log-fd FD`), named
    /// `descriptor FD` in messages.
    pub fn descriptor(file: File, fd: i32) -> Sink {
        Sink {
            dest: Dest::File { path: PathBuf::from(format!("descriptor {fd}")), file },
            buf: Vec::new(),
            closed: false,
            failed: None,
        }
    }

    /// Whether a reader closed the pipe, so nothing written from now on is read.
    pub fn closed(&self) -> bool {
        self.closed
    }

    /// Writes out what is buffered; never fails (see the module documentation).
    fn deliver(&mut self) {
        if self.closed {
            self.buf.clear();
            return;
        }
        if self.buf.is_empty() || matches!(self.dest, Dest::Nowhere) {
            self.buf.clear();
            return;
        }
        if let Dest::File { path, file } = &mut self.dest {
            match blocking(|| file.write_all(&self.buf).and_then(|()| file.flush())) {
                Ok(()) => {
                    self.buf.clear();
                    return;
                }
                Err(err) => {
                    warn(&format!(
                        "cannot write the counts to {}: {}; printing them to standard error instead",
                        path.display(),
                        plain_io(&err)
                    ));
                    self.failed.get_or_insert_with(|| SinkError::Incomplete {
                        path: path.clone(),
                        why: plain_io(&err),
                    });
                    self.dest = Dest::Stderr;
                }
            }
        }
        match blocking(|| io::stderr().lock().write_all(&self.buf)) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::BrokenPipe => self.closed = true,
            Err(err) => {
                self.failed.get_or_insert_with(|| SinkError::Stderr(plain_io(&err)));
            }
        }
        self.buf.clear();
    }

    /// Delivers the rest; an error when some report could not be written where it was
    /// asked to go (a closed pipe is not an error).
    pub fn finish(mut self) -> Result<(), SinkError> {
        self.deliver();
        match self.failed.take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if !self.closed {
            self.buf.extend_from_slice(data);
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.deliver();
        Ok(())
    }
}

/// An I/O error's text without Rust's ` (os error N)` suffix.
fn plain_io(err: &io::Error) -> String {
    let text = err.to_string();
    match text.rfind(" (os error") {
        Some(cut) => text[..cut].to_string(),
        None => text,
    }
}

/// Standard output that names itself in its errors ("cannot write to standard output: No
/// space left on device" rather than a bare errno), keeping the error's kind so a closed
/// pipe is still told apart.
pub struct NamedStdout<W>(pub W);

impl<W: Write> NamedStdout<W> {
    fn named(err: io::Error) -> io::Error {
        let text = err.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        io::Error::new(err.kind(), format!("cannot write to standard output: {text}"))
    }
}

impl<W: Write> Write for NamedStdout<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if tmetric_runtime::inherit::closed_at_start(1) {
            return Err(Self::named(io::Error::other("it was closed when tmetric started")));
        }
        blocking(|| self.0.write(data)).map_err(Self::named)
    }

    fn flush(&mut self) -> io::Result<()> {
        blocking(|| self.0.flush()).map_err(Self::named)
    }
}

/// Why a [`Sink`] could not be made, or could not deliver everything where it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// `-o FILE` cannot be created.
    #[error("cannot create {}", .path.display())]
    Create {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// `--append`'s file cannot be opened.
    #[error("cannot open {} to append to it", .path.display())]
    Append {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Writing to the file failed part way; the rest went to standard error.
    #[error("{} is incomplete ({why}); the counts were printed to standard error", .path.display())]
    Incomplete {
        /// The file.
        path: PathBuf,
        /// The I/O error's text.
        why: String,
    },
    /// Standard error could not be written (other than a closed pipe).
    #[error("cannot write the counts to standard error: {0}")]
    Stderr(String),
}
