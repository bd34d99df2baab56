//! Redis's listpack: a small sequence of strings and integers in one contiguous,
//! exactly-sized allocation, byte-for-byte the format Redis 7.0 writes (so an RDB
//! listpack blob is loaded by validating it and keeping its bytes, and written as is).
//!
//! Layout: 4-byte total size, 2-byte entry count (65535 = "count them"), entries, 0xFF.
//! Each entry: encoding+data, then its own length as a backlen (1..5 bytes, 7 bits each,
//! read right to left) so that the list can be walked backwards. Strings that are
//! canonical integers (Redis's `string2ll` rules, at most 20 bytes) are stored as
//! integers, as Redis does.
//!
//! Mutations rebuild the allocation at its new exact size: a listpack is only used while
//! small (Redis's `*-max-listpack-*` limits), where one copy costs less than the slack a
//! growable buffer would keep.
//!
//! API (placeholder bodies: the implementation arrives with its tests):
//! - `Pos` is the byte offset of an entry; it is invalidated by any mutation except
//!   where a method returns a new one.
//! - Entries are passed in as bytes; `LpValue` is what is read back.

use std::cmp::Ordering;

/// An entry as stored: an integer, or bytes borrowed from the listpack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpValue<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl LpValue<'_> {
    /// The entry as the client sees it (integers in decimal).
    pub fn to_bytes(&self) -> Vec<u8> {
        todo!()
    }
    /// Appends the client-visible bytes to `out`.
    pub fn write_to(&self, _out: &mut Vec<u8>) {
        todo!()
    }
    /// Equal to `other` as bytes (without allocating for integers).
    pub fn eq_bytes(&self, _other: &[u8]) -> bool {
        todo!()
    }
    /// Compares as bytes (memcmp order, shorter prefix first), as Redis's lex ranges do.
    pub fn cmp_bytes(&self, _other: &[u8]) -> Ordering {
        todo!()
    }
    /// The entry as an integer, if it is one or its bytes parse as one (string2ll rules).
    pub fn as_i64(&self) -> Option<i64> {
        todo!()
    }
    /// The entry as a double (for sorted-set scores stored as strings or integers).
    pub fn as_f64(&self) -> Option<f64> {
        todo!()
    }
}

/// The byte offset of an entry inside a listpack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos(pub(crate) u32);

/// A listpack that failed validation (RDB load, DUMP payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidListpack(pub &'static str);

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Listpack {
    bytes: Box<[u8]>,
}

impl std::fmt::Debug for Listpack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Default for Listpack {
    fn default() -> Self {
        Listpack::new()
    }
}

impl Listpack {
    pub fn new() -> Listpack {
        todo!()
    }
    /// Validates a serialized listpack (every entry, the count, the terminator; never
    /// trusts a length without checking it against the buffer) and keeps its bytes.
    pub fn from_bytes(_bytes: &[u8]) -> Result<Listpack, InvalidListpack> {
        todo!()
    }
    /// The serialized form (what RDB stores).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    /// Number of entries (counted when the header says 65535).
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        todo!()
    }
    /// Total bytes, header and terminator included.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    pub fn first(&self) -> Option<Pos> {
        todo!()
    }
    pub fn last(&self) -> Option<Pos> {
        todo!()
    }
    pub fn next(&self, _pos: Pos) -> Option<Pos> {
        todo!()
    }
    pub fn prev(&self, _pos: Pos) -> Option<Pos> {
        todo!()
    }
    /// The entry at index `index`; negative counts from the end (-1 is the last).
    pub fn seek(&self, _index: i64) -> Option<Pos> {
        todo!()
    }
    pub fn get(&self, _pos: Pos) -> LpValue<'_> {
        todo!()
    }
    /// Entries front to back.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = LpValue<'_>> + '_ {
        std::iter::empty()
    }
    /// Entries from `pos` (included) to the end.
    pub fn iter_from(&self, _pos: Pos) -> impl Iterator<Item = LpValue<'_>> + '_ {
        std::iter::empty()
    }
    /// The first entry equal to `value` among entries `0, 1 + skip, 2 * (1 + skip), …`
    /// (skip 1 searches the fields of a field/value listpack).
    pub fn find(&self, _value: &[u8], _skip: usize) -> Option<Pos> {
        todo!()
    }

    pub fn push_back(&mut self, _value: &[u8]) {
        todo!()
    }
    pub fn push_front(&mut self, _value: &[u8]) {
        todo!()
    }
    /// Inserts before `pos`; returns the new entry's position.
    pub fn insert_before(&mut self, _pos: Pos, _value: &[u8]) -> Pos {
        todo!()
    }
    /// Inserts after `pos`; returns the new entry's position.
    pub fn insert_after(&mut self, _pos: Pos, _value: &[u8]) -> Pos {
        todo!()
    }
    /// Replaces the entry at `pos`; returns its (unchanged) position.
    pub fn replace(&mut self, _pos: Pos, _value: &[u8]) -> Pos {
        todo!()
    }
    /// Deletes the entry at `pos`; returns the position of the entry that followed it.
    pub fn delete(&mut self, _pos: Pos) -> Option<Pos> {
        todo!()
    }
    /// Deletes `count` entries starting at `pos` (fewer if the list ends first).
    pub fn delete_range(&mut self, _pos: Pos, _count: usize) {
        todo!()
    }
    /// Bytes this value would add as a new entry (encoding and backlen included): for
    /// size-limited nodes (list-max-listpack-size in bytes).
    pub fn entry_size(_value: &[u8]) -> usize {
        todo!()
    }
}

impl<'a> Extend<&'a [u8]> for Listpack {
    /// Appends many entries with one reallocation.
    fn extend<I: IntoIterator<Item = &'a [u8]>>(&mut self, _iter: I) {
        todo!()
    }
}

impl<'a> FromIterator<&'a [u8]> for Listpack {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> Self {
        let mut lp = Listpack::new();
        lp.extend(iter);
        lp
    }
}
