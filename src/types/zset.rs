//! Sorted sets: a listpack of member, score pairs ordered by (score, member) while small
//! (`zset-max-listpack-entries` / `-value`), past that a map from member to score plus an
//! ordered tree of (score, member) — Redis's skiplist in spirit (never converted back).
//!
//! Scores are doubles, never NaN; ties order by member bytes. `-0` equals `0` in the
//! order, as in Redis's comparisons, and keeps its sign in output.
//!
//! Known shortfall: rank queries on the tree walk it (O(n)); Redis's skiplist spans make
//! them O(log n). Correct, and cheap at the sizes the listpack covers.

use super::limits;
use super::listpack::{Listpack, LpValue};
use super::memory;
use super::score;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// A score with the total order Redis uses (no NaN is ever stored).
#[derive(Clone, Copy, Debug)]
pub struct Score(pub f64);

impl PartialEq for Score {
    fn eq(&self, other: &Score) -> bool {
        self.0 == other.0
    }
}
impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Score) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Score) -> std::cmp::Ordering {
        self.0.partial_cmp(&other.0).expect("scores are never NaN")
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tree {
    scores: hashbrown::HashMap<Box<[u8]>, f64>,
    order: BTreeSet<(Score, Box<[u8]>)>,
}

impl Tree {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// The bytes the tree takes from the allocator (MEMORY USAGE; see `ZSet::memory_usage`).
    fn memory_usage(&self, samples: usize) -> usize {
        let scores = memory::allocation(self.scores.allocation_size());
        // The ordered set's nodes are std's B-tree, whose layout is private: a leaf holds
        // up to 11 (score, member) pairs behind a parent pointer and two counters, an
        // inner node 12 child pointers more; counted at 8 pairs a leaf (its fill after
        // random inserts) and an inner node per 7 leaves.
        let pair = size_of::<(Score, Box<[u8]>)>();
        let leaf = memory::allocation(8 + 2 + 2 + 11 * pair);
        let inner = memory::allocation(8 + 2 + 2 + 11 * pair + 12 * size_of::<usize>());
        let leaves = self.len().div_ceil(8);
        let inners = if leaves > 1 { leaves.div_ceil(7) } else { 0 };
        let order = leaves * leaf + inners * inner;
        // Each member is boxed twice: as the map's key and in the ordered set.
        let members = memory::sampled(self.scores.keys(), self.len(), samples, |m| {
            2 * memory::allocation(m.len())
        });
        memory::boxed::<Tree>() + scores + order + members
    }

    /// Members and scores in ascending (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> + '_ {
        self.order
            .iter()
            .map(|(score, member)| (&**member, score.0))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ZSet {
    Listpack(Listpack),
    Tree(Box<Tree>),
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::Listpack(Listpack::new())
    }
}

/// One element as read back.
pub type Element<'a> = (Cow<'a, [u8]>, f64);

fn lp_score(value: LpValue) -> f64 {
    match value {
        LpValue::Int(n) => n as f64,
        // What a listpack holds is d2string's "%.17g" (or inf / -inf), which Rust's
        // correctly rounded parser reads back to the same double, without the C call.
        LpValue::Bytes(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|t| t.parse().ok())
            .or_else(|| score::parse(b))
            .expect("listpack scores are valid"),
    }
}

fn lp_member(value: LpValue<'_>) -> Cow<'_, [u8]> {
    match value {
        LpValue::Int(n) => Cow::Owned(itoa::Buffer::new().format(n).as_bytes().to_vec()),
        LpValue::Bytes(b) => Cow::Borrowed(b),
    }
}

fn in_order(a: (&[u8], f64), b: (&[u8], f64)) -> bool {
    (Score(a.1), a.0) < (Score(b.1), b.0)
}

impl ZSet {
    pub fn len(&self) -> usize {
        match self {
            ZSet::Listpack(lp) => lp.len() / 2,
            ZSet::Tree(t) => t.scores.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Listpack(_) => "listpack",
            ZSet::Tree(_) => "skiplist",
        }
    }

    /// Heap bytes held, approximately (capture accounting, MEMORY USAGE).
    pub fn approx_bytes(&self) -> usize {
        match self {
            ZSet::Listpack(lp) => lp.byte_len(),
            ZSet::Tree(t) => t.scores.keys().map(|m| 2 * m.len() + 96).sum(),
        }
    }

    /// The bytes the sorted set takes from the allocator (MEMORY USAGE): its listpack, or
    /// its tree (the member → score map, the ordered set, the members' own allocations,
    /// measured on the first `samples` members and scaled to all).
    pub fn memory_usage(&self, samples: usize) -> usize {
        match self {
            ZSet::Listpack(lp) => memory::allocation(lp.byte_len()),
            ZSet::Tree(t) => t.memory_usage(samples),
        }
    }

    /// Elements in ascending (score, member) order.
    pub fn iter(&self) -> Box<dyn DoubleEndedIterator<Item = Element<'_>> + '_> {
        match self {
            ZSet::Listpack(lp) => {
                let mut items = lp.iter();
                let mut pairs = Vec::with_capacity(lp.len() / 2);
                while let (Some(m), Some(s)) = (items.next(), items.next()) {
                    pairs.push((lp_member(m), lp_score(s)));
                }
                Box::new(pairs.into_iter())
            }
            ZSet::Tree(t) => Box::new(t.order.iter().map(|(s, m)| (Cow::Borrowed(&**m), s.0))),
        }
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Listpack(lp) => {
                let pos = lp.find(member, 1)?;
                Some(lp_score(lp.get(lp.next(pos)?)))
            }
            ZSet::Tree(t) => t.scores.get(member).copied(),
        }
    }

    /// The 0-based ascending rank of `member`.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let score = self.score(member)?;
        Some(
            self.iter()
                .take_while(|(m, s)| in_order((m, *s), (member, score)))
                .count(),
        )
    }

    /// Converts a listpack to the tree form (a tree stays as it is): past a threshold, and
    /// whenever SORT reads a sorted set, as Redis's SORT converts it to a skiplist.
    pub fn convert(&mut self) {
        let tree = match self {
            ZSet::Listpack(_) => {
                let mut tree = Tree::default();
                for (member, score) in self.iter() {
                    let member: Box<[u8]> = member.into_owned().into();
                    tree.order.insert((Score(score), member.clone()));
                    tree.scores.insert(member, score);
                }
                tree
            }
            ZSet::Tree(_) => return,
        };
        *self = ZSet::Tree(Box::new(tree));
    }

    /// Sets `member`'s score; returns the previous one.
    pub fn insert(&mut self, member: &[u8], new_score: f64) -> Option<f64> {
        debug_assert!(!new_score.is_nan(), "NaN scores are rejected before");
        if matches!(self, ZSet::Listpack(_))
            && (member.len() as i64 > limits::zset_max_listpack_value()
                || self.len() as i64 + 1 > limits::zset_max_listpack_entries())
            && self.score(member).is_none()
        {
            self.convert();
        }
        match self {
            ZSet::Listpack(lp) => {
                // Walk the pairs without copying them: drop the member's old pair, then
                // insert the new one before the first pair that sorts after it.
                let previous = lp.find(member, 1).map(|pos| {
                    let old = lp_score(lp.get(lp.next(pos).expect("a score follows")));
                    lp.delete_range(pos, 2);
                    old
                });
                let mut at = lp.first();
                while let Some(pos) = at {
                    let score_pos = lp.next(pos).expect("a score follows");
                    let (m, s) = (lp.get(pos), lp_score(lp.get(score_pos)));
                    let after = match Score(new_score).cmp(&Score(s)) {
                        std::cmp::Ordering::Less => true,
                        std::cmp::Ordering::Greater => false,
                        std::cmp::Ordering::Equal => m.cmp_bytes(member).is_gt(),
                    };
                    if after {
                        break;
                    }
                    at = lp.next(score_pos);
                }
                let text = score::listpack_text(new_score);
                match at {
                    Some(pos) => {
                        let inserted = lp.insert_before(pos, member);
                        lp.insert_after(inserted, text.as_bytes());
                    }
                    None => lp.extend([member, text.as_bytes()]),
                }
                previous
            }
            ZSet::Tree(t) => {
                let previous = t.scores.insert(member.into(), new_score);
                if let Some(old) = previous {
                    t.order.remove(&(Score(old), Box::from(member)));
                }
                t.order.insert((Score(new_score), member.into()));
                previous
            }
        }
    }

    /// Removes `member`; true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            ZSet::Listpack(lp) => match lp.find(member, 1) {
                Some(pos) => {
                    lp.delete_range(pos, 2);
                    true
                }
                None => false,
            },
            ZSet::Tree(t) => match t.scores.remove(member) {
                Some(old) => {
                    t.order.remove(&(Score(old), Box::from(member)));
                    true
                }
                None => false,
            },
        }
    }

    /// Elements with a score of at least `min`, in ascending order (geo searches).
    pub fn iter_from(&self, min: f64) -> Box<dyn Iterator<Item = Element<'_>> + '_> {
        match self {
            ZSet::Listpack(_) => Box::new(self.iter().skip_while(move |(_, s)| *s < min)),
            ZSet::Tree(t) => {
                let start = (Score(min), Box::<[u8]>::default());
                Box::new(
                    t.order
                        .range(start..)
                        .map(|(s, m)| (Cow::Borrowed(&**m), s.0)),
                )
            }
        }
    }

    /// The element at ascending index `index` (random picks).
    pub fn get_index(&self, index: usize) -> Option<Element<'_>> {
        self.iter().nth(index)
    }

    /// Builds a sorted set from elements (later duplicates win), converting as needed.
    pub fn from_elements(elements: impl IntoIterator<Item = (Vec<u8>, f64)>) -> ZSet {
        let mut zset = ZSet::default();
        for (member, score) in elements {
            zset.insert(&member, score);
        }
        zset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(z: &ZSet) -> Vec<(String, f64)> {
        z.iter()
            .map(|(m, s)| (String::from_utf8_lossy(&m).into_owned(), s))
            .collect()
    }

    #[test]
    fn both_encodings_keep_the_same_order() {
        let mut small = ZSet::default();
        let mut big = ZSet::default();
        big.convert();
        for (m, s) in [
            ("b", 1.0),
            ("a", 1.0),
            ("c", -0.5),
            ("d", 2.5),
            ("a", 3.0),
            ("z", 0.0),
        ] {
            small.insert(m.as_bytes(), s);
            big.insert(m.as_bytes(), s);
        }
        assert_eq!(small.encoding(), "listpack");
        assert_eq!(big.encoding(), "skiplist");
        assert_eq!(members(&small), members(&big));
        assert_eq!(
            members(&small),
            [("c", -0.5), ("z", 0.0), ("b", 1.0), ("d", 2.5), ("a", 3.0)]
                .map(|(m, s)| (m.to_string(), s))
        );
        assert_eq!(small.rank(b"d"), Some(3));
        assert_eq!(big.rank(b"d"), Some(3));
        assert!(small.remove(b"z") && big.remove(b"z"));
        assert_eq!(members(&small), members(&big));
    }

    #[test]
    fn converts_past_128_members_or_a_long_member() {
        let mut z = ZSet::default();
        for i in 0..128 {
            z.insert(format!("m{i}").as_bytes(), i as f64);
        }
        assert_eq!(z.encoding(), "listpack");
        z.insert(b"one more", 0.5);
        assert_eq!(z.encoding(), "skiplist");
        let mut long = ZSet::default();
        long.insert(&[b'x'; 65], 1.0);
        assert_eq!(long.encoding(), "skiplist");
    }
}
