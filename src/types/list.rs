//! Lists: a quicklist, as Redis 7.0 keeps every list: a deque of listpack nodes, each
//! bounded by `list-max-listpack-size` (entries when positive, 4..64 KB when -1..-5).
//!
//! Nodes are never empty and a node over its limit is split; after bulk removals
//! (LREM, LTRIM) neighbours that fit together are merged. Exact node boundaries need not
//! match Redis's: only the elements are observable (and the RDB stays loadable by Redis).

use super::limits;
use super::listpack::{Listpack, LpValue, Pos};
use super::memory;
use std::collections::VecDeque;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// Redis caps count-limited nodes at this many bytes too (SIZE_SAFETY_LIMIT).
const SIZE_SAFETY_LIMIT: usize = 8192;

#[derive(Clone, Debug, Default)]
pub struct List {
    nodes: VecDeque<Listpack>,
    len: usize,
}

/// Equal elements make equal lists, however they are split into nodes.
impl PartialEq for List {
    fn eq(&self, other: &List) -> bool {
        self.len == other.len
            && self
                .iter()
                .zip(other.iter())
                .all(|(a, b)| a.to_bytes() == b.to_bytes())
    }
}

/// The node limit now in force: (most entries, most bytes).
fn node_limit() -> (usize, usize) {
    match limits::list_max_listpack_size() {
        n if n > 0 => (n as usize, SIZE_SAFETY_LIMIT),
        n => {
            let shift = (-n).clamp(1, 5) as u32 - 1;
            (usize::MAX, 4096 << shift)
        }
    }
}

/// Whether `node` may take `value` as one more entry (an empty node takes anything).
fn fits(node: &Listpack, value: &[u8]) -> bool {
    if node.is_empty() {
        return true;
    }
    let (entries, bytes) = node_limit();
    node.len() < entries && node.byte_len() + Listpack::entry_size(value) <= bytes
}

fn over_limit(node: &Listpack) -> bool {
    let (entries, bytes) = node_limit();
    node.len() > 1 && (node.len() > entries || node.byte_len() > bytes)
}

impl List {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// OBJECT ENCODING's answer: Redis 7.0 has one encoding for every list.
    pub fn encoding(&self) -> &'static str {
        "quicklist"
    }
    /// Heap bytes held, approximately (capture accounting, MEMORY USAGE).
    pub fn approx_bytes(&self) -> usize {
        self.nodes.iter().map(|n| n.byte_len() + 32).sum()
    }

    /// The bytes the list takes from the allocator (MEMORY USAGE): its deque of nodes,
    /// and its listpack nodes, measured on the first `samples` nodes and scaled to all
    /// (Redis samples a quicklist's nodes the same way).
    pub fn memory_usage(&self, samples: usize) -> usize {
        let deque = memory::allocation(self.nodes.capacity() * size_of::<Listpack>());
        let nodes = memory::sampled(self.nodes.iter(), self.nodes.len(), samples, |node| {
            memory::allocation(node.byte_len())
        });
        deque + nodes
    }

    pub fn push(&mut self, end: End, value: &[u8]) {
        match end {
            End::Left => match self.nodes.front_mut() {
                Some(node) if fits(node, value) => node.push_front(value),
                _ => self.nodes.push_front(std::iter::once(value).collect()),
            },
            End::Right => match self.nodes.back_mut() {
                Some(node) if fits(node, value) => node.push_back(value),
                _ => self.nodes.push_back(std::iter::once(value).collect()),
            },
        }
        self.len += 1;
    }

    pub fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let (node, pos) = match end {
            End::Left => {
                let node = self.nodes.front_mut()?;
                let pos = node.first()?;
                (node, pos)
            }
            End::Right => {
                let node = self.nodes.back_mut()?;
                let pos = node.last()?;
                (node, pos)
            }
        };
        let value = node.get(pos).to_bytes();
        node.delete(pos);
        if node.is_empty() {
            match end {
                End::Left => self.nodes.pop_front(),
                End::Right => self.nodes.pop_back(),
            };
        }
        self.len -= 1;
        Some(value)
    }

    /// Normalizes a Redis index (negative from the end) to a position, if in range.
    pub fn normalize(&self, index: i64) -> Option<usize> {
        let index = if index < 0 {
            index.checked_add(self.len as i64)?
        } else {
            index
        };
        (index >= 0 && (index as usize) < self.len).then_some(index as usize)
    }

    /// (node, offset in node) of element `index` (< len).
    fn locate(&self, index: usize) -> (usize, usize) {
        assert!(index < self.len);
        if index >= self.len / 2 {
            let mut from_end = self.len - index;
            for (i, node) in self.nodes.iter().enumerate().rev() {
                let n = node.len();
                if from_end <= n {
                    return (i, n - from_end);
                }
                from_end -= n;
            }
        } else {
            let mut rest = index;
            for (i, node) in self.nodes.iter().enumerate() {
                let n = node.len();
                if rest < n {
                    return (i, rest);
                }
                rest -= n;
            }
        }
        unreachable!("the node lengths add up to len")
    }

    pub fn get(&self, index: i64) -> Option<LpValue<'_>> {
        let (node, offset) = self.locate(self.normalize(index)?);
        let lp = &self.nodes[node];
        Some(lp.get(lp.seek(offset as i64).expect("offset in node")))
    }

    /// Replaces element `index`; false if out of range.
    pub fn set(&mut self, index: i64, value: &[u8]) -> bool {
        let Some(index) = self.normalize(index) else {
            return false;
        };
        let (node, offset) = self.locate(index);
        let lp = &mut self.nodes[node];
        let pos = lp.seek(offset as i64).expect("offset in node");
        lp.replace(pos, value);
        self.split_if_over(node);
        true
    }

    /// Splits node `at` into nodes within the limit (after it grew in place).
    fn split_if_over(&mut self, at: usize) {
        if !over_limit(&self.nodes[at]) {
            return;
        }
        let node = self.nodes.remove(at).expect("node exists");
        let mut pieces: Vec<Listpack> = vec![Listpack::new()];
        for value in node.iter() {
            let bytes = value.to_bytes();
            let last = pieces.last_mut().expect("never empty");
            if fits(last, &bytes) {
                last.push_back(&bytes);
            } else {
                pieces.push(std::iter::once(&bytes[..]).collect());
            }
        }
        for (i, piece) in pieces.into_iter().enumerate() {
            self.nodes.insert(at + i, piece);
        }
    }

    /// Drops empty nodes and merges neighbours that fit in one node (after removals).
    fn compact(&mut self) {
        self.nodes.retain(|n| !n.is_empty());
        let mut i = 0;
        while i + 1 < self.nodes.len() {
            let before = self.nodes.len();
            self.merge_with_next(i);
            if self.nodes.len() == before {
                i += 1;
            }
        }
    }

    /// Merges node `at` with the next one if both fit in one node.
    fn merge_with_next(&mut self, at: usize) {
        let (entries, bytes) = node_limit();
        let (Some(a), Some(b)) = (self.nodes.get(at), self.nodes.get(at + 1)) else {
            return;
        };
        if a.len() + b.len() <= entries && a.byte_len() + b.byte_len() <= bytes {
            let b = self.nodes.remove(at + 1).expect("exists");
            let a = &mut self.nodes[at];
            for value in b.iter() {
                a.push_back(&value.to_bytes());
            }
        }
    }

    /// Inserts `value` before or after the first element equal to `pivot`; false if
    /// there is none.
    pub fn insert(&mut self, pivot: &[u8], value: &[u8], after: bool) -> bool {
        for i in 0..self.nodes.len() {
            let lp = &mut self.nodes[i];
            if let Some(pos) = lp.find(pivot, 0) {
                if after {
                    lp.insert_after(pos, value);
                } else {
                    lp.insert_before(pos, value);
                }
                self.len += 1;
                self.split_if_over(i);
                return true;
            }
        }
        false
    }

    /// Removes up to `count` elements equal to `value` (0: all), from the head when
    /// `count >= 0`, from the tail otherwise; returns how many went.
    pub fn remove(&mut self, value: &[u8], count: i64) -> usize {
        let limit = if count == 0 {
            usize::MAX
        } else {
            count.unsigned_abs().min(usize::MAX as u64) as usize
        };
        let mut removed = 0;
        if count >= 0 {
            'nodes: for lp in self.nodes.iter_mut() {
                let mut pos = lp.first();
                while let Some(p) = pos {
                    if lp.get(p).eq_bytes(value) {
                        pos = lp.delete(p);
                        removed += 1;
                        if removed == limit {
                            break 'nodes;
                        }
                    } else {
                        pos = lp.next(p);
                    }
                }
            }
        } else {
            'back: for lp in self.nodes.iter_mut().rev() {
                let mut pos = lp.last();
                while let Some(p) = pos {
                    let prev = lp.prev(p);
                    if lp.get(p).eq_bytes(value) {
                        lp.delete(p);
                        removed += 1;
                        if removed == limit {
                            break 'back;
                        }
                    }
                    pos = prev;
                }
            }
        }
        self.len -= removed;
        if removed > 0 {
            self.compact();
        }
        removed
    }

    /// Removes `n` elements from `end` (all if fewer).
    pub fn drop_from(&mut self, end: End, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let node = match end {
                End::Left => self.nodes.front_mut(),
                End::Right => self.nodes.back_mut(),
            }
            .expect("elements remain");
            let size = node.len();
            if size <= n {
                n -= size;
                match end {
                    End::Left => self.nodes.pop_front(),
                    End::Right => self.nodes.pop_back(),
                };
            } else {
                let start = match end {
                    End::Left => 0,
                    End::Right => (size - n) as i64,
                };
                let pos = node.seek(start).expect("in node");
                node.delete_range(pos, n);
                n = 0;
            }
        }
    }

    /// Keeps elements `start..=stop` (Redis's LTRIM indexes); returns how many went.
    pub fn trim(&mut self, start: i64, stop: i64) -> usize {
        let len = self.len as i64;
        let start = if start < 0 {
            (len + start).max(0)
        } else {
            start
        };
        let stop = if stop < 0 { len + stop } else { stop };
        let (left, right) = if start > stop || start >= len {
            (len, 0)
        } else {
            (start, len - 1 - stop.min(len - 1))
        };
        self.drop_from(End::Left, left as usize);
        self.drop_from(End::Right, right as usize);
        // Only the end nodes changed: merge there (a capped list trims on every push,
        // so no walk over every node here).
        if left > 0 {
            self.merge_with_next(0);
        }
        if right > 0 && self.nodes.len() >= 2 {
            self.merge_with_next(self.nodes.len() - 2);
        }
        (left + right) as usize
    }

    /// Every element, head to tail (reversible).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = LpValue<'_>> + '_ {
        self.nodes.iter().flat_map(|n| n.iter())
    }

    /// Elements from index `start` (< len) on, head to tail.
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = LpValue<'_>> + '_ {
        let (node, offset) = if start < self.len {
            self.locate(start)
        } else {
            (self.nodes.len(), 0)
        };
        let first: Option<(&Listpack, Pos)> = self
            .nodes
            .get(node)
            .map(|lp| (lp, lp.seek(offset as i64).expect("offset in node")));
        first
            .into_iter()
            .flat_map(|(lp, pos)| lp.iter_from(pos))
            .chain(self.nodes.iter().skip(node + 1).flat_map(|n| n.iter()))
    }

    /// LPOS: indexes of elements equal to `value`, skipping the first `|rank| - 1`
    /// matches, scanning from the tail when `rank < 0`, at most `count` of them (0: all),
    /// looking at no more than `maxlen` elements (0: all).
    pub fn positions(&self, value: &[u8], rank: i64, count: usize, maxlen: usize) -> Vec<usize> {
        let mut skip = rank.unsigned_abs().saturating_sub(1);
        let count = if count == 0 { usize::MAX } else { count };
        let maxlen = if maxlen == 0 { usize::MAX } else { maxlen };
        let mut found = Vec::new();
        let mut visit = |index: usize, item: LpValue| {
            if item.eq_bytes(value) {
                if skip > 0 {
                    skip -= 1;
                } else {
                    found.push(index);
                    return found.len() < count;
                }
            }
            true
        };
        if rank >= 0 {
            for (i, item) in self.iter().enumerate().take(maxlen) {
                if !visit(i, item) {
                    break;
                }
            }
        } else {
            for (i, item) in self.iter().rev().enumerate().take(maxlen) {
                if !visit(self.len - 1 - i, item) {
                    break;
                }
            }
        }
        found
    }

    /// The listpack nodes, head to tail (never empty ones).
    pub fn nodes(&self) -> impl ExactSizeIterator<Item = &Listpack> + '_ {
        self.nodes.iter()
    }

    /// Appends `node` whole as the last node, as a file stored it (Redis's own nodes may
    /// be split differently from ours: only the elements are observable). An empty node
    /// is dropped.
    pub fn append_node(&mut self, node: Listpack) {
        if !node.is_empty() {
            self.len += node.len();
            self.nodes.push_back(node);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_check(list: &List, model: &VecDeque<Vec<u8>>) {
        assert_eq!(list.len(), model.len());
        let items: Vec<Vec<u8>> = list.iter().map(|v| v.to_bytes()).collect();
        assert_eq!(items, model.iter().cloned().collect::<Vec<_>>());
        let back: Vec<Vec<u8>> = list.iter().rev().map(|v| v.to_bytes()).collect();
        assert_eq!(back, model.iter().rev().cloned().collect::<Vec<_>>());
        assert!(list.nodes.iter().all(|n| !n.is_empty()));
        assert_eq!(list.nodes.iter().map(|n| n.len()).sum::<usize>(), list.len);
    }

    #[test]
    fn operations_match_a_deque_across_many_nodes() {
        // One test sets the process-wide limit, in turn, so no other test sees it change.
        for size in [3, -1, -2] {
            limits::set_list_max_listpack_size(size);
            model_run();
        }
    }

    fn model_run() {
        let mut list = List::default();
        let mut model = VecDeque::new();
        let mut seed = 12345u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for step in 0..20000 {
            let value = format!("v{}", rand(50))
                .repeat(1 + rand(30) as usize)
                .into_bytes();
            match rand(10) {
                0..=2 => {
                    list.push(End::Left, &value);
                    model.push_front(value);
                }
                3..=5 => {
                    list.push(End::Right, &value);
                    model.push_back(value);
                }
                6 => {
                    assert_eq!(list.pop(End::Left), model.pop_front());
                    assert_eq!(list.pop(End::Right), model.pop_back());
                }
                7 if !model.is_empty() => {
                    let i = rand(model.len() as u64) as usize;
                    assert!(list.set(i as i64, &value));
                    model[i] = value;
                    assert_eq!(list.get(i as i64).unwrap().to_bytes(), model[i]);
                    assert_eq!(
                        list.iter_from(i).map(|v| v.to_bytes()).collect::<Vec<_>>(),
                        model.iter().skip(i).cloned().collect::<Vec<_>>()
                    );
                }
                8 if !model.is_empty() => {
                    let pivot = model[rand(model.len() as u64) as usize].clone();
                    let at = model.iter().position(|v| *v == pivot).unwrap();
                    let after = rand(2) == 0;
                    assert!(list.insert(&pivot, &value, after));
                    model.insert(at + after as usize, value);
                }
                9 if step % 50 == 0 && !model.is_empty() => {
                    let target = model[0].clone();
                    let count = rand(5) as i64 - 2;
                    let removed = list.remove(&target, count);
                    let mut left = if count == 0 {
                        usize::MAX
                    } else {
                        count.unsigned_abs() as usize
                    };
                    let mut gone = 0;
                    let mut kept: Vec<Vec<u8>> = model.iter().cloned().collect();
                    if count < 0 {
                        kept.reverse();
                    }
                    kept.retain(|v| {
                        if left > 0 && *v == target {
                            left -= 1;
                            gone += 1;
                            false
                        } else {
                            true
                        }
                    });
                    if count < 0 {
                        kept.reverse();
                    }
                    assert_eq!(removed, gone);
                    model = kept.into();
                }
                _ => {}
            }
            if step % 97 == 0 {
                model_check(&list, &model);
            }
        }
        model_check(&list, &model);
        assert!(list.nodes.len() > 10);
        let len = model.len() as i64;
        list.trim(3, len - 5);
        let kept: VecDeque<Vec<u8>> = model
            .iter()
            .skip(3)
            .take(len as usize - 7)
            .cloned()
            .collect();
        model_check(&list, &kept);
        list.trim(5, 2);
        assert!(list.is_empty() && list.nodes.is_empty());
    }
}
