//! The crash tests' writes and their dataset: strings, and values of every type in several
//! databases — hashes (listpack and table), lists, sets (intset and table), sorted sets
//! (listpack and skip list), streams with a consumer group and pending entries —, keys
//! with a TTL (EXPIRE, PEXPIREAT, and one PERSIST took away), a script's and a function's
//! writes. Later rounds change those values with writes that are not idempotent (INCRBY,
//! HINCRBY, ZINCRBY, RPUSH, LPOP, XADD, XREADGROUP, XCLAIM): a base taken at the wrong
//! instant, or a record replayed twice or lost, shows in the result.
//!
//! `dump` reads a dataset back as canonical text per key (type, TTL presence, contents, a
//! stream's groups) with the function libraries, in every database; `assert_same` names the
//! keys that differ.

use crate::common::encode_command;
use crate::common::raw_client::{Conn, V};
use crate::common::stream_dump;
use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;

/// The databases written: 0, 1 and 2.
pub const DATABASES: i64 = 3;

/// Far in the future (2100-01-01) in ms since the epoch: a PEXPIREAT no test outlives.
const FAR_FUTURE_MS: u64 = 4_102_444_800_000;

/// The library `FCALL` calls, loaded once by `add_collections`: `bump` counts its calls in a
/// hash field and appends its argument to a list — two writes, neither idempotent.
const LIBRARY: &str = "#!lua name=crashlib
redis.register_function('bump', function(keys, args)
  redis.call('hincrby', keys[1], 'calls', 1)
  return redis.call('rpush', keys[2], args[1])
end)";

/// A script that writes two keys, neither idempotently.
const SCRIPT: &str =
    "redis.call('incrby', KEYS[1], ARGV[1]) return redis.call('rpush', KEYS[2], ARGV[2])";

/// Strings `<prefix>:<i>` of several sizes in databases 0 to 2.
pub fn add_strings(pipe: &mut redis::Pipeline, prefix: &str, count: usize) {
    for i in 0..count {
        pipe.cmd("SELECT").arg(i as i64 % DATABASES).ignore();
        let value = match i % 3 {
            0 => format!("{i}"),
            1 => format!("value {i} {}", "q".repeat(i % 300)),
            _ => format!("{i}").repeat(40),
        };
        pipe.cmd("SET")
            .arg(format!("{prefix}:{i}"))
            .arg(value)
            .ignore();
    }
    pipe.cmd("SELECT").arg(0).ignore();
}

/// Loads the function library, then makes the values of every type in each database, their
/// contents naming the database (a record replayed into the wrong one shows).
pub fn add_collections(pipe: &mut redis::Pipeline) {
    pipe.cmd("FUNCTION").arg("LOAD").arg(LIBRARY).ignore();
    for db in 0..DATABASES {
        pipe.cmd("SELECT").arg(db).ignore();
        add_hashes(pipe, db);
        add_lists_and_sets(pipe, db);
        add_sorted_sets(pipe, db);
        add_stream_with_a_group(pipe, db);
        add_keys_with_a_ttl(pipe, db);
        add_script_and_function_writes(pipe, db, "first");
    }
    pipe.cmd("SELECT").arg(0).ignore();
}

/// Small hashes (listpack) and one past 512 fields (a table).
fn add_hashes(pipe: &mut redis::Pipeline, db: i64) {
    for i in 0..8 {
        pipe.cmd("HSET")
            .arg(format!("hash:{i}"))
            .arg(&["a", "1", "b", "-70000", "c"])
            .arg(format!("v{i}-db{db}"))
            .ignore();
    }
    // Its first value, past 64 bytes, makes it a table at once: filling a listpack up to
    // 512 fields first takes a debug build a tenth of a second at each start-up that
    // replays it.
    let big = pipe
        .cmd("HSET")
        .arg(&["big-hash", "long"])
        .arg("l".repeat(100));
    for f in 0..600 {
        big.arg(format!("field:{f}")).arg(f * (db + 1));
    }
    big.ignore();
}

/// Lists; sets of integers (intsets) and one of 200 strings (a table).
fn add_lists_and_sets(pipe: &mut redis::Pipeline, db: i64) {
    for i in 0..6 {
        pipe.cmd("RPUSH")
            .arg(format!("list:{i}"))
            .arg(&["a", "1", "-70000"])
            .arg(format!("{}db{db}", "z".repeat(i * 10)))
            .ignore();
        pipe.cmd("SADD")
            .arg(format!("int-set:{i}"))
            .arg(&["1", "-20", "70000"])
            .arg(i as i64 + 100 * db)
            .ignore();
    }
    let strings = pipe.cmd("SADD").arg("str-set");
    for m in 0..200 {
        strings.arg(format!("m{m}-db{db}"));
    }
    strings.ignore();
}

/// Small sorted sets (listpack) and one past 128 members (a skip list).
fn add_sorted_sets(pipe: &mut redis::Pipeline, db: i64) {
    for i in 0..6 {
        pipe.cmd("ZADD")
            .arg(format!("zset:{i}"))
            .arg(&["1", "a", "2.5", "b"])
            .arg(i as i64 + db)
            .arg("c")
            .ignore();
    }
    // A table at once, as the big hash.
    let big = pipe.cmd("ZADD").arg("big-zset").arg(0).arg("m".repeat(100));
    for m in 0..200 {
        big.arg(m as f64 / 3.0 + db as f64)
            .arg(format!("member:{m}"));
    }
    big.ignore();
}

/// A stream of six entries (IDs 7-0 to 7-5) and a group: alice reads three, one of which
/// she acknowledges, bob one; two are left for later rounds.
fn add_stream_with_a_group(pipe: &mut redis::Pipeline, db: i64) {
    for n in 0..6 {
        add_stream_entry(pipe, &format!("v{n}-db{db}"));
    }
    pipe.cmd("XGROUP")
        .arg(&["CREATE", "stream", "group", "0"])
        .ignore();
    read_from_group(pipe, "alice", 3);
    read_from_group(pipe, "bob", 1);
    pipe.cmd("XACK").arg(&["stream", "group", "7-1"]).ignore();
}

/// An entry whose ID follows the last one (`7-*`: the same in every run, not the clock's).
fn add_stream_entry(pipe: &mut redis::Pipeline, value: &str) {
    pipe.cmd("XADD")
        .arg(&["stream", "7-*", "field"])
        .arg(value)
        .ignore();
}

/// `consumer` takes the next `count` entries no one in the group has had.
fn read_from_group(pipe: &mut redis::Pipeline, consumer: &str, count: usize) {
    pipe.cmd("XREADGROUP")
        .arg(&["GROUP", "group", consumer, "COUNT"])
        .arg(count)
        .arg(&["STREAMS", "stream", ">"])
        .ignore();
}

/// A string with an EXPIRE, a hash with a PEXPIREAT, a list whose EXPIRE a PERSIST took
/// away.
fn add_keys_with_a_ttl(pipe: &mut redis::Pipeline, db: i64) {
    pipe.cmd("SET").arg("ttl-string").arg(db).ignore();
    pipe.cmd("EXPIRE").arg(&["ttl-string", "100000"]).ignore();
    pipe.cmd("HSET").arg(&["ttl-hash", "f"]).arg(db).ignore();
    pipe.cmd("PEXPIREAT")
        .arg("ttl-hash")
        .arg(FAR_FUTURE_MS)
        .ignore();
    pipe.cmd("RPUSH").arg("persisted").arg(db).ignore();
    pipe.cmd("EXPIRE").arg(&["persisted", "100000"]).ignore();
    pipe.cmd("PERSIST").arg("persisted").ignore();
}

/// The script's two writes (INCRBY, RPUSH) and the function's (HINCRBY, RPUSH).
fn add_script_and_function_writes(pipe: &mut redis::Pipeline, db: i64, tag: &str) {
    pipe.cmd("EVAL")
        .arg(SCRIPT)
        .arg(&["2", "script-counter", "script-list"])
        .arg(db + 2)
        .arg(tag)
        .ignore();
    pipe.cmd("FCALL")
        .arg(&["bump", "2", "function-hash", "function-list"])
        .arg(tag)
        .ignore();
}

/// Changes the values `add_collections` made, in each database, by writes that are not
/// idempotent (each round leaves a state no other number of rounds does), and adds keys
/// `<tag>:…` with a TTL set or removed.
pub fn add_changes(pipe: &mut redis::Pipeline, tag: &str) {
    for db in 0..DATABASES {
        pipe.cmd("SELECT").arg(db).ignore();
        pipe.cmd("INCRBY").arg("counter").arg(db + 3).ignore();
        pipe.cmd("HINCRBY")
            .arg(&["hash:1", "a"])
            .arg(db + 1)
            .ignore();
        pipe.cmd("HINCRBY")
            .arg(&["big-hash", "field:7", "1000"])
            .ignore();
        pipe.cmd("HSET").arg(&["big-hash", tag]).arg(db).ignore();
        pipe.cmd("HDEL").arg(&["hash:2", "b"]).ignore();
        pipe.cmd("RPUSH")
            .arg("list:2")
            .arg(format!("{tag}-db{db}"))
            .ignore();
        pipe.cmd("LPOP").arg("list:3").ignore();
        pipe.cmd("SADD").arg("str-set").arg(tag).ignore();
        pipe.cmd("SREM").arg(&["int-set:4", "-20"]).ignore();
        pipe.cmd("SADD")
            .arg("int-set:1")
            .arg(integer_of(tag) + db)
            .ignore();
        pipe.cmd("ZINCRBY").arg(&["zset:1", "1.5", "a"]).ignore();
        pipe.cmd("ZINCRBY")
            .arg(&["big-zset", "2", "member:5"])
            .ignore();
        pipe.cmd("ZREM").arg(&["zset:3", "b"]).ignore();
        add_stream_entry(pipe, &format!("{tag}-db{db}"));
        read_from_group(pipe, "carol", 1);
        // Alice's 7-2 to bob once more: its delivery count goes up by one.
        pipe.cmd("XCLAIM")
            .arg(&["stream", "group", "bob", "0", "7-2"])
            .ignore();
        pipe.cmd("EXPIRE").arg(&["persisted", "100000"]).ignore();
        pipe.cmd("PERSIST").arg("ttl-string").ignore();
        add_new_keys_with_a_ttl(pipe, tag);
        add_script_and_function_writes(pipe, db, tag);
    }
    pipe.cmd("SELECT").arg(0).ignore();
}

/// An integer of `tag`'s own: a member that keeps a set an intset.
fn integer_of(tag: &str) -> i64 {
    tag.bytes()
        .fold(0, |n, byte| (n * 31 + i64::from(byte)) % 1_000_000)
}

/// `<tag>:ttl` with an EXPIRE, `<tag>:pttl` with a PEXPIREAT, `<tag>:persisted` with the
/// expiry of its SET taken away.
fn add_new_keys_with_a_ttl(pipe: &mut redis::Pipeline, tag: &str) {
    let (ttl, pttl, persisted) = (
        format!("{tag}:ttl"),
        format!("{tag}:pttl"),
        format!("{tag}:persisted"),
    );
    pipe.cmd("SET").arg(&ttl).arg(tag).ignore();
    pipe.cmd("EXPIRE").arg(&ttl).arg(100_000).ignore();
    pipe.cmd("ZADD").arg(&pttl).arg(1).arg(tag).ignore();
    pipe.cmd("PEXPIREAT").arg(&pttl).arg(FAR_FUTURE_MS).ignore();
    pipe.cmd("SET")
        .arg(&persisted)
        .arg(tag)
        .arg(&["EX", "100000"])
        .ignore();
    pipe.cmd("PERSIST").arg(&persisted).ignore();
}

/// Checks that the values `add_collections` made in database `db` have the encodings they
/// are there for (a change of the encoding limits would otherwise leave a kind untested).
pub fn assert_encodings(conn: &mut redis::Connection, db: i64) {
    let _: () = redis::cmd("SELECT").arg(db).query(conn).unwrap();
    for (key, encoding) in [
        ("hash:0", "listpack"),
        ("big-hash", "hashtable"),
        ("int-set:0", "intset"),
        ("str-set", "hashtable"),
        ("zset:0", "listpack"),
        ("big-zset", "skiplist"),
    ] {
        let found: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(key)
            .query(conn)
            .unwrap();
        assert_eq!(found, encoding, "db {db} {key}");
    }
    let _: () = redis::cmd("SELECT").arg(0).query(conn).unwrap();
}

/// `add_changes` in a MULTI/EXEC block, with `SET <tag> <value>` in database 0 first: one
/// log record block, all or nothing after any crash (a kill between two records of a
/// pipeline would leave a state between two expected ones), and the string tells which.
pub fn changes_in_a_transaction(tag: &str, value: &str) -> redis::Pipeline {
    let mut pipe = redis::pipe();
    pipe.cmd("MULTI").ignore();
    pipe.cmd("SELECT").arg(0).ignore();
    pipe.cmd("SET").arg(tag).arg(value).ignore();
    add_changes(&mut pipe, tag);
    // EXEC's reply is not ignored: an error inside the block fails the query.
    pipe.cmd("EXEC");
    pipe
}

/// A dataset as `dump` reads it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Dataset {
    /// (database, key) → `type (ttl|no ttl): contents`, contents order-independent where the
    /// type is unordered; a stream's consumer groups included.
    pub keys: BTreeMap<(i64, String), String>,
    /// FUNCTION LIST WITHCODE, a line per library, sorted.
    pub libraries: Vec<String>,
}

impl Dataset {
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// The value of string `key` of database `db` (without a TTL), if it is one.
    pub fn string(&self, db: i64, key: &str) -> Option<&str> {
        self.keys
            .get(&(db, key.to_string()))?
            .strip_prefix("string (no ttl): ")
    }

    /// The dataset after `SET key value` in database `db`.
    pub fn with_string(mut self, db: i64, key: &str, value: &str) -> Dataset {
        self.keys
            .insert((db, key.to_string()), format!("string (no ttl): {value}"));
        self
    }

    /// How `self` differs from `expected`: a line per key (at most `limit`), and the
    /// libraries.
    pub fn differences(&self, expected: &Dataset, limit: usize) -> Vec<String> {
        let mut lines = Vec::new();
        let all: std::collections::BTreeSet<&(i64, String)> =
            self.keys.keys().chain(expected.keys.keys()).collect();
        for key @ (db, name) in all {
            let line = match (self.keys.get(key), expected.keys.get(key)) {
                (Some(found), Some(wanted)) if found != wanted => {
                    format!("db {db} {name}: {}", first_difference(found, wanted))
                }
                (Some(found), None) => {
                    format!("db {db} {name}: not expected, found {}", short(found))
                }
                (None, Some(wanted)) => {
                    format!("db {db} {name}: missing, expected {}", short(wanted))
                }
                _ => continue,
            };
            lines.push(line);
        }
        let count = lines.len();
        if count > limit {
            lines.truncate(limit);
            lines.push(format!("... {} more keys differ", count - limit));
        }
        if self.libraries != expected.libraries {
            lines.push(format!(
                "libraries: found {:?}, expected {:?}",
                self.libraries, expected.libraries
            ));
        }
        lines
    }
}

/// Short: a dataset is hundreds of keys, some of hundreds of fields.
impl fmt::Debug for Dataset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut per_db = BTreeMap::new();
        for (db, _) in self.keys.keys() {
            *per_db.entry(*db).or_insert(0) += 1;
        }
        write!(
            f,
            "Dataset {{ keys per database: {per_db:?}, {} libraries }}",
            self.libraries.len()
        )
    }
}

/// Fails, naming the keys that differ, unless `actual` is `expected`.
#[track_caller]
pub fn assert_same(actual: &Dataset, expected: &Dataset, context: &str) {
    if actual != expected {
        panic!(
            "{context}: the dataset is not the expected one ({actual:?}, expected \
             {expected:?}):\n  {}",
            actual.differences(expected, 12).join("\n  ")
        );
    }
}

fn short(text: &str) -> String {
    match text.char_indices().nth(100) {
        Some((end, _)) => format!("{:?}…", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// Where two texts part, with some context.
fn first_difference(found: &str, wanted: &str) -> String {
    let common = found
        .char_indices()
        .zip(wanted.chars())
        .find(|((_, a), b)| a != b)
        .map_or(found.len().min(wanted.len()), |((at, _), _)| at);
    let start = found[..common]
        .char_indices()
        .rev()
        .nth(40)
        .map_or(0, |(at, _)| at);
    format!(
        "found …{} expected …{}",
        short(&found[start..]),
        short(&wanted[start..])
    )
}

/// Every key of every database of the server on `port` as canonical text, and the
/// function libraries. Read over a plain RESP connection (`common::raw_client`): the crash
/// tests read a dataset of hundreds of keys a few hundred times, and the `redis` crate's
/// parser, in a debug build, takes three times as long.
pub fn dump(port: u16) -> Dataset {
    let mut conn = Conn::new(port);
    let mut keys = BTreeMap::new();
    for db in databases_with_keys(&mut conn) {
        expect_ok(conn.cmd(&["SELECT", &db.to_string()]));
        for (key, text) in keys_of_selected_database(&mut conn) {
            keys.insert((db, key), text);
        }
    }
    Dataset {
        keys,
        libraries: libraries(&mut conn),
    }
}

fn expect_ok(reply: V) {
    assert_eq!(reply, V::Simple("OK".into()));
}

/// Sends `commands` at once and reads their replies.
fn pipeline(conn: &mut Conn, commands: &[Vec<&[u8]>]) -> Vec<V> {
    let mut out = Vec::new();
    for command in commands {
        out.extend(encode_command(command));
    }
    conn.reader.get_mut().write_all(&out).unwrap();
    commands.iter().map(|_| conn.read()).collect()
}

/// The databases INFO keyspace lists (those holding keys).
fn databases_with_keys(conn: &mut Conn) -> Vec<i64> {
    let info = conn.cmd(&["INFO", "keyspace"]).text();
    info.lines()
        .filter_map(|line| line.strip_prefix("db")?.split_once(':'))
        .map(|(db, _)| db.parse().unwrap())
        .collect()
}

/// The keys of the selected database with their text (three round trips, whatever their
/// number, and a few per stream).
fn keys_of_selected_database(conn: &mut Conn) -> Vec<(String, String)> {
    let keys: Vec<Vec<u8>> = conn
        .cmd(&["KEYS", "*"])
        .items()
        .into_iter()
        .map(bulk)
        .collect();
    let mut commands = Vec::new();
    for key in &keys {
        commands.push(vec![&b"TYPE"[..], key]);
        commands.push(vec![&b"PTTL"[..], key]);
    }
    let replies = pipeline(conn, &commands);
    let kinds: Vec<(String, bool)> = replies
        .chunks(2)
        .map(|pair| (pair[0].text(), pair[1] != V::Int(-1)))
        .collect();
    let commands: Vec<Vec<&[u8]>> = keys
        .iter()
        .zip(&kinds)
        .map(|(key, (kind, _))| match kind.as_str() {
            "string" => vec![&b"GET"[..], key],
            "hash" => vec![&b"HGETALL"[..], key],
            "list" => vec![&b"LRANGE"[..], key, b"0", b"-1"],
            "set" => vec![&b"SMEMBERS"[..], key],
            "zset" => vec![&b"ZRANGE"[..], key, b"0", b"-1", b"WITHSCORES"],
            "stream" => vec![&b"XRANGE"[..], key, b"-", b"+"],
            other => panic!("{}: unexpected type {other}", String::from_utf8_lossy(key)),
        })
        .collect();
    let contents = pipeline(conn, &commands);
    let mut texts = Vec::new();
    for ((key, (kind, ttl)), value) in keys.iter().zip(kinds).zip(contents) {
        let contents = match kind.as_str() {
            "stream" => stream_text(conn, key, value),
            _ => contents_text(&kind, value),
        };
        let ttl = if ttl { "ttl" } else { "no ttl" };
        let key = String::from_utf8_lossy(key).into_owned();
        texts.push((key, format!("{kind} ({ttl}): {contents}")));
    }
    texts
}

fn bulk(value: V) -> Vec<u8> {
    match value {
        V::Bulk(Some(bytes)) => bytes,
        other => panic!("not a bulk string: {other:?}"),
    }
}

/// A value's contents as `common::dataset` writes them: unordered types sorted.
fn contents_text(kind: &str, value: V) -> String {
    let items = || value.items().iter().map(V::text).collect::<Vec<_>>();
    match kind {
        "string" => value.text(),
        "hash" => {
            let flat = items();
            let mut pairs: Vec<String> = flat
                .chunks(2)
                .map(|p| format!("{}={}", p[0], p[1]))
                .collect();
            pairs.sort();
            pairs.join(",")
        }
        "set" => {
            let mut members = items();
            members.sort();
            members.join(",")
        }
        _ => items().join(","),
    }
}

/// A stream's entries (`entries`: its XRANGE), the metadata no entry command shows
/// (`stream_dump::metadata`: length, last ID, recorded first ID, max deleted ID, entries
/// added) and its consumer groups.
fn stream_text(conn: &mut Conn, key: &[u8], entries: V) -> String {
    let payload = bulk(conn.call(&[b"DUMP", key]));
    let (_, length, last, first, max_deleted, added) = stream_dump::metadata(&payload);
    format!(
        "{entries:?} length {length} last {last} first {first} max-deleted {max_deleted} \
         added {added} groups: {}",
        groups(conn, key)
    )
}

/// A stream's consumer groups: each group's counters, its pending entries (ID, consumer,
/// delivery count) and its consumers with their pending counts — all but the times.
fn groups(conn: &mut Conn, key: &[u8]) -> String {
    let mut text = Vec::new();
    for group in conn.call(&[b"XINFO", b"GROUPS", key]).items() {
        let group = fields(group);
        let name = field(&group, "name").text();
        let counters: Vec<String> = group
            .iter()
            .map(|(field, value)| format!("{field}={}", scalar(value)))
            .collect();
        let name = name.as_bytes();
        let pending: Vec<String> = conn
            .call(&[b"XPENDING", key, name, b"-", b"+", b"100000"])
            .items()
            .into_iter()
            .map(|entry| match &entry.items()[..] {
                [id, consumer, _idle, deliveries] => {
                    format!("{} {} x{}", id.text(), consumer.text(), scalar(deliveries))
                }
                other => panic!("XPENDING entry {other:?}"),
            })
            .collect();
        let consumers: Vec<String> = conn
            .call(&[b"XINFO", b"CONSUMERS", key, name])
            .items()
            .into_iter()
            .map(|consumer| {
                let consumer = fields(consumer);
                let (name, pending) = (field(&consumer, "name"), field(&consumer, "pending"));
                format!("{} pending {}", name.text(), scalar(pending))
            })
            .collect();
        text.push(format!(
            "[{} | pending {} | consumers {}]",
            counters.join(" "),
            pending.join(", "),
            consumers.join(", ")
        ));
    }
    text.join(" ")
}

/// A reply's text, an integer's without its type's name.
fn scalar(value: &V) -> String {
    match value {
        V::Int(n) => n.to_string(),
        other => other.text(),
    }
}

/// The fields of an XINFO reply, without those that tell times.
fn fields(reply: V) -> Vec<(String, V)> {
    reply
        .items()
        .chunks(2)
        .map(|pair| (pair[0].text(), pair[1].clone()))
        .filter(|(field, _)| {
            !["idle", "inactive", "seen-time", "active-time"].contains(&field.as_str())
        })
        .collect()
}

fn field<'a>(fields: &'a [(String, V)], name: &str) -> &'a V {
    &fields.iter().find(|(field, _)| field == name).unwrap().1
}

/// The function libraries with their code, sorted.
fn libraries(conn: &mut Conn) -> Vec<String> {
    let mut libraries: Vec<String> = conn
        .cmd(&["FUNCTION", "LIST", "WITHCODE"])
        .items()
        .iter()
        .map(|library| format!("{library:?}"))
        .collect();
    libraries.sort();
    libraries
}
