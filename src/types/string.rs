//! `Str`: an immutable, reference-counted byte string behind one 8-byte pointer, with the
//! count and the length in the same allocation as the bytes.
//!
//! Why not `bytes::Bytes`: its handle is 32 bytes (a key's entry would not fit jemalloc's
//! 48-byte class), and a buffer made from a `Vec` gets a separate refcount header on its
//! first clone — which a snapshot's capture does to every value it copies. Here a clone
//! is one atomic increment, always. Values are changed in place only through
//! `make_mut`, and only while one handle holds them (SETBIT and BITFIELD, which Redis
//! runs in O(1) on a bitmap of any size); a shared value is copied first, as
//! `Arc::make_mut` does, so every other holder (a snapshot's capture) keeps its bytes.
//! APPEND and SETRANGE build a new value.

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering, fence};

#[repr(C)]
struct Header {
    refs: AtomicU32,
    len: u32,
}

const HEADER: usize = std::mem::size_of::<Header>();

pub struct Str {
    ptr: NonNull<Header>,
}

// SAFETY: as for `Arc<[u8]>`: the bytes are written only through `&mut Str` while that
// handle is the only one (`make_mut`), and the count that decides who frees them is
// atomic (`Drop` frees after the last decrement).
unsafe impl Send for Str {}
// SAFETY: as for `Send`: through `&Str` the bytes are only read and the count changed
// atomically.
unsafe impl Sync for Str {}

/// The longest string: Redis's `proto-max-bulk-len` is at most 512 MB by default, and a
/// u32 length leaves room to spare.
pub const MAX_LEN: usize = u32::MAX as usize;

impl Str {
    fn layout(len: usize) -> Layout {
        Layout::from_size_align(HEADER + len, std::mem::align_of::<Header>())
            .expect("string size fits a layout")
    }

    pub fn new(bytes: &[u8]) -> Str {
        assert!(bytes.len() <= MAX_LEN, "string longer than 4 GB");
        let layout = Self::layout(bytes.len());
        // SAFETY: the layout is non-zero (it has a header); a null result is handled. The
        // header is written before use and `len` bytes are copied right after it, inside
        // the fresh allocation, which cannot overlap `bytes`.
        unsafe {
            let raw = alloc(layout);
            if raw.is_null() {
                handle_alloc_error(layout);
            }
            let header = raw as *mut Header;
            header.write(Header {
                refs: AtomicU32::new(1),
                len: bytes.len() as u32,
            });
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), raw.add(HEADER), bytes.len());
            Str {
                ptr: NonNull::new_unchecked(header),
            }
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: `ptr` points at the header, initialised at construction; the allocation
        // lives while any handle does, and this one holds a count.
        unsafe { self.ptr.as_ref() }
    }

    pub fn as_slice(&self) -> &[u8] {
        let len = self.header().len as usize;
        // SAFETY: `len` initialised bytes follow the header in the same allocation, alive
        // as long as `&self` and never written after construction.
        unsafe { std::slice::from_raw_parts((self.ptr.as_ptr() as *const u8).add(HEADER), len) }
    }

    /// `len` zero bytes (a bitmap SETBIT creates).
    pub fn zeroed(len: usize) -> Str {
        StrBuilder::new(len, len).finish()
    }

    /// Whether this handle is the only one. The acquire load pairs with the release
    /// decrement of every handle dropped before (on any thread), so their reads of the
    /// bytes happen before whatever the caller now writes (as `Arc::get_mut`).
    fn is_unique(&self) -> bool {
        self.header().refs.load(Ordering::Acquire) == 1
    }

    /// The bytes for changing in place, grown with zeros to at least `len` of them (as
    /// `Arc::make_mut`): while another handle shares them, this one first gets a copy of
    /// its own, so every other holder keeps the bytes it had. Growing a string held once
    /// reallocates it (the allocator often extends it where it is).
    pub fn make_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= MAX_LEN, "string longer than 4 GB");
        let old_len = self.len();
        let new_len = len.max(old_len);
        if !self.is_unique() {
            let mut copy = StrBuilder::new(new_len, new_len);
            copy.as_mut_slice()[..old_len].copy_from_slice(self);
            *self = copy.finish();
        } else if new_len > old_len {
            let old_layout = Self::layout(old_len);
            let new_layout = Self::layout(new_len);
            // SAFETY: this handle is the only one (`is_unique`), so nothing else reads
            // the allocation while it moves. It was allocated with `old_layout` (its
            // length is the header's); `new_layout` is valid (`layout` checks) with the
            // same alignment and a larger, non-zero size. A null result is handled
            // before `ptr` changes. The bytes past the old length are zeroed before the
            // header's length counts them.
            unsafe {
                let raw = std::alloc::realloc(
                    self.ptr.as_ptr() as *mut u8,
                    old_layout,
                    new_layout.size(),
                );
                if raw.is_null() {
                    handle_alloc_error(new_layout);
                }
                std::ptr::write_bytes(raw.add(HEADER + old_len), 0, new_len - old_len);
                let header = raw as *mut Header;
                (*header).len = new_len as u32;
                self.ptr = NonNull::new_unchecked(header);
            }
        }
        // SAFETY: `new_len` initialised bytes follow the header (the length it records),
        // and this handle, borrowed mutably, is the only one: nothing else reads them
        // while the slice lives.
        unsafe {
            std::slice::from_raw_parts_mut((self.ptr.as_ptr() as *mut u8).add(HEADER), new_len)
        }
    }

    /// Heap bytes held (for MEMORY-style accounting).
    pub fn heap_bytes(&self) -> usize {
        HEADER + self.len()
    }

    /// Whether another handle holds these bytes too (as `Arc::strong_count > 1`). Only
    /// a hint if other threads clone or drop handles meanwhile.
    pub fn is_shared(&self) -> bool {
        self.header().refs.load(Ordering::Relaxed) > 1
    }
}

/// A `Str` of a known length being filled in place (a big argument read straight from a
/// socket), so that a value is never copied from a read buffer into its final home. Its
/// allocation grows towards that length as bytes arrive, never ahead of them by more than
/// twice: a length a client merely claims is not allocated.
pub struct StrBuilder {
    /// Header, then `capacity` initialised bytes.
    ptr: NonNull<Header>,
    len: usize,
    capacity: usize,
}

// SAFETY: the builder owns its allocation alone; nothing else points into it.
unsafe impl Send for StrBuilder {}

impl StrBuilder {
    /// A builder for `len` bytes, with room for `capacity` of them at first.
    pub fn new(len: usize, capacity: usize) -> StrBuilder {
        assert!(len <= MAX_LEN, "string longer than 4 GB");
        let capacity = capacity.min(len);
        let layout = Str::layout(capacity);
        // SAFETY: the layout is non-zero (it has a header); a null result is handled. The
        // header is written before use, and the bytes after it are zeroed by the
        // allocator, so they are initialised.
        unsafe {
            let raw = std::alloc::alloc_zeroed(layout);
            if raw.is_null() {
                handle_alloc_error(layout);
            }
            let header = raw as *mut Header;
            header.write(Header {
                refs: AtomicU32::new(1),
                len: len as u32,
            });
            StrBuilder {
                ptr: NonNull::new_unchecked(header),
                len,
                capacity,
            }
        }
    }

    /// The length of the finished string.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Room for `capacity` bytes (at most the final length), keeping those written.
    pub fn grow_to(&mut self, capacity: usize) {
        let capacity = capacity.min(self.len);
        if capacity <= self.capacity {
            return;
        }
        let old_layout = Str::layout(self.capacity);
        let new_layout = Str::layout(capacity);
        // SAFETY: `ptr` was allocated with `old_layout` (by `new` or the last `grow_to`);
        // `new_layout` is a valid layout (`Str::layout` checks) of the same alignment, so
        // its size, larger than the old one, is non-zero and fits `isize`. A null result
        // is handled before `ptr` changes. The bytes past the old capacity are zeroed
        // here, before `capacity` counts them as initialised.
        unsafe {
            let raw =
                std::alloc::realloc(self.ptr.as_ptr() as *mut u8, old_layout, new_layout.size());
            if raw.is_null() {
                handle_alloc_error(new_layout);
            }
            std::ptr::write_bytes(raw.add(HEADER + self.capacity), 0, capacity - self.capacity);
            self.ptr = NonNull::new_unchecked(raw as *mut Header);
        }
        self.capacity = capacity;
    }

    /// The bytes there is room for so far.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `capacity` initialised bytes follow the header, and the builder is their
        // only owner.
        unsafe {
            std::slice::from_raw_parts_mut(
                (self.ptr.as_ptr() as *mut u8).add(HEADER),
                self.capacity,
            )
        }
    }

    /// The finished string, immutable from now on. All of it must have room by now.
    pub fn finish(self) -> Str {
        assert_eq!(
            self.capacity, self.len,
            "a string finished before it was filled"
        );
        let value = Str { ptr: self.ptr };
        std::mem::forget(self);
        value
    }
}

impl Drop for StrBuilder {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout and never handed to a `Str` (`finish`
        // forgets the builder).
        unsafe { dealloc(self.ptr.as_ptr() as *mut u8, Str::layout(self.capacity)) }
    }
}

impl Clone for Str {
    fn clone(&self) -> Str {
        // Relaxed is enough for an increment (as in `Arc`); the overflow check keeps a
        // runaway number of clones from wrapping the count.
        let previous = self.header().refs.fetch_add(1, Ordering::Relaxed);
        assert!(previous < u32::MAX / 2, "string reference count overflow");
        Str { ptr: self.ptr }
    }
}

impl Drop for Str {
    fn drop(&mut self) {
        if self.header().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let layout = Self::layout(self.len());
        // SAFETY: this was the last handle (the count reached zero, and the acquire fence
        // orders every other handle's use before this), and the allocation was made with
        // this layout (by `Str::new`, or by a `StrBuilder` whose capacity is the length).
        unsafe { dealloc(self.ptr.as_ptr() as *mut u8, layout) }
    }
}

impl std::ops::Deref for Str {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Str {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<&[u8]> for Str {
    fn from(bytes: &[u8]) -> Str {
        Str::new(bytes)
    }
}

impl From<Vec<u8>> for Str {
    fn from(bytes: Vec<u8>) -> Str {
        Str::new(&bytes)
    }
}

impl From<&str> for Str {
    fn from(text: &str) -> Str {
        Str::new(text.as_bytes())
    }
}

impl From<String> for Str {
    fn from(text: String) -> Str {
        Str::new(text.as_bytes())
    }
}

impl From<bytes::Bytes> for Str {
    fn from(bytes: bytes::Bytes) -> Str {
        Str::new(&bytes)
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Str {}

impl PartialEq<[u8]> for Str {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl std::fmt::Debug for Str {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", bytes::Bytes::copy_from_slice(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_bytes_and_shares_on_clone() {
        for len in [0usize, 1, 7, 8, 9, 100, 4096] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let s = Str::from(&data[..]);
            assert_eq!(&*s, &data[..]);
            let copies: Vec<Str> = (0..10).map(|_| s.clone()).collect();
            assert_eq!(s.header().refs.load(Ordering::Relaxed), 11);
            for c in &copies {
                assert_eq!(c.as_ptr(), s.as_ptr(), "a clone shares the bytes");
            }
            drop(copies);
            assert_eq!(s.header().refs.load(Ordering::Relaxed), 1);
            assert_eq!(s.heap_bytes(), 8 + len);
        }
        assert_eq!(std::mem::size_of::<Str>(), 8);
        assert_eq!(std::mem::size_of::<Option<Str>>(), 8);
    }

    #[test]
    fn a_builder_grows_as_filled_then_is_shared_without_a_copy() {
        let mut builder = StrBuilder::new(100_000, 1000);
        assert_eq!(builder.as_mut_slice().len(), 1000);
        builder.as_mut_slice()[999] = 9;
        builder.grow_to(50_000);
        assert_eq!(builder.as_mut_slice()[999], 9, "kept across growth");
        assert!(builder.as_mut_slice()[1000..].iter().all(|&b| b == 0));
        builder.grow_to(1 << 30);
        assert_eq!(builder.capacity(), 100_000, "never past the final length");
        let start = builder.as_mut_slice().as_ptr();
        builder.as_mut_slice()[99_999] = 7;
        let s = builder.finish();
        assert_eq!((s.len(), s[999], s[99_999]), (100_000, 9, 7));
        assert_eq!(s.as_ptr(), start, "no copy");
        assert_eq!(&*StrBuilder::new(0, 0).finish(), b"");
        drop(StrBuilder::new(10, 5)); // an unfinished builder frees what it has
    }

    #[test]
    fn make_mut_changes_in_place_when_unique_and_copies_when_shared() {
        let mut s = Str::from(&b"abc"[..]);
        let before = s.as_ptr();
        s.make_mut(0)[0] = b'x';
        assert_eq!((&*s, s.as_ptr()), (&b"xbc"[..], before), "unique: in place");
        s.make_mut(6)[5] = b'z';
        assert_eq!(&*s, b"xbc\0\0z", "grown with zeros");
        assert_eq!(s.heap_bytes(), 8 + 6);
        let shared = s.clone();
        s.make_mut(8)[0] = b'y';
        assert_eq!(&*shared, b"xbc\0\0z", "the other holder keeps its bytes");
        assert_eq!(&*s, b"ybc\0\0z\0\0");
        assert!(!s.is_shared() && !shared.is_shared());
        let big = Str::zeroed(100_000);
        assert!(big.iter().all(|&b| b == 0) && big.len() == 100_000);
        let mut grown = Str::zeroed(1);
        for len in (2..200_000).step_by(997) {
            let bytes = grown.make_mut(len);
            assert_eq!(bytes.len(), len);
            assert!(bytes[..len - 1].iter().all(|&b| b == 1 || b == 0));
            bytes[len - 1] = 1;
        }
    }

    #[test]
    fn clones_cross_threads() {
        let s = Str::from("shared across threads");
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let c = s.clone();
                        assert_eq!(&*c, b"shared across threads");
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(s.header().refs.load(Ordering::Relaxed), 1);
    }
}
