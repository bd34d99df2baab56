//! A stream's consumer groups, as Redis 7.0 keeps them: for each group its last delivered
//! ID, its entries-read counter, the pending entries list (PEL: ID → owning consumer,
//! last delivery time, delivery count) and its consumers (name → seen time, the IDs of
//! the PEL they own).
//!
//! Groups and consumers are ordered by name as bytes, the PELs by ID (Redis's radix trees
//! iterate so): XINFO lists them in that order, XPENDING and XAUTOCLAIM walk ID ranges.
//! A PEL entry names its owner, and the owner lists the entry: both sides change together,
//! in every operation here, so the two views never disagree.
//!
//! The entries-read counter and the lag are Redis 7.0's arithmetic over the stream's
//! counters ([`StreamPosition`]): a counter kept exact while no deletion lies ahead of the
//! group, estimated from the stream's first and last IDs otherwise, unknown (`None`,
//! Redis's -1) when neither is possible.
//!
//! Loading (an RDB value, a RESTORE payload) assembles groups through [`GroupBuilder`],
//! which refuses what Redis refuses and what would break the two views: an ID twice in a
//! PEL, a consumer twice, a consumer's ID missing from its group's PEL, an entry claimed
//! by two consumers or by none.

use super::memory;
use super::stream_id::StreamId;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

/// The counters of a stream that the groups' arithmetic reads (Redis's `stream` fields of
/// the same names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamPosition {
    /// Entries in the stream now.
    pub length: u64,
    /// The greatest ID ever added (or set by XSETID).
    pub last_id: StreamId,
    /// The first entry's ID (0-0 when empty).
    pub first_id: StreamId,
    /// The greatest ID ever deleted (0-0 if none).
    pub max_deleted_id: StreamId,
    /// Entries ever added.
    pub entries_added: u64,
}

impl StreamPosition {
    /// `stream`'s counters.
    pub fn of(stream: &super::stream::Stream) -> StreamPosition {
        StreamPosition {
            length: stream.len(),
            last_id: stream.last_id(),
            first_id: stream.recorded_first_id(),
            max_deleted_id: stream.max_deleted_id(),
            entries_added: stream.entries_added(),
        }
    }

    /// Whether a deleted entry may lie at or after `start` (`streamRangeHasTombstones`
    /// with no end): the latest deletion is inside the stream and not before `start`.
    pub fn has_tombstones_from(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id == StreamId::MIN {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// How many entries were added up to and including `id`, counted from the first
    /// entry ever added, when the counters can tell (`streamEstimateDistanceFromFirstEverEntry`):
    /// exactly at the last ID, at or before the first entry of a stream without holes;
    /// `None` between entries past a hole, or in the future.
    pub fn entries_read_at(&self, id: StreamId) -> Option<u64> {
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.length == 0 && id <= self.last_id {
            return Some(self.entries_added);
        }
        if id == self.last_id {
            return Some(self.entries_added);
        }
        if id > self.last_id {
            return None;
        }
        let no_holes = self.max_deleted_id == StreamId::MIN || self.max_deleted_id < self.first_id;
        if no_holes {
            let before_first = self.entries_added.wrapping_sub(self.length);
            if id < self.first_id {
                return Some(before_first);
            }
            if id == self.first_id {
                return Some(before_first.wrapping_add(1));
            }
        }
        None
    }
}

/// How a claim sets an entry's delivery count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryCount {
    /// RETRYCOUNT: this value.
    Set(u64),
    /// One more delivery (a claim without JUSTID).
    Increment,
    /// Unchanged (JUSTID).
    Keep,
}

/// One entry of a group's PEL: delivered, not yet acknowledged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pending {
    owner: Arc<[u8]>,
    delivery_time_ms: i64,
    delivery_count: u64,
}

impl Pending {
    /// The consumer it was last delivered to.
    pub fn owner(&self) -> &[u8] {
        &self.owner
    }

    /// Unix milliseconds of the last delivery.
    pub fn delivery_time_ms(&self) -> i64 {
        self.delivery_time_ms
    }

    pub fn delivery_count(&self) -> u64 {
        self.delivery_count
    }
}

/// A consumer of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Consumer {
    seen_time_ms: i64,
    pending: BTreeSet<StreamId>,
}

impl Consumer {
    /// Unix milliseconds of the consumer's last read or claim (Redis 7.0's `seen-time`).
    pub fn seen_time_ms(&self) -> i64 {
        self.seen_time_ms
    }

    /// The IDs of the group's PEL this consumer owns, in order.
    pub fn pending(&self) -> &BTreeSet<StreamId> {
        &self.pending
    }
}

/// One consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    last_id: StreamId,
    entries_read: Option<u64>,
    pending: BTreeMap<StreamId, Pending>,
    consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl Group {
    /// A group positioned after `last_id`, having read `entries_read` entries (`None`:
    /// unknown, Redis's -1).
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> Group {
        Group {
            last_id,
            entries_read,
            pending: BTreeMap::new(),
            consumers: BTreeMap::new(),
        }
    }

    /// The last ID delivered by a `>` read (or set by SETID, or a claim's LASTID).
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The entries-read counter; `None` when unknown.
    pub fn entries_read(&self) -> Option<u64> {
        self.entries_read
    }

    /// XGROUP SETID: a new position and counter.
    pub fn set_position(&mut self, last_id: StreamId, entries_read: Option<u64>) {
        self.last_id = last_id;
        self.entries_read = entries_read;
    }

    /// A claim's LASTID: moves the position forward only. True if it moved.
    pub fn raise_last_id(&mut self, id: StreamId) -> bool {
        if id > self.last_id {
            self.last_id = id;
            return true;
        }
        false
    }

    /// A `>` read delivered `id`: if it is past the group's position, the position moves
    /// to it and the counter counts it — one more while exact and no deletion lies ahead,
    /// else estimated again from the stream's counters. True if the position moved.
    pub fn advance(&mut self, id: StreamId, stream: &StreamPosition) -> bool {
        if id <= self.last_id {
            return false;
        }
        match self.entries_read {
            Some(read) if !stream.has_tombstones_from(id) => {
                self.entries_read = Some(read.wrapping_add(1));
            }
            _ if stream.entries_added != 0 => {
                self.entries_read = stream.entries_read_at(id);
            }
            _ => {}
        }
        self.last_id = id;
        true
    }

    /// Entries the group has yet to read (XINFO's `lag`), when the counters can tell.
    pub fn lag(&self, stream: &StreamPosition) -> Option<i64> {
        if stream.entries_added == 0 {
            return Some(0);
        }
        let read = match self.entries_read {
            Some(read) if !stream.has_tombstones_from(self.last_id) => read,
            _ => stream.entries_read_at(self.last_id)?,
        };
        Some((stream.entries_added as i64).wrapping_sub(read as i64))
    }

    /// The PEL, in ID order.
    pub fn pending(&self) -> &BTreeMap<StreamId, Pending> {
        &self.pending
    }

    pub fn pending_entry(&self, id: StreamId) -> Option<&Pending> {
        self.pending.get(&id)
    }

    /// The consumers, in name order.
    pub fn consumers(&self) -> impl ExactSizeIterator<Item = (&[u8], &Consumer)> {
        self.consumers.iter().map(|(name, c)| (&**name, c))
    }

    pub fn consumer_count(&self) -> usize {
        self.consumers.len()
    }

    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumers.get(name)
    }

    /// Creates consumer `name`, seen now; false if it exists (nothing changes then).
    pub fn create_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(
            Arc::from(name),
            Consumer {
                seen_time_ms: now_ms,
                pending: BTreeSet::new(),
            },
        );
        true
    }

    /// A consumer's read or claim: marks it seen now, creating it if needed. True if it
    /// was created.
    pub fn see_consumer(&mut self, name: &[u8], now_ms: i64) -> bool {
        match self.consumers.get_mut(name) {
            Some(consumer) => {
                consumer.seen_time_ms = now_ms;
                false
            }
            None => self.create_consumer(name, now_ms),
        }
    }

    /// Deletes consumer `name` and the PEL entries it owns; how many it owned, or `None`
    /// if there is no such consumer.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        for id in &consumer.pending {
            self.pending.remove(id);
        }
        Some(consumer.pending.len())
    }

    /// The consumer's own name handle (shared by the PEL entries it owns).
    fn owner_handle(&self, name: &[u8]) -> Arc<[u8]> {
        let (handle, _) = self
            .consumers
            .get_key_value(name)
            .expect("the consumer exists (callers create it first)");
        handle.clone()
    }

    /// Moves PEL entry `id` (which exists) to consumer `owner`, on both sides.
    fn reassign(&mut self, id: StreamId, owner: &Arc<[u8]>) {
        let entry = self.pending.get_mut(&id).expect("the entry is pending");
        if entry.owner != *owner {
            if let Some(previous) = self.consumers.get_mut(&entry.owner) {
                previous.pending.remove(&id);
            }
            entry.owner = owner.clone();
        }
        self.consumers
            .get_mut(owner)
            .expect("the owner exists")
            .pending
            .insert(id);
    }

    /// A `>` read delivered `id` to `consumer` (which exists): a new PEL entry, or, if
    /// another consumer held it (the group was moved back by SETID), the entry passes to
    /// this one and starts over (one delivery, now).
    pub fn deliver(&mut self, id: StreamId, consumer: &[u8], now_ms: i64) {
        let owner = self.owner_handle(consumer);
        match self.pending.get_mut(&id) {
            Some(entry) => {
                entry.delivery_time_ms = now_ms;
                entry.delivery_count = 1;
                self.reassign(id, &owner);
            }
            None => {
                self.pending.insert(
                    id,
                    Pending {
                        owner: owner.clone(),
                        delivery_time_ms: now_ms,
                        delivery_count: 1,
                    },
                );
                self.consumers
                    .get_mut(&owner)
                    .expect("the owner exists")
                    .pending
                    .insert(id);
            }
        }
    }

    /// A history read delivered `id` again to its owner: one more delivery, now.
    pub fn redeliver(&mut self, id: StreamId, now_ms: i64) {
        if let Some(entry) = self.pending.get_mut(&id) {
            entry.delivery_time_ms = now_ms;
            entry.delivery_count = entry.delivery_count.wrapping_add(1);
        }
    }

    /// XCLAIM / XAUTOCLAIM: `id` passes to `consumer` (which exists) with this delivery
    /// time and count. An ID not pending is added first (XCLAIM's FORCE), as a fresh
    /// delivery (count 1) that the count rule then applies to.
    pub fn claim(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        delivery_time_ms: i64,
        count: DeliveryCount,
    ) {
        let owner = self.owner_handle(consumer);
        let entry = self.pending.entry(id).or_insert_with(|| Pending {
            owner: owner.clone(),
            delivery_time_ms,
            delivery_count: 1,
        });
        entry.delivery_time_ms = delivery_time_ms;
        match count {
            DeliveryCount::Set(value) => entry.delivery_count = value,
            DeliveryCount::Increment => {
                entry.delivery_count = entry.delivery_count.wrapping_add(1);
            }
            DeliveryCount::Keep => {}
        }
        self.reassign(id, &owner);
    }

    /// Removes `id` from the PEL and from its owner (XACK; a claim of a deleted entry).
    pub fn remove_pending(&mut self, id: StreamId) -> Option<Pending> {
        let entry = self.pending.remove(&id)?;
        if let Some(owner) = self.consumers.get_mut(&entry.owner) {
            owner.pending.remove(&id);
        }
        Some(entry)
    }

    /// The bytes the group's structures take (MEMORY USAGE): the PEL, the consumers with
    /// their names and their lists of owned IDs.
    fn memory_usage(&self) -> usize {
        let pel = btree_bytes(
            self.pending.len(),
            size_of::<StreamId>() + size_of::<Pending>(),
        );
        let consumers = btree_bytes(
            self.consumers.len(),
            size_of::<Arc<[u8]>>() + size_of::<Consumer>(),
        );
        let owned: usize = self
            .consumers
            .iter()
            .map(|(name, consumer)| {
                // An `Arc<[u8]>` allocation: two counters, then the bytes.
                memory::allocation(2 * size_of::<usize>() + name.len())
                    + btree_bytes(consumer.pending.len(), size_of::<StreamId>())
            })
            .sum();
        pel + consumers + owned
    }
}

/// An estimate of what std's B-tree takes for `len` entries of `entry_bytes` each: its
/// layout is private; a leaf holds up to 11 entries behind a parent pointer and two
/// counters, an inner node 12 child pointers more; counted at 8 entries a leaf (its fill
/// after random inserts) and an inner node per 7 leaves. An empty tree allocates nothing.
fn btree_bytes(len: usize, entry_bytes: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let leaf = memory::allocation(8 + 2 + 2 + 11 * entry_bytes);
    let inner = memory::allocation(8 + 2 + 2 + 11 * entry_bytes + 12 * size_of::<usize>());
    let leaves = len.div_ceil(8);
    let inners = if leaves > 1 { leaves.div_ceil(7) } else { 0 };
    leaves * leaf + inners * inner
}

/// The consumer groups of one stream, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    groups: BTreeMap<Box<[u8]>, Group>,
}

impl Groups {
    /// How many groups there are.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `group` as `name`; false (and nothing added) if the name is taken.
    pub fn create(&mut self, name: &[u8], group: Group) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups.insert(Box::from(name), group);
        true
    }

    /// Removes group `name`; false if there is none.
    pub fn destroy(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    pub fn get(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    pub fn get_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.get_mut(name)
    }

    /// The groups in name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&[u8], &Group)> {
        self.groups.iter().map(|(name, group)| (&**name, group))
    }

    /// The bytes the groups take beyond the stream's own structure (MEMORY USAGE counts
    /// them all, as Redis's `objectComputeSize` does: no sampling).
    pub fn memory_usage(&self) -> usize {
        let map = btree_bytes(
            self.groups.len(),
            size_of::<Box<[u8]>>() + size_of::<Group>(),
        );
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, group)| memory::allocation(name.len()) + group.memory_usage())
            .sum();
        map + groups
    }
}

/// Why loaded groups were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// Two groups of one name.
    DuplicateGroup,
    /// An ID twice in a group's PEL.
    DuplicatePending,
    /// Two consumers of one name in a group.
    DuplicateConsumer,
    /// A consumer owns an ID its group's PEL lacks.
    NotInGroupPel,
    /// An ID twice in one consumer's list.
    DuplicateConsumerPending,
    /// Two consumers own one PEL entry.
    OwnedTwice,
    /// A PEL entry that no consumer owns.
    Unowned,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LoadError::DuplicateGroup => "duplicated consumer group name",
            LoadError::DuplicatePending => "duplicated global PEL entry",
            LoadError::DuplicateConsumer => "duplicate stream consumer",
            LoadError::NotInGroupPel => "consumer entry not found in group global PEL",
            LoadError::DuplicateConsumerPending => "duplicated consumer PEL entry",
            LoadError::OwnedTwice => "PEL entry owned by two consumers",
            LoadError::Unowned => "PEL entry without consumer",
        })
    }
}

/// A PEL entry as loaded: delivery time, delivery count, and its owner once a consumer
/// has claimed it.
type LoadedPending = (i64, u64, Option<Arc<[u8]>>);

/// One group assembled in the order a file stores it: the PEL (times and counts, no
/// owners), then each consumer with the IDs it owns. `finish` checks that every entry
/// found exactly one owner.
pub struct GroupBuilder {
    last_id: StreamId,
    entries_read: Option<u64>,
    pending: BTreeMap<StreamId, LoadedPending>,
    consumers: BTreeMap<Arc<[u8]>, Consumer>,
    /// The consumer being read (the last one added).
    current: Option<Arc<[u8]>>,
}

impl GroupBuilder {
    pub fn new(last_id: StreamId, entries_read: Option<u64>) -> GroupBuilder {
        GroupBuilder {
            last_id,
            entries_read,
            pending: BTreeMap::new(),
            consumers: BTreeMap::new(),
            current: None,
        }
    }

    /// A PEL entry, owner to come.
    pub fn pending(
        &mut self,
        id: StreamId,
        delivery_time_ms: i64,
        delivery_count: u64,
    ) -> Result<(), LoadError> {
        if self.pending.contains_key(&id) {
            return Err(LoadError::DuplicatePending);
        }
        self.pending
            .insert(id, (delivery_time_ms, delivery_count, None));
        Ok(())
    }

    /// A consumer; the IDs that follow (`owned`) are its own.
    pub fn consumer(&mut self, name: &[u8], seen_time_ms: i64) -> Result<(), LoadError> {
        if self.consumers.contains_key(name) {
            return Err(LoadError::DuplicateConsumer);
        }
        let handle: Arc<[u8]> = Arc::from(name);
        self.consumers.insert(
            handle.clone(),
            Consumer {
                seen_time_ms,
                pending: BTreeSet::new(),
            },
        );
        self.current = Some(handle);
        Ok(())
    }

    /// The last consumer added owns `id`.
    pub fn owned(&mut self, id: StreamId) -> Result<(), LoadError> {
        let owner = self
            .current
            .clone()
            .expect("a consumer is added before its IDs");
        let entry = self.pending.get_mut(&id).ok_or(LoadError::NotInGroupPel)?;
        let consumer = self.consumers.get_mut(&owner).expect("added above");
        if !consumer.pending.insert(id) {
            return Err(LoadError::DuplicateConsumerPending);
        }
        if entry.2.is_some() {
            return Err(LoadError::OwnedTwice);
        }
        entry.2 = Some(owner);
        Ok(())
    }

    pub fn finish(self) -> Result<Group, LoadError> {
        let mut pending = BTreeMap::new();
        for (id, (delivery_time_ms, delivery_count, owner)) in self.pending {
            let owner = owner.ok_or(LoadError::Unowned)?;
            pending.insert(
                id,
                Pending {
                    owner,
                    delivery_time_ms,
                    delivery_count,
                },
            );
        }
        Ok(Group {
            last_id: self.last_id,
            entries_read: self.entries_read,
            pending,
            consumers: self.consumers,
        })
    }
}

impl Groups {
    /// Adds a loaded group (`create`, with the loader's error).
    pub fn insert_loaded(&mut self, name: &[u8], group: Group) -> Result<(), LoadError> {
        if self.create(name, group) {
            Ok(())
        } else {
            Err(LoadError::DuplicateGroup)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId::new(ms, seq)
    }

    /// A stream of `n` entries 1-0 .. n-0, never trimmed or deleted from.
    fn plain(n: u64) -> StreamPosition {
        StreamPosition {
            length: n,
            last_id: id(n, 0),
            first_id: if n == 0 { StreamId::MIN } else { id(1, 0) },
            max_deleted_id: StreamId::MIN,
            entries_added: n,
        }
    }

    /// Every PEL entry is in its owner's list and every listed ID is in the PEL.
    fn assert_consistent(group: &Group) {
        let mut listed = 0;
        for (name, consumer) in group.consumers() {
            for pending_id in consumer.pending() {
                assert_eq!(group.pending()[pending_id].owner(), name);
                listed += 1;
            }
        }
        assert_eq!(listed, group.pending().len());
    }

    #[test]
    fn a_plain_stream_counts_reads_exactly() {
        let stream = plain(5);
        let mut group = Group::new(StreamId::MIN, Some(0));
        assert_eq!(group.lag(&stream), Some(5));
        assert!(group.advance(id(1, 0), &stream));
        assert!(group.advance(id(2, 0), &stream));
        assert!(!group.advance(id(2, 0), &stream), "not past the position");
        assert_eq!(group.entries_read(), Some(2));
        assert_eq!(group.lag(&stream), Some(3));
    }

    #[test]
    fn an_unknown_counter_is_estimated_where_the_stream_allows() {
        let stream = plain(5);
        // At the last entry: exact.
        let group = Group::new(id(5, 0), None);
        assert_eq!(group.lag(&stream), Some(0));
        // Before the first entry: what was trimmed away (nothing here).
        let group = Group::new(StreamId::MIN, None);
        assert_eq!(group.lag(&stream), Some(5));
        // At the first entry.
        let group = Group::new(id(1, 0), None);
        assert_eq!(group.lag(&stream), Some(4));
        // Between entries: unknown.
        let group = Group::new(id(3, 0), None);
        assert_eq!(group.lag(&stream), None);
        // In the future: unknown.
        assert_eq!(stream.entries_read_at(id(9, 0)), None);
        // A stream never written to: 0.
        assert_eq!(Group::new(id(3, 0), None).lag(&plain(0)), Some(0));
    }

    #[test]
    fn a_deletion_ahead_makes_the_counter_an_estimate() {
        // Entries 1..=5 added, 3-0 deleted.
        let stream = StreamPosition {
            length: 4,
            max_deleted_id: id(3, 0),
            ..plain(5)
        };
        assert!(stream.has_tombstones_from(id(2, 0)));
        assert!(stream.has_tombstones_from(id(3, 0)));
        assert!(!stream.has_tombstones_from(id(4, 0)));
        let mut group = Group::new(StreamId::MIN, Some(0));
        group.advance(id(1, 0), &stream);
        // The hole is ahead: the counter is re-estimated, and between entries that is
        // unknown.
        assert_eq!(group.entries_read(), None);
        assert_eq!(group.lag(&stream), None);
        group.advance(id(5, 0), &stream);
        assert_eq!(group.entries_read(), Some(5));
        assert_eq!(group.lag(&stream), Some(0));
        // A deletion before the first entry (trimmed past) is no hole.
        let trimmed = StreamPosition {
            length: 2,
            first_id: id(4, 0),
            max_deleted_id: id(3, 0),
            ..plain(5)
        };
        assert!(!trimmed.has_tombstones_from(StreamId::MIN));
        assert_eq!(trimmed.entries_read_at(id(4, 0)), Some(4));
        assert_eq!(trimmed.entries_read_at(id(2, 0)), Some(3));
    }

    #[test]
    fn a_counter_set_past_what_was_added_gives_a_negative_lag() {
        let group = Group::new(id(5, 0), Some(9));
        assert_eq!(group.lag(&plain(5)), Some(-4));
    }

    #[test]
    fn delivering_acknowledging_and_claiming_keep_both_views() {
        let mut group = Group::new(StreamId::MIN, Some(0));
        assert!(group.create_consumer(b"alice", 100));
        assert!(!group.create_consumer(b"alice", 200), "exists");
        assert_eq!(group.consumer(b"alice").unwrap().seen_time_ms(), 100);
        group.deliver(id(1, 0), b"alice", 110);
        group.deliver(id(2, 0), b"alice", 110);
        assert_consistent(&group);
        assert!(group.see_consumer(b"bob", 120), "created");
        // A second delivery of a pending ID (after SETID) passes it on and starts over.
        group.redeliver(id(1, 0), 115);
        assert_eq!(group.pending_entry(id(1, 0)).unwrap().delivery_count(), 2);
        group.deliver(id(1, 0), b"bob", 130);
        let entry = group.pending_entry(id(1, 0)).unwrap();
        assert_eq!(
            (
                entry.owner(),
                entry.delivery_count(),
                entry.delivery_time_ms()
            ),
            (&b"bob"[..], 1, 130)
        );
        assert_consistent(&group);
        // Claims: moved with the count rule; a missing ID is forced in at count 1.
        group.claim(id(2, 0), b"bob", 140, DeliveryCount::Increment);
        assert_eq!(group.pending_entry(id(2, 0)).unwrap().delivery_count(), 2);
        group.claim(id(7, 0), b"alice", 150, DeliveryCount::Increment);
        assert_eq!(group.pending_entry(id(7, 0)).unwrap().delivery_count(), 2);
        group.claim(id(8, 0), b"alice", 150, DeliveryCount::Keep);
        assert_eq!(group.pending_entry(id(8, 0)).unwrap().delivery_count(), 1);
        group.claim(id(8, 0), b"alice", 160, DeliveryCount::Set(9));
        assert_eq!(group.pending_entry(id(8, 0)).unwrap().delivery_count(), 9);
        assert_consistent(&group);
        assert_eq!(group.consumer(b"bob").unwrap().pending().len(), 2);
        // Acknowledge and delete.
        assert!(group.remove_pending(id(2, 0)).is_some());
        assert!(group.remove_pending(id(2, 0)).is_none());
        assert_consistent(&group);
        assert_eq!(group.delete_consumer(b"alice"), Some(2));
        assert_eq!(group.delete_consumer(b"alice"), None);
        assert_eq!(group.pending().len(), 1);
        assert_consistent(&group);
        assert!(!group.see_consumer(b"bob", 170));
        assert_eq!(group.consumer(b"bob").unwrap().seen_time_ms(), 170);
    }

    #[test]
    fn groups_are_kept_by_name_in_byte_order() {
        let mut groups = Groups::default();
        for name in [&b"b"[..], b"a", b"ab", b"B"] {
            assert!(groups.create(name, Group::new(StreamId::MIN, None)));
        }
        assert!(!groups.create(b"a", Group::new(id(1, 1), None)));
        let names: Vec<&[u8]> = groups.iter().map(|(name, _)| name).collect();
        assert_eq!(names, vec![&b"B"[..], b"a", b"ab", b"b"]);
        assert_eq!(groups.get(b"a").unwrap().last_id(), StreamId::MIN);
        assert!(groups.destroy(b"a"));
        assert!(!groups.destroy(b"a"));
        assert_eq!(groups.len(), 3);
    }

    #[test]
    fn memory_grows_with_what_the_groups_hold() {
        let mut groups = Groups::default();
        assert_eq!(groups.memory_usage(), 0);
        groups.create(b"g", Group::new(StreamId::MIN, Some(0)));
        let empty = groups.memory_usage();
        assert!(empty > 0);
        let group = groups.get_mut(b"g").unwrap();
        group.create_consumer(b"c", 1);
        for n in 1..=100 {
            group.deliver(id(n, 0), b"c", 1);
        }
        let full = groups.memory_usage();
        assert!(full > empty + 100 * (16 + 32), "{empty} → {full}");
    }

    #[test]
    fn the_builder_refuses_what_would_break_the_two_views() {
        let build = |steps: &dyn Fn(&mut GroupBuilder) -> Result<(), LoadError>| {
            let mut builder = GroupBuilder::new(id(9, 0), Some(3));
            steps(&mut builder)?;
            builder.finish()
        };
        let group = build(&|b| {
            b.pending(id(1, 0), 10, 1)?;
            b.pending(id(2, 0), 20, 4)?;
            b.consumer(b"x", 5)?;
            b.owned(id(1, 0))?;
            b.consumer(b"y", 6)?;
            b.owned(id(2, 0))
        })
        .unwrap();
        assert_consistent(&group);
        assert_eq!(group.pending_entry(id(2, 0)).unwrap().delivery_count(), 4);
        assert_eq!(group.entries_read(), Some(3));
        let refused = [
            (
                build(&|b| {
                    b.pending(id(1, 0), 1, 1)?;
                    b.pending(id(1, 0), 1, 1)
                }),
                LoadError::DuplicatePending,
            ),
            (
                build(&|b| {
                    b.consumer(b"x", 1)?;
                    b.consumer(b"x", 1)
                }),
                LoadError::DuplicateConsumer,
            ),
            (
                build(&|b| {
                    b.consumer(b"x", 1)?;
                    b.owned(id(1, 0))
                }),
                LoadError::NotInGroupPel,
            ),
            (
                build(&|b| {
                    b.pending(id(1, 0), 1, 1)?;
                    b.consumer(b"x", 1)?;
                    b.owned(id(1, 0))?;
                    b.owned(id(1, 0))
                }),
                LoadError::DuplicateConsumerPending,
            ),
            (
                build(&|b| {
                    b.pending(id(1, 0), 1, 1)?;
                    b.consumer(b"x", 1)?;
                    b.owned(id(1, 0))?;
                    b.consumer(b"y", 1)?;
                    b.owned(id(1, 0))
                }),
                LoadError::OwnedTwice,
            ),
            (build(&|b| b.pending(id(1, 0), 1, 1)), LoadError::Unowned),
        ];
        for (result, expected) in refused {
            assert_eq!(result.unwrap_err(), expected);
        }
        let mut groups = Groups::default();
        groups
            .insert_loaded(b"g", Group::new(StreamId::MIN, None))
            .unwrap();
        assert_eq!(
            groups.insert_loaded(b"g", Group::new(StreamId::MIN, None)),
            Err(LoadError::DuplicateGroup)
        );
    }
}
