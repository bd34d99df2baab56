//! Redis's intset: a sorted array of distinct integers, all stored at the width of the
//! widest (2, 4 or 8 bytes, little-endian), in one exactly-sized allocation that is
//! byte-for-byte Redis's format (4-byte encoding, 4-byte length, the integers), so RDB
//! type 11 blobs are validated and kept as they are.

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

const HEADER: usize = 8;

fn width_for(value: i64) -> usize {
    if i16::try_from(value).is_ok() {
        2
    } else if i32::try_from(value).is_ok() {
        4
    } else {
        8
    }
}

impl Intset {
    pub fn new() -> Intset {
        let mut bytes = Vec::with_capacity(HEADER);
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(&0u32.to_le_bytes());
        Intset {
            bytes: bytes.into_boxed_slice(),
        }
    }

    /// Validates a serialized intset (encoding, length against the buffer, strictly
    /// increasing members) and keeps its bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Intset, InvalidIntset> {
        if bytes.len() < HEADER {
            return Err(InvalidIntset("shorter than a header"));
        }
        let width = u32::from_le_bytes(bytes[0..4].try_into().expect("4")) as usize;
        if ![2, 4, 8].contains(&width) {
            return Err(InvalidIntset("unknown encoding"));
        }
        let len = u32::from_le_bytes(bytes[4..8].try_into().expect("4")) as usize;
        if len.checked_mul(width) != Some(bytes.len() - HEADER) {
            return Err(InvalidIntset("length does not match the size"));
        }
        let set = Intset {
            bytes: bytes.into(),
        };
        if !set.iter().zip(set.iter().skip(1)).all(|(a, b)| a < b) {
            return Err(InvalidIntset("members not strictly increasing"));
        }
        Ok(set)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn width(&self) -> usize {
        u32::from_le_bytes(self.bytes[0..4].try_into().expect("4")) as usize
    }

    pub fn len(&self) -> usize {
        u32::from_le_bytes(self.bytes[4..8].try_into().expect("4")) as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The member at `index` in ascending order.
    pub fn get(&self, index: usize) -> Option<i64> {
        if index >= self.len() {
            return None;
        }
        let width = self.width();
        let at = HEADER + index * width;
        let raw = &self.bytes[at..at + width];
        Some(match width {
            2 => i16::from_le_bytes(raw.try_into().expect("2")) as i64,
            4 => i32::from_le_bytes(raw.try_into().expect("4")) as i64,
            _ => i64::from_le_bytes(raw.try_into().expect("8")),
        })
    }

    fn search(&self, value: i64) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).expect("in range").cmp(&value) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    pub fn contains(&self, value: i64) -> bool {
        width_for(value) <= self.width() && self.search(value).is_ok()
    }

    fn rebuild(width: usize, members: impl ExactSizeIterator<Item = i64>) -> Box<[u8]> {
        let mut bytes = Vec::with_capacity(HEADER + members.len() * width);
        bytes.extend_from_slice(&(width as u32).to_le_bytes());
        bytes.extend_from_slice(&(members.len() as u32).to_le_bytes());
        for member in members {
            bytes.extend_from_slice(&member.to_le_bytes()[..width]);
        }
        bytes.into_boxed_slice()
    }

    /// Inserts `value` (widening the encoding if needed); false if it was present.
    pub fn insert(&mut self, value: i64) -> bool {
        let width = self.width().max(width_for(value));
        let at = if width_for(value) > self.width() {
            // Wider than every member: it goes first (negative) or last.
            if value < 0 { 0 } else { self.len() }
        } else {
            match self.search(value) {
                Ok(_) => return false,
                Err(at) => at,
            }
        };
        let members: Vec<i64> = self.iter().collect();
        let merged = members[..at]
            .iter()
            .copied()
            .chain(std::iter::once(value))
            .chain(members[at..].iter().copied())
            .collect::<Vec<_>>();
        self.bytes = Self::rebuild(width, merged.into_iter());
        true
    }

    /// Removes `value`; false if it was absent. (Like Redis, never narrows the encoding.)
    pub fn remove(&mut self, value: i64) -> bool {
        if width_for(value) > self.width() {
            return false;
        }
        let Ok(at) = self.search(value) else {
            return false;
        };
        let width = self.width();
        let start = HEADER + at * width;
        let mut bytes = Vec::with_capacity(self.bytes.len() - width);
        bytes.extend_from_slice(&self.bytes[..start]);
        bytes.extend_from_slice(&self.bytes[start + width..]);
        bytes[4..8].copy_from_slice(&((self.len() - 1) as u32).to_le_bytes());
        self.bytes = bytes.into_boxed_slice();
        true
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = i64> + ExactSizeIterator + '_ {
        (0..self.len()).map(|i| self.get(i).expect("in range"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_bytes_and_widens() {
        // DUMP of `SADD s 1 2 -3` in Redis 7.0.15: encoding 2, three members.
        let mut set = Intset::new();
        for v in [2, 1, -3, 2] {
            set.insert(v);
        }
        assert_eq!(
            set.as_bytes(),
            &[2, 0, 0, 0, 3, 0, 0, 0, 0xFD, 0xFF, 1, 0, 2, 0][..]
        );
        assert!(set.insert(70000));
        assert_eq!(set.as_bytes()[0], 4);
        assert!(set.insert(-5_000_000_000));
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [-5_000_000_000, -3, 1, 2, 70000]
        );
        assert!(set.contains(70000) && !set.contains(3));
        assert!(set.remove(-3) && !set.remove(-3));
        assert_eq!(set.len(), 4);
        assert_eq!(Intset::from_bytes(set.as_bytes()).unwrap(), set);
    }

    #[test]
    fn damaged_input_is_rejected() {
        let mut set = Intset::new();
        for v in [5, 10, 15] {
            set.insert(v);
        }
        let good = set.as_bytes().to_vec();
        for cut in 0..good.len() {
            assert!(Intset::from_bytes(&good[..cut]).is_err());
        }
        let mut unsorted = good.clone();
        unsorted.swap(8, 10);
        assert!(Intset::from_bytes(&unsorted).is_err());
        let mut bad_width = good;
        bad_width[0] = 3;
        assert!(Intset::from_bytes(&bad_width).is_err());
    }
}
