//! Sets: an intset while every member is an integer and there are at most
//! `set-max-intset-entries` of them, an insertion-ordered table otherwise (never
//! converted back). Redis 7.0 has no listpack sets (that arrived in 7.2).
//!
//! The table is an `IndexSet` for O(1) random picks (SPOP, SRANDMEMBER) and a
//! position cursor for SSCAN that counts down, as for hashes.

use super::intset::Intset;
use super::limits;
use super::memory;
use indexmap::IndexSet;
use std::borrow::Cow;

type Table = IndexSet<Box<[u8]>, foldhash::fast::RandomState>;

#[derive(Clone, Debug, PartialEq)]
pub enum Set {
    Intset(Intset),
    Table(Box<Table>),
}

impl Default for Set {
    fn default() -> Self {
        Set::Intset(Intset::new())
    }
}

fn int_text<'a>(n: i64) -> Cow<'a, [u8]> {
    Cow::Owned(itoa::Buffer::new().format(n).as_bytes().to_vec())
}

impl Set {
    pub fn len(&self) -> usize {
        match self {
            Set::Intset(s) => s.len(),
            Set::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        match self {
            Set::Intset(_) => "intset",
            Set::Table(_) => "hashtable",
        }
    }

    /// Heap bytes held, approximately (capture accounting, MEMORY USAGE).
    pub fn approx_bytes(&self) -> usize {
        match self {
            Set::Intset(s) => s.as_bytes().len(),
            Set::Table(t) => t.iter().map(|m| m.len() + 40).sum(),
        }
    }

    /// The bytes the set takes from the allocator (MEMORY USAGE): its intset, or its
    /// table (entries, index) and the members' own allocations, measured on the first
    /// `samples` members and scaled to all.
    pub fn memory_usage(&self, samples: usize) -> usize {
        match self {
            Set::Intset(s) => memory::allocation(s.as_bytes().len()),
            Set::Table(t) => {
                // An entry is the element's hash and the boxed slice.
                let entry_bytes = size_of::<(usize, Box<[u8]>)>();
                let structure = memory::boxed::<Table>()
                    + memory::allocation(t.capacity() * entry_bytes)
                    + memory::hash_table(t.capacity(), size_of::<usize>());
                let members =
                    memory::sampled(t.iter(), t.len(), samples, |m| memory::allocation(m.len()));
                structure + members
            }
        }
    }

    fn convert(&mut self) {
        let table = match self {
            Set::Intset(s) => {
                let mut table = Table::with_capacity_and_hasher(s.len(), Default::default());
                table.extend(
                    s.iter()
                        .map(|n| int_text(n).into_owned().into_boxed_slice()),
                );
                table
            }
            Set::Table(_) => return,
        };
        *self = Set::Table(Box::new(table));
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        match self {
            Set::Intset(s) => super::number::parse_i64(member).is_some_and(|n| s.contains(n)),
            Set::Table(t) => t.contains(member),
        }
    }

    /// Adds `member`; true if it is new.
    pub fn insert(&mut self, member: &[u8]) -> bool {
        if let Set::Intset(s) = self {
            match super::number::parse_i64(member) {
                Some(n) => {
                    if !s.insert(n) {
                        return false;
                    }
                    if s.len() as i64 > limits::set_max_intset_entries() {
                        self.convert();
                    }
                    return true;
                }
                None => self.convert(),
            }
        }
        match self {
            Set::Table(t) => t.insert(member.into()),
            Set::Intset(_) => unreachable!("converted above"),
        }
    }

    /// Removes `member`; true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            Set::Intset(s) => super::number::parse_i64(member).is_some_and(|n| s.remove(n)),
            Set::Table(t) => t.swap_remove(member),
        }
    }

    /// The member at `index` in the set's order (random picks).
    pub fn get_index(&self, index: usize) -> Option<Cow<'_, [u8]>> {
        match self {
            Set::Intset(s) => s.get(index).map(int_text),
            Set::Table(t) => t.get_index(index).map(|m| Cow::Borrowed(&**m)),
        }
    }

    /// Members in the set's order (ascending for an intset).
    pub fn iter(&self) -> Box<dyn Iterator<Item = Cow<'_, [u8]>> + '_> {
        match self {
            Set::Intset(s) => Box::new(s.iter().map(int_text)),
            Set::Table(t) => Box::new(t.iter().map(|m| Cow::Borrowed(&**m))),
        }
    }

    /// One SSCAN step from `cursor` (0 when done); an intset is returned whole, as in
    /// Redis.
    pub fn scan(&self, cursor: u64, count: usize, mut visit: impl FnMut(Cow<[u8]>)) -> u64 {
        match self {
            Set::Intset(_) => {
                self.iter().for_each(visit);
                0
            }
            Set::Table(t) => {
                let (start, end) = super::scan_window(cursor, t.len(), count);
                for index in (end..start).rev() {
                    visit(Cow::Borrowed(&t[index]));
                }
                end as u64
            }
        }
    }

    /// The set of `intset`'s members (an intset loaded from a file): kept as it is while
    /// within `set-max-intset-entries`, converted to a table past it.
    pub fn from_intset(intset: Intset) -> Set {
        let mut set = Set::Intset(intset);
        if set.len() as i64 > limits::set_max_intset_entries() {
            set.convert();
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_stay_in_an_intset_until_a_limit_or_a_string() {
        let mut set = Set::default();
        for i in 0..512 {
            assert!(set.insert(i.to_string().as_bytes()));
        }
        assert_eq!(set.encoding(), "intset");
        assert!(!set.insert(b"7"));
        assert!(set.insert(b"512"));
        assert_eq!(set.encoding(), "hashtable");
        assert!(set.contains(b"7") && set.contains(b"512"));

        let mut mixed = Set::default();
        mixed.insert(b"1");
        mixed.insert(b"01"); // not canonical: a string
        assert_eq!(mixed.encoding(), "hashtable");
        assert!(mixed.contains(b"1") && mixed.contains(b"01") && !mixed.contains(b"+1"));
        assert!(mixed.remove(b"1") && !mixed.remove(b"1"));
        assert_eq!(mixed.len(), 1);
    }
}
