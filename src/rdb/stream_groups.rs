//! The consumer-group section of a stream value (RDB types 15 and 19), both ways.
//!
//! It follows the stream's entries and metadata, as Redis 7.0 writes it:
//!
//! ```text
//! groups                                   length
//! per group, in name order:
//!   name                                   string
//!   last delivered ID                      length ms, length seq
//!   entries read                           length (type 19 only; -1 as 2^64 - 1)
//!   PEL size                               length
//!   per PEL entry, in ID order:
//!     ID                                   16 raw bytes, both halves big-endian
//!     delivery time                        8 raw bytes, little-endian Unix ms
//!     delivery count                       length
//!   consumers                              length
//!   per consumer, in name order:
//!     name                                 string
//!     seen time                            8 raw bytes, little-endian Unix ms
//!     owned IDs                            length, then 16 raw bytes each
//! ```
//!
//! A type 15 file (Redis 6.2 and older) has no entries-read counter: as Redis does, it is
//! estimated from the stream's counters (`StreamPosition::entries_read_at`), which the
//! caller has read by then. The counts are claims of the file: nothing is allocated on
//! them, each entry is read before it is kept. What Redis's loader refuses (a duplicate
//! group, consumer or PEL entry, an owned ID missing from the PEL, with deep sanitisation
//! an entry without an owner) is refused, and so is an entry owned twice, which Redis
//! would load into a state it cannot keep consistent.

use super::reader::RdbReader;
use super::writer::RdbWriter;
use super::{Corruption, RdbError, corrupt, value_type};
use crate::types::stream_groups::{Group, GroupBuilder, Groups, LoadError, StreamPosition};
use crate::types::stream_id::StreamId;
use std::io::{Read, Write};

/// How Redis stores an unknown entries-read counter (its -1 as an unsigned length).
const UNKNOWN_ENTRIES_READ: u64 = u64::MAX;

/// Writes the group count and each group (after the stream's metadata).
pub(super) fn write<W: Write>(writer: &mut RdbWriter<W>, groups: &Groups) -> Result<(), RdbError> {
    writer.write_length(groups.len() as u64)?;
    for (name, group) in groups.iter() {
        write_group(writer, name, group)?;
    }
    Ok(())
}

fn write_group<W: Write>(
    writer: &mut RdbWriter<W>,
    name: &[u8],
    group: &Group,
) -> Result<(), RdbError> {
    writer.write_string(name)?;
    writer.write_length(group.last_id().ms)?;
    writer.write_length(group.last_id().seq)?;
    writer.write_length(group.entries_read().unwrap_or(UNKNOWN_ENTRIES_READ))?;
    writer.write_length(group.pending().len() as u64)?;
    for (id, entry) in group.pending() {
        writer.write_raw(&id.to_be_bytes())?;
        writer.write_raw(&entry.delivery_time_ms().to_le_bytes())?;
        writer.write_length(entry.delivery_count())?;
    }
    writer.write_length(group.consumer_count() as u64)?;
    for (name, consumer) in group.consumers() {
        writer.write_string(name)?;
        writer.write_raw(&consumer.seen_time_ms().to_le_bytes())?;
        writer.write_length(consumer.pending().len() as u64)?;
        for id in consumer.pending() {
            writer.write_raw(&id.to_be_bytes())?;
        }
    }
    Ok(())
}

/// Reads the groups of a stream of type `value_type` (15 or 19) whose counters are
/// `stream`.
pub(super) fn read<R: Read>(
    reader: &mut RdbReader<R>,
    value_type: u8,
    stream: &StreamPosition,
) -> Result<Groups, RdbError> {
    let mut groups = Groups::default();
    let count = reader.read_length()?;
    for _ in 0..count {
        let offset = reader.offset();
        let name = reader.read_string()?;
        let group = read_group(reader, value_type, stream)?;
        groups
            .insert_loaded(&name, group)
            .map_err(|error| damaged(offset, error))?;
    }
    Ok(groups)
}

fn read_group<R: Read>(
    reader: &mut RdbReader<R>,
    value_type: u8,
    stream: &StreamPosition,
) -> Result<Group, RdbError> {
    let last_id = StreamId::new(reader.read_length()?, reader.read_length()?);
    let entries_read = if value_type == value_type::STREAM_LISTPACKS_2 {
        match reader.read_length()? {
            UNKNOWN_ENTRIES_READ => None,
            read => Some(read),
        }
    } else {
        stream.entries_read_at(last_id)
    };
    let mut builder = GroupBuilder::new(last_id, entries_read);
    let pending = reader.read_length()?;
    for _ in 0..pending {
        let offset = reader.offset();
        let id = read_id(reader)?;
        let delivery_time_ms = i64::from_le_bytes(reader.read_raw()?);
        let delivery_count = reader.read_length()?;
        builder
            .pending(id, delivery_time_ms, delivery_count)
            .map_err(|error| damaged(offset, error))?;
    }
    let consumers = reader.read_length()?;
    for _ in 0..consumers {
        let offset = reader.offset();
        let name = reader.read_string()?;
        let seen_time_ms = i64::from_le_bytes(reader.read_raw()?);
        builder
            .consumer(&name, seen_time_ms)
            .map_err(|error| damaged(offset, error))?;
        let owned = reader.read_length()?;
        for _ in 0..owned {
            let offset = reader.offset();
            let id = read_id(reader)?;
            builder.owned(id).map_err(|error| damaged(offset, error))?;
        }
    }
    let offset = reader.offset();
    builder.finish().map_err(|error| damaged(offset, error))
}

fn read_id<R: Read>(reader: &mut RdbReader<R>) -> Result<StreamId, RdbError> {
    Ok(StreamId::from_be_bytes(reader.read_raw()?))
}

fn damaged(offset: u64, error: LoadError) -> RdbError {
    corrupt(offset, Corruption::StreamGroups(error))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::from_hex;
    use super::*;
    use crate::types::stream_groups::DeliveryCount;

    /// `DUMP s` from Redis 7.0.15 after `XADD s 1-1 a b`, `XADD s 2-2 c d`, `XGROUP
    /// CREATE s g1 0`, `XGROUP CREATE s g2 $ ENTRIESREAD 2`, `XREADGROUP GROUP g1 alice
    /// COUNT 1 STREAMS s >`, `XREADGROUP GROUP g1 bob STREAMS s >`, `XGROUP
    /// CREATECONSUMER s g2 carol`, `XDEL s 1-1 2-2`: a stream with no entries left
    /// (so no listpack precedes the metadata) and groups, consumers and pending entries.
    const REDIS_PAYLOAD_HEX: &str = "1300000202000002020202026731020202020000000000000001\
        000000000000000195c36619a20100000100000000000000020000000000000002cfc36619a2010000\
        010205616c69636595c36619a2010000010000000000000001000000000000000103626f62cfc36619\
        a201000001000000000000000200000000000000020267320202020001056361726f6cf0c36619a201\
        0000000a000868405345d9e698";

    /// Reads a type 19 stream's metadata after an empty node list, as the stream loader
    /// does before handing over to `read`.
    fn read_empty_stream_metadata<R: Read>(reader: &mut RdbReader<R>) -> StreamPosition {
        assert_eq!(reader.read_length().unwrap(), 0, "no listpacks");
        let length = reader.read_length().unwrap();
        let last_id = StreamId::new(reader.read_length().unwrap(), reader.read_length().unwrap());
        let first_id = StreamId::new(reader.read_length().unwrap(), reader.read_length().unwrap());
        let max_deleted_id =
            StreamId::new(reader.read_length().unwrap(), reader.read_length().unwrap());
        let entries_added = reader.read_length().unwrap();
        StreamPosition {
            length,
            last_id,
            first_id,
            max_deleted_id,
            entries_added,
        }
    }

    fn written(groups: &Groups) -> Vec<u8> {
        let mut writer = RdbWriter::headless(Vec::new(), true);
        write(&mut writer, groups).unwrap();
        writer.into_output().unwrap()
    }

    fn read_back(
        bytes: &[u8],
        value_type: u8,
        stream: &StreamPosition,
    ) -> Result<Groups, RdbError> {
        let mut reader = RdbReader::bare(bytes, 10);
        let groups = read(&mut reader, value_type, stream)?;
        assert_eq!(reader.offset(), bytes.len() as u64, "read to the end");
        Ok(groups)
    }

    #[test]
    fn groups_redis_wrote_load_and_write_back_byte_for_byte() {
        let payload = from_hex(REDIS_PAYLOAD_HEX);
        assert_eq!(payload[0], value_type::STREAM_LISTPACKS_2);
        let mut reader = RdbReader::bare(&payload[1..], 10);
        let stream = read_empty_stream_metadata(&mut reader);
        assert_eq!(stream.entries_added, 2);
        assert_eq!(stream.max_deleted_id, StreamId::new(2, 2));
        let start = reader.offset() as usize + 1;
        let groups = read(&mut reader, value_type::STREAM_LISTPACKS_2, &stream).unwrap();
        let end = reader.offset() as usize + 1;

        assert_eq!(groups.len(), 2);
        let g1 = groups.get(b"g1").unwrap();
        assert_eq!(g1.last_id(), StreamId::new(2, 2));
        assert_eq!(g1.entries_read(), Some(2));
        let alice = g1.pending_entry(StreamId::new(1, 1)).unwrap();
        assert_eq!(alice.owner(), b"alice");
        assert_eq!(alice.delivery_count(), 1);
        assert_eq!(alice.delivery_time_ms(), 1795722494869);
        assert_eq!(
            g1.pending_entry(StreamId::new(2, 2)).unwrap().owner(),
            b"bob"
        );
        assert_eq!(g1.consumer(b"bob").unwrap().seen_time_ms(), 1795722494927);
        let g2 = groups.get(b"g2").unwrap();
        assert!(g2.pending().is_empty());
        assert_eq!(g2.consumer(b"carol").unwrap().seen_time_ms(), 1795722494960);
        assert_eq!(g2.consumer(b"carol").unwrap().pending().len(), 0);

        // Written back: the very bytes Redis wrote.
        assert_eq!(written(&groups), &payload[start..end]);
    }

    #[test]
    fn type_15_estimates_the_counter_as_redis_does() {
        let mut groups = Groups::default();
        groups.create(b"at-end", Group::new(StreamId::new(5, 0), Some(99)));
        groups.create(b"between", Group::new(StreamId::new(3, 0), Some(99)));
        groups.create(b"unknown", Group::new(StreamId::new(5, 0), None));
        let mut bytes = written(&groups);
        // Type 15 has no counter: take each group's out (one byte each here, 99 and the
        // unknown's nine-byte form) to make the older layout.
        let without_counters = {
            let mut old = Vec::new();
            let mut reader = RdbReader::bare(&bytes[..], 10);
            let count = reader.read_length().unwrap();
            let mut from = 0;
            for _ in 0..count {
                reader.read_string().unwrap();
                reader.read_length().unwrap();
                reader.read_length().unwrap();
                let counter_at = reader.offset() as usize;
                reader.read_length().unwrap();
                old.extend_from_slice(&bytes[from..counter_at]);
                from = reader.offset() as usize;
                assert_eq!(reader.read_length().unwrap(), 0);
                assert_eq!(reader.read_length().unwrap(), 0);
            }
            old.extend_from_slice(&bytes[from..]);
            old
        };
        // Five entries 1-0 .. 5-0, none deleted: what type 15 implies.
        let stream = StreamPosition {
            length: 5,
            last_id: StreamId::new(5, 0),
            first_id: StreamId::new(1, 0),
            max_deleted_id: StreamId::MIN,
            entries_added: 5,
        };
        let loaded = read_back(&without_counters, value_type::STREAM_LISTPACKS, &stream).unwrap();
        assert_eq!(loaded.get(b"at-end").unwrap().entries_read(), Some(5));
        assert_eq!(loaded.get(b"between").unwrap().entries_read(), None);
        // Type 19 keeps what was written, the unknown included.
        bytes = written(&groups);
        let loaded = read_back(&bytes, value_type::STREAM_LISTPACKS_2, &stream).unwrap();
        assert_eq!(loaded, groups);
        assert_eq!(loaded.get(b"unknown").unwrap().entries_read(), None);
    }

    #[test]
    fn round_trips_keep_everything() {
        let mut groups = Groups::default();
        let mut group = Group::new(StreamId::new(40, 2), Some(7));
        group.create_consumer(b"one", 1_700_000_000_000);
        group.create_consumer(b"", -5);
        group.create_consumer(b"12345", 3);
        for n in 0..300u64 {
            let owner: &[u8] = match n % 3 {
                0 => b"one",
                1 => b"",
                _ => b"12345",
            };
            group.claim(
                StreamId::new(n, n * 7),
                owner,
                1_700_000_000_000 + n as i64,
                DeliveryCount::Set(n * 1000),
            );
        }
        groups.create(b"g", group);
        groups.create(b"empty", Group::new(StreamId::MAX, None));
        let loaded = read_back(
            &written(&groups),
            value_type::STREAM_LISTPACKS_2,
            &StreamPosition::default(),
        )
        .unwrap();
        assert_eq!(loaded, groups);
    }

    /// A section built by hand: `pending` entries, then consumers with the IDs they own.
    fn section(pending: &[u64], consumers: &[(&[u8], &[u64])], duplicate_group: bool) -> Vec<u8> {
        let mut writer = RdbWriter::headless(Vec::new(), false);
        let groups = if duplicate_group { 2 } else { 1 };
        writer.write_length(groups).unwrap();
        for _ in 0..groups {
            writer.write_string(b"g").unwrap();
            writer.write_length(9).unwrap();
            writer.write_length(0).unwrap();
            writer.write_length(1).unwrap();
            writer.write_length(pending.len() as u64).unwrap();
            for &ms in pending {
                writer
                    .write_raw(&StreamId::new(ms, 0).to_be_bytes())
                    .unwrap();
                writer.write_raw(&5i64.to_le_bytes()).unwrap();
                writer.write_length(1).unwrap();
            }
            writer.write_length(consumers.len() as u64).unwrap();
            for (name, owned) in consumers {
                writer.write_string(name).unwrap();
                writer.write_raw(&6i64.to_le_bytes()).unwrap();
                writer.write_length(owned.len() as u64).unwrap();
                for &ms in *owned {
                    writer
                        .write_raw(&StreamId::new(ms, 0).to_be_bytes())
                        .unwrap();
                }
            }
        }
        writer.into_output().unwrap()
    }

    #[test]
    fn damage_is_refused_with_what_is_wrong() {
        let cases: [(Vec<u8>, LoadError); 6] = [
            (
                section(&[1], &[(b"a", &[1])], true),
                LoadError::DuplicateGroup,
            ),
            (section(&[1, 1], &[], false), LoadError::DuplicatePending),
            (
                section(&[], &[(b"a", &[]), (b"a", &[])], false),
                LoadError::DuplicateConsumer,
            ),
            (
                section(&[1], &[(b"a", &[2])], false),
                LoadError::NotInGroupPel,
            ),
            (
                section(&[1], &[(b"a", &[1, 1])], false),
                LoadError::DuplicateConsumerPending,
            ),
            (
                section(&[1], &[(b"a", &[1]), (b"b", &[1])], false),
                LoadError::OwnedTwice,
            ),
        ];
        for (bytes, expected) in cases {
            match read_back(
                &bytes,
                value_type::STREAM_LISTPACKS_2,
                &StreamPosition::default(),
            ) {
                Err(RdbError::Corrupt {
                    reason: Corruption::StreamGroups(error),
                    ..
                }) => assert_eq!(error, expected),
                other => panic!("{expected:?}: {other:?}"),
            }
        }
        let unowned = section(&[1, 2], &[(b"a", &[1])], false);
        let error = read_back(
            &unowned,
            value_type::STREAM_LISTPACKS_2,
            &StreamPosition::default(),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "corrupt RDB file at offset {}: stream consumer groups: PEL entry without consumer",
                unowned.len()
            )
        );
        assert!(section(&[1], &[(b"a", &[1])], false).len() > 1);
        read_back(
            &section(&[1], &[(b"a", &[1])], false),
            value_type::STREAM_LISTPACKS_2,
            &StreamPosition::default(),
        )
        .unwrap();
    }

    #[test]
    fn every_cut_and_every_flipped_byte_is_an_error_or_a_valid_load() {
        let payload = from_hex(REDIS_PAYLOAD_HEX);
        let mut reader = RdbReader::bare(&payload[1..], 10);
        let stream = read_empty_stream_metadata(&mut reader);
        let start = reader.offset() as usize + 1;
        read(&mut reader, value_type::STREAM_LISTPACKS_2, &stream).unwrap();
        let end = reader.offset() as usize + 1;
        let section = &payload[start..end];
        for cut in 0..section.len() {
            let mut reader = RdbReader::bare(&section[..cut], 10);
            assert!(read(&mut reader, value_type::STREAM_LISTPACKS_2, &stream).is_err());
        }
        for at in 0..section.len() {
            for bit in 0..8 {
                let mut damaged = section.to_vec();
                damaged[at] ^= 1 << bit;
                let mut reader = RdbReader::bare(&damaged[..], 10);
                // Whatever it says, it says it without panicking; what loads is whole.
                if let Ok(groups) = read(&mut reader, value_type::STREAM_LISTPACKS_2, &stream) {
                    for (_, group) in groups.iter() {
                        let owned: usize = group.consumers().map(|(_, c)| c.pending().len()).sum();
                        assert_eq!(owned, group.pending().len());
                    }
                }
            }
        }
    }

    #[test]
    fn a_lying_count_fails_at_the_end_of_the_input() {
        let mut writer = RdbWriter::headless(Vec::new(), false);
        writer.write_length(u64::MAX).unwrap();
        let bytes = writer.into_output().unwrap();
        assert!(matches!(
            read_back(
                &bytes,
                value_type::STREAM_LISTPACKS_2,
                &StreamPosition::default()
            ),
            Err(RdbError::Corrupt {
                reason: Corruption::Truncated,
                ..
            })
        ));
    }
}
