//! The keyspace: databases partitioned into hash slots, one owning thread.
//!
//! Each database is an array of small hash tables, one per Redis Cluster hash slot
//! (`CRC16(key or {hashtag}) mod 16384`). The slot is the unit that a snapshot captures,
//! that a snapshot part is assigned and that recovery loads in parallel, so it is built
//! in from the start. Values are cheap to share (`bytes::Bytes` is refcounted), so a
//! slot's table can be copied by pointer without copying payload.
//!
//! Expiry times are absolute milliseconds since the Unix epoch, stored in the entry.
//! Whether an expired key is removed on access is the caller's decision (during log
//! replay nothing expires, exactly as in Redis), so lookups here never delete.

pub use crate::access::Access;
use crate::types::{Hash, List, Set, Str, Stream, ZSet};
use hashbrown::HashTable;
use std::hash::BuildHasher;
use std::sync::Arc;

pub const SLOT_COUNT: usize = 16384;

/// A stored value. Collections sit behind `Arc` so that a snapshot's capture copies a
/// pointer; a write goes through `Arc::make_mut`, which clones only while a snapshot
/// still holds the old version.
///
/// Each variant carries the key's access field (`crate::access`), beside the tag in what
/// would otherwise be padding: see that module for why it lives here. Equality ignores it.
#[derive(Clone, Debug)]
pub enum Value {
    String(Str, Access),
    List(Arc<List>, Access),
    Hash(Arc<Hash>, Access),
    Set(Arc<Set>, Access),
    ZSet(Arc<ZSet>, Access),
    Stream(Arc<Stream>, Access),
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::String(a, _), Value::String(b, _)) => a == b,
            (Value::List(a, _), Value::List(b, _)) => a == b,
            (Value::Hash(a, _), Value::Hash(b, _)) => a == b,
            (Value::Set(a, _), Value::Set(b, _)) => a == b,
            (Value::ZSet(a, _), Value::ZSet(b, _)) => a == b,
            (Value::Stream(a, _), Value::Stream(b, _)) => a == b,
            _ => false,
        }
    }
}

impl Value {
    /// A string value with a new access field (Redis's `createObject`).
    pub fn string(s: Str) -> Value {
        Value::String(s, Access::new())
    }

    /// The key's access field.
    pub fn access(&self) -> Access {
        match self {
            Value::String(_, a)
            | Value::List(_, a)
            | Value::Hash(_, a)
            | Value::Set(_, a)
            | Value::ZSet(_, a)
            | Value::Stream(_, a) => *a,
        }
    }

    pub fn access_mut(&mut self) -> &mut Access {
        match self {
            Value::String(_, a)
            | Value::List(_, a)
            | Value::Hash(_, a)
            | Value::Set(_, a)
            | Value::ZSet(_, a)
            | Value::Stream(_, a) => a,
        }
    }

    /// Whether something else holds this very value too (a snapshot's capture, most
    /// often): dropping the key's reference then frees nothing.
    pub fn is_shared(&self) -> bool {
        match self {
            Value::String(s, _) => s.is_shared(),
            Value::List(l, _) => Arc::strong_count(l) > 1,
            Value::Hash(h, _) => Arc::strong_count(h) > 1,
            Value::Set(s, _) => Arc::strong_count(s) > 1,
            Value::ZSet(z, _) => Arc::strong_count(z) > 1,
            Value::Stream(s, _) => Arc::strong_count(s) > 1,
        }
    }

    /// TYPE's answer.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::String(_, _) => "string",
            Value::List(_, _) => "list",
            Value::Hash(_, _) => "hash",
            Value::Set(_, _) => "set",
            Value::ZSet(_, _) => "zset",
            Value::Stream(_, _) => "stream",
        }
    }

    /// OBJECT ENCODING's answer, with Redis 7.0's names.
    pub fn encoding(&self) -> &'static str {
        match self {
            Value::String(s, _) => string_encoding(s),
            Value::List(l, _) => l.encoding(),
            Value::Hash(h, _) => h.encoding(),
            Value::Set(s, _) => s.encoding(),
            Value::ZSet(z, _) => z.encoding(),
            Value::Stream(s, _) => s.encoding(),
        }
    }

    /// A list, hash, set or sorted set with no elements (never kept in the keyspace);
    /// never a stream, which may be empty.
    pub fn is_empty_collection(&self) -> bool {
        match self {
            Value::String(_, _) => false,
            Value::List(l, _) => l.is_empty(),
            Value::Hash(h, _) => h.is_empty(),
            Value::Set(s, _) => s.is_empty(),
            Value::ZSet(z, _) => z.is_empty(),
            // An empty stream is kept (XADD NOMKSTREAM, XTRIM, XDEL leave it; XGROUP
            // CREATE MKSTREAM makes one).
            Value::Stream(_, _) => false,
        }
    }

    /// A collection whose copy would be deep (a hash table or a skip list: many small
    /// allocations, each copied) and that a snapshot's capture still shares. Before it is
    /// changed in place, the snapshot serialises its version (`Db::release_captured`),
    /// which is smaller and frees the share, rather than the change copying it whole.
    pub fn is_deep_and_shared(&self) -> bool {
        self.is_deep()
            && match self {
                Value::Hash(h, _) => Arc::strong_count(h) > 1,
                Value::Set(s, _) => Arc::strong_count(s) > 1,
                Value::ZSet(z, _) => Arc::strong_count(z) > 1,
                Value::String(_, _) | Value::List(_, _) | Value::Stream(_, _) => false,
            }
    }

    /// A hash table, set table or skip list (see `is_deep_and_shared`).
    pub fn is_deep(&self) -> bool {
        match self {
            Value::Hash(h, _) => matches!(**h, Hash::Table(_)),
            Value::Set(s, _) => matches!(**s, Set::Table(_)),
            Value::ZSet(z, _) => matches!(**z, ZSet::Tree(_)),
            Value::String(_, _) | Value::List(_, _) | Value::Stream(_, _) => false,
        }
    }

    /// Payload bytes held, approximately (capture accounting).
    pub fn approx_bytes(&self) -> usize {
        match self {
            Value::String(s, _) => s.len(),
            Value::List(l, _) => l.approx_bytes(),
            Value::Hash(h, _) => h.approx_bytes(),
            Value::Set(s, _) => s.approx_bytes(),
            Value::ZSet(z, _) => z.approx_bytes(),
            Value::Stream(s, _) => s.approx_bytes(),
        }
    }
}

/// Redis's string encodings: `int` for a canonical 64-bit integer, `embstr` up to 44
/// bytes (one allocation with the object header), `raw` beyond.
pub fn string_encoding(bytes: &[u8]) -> &'static str {
    if bytes.len() <= 20
        && crate::resp::parse_i64(bytes)
            .is_some_and(|n| itoa::Buffer::new().format(n).as_bytes() == bytes)
    {
        "int"
    } else if bytes.len() <= 44 {
        "embstr"
    } else {
        "raw"
    }
}

/// A key's bytes in 16 bytes, short keys inline (see `types::key`). Keys are never shared,
/// so a refcount buys nothing.
pub use crate::types::key::Key;

#[derive(Clone, Debug)]
pub struct Entry {
    pub key: Key,
    pub value: Value,
    /// Absolute expiry in Unix milliseconds; `NO_EXPIRY` when the key is persistent.
    pub expire_at_ms: i64,
}

// The memory benchmarks count on these sizes: an entry must not grow.
const _: () = assert!(size_of::<Entry>() == 40 && size_of::<Value>() == 16);

pub const NO_EXPIRY: i64 = -1;

/// What `Db::find_live` found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    Absent,
    /// There, but past its expiry: to be deleted.
    Expired,
    Live(Location),
}

/// Where a live key's entry was found: its slot and hash, so that looking at it again
/// (`Db::at`) hashes the key neither way once more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    slot: usize,
    hash: u64,
}

impl Entry {
    pub fn has_expiry(&self) -> bool {
        self.expire_at_ms != NO_EXPIRY
    }
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expire_at_ms != NO_EXPIRY && self.expire_at_ms <= now_ms
    }
}

/// The hash slot of a key, as Redis Cluster computes it (hash tags included).
pub fn key_slot(key: &[u8]) -> usize {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(0) | None => key,
            Some(len) => &key[open + 1..open + 1 + len],
        },
        None => key,
    };
    (crc16_xmodem(hashed) as usize) & (SLOT_COUNT - 1)
}

const CRC16: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);

fn crc16_xmodem(data: &[u8]) -> u16 {
    CRC16.checksum(data)
}

fn table_hasher() -> &'static foldhash::fast::FixedState {
    static HASHER: std::sync::OnceLock<foldhash::fast::FixedState> = std::sync::OnceLock::new();
    // A per-process random seed keeps adversarial keys from colliding on purpose.
    HASHER.get_or_init(|| foldhash::fast::FixedState::with_seed(rand::random()))
}

fn hash_key(key: &[u8]) -> u64 {
    table_hasher().hash_one(key)
}

/// One slot's table plus how many of its keys carry an expiry (for the active cycle).
///
/// The table holds boxed entries: with ~61 keys per slot at a million keys, a table of
/// power-of-two capacity often sits near half load, so empty buckets must be small (9
/// bytes rather than an 80-byte entry each).
#[derive(Default, Clone)]
pub struct Slot {
    pub table: HashTable<Box<Entry>>,
    pub volatile_count: usize,
}

impl Slot {
    pub fn len(&self) -> usize {
        self.table.len()
    }
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter().map(|e| &**e)
    }

    /// Removes `key`'s entry (a captured table giving up one entry: `CaptureSink`).
    pub fn take(&mut self, key: &[u8]) -> Option<Entry> {
        let found = self
            .table
            .find_entry(hash_key(key), |e| e.key.as_ref() == key);
        let entry = *found.ok()?.remove().0;
        if entry.has_expiry() {
            self.volatile_count -= 1;
        }
        Some(entry)
    }
}

/// Receives the slots captured for a snapshot in progress (see `Db::begin_capture`).
pub trait CaptureSink: Send + Sync {
    /// `db` is the database's index when the snapshot started (SWAPDB may have moved it
    /// since). The slot's table is as it was at that moment: a copy sharing keys' values
    /// with the live table, or the live table itself, `moved` out by FLUSHDB/FLUSHALL.
    fn accept(&self, db: u32, slot: usize, captured: Slot, moved: bool);

    /// Serialise before write: if the capture of `slot` that holds `key` is still queued
    /// (its writer has not taken it yet), serialise that entry now and drop it from the
    /// capture, so that the live value is no longer shared. False if the writer has the
    /// slot already (the caller then copies the value, as before).
    fn serialise_queued(&self, db: u32, slot: usize, key: &[u8]) -> bool;

    /// The live dataset let go of a value of `slot` that something else still holds
    /// (overwritten, deleted, or about to be copied by a write in place): if that is this
    /// capture, not yet written, the value is now held for the capture alone.
    fn diverged(&self, db: u32, slot: usize, bytes: u64);

    /// The memory held for this capture alone (see `CaptureBytes`).
    fn own_bytes(&self) -> CaptureBytes;
}

/// The memory a snapshot's capture holds beyond the live dataset, as two running totals
/// (held = `added - released`): the event loop adds (copied tables, records serialised
/// before a write, values the live dataset let go while captured), the writer threads
/// release (once a slot is written). Eviction leaves it out of its measure
/// (`engine::evict`): deleting live keys cannot free it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureBytes {
    pub added: u64,
    pub released: u64,
}

impl CaptureBytes {
    pub fn held(self) -> u64 {
        self.added.saturating_sub(self.released)
    }
}

/// What a value is counted for when a capture keeps it alone: its payload and a little
/// for its allocation.
fn value_bytes(value: &Value) -> u64 {
    value.approx_bytes() as u64 + 16
}

/// A snapshot in progress over one database: which slots still hold their state of the
/// snapshot's start and must be captured before they change.
struct Capture {
    db: u32,
    /// One bit per slot; set: not captured yet. Slots empty at the start are never set.
    pending: Box<[u64]>,
    remaining: usize,
    /// Where the background capture resumes.
    cursor: usize,
    sink: Arc<dyn CaptureSink>,
}

impl Capture {
    fn is_pending(&self, slot: usize) -> bool {
        self.pending[slot / 64] & (1 << (slot % 64)) != 0
    }

    fn clear(&mut self, slot: usize) {
        debug_assert!(self.is_pending(slot));
        self.pending[slot / 64] &= !(1 << (slot % 64));
        self.remaining -= 1;
    }
}

/// Asks the CPU to start loading `entry` into its cache (a hint: nothing is read).
#[inline]
fn prefetch(entry: &Entry) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and changes nothing observable, whatever the
    // address; this one is a live reference's anyway.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(entry).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = entry;
}

/// One logical database (`SELECT n`).
#[derive(Default)]
pub struct Db {
    /// Empty until the first key arrives, so that 16 idle databases cost nothing.
    slots: Vec<Slot>,
    key_count: usize,
    volatile_count: usize,
    /// Set while a snapshot is capturing this database ("capture before write").
    capture: Option<Box<Capture>>,
    /// The snapshot whose captures may still be queued, with this database's index in it:
    /// kept after the last slot is captured, until the snapshot is over.
    queued_in: Option<(u32, Arc<dyn CaptureSink>)>,
}

impl Db {
    pub fn len(&self) -> usize {
        self.key_count
    }
    pub fn is_empty(&self) -> bool {
        self.key_count == 0
    }
    pub fn volatile_len(&self) -> usize {
        self.volatile_count
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = &self.slots[key_slot(key)];
        slot.table
            .find(hash_key(key), |e| e.key.as_ref() == key)
            .map(|e| &**e)
    }

    /// A command's first look at `key`, in one probe: whether it is there and alive at
    /// `now_ms` (None: nothing expires, as while loading); a live entry's access field is
    /// updated if `touch` (`get_touched`). An expired entry is left for the caller to
    /// delete, untouched.
    pub fn find_live(&mut self, key: &[u8], now_ms: Option<i64>, touch: bool) -> Liveness {
        if self.slots.is_empty() {
            return Liveness::Absent;
        }
        let location = Location {
            slot: key_slot(key),
            hash: hash_key(key),
        };
        let slot = &mut self.slots[location.slot];
        let Some(entry) = slot
            .table
            .find_mut(location.hash, |e| e.key.as_ref() == key)
        else {
            return Liveness::Absent;
        };
        if now_ms.is_some_and(|now| entry.is_expired(now)) {
            return Liveness::Expired;
        }
        if touch {
            entry.value.access_mut().touch();
        }
        Liveness::Live(location)
    }

    /// The entry of `key` where `find_live` found it (None if it has gone since).
    pub fn at(&self, location: Location, key: &[u8]) -> Option<&Entry> {
        self.slots
            .get(location.slot)?
            .table
            .find(location.hash, |e| e.key.as_ref() == key)
            .map(|e| &**e)
    }

    /// A command's lookup (Redis's `lookupKey`): the entry, its access field updated
    /// (`crate::access`). The slot is not captured first: the field is no part of what a
    /// snapshot writes, and a capture holds copies of the entries, not these.
    pub fn get_touched(&mut self, key: &[u8]) -> Option<&Entry> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = &mut self.slots[key_slot(key)];
        let entry = slot
            .table
            .find_mut(hash_key(key), |e| e.key.as_ref() == key)?;
        entry.value.access_mut().touch();
        Some(&**entry)
    }

    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        if self.slots.is_empty() {
            return None;
        }
        let index = key_slot(key);
        self.before_write(index);
        let slot = &mut self.slots[index];
        slot.table
            .find_mut(hash_key(key), |e| e.key.as_ref() == key)
            .map(|e| &mut **e)
    }

    /// Inserts or replaces; returns the previous entry.
    pub fn insert(&mut self, entry: Entry) -> Option<Entry> {
        if self.slots.is_empty() {
            self.slots = vec![Slot::default(); SLOT_COUNT];
        }
        let hash = hash_key(&entry.key);
        let new_volatile = entry.has_expiry();
        let index = key_slot(&entry.key);
        self.before_write(index);
        let slot = &mut self.slots[index];
        let previous = match slot
            .table
            .entry(hash, |e| e.key == entry.key, |e| hash_key(&e.key))
        {
            hashbrown::hash_table::Entry::Occupied(mut occupied) => {
                let stored = &mut **occupied.get_mut();
                let previous = std::mem::replace(stored, entry);
                // Redis's `dbSetValue`: under LFU an overwritten key keeps its counter.
                if crate::access::is_lfu() {
                    *stored.value.access_mut() = previous.value.access();
                }
                Some(previous)
            }
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                vacant.insert(Box::new(entry));
                None
            }
        };
        let old_volatile = previous.as_ref().is_some_and(Entry::has_expiry);
        if previous.is_none() {
            self.key_count += 1;
        }
        Self::adjust_volatile(slot, &mut self.volatile_count, old_volatile, new_volatile);
        if let Some(previous) = &previous {
            self.let_go(index, &previous.value);
        }
        previous
    }

    /// The live dataset is letting go of `value`, of slot `slot`: a running snapshot that
    /// still shares it may now be its only holder (`CaptureSink::diverged`).
    pub fn let_go(&self, slot: usize, value: &Value) {
        if let Some((db, sink)) = &self.queued_in
            && value.is_shared()
        {
            sink.diverged(*db, slot, value_bytes(value));
        }
    }

    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        if self.slots.is_empty() {
            return None;
        }
        let index = key_slot(key);
        self.before_write(index);
        let slot = &mut self.slots[index];
        let found = slot
            .table
            .find_entry(hash_key(key), |e| e.key.as_ref() == key);
        let entry = *found.ok()?.remove().0;
        self.key_count -= 1;
        if entry.has_expiry() {
            slot.volatile_count -= 1;
            self.volatile_count -= 1;
        }
        self.let_go(index, &entry.value);
        Some(entry)
    }

    /// Sets or clears the expiry of an existing key; returns false if the key is absent.
    pub fn set_expiry(&mut self, key: &[u8], expire_at_ms: i64) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let index = key_slot(key);
        self.before_write(index);
        let slot = &mut self.slots[index];
        let Some(entry) = slot
            .table
            .find_mut(hash_key(key), |e| e.key.as_ref() == key)
        else {
            return false;
        };
        let old_volatile = entry.has_expiry();
        entry.expire_at_ms = expire_at_ms;
        let new_volatile = entry.has_expiry();
        Self::adjust_volatile(slot, &mut self.volatile_count, old_volatile, new_volatile);
        true
    }

    fn adjust_volatile(slot: &mut Slot, db_count: &mut usize, old: bool, new: bool) {
        match (old, new) {
            (false, true) => {
                slot.volatile_count += 1;
                *db_count += 1;
            }
            (true, false) => {
                slot.volatile_count -= 1;
                *db_count -= 1;
            }
            _ => {}
        }
    }

    /// Collects the keys of `slot` that have expired at `now_ms`.
    pub fn expired_in_slot(&self, slot: usize, now_ms: i64) -> Vec<Key> {
        match self.slots.get(slot) {
            Some(s) if s.volatile_count > 0 => s
                .table
                .iter()
                .filter(|e| e.is_expired(now_ms))
                .map(|e| e.key.clone())
                .collect(),
            _ => Vec::new(),
        }
    }

    pub fn slot_volatile_count(&self, slot: usize) -> usize {
        self.slots.get(slot).map_or(0, |s| s.volatile_count)
    }

    /// A uniformly chosen slot among the non-empty ones, then a random key in it.
    /// (Slightly favours keys in sparse slots; Redis's RANDOMKEY is not uniform either.)
    pub fn random_entry(&self, rng_value: u64) -> Option<&Entry> {
        if self.key_count == 0 {
            return None;
        }
        let start = (rng_value as usize) % SLOT_COUNT;
        for step in 0..SLOT_COUNT {
            let slot = &self.slots[(start + step) % SLOT_COUNT];
            if !slot.is_empty() {
                let index = ((rng_value >> 14) as usize) % slot.len();
                return slot.iter().nth(index);
            }
        }
        None
    }

    /// Up to `count` entries picked at random, for eviction (Redis's `dictGetSomeKeys`):
    /// from a random place in the first slot with keys at or after a random one, then on
    /// through that slot and the following ones, as Redis walks its buckets on from a
    /// random one — neighbours share cache lines, where `count` scattered picks would
    /// each miss the cache three or four times; `volatile`: only keys with an expiry.
    /// Like RANDOMKEY, keys in sparse slots are a little favoured.
    pub fn sample(
        &self,
        count: usize,
        volatile: bool,
        mut random: impl FnMut() -> u64,
        each: impl FnMut(&Entry),
    ) {
        let available = if volatile {
            self.volatile_count
        } else {
            self.key_count
        };
        if available == 0 || count == 0 {
            return;
        }
        let chance = random();
        let start = chance as usize % SLOT_COUNT;
        let mut wanted = count;
        let mut skip = None;
        // The entries are gathered first, each prefetched as it is found, and only then
        // handed over (eviction reads them all): their cache misses overlap rather than
        // follow one another.
        let mut sampled: smallvec::SmallVec<[&Entry; 16]> = smallvec::SmallVec::new();
        for step in 0..SLOT_COUNT {
            let slot = &self.slots[(start + step) % SLOT_COUNT];
            let keys = if volatile {
                slot.volatile_count
            } else {
                slot.len()
            };
            if keys == 0 {
                continue;
            }
            // A random place in the first slot with keys; the next ones from their start.
            let from = *skip.get_or_insert((chance >> 14) as usize % keys);
            skip = Some(0);
            let entries = slot.iter().filter(|e| !volatile || e.has_expiry());
            for entry in entries.skip(from).take(wanted) {
                prefetch(entry);
                sampled.push(entry);
                wanted -= 1;
            }
            if wanted == 0 {
                break;
            }
        }
        sampled.into_iter().for_each(each);
    }

    /// Empties the database and returns what it held (dropping that frees it: here, or on
    /// the lazy-free thread). A capture in progress gets the slots it still needs by
    /// moving their tables (FLUSHDB/FLUSHALL during a snapshot copy nothing).
    pub fn clear(&mut self) -> Db {
        // Values of slots captured already go on living in the capture alone.
        if self.queued_in.is_some() {
            for (index, slot) in self.slots.iter().enumerate() {
                let pending = self.capture.as_ref().is_some_and(|c| c.is_pending(index));
                if !pending {
                    slot.iter()
                        .for_each(|entry| self.let_go(index, &entry.value));
                }
            }
        }
        if let Some(mut capture) = self.capture.take() {
            let mut slot = capture.cursor;
            while capture.remaining > 0 {
                if capture.is_pending(slot) {
                    capture.clear(slot);
                    let taken = std::mem::take(&mut self.slots[slot]);
                    capture.sink.accept(capture.db, slot, taken, true);
                }
                slot = (slot + 1) % SLOT_COUNT;
            }
        }
        // The snapshot may still hold what this database held: it stays known, so that
        // its memory is still told apart (`capture_bytes`).
        let queued_in = self.queued_in.take();
        let held = std::mem::take(self);
        self.queued_in = queued_in;
        held
    }

    /// Moves every key of `other` into this database: a whole table for each slot empty
    /// here (parallel loading: snapshot parts hold disjoint slots, so adopting a part
    /// costs one move per slot), key by key where both have keys.
    pub fn absorb(&mut self, other: Db) {
        assert!(
            self.capture.is_none() && other.capture.is_none(),
            "no snapshot while loading"
        );
        if other.key_count == 0 {
            return;
        }
        if self.key_count == 0 {
            *self = other;
            return;
        }
        for (index, slot) in other.slots.into_iter().enumerate() {
            if slot.is_empty() {
                continue;
            }
            if self.slots[index].is_empty() {
                self.key_count += slot.len();
                self.volatile_count += slot.volatile_count;
                self.slots[index] = slot;
            } else {
                for entry in slot.table {
                    self.insert(*entry);
                }
            }
        }
    }

    /// Starts capturing this database for a snapshot: from now on every slot is handed to
    /// `sink` as it is at this moment, either just before its first change or by
    /// `capture_some`. `db` is the index the snapshot records.
    pub fn begin_capture(&mut self, db: u32, sink: Arc<dyn CaptureSink>) {
        assert!(self.capture.is_none(), "one snapshot at a time");
        let mut pending = vec![0u64; SLOT_COUNT / 64].into_boxed_slice();
        let mut remaining = 0;
        for (index, slot) in self.slots.iter().enumerate() {
            if !slot.is_empty() {
                pending[index / 64] |= 1 << (index % 64);
                remaining += 1;
            }
        }
        if remaining > 0 {
            self.queued_in = Some((db, sink.clone()));
            self.capture = Some(Box::new(Capture {
                db,
                pending,
                remaining,
                cursor: 0,
                sink,
            }));
        }
    }

    /// Before an in-place change of the collection at `key` that a capture still shares
    /// (`Value::is_deep_and_shared`): asks the snapshot to serialise its queued version.
    /// True if it did (the value is no longer shared); false if the capture is with its
    /// writer already.
    pub fn release_captured(&mut self, key: &[u8]) -> bool {
        match &self.queued_in {
            Some((db, sink)) => sink.serialise_queued(*db, key_slot(key), key),
            None => false,
        }
    }

    /// The snapshot is over: nothing of it is queued any more.
    pub fn forget_snapshot(&mut self) {
        self.queued_in = None;
    }

    /// Slots still to capture.
    pub fn capture_remaining(&self) -> usize {
        self.capture.as_ref().map_or(0, |c| c.remaining)
    }

    /// Abandons the capture (the snapshot failed or was cancelled).
    pub fn cancel_capture(&mut self) {
        self.capture = None;
        self.queued_in = None;
    }

    /// Background capture: captures up to `max` pending slots; returns how many.
    pub fn capture_some(&mut self, max: usize) -> usize {
        let mut done = 0;
        while done < max {
            let Some(capture) = self.capture.as_mut() else {
                break;
            };
            let mut slot = capture.cursor;
            while !capture.is_pending(slot) {
                slot = (slot + 1) % SLOT_COUNT;
            }
            capture.cursor = (slot + 1) % SLOT_COUNT;
            self.capture_slot(slot);
            done += 1;
        }
        done
    }

    /// Called before any change to `slot`: the rule that makes a snapshot point-in-time.
    #[inline]
    fn before_write(&mut self, slot: usize) {
        if let Some(capture) = &self.capture
            && capture.is_pending(slot)
        {
            self.capture_slot(slot);
        }
    }

    /// Copies the slot's table (by pointer for the payload: keys and values are
    /// refcounted) and hands it to the sink; the capture ends with its last slot.
    fn capture_slot(&mut self, slot: usize) {
        let capture = self.capture.as_mut().expect("a capture is in progress");
        capture.clear(slot);
        capture
            .sink
            .accept(capture.db, slot, self.slots[slot].clone(), false);
        if capture.remaining == 0 {
            self.capture = None;
        }
    }
}

/// All databases.
pub struct Keyspace {
    pub dbs: Vec<Db>,
}

impl Keyspace {
    pub fn new(databases: usize) -> Keyspace {
        assert!(databases > 0);
        Keyspace {
            dbs: (0..databases).map(|_| Db::default()).collect(),
        }
    }

    pub fn total_keys(&self) -> usize {
        self.dbs.iter().map(Db::len).sum()
    }

    /// Starts capturing every database for a snapshot (see `Db::begin_capture`).
    pub fn begin_capture(&mut self, sink: Arc<dyn CaptureSink>) {
        for (index, db) in self.dbs.iter_mut().enumerate() {
            db.begin_capture(index as u32, sink.clone());
        }
    }

    /// Slots still to capture, over all databases; 0 once the snapshot has everything.
    pub fn capture_remaining(&self) -> usize {
        self.dbs.iter().map(Db::capture_remaining).sum()
    }

    /// Background capture of up to `max` slots; returns how many were captured.
    pub fn capture_some(&mut self, max: usize) -> usize {
        let mut done = 0;
        for db in &mut self.dbs {
            if done >= max {
                break;
            }
            done += db.capture_some(max - done);
        }
        done
    }

    pub fn cancel_capture(&mut self) {
        for db in &mut self.dbs {
            db.cancel_capture();
        }
    }

    /// The snapshot is over (its outcome taken): see `Db::forget_snapshot`.
    pub fn forget_snapshot(&mut self) {
        for db in &mut self.dbs {
            db.forget_snapshot();
        }
    }

    /// The memory the running snapshot's capture holds alone, and which snapshot that is
    /// (an identity, to tell one job's totals from the next one's); None when no snapshot
    /// shares this dataset.
    pub fn capture_bytes(&self) -> Option<(usize, CaptureBytes)> {
        self.dbs.iter().find_map(|db| {
            db.queued_in
                .as_ref()
                .map(|(_, sink)| (Arc::as_ptr(sink) as *const () as usize, sink.own_bytes()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis_cluster() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    #[test]
    fn absorb_moves_disjoint_slots_and_merges_shared_ones() {
        let entry = |k: &str, exp: i64| Entry {
            key: Key::from(k.as_bytes()),
            value: Value::string(Str::from(k.as_bytes())),
            expire_at_ms: exp,
        };
        let mut target = Db::default();
        let mut part = Db::default();
        // "{a}x" and "{a}y" share a slot; "b" is elsewhere.
        target.insert(entry("{a}x", NO_EXPIRY));
        part.insert(entry("{a}y", 100));
        part.insert(entry("b", 200));
        target.absorb(part);
        assert_eq!((target.len(), target.volatile_len()), (3, 2));
        for key in ["{a}x", "{a}y", "b"] {
            assert!(target.get(key.as_bytes()).is_some(), "{key}");
        }
        let mut empty = Db::default();
        let mut single = Db::default();
        single.insert(entry("c", NO_EXPIRY));
        empty.absorb(single);
        assert_eq!(empty.len(), 1);
    }

    #[test]
    fn insert_remove_and_volatile_counts() {
        let mut db = Db::default();
        let entry = |k: &str, exp: i64| Entry {
            key: Key::from(k.as_bytes()),
            value: Value::string(Str::from("v")),
            expire_at_ms: exp,
        };
        assert!(db.insert(entry("a", NO_EXPIRY)).is_none());
        assert!(db.insert(entry("b", 100)).is_none());
        assert_eq!((db.len(), db.volatile_len()), (2, 1));
        assert!(db.insert(entry("b", NO_EXPIRY)).is_some());
        assert_eq!((db.len(), db.volatile_len()), (2, 0));
        assert!(db.set_expiry(b"a", 5));
        assert_eq!(
            db.expired_in_slot(key_slot(b"a"), 10),
            vec![Key::from(&b"a"[..])]
        );
        assert!(db.remove(b"a").is_some());
        assert_eq!((db.len(), db.volatile_len()), (1, 0));
        assert!(db.remove(b"a").is_none());
    }
}
