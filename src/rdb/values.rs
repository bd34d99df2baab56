//! The value encodings: what follows a key's type byte and name, for each type, both ways.
//!
//! Written as Redis 7.0 writes them: strings (type 0); lists as a quicklist of listpack
//! nodes (18); hashes and sorted sets as their listpack while small (16, 17), field by
//! field past that (4, 5: scores as binary doubles); sets as their intset (11) or member
//! by member (2); streams as type 19 (`STREAM_LISTPACKS_2`: each node's master ID and
//! listpack, the metadata, then the groups through `stream_groups`). A listpack or intset
//! goes out as the bytes it already is, and comes back validated and kept as it is, so a
//! loaded value has the encoding it had (OBJECT ENCODING). Read besides, from older
//! versions: the plain LIST and ZSET types, the streams of Redis 5 and 6 (15), and the
//! ziplist-era types (zipmap hashes 9, ziplist lists 10, sorted sets 12 and hashes 13,
//! quicklists of ziplists 14), converted as Redis 7.0 converts them on load (`ziplist`,
//! `zipmap`). Modules are [`RdbError::UnsupportedType`].
//!
//! A collection read empty (no nodes, or only empty listpacks) comes back empty: the
//! reader then skips the key, as Redis 7.0 does; a stream, which may be empty, is kept.

use super::reader::RdbReader;
use super::writer::RdbWriter;
use super::{Corruption, RdbError, corrupt, value_type, ziplist, zipmap};
use crate::keyspace::{Access, Value};
use crate::types::hash::InvalidHash;
use crate::types::intset::Intset;
use crate::types::list::End;
use crate::types::listpack::{Listpack, LpValue};
use crate::types::stream::Metadata;
use crate::types::stream_id::StreamId;
use crate::types::{Hash, List, Set, Str, Stream, ZSet, score};
use std::io::{Read, Write};
use std::sync::Arc;

/// Which collection a damaged value was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    List,
    Hash,
    Set,
    SortedSet,
    Stream,
}

impl std::fmt::Display for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Collection::List => "list",
            Collection::Hash => "hash",
            Collection::Set => "set",
            Collection::SortedSet => "sorted set",
            Collection::Stream => "stream",
        })
    }
}

/// RDB quicklist node containers (Redis's QUICKLIST_NODE_CONTAINER_*).
const CONTAINER_PLAIN: u64 = 1;
const CONTAINER_PACKED: u64 = 2;

/// The RDB type byte `value` is written with.
pub(super) fn type_byte(value: &Value) -> u8 {
    match value {
        Value::String(_, _) => value_type::STRING,
        Value::List(_, _) => value_type::LIST_QUICKLIST_2,
        Value::Hash(hash, _) => match **hash {
            Hash::Listpack(_) => value_type::HASH_LISTPACK,
            Hash::Table(_) => value_type::HASH,
        },
        Value::Set(set, _) => match **set {
            Set::Intset(_) => value_type::SET_INTSET,
            Set::Table(_) => value_type::SET,
        },
        Value::ZSet(zset, _) => match **zset {
            ZSet::Listpack(_) => value_type::ZSET_LISTPACK,
            ZSet::Tree(_) => value_type::ZSET_2,
        },
        Value::Stream(_, _) => value_type::STREAM_LISTPACKS_2,
    }
}

/// Writes `value`'s body, in the encoding `type_byte` names (the type byte and the key
/// are written already).
pub(super) fn write<W: Write>(writer: &mut RdbWriter<W>, value: &Value) -> Result<(), RdbError> {
    match value {
        Value::String(string, _) => writer.write_string(string),
        Value::List(list, _) => write_list(writer, list),
        Value::Hash(hash, _) => write_hash(writer, hash),
        Value::Set(set, _) => write_set(writer, set),
        Value::ZSet(zset, _) => write_zset(writer, zset),
        Value::Stream(stream, _) => write_stream(writer, stream),
    }
}

/// Value types that RDB version 10 defines, supported here or not; anything else is
/// damage, not a newer feature (a newer feature comes with a newer version).
pub(super) fn check_type(type_byte: u8, offset: u64) -> Result<(), RdbError> {
    use value_type::*;
    match type_byte {
        STRING | LIST | SET | ZSET | HASH | ZSET_2 | HASH_ZIPMAP | LIST_ZIPLIST | SET_INTSET
        | ZSET_ZIPLIST | HASH_ZIPLIST | LIST_QUICKLIST | HASH_LISTPACK | ZSET_LISTPACK
        | LIST_QUICKLIST_2 | STREAM_LISTPACKS | STREAM_LISTPACKS_2 => Ok(()),
        MODULE_PRE_GA | MODULE_2 => Err(RdbError::UnsupportedType(type_byte)),
        _ => Err(corrupt(offset, Corruption::UnknownType(type_byte))),
    }
}

/// Reads the body of a value of type `value_type` (already checked by `check_type`).
pub(super) fn read<R: Read>(reader: &mut RdbReader<R>, value_type: u8) -> Result<Value, RdbError> {
    use value_type::*;
    match value_type {
        STRING => Ok(Value::string(Str::from(&reader.read_string()?[..]))),
        LIST | LIST_ZIPLIST | LIST_QUICKLIST | LIST_QUICKLIST_2 => Ok(Value::List(
            Arc::new(read_list(reader, value_type)?),
            Access::new(),
        )),
        HASH | HASH_ZIPMAP | HASH_ZIPLIST | HASH_LISTPACK => Ok(Value::Hash(
            Arc::new(read_hash(reader, value_type)?),
            Access::new(),
        )),
        SET | SET_INTSET => Ok(Value::Set(
            Arc::new(read_set(reader, value_type)?),
            Access::new(),
        )),
        ZSET | ZSET_2 | ZSET_ZIPLIST | ZSET_LISTPACK => Ok(Value::ZSet(
            Arc::new(read_zset(reader, value_type)?),
            Access::new(),
        )),
        STREAM_LISTPACKS | STREAM_LISTPACKS_2 => Ok(Value::Stream(
            Arc::new(read_stream(reader, value_type)?),
            Access::new(),
        )),
        other => Err(RdbError::UnsupportedType(other)),
    }
}

// ---------------------------------------------------------------------------------------
// Streams

/// Redis 7.0's type 19: the node count, each node as its 16-byte big-endian master ID and
/// its listpack (both as strings), the length, the last ID, the recorded first ID, the max
/// deleted ID, entries added, then the consumer groups.
fn write_stream<W: Write>(writer: &mut RdbWriter<W>, stream: &Stream) -> Result<(), RdbError> {
    writer.write_length(stream.node_count() as u64)?;
    for (master_id, node) in stream.nodes() {
        writer.write_string(&master_id.to_be_bytes())?;
        writer.write_string(node.as_bytes())?;
    }
    writer.write_length(stream.len())?;
    for id in [
        stream.last_id(),
        stream.recorded_first_id(),
        stream.max_deleted_id(),
    ] {
        writer.write_length(id.ms)?;
        writer.write_length(id.seq)?;
    }
    writer.write_length(stream.entries_added())?;
    super::stream_groups::write(writer, &stream.groups)
}

/// Types 19 and 15 (Redis 5 and 6: no first ID, max deleted ID or entries added, which
/// load as Redis 7.0 sets them: the first live entry's ID, 0-0 and the length). Every
/// node is validated before the stream is built (`Stream::from_parts`).
fn read_stream<R: Read>(reader: &mut RdbReader<R>, value_type: u8) -> Result<Stream, RdbError> {
    let offset = reader.offset();
    let node_count = reader.read_length()?;
    // Not allocated on the count: it is only what the file says.
    let mut nodes = Vec::new();
    for _ in 0..node_count {
        let key = reader.read_string()?;
        let key: [u8; 16] = key[..]
            .try_into()
            .map_err(|_| corrupt(offset, Corruption::StreamNodeKey(key.len())))?;
        let blob = reader.read_string()?;
        let node = Listpack::from_bytes(&blob)
            .map_err(|e| corrupt(offset, Corruption::Listpack(Collection::Stream, e)))?;
        nodes.push((StreamId::from_be_bytes(key), node));
    }
    let length = reader.read_length()?;
    let last_id = StreamId::new(reader.read_length()?, reader.read_length()?);
    let metadata = if value_type == value_type::STREAM_LISTPACKS_2 {
        let first_id = StreamId::new(reader.read_length()?, reader.read_length()?);
        let max_deleted_id = StreamId::new(reader.read_length()?, reader.read_length()?);
        Metadata {
            length,
            last_id,
            first_id: Some(first_id),
            max_deleted_id,
            entries_added: reader.read_length()?,
        }
    } else {
        Metadata {
            length,
            last_id,
            first_id: None,
            max_deleted_id: StreamId::MIN,
            entries_added: length,
        }
    };
    let mut stream = Stream::from_parts(nodes, metadata)
        .map_err(|invalid| corrupt(offset, Corruption::Stream(invalid.0)))?;
    let counters = crate::types::stream_groups::StreamPosition::of(&stream);
    stream.groups = super::stream_groups::read(reader, value_type, &counters)?;
    Ok(stream)
}

// ---------------------------------------------------------------------------------------
// Lists

/// The node count, then each node as PACKED and its listpack.
fn write_list<W: Write>(writer: &mut RdbWriter<W>, list: &List) -> Result<(), RdbError> {
    writer.write_length(list.nodes().len() as u64)?;
    for node in list.nodes() {
        debug_assert!(!node.is_empty());
        writer.write_length(CONTAINER_PACKED)?;
        writer.write_string(node.as_bytes())?;
    }
    Ok(())
}

/// Empty listpack nodes are skipped, as Redis 7.0 does; a PLAIN node (one large element)
/// becomes an element like any other.
fn read_list<R: Read>(reader: &mut RdbReader<R>, value_type: u8) -> Result<List, RdbError> {
    let mut list = List::default();
    match value_type {
        value_type::LIST_QUICKLIST_2 => {
            let nodes = reader.read_length()?;
            for _ in 0..nodes {
                let offset = reader.offset();
                let container = reader.read_length()?;
                if container != CONTAINER_PACKED && container != CONTAINER_PLAIN {
                    return Err(corrupt(offset, Corruption::QuicklistContainer(container)));
                }
                let blob = reader.read_string()?;
                if blob.is_empty() {
                    return Err(corrupt(offset, Corruption::EmptyQuicklistNode));
                }
                if container == CONTAINER_PLAIN {
                    list.push(End::Right, &blob);
                    continue;
                }
                let node = Listpack::from_bytes(&blob)
                    .map_err(|e| corrupt(offset, Corruption::Listpack(Collection::List, e)))?;
                list.append_node(node);
            }
            Ok(list)
        }
        value_type::LIST => {
            let len = reader.read_length()?;
            for _ in 0..len {
                let value = reader.read_string()?;
                list.push(End::Right, &value);
            }
            Ok(list)
        }
        // Redis < 7.0: one ziplist, whose entries are pushed as a client's would be.
        value_type::LIST_ZIPLIST => {
            let offset = reader.offset();
            let blob = reader.read_string()?;
            let entries = ziplist::entries(&blob)
                .map_err(|e| corrupt(offset, Corruption::Ziplist(Collection::List, e)))?;
            let mut text = Vec::new();
            for entry in entries {
                text.clear();
                entry.write_to(&mut text);
                list.push(End::Right, &text);
            }
            Ok(list)
        }
        // Redis < 7.0: a quicklist of ziplist nodes, each becoming a listpack node as it
        // is; empty ones are skipped.
        value_type::LIST_QUICKLIST => {
            let nodes = reader.read_length()?;
            for _ in 0..nodes {
                let offset = reader.offset();
                let blob = reader.read_string()?;
                let node = ziplist::to_listpack(&blob)
                    .map_err(|e| corrupt(offset, Corruption::Ziplist(Collection::List, e)))?;
                if !node.is_empty() {
                    list.append_node(node);
                }
            }
            Ok(list)
        }
        other => Err(RdbError::UnsupportedType(other)),
    }
}

// ---------------------------------------------------------------------------------------
// Hashes

fn write_hash<W: Write>(writer: &mut RdbWriter<W>, hash: &Hash) -> Result<(), RdbError> {
    match hash {
        Hash::Listpack(lp) => writer.write_string(lp.as_bytes()),
        Hash::Table(table) => {
            writer.write_length(table.len() as u64)?;
            for (field, value) in table.iter() {
                writer.write_string(field)?;
                writer.write_string(value)?;
            }
            Ok(())
        }
    }
}

fn read_hash<R: Read>(reader: &mut RdbReader<R>, value_type: u8) -> Result<Hash, RdbError> {
    let offset = reader.offset();
    match value_type {
        value_type::HASH_LISTPACK => {
            let blob = reader.read_string()?;
            let lp = Listpack::from_bytes(&blob)
                .map_err(|e| corrupt(offset, Corruption::Listpack(Collection::Hash, e)))?;
            hash_from_listpack(lp, offset, false)
        }
        // Redis < 7.0: a ziplist of fields and values (13), or a zipmap (9).
        value_type::HASH_ZIPLIST => {
            let blob = reader.read_string()?;
            let lp = ziplist::to_listpack(&blob)
                .map_err(|e| corrupt(offset, Corruption::Ziplist(Collection::Hash, e)))?;
            hash_from_listpack(lp, offset, false)
        }
        value_type::HASH_ZIPMAP => {
            let blob = reader.read_string()?;
            let pairs = zipmap::pairs(&blob).map_err(|e| corrupt(offset, Corruption::Zipmap(e)))?;
            let mut lp = Listpack::new();
            for (field, value) in pairs {
                lp.push_back(field);
                lp.push_back(value);
            }
            hash_from_listpack(lp, offset, true)
        }
        value_type::HASH => {
            let len = reader.read_length()?;
            let mut hash = Hash::for_field_count(len);
            for _ in 0..len {
                let field = reader.read_string()?;
                let value = reader.read_string()?;
                if !hash.set(&field, &value) {
                    return Err(corrupt(offset, Corruption::Duplicate(Collection::Hash)));
                }
            }
            Ok(hash)
        }
        other => Err(RdbError::UnsupportedType(other)),
    }
}

/// A hash from its listpack of fields and values: kept as it is, or converted to a table
/// past `hash-max-listpack-entries` (and, with `check_lengths`, `-value`), as Redis 7.0
/// converts on load.
fn hash_from_listpack(lp: Listpack, offset: u64, check_lengths: bool) -> Result<Hash, RdbError> {
    Hash::from_listpack_checking(lp, check_lengths).map_err(|error| {
        let reason = match error {
            InvalidHash::OddEntryCount => Corruption::OddListpack(Collection::Hash),
            InvalidHash::DuplicateField => Corruption::Duplicate(Collection::Hash),
        };
        corrupt(offset, reason)
    })
}

// ---------------------------------------------------------------------------------------
// Sets

fn write_set<W: Write>(writer: &mut RdbWriter<W>, set: &Set) -> Result<(), RdbError> {
    match set {
        Set::Intset(intset) => writer.write_string(intset.as_bytes()),
        Set::Table(table) => {
            writer.write_length(table.len() as u64)?;
            for member in table.iter() {
                writer.write_string(member)?;
            }
            Ok(())
        }
    }
}

fn read_set<R: Read>(reader: &mut RdbReader<R>, value_type: u8) -> Result<Set, RdbError> {
    let offset = reader.offset();
    match value_type {
        value_type::SET_INTSET => {
            let blob = reader.read_string()?;
            let intset =
                Intset::from_bytes(&blob).map_err(|e| corrupt(offset, Corruption::Intset(e)))?;
            Ok(Set::from_intset(intset))
        }
        value_type::SET => {
            let len = reader.read_length()?;
            let mut set = Set::default();
            for _ in 0..len {
                let member = reader.read_string()?;
                if !set.insert(&member) {
                    return Err(corrupt(offset, Corruption::Duplicate(Collection::Set)));
                }
            }
            Ok(set)
        }
        other => Err(RdbError::UnsupportedType(other)),
    }
}

// ---------------------------------------------------------------------------------------
// Sorted sets

fn write_zset<W: Write>(writer: &mut RdbWriter<W>, zset: &ZSet) -> Result<(), RdbError> {
    match zset {
        ZSet::Listpack(lp) => writer.write_string(lp.as_bytes()),
        ZSet::Tree(tree) => {
            writer.write_length(tree.len() as u64)?;
            // Highest first, as Redis writes its skiplist from the tail.
            for (member, score) in tree.iter().rev() {
                writer.write_string(member)?;
                writer.write_binary_double(score)?;
            }
            Ok(())
        }
    }
}

fn read_zset<R: Read>(reader: &mut RdbReader<R>, value_type: u8) -> Result<ZSet, RdbError> {
    let offset = reader.offset();
    let duplicate = || corrupt(offset, Corruption::Duplicate(Collection::SortedSet));
    match value_type {
        value_type::ZSET_LISTPACK | value_type::ZSET_ZIPLIST => {
            let blob = reader.read_string()?;
            let lp = if value_type == value_type::ZSET_ZIPLIST {
                // Redis < 7.0: the same pairs in a ziplist.
                ziplist::to_listpack(&blob)
                    .map_err(|e| corrupt(offset, Corruption::Ziplist(Collection::SortedSet, e)))?
            } else {
                Listpack::from_bytes(&blob)
                    .map_err(|e| corrupt(offset, Corruption::Listpack(Collection::SortedSet, e)))?
            };
            if !lp.len().is_multiple_of(2) {
                return Err(corrupt(
                    offset,
                    Corruption::OddListpack(Collection::SortedSet),
                ));
            }
            let mut items = lp.iter();
            let mut elements = Vec::new();
            let mut seen = std::collections::HashSet::new();
            while let (Some(member), Some(score)) = (items.next(), items.next()) {
                let score = match score {
                    LpValue::Int(n) => n as f64,
                    LpValue::Bytes(bytes) => score::parse(bytes)
                        .ok_or_else(|| corrupt(offset, Corruption::ListpackScore))?,
                };
                let member = member.to_bytes();
                if !seen.insert(member.clone()) {
                    return Err(duplicate());
                }
                elements.push((member, score));
            }
            Ok(ZSet::from_elements(elements))
        }
        value_type::ZSET_2 | value_type::ZSET => {
            let len = reader.read_length()?;
            let mut elements = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for _ in 0..len {
                let member = reader.read_string()?.to_vec();
                let score = if value_type == value_type::ZSET_2 {
                    reader.read_binary_double()?
                } else {
                    reader.read_text_double()?
                };
                if score.is_nan() {
                    return Err(corrupt(offset, Corruption::NanScore));
                }
                if !seen.insert(member.clone()) {
                    return Err(duplicate());
                }
                elements.push((member, score));
            }
            Ok(ZSet::from_elements(elements))
        }
        other => Err(RdbError::UnsupportedType(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Entry, NO_EXPIRY};
    use crate::rdb::test_support::{fixed_options, hand_made};
    use crate::rdb::{RdbWriter, load};

    /// Writes `values` under keys of their own, loads the file back: the values loaded.
    fn round_trip(values: &[Value]) -> Vec<Value> {
        let mut writer = RdbWriter::new(Vec::new(), &fixed_options()).unwrap();
        for (index, value) in values.iter().enumerate() {
            let entry = Entry {
                key: format!("key:{index}").into_bytes().into(),
                value: value.clone(),
                expire_at_ms: NO_EXPIRY,
            };
            writer.write_entry(0, &entry).unwrap();
        }
        let (file, _) = writer.finish().unwrap();
        load_values(&file).unwrap()
    }

    fn load_values(file: &[u8]) -> Result<Vec<Value>, RdbError> {
        let mut loaded = Vec::new();
        load(file, &mut |_db: u32, entry: Entry| {
            loaded.push(entry.value);
            Ok(())
        })?;
        Ok(loaded)
    }

    #[test]
    fn every_encoding_written_loads_back_the_same() {
        let mut small_hash = Hash::default();
        let mut big_hash = Hash::default();
        let mut small_set = Set::default();
        let mut big_set = Set::default();
        let mut small_zset = ZSet::default();
        let mut big_zset = ZSet::default();
        let mut list = List::default();
        for i in 0..600 {
            let text = format!("element:{i}");
            if i < 10 {
                small_hash.set(text.as_bytes(), b"value");
                small_set.insert(i.to_string().as_bytes());
                small_zset.insert(text.as_bytes(), f64::from(i) / 3.0);
            }
            big_hash.set(text.as_bytes(), &text.as_bytes().repeat(3));
            big_set.insert(text.as_bytes());
            big_zset.insert(text.as_bytes(), -f64::from(i));
            list.push(End::Right, text.as_bytes());
            list.push(End::Left, &i.to_string().into_bytes());
        }
        let values = vec![
            Value::string(Str::from("a string")),
            Value::List(Arc::new(list), Access::new()),
            Value::Hash(Arc::new(small_hash), Access::new()),
            Value::Hash(Arc::new(big_hash), Access::new()),
            Value::Set(Arc::new(small_set), Access::new()),
            Value::Set(Arc::new(big_set), Access::new()),
            Value::ZSet(Arc::new(small_zset), Access::new()),
            Value::ZSet(Arc::new(big_zset), Access::new()),
        ];
        let types: Vec<u8> = values.iter().map(type_byte).collect();
        assert_eq!(types, [0, 18, 16, 4, 11, 2, 17, 5]);
        let loaded = round_trip(&values);
        assert_eq!(loaded, values);
        for (loaded, written) in loaded.iter().zip(&values) {
            assert_eq!(loaded.encoding(), written.encoding());
        }
    }

    /// A stream of many nodes with deleted entries and XSETID's metadata.
    fn stream() -> Stream {
        let mut stream = Stream::new();
        for i in 1..=300u64 {
            let value = i.to_string();
            let fields: Vec<(&[u8], &[u8])> = if i % 4 == 0 {
                vec![(b"other", value.as_bytes())]
            } else {
                vec![(b"f", value.as_bytes()), (b"g", b"x")]
            };
            stream.append(StreamId::new(i, i % 3), &fields).unwrap();
        }
        for i in (1..300).step_by(7) {
            stream.delete(StreamId::new(i, i % 3));
        }
        stream.set_last_id(StreamId::new(900, 1));
        stream.set_entries_added(1000);
        stream
    }

    #[test]
    fn streams_load_back_with_their_nodes_and_metadata() {
        let written = stream();
        assert!(written.node_count() > 2);
        let values = vec![
            Value::Stream(Arc::new(written.clone()), Access::new()),
            Value::Stream(Arc::new(Stream::new()), Access::new()),
        ];
        assert_eq!(values.iter().map(type_byte).collect::<Vec<_>>(), [19, 19]);
        let loaded = round_trip(&values);
        assert_eq!(loaded, values, "an empty stream is kept");
        let Value::Stream(loaded, _) = &loaded[0] else {
            panic!("a stream")
        };
        let nodes = |stream: &Stream| -> Vec<(StreamId, Vec<u8>)> {
            stream
                .nodes()
                .map(|(id, node)| (id, node.as_bytes().to_vec()))
                .collect()
        };
        assert_eq!(nodes(loaded), nodes(&written));
        assert_eq!(loaded.recorded_first_id(), written.recorded_first_id());
        assert_eq!(loaded.max_deleted_id(), written.max_deleted_id());
        assert_eq!(loaded.entries_added(), 1000);
    }

    /// Every single-byte change to a stream's body either fails to load or loads a stream
    /// whose walks (both ways) and changes work.
    #[test]
    fn damaged_streams_are_refused_or_sound() {
        let mut writer = RdbWriter::headless(Vec::new(), false);
        let mut small = Stream::new();
        for i in 1..=9u64 {
            let value = i.to_string();
            let fields: Vec<(&[u8], &[u8])> = if i % 3 == 0 {
                vec![(b"o", value.as_bytes())]
            } else {
                vec![(b"f", value.as_bytes()), (b"g", b"-7")]
            };
            small.append(StreamId::new(i, 0), &fields).unwrap();
        }
        small.delete(StreamId::new(4, 0));
        write_stream(&mut writer, &small).unwrap();
        let body = writer.into_output().unwrap();
        let mut refused = 0;
        for at in 0..body.len() {
            for byte in [0u8, 1, 2, 3, 0x7f, 0x80, 0xc0, 0xf0, 0xff, body[at] ^ 1] {
                let mut damaged = body.clone();
                damaged[at] = byte;
                let mut reader = RdbReader::bare(&damaged[..], 10);
                let Ok(mut stream) = read_stream(&mut reader, value_type::STREAM_LISTPACKS_2)
                else {
                    refused += 1;
                    continue;
                };
                let forward: Vec<_> = stream.range(StreamId::MIN, StreamId::MAX, false).collect();
                let mut backward: Vec<_> =
                    stream.range(StreamId::MIN, StreamId::MAX, true).collect();
                backward.reverse();
                assert_eq!(forward, backward);
                assert_eq!(forward.len() as u64, stream.len());
                let last = stream.last_id();
                if let Some(next) = last.next() {
                    stream.append(next, &[(b"f", b"v")]).unwrap();
                }
                stream.delete(StreamId::new(5, 0));
                stream.trim(&crate::types::stream::Trim {
                    strategy: crate::types::stream::TrimStrategy::MaxLen(2),
                    approx: false,
                    limit: 0,
                });
                assert!(stream.len() <= 2);
            }
        }
        assert!(refused > body.len(), "{refused}");
    }

    #[test]
    fn damaged_collections_are_named() {
        let cases: [(&[u8], Corruption); 5] = [
            // A hash with the same field twice.
            (
                &[4, 1, b'h', 2, 1, b'f', 1, b'1', 1, b'f', 1, b'2'],
                Corruption::Duplicate(Collection::Hash),
            ),
            (
                &[2, 1, b's', 2, 1, b'm', 1, b'm'],
                Corruption::Duplicate(Collection::Set),
            ),
            // A sorted set whose score is NaN (text form 253).
            (&[3, 1, b'z', 1, 1, b'm', 253], Corruption::NanScore),
            (
                &[18, 1, b'l', 1, 3, 1, b'x'],
                Corruption::QuicklistContainer(3),
            ),
            (&[11, 1, b'i', 1, b'x'], Corruption::Intset(intset_error())),
        ];
        for (body, expected) in cases {
            match load_values(&hand_made(10, body)) {
                Err(RdbError::Corrupt { offset, reason }) => {
                    assert_eq!(reason, expected);
                    assert!(offset > 9, "{offset}");
                }
                other => panic!("{body:?}: {other:?}"),
            }
        }
    }

    fn intset_error() -> crate::types::intset::InvalidIntset {
        Intset::from_bytes(b"x").unwrap_err()
    }

    #[test]
    fn empty_collections_are_skipped() {
        // A quicklist with no nodes, then a plain set with no members, then a string.
        let body = [18, 1, b'l', 0, 2, 1, b's', 0, 0, 1, b'k', 1, b'v'];
        let loaded = load_values(&hand_made(10, &body)).unwrap();
        assert_eq!(loaded, vec![Value::string(Str::from("v"))]);
    }
}
