//! Hashes: a listpack of field, value pairs while small (Redis's `hash-max-listpack-*`
//! limits), an insertion-ordered table past them (never converted back, as in Redis).
//!
//! The table is an `IndexMap` so that HRANDFIELD picks in O(1) and HSCAN can walk by
//! position: the cursor counts down from the end, so a removal (which moves the last
//! element into the hole) never hides an element the scan has not visited.

use super::limits;
use super::listpack::{Listpack, LpValue, Pos};
use super::memory;
use indexmap::IndexMap;

type Table = IndexMap<Box<[u8]>, Box<[u8]>, foldhash::fast::RandomState>;

/// Why a listpack does not hold a hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvalidHash {
    OddEntryCount,
    DuplicateField,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Hash {
    Listpack(Listpack),
    Table(Box<Table>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::Listpack(Listpack::new())
    }
}

fn fits_listpack(bytes: &[u8]) -> bool {
    bytes.len() as i64 <= limits::hash_max_listpack_value()
}

impl Hash {
    pub fn len(&self) -> usize {
        match self {
            Hash::Listpack(lp) => lp.len() / 2,
            Hash::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Listpack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    /// Heap bytes held, approximately (capture accounting, MEMORY USAGE).
    pub fn approx_bytes(&self) -> usize {
        match self {
            Hash::Listpack(lp) => lp.byte_len(),
            Hash::Table(t) => t.iter().map(|(f, v)| f.len() + v.len() + 56).sum::<usize>(),
        }
    }

    /// The bytes the hash takes from the allocator (MEMORY USAGE): its listpack, or its
    /// table (entries, index) and the fields' and values' own allocations, measured on the
    /// first `samples` pairs and scaled to all.
    pub fn memory_usage(&self, samples: usize) -> usize {
        match self {
            Hash::Listpack(lp) => memory::allocation(lp.byte_len()),
            Hash::Table(t) => {
                // An entry is the element's hash and the two boxed slices.
                let entry_bytes = size_of::<(usize, Box<[u8]>, Box<[u8]>)>();
                let structure = memory::boxed::<Table>()
                    + memory::allocation(t.capacity() * entry_bytes)
                    + memory::hash_table(t.capacity(), size_of::<usize>());
                let elements = memory::sampled(t.iter(), t.len(), samples, |(f, v)| {
                    memory::allocation(f.len()) + memory::allocation(v.len())
                });
                structure + elements
            }
        }
    }

    /// The listpack position of `field`'s value.
    fn find_in(lp: &Listpack, field: &[u8]) -> Option<Pos> {
        lp.find(field, 1).and_then(|p| lp.next(p))
    }

    pub fn get(&self, field: &[u8]) -> Option<LpValue<'_>> {
        match self {
            Hash::Listpack(lp) => Self::find_in(lp, field).map(|p| lp.get(p)),
            Hash::Table(t) => t.get(field).map(|v| LpValue::Bytes(v)),
        }
    }

    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    fn convert(&mut self) {
        let table = match self {
            Hash::Listpack(lp) => {
                let mut table = Table::with_capacity_and_hasher(lp.len() / 2, Default::default());
                let mut items = lp.iter();
                while let (Some(f), Some(v)) = (items.next(), items.next()) {
                    table.insert(f.to_bytes().into(), v.to_bytes().into());
                }
                table
            }
            Hash::Table(_) => return,
        };
        *self = Hash::Table(Box::new(table));
    }

    /// Sets `field` to `value`; true if the field is new.
    pub fn set(&mut self, field: &[u8], value: &[u8]) -> bool {
        if matches!(self, Hash::Listpack(_)) && !(fits_listpack(field) && fits_listpack(value)) {
            self.convert();
        }
        let new = match self {
            Hash::Listpack(lp) => match Self::find_in(lp, field) {
                Some(pos) => {
                    lp.replace(pos, value);
                    false
                }
                None => {
                    lp.extend([field, value]);
                    true
                }
            },
            Hash::Table(t) => t.insert(field.into(), value.into()).is_none(),
        };
        if self.len() as i64 > limits::hash_max_listpack_entries() {
            self.convert();
        }
        new
    }

    /// Removes `field`; true if it was there.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Listpack(lp) => match lp.find(field, 1) {
                Some(pos) => {
                    lp.delete_range(pos, 2);
                    true
                }
                None => false,
            },
            Hash::Table(t) => t.swap_remove(field).is_some(),
        }
    }

    /// Fields and values in the hash's order.
    pub fn iter(&self) -> Box<dyn Iterator<Item = (LpValue<'_>, LpValue<'_>)> + '_> {
        match self {
            Hash::Listpack(lp) => {
                let mut items = lp.iter();
                Box::new(std::iter::from_fn(move || {
                    Some((items.next()?, items.next()?))
                }))
            }
            Hash::Table(t) => Box::new(
                t.iter()
                    .map(|(f, v)| (LpValue::Bytes(f), LpValue::Bytes(v))),
            ),
        }
    }

    /// The pair at `index` in the hash's order (HRANDFIELD).
    pub fn get_index(&self, index: usize) -> Option<(LpValue<'_>, LpValue<'_>)> {
        match self {
            Hash::Listpack(lp) => {
                let field = lp.seek(2 * index as i64)?;
                Some((lp.get(field), lp.get(lp.next(field)?)))
            }
            Hash::Table(t) => t
                .get_index(index)
                .map(|(f, v)| (LpValue::Bytes(f), LpValue::Bytes(v))),
        }
    }

    /// One HSCAN step from `cursor`, visiting about `count` elements: the next cursor
    /// (0 when done). A listpack is returned whole, as in Redis.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(LpValue, LpValue)) -> u64 {
        match self {
            Hash::Listpack(_) => {
                for (f, v) in self.iter() {
                    visit(f, v);
                }
                0
            }
            Hash::Table(t) => {
                let (start, end) = super::scan_window(cursor, t.len(), count);
                for index in (end..start).rev() {
                    let (f, v) = t.get_index(index).expect("in range");
                    visit(LpValue::Bytes(f), LpValue::Bytes(v));
                }
                end as u64
            }
        }
    }

    /// The hash whose field, value pairs `lp` holds (a listpack loaded from a file): kept
    /// as it is while within the listpack limits, converted to a table past them.
    pub fn from_listpack(lp: Listpack) -> Result<Hash, InvalidHash> {
        Hash::from_listpack_checking(lp, false)
    }

    /// As `from_listpack`; `check_lengths`: a field or value longer than
    /// `hash-max-listpack-value` converts it too. Redis 7.0 checks only the count when it
    /// loads a listpack or ziplist (a length scan is O(N)), but both when it converts a
    /// zipmap.
    pub fn from_listpack_checking(lp: Listpack, check_lengths: bool) -> Result<Hash, InvalidHash> {
        if !lp.len().is_multiple_of(2) {
            return Err(InvalidHash::OddEntryCount);
        }
        let mut hash = Hash::Listpack(lp);
        let mut seen = std::collections::HashSet::new();
        let mut longest = 0;
        for (field, value) in hash.iter() {
            longest = longest
                .max(field.to_bytes().len())
                .max(value.to_bytes().len());
            if !seen.insert(field.to_bytes()) {
                return Err(InvalidHash::DuplicateField);
            }
        }
        if hash.len() as i64 > limits::hash_max_listpack_entries()
            || (check_lengths && longest as i64 > limits::hash_max_listpack_value())
        {
            hash.convert();
        }
        Ok(hash)
    }

    /// An empty hash in the encoding `count` fields will need: a table from the start when
    /// they are too many for a listpack, so that loading does not build a listpack only
    /// to convert it. Nothing is reserved: the count may come from a damaged file.
    pub fn for_field_count(count: u64) -> Hash {
        let mut hash = Hash::default();
        if i64::try_from(count).unwrap_or(i64::MAX) > limits::hash_max_listpack_entries() {
            hash.convert();
        }
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_past_the_limits_and_keeps_every_pair() {
        let mut hash = Hash::default();
        for i in 0..600 {
            assert!(hash.set(format!("f{i}").as_bytes(), format!("{i}").as_bytes()));
            let expected = if i < 512 { "listpack" } else { "hashtable" };
            assert_eq!(hash.encoding(), expected, "after {} fields", i + 1);
        }
        assert!(!hash.set(b"f7", b"seven"));
        assert_eq!(hash.get(b"f7"), Some(LpValue::Bytes(b"seven")));
        assert!(hash.remove(b"f7") && !hash.remove(b"f7"));
        assert_eq!(hash.len(), 599);

        let mut long = Hash::default();
        long.set(b"a", b"1");
        long.set(b"b", &[b'x'; 65]);
        assert_eq!(long.encoding(), "hashtable");
        assert_eq!(long.get(b"a"), Some(LpValue::Bytes(b"1")));
    }

    #[test]
    fn a_table_scan_sees_every_element_despite_removals() {
        let mut hash = Hash::default();
        for i in 0..1000 {
            hash.set(format!("f{i}").as_bytes(), b"v");
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut removed = 0;
        loop {
            let mut batch = Vec::new();
            cursor = hash.scan(cursor, 10, |f, _| batch.push(f.to_bytes()));
            seen.extend(batch);
            // Remove something the scan has already returned.
            if removed < 300 {
                let victim = format!("f{}", removed * 3);
                if seen.contains(victim.as_bytes()) && hash.remove(victim.as_bytes()) {
                    removed += 1;
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for (field, _) in hash.iter() {
            assert!(seen.contains(&field.to_bytes()), "{field:?} missed");
        }
    }
}
