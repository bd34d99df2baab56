//! `Key`: a key's bytes in 16 bytes — inline when at most 15 bytes long (most keys), a
//! pointer and a length otherwise — so a short key costs no allocation of its own.
//!
//! Layout: the last byte tells the two apart. Inline: bytes 0..15 hold the key, byte 15
//! is `0x80 | len`. On the heap: a pointer (bytes 0..8) and the length (bytes 8..16, little
//! endian), whose top byte is below 0x80 for any length that fits in memory.

const INLINE: usize = 15;
const INLINE_FLAG: u8 = 0x80;

pub struct Key {
    repr: [u8; 16],
}

// A key owns its bytes, like `Box<[u8]>`.
unsafe impl Send for Key {}
unsafe impl Sync for Key {}

impl Key {
    pub fn new(bytes: &[u8]) -> Key {
        let mut repr = [0u8; 16];
        if bytes.len() <= INLINE {
            repr[..bytes.len()].copy_from_slice(bytes);
            repr[15] = INLINE_FLAG | bytes.len() as u8;
        } else {
            assert!(bytes.len() < 1 << 55, "key too long");
            let heap: Box<[u8]> = bytes.into();
            let len = heap.len() as u64;
            let ptr = Box::into_raw(heap) as *mut u8 as usize as u64;
            repr[..8].copy_from_slice(&ptr.to_le_bytes());
            repr[8..].copy_from_slice(&len.to_le_bytes());
        }
        Key { repr }
    }

    fn is_inline(&self) -> bool {
        self.repr[15] & INLINE_FLAG != 0
    }

    fn heap_parts(&self) -> (*mut u8, usize) {
        let ptr = u64::from_le_bytes(self.repr[..8].try_into().expect("8")) as usize;
        let len = u64::from_le_bytes(self.repr[8..].try_into().expect("8")) as usize;
        (ptr as *mut u8, len)
    }

    pub fn as_slice(&self) -> &[u8] {
        if self.is_inline() {
            &self.repr[..(self.repr[15] & !INLINE_FLAG) as usize]
        } else {
            let (ptr, len) = self.heap_parts();
            // SAFETY: `ptr` and `len` come from a leaked `Box<[u8]>` this key owns.
            unsafe { std::slice::from_raw_parts(ptr, len) }
        }
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.is_inline() {
            let (ptr, len) = self.heap_parts();
            // SAFETY: rebuilds the box leaked in `new`, exactly once.
            drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, len)) });
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
