//! Redis's intset: a sorted array of distinct integers, all stored at the width of the
//! widest (2, 4 or 8 bytes, little-endian), in one exactly-sized allocation that is
//! byte-for-byte Redis's format (4-byte encoding, 4-byte length, the integers), so RDB
//! type 11 blobs are validated and kept as they are.
//!
//! API (placeholder bodies: the implementation arrives with its tests).

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidIntset(pub &'static str);

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Intset {
    bytes: Box<[u8]>,
}

impl Default for Intset {
    fn default() -> Self {
        Intset::new()
    }
}

impl Intset {
    pub fn new() -> Intset {
        todo!()
    }
    /// Validates a serialized intset (encoding, length against the buffer, strictly
    /// increasing members) and keeps its bytes.
    pub fn from_bytes(_bytes: &[u8]) -> Result<Intset, InvalidIntset> {
        todo!()
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
    pub fn len(&self) -> usize {
        todo!()
    }
    pub fn is_empty(&self) -> bool {
        todo!()
    }
    pub fn contains(&self, _value: i64) -> bool {
        todo!()
    }
    /// Inserts `value` (widening the encoding if needed); false if it was present.
    pub fn insert(&mut self, _value: i64) -> bool {
        todo!()
    }
    /// Removes `value`; false if it was absent. (Like Redis, never narrows the encoding.)
    pub fn remove(&mut self, _value: i64) -> bool {
        todo!()
    }
    /// The member at `index` in ascending order.
    pub fn get(&self, _index: usize) -> Option<i64> {
        todo!()
    }
    /// Members in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = i64> + '_ {
        std::iter::empty()
    }
}
