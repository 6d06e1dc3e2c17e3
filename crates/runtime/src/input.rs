//! One bounded reader for every file tmetric reads: record files, counts files, simulated
//! workloads, retire-latency files, every file under a `--sysfs`/`--proc` tree. A file is
//! read whole only when it is a regular file no larger than the cap of its kind; a FIFO,
//! socket or device (`/dev/zero`) is refused before a byte is read, and opening never
//! blocks (a FIFO without a writer would hold the run forever). Standard input may be a
//! pipe or a terminal and is read up to the same cap.
//!
//! Errors are `io::Error`s whose text says what was wrong and what to give instead, so the
//! callers keep naming the file as they did.

use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// A `tmetric record` file or a perf.data file (`report -i`).
pub const RECORD: u64 = 1 << 30;
/// A counts file (`eval --counts`, `describe --counts`).
pub const COUNTS: u64 = 256 << 20;
/// A simulated workload (`--pmu-sim-workload`).
pub const WORKLOAD: u64 = 16 << 20;
/// A retire-latency file (`--retire-latency`).
pub const RETIRE_LATENCY: u64 = 64 << 20;
/// One file of a sysfs or procfs tree (the kernel's are a page; `cpuinfo` on a large machine
/// a few hundred KiB).
pub const SYSFS_FILE: u64 = 16 << 20;

/// `cap` as people read it.
fn size(cap: u64) -> String {
    if cap >= 1 << 30 {
        format!("{} GiB", cap >> 30)
    } else if cap >= 1 << 20 {
        format!("{} MiB", cap >> 20)
    } else {
        format!("{} KiB", cap >> 10)
    }
}

/// Why a file that is not a regular one is refused, or `None` for a regular file.
fn not_regular(kind: std::fs::FileType) -> Option<io::Error> {
    let what = if kind.is_file() {
        return None;
    } else if kind.is_dir() {
        return Some(io::Error::from_raw_os_error(libc::EISDIR));
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Some(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "{what}, not a regular file: give a file (or `-` with the data on standard input where a command takes it)"
        ),
    ))
}

/// Reads at most `cap` bytes from `reader`; more is an error.
fn capped(reader: impl Read, cap: u64) -> io::Result<Vec<u8>> {
    let mut data = Vec::new();
    reader.take(cap.saturating_add(1)).read_to_end(&mut data)?;
    if data.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {}, more than such a file holds: give the right file", size(cap)),
        ));
    }
    Ok(data)
}

/// The whole of the regular file `path`, at most `cap` bytes (see the module documentation).
pub fn read(path: impl AsRef<Path>, cap: u64) -> io::Result<Vec<u8>> {
    // O_NONBLOCK: opening a FIFO for reading waits for a writer otherwise. The descriptor
    // is checked before anything is read, so no read is ever non-blocking.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path.as_ref())?;
    if let Some(err) = not_regular(file.metadata()?.file_type()) {
        return Err(err);
    }
    capped(file, cap)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: impl AsRef<Path>, cap: u64) -> io::Result<String> {
    String::from_utf8(read(path, cap)?).map_err(|_| {
        io::Error::new(io::ErrorKind::InvalidData, "stream did not contain valid UTF-8")
    })
}

/// A file of a sysfs or procfs tree ([`read_to_string`] with [`SYSFS_FILE`]).
pub fn read_sysfs(path: impl AsRef<Path>) -> io::Result<String> {
    read_to_string(path, SYSFS_FILE)
}

/// Standard input, at most `cap` bytes: a file, a pipe or a terminal, but not a device that
/// never ends (`< /dev/zero`).
pub fn read_stdin(cap: u64) -> io::Result<Vec<u8>> {
    let stdin = io::stdin();
    let kind = std::fs::metadata("/proc/self/fd/0").map(|m| m.file_type());
    if let Ok(kind) = kind
        && (kind.is_char_device() || kind.is_block_device())
        && !io::IsTerminal::is_terminal(&stdin)
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "standard input is a device, not a file or a pipe: give a file",
        ));
    }
    capped(stdin.lock(), cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_directories_are_refused_and_files_capped() {
        let err = read(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert!(err.to_string().contains("a character device"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Without a writer: refused at once rather than waiting for one.
        let err = read(&fifo, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("a FIFO"), "{err}");
        let err = read(dir.path(), 1 << 20).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EISDIR));
        let file = dir.path().join("f");
        std::fs::write(&file, vec![b'x'; 2048]).unwrap();
        assert_eq!(read(&file, 2048).unwrap().len(), 2048);
        let err = read(&file, 2047).unwrap_err();
        assert!(err.to_string().contains("larger than 1 KiB"), "{err}");
        assert!(!read_to_string(Path::new("/proc/self/stat"), 1 << 20).unwrap().is_empty());
    }
}
