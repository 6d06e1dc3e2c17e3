//! [`Mapping`]: one mapped ring (the kernel's `mmap`, or a heap ring shared with a producer)
//! with its control page's `data_head`/`data_tail`, [`Reader`] that drains one, and the
//! kernel's reasons for refusing a mapping.

use std::alloc::{Layout, alloc_zeroed, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::record::{DecodeError, Record, SampleFormat};
use super::walk::{RingData, Walk, index, walk};
use crate::sys::Errno;

/// Byte offsets in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// The control page's size in a [`Mapping::heap`] ring (the x86 and arm64 page size).
pub const HEAP_PAGE: usize = 4096;

enum Backing {
    /// From `mmap(2)` of a perf event's descriptor; unmapped on drop.
    Mmap { fd: i32 },
    /// Process memory laid out like the kernel's (tests, simulated kernels), shared between
    /// the reader and a producer. The pointer points into this block. `refresh`, when set,
    /// runs before each `data_head` load: a simulated kernel writes the records due by now,
    /// as the real kernel would have written them while the reader slept.
    Heap { block: Arc<HeapBlock>, refresh: Option<Refresh> },
}

/// A producer's catch-up hook on a heap ring (see [`Mapping::with_refresh`]).
pub type Refresh = Arc<dyn Fn() + Send + Sync>;

/// Zeroed memory reached only through raw pointers and atomics (never references), so a
/// producer and a reader may hold it at once, like the kernel and a tool share a ring.
struct HeapBlock {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the block is plain memory; all accesses are atomics or raw copies ordered by the
// ring protocol (release store of data_head, acquire load by the reader).
unsafe impl Send for HeapBlock {}

// SAFETY: as above.
unsafe impl Sync for HeapBlock {}

impl Drop for HeapBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `Mapping::heap` with this layout, freed once (last Arc).
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// One mapped ring: the control page followed by the data area. Only raw-pointer accesses
/// reach the memory (never references), since the kernel writes it concurrently.
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    backing: Backing,
}

// SAFETY: the mapping is plain memory owned by this value (or shared through `HeapBlock`);
// every access is an atomic or a raw copy, so moving the owner to another thread is sound.
unsafe impl Send for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.backing {
            Backing::Mmap { fd } => format!("mmap of fd {fd}"),
            Backing::Heap { .. } => "heap".to_string(),
        };
        f.debug_struct("Mapping").field("len", &self.len).field("backing", &kind).finish()
    }
}

impl Mapping {
    /// Takes ownership of an `mmap` of perf event `fd` (`len` bytes at `ptr`).
    ///
    /// # Safety
    /// `ptr` must be the start of a live, page-aligned, readable and writable shared mapping
    /// of `len` bytes returned by `mmap` for a perf event, with `len` at least two pages,
    /// that nothing else unmaps.
    pub(crate) unsafe fn from_mmap(ptr: NonNull<u8>, len: usize, fd: i32) -> Mapping {
        Mapping { ptr, len, backing: Backing::Mmap { fd } }
    }

    /// A zeroed ring in process memory laid out as the kernel's: a [`HEAP_PAGE`] control page
    /// with `data_offset` = [`HEAP_PAGE`] and `data_size` = `data_size` (rounded up to a
    /// multiple of 8, at least 8), followed by the data area. Writers use
    /// [`Mapping::write_data`] and [`Mapping::publish_head`].
    pub fn heap(data_size: usize) -> Mapping {
        Mapping::heap_exact(data_size.max(8).next_multiple_of(8))
    }

    /// A zeroed heap ring whose data area is exactly `data_size` bytes (a multiple of 8, or
    /// 0 for a control page alone, which the kernel maps too: nothing can be written there).
    pub fn heap_exact(data_size: usize) -> Mapping {
        let data_size = data_size.next_multiple_of(8);
        let len = HEAP_PAGE + data_size;
        let layout = Layout::from_size_align(len, HEAP_PAGE).expect("ring layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else { handle_alloc_error(layout) };
        let block = Arc::new(HeapBlock { ptr, layout });
        let mapping = Mapping { ptr, len, backing: Backing::Heap { block, refresh: None } };
        mapping.store(DATA_OFFSET, HEAP_PAGE as u64, Ordering::Relaxed);
        mapping.store(DATA_SIZE, data_size as u64, Ordering::Release);
        mapping
    }

    /// This heap ring with `refresh` run before every [`Mapping::data_head`] load (the
    /// reader's side of a simulated kernel, which produces records lazily: the hook writes
    /// whatever simulated time has made due). Kernel rings are returned unchanged.
    pub fn with_refresh(mut self, refresh: Refresh) -> Mapping {
        if let Backing::Heap { refresh: slot, .. } = &mut self.backing {
            *slot = Some(refresh);
        }
        self
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset.is_multiple_of(8) && offset + 8 <= self.len);
        // SAFETY: offset is 8-aligned inside the mapping (page- or u64-aligned base, len at
        // least one control page), the memory lives as long as `self`, and the kernel
        // accesses these control words atomically too.
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(offset).cast::<u64>()) }
    }

    fn load(&self, offset: usize, order: Ordering) -> u64 {
        self.word(offset).load(order)
    }

    fn store(&self, offset: usize, value: u64, order: Ordering) {
        self.word(offset).store(value, order)
    }

    /// The mapped length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: a mapping has at least its control page).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The perf event descriptor this ring belongs to, when it came from `mmap`: the one to
    /// `poll`. `None` for heap rings.
    pub fn fd(&self) -> Option<i32> {
        match &self.backing {
            Backing::Mmap { fd } => Some(*fd),
            Backing::Heap { .. } => None,
        }
    }

    /// Another handle on the same heap ring (a producer's, for tests and simulated kernels),
    /// without the refresh hook; `None` for kernel rings, which have one owner.
    pub fn share(&self) -> Option<Mapping> {
        match &self.backing {
            Backing::Heap { block, .. } => Some(Mapping {
                ptr: self.ptr,
                len: self.len,
                backing: Backing::Heap { block: Arc::clone(block), refresh: None },
            }),
            Backing::Mmap { .. } => None,
        }
    }

    /// `data_head`, loaded with acquire ordering so the records before it are visible (after
    /// the refresh hook, when the ring has one).
    pub fn data_head(&self) -> u64 {
        if let Backing::Heap { refresh: Some(refresh), .. } = &self.backing {
            refresh();
        }
        self.load(DATA_HEAD, Ordering::Acquire)
    }

    /// `data_tail`.
    pub fn data_tail(&self) -> u64 {
        self.load(DATA_TAIL, Ordering::Acquire)
    }

    /// Stores `data_tail` with release ordering: the records before it are consumed.
    pub fn set_data_tail(&self, tail: u64) {
        self.store(DATA_TAIL, tail, Ordering::Release)
    }

    /// `(data_offset, data_size)`, checked to lie inside the mapping. Kernels before 4.1 leave
    /// both 0; the data area then starts at the first page and fills the rest.
    pub fn data_area(&self) -> Result<(usize, usize), DecodeError> {
        let offset = self.load(DATA_OFFSET, Ordering::Acquire) as usize;
        let size = self.load(DATA_SIZE, Ordering::Acquire) as usize;
        let (offset, size) = if offset == 0 && size == 0 {
            let page = page_size();
            (page, self.len.saturating_sub(page))
        } else {
            (offset, size)
        };
        if size == 0
            || offset < DATA_SIZE + 8
            || offset.checked_add(size).is_none_or(|e| e > self.len)
        {
            return Err(DecodeError::Positions { head: offset as u64, tail: 0, size: size as u64 });
        }
        Ok((offset, size))
    }

    /// The data area as a [`RingData`].
    pub fn data(&self) -> Result<MappedData<'_>, DecodeError> {
        let (offset, size) = self.data_area()?;
        Ok(MappedData { mapping: self, offset, size })
    }

    /// Writes `bytes` at ring position `pos`, wrapping (a producer's side: tests and simulated
    /// kernels). Only for heap rings; ignored on kernel rings, which only the kernel writes.
    pub fn write_data(&self, pos: u64, bytes: &[u8]) {
        let Backing::Heap { .. } = &self.backing else { return };
        let Ok((offset, size)) = self.data_area() else { return };
        for (k, &byte) in bytes.iter().enumerate().take(size) {
            let at = offset + ((pos + k as u64) % size as u64) as usize;
            // SAFETY: `at` is inside the data area, inside the allocation `self` owns.
            unsafe { self.ptr.as_ptr().add(at).write(byte) };
        }
    }

    /// Stores `data_head` with release ordering (producer's side, heap rings only).
    pub fn publish_head(&self, head: u64) {
        if let Backing::Heap { .. } = &self.backing {
            self.store(DATA_HEAD, head, Ordering::Release);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Backing::Mmap { .. } = &self.backing {
            // SAFETY: `ptr`/`len` are exactly what mmap returned (see `from_mmap`), and no
            // access outlives `self`.
            unsafe {
                libc::munmap(self.ptr.as_ptr().cast(), self.len);
            }
        }
    }
}

/// The data area of a [`Mapping`].
#[derive(Debug, Clone, Copy)]
pub struct MappedData<'a> {
    mapping: &'a Mapping,
    offset: usize,
    size: usize,
}

impl RingData for MappedData<'_> {
    fn size(&self) -> u64 {
        self.size as u64
    }

    fn copy_out(&self, pos: u64, out: &mut [u8]) {
        let start = index(pos, self.size as u64);
        let first = out.len().min(self.size - start);
        let base = self.mapping.ptr.as_ptr();
        // SAFETY: both ranges lie in the data area (`data_area` checked it against the
        // mapping's length) and `out` is ours; the bytes between tail and head are not written
        // by the kernel until data_tail moves past them.
        unsafe {
            std::ptr::copy_nonoverlapping(base.add(self.offset + start), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(
                base.add(self.offset),
                out.as_mut_ptr().add(first),
                out.len() - first,
            );
        }
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the C library.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 { page as usize } else { 4096 }
}

/// Drains one [`Mapping`]: decodes the records between `data_tail` and `data_head`, then
/// advances `data_tail`.
#[derive(Debug)]
pub struct Reader {
    mapping: Mapping,
    format: SampleFormat,
    scratch: Vec<u8>,
}

impl Reader {
    /// A reader of `mapping` whose samples have `format`.
    pub fn new(mapping: Mapping, format: SampleFormat) -> Reader {
        Reader { mapping, format, scratch: Vec::with_capacity(format.record_size()) }
    }

    /// The mapping.
    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    /// Hands every unread record to `on_record` and releases its bytes to the kernel.
    pub fn drain(&mut self, on_record: impl FnMut(Record)) -> Walk {
        let head = self.mapping.data_head();
        let tail = self.mapping.data_tail();
        let data = match self.mapping.data() {
            Ok(data) => data,
            Err(error) => return Walk { tail, records: 0, error: Some(error) },
        };
        let walk = walk(&data, tail, head, &self.format, &mut self.scratch, on_record);
        self.mapping.set_data_tail(walk.tail);
        walk
    }
}

/// The kernel's likely reason for refusing to map a ring.
pub fn explain_mmap(errno: Errno) -> &'static str {
    match errno.0 {
        libc::EPERM => {
            "the rings exceed the locked-memory allowance: use fewer data pages, or raise /proc/sys/kernel/perf_event_mlock_kb"
        }
        libc::EINVAL => "the data area must be a power-of-two number of pages",
        libc::ENOSYS => "this backend cannot map ring buffers",
        libc::ENOMEM => "out of memory for the ring",
        _ => "mmap of the event's ring buffer failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::record::Weight;
    use crate::ring::record::tests::{format, sample};

    #[test]
    fn heap_mapping_reader_advances_the_tail() {
        let ring = Mapping::heap(128);
        assert_eq!(ring.data_area().unwrap(), (HEAP_PAGE, 128));
        assert_eq!(ring.fd(), None);
        let mut reader = Reader::new(ring, format());
        let mut head = 0;
        let mut seen = Vec::new();
        // Three rounds of two samples: the positions pass the 128-byte end twice.
        for round in 0..3u16 {
            for k in 0..2u16 {
                let bytes = sample(1, 0, 0, 0, 0, 0, Weight::from_parts(0, 0, round * 10 + k).0);
                reader.mapping().write_data(head, &bytes);
                head += bytes.len() as u64;
            }
            reader.mapping().publish_head(head);
            let walk = reader.drain(|r| {
                if let Record::Sample(s) = r {
                    seen.push(s.weight.unwrap().var3_w());
                }
            });
            assert_eq!((walk.records, walk.error), (2, None));
            assert_eq!(reader.mapping().data_tail(), head);
        }
        assert_eq!(seen, [0, 1, 10, 11, 20, 21]);
    }
}
