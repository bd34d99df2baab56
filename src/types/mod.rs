//! The value types behind keys, and their compact encodings.
//!
//! Each collection type lives in its own module with its command-independent operations
//! and its encodings (a compact one for small values, converted past Redis's thresholds).
//! Commands (`crate::commands::{lists, hashes, sets, zsets}`) only use the type's methods,
//! so that an encoding can change without touching them. The types know nothing of files:
//! `crate::rdb` writes and reads them through what they expose (their listpack and intset
//! bytes, constructors from those, iterators). `hll` is no type of its own: it reads and
//! writes the bytes of a string value as Redis lays out a HyperLogLog.
//!
//! `key`, `string` and `listpack` hold their bytes behind raw pointers to keep handles
//! small (the memory benchmarks count every byte of an entry); every `unsafe` there says
//! why it holds in a `SAFETY:` comment, which clippy enforces below.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod bits;
pub mod geohash;
pub mod hash;
pub mod hll;
pub mod intset;
pub mod key;
pub mod limits;
pub mod list;
pub mod listpack;
pub mod memory;
pub mod number;
pub mod score;
pub mod set;
pub mod stream;
pub mod stream_groups;
pub mod stream_id;
pub mod string;
pub mod zset;

pub use hash::Hash;
pub use list::List;
pub use set::Set;
pub use stream::Stream;
pub use string::Str;
pub use zset::ZSet;

/// The positions one step of a collection scan visits in a table of `len` elements, from
/// `cursor` (0: a new scan): `(end..start)`, walked downwards; `end` is the next cursor.
/// Counting down from the end means a removal — which moves the last element into the
/// hole — never hides an element the scan has not visited yet.
pub fn scan_window(cursor: u64, len: usize, count: usize) -> (usize, usize) {
    let start = if cursor == 0 || cursor as usize > len {
        len
    } else {
        cursor as usize
    };
    (start, start.saturating_sub(count.max(1)))
}
