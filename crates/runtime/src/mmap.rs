//! Reading counters from user space: the `perf_event_mmap_page` protocol (seqlock, `index`,
//! `offset`, `pmc_width`, `cap_user_rdpmc`, the time fields) as a pure function over a page
//! and an `rdpmc` callback, the real mapped page, and the `rdpmc` instruction behind it.
//!
//! The protocol follows the comments of `struct perf_event_mmap_page` in Linux 6.12's
//! `include/uapi/linux/perf_event.h`: read `lock`, read the fields, `rdpmc(index - 1)`,
//! sign-extend the raw value to `pmc_width` bits and add `offset`, and start again when `lock`
//! changed meanwhile (the kernel rewrote the page: the event was scheduled in or out).
//! `index == 0` (not on a counter now, or not user-readable) and `cap_user_rdpmc == 0` mean
//! the value cannot be read this way; callers then use `read()` for the whole group instead.
//!
//! [`read_page`] is pure so that page images built by hand ([`PageImage`]) test it; the real
//! page ([`UserPage`]) and the instruction ([`UserPage::read`]) are the only `unsafe` parts.

use std::cell::RefCell;

/// Byte offsets in `struct perf_event_mmap_page` (checked against the bindings in a test).
pub mod offsets {
    /// `__u32 lock`: the seqlock.
    pub const LOCK: usize = 8;
    /// `__u32 index`: `rdpmc` selector + 1, or 0.
    pub const INDEX: usize = 12;
    /// `__s64 offset`: add to the hardware value.
    pub const OFFSET: usize = 16;
    /// `__u64 time_enabled`.
    pub const TIME_ENABLED: usize = 24;
    /// `__u64 time_running`.
    pub const TIME_RUNNING: usize = 32;
    /// `__u64 capabilities` (bit field).
    pub const CAPABILITIES: usize = 40;
    /// `__u16 pmc_width`.
    pub const PMC_WIDTH: usize = 48;
    /// `__u16 time_shift`.
    pub const TIME_SHIFT: usize = 50;
    /// `__u32 time_mult`.
    pub const TIME_MULT: usize = 52;
    /// `__u64 time_offset`.
    pub const TIME_OFFSET: usize = 56;
    /// `__u64 time_cycles` (with `cap_user_time_short`).
    pub const TIME_CYCLES: usize = 80;
    /// `__u64 time_mask` (with `cap_user_time_short`).
    pub const TIME_MASK: usize = 88;
    /// Bytes up to the end of `time_mask`: what a page image must hold.
    pub const HEADER: usize = 96;
}

/// `cap_user_rdpmc`: the event's counter may be read with `rdpmc`.
pub const CAP_USER_RDPMC: u64 = 1 << 2;
/// `cap_user_time`: `time_mult`, `time_shift`, `time_offset` are valid.
pub const CAP_USER_TIME: u64 = 1 << 3;
/// `cap_user_time_short`: `time_cycles`, `time_mask` are valid.
pub const CAP_USER_TIME_SHORT: u64 = 1 << 5;

/// How often [`read_page`] retries a page the kernel keeps rewriting before giving up; a
/// rewrite happens at most on each context switch, so more than a few in a row means
/// something is wrong rather than unlucky.
pub const MAX_RETRIES: u32 = 1000;

/// Loads of the fields of a `perf_event_mmap_page`.
pub trait PageRead {
    /// The `u16` at byte `off`.
    fn u16_at(&self, off: usize) -> u16;
    /// The `u32` at byte `off`.
    fn u32_at(&self, off: usize) -> u32;
    /// The `u64` at byte `off`.
    fn u64_at(&self, off: usize) -> u64;
}

/// Why a page cannot be read with `rdpmc`: use one `read()` of the group instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// `cap_user_rdpmc` is 0 (software events, a kernel without user rdpmc, `rdpmc` sysfs 0).
    NoUserRdpmc,
    /// `index` is 0: the event is not on a hardware counter right now.
    NotOnCounter,
    /// The seqlock changed on every one of [`MAX_RETRIES`] attempts.
    Unstable,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unreadable::NoUserRdpmc => "the page's cap_user_rdpmc is 0",
            Unreadable::NotOnCounter => "the page's index is 0 (the event is not on a counter)",
            Unreadable::Unstable => "the page's seqlock kept changing",
        })
    }
}

/// One consistent reading of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageCount {
    /// The event's count: `offset` + the raw value sign-extended to `pmc_width` bits.
    pub value: u64,
    /// The raw `rdpmc` value as the instruction returned it (for PERF_METRICS, which is not a
    /// counter and must not be sign-extended).
    pub raw: u64,
    /// The `rdpmc` selector used (`index - 1`).
    pub selector: u32,
    /// The seqlock value the reading is consistent with: it changes whenever the kernel
    /// rewrites the page (the event was scheduled out and in again).
    pub seq: u32,
    /// `time_enabled`, extended to now when `cap_user_time` allows.
    pub enabled: u64,
    /// `time_running`, extended to now when `cap_user_time` allows.
    pub running: u64,
}

/// Sign-extends the low `width` bits of `raw` (a counter `width` bits wide: 48 on Intel), so
/// that adding it to `offset` wraps correctly. Widths outside 1..=64 are taken as 64.
pub fn sign_extend(raw: u64, width: u16) -> u64 {
    let width = if width == 0 || width > 64 { 64 } else { u32::from(width) };
    let shift = 64 - width;
    (((raw << shift) as i64) >> shift) as u64
}

/// Nanoseconds since the page's last update, from a time-stamp counter value, by the formula
/// in `perf_event.h` (`quot * mult + (rem * mult >> shift)`, plus `time_offset`).
fn time_delta(page: &impl PageRead, cycles: u64, caps: u64) -> u64 {
    let shift = u32::from(page.u16_at(offsets::TIME_SHIFT)).min(63);
    let mult = u64::from(page.u32_at(offsets::TIME_MULT));
    let offset = page.u64_at(offsets::TIME_OFFSET);
    let mut cyc = cycles;
    if caps & CAP_USER_TIME_SHORT != 0 {
        let base = page.u64_at(offsets::TIME_CYCLES);
        let mask = page.u64_at(offsets::TIME_MASK);
        cyc = base.wrapping_add(cyc.wrapping_sub(base) & mask);
    }
    let quot = cyc >> shift;
    let rem = cyc & ((1u64 << shift) - 1);
    offset.wrapping_add(quot.wrapping_mul(mult)).wrapping_add(rem.wrapping_mul(mult) >> shift)
}

/// Reads a page by the seqlock protocol. `rdpmc(selector)` is called only when the page says
/// the counter is user-readable (`cap_user_rdpmc` and `index != 0`), with `index - 1`;
/// `timestamp()` (the TSC) only when `cap_user_time` is set.
pub fn read_page(
    page: &impl PageRead,
    mut rdpmc: impl FnMut(u32) -> u64,
    mut timestamp: impl FnMut() -> u64,
) -> Result<PageCount, Unreadable> {
    for _ in 0..MAX_RETRIES {
        let seq = page.u32_at(offsets::LOCK);
        // The kernel writes the page from this CPU (at schedule in/out); a compiler barrier
        // keeps the field loads between the two loads of `lock`, as libperf's barrier() does.
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        let caps = page.u64_at(offsets::CAPABILITIES);
        let index = page.u32_at(offsets::INDEX);
        let mut enabled = page.u64_at(offsets::TIME_ENABLED);
        let mut running = page.u64_at(offsets::TIME_RUNNING);
        if caps & CAP_USER_RDPMC == 0 {
            return Err(Unreadable::NoUserRdpmc);
        }
        if index == 0 {
            return Err(Unreadable::NotOnCounter);
        }
        let offset = page.u64_at(offsets::OFFSET);
        let width = page.u16_at(offsets::PMC_WIDTH);
        let selector = index - 1;
        let raw = rdpmc(selector);
        if caps & CAP_USER_TIME != 0 {
            let delta = time_delta(page, timestamp(), caps);
            enabled = enabled.wrapping_add(delta);
            running = running.wrapping_add(delta);
        }
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        if page.u32_at(offsets::LOCK) == seq {
            let value = offset.wrapping_add(sign_extend(raw, width));
            return Ok(PageCount { value, raw, selector, seq, enabled, running });
        }
    }
    Err(Unreadable::Unstable)
}

/// A page image in memory, for tests of the protocol; fields can change while a read is in
/// progress (an `rdpmc` callback may bump the lock, as the kernel would).
#[derive(Debug, Clone)]
pub struct PageImage {
    bytes: RefCell<Vec<u8>>,
}

impl Default for PageImage {
    fn default() -> PageImage {
        PageImage { bytes: RefCell::new(vec![0; offsets::HEADER]) }
    }
}

impl PageImage {
    /// Writes `value` (little-endian words as on x86 and arm64 hosts: native order) at `off`.
    pub fn set(&self, off: usize, value: u64, size: usize) {
        let bytes = value.to_ne_bytes();
        let mut b = self.bytes.borrow_mut();
        if cfg!(target_endian = "little") {
            b[off..off + size].copy_from_slice(&bytes[..size]);
        } else {
            b[off..off + size].copy_from_slice(&bytes[8 - size..]);
        }
    }

    /// A page of a user-readable counter: `lock`, `index`, `offset`, `pmc_width`, the
    /// capabilities and the times.
    pub fn counter(index: u32, offset: u64, width: u16, caps: u64) -> PageImage {
        let page = PageImage::default();
        page.set(offsets::LOCK, 2, 4);
        page.set(offsets::INDEX, u64::from(index), 4);
        page.set(offsets::OFFSET, offset, 8);
        page.set(offsets::PMC_WIDTH, u64::from(width), 2);
        page.set(offsets::CAPABILITIES, caps, 8);
        page
    }

    fn get(&self, off: usize, size: usize) -> u64 {
        let b = self.bytes.borrow();
        let mut word = [0u8; 8];
        if cfg!(target_endian = "little") {
            word[..size].copy_from_slice(&b[off..off + size]);
        } else {
            word[8 - size..].copy_from_slice(&b[off..off + size]);
        }
        u64::from_ne_bytes(word)
    }
}

impl PageRead for PageImage {
    fn u16_at(&self, off: usize) -> u16 {
        self.get(off, 2) as u16
    }
    fn u32_at(&self, off: usize) -> u32 {
        self.get(off, 4) as u32
    }
    fn u64_at(&self, off: usize) -> u64 {
        self.get(off, 8)
    }
}

/// An event's first mmap page, mapped read-only; unmapped on drop.
#[derive(Debug)]
pub struct UserPage {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl UserPage {
    /// Maps the user page of perf event descriptor `fd` (a real descriptor from the kernel).
    pub fn map(fd: i32) -> Result<UserPage, crate::Errno> {
        // SAFETY: sysconf has no memory effects.
        let len = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let len = if len <= 0 { 4096 } else { len as usize };
        // SAFETY: a fresh read-only shared mapping chosen by the kernel; it aliases no Rust
        // object, and a bad descriptor only makes mmap fail.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd, 0)
        };
        if ptr == libc::MAP_FAILED {
            return Err(crate::Errno::last());
        }
        let ptr = std::ptr::NonNull::new(ptr.cast::<u8>()).ok_or(crate::Errno(libc::EINVAL))?;
        Ok(UserPage { ptr, len })
    }

    fn load<T: Copy>(&self, off: usize) -> T {
        assert!(off + std::mem::size_of::<T>() <= offsets::HEADER.min(self.len));
        // SAFETY: the offset is inside the mapping (checked above) and naturally aligned for
        // every field of perf_event_mmap_page; the kernel changes the page concurrently, so
        // the load is volatile and the seqlock in `read_page` detects torn reads.
        unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off).cast::<T>()) }
    }

    /// Reads the counter with `rdpmc` by the page protocol. The instruction runs only with
    /// the selector the kernel published for this event while it says user reads are allowed
    /// (the kernel enables user `rdpmc` for a process while it maps such an event), so it
    /// cannot fault.
    pub fn read(&self) -> Result<PageCount, Unreadable> {
        read_page(self, rdpmc, timestamp)
    }
}

impl PageRead for UserPage {
    fn u16_at(&self, off: usize) -> u16 {
        self.load(off)
    }
    fn u32_at(&self, off: usize) -> u32 {
        self.load(off)
    }
    fn u64_at(&self, off: usize) -> u64 {
        self.load(off)
    }
}

impl Drop for UserPage {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `map` with this length and is not used afterwards.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn rdpmc(selector: u32) -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: only called from `read_page` with `index - 1` of a page whose event the kernel
    // marked user-readable and placed on a counter (see `UserPage::read`); rdpmc touches no
    // memory.
    unsafe {
        std::arch::asm!("rdpmc", in("ecx") selector, out("eax") lo, out("edx") hi,
            options(nomem, nostack, preserves_flags));
    }
    (u64::from(hi) << 32) | u64::from(lo)
}

#[cfg(not(target_arch = "x86_64"))]
fn rdpmc(_selector: u32) -> u64 {
    // Only x86's kernel sets cap_user_rdpmc for the events tmetric maps here; elsewhere the
    // page never reaches this call with a published index in practice, and 0 is harmless.
    0
}

#[cfg(target_arch = "x86_64")]
fn timestamp() -> u64 {
    // SAFETY: rdtsc reads the time-stamp counter and touches no memory.
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn timestamp() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_event_open_sys::bindings::perf_event_mmap_page as Page;
    use std::mem::offset_of;

    #[test]
    fn offsets_match_the_kernel_struct() {
        assert_eq!(offset_of!(Page, lock), offsets::LOCK);
        assert_eq!(offset_of!(Page, index), offsets::INDEX);
        assert_eq!(offset_of!(Page, offset), offsets::OFFSET);
        assert_eq!(offset_of!(Page, time_enabled), offsets::TIME_ENABLED);
        assert_eq!(offset_of!(Page, time_running), offsets::TIME_RUNNING);
        assert_eq!(offset_of!(Page, pmc_width), offsets::PMC_WIDTH);
        assert_eq!(offset_of!(Page, time_shift), offsets::TIME_SHIFT);
        assert_eq!(offset_of!(Page, time_mult), offsets::TIME_MULT);
        assert_eq!(offset_of!(Page, time_offset), offsets::TIME_OFFSET);
        assert_eq!(offset_of!(Page, time_cycles), offsets::TIME_CYCLES);
        assert_eq!(offset_of!(Page, time_mask), offsets::TIME_MASK);
        // The capabilities union sits right after time_running.
        assert_eq!(offsets::CAPABILITIES, offsets::TIME_RUNNING + 8);
    }

    #[test]
    fn reads_index_minus_one_and_adds_offset() {
        let page = PageImage::counter(3, 1000, 48, CAP_USER_RDPMC);
        let mut asked = Vec::new();
        let count = read_page(
            &page,
            |s| {
                asked.push(s);
                234
            },
            || panic!("no cap_user_time: the clock is not read"),
        )
        .unwrap();
        assert_eq!(asked, vec![2]);
        assert_eq!(count.value, 1234);
        assert_eq!(count.raw, 234);
        assert_eq!(count.seq, 2);
    }

    #[test]
    fn a_lock_that_changes_mid_read_is_retried() {
        let page = PageImage::counter(1, 10, 48, CAP_USER_RDPMC);
        let mut calls = 0;
        let count = read_page(
            &page,
            |_| {
                calls += 1;
                if calls == 1 {
                    // The kernel rescheduled the event during the first attempt: new lock,
                    // new offset; the first attempt's value must be thrown away.
                    page.set(offsets::LOCK, 4, 4);
                    page.set(offsets::OFFSET, 500, 8);
                    7
                } else {
                    5
                }
            },
            || 0,
        )
        .unwrap();
        assert_eq!(calls, 2);
        assert_eq!(count.value, 505);
        assert_eq!(count.seq, 4);
    }

    #[test]
    fn a_lock_that_always_changes_gives_up() {
        let page = PageImage::counter(1, 0, 48, CAP_USER_RDPMC);
        let mut seq = 2;
        let result = read_page(
            &page,
            |_| {
                seq += 2;
                page.set(offsets::LOCK, seq, 4);
                1
            },
            || 0,
        );
        assert_eq!(result, Err(Unreadable::Unstable));
    }

    #[test]
    fn index_zero_is_not_readable() {
        let page = PageImage::counter(0, 10, 48, CAP_USER_RDPMC);
        let result = read_page(&page, |_| panic!("rdpmc must not run"), || 0);
        assert_eq!(result, Err(Unreadable::NotOnCounter));
    }

    #[test]
    fn cap_user_rdpmc_zero_is_not_readable() {
        // A software event's page: index 0 and no capability; a hardware event's page on a
        // machine with /sys/devices/cpu/rdpmc = 0: an index but no capability.
        let page = PageImage::counter(5, 10, 48, CAP_USER_TIME);
        let result = read_page(&page, |_| panic!("rdpmc must not run"), || 0);
        assert_eq!(result, Err(Unreadable::NoUserRdpmc));
    }

    #[test]
    fn a_48_bit_counter_that_wrapped_sign_extends() {
        // The kernel started the counter at -100 (2^48 - 100) with offset 1_000_100, so the
        // count at start was 1_000_000; after 150 events the counter wrapped to 50.
        let start = (1u64 << 48) - 100;
        let page = PageImage::counter(1, 1_000_100, 48, CAP_USER_RDPMC);
        let before = read_page(&page, |_| start, || 0).unwrap();
        let after = read_page(&page, |_| 50, || 0).unwrap();
        assert_eq!(before.value, 1_000_000);
        assert_eq!(after.value, 1_000_150);
        assert_eq!(after.value - before.value, 150);
        // Bits above the width are ignored.
        assert_eq!(sign_extend(0xffff_0000_0000_0005, 48), 5);
        assert_eq!(sign_extend(0x8000_0000_0000, 48), 0xffff_8000_0000_0000);
        assert_eq!(sign_extend(u64::MAX, 64), u64::MAX);
    }

    #[test]
    fn times_extend_to_now_with_cap_user_time() {
        let page = PageImage::counter(1, 0, 48, CAP_USER_RDPMC | CAP_USER_TIME);
        page.set(offsets::TIME_ENABLED, 1_000, 8);
        page.set(offsets::TIME_RUNNING, 800, 8);
        // mult 3, shift 1: ns = cycles * 1.5; time_offset -100.
        page.set(offsets::TIME_MULT, 3, 4);
        page.set(offsets::TIME_SHIFT, 1, 2);
        page.set(offsets::TIME_OFFSET, (-100i64) as u64, 8);
        let count = read_page(&page, |_| 0, || 201).unwrap();
        // 201 >> 1 = 100, rem 1: 100 * 3 + (1 * 3 >> 1) = 301; minus 100 = 201.
        assert_eq!(count.enabled, 1_201);
        assert_eq!(count.running, 1_001);
    }
}
