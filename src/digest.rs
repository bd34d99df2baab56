//! Redis's dataset digest (DEBUG DIGEST, DEBUG DIGEST-VALUE): a SHA1 signature of the
//! data, equal to the one Redis 7.0 computes for the same dataset, so that a test can load
//! one dataset into both servers and compare 40 hex digits.
//!
//! Redis's two mixing steps, over a 20-byte state:
//!
//! - `xor(state, bytes)`: state ^= SHA1(bytes). Commutative: unordered things (the keys of
//!   a database, a set's members, a hash's fields) digest the same in any order.
//! - `mix(state, bytes)`: state = SHA1(state ^ SHA1(bytes)). Ordered: a list's elements,
//!   and the parts of one thing (a key, then its type, then its value).
//!
//! A key's digest starts at zero and mixes the key's name, then its value's (the type as
//! a big-endian u32 — Redis's OBJ_STRING 0, LIST 1, SET 2, ZSET 3, HASH 4 — then the
//! value's elements as the client sees them: integers in decimal, scores in `%.17g`),
//! and xors in "!!expire!!" if the key has an expiry (not its time). Each database with
//! keys mixes its index into the dataset's digest, then xors in each key's digest (that
//! is, its SHA1, as `xor` hashes what it is given). Elements digested as pairs (a hash's
//! field and value, a sorted set's member and score) are mixed into a zero state of their
//! own, which is xored in likewise.
//!
//! Whatever the encoding (listpack, intset, table, tree, quicklist) the bytes digested
//! are the same, so encodings that differ from Redis's (quicklist node boundaries) do not
//! change the digest. Keys whose time has passed but which are still in the table count,
//! as in Redis, which walks its tables without expiring anything.

use crate::keyspace::{Entry, Keyspace, Value};
use crate::types::listpack::LpValue;
use crate::types::stream_id::StreamId;

/// A 20-byte SHA1 state.
pub type Digest = [u8; 20];

/// The digest of an empty dataset (and of an absent key's value).
pub const EMPTY: Digest = [0; 20];

/// Redis's type numbers (`OBJ_STRING` and the rest), which the digest mixes in.
fn type_number(value: &Value) -> u32 {
    match value {
        Value::String(_, _) => 0,
        Value::List(_, _) => 1,
        Value::Set(_, _) => 2,
        Value::ZSet(_, _) => 3,
        Value::Hash(_, _) => 4,
        Value::Stream(_, _) => 6,
    }
}

/// state ^= SHA1(bytes) (Redis's `xorDigest`).
fn xor(state: &mut Digest, bytes: &[u8]) {
    let hash = sha1_smol::Sha1::from(bytes).digest().bytes();
    for (byte, hashed) in state.iter_mut().zip(hash) {
        *byte ^= hashed;
    }
}

/// state = SHA1(state ^ SHA1(bytes)) (Redis's `mixDigest`).
fn mix(state: &mut Digest, bytes: &[u8]) {
    xor(state, bytes);
    *state = sha1_smol::Sha1::from(&state[..]).digest().bytes();
}

/// Mixes a listpack entry as the client sees it; `buffer` is scratch space for integers.
fn mix_entry(state: &mut Digest, entry: LpValue, buffer: &mut Vec<u8>) {
    match entry {
        LpValue::Bytes(bytes) => mix(state, bytes),
        LpValue::Int(_) => {
            buffer.clear();
            entry.write_to(buffer);
            mix(state, buffer);
        }
    }
}

/// The digest of one key's value mixed into `state` (Redis's `xorObjectDigest`): DEBUG
/// DIGEST-VALUE starts from `EMPTY`; the dataset's digest from the key's name mixed in.
pub fn mix_value(state: &mut Digest, entry: &Entry) {
    mix(state, &type_number(&entry.value).to_be_bytes());
    let mut buffer = Vec::new();
    match &entry.value {
        Value::String(bytes, _) => mix(state, bytes),
        Value::List(list, _) => {
            for element in list.iter() {
                mix_entry(state, element, &mut buffer);
            }
        }
        Value::Set(set, _) => {
            for member in set.iter() {
                xor(state, &member);
            }
        }
        Value::ZSet(zset, _) => {
            for (member, score) in zset.iter() {
                let mut element = EMPTY;
                mix(&mut element, &member);
                // `%.17g`, "inf" and "-inf" as glibc prints them: what Redis digests.
                mix(
                    &mut element,
                    crate::types::score::reply_text(score).as_bytes(),
                );
                xor(state, &element);
            }
        }
        Value::Hash(hash, _) => {
            for (field, value) in hash.iter() {
                let mut element = EMPTY;
                mix_entry(&mut element, field, &mut buffer);
                mix_entry(&mut element, value, &mut buffer);
                xor(state, &element);
            }
        }
        Value::Stream(stream, _) => {
            // Each entry's ID as `<ms>.<seq>`, then its fields and values in order.
            for stream_entry in stream.range(StreamId::MIN, StreamId::MAX, false) {
                let id = format!("{}.{}", stream_entry.id.ms, stream_entry.id.seq);
                mix(state, id.as_bytes());
                for (field, value) in &stream_entry.fields {
                    mix(state, field);
                    mix(state, value);
                }
            }
        }
    }
    if entry.has_expiry() {
        xor(state, b"!!expire!!");
    }
}

/// The digest of `entry`'s value alone (DEBUG DIGEST-VALUE).
pub fn value_digest(entry: &Entry) -> Digest {
    let mut state = EMPTY;
    mix_value(&mut state, entry);
    state
}

/// The digest of the whole dataset (DEBUG DIGEST, Redis's `computeDatasetDigest`).
pub fn dataset_digest(keyspace: &Keyspace) -> Digest {
    let mut digest = EMPTY;
    for (index, db) in keyspace.dbs.iter().enumerate() {
        if db.is_empty() {
            continue;
        }
        // The database's index, so that the same keys in another database differ.
        mix(&mut digest, &(index as u32).to_be_bytes());
        for slot in db.slots() {
            for entry in slot.iter() {
                let mut key_digest = EMPTY;
                mix(&mut key_digest, &entry.key);
                mix_value(&mut key_digest, entry);
                xor(&mut digest, &key_digest);
            }
        }
    }
    digest
}

/// The digest as Redis prints it: 40 lower-case hex digits.
pub fn hex(digest: &Digest) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Key, NO_EXPIRY};
    use crate::types::Str;

    fn string_entry(key: &[u8], value: &[u8], expire_at_ms: i64) -> Entry {
        Entry {
            key: Key::from(key),
            value: Value::string(Str::from(value)),
            expire_at_ms,
        }
    }

    #[test]
    fn empty_dataset_is_forty_zeros() {
        let keyspace = Keyspace::new(16);
        assert_eq!(hex(&dataset_digest(&keyspace)), "0".repeat(40));
    }

    #[test]
    fn key_order_does_not_matter_but_database_and_expiry_do() {
        let mut first = Keyspace::new(2);
        first.dbs[0].insert(string_entry(b"a", b"1", NO_EXPIRY));
        first.dbs[0].insert(string_entry(b"b", b"2", NO_EXPIRY));
        let mut second = Keyspace::new(2);
        second.dbs[0].insert(string_entry(b"b", b"2", NO_EXPIRY));
        second.dbs[0].insert(string_entry(b"a", b"1", NO_EXPIRY));
        assert_eq!(dataset_digest(&first), dataset_digest(&second));

        let mut moved = Keyspace::new(2);
        moved.dbs[1].insert(string_entry(b"a", b"1", NO_EXPIRY));
        moved.dbs[1].insert(string_entry(b"b", b"2", NO_EXPIRY));
        assert_ne!(dataset_digest(&first), dataset_digest(&moved));

        let volatile = string_entry(b"a", b"1", 1_000);
        let persistent = string_entry(b"a", b"1", NO_EXPIRY);
        assert_ne!(value_digest(&volatile), value_digest(&persistent));
        // The time itself is not digested.
        assert_eq!(
            value_digest(&volatile),
            value_digest(&string_entry(b"a", b"1", 2_000))
        );
    }
}
