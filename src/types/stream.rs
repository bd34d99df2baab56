//! Streams: entries kept as Redis 7.0 keeps them, an ordered map from a node's master ID
//! to a listpack in Redis's stream-node format, plus the stream's metadata and its
//! consumer groups (`types::stream_groups`).
//!
//! A node's listpack, byte for byte what Redis stores (so RDB writes it unchanged):
//!
//! ```text
//! master entry: count | deleted | field-count | field-1 … field-N | 0
//! an entry:     flags | ms-delta | seq-delta | field-count | field-1 | value-1 … | lp-count
//! SAMEFIELDS:   flags | ms-delta | seq-delta | value-1 … value-N | lp-count
//! ```
//!
//! `count` is the node's live entries and `deleted` those flagged deleted (entries are
//! never removed from a node: a deletion sets the DELETED flag; a node goes when its
//! last live entry does). An entry's ID is the node's master ID plus its deltas (wrapping
//! 64-bit arithmetic, as Redis's). An entry whose field names are the master entry's
//! carries the SAMEFIELDS flag and only its values. `lp-count` is how many listpack
//! elements precede it in the entry, so a node can be walked backwards; the master
//! entry's closing 0 tells the walk it reached the start.
//!
//! A node takes entries until it holds `stream-node-max-entries` (deleted ones counted)
//! or an entry's bytes would take it to `stream-node-max-bytes` (`types::limits`): then
//! the next entry opens a new node whose master entry takes that entry's field names.
//!
//! Every node is validated when it comes from outside (`Stream::from_parts`, deep
//! enough that the walks here never meet a malformed node), so the readers below treat
//! a malformed node as a broken invariant.

use super::limits;
use super::listpack::{Listpack, LpValue, Pos};
use super::memory;
use super::stream_groups::Groups;
use super::stream_id::StreamId;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::collections::btree_map;

/// An entry's flag: deleted (a tombstone kept until its node goes).
const FLAG_DELETED: i64 = 1;
/// An entry's flag: its field names are the master entry's, and not stored.
const FLAG_SAMEFIELDS: i64 = 2;

/// Redis's cap on a stream node (and on one entry's bytes): 1 GB.
pub const NODE_BYTES_MAX: usize = 1 << 30;

/// A stream.
#[derive(Clone, Debug, Default)]
pub struct Stream {
    /// Master ID → node. No node is empty of live entries.
    nodes: BTreeMap<StreamId, Listpack>,
    /// Live entries.
    length: u64,
    /// The greatest ID ever added (or set by XSETID); 0-0 for a new stream.
    last_id: StreamId,
    /// The first live entry's ID as recorded (0-0 when empty), as Redis keeps it.
    first_id: StreamId,
    /// The greatest ID XDEL removed.
    max_deleted_id: StreamId,
    /// Entries ever added (or as XSETID set it).
    entries_added: u64,
    pub groups: Groups,
}

/// One entry as read out of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEntry {
    pub id: StreamId,
    pub fields: Vec<(Bytes, Bytes)>,
}

/// The ID XADD asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewId {
    /// `*`: the clock's millisecond, or the last ID's successor.
    Auto,
    /// `<ms>-*`: this millisecond, the sequence after the last ID's if it is the same.
    AutoSeq(u64),
    /// `<ms>-<seq>`.
    Exact(StreamId),
}

/// Why an entry could not be appended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The ID is not above the stream's last ID.
    IdNotGreater,
    /// The entry's fields and values exceed `NODE_BYTES_MAX` together.
    TooLarge,
    /// `<ms>-*` where the last ID is `<ms>-18446744073709551615`: Redis fails it without
    /// saying why (its reply is then the too-large one).
    SequenceExhausted,
}

/// What a trim keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimStrategy {
    /// At most this many entries (the newest).
    MaxLen(u64),
    /// Entries with an ID at least this one.
    MinId(StreamId),
}

/// A trim as XADD and XTRIM ask for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    pub strategy: TrimStrategy,
    /// `~`: remove whole nodes only.
    pub approx: bool,
    /// Stop before a node would take the count of removed entries past this (0: none).
    pub limit: u64,
}

/// Equal streams hold the same entries and metadata, however the entries are split
/// into nodes.
impl PartialEq for Stream {
    fn eq(&self, other: &Stream) -> bool {
        self.length == other.length
            && self.last_id == other.last_id
            && self.first_id == other.first_id
            && self.max_deleted_id == other.max_deleted_id
            && self.entries_added == other.entries_added
            && self.groups == other.groups
            && self
                .range(StreamId::MIN, StreamId::MAX, false)
                .eq(other.range(StreamId::MIN, StreamId::MAX, false))
    }
}

// ---------------------------------------------------------------------------------------
// Reading a node.
// ---------------------------------------------------------------------------------------

fn int_at(node: &Listpack, pos: Pos) -> i64 {
    node.get(pos)
        .as_i64()
        .expect("a stream node's counters are integers (validated)")
}

fn next_in(node: &Listpack, pos: Pos) -> Pos {
    node.next(pos)
        .expect("a stream node's entry is complete (validated)")
}

fn prev_in(node: &Listpack, pos: Pos) -> Pos {
    node.prev(pos)
        .expect("a stream node's entry is complete (validated)")
}

/// An integer as the bytes a listpack is given (it stores them as an integer).
fn int(value: i64) -> Vec<u8> {
    itoa::Buffer::new().format(value).as_bytes().to_vec()
}

/// The master entry of a node.
struct Master {
    /// Where `count` is (the node's first element).
    count_pos: Pos,
    live: i64,
    deleted: i64,
    field_count: usize,
    /// The first master field name (the closing 0 when there are none).
    fields: Pos,
    /// The master entry's closing 0.
    terminator: Pos,
}

fn master(node: &Listpack) -> Master {
    let count_pos = node
        .first()
        .expect("a stream node has a master entry (validated)");
    let deleted_pos = next_in(node, count_pos);
    let field_count_pos = next_in(node, deleted_pos);
    let field_count = int_at(node, field_count_pos) as usize;
    let fields = next_in(node, field_count_pos);
    let mut terminator = fields;
    for _ in 0..field_count {
        terminator = next_in(node, terminator);
    }
    Master {
        count_pos,
        live: int_at(node, count_pos),
        deleted: int_at(node, deleted_pos),
        field_count,
        fields,
        terminator,
    }
}

/// One entry of a node, located.
struct EntryAt {
    flags_pos: Pos,
    flags: i64,
    id: StreamId,
    field_count: usize,
    /// The first field name (or the first value, with SAMEFIELDS); `lp_count` if none.
    body: Pos,
    /// The entry's closing lp-count.
    lp_count: Pos,
}

impl EntryAt {
    fn deleted(&self) -> bool {
        self.flags & FLAG_DELETED != 0
    }
    fn same_fields(&self) -> bool {
        self.flags & FLAG_SAMEFIELDS != 0
    }
}

fn entry_at(node: &Listpack, master_id: StreamId, master: &Master, flags_pos: Pos) -> EntryAt {
    let flags = int_at(node, flags_pos);
    let ms_pos = next_in(node, flags_pos);
    let seq_pos = next_in(node, ms_pos);
    let id = StreamId {
        ms: master_id.ms.wrapping_add(int_at(node, ms_pos) as u64),
        seq: master_id.seq.wrapping_add(int_at(node, seq_pos) as u64),
    };
    let mut at = next_in(node, seq_pos);
    let (field_count, elements) = if flags & FLAG_SAMEFIELDS != 0 {
        (master.field_count, master.field_count)
    } else {
        let count = int_at(node, at) as usize;
        at = next_in(node, at);
        (count, count * 2)
    };
    let body = at;
    for _ in 0..elements {
        at = next_in(node, at);
    }
    EntryAt {
        flags_pos,
        flags,
        id,
        field_count,
        body,
        lp_count: at,
    }
}

/// The flags of the node's first entry, if it has one.
fn first_entry(node: &Listpack, master: &Master) -> Option<Pos> {
    node.next(master.terminator)
}

/// The flags of the node's last entry, if it has one.
fn last_entry(node: &Listpack) -> Option<Pos> {
    entry_before(node, node.last()?)
}

/// The flags of the entry whose lp-count is at `lp_count`; `None` at the master entry's
/// closing 0.
fn entry_before(node: &Listpack, lp_count: Pos) -> Option<Pos> {
    let elements = int_at(node, lp_count);
    if elements == 0 {
        return None;
    }
    let mut at = lp_count;
    for _ in 0..elements {
        at = prev_in(node, at);
    }
    Some(at)
}

fn bytes_of(value: LpValue<'_>) -> Bytes {
    match value {
        LpValue::Bytes(bytes) => Bytes::copy_from_slice(bytes),
        LpValue::Int(n) => Bytes::from(int(n)),
    }
}

fn fields_of(node: &Listpack, master: &Master, entry: &EntryAt) -> Vec<(Bytes, Bytes)> {
    let mut fields = Vec::with_capacity(entry.field_count);
    let mut at = entry.body;
    let mut name_at = master.fields;
    for _ in 0..entry.field_count {
        let name = if entry.same_fields() {
            let name = node.get(name_at);
            name_at = next_in(node, name_at);
            name
        } else {
            let name = node.get(at);
            at = next_in(node, at);
            name
        };
        let value = node.get(at);
        at = next_in(node, at);
        fields.push((bytes_of(name), bytes_of(value)));
    }
    fields
}

/// The node's first or last entry ID, tombstones included (`lpGetEdgeStreamID`).
fn edge_id(node: &Listpack, master_id: StreamId, first: bool) -> Option<StreamId> {
    let master = master(node);
    let at = if first {
        first_entry(node, &master)?
    } else {
        last_entry(node)?
    };
    Some(entry_at(node, master_id, &master, at).id)
}

// ---------------------------------------------------------------------------------------
// Validating nodes from outside.
// ---------------------------------------------------------------------------------------

/// A stream from outside (RDB, RESTORE) that is not what Redis's operations can leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidStream(pub &'static str);

/// A stream's metadata as RDB stores it. `first_id: None` (type 15 has none): the first
/// live entry's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata {
    pub length: u64,
    pub last_id: StreamId,
    pub first_id: Option<StreamId>,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
}

/// Walks a node from outside element by element, refusing what is missing.
struct Checker<'a> {
    node: &'a Listpack,
    at: Option<Pos>,
}

impl Checker<'_> {
    fn skip(&mut self, elements: u64) -> Result<(), InvalidStream> {
        for _ in 0..elements {
            let at = self
                .at
                .ok_or(InvalidStream("a node ends inside an entry"))?;
            self.at = self.node.next(at);
        }
        Ok(())
    }

    fn int(&mut self, what: &'static str) -> Result<i64, InvalidStream> {
        let at = self
            .at
            .ok_or(InvalidStream("a node ends inside an entry"))?;
        let value = self.node.get(at).as_i64().ok_or(InvalidStream(what))?;
        self.at = self.node.next(at);
        Ok(value)
    }

    fn count(&mut self, what: &'static str) -> Result<u64, InvalidStream> {
        u64::try_from(self.int(what)?).map_err(|_| InvalidStream(what))
    }
}

/// Checks one node as Redis's `streamValidateListpackIntegrity` does (every element
/// where the format puts it, each lp-count right, nothing after the last entry), and
/// what the walks here rely on besides: counts that are not negative, live and deleted
/// counts that match the flags, at least one entry, live entries at or above the master
/// ID and above every live entry before them (`previous_live`). Returns the live count.
fn validate_node(
    node: &Listpack,
    master_id: StreamId,
    previous_live: &mut Option<StreamId>,
) -> Result<u64, InvalidStream> {
    let mut check = Checker {
        node,
        at: node.first(),
    };
    let live = check.count("a node's live count is not a count")?;
    let deleted = check.count("a node's deleted count is not a count")?;
    let master_fields = check.count("a node's field count is not a count")?;
    check.skip(master_fields)?;
    if check.int("no master entry terminator")? != 0 {
        return Err(InvalidStream("no master entry terminator"));
    }
    let entries = live
        .checked_add(deleted)
        .ok_or(InvalidStream("a node's counts overflow"))?;
    if entries == 0 {
        return Err(InvalidStream("a node without entries"));
    }
    let (mut seen_live, mut seen_deleted) = (0u64, 0u64);
    for _ in 0..entries {
        let flags = check.int("an entry's flags are not an integer")?;
        let ms_delta = check.int("an entry's ID is not an integer")?;
        let seq_delta = check.int("an entry's ID is not an integer")?;
        // The elements after the ID: values alone, or a count and names with values.
        let (skipped, counted) = if flags & FLAG_SAMEFIELDS != 0 {
            (master_fields, master_fields)
        } else {
            let fields = check.count("an entry's field count is not a count")?;
            let pairs = fields
                .checked_mul(2)
                .ok_or(InvalidStream("an entry's field count overflows"))?;
            (pairs, pairs + 1)
        };
        check.skip(skipped)?;
        let expected = counted
            .checked_add(3)
            .ok_or(InvalidStream("an entry's field count overflows"))?;
        if check.count("an entry's lp-count is not a count")? != expected {
            return Err(InvalidStream("an entry's lp-count does not match it"));
        }
        if flags & FLAG_DELETED != 0 {
            seen_deleted += 1;
            continue;
        }
        seen_live += 1;
        let id = StreamId {
            ms: master_id.ms.wrapping_add(ms_delta as u64),
            seq: master_id.seq.wrapping_add(seq_delta as u64),
        };
        if id < master_id {
            return Err(InvalidStream("an entry below its node's master ID"));
        }
        if previous_live.is_some_and(|previous| id <= previous) {
            return Err(InvalidStream("entries out of order"));
        }
        *previous_live = Some(id);
    }
    if check.at.is_some() {
        return Err(InvalidStream("elements after a node's last entry"));
    }
    if seen_live != live || seen_deleted != deleted {
        return Err(InvalidStream("a node's counts do not match its entries"));
    }
    Ok(live)
}

// ---------------------------------------------------------------------------------------
// The stream.
// ---------------------------------------------------------------------------------------

impl Stream {
    pub fn new() -> Stream {
        Stream::default()
    }

    /// A stream from its nodes (master ID and listpack, in any order) and its metadata,
    /// every node validated (`validate_node`), the length checked against the nodes and
    /// the last ID against the last live entry; the groups are the caller's to set.
    pub fn from_parts(
        parts: Vec<(StreamId, Listpack)>,
        metadata: Metadata,
    ) -> Result<Stream, InvalidStream> {
        let mut nodes = BTreeMap::new();
        for (master_id, node) in parts {
            if nodes.insert(master_id, node).is_some() {
                return Err(InvalidStream("two nodes with one master ID"));
            }
        }
        let mut previous_live = None;
        let mut length: u64 = 0;
        for (&master_id, node) in &nodes {
            let live = validate_node(node, master_id, &mut previous_live)?;
            length = length
                .checked_add(live)
                .ok_or(InvalidStream("the length overflows"))?;
        }
        if length != metadata.length {
            return Err(InvalidStream("the length does not match the entries"));
        }
        if previous_live.is_some_and(|last_live| last_live > metadata.last_id) {
            return Err(InvalidStream("an entry above the last ID"));
        }
        let mut stream = Stream {
            nodes,
            length,
            last_id: metadata.last_id,
            first_id: metadata.first_id.unwrap_or(StreamId::MIN),
            max_deleted_id: metadata.max_deleted_id,
            entries_added: metadata.entries_added,
            groups: Groups::default(),
        };
        if metadata.first_id.is_none() && length > 0 {
            stream.first_id = stream.first_live_id();
        }
        Ok(stream)
    }

    /// Live entries.
    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The greatest ID the stream ever had (0-0 for a new stream).
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// The first live entry's ID; `None` when the stream is empty.
    pub fn first_id(&self) -> Option<StreamId> {
        (self.length > 0).then_some(self.first_id)
    }

    /// The last live entry's ID (Redis's `streamLastValidID`); `None` when empty.
    pub fn last_entry_id(&self) -> Option<StreamId> {
        self.range(StreamId::MIN, StreamId::MAX, true)
            .next()
            .map(|entry| entry.id)
    }

    /// The first ID as recorded (0-0 when empty): what RDB stores, XINFO's
    /// `recorded-first-entry-id`.
    pub fn recorded_first_id(&self) -> StreamId {
        self.first_id
    }

    pub fn max_deleted_id(&self) -> StreamId {
        self.max_deleted_id
    }

    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// Nodes (Redis's radix-tree keys).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Each node as its master ID and its listpack, in ID order (what RDB writes).
    pub fn nodes(&self) -> impl Iterator<Item = (StreamId, &Listpack)> + '_ {
        self.nodes.iter().map(|(id, node)| (*id, node))
    }

    /// OBJECT ENCODING's answer.
    pub fn encoding(&self) -> &'static str {
        "stream"
    }

    /// Whether a live entry has this ID.
    pub fn contains(&self, id: StreamId) -> bool {
        self.range(id, id, false).next().is_some()
    }

    /// The live entry with this ID.
    pub fn get(&self, id: StreamId) -> Option<StreamEntry> {
        self.range(id, id, false).next()
    }

    /// Entries with start <= id <= end, ascending, or descending when `reverse`.
    pub fn range(&self, start: StreamId, end: StreamId, reverse: bool) -> Range<'_> {
        let nodes = if reverse {
            self.nodes.range(..=end)
        } else {
            // The node holding `start` begins at or below it.
            match self.nodes.range(..=start).next_back() {
                Some((&floor, _)) => self.nodes.range(floor..),
                None => self.nodes.range(..),
            }
        };
        Range {
            nodes,
            current: None,
            start,
            end,
            reverse,
            done: start > end,
        }
    }

    /// The ID XADD would give an entry for `request` now (`now_ms`).
    pub fn resolve_id(&self, request: NewId, now_ms: u64) -> Result<StreamId, AppendError> {
        let id = match request {
            NewId::Auto if now_ms > self.last_id.ms => StreamId::new(now_ms, 0),
            NewId::Auto => self.last_id.next().ok_or(AppendError::IdNotGreater)?,
            NewId::AutoSeq(ms) if ms == self.last_id.ms => match self.last_id.seq.checked_add(1) {
                Some(seq) => StreamId::new(ms, seq),
                None => return Err(AppendError::SequenceExhausted),
            },
            NewId::AutoSeq(ms) => StreamId::new(ms, 0),
            NewId::Exact(id) => id,
        };
        if id > self.last_id {
            Ok(id)
        } else {
            Err(AppendError::IdNotGreater)
        }
    }

    /// Appends an entry with ID `id` (above the last ID) and these field-value pairs
    /// (at least one).
    pub fn append(&mut self, id: StreamId, fields: &[(&[u8], &[u8])]) -> Result<(), AppendError> {
        if id <= self.last_id {
            return Err(AppendError::IdNotGreater);
        }
        let entry_bytes: usize = fields
            .iter()
            .map(|(name, value)| name.len() + value.len())
            .sum();
        if entry_bytes > NODE_BYTES_MAX {
            return Err(AppendError::TooLarge);
        }
        let tail = self
            .nodes
            .last_key_value()
            .filter(|(_, node)| takes_more(node, entry_bytes))
            .map(|(&master_id, _)| master_id);
        match tail {
            Some(master_id) => {
                let node = self.nodes.get_mut(&master_id).expect("the tail node");
                append_to(node, master_id, id, fields);
            }
            None => {
                self.nodes.insert(id, new_node(fields));
            }
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(())
    }

    /// Deletes the live entry `id` as XDEL does: the entry is flagged deleted (its node
    /// goes with its last live entry), the max deleted ID and the first ID follow.
    pub fn delete(&mut self, id: StreamId) -> bool {
        let Some((&master_id, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let header = master(node);
        let mut at = first_entry(node, &header);
        let found = loop {
            let Some(flags_pos) = at else { break None };
            let entry = entry_at(node, master_id, &header, flags_pos);
            if entry.id > id {
                break None;
            }
            if entry.id == id && !entry.deleted() {
                break Some(entry);
            }
            at = node.next(entry.lp_count);
        };
        let Some(entry) = found else { return false };
        if header.live == 1 {
            self.nodes.remove(&master_id);
        } else {
            // The flags first: they sit after the counters, whose positions stay put.
            node.replace(entry.flags_pos, &int(entry.flags | FLAG_DELETED));
            set_counts(node, header.live - 1, header.deleted + 1);
        }
        self.length -= 1;
        if id > self.max_deleted_id {
            self.max_deleted_id = id;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if id == self.first_id {
            self.first_id = self.first_live_id();
        }
        true
    }

    /// Trims as Redis's `streamTrim`: whole nodes from the front while they go entirely;
    /// then, unless `approx`, the entries of the next node that go are flagged deleted.
    /// Returns how many entries went. The max deleted ID is left alone (Redis's).
    pub fn trim(&mut self, trim: &Trim) -> u64 {
        let mut deleted: u64 = 0;
        while let Some((&master_id, node)) = self.nodes.first_key_value() {
            if let TrimStrategy::MaxLen(max) = trim.strategy
                && self.length <= max
            {
                break;
            }
            let header = master(node);
            let live = header.live as u64;
            if trim.limit != 0 && deleted + live > trim.limit {
                break;
            }
            let whole = match trim.strategy {
                TrimStrategy::MaxLen(max) => self.length - live >= max,
                TrimStrategy::MinId(min) => {
                    edge_id(node, master_id, false).is_some_and(|last| last < min)
                }
            };
            if whole {
                self.nodes.remove(&master_id);
                self.length -= live;
                deleted += live;
                continue;
            }
            if trim.approx {
                break;
            }
            let node = self.nodes.get_mut(&master_id).expect("the first node");
            let flagged = flag_front(node, master_id, &header, trim.strategy, self.length);
            self.length -= flagged;
            deleted += flagged;
            set_counts(
                node,
                header.live - flagged as i64,
                header.deleted + flagged as i64,
            );
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.first_live_id();
        }
        deleted
    }

    /// XSETID's changes, checked by the command.
    pub fn set_last_id(&mut self, id: StreamId) {
        self.last_id = id;
    }

    pub fn set_entries_added(&mut self, entries_added: u64) {
        self.entries_added = entries_added;
    }

    pub fn set_max_deleted_id(&mut self, id: StreamId) {
        self.max_deleted_id = id;
    }

    /// The first live entry's ID (the stream is not empty).
    fn first_live_id(&self) -> StreamId {
        self.range(StreamId::MIN, StreamId::MAX, false)
            .next()
            .map_or(StreamId::MAX, |entry| entry.id)
    }

    /// The first entry's ID, tombstones included (`streamGetEdgeID(s,1,0)`): an exact
    /// MINID trim to it removes nothing.
    pub fn first_edge_id(&self) -> Option<StreamId> {
        let (&master_id, node) = self.nodes.first_key_value()?;
        edge_id(node, master_id, true)
    }

    /// Heap bytes held, approximately (capture accounting).
    pub fn approx_bytes(&self) -> usize {
        self.nodes.values().map(|node| node.byte_len() + 48).sum()
    }

    /// MEMORY USAGE's measure of the entries (Redis's `objectComputeSize`: the first
    /// `samples` nodes averaged for all but the last, which is measured); groups are not
    /// counted here.
    pub fn memory_usage(&self, samples: usize) -> usize {
        // A B-tree leaf holds up to 11 keys and values; count a leaf per 11 nodes.
        let slot = size_of::<StreamId>() + size_of::<Listpack>();
        let tree = self.nodes.len().div_ceil(11) * memory::allocation(11 * slot + 16);
        let count = self.nodes.len();
        let measured: Vec<usize> = self
            .nodes
            .values()
            .take(samples.max(1))
            .map(|node| memory::allocation(node.byte_len()))
            .collect();
        let nodes = if count <= measured.len() {
            measured.iter().sum()
        } else {
            let average = measured.iter().sum::<usize>() / measured.len();
            let last = self
                .nodes
                .values()
                .next_back()
                .map_or(0, |node| memory::allocation(node.byte_len()));
            average * (count - 1) + last
        };
        tree + nodes
    }
}

/// Whether the tail node takes one more entry of `entry_bytes` bytes of fields and
/// values (Redis's test: the node's bytes plus those, then its entry count).
fn takes_more(node: &Listpack, entry_bytes: usize) -> bool {
    let bytes_max = match limits::stream_node_max_bytes() {
        0 => NODE_BYTES_MAX,
        n if n as u64 > NODE_BYTES_MAX as u64 => NODE_BYTES_MAX,
        n => n as usize,
    };
    if node.byte_len() + entry_bytes >= bytes_max {
        return false;
    }
    let entries_max = limits::stream_node_max_entries();
    if entries_max > 0 {
        let header = master(node);
        if header.live + header.deleted >= entries_max {
            return false;
        }
    }
    true
}

/// A node whose master entry takes `fields`' names, holding one entry.
fn new_node(fields: &[(&[u8], &[u8])]) -> Listpack {
    let mut elements: Vec<Vec<u8>> = Vec::with_capacity(fields.len() * 2 + 8);
    elements.push(int(1));
    elements.push(int(0));
    elements.push(int(fields.len() as i64));
    elements.extend(fields.iter().map(|(name, _)| name.to_vec()));
    elements.push(int(0));
    // The entry: its ID equals the master's, its names are the master's.
    elements.push(int(FLAG_SAMEFIELDS));
    elements.push(int(0));
    elements.push(int(0));
    elements.extend(fields.iter().map(|(_, value)| value.to_vec()));
    elements.push(int(fields.len() as i64 + 3));
    elements.iter().map(Vec::as_slice).collect()
}

/// Appends an entry to `node` and counts it in the master entry.
fn append_to(node: &mut Listpack, master_id: StreamId, id: StreamId, fields: &[(&[u8], &[u8])]) {
    let header = master(node);
    let mut name_at = header.fields;
    let same = fields.len() == header.field_count
        && fields.iter().all(|(name, _)| {
            let same = node.get(name_at).eq_bytes(name);
            if let Some(next) = node.next(name_at) {
                name_at = next;
            }
            same
        });
    let mut elements: Vec<Vec<u8>> = Vec::with_capacity(fields.len() * 2 + 5);
    elements.push(int(if same { FLAG_SAMEFIELDS } else { 0 }));
    elements.push(int(id.ms.wrapping_sub(master_id.ms) as i64));
    elements.push(int(id.seq.wrapping_sub(master_id.seq) as i64));
    if same {
        elements.extend(fields.iter().map(|(_, value)| value.to_vec()));
        elements.push(int(fields.len() as i64 + 3));
    } else {
        elements.push(int(fields.len() as i64));
        for (name, value) in fields {
            elements.push(name.to_vec());
            elements.push(value.to_vec());
        }
        elements.push(int(2 * fields.len() as i64 + 4));
    }
    node.extend(elements.iter().map(Vec::as_slice));
    let count_pos = header.count_pos;
    node.replace(count_pos, int(header.live + 1).as_slice());
}

/// Rewrites a node's live and deleted counts.
fn set_counts(node: &mut Listpack, live: i64, deleted: i64) {
    let count_pos = node.first().expect("a master entry");
    node.replace(count_pos, &int(live));
    let deleted_pos = next_in(node, count_pos);
    node.replace(deleted_pos, &int(deleted));
}

/// Flags deleted the entries at the front of the stream's first node that `strategy`
/// removes; returns how many live entries it flagged. `length` is the stream's.
fn flag_front(
    node: &mut Listpack,
    master_id: StreamId,
    header: &Master,
    strategy: TrimStrategy,
    mut length: u64,
) -> u64 {
    let mut flagged = 0;
    let mut at = first_entry(node, header);
    while let Some(flags_pos) = at {
        let entry = entry_at(node, master_id, header, flags_pos);
        let stop = match strategy {
            TrimStrategy::MaxLen(max) => length <= max,
            TrimStrategy::MinId(min) => entry.id >= min,
        };
        if stop {
            break;
        }
        if entry.deleted() {
            at = node.next(entry.lp_count);
            continue;
        }
        // The new flags may be longer or shorter: find the next entry again from the
        // flags' position, which the replacement keeps.
        let flags_pos = node.replace(entry.flags_pos, &int(entry.flags | FLAG_DELETED));
        let entry = entry_at(node, master_id, header, flags_pos);
        flagged += 1;
        length -= 1;
        at = node.next(entry.lp_count);
    }
    flagged
}

/// `Stream::range`'s iterator.
pub struct Range<'a> {
    nodes: btree_map::Range<'a, StreamId, Listpack>,
    current: Option<NodeCursor<'a>>,
    start: StreamId,
    end: StreamId,
    reverse: bool,
    done: bool,
}

struct NodeCursor<'a> {
    master_id: StreamId,
    node: &'a Listpack,
    master: Master,
    /// The flags of the next entry to look at.
    next: Option<Pos>,
}

impl<'a> Iterator for Range<'a> {
    type Item = StreamEntry;

    fn next(&mut self) -> Option<StreamEntry> {
        while !self.done {
            let Some(cursor) = &mut self.current else {
                let next = if self.reverse {
                    self.nodes.next_back()
                } else {
                    self.nodes.next()
                };
                let Some((&master_id, node)) = next else {
                    self.done = true;
                    return None;
                };
                let master = master(node);
                let next = if self.reverse {
                    last_entry(node)
                } else {
                    first_entry(node, &master)
                };
                self.current = Some(NodeCursor {
                    master_id,
                    node,
                    master,
                    next,
                });
                continue;
            };
            let Some(flags_pos) = cursor.next else {
                self.current = None;
                continue;
            };
            let node = cursor.node;
            let entry = entry_at(node, cursor.master_id, &cursor.master, flags_pos);
            cursor.next = if self.reverse {
                node.prev(entry.flags_pos)
                    .and_then(|lp_count| entry_before(node, lp_count))
            } else {
                node.next(entry.lp_count)
            };
            if entry.deleted() {
                continue;
            }
            let (before, after) = if self.reverse {
                (entry.id > self.end, entry.id < self.start)
            } else {
                (entry.id < self.start, entry.id > self.end)
            };
            if before {
                continue;
            }
            if after {
                self.done = true;
                return None;
            }
            return Some(StreamEntry {
                id: entry.id,
                fields: fields_of(node, &cursor.master, &entry),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests;
