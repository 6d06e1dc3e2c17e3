//! perf.data: perf's cpuid spelling both ways, and perf's file handling on paths that are
//! not plain files.

use std::os::unix::fs::PermissionsExt;

use tmetric_record::perf::{create_file, header_cpuid, perf_cpuid};

#[test]
fn perf_cpuid_spelling() {
    assert_eq!(perf_cpuid("GenuineIntel,6,167,8"), "GenuineIntel-6-A7-8");
    assert_eq!(perf_cpuid("0x00000000410fd0c0"), "0x00000000410fd0c0");
}

#[test]
fn cpuid_spellings_round_trip() {
    assert_eq!(header_cpuid("GenuineIntel-6-8F-8"), "GenuineIntel,6,143,8");
    assert_eq!(header_cpuid("AuthenticAMD-25-11-1"), "AuthenticAMD,25,17,1");
    for id in ["GenuineIntel-6-8F-8", "GenuineIntel-6-AA-4", "AuthenticAMD-26-2-1"] {
        assert_eq!(perf_cpuid(&header_cpuid(id)), id);
    }
    // arm64's MIDR stays as it is.
    assert_eq!(header_cpuid("0x00000000410fd490"), "0x00000000410fd490");
}

#[test]
fn create_file_moves_what_is_there_and_never_writes_through_it() {
    // A private directory: never a predictable path in a shared one.
    let scratch = tempfile::Builder::new().prefix("tmetric-create-").tempdir().unwrap();
    let dir = scratch.path();
    let path = dir.join("perf.data");
    // An empty file is replaced by a fresh 0600 one (perf would truncate it in place).
    std::fs::write(&path, "").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    drop(create_file(&path).unwrap());
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!dir.join("perf.data.old").exists());
    // A directory at FILE.old is not removed.
    std::fs::write(&path, "x").unwrap();
    std::fs::create_dir(dir.join("perf.data.old")).unwrap();
    let err = create_file(&path).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "x");
    // A directory at FILE is refused.
    let err = create_file(dir).unwrap_err();
    assert!(err.to_string().contains("is a directory"), "{err}");
    // A device is written in place, never renamed or removed.
    drop(create_file(std::path::Path::new("/dev/null")).unwrap());
    assert!(std::path::Path::new("/dev/null").exists());
}
