//! `Key`: a key's bytes in 16 bytes — inline when at most 15 bytes long (most keys), a
//! pointer and a length otherwise — so a short key costs no allocation of its own.
//!
//! Layout: the last byte tells the two apart. Inline: bytes 0..15 hold the key, byte 15
//! is `0x80 | len`. On the heap: a pointer (bytes 0..8) and the length (bytes 8..16, little
//! endian), whose top byte is below 0x80 for any length that fits in memory.
//!
//! The two forms are a union rather than 16 bytes with the pointer stored as an integer:
//! a real pointer keeps its provenance (no integer-to-pointer cast for the compiler, or
//! Miri, to reason about), costs the same loads, and the handle stays 16 bytes. Its
//! alignment is 8 where it was 1, which no container of keys notices (an `Entry` is 8-
//! aligned already; the sizes are asserted below and in `keyspace`).

use std::ptr::NonNull;

const INLINE: usize = 15;
const INLINE_FLAG: u8 = 0x80;

pub struct Key {
    repr: Repr,
}

/// Which field is live is told by byte 15, which both forms initialise: the inline tag
/// (flag set), or the top byte of the heap form's length (flag clear).
#[repr(C)]
#[derive(Clone, Copy)]
union Repr {
    inline: [u8; 16],
    heap: Heap,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct Heap {
    /// The key's bytes: a `Box<[u8]>` leaked in `Key::new`, which the key owns.
    ptr: NonNull<u8>,
    /// Keeps `len` at bytes 8..16 where pointers are narrower than 8 bytes.
    _pad: [u8; 8 - size_of::<NonNull<u8>>()],
    /// Little-endian, so that its top byte is byte 15 of the key on every target.
    len: [u8; 8],
}

const _: () = assert!(size_of::<Key>() == 16);
const _: () = assert!(std::mem::offset_of!(Heap, len) == 8);

// SAFETY: a key owns its bytes alone, like the `Box<[u8]>` it was made from (which is
// `Send`): no two keys share a pointer (`clone` copies the bytes), and the bytes are never
// changed after `new`.
unsafe impl Send for Key {}
// SAFETY: as for `Send`; `&Key` only ever reads bytes that nothing mutates.
unsafe impl Sync for Key {}

impl Key {
    pub fn new(bytes: &[u8]) -> Key {
        if bytes.len() <= INLINE {
            let mut inline = [0u8; 16];
            inline[..bytes.len()].copy_from_slice(bytes);
            inline[15] = INLINE_FLAG | bytes.len() as u8;
            Key {
                repr: Repr { inline },
            }
        } else {
            // The length's top byte must stay below the flag.
            assert!(bytes.len() < 1 << 55, "key too long");
            let heap: Box<[u8]> = bytes.into();
            let len = (heap.len() as u64).to_le_bytes();
            let ptr = NonNull::from(Box::leak(heap)).cast::<u8>();
            Key {
                repr: Repr {
                    heap: Heap {
                        ptr,
                        _pad: [0; 8 - size_of::<NonNull<u8>>()],
                        len,
                    },
                },
            }
        }
    }

    fn is_inline(&self) -> bool {
        // SAFETY: byte 15 is initialised in both forms (see `Repr`), and only that byte is
        // read.
        let tag = unsafe { self.repr.inline[15] };
        tag & INLINE_FLAG != 0
    }

    /// The pointer and length of a key on the heap.
    fn heap_parts(&self) -> (NonNull<u8>, usize) {
        debug_assert!(!self.is_inline());
        // SAFETY: the key is on the heap (the callers checked), so `heap` is the field
        // `new` wrote.
        let heap = unsafe { self.repr.heap };
        (heap.ptr, u64::from_le_bytes(heap.len) as usize)
    }

    /// The bytes the key holds on the heap (0 for a key held inline).
    pub fn heap_len(&self) -> usize {
        if self.is_inline() {
            0
        } else {
            self.heap_parts().1
        }
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.is_inline() {
            // SAFETY: the key is inline, so `new` wrote all 16 bytes of `inline`.
            let inline = unsafe { &self.repr.inline };
            &inline[..usize::from(inline[15] & !INLINE_FLAG)]
        } else {
            let (ptr, len) = self.heap_parts();
            // SAFETY: `ptr` and `len` are those of the `Box<[u8]>` leaked in `new`, which
            // this key owns until it drops (so for as long as `&self` lives) and which
            // nothing mutates.
            unsafe { std::slice::from_raw_parts(ptr.as_ptr(), len) }
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.is_inline() {
            let (ptr, len) = self.heap_parts();
            // SAFETY: rebuilds the box leaked in `new`, with its pointer and length, exactly
            // once: no other key holds this pointer, and a key drops once.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr.as_ptr(), len)) });
        }
    }
}

impl Clone for Key {
    fn clone(&self) -> Key {
        Key::new(self.as_slice())
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for Key {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl From<&[u8]> for Key {
    fn from(bytes: &[u8]) -> Key {
        Key::new(bytes)
    }
}

impl From<Vec<u8>> for Key {
    fn from(bytes: Vec<u8>) -> Key {
        Key::new(&bytes)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_slice()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_keys_inline_long_ones_on_the_heap() {
        assert_eq!(std::mem::size_of::<Key>(), 16);
        for len in [0usize, 1, 14, 15, 16, 17, 100, 5000] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let key = Key::new(&bytes);
            assert_eq!(key.is_inline(), len <= 15, "{len}");
            assert_eq!(&*key, &bytes[..]);
            let copy = key.clone();
            drop(key);
            assert_eq!(&*copy, &bytes[..]);
        }
        // Bytes that look like the flag inside an inline key do not confuse it.
        let tricky = [0xFFu8; 15];
        assert_eq!(&*Key::new(&tricky), &tricky[..]);
    }
}
