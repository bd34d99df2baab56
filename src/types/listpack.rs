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
//! - `Pos` is the byte offset of an entry; it is invalidated by any mutation except
//!   where a method returns a new one.
//! - Entries are passed in as bytes; `LpValue` is what is read back.

use std::cmp::Ordering;

const HEADER: usize = 6;
const EOF: u8 = 0xFF;
/// The count field's "too many to count here" value.
const COUNT_UNKNOWN: u16 = u16::MAX;

/// An entry as stored: an integer, or bytes borrowed from the listpack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpValue<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl LpValue<'_> {
    /// The entry as the client sees it (integers in decimal).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }
    /// Appends the client-visible bytes to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            LpValue::Int(n) => out.extend_from_slice(itoa::Buffer::new().format(*n).as_bytes()),
            LpValue::Bytes(b) => out.extend_from_slice(b),
        }
    }
    /// Equal to `other` as bytes (without allocating for integers).
    pub fn eq_bytes(&self, other: &[u8]) -> bool {
        match self {
            LpValue::Int(n) => itoa::Buffer::new().format(*n).as_bytes() == other,
            LpValue::Bytes(b) => *b == other,
        }
    }
    /// Compares as bytes (memcmp order, shorter prefix first), as Redis's lex ranges do.
    pub fn cmp_bytes(&self, other: &[u8]) -> Ordering {
        match self {
            LpValue::Int(n) => itoa::Buffer::new().format(*n).as_bytes().cmp(other),
            LpValue::Bytes(b) => (*b).cmp(other),
        }
    }
    /// The entry as an integer, if it is one or its bytes parse as one (string2ll rules).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            LpValue::Int(n) => Some(*n),
            LpValue::Bytes(b) => super::number::parse_i64(b),
        }
    }
    /// The entry as a double (for sorted-set scores stored as strings or integers).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            LpValue::Int(n) => Some(*n as f64),
            LpValue::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        }
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
    bytes: ThinBytes,
}

/// A listpack's bytes behind one pointer: the length is the listpack's own first four
/// bytes (its total size), so the handle is 8 bytes instead of a boxed slice's 16. A
/// small hash or sorted set is then a 32-byte `Arc` allocation rather than 48.
struct ThinBytes {
    ptr: std::ptr::NonNull<u8>,
}

// SAFETY: the allocation is owned by this handle alone (`clone` copies it) and only
// reached through `&self` / `&mut self`, as for the `Box<[u8]>` (`Send`) it stands for.
unsafe impl Send for ThinBytes {}
// SAFETY: as for `Send`; through `&ThinBytes` the bytes are only read.
unsafe impl Sync for ThinBytes {}

impl ThinBytes {
    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::array::<u8>(len).expect("listpack size fits a layout")
    }

    /// Copies `bytes`, whose first four bytes must be their total size (little-endian).
    fn new(bytes: &[u8]) -> ThinBytes {
        assert!(
            bytes.len() > HEADER
                && u32::from_le_bytes(bytes[0..4].try_into().expect("4")) as usize == bytes.len(),
            "a listpack starts with its own size"
        );
        let layout = Self::layout(bytes.len());
        // SAFETY: the layout is non-zero (the assert above: more than a header), so
        // `alloc` may be called; a null result is handled; `bytes.len()` bytes are copied
        // into the fresh allocation of exactly that size, which cannot overlap `bytes`.
        unsafe {
            let raw = std::alloc::alloc(layout);
            let Some(ptr) = std::ptr::NonNull::new(raw) else {
                std::alloc::handle_alloc_error(layout);
            };
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), raw, bytes.len());
            ThinBytes { ptr }
        }
    }

    fn stored_len(&self) -> usize {
        // SAFETY: `new` allocated and initialised more than `HEADER` bytes, the first four
        // being the size; the allocation lives as long as `self`.
        let header = unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), 4) };
        u32::from_le_bytes(header.try_into().expect("4")) as usize
    }
}

impl std::ops::Deref for ThinBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `new` allocated and initialised exactly `stored_len` bytes (the size
        // bytes never change: see `deref_mut`), alive and unmutated while `&self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.stored_len()) }
    }
}

impl std::ops::DerefMut for ThinBytes {
    /// For in-place edits that keep the size (the entry count): the first four bytes
    /// must not change.
    fn deref_mut(&mut self) -> &mut [u8] {
        let len = self.stored_len();
        // SAFETY: as for `deref`, and `&mut self` makes the access unique. Callers keep
        // the first four bytes (the size) as they are.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), len) }
    }
}

impl Drop for ThinBytes {
    fn drop(&mut self) {
        let layout = Self::layout(self.stored_len());
        // SAFETY: allocated in `new` with this layout (the size bytes never change), and
        // freed only here, once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) }
    }
}

impl Clone for ThinBytes {
    fn clone(&self) -> ThinBytes {
        ThinBytes::new(self)
    }
}

impl PartialEq for ThinBytes {
    fn eq(&self, other: &ThinBytes) -> bool {
        **self == **other
    }
}

impl Eq for ThinBytes {}

impl std::hash::Hash for ThinBytes {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state)
    }
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

/// How a value is stored: an integer, or a string of this length.
enum Encoded<'a> {
    Int(i64),
    Str(&'a [u8]),
}

fn classify(value: &[u8]) -> Encoded<'_> {
    match super::number::parse_i64(value) {
        Some(n) => Encoded::Int(n),
        None => Encoded::Str(value),
    }
}

/// Appends the entry (encoding, data, backlen) for `value` to `out`.
fn encode_entry(out: &mut Vec<u8>, value: &[u8]) {
    let start = out.len();
    match classify(value) {
        Encoded::Int(v) => {
            if (0..=127).contains(&v) {
                out.push(v as u8);
            } else if (-4096..=4095).contains(&v) {
                let u = (v as u64) & 0x1FFF;
                out.push(0xC0 | (u >> 8) as u8);
                out.push(u as u8);
            } else if (-32768..=32767).contains(&v) {
                out.push(0xF1);
                out.extend_from_slice(&(v as i16).to_le_bytes());
            } else if (-8_388_608..=8_388_607).contains(&v) {
                out.push(0xF2);
                out.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            } else if (i32::MIN as i64..=i32::MAX as i64).contains(&v) {
                out.push(0xF3);
                out.extend_from_slice(&(v as i32).to_le_bytes());
            } else {
                out.push(0xF4);
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        Encoded::Str(s) => {
            let len = s.len();
            if len < 64 {
                out.push(0x80 | len as u8);
            } else if len < 4096 {
                out.push(0xE0 | (len >> 8) as u8);
                out.push(len as u8);
            } else {
                out.push(0xF0);
                out.extend_from_slice(&(len as u32).to_le_bytes());
            }
            out.extend_from_slice(s);
        }
    }
    let entry_len = (out.len() - start) as u64;
    encode_backlen(out, entry_len);
}

fn backlen_size(l: u64) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// Redis's lpEncodeBacklen: the entry length, readable right to left.
fn encode_backlen(out: &mut Vec<u8>, l: u64) {
    let n = backlen_size(l);
    for i in (0..n).rev() {
        let chunk = ((l >> (7 * i)) & 127) as u8;
        // Every byte but the leftmost says "more to the left".
        out.push(if i == n - 1 { chunk } else { chunk | 128 });
    }
    // The leftmost byte (pushed first) carries the highest bits without the flag; the
    // loop above pushed it first only when n == 1, so fix up the order for n > 1.
    if n > 1 {
        let len = out.len();
        let bytes = &mut out[len - n..];
        bytes[0] = (l >> (7 * (n - 1))) as u8;
        for (j, byte) in bytes.iter_mut().enumerate().skip(1) {
            *byte = (((l >> (7 * (n - 1 - j))) & 127) as u8) | 128;
        }
    }
}

/// Bytes of an entry's encoding and data, from its first byte(s); None if malformed or
/// running past `avail` bytes.
fn entry_body_len(bytes: &[u8]) -> Option<usize> {
    let first = *bytes.first()?;
    let len = match first {
        0x00..=0x7F => 1,
        0x80..=0xBF => 1 + (first & 0x3F) as usize,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 2 + ((((first & 0x0F) as usize) << 8) | *bytes.get(1)? as usize),
        0xF0 => {
            let raw: [u8; 4] = bytes.get(1..5)?.try_into().ok()?;
            5 + u32::from_le_bytes(raw) as usize
        }
        0xF1 => 3,
        0xF2 => 4,
        0xF3 => 5,
        0xF4 => 9,
        _ => return None,
    };
    (len <= bytes.len()).then_some(len)
}

/// Decodes the entry starting at `bytes[0]` (already validated).
fn decode(bytes: &[u8]) -> LpValue<'_> {
    let first = bytes[0];
    match first {
        0x00..=0x7F => LpValue::Int(first as i64),
        0x80..=0xBF => LpValue::Bytes(&bytes[1..1 + (first & 0x3F) as usize]),
        0xC0..=0xDF => {
            let u = (((first & 0x1F) as i64) << 8) | bytes[1] as i64;
            LpValue::Int(if u >= 4096 { u - 8192 } else { u })
        }
        0xE0..=0xEF => {
            let len = (((first & 0x0F) as usize) << 8) | bytes[1] as usize;
            LpValue::Bytes(&bytes[2..2 + len])
        }
        0xF0 => {
            let len = u32::from_le_bytes(bytes[1..5].try_into().expect("4 bytes")) as usize;
            LpValue::Bytes(&bytes[5..5 + len])
        }
        0xF1 => LpValue::Int(i16::from_le_bytes([bytes[1], bytes[2]]) as i64),
        0xF2 => {
            let u = (bytes[1] as i32) | ((bytes[2] as i32) << 8) | ((bytes[3] as i32) << 16);
            LpValue::Int(((u << 8) >> 8) as i64)
        }
        0xF3 => LpValue::Int(i32::from_le_bytes(bytes[1..5].try_into().expect("4")) as i64),
        0xF4 => LpValue::Int(i64::from_le_bytes(bytes[1..9].try_into().expect("8"))),
        _ => unreachable!("validated listpack entry"),
    }
}

impl Listpack {
    pub fn new() -> Listpack {
        let mut bytes = Vec::with_capacity(HEADER + 1);
        bytes.extend_from_slice(&((HEADER + 1) as u32).to_le_bytes());
        bytes.extend_from_slice(&0u16.to_le_bytes());
        bytes.push(EOF);
        Listpack {
            bytes: ThinBytes::new(&bytes),
        }
    }

    /// Validates a serialized listpack (every entry, the count, the terminator; never
    /// trusts a length without checking it against the buffer) and keeps its bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Listpack, InvalidListpack> {
        if bytes.len() < HEADER + 1 {
            return Err(InvalidListpack("shorter than a header"));
        }
        let total = u32::from_le_bytes(bytes[0..4].try_into().expect("4")) as usize;
        if total != bytes.len() {
            return Err(InvalidListpack("total size does not match"));
        }
        let count = u16::from_le_bytes([bytes[4], bytes[5]]);
        let mut at = HEADER;
        let mut entries = 0usize;
        loop {
            let Some(&first) = bytes.get(at) else {
                return Err(InvalidListpack("no terminator"));
            };
            if first == EOF {
                break;
            }
            let body = entry_body_len(&bytes[at..bytes.len() - 1])
                .ok_or(InvalidListpack("entry runs past the end"))?;
            let back = backlen_size(body as u64);
            let end = at + body + back;
            if end > bytes.len() - 1 {
                return Err(InvalidListpack("entry runs past the end"));
            }
            if decode_backlen(&bytes[..end]) != Some(body as u64) {
                return Err(InvalidListpack("bad back length"));
            }
            at = end;
            entries += 1;
        }
        if at != bytes.len() - 1 {
            return Err(InvalidListpack("bytes after the terminator"));
        }
        if count != COUNT_UNKNOWN && count as usize != entries {
            return Err(InvalidListpack("entry count does not match"));
        }
        Ok(Listpack {
            bytes: ThinBytes::new(bytes),
        })
    }

    /// The serialized form (what RDB stores).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Number of entries (counted when the header says 65535).
    pub fn len(&self) -> usize {
        let count = u16::from_le_bytes([self.bytes[4], self.bytes[5]]);
        if count != COUNT_UNKNOWN {
            return count as usize;
        }
        let mut n = 0;
        let mut pos = self.first();
        while let Some(p) = pos {
            n += 1;
            pos = self.next(p);
        }
        n
    }

    pub fn is_empty(&self) -> bool {
        self.bytes[HEADER] == EOF
    }

    /// Total bytes, header and terminator included.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    fn entry_len(&self, pos: Pos) -> usize {
        let at = pos.0 as usize;
        let body = entry_body_len(&self.bytes[at..]).expect("valid entry");
        body + backlen_size(body as u64)
    }

    pub fn first(&self) -> Option<Pos> {
        (!self.is_empty()).then_some(Pos(HEADER as u32))
    }

    pub fn last(&self) -> Option<Pos> {
        self.prev(Pos((self.bytes.len() - 1) as u32))
    }

    pub fn next(&self, pos: Pos) -> Option<Pos> {
        let at = pos.0 as usize + self.entry_len(pos);
        (self.bytes[at] != EOF).then_some(Pos(at as u32))
    }

    pub fn prev(&self, pos: Pos) -> Option<Pos> {
        let at = pos.0 as usize;
        if at <= HEADER {
            return None;
        }
        let body = decode_backlen(&self.bytes[..at]).expect("valid back length") as usize;
        Some(Pos((at - backlen_size(body as u64) - body) as u32))
    }

    /// The entry at index `index`; negative counts from the end (-1 is the last).
    pub fn seek(&self, index: i64) -> Option<Pos> {
        if index >= 0 {
            let mut pos = self.first();
            for _ in 0..index {
                pos = self.next(pos?);
            }
            pos
        } else {
            let mut pos = self.last();
            for _ in 0..(-(index + 1)) {
                pos = self.prev(pos?);
            }
            pos
        }
    }

    pub fn get(&self, pos: Pos) -> LpValue<'_> {
        decode(&self.bytes[pos.0 as usize..])
    }

    /// Entries front to back.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = LpValue<'_>> + '_ {
        Iter {
            lp: self,
            front: self.first(),
            back: self.last(),
        }
    }

    /// Entries from `pos` (included) to the end.
    pub fn iter_from(&self, pos: Pos) -> impl Iterator<Item = LpValue<'_>> + '_ {
        Iter {
            lp: self,
            front: Some(pos),
            back: self.last(),
        }
    }

    /// The first entry equal to `value` among entries `0, 1 + skip, 2 * (1 + skip), …`
    /// (skip 1 searches the fields of a field/value listpack).
    pub fn find(&self, value: &[u8], skip: usize) -> Option<Pos> {
        let mut pos = self.first();
        while let Some(p) = pos {
            if self.get(p).eq_bytes(value) {
                return Some(p);
            }
            pos = self.next(p);
            for _ in 0..skip {
                pos = self.next(pos?);
            }
        }
        None
    }

    /// Replaces bytes `range` with `insert`, fixing the header; the allocation is rebuilt
    /// at its exact new size.
    fn splice(&mut self, range: std::ops::Range<usize>, insert: &[u8], count_delta: isize) {
        let mut bytes = Vec::with_capacity(self.bytes.len() - range.len() + insert.len());
        bytes.extend_from_slice(&self.bytes[..range.start]);
        bytes.extend_from_slice(insert);
        bytes.extend_from_slice(&self.bytes[range.end..]);
        let total = u32::try_from(bytes.len()).expect("a listpack stays under 4 GB");
        bytes[0..4].copy_from_slice(&total.to_le_bytes());
        let old = u16::from_le_bytes([bytes[4], bytes[5]]);
        let new = if old == COUNT_UNKNOWN {
            COUNT_UNKNOWN
        } else {
            let n = old as isize + count_delta;
            if n >= COUNT_UNKNOWN as isize {
                COUNT_UNKNOWN
            } else {
                n as u16
            }
        };
        bytes[4..6].copy_from_slice(&new.to_le_bytes());
        self.bytes = ThinBytes::new(&bytes);
        if new == COUNT_UNKNOWN && count_delta < 0 {
            // Back under the limit after deletions: Redis stores the count again.
            let counted = self.len();
            if counted < COUNT_UNKNOWN as usize {
                self.bytes[4..6].copy_from_slice(&(counted as u16).to_le_bytes());
            }
        }
    }

    fn insert_at(&mut self, at: usize, value: &[u8]) -> Pos {
        let mut entry = Vec::new();
        encode_entry(&mut entry, value);
        self.splice(at..at, &entry, 1);
        Pos(at as u32)
    }

    pub fn push_back(&mut self, value: &[u8]) {
        self.insert_at(self.bytes.len() - 1, value);
    }

    pub fn push_front(&mut self, value: &[u8]) {
        self.insert_at(HEADER, value);
    }

    /// Inserts before `pos`; returns the new entry's position.
    pub fn insert_before(&mut self, pos: Pos, value: &[u8]) -> Pos {
        self.insert_at(pos.0 as usize, value)
    }

    /// Inserts after `pos`; returns the new entry's position.
    pub fn insert_after(&mut self, pos: Pos, value: &[u8]) -> Pos {
        let at = pos.0 as usize + self.entry_len(pos);
        self.insert_at(at, value)
    }

    /// Replaces the entry at `pos`; returns its (unchanged) position.
    pub fn replace(&mut self, pos: Pos, value: &[u8]) -> Pos {
        let at = pos.0 as usize;
        let mut entry = Vec::new();
        encode_entry(&mut entry, value);
        let old = self.entry_len(pos);
        self.splice(at..at + old, &entry, 0);
        pos
    }

    /// Deletes the entry at `pos`; returns the position of the entry that followed it.
    pub fn delete(&mut self, pos: Pos) -> Option<Pos> {
        let at = pos.0 as usize;
        let old = self.entry_len(pos);
        self.splice(at..at + old, &[], -1);
        (self.bytes[at] != EOF).then_some(pos)
    }

    /// Deletes `count` entries starting at `pos` (fewer if the list ends first).
    pub fn delete_range(&mut self, pos: Pos, count: usize) {
        let start = pos.0 as usize;
        let mut end = start;
        let mut removed = 0;
        while removed < count && self.bytes[end] != EOF {
            end += self.entry_len(Pos(end as u32));
            removed += 1;
        }
        self.splice(start..end, &[], -(removed as isize));
    }

    /// Bytes this value would add as a new entry (encoding and backlen included): for
    /// size-limited nodes (list-max-listpack-size in bytes).
    pub fn entry_size(value: &[u8]) -> usize {
        let mut entry = Vec::new();
        encode_entry(&mut entry, value);
        entry.len()
    }
}

/// Reads the back length that ends just before `bytes.len()`; None if malformed.
fn decode_backlen(bytes: &[u8]) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0;
    let mut at = bytes.len();
    loop {
        at = at.checked_sub(1)?;
        if at < HEADER {
            return None;
        }
        let byte = bytes[at];
        value |= ((byte & 127) as u64) << shift;
        if byte & 128 == 0 {
            return Some(value);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
}

struct Iter<'a> {
    lp: &'a Listpack,
    front: Option<Pos>,
    back: Option<Pos>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = LpValue<'a>;
    fn next(&mut self) -> Option<LpValue<'a>> {
        let pos = self.front?;
        if self.back.is_some_and(|b| pos > b) {
            return None;
        }
        if Some(pos) == self.back {
            self.front = None;
            self.back = None;
        } else {
            self.front = self.lp.next(pos);
        }
        Some(self.lp.get(pos))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let pos = self.back?;
        if self.front.is_some_and(|f| pos < f) {
            return None;
        }
        if Some(pos) == self.front {
            self.front = None;
            self.back = None;
        } else {
            self.back = self.lp.prev(pos);
        }
        Some(self.lp.get(pos))
    }
}

impl<'a> Extend<&'a [u8]> for Listpack {
    /// Appends many entries with one reallocation.
    fn extend<I: IntoIterator<Item = &'a [u8]>>(&mut self, iter: I) {
        let mut entries = Vec::new();
        let mut count = 0isize;
        for value in iter {
            encode_entry(&mut entries, value);
            count += 1;
        }
        let at = self.bytes.len() - 1;
        self.splice(at..at, &entries, count);
    }
}

impl<'a> FromIterator<&'a [u8]> for Listpack {
    fn from_iter<I: IntoIterator<Item = &'a [u8]>>(iter: I) -> Self {
        let mut lp = Listpack::new();
        lp.extend(iter);
        lp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn values(lp: &Listpack) -> Vec<Vec<u8>> {
        lp.iter().map(|v| v.to_bytes()).collect()
    }

    #[test]
    fn every_encoding_round_trips_at_its_boundaries() {
        let long = |n: usize| "x".repeat(n);
        let cases: Vec<String> = [
            "0",
            "127",
            "128",
            "-1",
            "4095",
            "4096",
            "-4096",
            "-4097",
            "32767",
            "32768",
            "-32768",
            "-32769",
            "8388607",
            "8388608",
            "-8388608",
            "-8388609",
            "2147483647",
            "2147483648",
            "-2147483648",
            "-2147483649",
            "9223372036854775807",
            "-9223372036854775808",
            "-0",
            "01",
            "+1",
            " 1",
            "",
            "a",
            "hello",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([long(63), long(64), long(4095), long(4096), long(20000)])
        .collect();
        let lp: Listpack = cases.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(lp.len(), cases.len());
        let expected: Vec<Vec<u8>> = cases.iter().map(|s| s.as_bytes().to_vec()).collect();
        assert_eq!(values(&lp), expected);
        let mut backwards: Vec<Vec<u8>> = lp.iter().rev().map(|v| v.to_bytes()).collect();
        backwards.reverse();
        assert_eq!(backwards, expected);
        assert_eq!(Listpack::from_bytes(lp.as_bytes()).unwrap(), lp);
        // Integers come back as integers, the rest as bytes.
        assert_eq!(lp.get(lp.seek(0).unwrap()), LpValue::Int(0));
        assert_eq!(lp.get(lp.seek(22).unwrap()), LpValue::Bytes(b"-0"));
        assert_eq!(
            lp.get(lp.seek(-1).unwrap()),
            LpValue::Bytes(long(20000).as_bytes())
        );
    }

    /// Bytes Redis 7.0.15 wrote (the listpack inside DUMP of `RPUSH l a 1 -5 300 <70 x>`
    /// and `HSET h f v n 100000`), rebuilt byte for byte.
    #[test]
    fn matches_redis_bytes() {
        let mut expected = Vec::new();
        // header: total, count
        let entries: Vec<u8> = [
            &[0x81, b'a', 0x02][..], // 6-bit string "a"
            &[0x01, 0x01],           // 7-bit uint 1
            &[0xDF, 0xFB, 0x02],     // 13-bit int -5
            &[0xC1, 0x2C, 0x02],     // 13-bit int 300
        ]
        .concat();
        let mut long_entry = vec![0xE0, 70];
        long_entry.extend(std::iter::repeat_n(b'x', 70));
        long_entry.push(72);
        let total = 6 + entries.len() + long_entry.len() + 1;
        expected.extend_from_slice(&(total as u32).to_le_bytes());
        expected.extend_from_slice(&5u16.to_le_bytes());
        expected.extend_from_slice(&entries);
        expected.extend_from_slice(&long_entry);
        expected.push(0xFF);
        let x70 = "x".repeat(70);
        let lp: Listpack = [&b"a"[..], b"1", b"-5", b"300", x70.as_bytes()]
            .into_iter()
            .collect();
        assert_eq!(lp.as_bytes(), &expected[..]);
    }

    #[test]
    fn a_listpack_handle_is_one_pointer() {
        assert_eq!(std::mem::size_of::<Listpack>(), 8);
        assert_eq!(std::mem::size_of::<Option<Listpack>>(), 8);
        let lp: Listpack = [&b"a"[..], b"b"].into_iter().collect();
        let copy = lp.clone();
        drop(lp);
        assert_eq!(copy.len(), 2);
    }

    #[test]
    fn back_lengths_encode_as_redis_does() {
        for (len, expected) in [
            (1u64, vec![1u8]),
            (127, vec![127]),
            (128, vec![1, 128]),
            (16382, vec![127, 254]),
            (16383, vec![0, 255, 255]),
        ] {
            let mut out = Vec::new();
            encode_backlen(&mut out, len);
            assert_eq!(out, expected, "{len}");
            let mut framed = vec![0u8; HEADER];
            framed.extend_from_slice(&out);
            assert_eq!(decode_backlen(&framed), Some(len));
        }
    }

    #[test]
    fn random_edits_match_a_model() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut lp = Listpack::new();
        let mut model: Vec<Vec<u8>> = Vec::new();
        for _ in 0..3000 {
            let value: Vec<u8> = match rng.random_range(0..4) {
                0 => rng
                    .random_range(-100_000i64..100_000)
                    .to_string()
                    .into_bytes(),
                1 => rng.random::<i64>().to_string().into_bytes(),
                2 => (0..rng.random_range(0..100))
                    .map(|_| rng.random())
                    .collect(),
                _ => vec![b'y'; rng.random_range(0..5000)],
            };
            match rng.random_range(0..6) {
                0 => {
                    lp.push_back(&value);
                    model.push(value);
                }
                1 => {
                    lp.push_front(&value);
                    model.insert(0, value);
                }
                2 if !model.is_empty() => {
                    let i = rng.random_range(0..model.len());
                    let pos = lp.seek(i as i64).unwrap();
                    if rng.random_bool(0.5) {
                        lp.insert_before(pos, &value);
                        model.insert(i, value);
                    } else {
                        lp.insert_after(pos, &value);
                        model.insert(i + 1, value);
                    }
                }
                3 if !model.is_empty() => {
                    let i = rng.random_range(0..model.len());
                    lp.replace(lp.seek(i as i64).unwrap(), &value);
                    model[i] = value;
                }
                4 if !model.is_empty() => {
                    let i = rng.random_range(0..model.len());
                    lp.delete(lp.seek(-(i as i64) - 1).unwrap());
                    model.remove(model.len() - 1 - i);
                }
                5 if !model.is_empty() => {
                    let i = rng.random_range(0..model.len());
                    let n = rng.random_range(0..4);
                    lp.delete_range(lp.seek(i as i64).unwrap(), n);
                    model.drain(i..(i + n).min(model.len()));
                }
                _ => {}
            }
            assert_eq!(lp.len(), model.len());
            assert_eq!(lp.byte_len(), lp.as_bytes().len());
        }
        assert_eq!(values(&lp), model);
        assert_eq!(Listpack::from_bytes(lp.as_bytes()).unwrap(), lp);
        let pairs: Listpack = [&b"f1"[..], b"v1", b"f3", b"x", b"f2", b"7"]
            .into_iter()
            .collect();
        assert_eq!(pairs.find(b"v1", 1), None, "values are skipped");
        assert_eq!(pairs.find(b"f2", 1), pairs.seek(4));
        assert_eq!(pairs.find(b"x", 0), pairs.seek(3));
    }

    #[test]
    fn damaged_input_is_rejected_without_panicking() {
        let lp: Listpack = [&b"hello"[..], b"12345", &[7u8; 300][..], b"-70000"]
            .into_iter()
            .collect();
        let good = lp.as_bytes().to_vec();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for cut in 0..good.len() {
            assert!(Listpack::from_bytes(&good[..cut]).is_err());
        }
        for _ in 0..20_000 {
            let mut bad = good.clone();
            let i = rng.random_range(0..bad.len());
            bad[i] = rng.random();
            if let Ok(parsed) = Listpack::from_bytes(&bad) {
                // Whatever passes validation must be fully walkable.
                let n = parsed.iter().count();
                assert_eq!(n, parsed.len());
                assert_eq!(parsed.iter().rev().count(), n);
            }
        }
        for _ in 0..2000 {
            let len = rng.random_range(0..64);
            let random: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            let _ = Listpack::from_bytes(&random);
        }
    }
}
