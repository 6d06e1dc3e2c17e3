//! The system-call boundary: the [`Syscalls`] trait, its kernel implementation [`Kernel`], the
//! plain [`Attr`] tmetric fills in, and errno names.
//!
//! Everything above this module reaches the kernel's perf interface only through [`Syscalls`],
//! so the counting logic runs unchanged over `fake::FakeSyscalls` (the `fake` feature) in tests
//! and over simulated PMUs. Process control (fork, wait, signals) lives in `workload` and `signal`.

use std::fmt;
use std::os::raw::{c_int, c_uint, c_ulong};

use perf_event_open_sys as sys;

/// `PERF_FORMAT_TOTAL_TIME_ENABLED`.
pub const FORMAT_TOTAL_TIME_ENABLED: u64 = sys::bindings::PERF_FORMAT_TOTAL_TIME_ENABLED as u64;
/// `PERF_FORMAT_TOTAL_TIME_RUNNING`.
pub const FORMAT_TOTAL_TIME_RUNNING: u64 = sys::bindings::PERF_FORMAT_TOTAL_TIME_RUNNING as u64;
/// `PERF_FORMAT_ID`.
pub const FORMAT_ID: u64 = sys::bindings::PERF_FORMAT_ID as u64;
/// `PERF_FORMAT_GROUP`.
pub const FORMAT_GROUP: u64 = sys::bindings::PERF_FORMAT_GROUP as u64;
/// The read format every counter tmetric opens uses: one `read()` of any member returns the
/// whole group with its enabled and running times, members named by id.
pub const READ_FORMAT: u64 =
    FORMAT_GROUP | FORMAT_ID | FORMAT_TOTAL_TIME_ENABLED | FORMAT_TOTAL_TIME_RUNNING;

/// `PERF_TYPE_HARDWARE`.
pub const TYPE_HARDWARE: u32 = sys::bindings::PERF_TYPE_HARDWARE;
/// `PERF_TYPE_SOFTWARE`.
pub const TYPE_SOFTWARE: u32 = sys::bindings::PERF_TYPE_SOFTWARE;
/// `PERF_TYPE_TRACEPOINT`.
pub const TYPE_TRACEPOINT: u32 = sys::bindings::PERF_TYPE_TRACEPOINT;
/// `PERF_TYPE_HW_CACHE`.
pub const TYPE_HW_CACHE: u32 = sys::bindings::PERF_TYPE_HW_CACHE;
/// `PERF_TYPE_RAW`.
pub const TYPE_RAW: u32 = sys::bindings::PERF_TYPE_RAW;

/// An `errno` value from a failed call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// The calling thread's current `errno`.
    pub fn last() -> Errno {
        Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// The symbolic name (`ENOENT`), or `errno N` for one this table does not know.
    pub fn name(self) -> String {
        let name = match self.0 {
            libc::EPERM => "EPERM",
            libc::ENOENT => "ENOENT",
            libc::ESRCH => "ESRCH",
            libc::EINTR => "EINTR",
            libc::EIO => "EIO",
            libc::ENXIO => "ENXIO",
            libc::E2BIG => "E2BIG",
            libc::EBADF => "EBADF",
            libc::EAGAIN => "EAGAIN",
            libc::ENOMEM => "ENOMEM",
            libc::EACCES => "EACCES",
            libc::EFAULT => "EFAULT",
            libc::EBUSY => "EBUSY",
            libc::ENODEV => "ENODEV",
            libc::EINVAL => "EINVAL",
            libc::ENFILE => "ENFILE",
            libc::EMFILE => "EMFILE",
            libc::ENOSPC => "ENOSPC",
            libc::ENOSYS => "ENOSYS",
            libc::ENODATA => "ENODATA",
            libc::EOPNOTSUPP => "EOPNOTSUPP",
            other => return format!("errno {other}"),
        };
        name.to_string()
    }

    /// The C library's text for it, without Rust's ` (os error N)` suffix.
    pub fn text(self) -> String {
        let full = std::io::Error::from_raw_os_error(self.0).to_string();
        match full.rfind(" (os error") {
            Some(cut) => full[..cut].to_string(),
            None => full,
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.text())
    }
}

/// So callers keep an errno as the cause of their own error (`.context(...)`).
impl std::error::Error for Errno {}

/// The `perf_event_attr` fields tmetric sets; everything else is zero.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Attr {
    /// `type`: a fixed `PERF_TYPE_*` or a PMU's sysfs `type`.
    pub type_: u32,
    /// `config`.
    pub config: u64,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// `config3`.
    pub config3: u64,
    /// `read_format`.
    pub read_format: u64,
    /// Start disabled (group leaders only).
    pub disabled: bool,
    /// Count the children the task creates after the open.
    pub inherit: bool,
    /// Enable at the task's next `exec` (group leaders only).
    pub enable_on_exec: bool,
    /// `pinned` (group leaders only).
    pub pinned: bool,
    /// Do not count user mode.
    pub exclude_user: bool,
    /// Do not count kernel mode.
    pub exclude_kernel: bool,
    /// Do not count the hypervisor.
    pub exclude_hv: bool,
    /// Do not count while a guest runs.
    pub exclude_guest: bool,
    /// Do not count in the host.
    pub exclude_host: bool,
    /// Do not count when the CPU is idle (`:I`).
    pub exclude_idle: bool,
    /// `exclusive`: the group must be alone on the PMU (`:e`, group leaders only).
    pub exclusive: bool,
    /// Not a `perf_event_attr` field: the `pid` of the open is a cgroup directory's
    /// descriptor (`PERF_FLAG_PID_CGROUP`: count that cgroup's tasks on one CPU).
    pub pid_is_cgroup: bool,
    /// `sample_period`, or `sample_freq` (Hz) when `freq`; 0 makes a counting event.
    pub sample_period: u64,
    /// `freq`: `sample_period` holds a frequency.
    pub freq: bool,
    /// `sample_type`: the `PERF_SAMPLE_*` fields every sample record carries.
    pub sample_type: u64,
    /// `precise_ip` (0-3): the skid constraint; 1 and above ask for PEBS on x86, which TPEBS
    /// needs. Values above 3 do not fit the 2-bit field and are sent as 3.
    pub precise_ip: u8,
    /// `wakeup_events`, or `wakeup_watermark` (bytes) when `watermark`: when poll() wakes.
    pub wakeup: u32,
    /// `watermark`: `wakeup` counts bytes, not records.
    pub watermark: bool,
}

/// The perf system calls tmetric makes. File descriptors are plain integers: the caller owns
/// them and gives each back through [`Syscalls::close`].
pub trait Syscalls {
    /// `perf_event_open(attr, pid, cpu, group_fd, PERF_FLAG_FD_CLOEXEC)`.
    fn perf_event_open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, Errno>;
    /// `read(fd, buf)`: the number of bytes read.
    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno>;
    /// `PERF_EVENT_IOC_ENABLE`, with `PERF_IOC_FLAG_GROUP` when `group`.
    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno>;
    /// `PERF_EVENT_IOC_DISABLE`, with `PERF_IOC_FLAG_GROUP` when `group`.
    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno>;
    /// `PERF_EVENT_IOC_RESET`, with `PERF_IOC_FLAG_GROUP` when `group`.
    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno>;
    /// `PERF_EVENT_IOC_ID`: the id the group read layout names this counter by.
    fn event_id(&mut self, fd: i32) -> Result<u64, Errno>;
    /// `close(fd)`.
    fn close(&mut self, fd: i32);
    /// `PERF_EVENT_IOC_SET_FILTER`: a tracepoint's filter (`--filter`), in the kernel's
    /// ftrace filter language over the tracepoint's fields. The default refuses with ENOSYS,
    /// for backends without tracepoints.
    fn set_filter(&mut self, fd: i32, filter: &str) -> Result<(), Errno> {
        let _ = (fd, filter);
        Err(Errno(libc::ENOSYS))
    }
    /// Raises the soft limit on open descriptors (`RLIMIT_NOFILE`) to the hard limit, since
    /// counting per CPU needs one descriptor per event per CPU. Returns the soft limit now
    /// in force, if known. The default does nothing.
    fn raise_fd_limit(&mut self) -> Option<u64> {
        None
    }
    /// Opens the cgroup `name` (a path under the cgroup mount, `/` for the root) for
    /// `PERF_FLAG_PID_CGROUP`: a read-only, close-on-exec directory descriptor, given back
    /// through [`Syscalls::close`]. The default opens the machine's own cgroup tree, which
    /// simulated kernels count against too.
    fn open_cgroup(&mut self, name: &str) -> Result<i32, Errno> {
        open_cgroup_dir(name)
    }
    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)`: a sampling event's ring
    /// buffer (one control page, then a power-of-two number of data pages). Writable, so the
    /// kernel honours `data_tail` and never overwrites unread records. The default refuses
    /// with ENOSYS, for backends without rings.
    fn mmap(&mut self, fd: i32, len: usize) -> Result<crate::ring::Mapping, Errno> {
        let _ = (fd, len);
        Err(Errno(libc::ENOSYS))
    }
    /// Moves the calling thread to `cpu`, so that reads of that CPU's counters run there and
    /// the kernel reads them without a call to another CPU (`perf_event_read` sends an IPI and
    /// waits for it whenever a counter is active elsewhere: perf stat moves itself from CPU to
    /// CPU for the same reason, `evlist__for_each_cpu`). Whether it moved; the default does
    /// not, for backends with no CPUs to move between.
    fn move_to_cpu(&mut self, cpu: u32) -> bool {
        let _ = cpu;
        false
    }
    /// Gives the calling thread back the CPUs it had before the first
    /// [`Syscalls::move_to_cpu`]. The default does nothing.
    fn restore_cpus(&mut self) {}
    /// The CPU the calling thread runs on, where the backend knows (`sched_getcpu`): its
    /// counters are read first, before any move.
    fn current_cpu(&mut self) -> Option<u32> {
        None
    }
}

/// `perf_event_open`, retried with `exclude_kernel` (and `exclude_hv`) when the kernel
/// refuses kernel-mode counting with `EACCES`, as perf's fallback does: with
/// `perf_event_paranoid` at 2 an unprivileged user may count user mode only. Returns the
/// descriptor and whether it counts user mode only. When user mode is refused too (a PMU
/// without exclude bits answers `EINVAL`), the permission is what the user must fix, so the
/// first refusal is returned; running out of descriptors is returned as such. The one open
/// path of [`crate::CounterSet`] and of a thread's own group, through [`open_counter`].
pub fn open_or_user_only<S: Syscalls + ?Sized>(
    sys: &mut S,
    attr: &Attr,
    pid: i32,
    cpu: i32,
    group_fd: i32,
) -> Result<(i32, bool), Errno> {
    match sys.perf_event_open(attr, pid, cpu, group_fd) {
        Err(Errno(libc::EACCES)) if !attr.exclude_kernel => {
            let mut user = attr.clone();
            user.exclude_kernel = true;
            user.exclude_hv = true;
            let fd = sys.perf_event_open(&user, pid, cpu, group_fd).map_err(|e| {
                if matches!(e.0, libc::EMFILE | libc::ENFILE) { e } else { Errno(libc::EACCES) }
            })?;
            Ok((fd, true))
        }
        other => other.map(|fd| (fd, false)),
    }
}

/// One counter as opened: its descriptor, the kernel's id for it (how group reads name
/// members), and whether it counts user mode only ([`open_or_user_only`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    /// The descriptor.
    pub fd: i32,
    /// `PERF_EVENT_IOC_ID`.
    pub id: u64,
    /// The kernel refused kernel mode and the counter counts user mode only.
    pub user_only: bool,
}

/// Opens one counter through [`open_or_user_only`] and reads its id, closing it again when
/// the id cannot be read: every counter of [`crate::CounterSet`] and of a thread's own
/// group ([`crate::counter::open_own_group`]) is opened here.
pub fn open_counter<S: Syscalls + ?Sized>(
    sys: &mut S,
    attr: &Attr,
    pid: i32,
    cpu: i32,
    group_fd: i32,
) -> Result<Opened, Errno> {
    let (fd, user_only) = open_or_user_only(sys, attr, pid, cpu, group_fd)?;
    match sys.event_id(fd) {
        Ok(id) => Ok(Opened { fd, id, user_only }),
        Err(errno) => {
            sys.close(fd);
            Err(errno)
        }
    }
}

/// Where cgroups are mounted for perf: the v1 hierarchy with the `perf_event` controller when
/// `/proc/cgroups` binds the controller to one (a non-zero hierarchy id: the kernel then
/// refuses cgroup2 directories for perf events), else the cgroup2 mount, else any v1
/// `perf_event` mount (perf's `cgroupfs_find_mountpoint`), from `/proc/self/mounts`.
pub fn cgroup_mount() -> Option<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let cgroups = std::fs::read_to_string("/proc/cgroups").unwrap_or_default();
    pick_cgroup_mount(&mounts, &cgroups)
}

/// [`cgroup_mount`] from the texts of `/proc/self/mounts` and `/proc/cgroups`.
pub fn pick_cgroup_mount(mounts: &str, cgroups: &str) -> Option<std::path::PathBuf> {
    let fields = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<String>>();
    let all: Vec<Vec<String>> = mounts.lines().map(fields).filter(|f| f.len() >= 4).collect();
    let v1 = || all.iter().find(|f| f[2] == "cgroup" && f[3].split(',').any(|o| o == "perf_event"));
    let v2 = || all.iter().find(|f| f[2] == "cgroup2");
    let on_v1 = cgroups.lines().any(|l| {
        let mut f = l.split_whitespace();
        f.next() == Some("perf_event") && f.next().is_some_and(|h| h != "0")
    });
    let found = if on_v1 { v1().or_else(v2) } else { v2().or_else(v1) };
    found.map(|f| std::path::PathBuf::from(&f[1]))
}

/// Opens cgroup `name` under [`cgroup_mount`] as a directory descriptor (read-only,
/// close-on-exec, not through a final symlink). ENOENT when there is no such cgroup or no
/// cgroup mount; a name with `..` is refused (EINVAL): it would leave the cgroup tree.
pub fn open_cgroup_dir(name: &str) -> Result<i32, Errno> {
    let mount = cgroup_mount().ok_or(Errno(libc::ENOENT))?;
    let rel = name.trim_start_matches('/');
    if rel.split('/').any(|part| part == "..") {
        return Err(Errno(libc::EINVAL));
    }
    let path = if rel.is_empty() { mount } else { mount.join(rel) };
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    if fd < 0 { Err(Errno::last()) } else { Ok(fd) }
}

/// The user plus system CPU time of this process's children that have been waited for
/// (`getrusage(RUSAGE_CHILDREN)`), as benchmarks time a command they ran.
pub fn children_cpu() -> std::time::Duration {
    rusage_cpu(libc::RUSAGE_CHILDREN)
}

/// The user plus system CPU time of this process, all its threads (`getrusage(RUSAGE_SELF)`),
/// as benchmarks time work they do in process.
pub fn own_cpu() -> std::time::Duration {
    rusage_cpu(libc::RUSAGE_SELF)
}

fn rusage_cpu(who: libc::c_int) -> std::time::Duration {
    // SAFETY: getrusage fills the struct it is given; `who` is RUSAGE_SELF or RUSAGE_CHILDREN.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(who, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| {
        std::time::Duration::new(
            t.tv_sec.max(0) as u64,
            (t.tv_usec.clamp(0, 999_999) as u32) * 1000,
        )
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// Closes a descriptor tmetric opened outside a [`Syscalls`] backend.
pub fn close_fd(fd: i32) {
    // SAFETY: closing a descriptor the caller owns and no longer uses.
    unsafe {
        libc::close(fd);
    }
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds; 0 when
/// the clock cannot be read. Exporters measure their own overhead with it.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through the pointer, which points at `ts`.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } < 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The effective user id (perf reads `~/.perfconfig` only when this user or root owns it).
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// perf's `-S`/`--sync`: commits every filesystem's buffered writes (`sync(2)`) before a run,
/// so that the run does not pay for the writes of what came before it.
pub fn sync_filesystems() {
    // SAFETY: sync has no arguments and cannot fail.
    unsafe { libc::sync() }
}

/// perf's `--log-fd N`: a file of its own for the open descriptor `fd` (a duplicate, close on
/// exec, sharing the file's offset and flags), so that the caller's `fd` stays open for
/// whoever opened it. `EBADF` when `fd` is not open.
pub fn file_of_descriptor(fd: i32) -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: F_DUPFD_CLOEXEC reads no memory; it fails with EBADF for a closed `fd`.
    let dup = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `dup` was just created and nothing else owns it.
    Ok(unsafe { std::fs::File::from_raw_fd(dup) })
}

/// Whether tmetric runs with effective user id 0.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Mounts tracefs at `target`; `EPERM` without trying unless running as root.
pub fn mount_tracefs(target: &std::path::Path) -> Result<(), Errno> {
    if !is_root() {
        return Err(Errno(libc::EPERM));
    }
    let target = std::ffi::CString::new(target.as_os_str().as_encoded_bytes())
        .map_err(|_| Errno(libc::EINVAL))?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, and the data
    // argument may be null for tracefs.
    let result = unsafe {
        libc::mount(c"nodev".as_ptr(), target.as_ptr(), c"tracefs".as_ptr(), 0, std::ptr::null())
    };
    check(result)
}

/// The real kernel.
#[derive(Debug, Default, Clone, Copy)]
pub struct Kernel;

thread_local! {
    /// The CPUs a thread may run on before [`Kernel`] first moved it to read a CPU's
    /// counters there, until it is given them back.
    static ORIGINAL_CPUS: std::cell::Cell<Option<libc::cpu_set_t>> =
        const { std::cell::Cell::new(None) };
}

fn raw_attr(attr: &Attr) -> sys::bindings::perf_event_attr {
    let mut raw = sys::bindings::perf_event_attr {
        type_: attr.type_,
        // The full size of the bindings' struct: the kernel accepts a larger struct than its
        // own as long as the tail is zero, which it is.
        size: std::mem::size_of::<sys::bindings::perf_event_attr>() as u32,
        config: attr.config,
        config3: attr.config3,
        read_format: attr.read_format,
        ..Default::default()
    };
    raw.__bindgen_anon_3.config1 = attr.config1;
    raw.__bindgen_anon_4.config2 = attr.config2;
    raw.set_disabled(attr.disabled.into());
    raw.set_inherit(attr.inherit.into());
    raw.set_enable_on_exec(attr.enable_on_exec.into());
    raw.set_pinned(attr.pinned.into());
    raw.set_exclude_user(attr.exclude_user.into());
    raw.set_exclude_kernel(attr.exclude_kernel.into());
    raw.set_exclude_hv(attr.exclude_hv.into());
    raw.set_exclude_guest(attr.exclude_guest.into());
    raw.set_exclude_host(attr.exclude_host.into());
    raw.set_exclude_idle(attr.exclude_idle.into());
    raw.set_exclusive(attr.exclusive.into());
    raw.__bindgen_anon_1.sample_period = attr.sample_period;
    raw.set_freq(attr.freq.into());
    raw.sample_type = attr.sample_type;
    raw.set_precise_ip(attr.precise_ip.min(3).into());
    raw.__bindgen_anon_2.wakeup_events = attr.wakeup;
    raw.set_watermark(attr.watermark.into());
    raw
}

fn check(result: c_int) -> Result<(), Errno> {
    if result < 0 { Err(Errno::last()) } else { Ok(()) }
}

fn group_flag(group: bool) -> c_uint {
    if group { sys::bindings::PERF_IOC_FLAG_GROUP } else { 0 }
}

impl Syscalls for Kernel {
    fn perf_event_open(
        &mut self,
        attr: &Attr,
        pid: i32,
        cpu: i32,
        group_fd: i32,
    ) -> Result<i32, Errno> {
        let mut raw = raw_attr(attr);
        // SAFETY: `raw` is a fully initialised perf_event_attr that outlives the call; the
        // kernel reads it and at most writes its own size back into `size`.
        let fd = unsafe {
            sys::perf_event_open(
                &mut raw,
                pid,
                cpu,
                group_fd,
                (sys::bindings::PERF_FLAG_FD_CLOEXEC
                    | if attr.pid_is_cgroup { sys::bindings::PERF_FLAG_PID_CGROUP } else { 0 })
                    as c_ulong,
            )
        };
        if fd < 0 { Err(Errno::last()) } else { Ok(fd) }
    }

    fn read(&mut self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        loop {
            // SAFETY: the pointer and length describe `buf`, which is writable for the call.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let errno = Errno::last();
            if errno.0 != libc::EINTR {
                return Err(errno);
            }
        }
    }

    fn enable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        // SAFETY: ENABLE takes an integer argument and touches no memory of ours.
        check(unsafe { sys::ioctls::ENABLE(fd, group_flag(group)) })
    }

    fn disable(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        // SAFETY: DISABLE takes an integer argument and touches no memory of ours.
        check(unsafe { sys::ioctls::DISABLE(fd, group_flag(group)) })
    }

    fn reset(&mut self, fd: i32, group: bool) -> Result<(), Errno> {
        // SAFETY: RESET takes an integer argument and touches no memory of ours.
        check(unsafe { sys::ioctls::RESET(fd, group_flag(group)) })
    }

    fn event_id(&mut self, fd: i32) -> Result<u64, Errno> {
        let mut id = 0u64;
        // SAFETY: ID writes one u64 through the pointer, which points at `id`.
        check(unsafe { sys::ioctls::ID(fd, &mut id) })?;
        Ok(id)
    }

    fn set_filter(&mut self, fd: i32, filter: &str) -> Result<(), Errno> {
        // A filter with a NUL inside cannot be passed as a C string; the kernel would read
        // it only up to the NUL.
        let mut text =
            std::ffi::CString::new(filter).map_err(|_| Errno(libc::EINVAL))?.into_bytes_with_nul();
        // SAFETY: SET_FILTER reads a NUL-terminated string through the pointer, which points
        // at `text`, alive for the call; the kernel does not write through it.
        check(unsafe { sys::ioctls::SET_FILTER(fd, text.as_mut_ptr().cast()) })
    }

    fn close(&mut self, fd: i32) {
        // SAFETY: the caller gives back a descriptor it owns and no longer uses.
        unsafe {
            libc::close(fd);
        }
    }

    fn raise_fd_limit(&mut self) -> Option<u64> {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes one rlimit struct through the pointer, which points at
        // `limit`.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } < 0 {
            return None;
        }
        // The workload gets the limit tmetric was started with, not the raised one.
        crate::inherit::note_nofile(limit.rlim_cur, limit.rlim_max);
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
            // SAFETY: setrlimit reads one rlimit struct through the pointer, which points at
            // `raised`. Raising the soft limit up to the hard one needs no privilege.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                return Some(raised.rlim_cur);
            }
        }
        Some(limit.rlim_cur)
    }

    fn mmap(&mut self, fd: i32, len: usize) -> Result<crate::ring::Mapping, Errno> {
        let page = crate::ring::page_size();
        if len < 2 * page || !len.is_multiple_of(page) {
            return Err(Errno(libc::EINVAL));
        }
        // SAFETY: a fresh shared mapping chosen by the kernel (no address hint), of a perf
        // descriptor; it aliases no Rust object.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        let ptr = std::ptr::NonNull::new(ptr.cast::<u8>()).ok_or(Errno(libc::ENOMEM))?;
        // SAFETY: mmap returned this page-aligned read-write shared mapping of `len` bytes
        // (at least two pages, checked above); the Mapping becomes its only owner.
        Ok(unsafe { crate::ring::Mapping::from_mmap(ptr, len, fd) })
    }

    fn move_to_cpu(&mut self, cpu: u32) -> bool {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return false;
        }
        // SAFETY: `sched_getaffinity`/`sched_setaffinity` on the calling thread (pid 0) with a
        // `cpu_set_t` of the size given; CPU_ZERO/CPU_SET only write into that set.
        unsafe {
            let saved = ORIGINAL_CPUS.with(|o| o.get().is_some());
            if !saved {
                let mut set = std::mem::zeroed::<libc::cpu_set_t>();
                if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0
                {
                    return false;
                }
                if !libc::CPU_ISSET(cpu as usize, &set) {
                    return false;
                }
                ORIGINAL_CPUS.with(|o| o.set(Some(set)));
            }
            let mut one = std::mem::zeroed::<libc::cpu_set_t>();
            libc::CPU_ZERO(&mut one);
            libc::CPU_SET(cpu as usize, &mut one);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) == 0
        }
    }

    fn current_cpu(&mut self) -> Option<u32> {
        // SAFETY: no arguments; -1 on failure.
        u32::try_from(unsafe { libc::sched_getcpu() }).ok()
    }

    fn restore_cpus(&mut self) {
        if let Some(set) = ORIGINAL_CPUS.with(|o| o.take()) {
            // SAFETY: the set `sched_getaffinity` gave for this thread, at its size.
            unsafe {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        }
    }
}

/// EMFILE or ENFILE: the process's or the system's descriptors ran out (std has no stable
/// `ErrorKind` for them), so a message can say to raise `ulimit -n`.
pub fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perf_event bound to a v1 hierarchy: its mount, not the cgroup2 one (where the kernel
    /// refuses cgroup directories for perf events); otherwise cgroup2 first.
    #[test]
    fn the_perf_event_hierarchy_is_where_proc_cgroups_binds_it() {
        let mounts = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n\
                      cgroup /sys/fs/cgroup/perf_event cgroup rw,perf_event 0 0\n";
        let on_v1 = "#subsys_name\thierarchy\tnum_cgroups\tenabled\nperf_event\t9\t1\t1\n";
        let on_v2 = "#subsys_name\thierarchy\tnum_cgroups\tenabled\nperf_event\t0\t1\t1\n";
        let pick = |c| pick_cgroup_mount(mounts, c).unwrap().display().to_string();
        assert_eq!(pick(on_v1), "/sys/fs/cgroup/perf_event");
        assert_eq!(pick(on_v2), "/sys/fs/cgroup/unified");
        assert_eq!(pick(""), "/sys/fs/cgroup/unified");
        let only_v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n";
        assert_eq!(
            pick_cgroup_mount(only_v2, on_v1).unwrap().display().to_string(),
            "/sys/fs/cgroup"
        );
    }

    #[test]
    fn errno_names_and_text() {
        assert_eq!(Errno(libc::ENOENT).name(), "ENOENT");
        assert_eq!(Errno(libc::EOPNOTSUPP).name(), "EOPNOTSUPP");
        assert_eq!(Errno(9999).name(), "errno 9999");
        assert_eq!(Errno(libc::ENOENT).text(), "No such file or directory");
        assert_eq!(Errno(libc::ENOENT).to_string(), "ENOENT (No such file or directory)");
    }

    #[test]
    fn raw_attr_sets_the_documented_offsets() {
        let attr = Attr {
            type_: 9,
            config: 0x1234,
            config1: 7,
            config2: 8,
            read_format: READ_FORMAT,
            disabled: true,
            enable_on_exec: true,
            inherit: true,
            ..Attr::default()
        };
        let raw = raw_attr(&attr);
        // SAFETY: perf_event_attr is plain old data; viewing it as bytes is sound.
        let bytes: &[u8] = unsafe {
            std::slice::from_raw_parts(
                (&raw as *const sys::bindings::perf_event_attr).cast::<u8>(),
                std::mem::size_of_val(&raw),
            )
        };
        let u64_at = |off: usize| u64::from_ne_bytes(bytes[off..off + 8].try_into().unwrap());
        let u32_at = |off: usize| u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap());
        // Offsets of `struct perf_event_attr` in include/uapi/linux/perf_event.h.
        assert_eq!(u32_at(0), 9);
        assert!(u32_at(4) >= 136);
        assert_eq!(u64_at(8), 0x1234);
        assert_eq!(u64_at(32), 0xf);
        let flags = u64_at(40);
        assert_eq!(flags, 1 | (1 << 1) | (1 << 12));
        assert_eq!(u64_at(56), 7);
        assert_eq!(u64_at(64), 8);
    }

    #[test]
    fn raw_attr_sets_the_sampling_fields() {
        let attr = Attr {
            sample_period: 4000,
            freq: true,
            sample_type: (1 << 16) | (1 << 24),
            precise_ip: 2,
            wakeup: 16384,
            watermark: true,
            ..Attr::default()
        };
        let raw = raw_attr(&attr);
        // SAFETY: perf_event_attr is plain old data; viewing it as bytes is sound.
        let bytes: &[u8] = unsafe {
            std::slice::from_raw_parts(
                (&raw as *const sys::bindings::perf_event_attr).cast::<u8>(),
                std::mem::size_of_val(&raw),
            )
        };
        let u64_at = |off: usize| u64::from_ne_bytes(bytes[off..off + 8].try_into().unwrap());
        let u32_at = |off: usize| u32::from_ne_bytes(bytes[off..off + 4].try_into().unwrap());
        // Offsets from include/uapi/linux/perf_event.h: sample_period 16, sample_type
        // 24, flags 40 (freq bit 10, precise_ip bits 15-16, watermark bit 14),
        // wakeup_events/wakeup_watermark 48.
        assert_eq!(u64_at(16), 4000);
        assert_eq!(u64_at(24), (1 << 16) | (1 << 24));
        assert_eq!(u64_at(40), (1 << 10) | (2 << 15) | (1 << 14));
        assert_eq!(u32_at(48), 16384);
        // precise_ip is two bits: larger values are sent as 3, never spill into other flags.
        let raw = raw_attr(&Attr { precise_ip: 9, ..Attr::default() });
        assert_eq!(raw.precise_ip(), 3);
        assert_eq!(raw.exclude_host(), 0);
    }
}
