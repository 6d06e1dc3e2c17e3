//! Opening the files tmetric writes (`-o` of `stat`, `report`, `rules`, record files) so that
//! a link or a file another user planted in a shared sticky directory (`/tmp`) never
//! redirects root's write, whatever `fs.protected_symlinks` and `fs.protected_regular` say.
//! The kernel's own rules, applied whether or not they are switched on: in a sticky directory
//! that others may write, a symbolic link is followed only when its owner is the writer or
//! the directory's owner, and an existing file is written only when the same holds for it.
//! Links elsewhere are followed, as `-o /dev/stdout` must work. New files are 0600.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Whether `owner` may be trusted for an entry of the directory `dir` (see the module
/// documentation): the directory is not a sticky one others write, or the entry is the
/// writer's or the directory owner's.
fn trusted(dir: &std::fs::Metadata, owner: u32) -> bool {
    let shared_sticky = dir.mode() & 0o1000 != 0 && dir.mode() & 0o002 != 0;
    // SAFETY: geteuid cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    !shared_sticky || owner == me || owner == dir.uid()
}

fn refused(path: &Path, what: &str, owner: u32) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} is {what} owned by user {owner} in a shared sticky directory: not followed, as another user may have planted it; remove it or write elsewhere",
            path.display()
        ),
    )
}

/// The directory holding `path`.
fn parent(path: &Path) -> io::Result<std::fs::Metadata> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => std::fs::metadata(p),
        _ => std::fs::metadata("."),
    }
}

/// Opens `path` for writing, created 0600 when new, truncated unless `append`, refusing a
/// planted link or file (see the module documentation).
pub fn create(path: &Path, append: bool) -> io::Result<File> {
    let open = |follow: bool| {
        let mut options = OpenOptions::new();
        if append {
            options.append(true);
        } else {
            options.write(true).truncate(true);
        }
        let flags = if follow { 0 } else { libc::O_NOFOLLOW };
        // Opening a FIFO waits for a reader: a stop signal must still end the run.
        crate::signal::blocking(|| options.create(true).mode(0o600).custom_flags(flags).open(path))
    };
    match open(false) {
        Ok(file) => {
            let meta = file.metadata()?;
            // A file another user made in a sticky directory: the kernel's protected_regular.
            if meta.is_file() && !trusted(&parent(path)?, meta.uid()) {
                return Err(refused(path, "a file", meta.uid()));
            }
            Ok(file)
        }
        // O_NOFOLLOW on a link: ELOOP, or EACCES from some kernels when creating.
        Err(err) if matches!(err.raw_os_error(), Some(libc::ELOOP | libc::EACCES)) => {
            let link = match std::fs::symlink_metadata(path) {
                Ok(link) if link.file_type().is_symlink() => link,
                _ => return Err(err),
            };
            // In a sticky directory only the link's owner (trusted here) can replace it, so
            // the check holds until the open below.
            if !trusted(&parent(path)?, link.uid()) {
                return Err(refused(path, "a symbolic link", link.uid()));
            }
            open(true)
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_followed_outside_sticky_directories() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::os::unix::fs::symlink(&target, dir.path().join("link")).unwrap();
        create(&dir.path().join("link"), false).unwrap();
        assert!(target.exists());
        use std::io::Write;
        create(&dir.path().join("f"), false).unwrap().write_all(b"a").unwrap();
        create(&dir.path().join("f"), true).unwrap().write_all(b"b").unwrap();
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"ab");
        let mode = std::fs::metadata(dir.path().join("f")).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        create(Path::new("/dev/null"), false).unwrap();
    }
}
