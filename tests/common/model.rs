//! A record of what clients asked and what the server acknowledged, to check a dataset
//! after a crash: every acknowledged write is there (or a later attempted one), every
//! value is one that was written, nothing else appears.

use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A stream entry's ID as (milliseconds, sequence): in stream order.
pub type Id = (u64, u64);

fn parse_id(id: &str) -> Id {
    let (ms, seq) = id.split_once('-').unwrap();
    (ms.parse().unwrap(), seq.parse().unwrap())
}

fn format_id((ms, seq): Id) -> String {
    format!("{ms}-{seq}")
}

/// A write, as the state it leaves the key in (APPEND is recorded as the value it makes,
/// HINCRBY as the hash it makes, so a write applied twice, say by a replay, shows as a
/// state never written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A string, and whether it has a TTL.
    Set(Vec<u8>, bool),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    Members(BTreeSet<Vec<u8>>),
    List(Vec<Vec<u8>>),
    /// Member to (integer) score.
    Scores(BTreeMap<Vec<u8>, i64>),
    /// A stream's entries (ID, field, value); empty is a stream with no entries, which a
    /// stream may be.
    Stream(Vec<(String, Vec<u8>, Vec<u8>)>),
    /// A stream read through its consumer group `group`: its entries, the last ID the group
    /// delivered, and its pending entries (ID → consumer, deliveries).
    Grouped {
        entries: Vec<(String, Vec<u8>, Vec<u8>)>,
        last_delivered: Id,
        pending: BTreeMap<Id, (String, u64)>,
    },
    Del,
}

impl Op {
    /// A short description for failure messages.
    fn describe(&self) -> String {
        match self {
            Op::Set(v, ttl) => format!(
                "{}{}",
                String::from_utf8_lossy(&v[..v.len().min(40)]),
                if *ttl { " (ttl)" } else { "" }
            ),
            Op::Hash(h) => format!("hash of {} fields", h.len()),
            Op::Members(m) => format!("set of {} members", m.len()),
            Op::List(l) => format!("list of {} elements", l.len()),
            Op::Scores(z) => format!("sorted set of {} members", z.len()),
            Op::Stream(x) => format!(
                "stream of {} entries (last {:?})",
                x.len(),
                x.last().map(|(id, _, _)| id)
            ),
            Op::Grouped {
                entries,
                last_delivered,
                pending,
            } => format!(
                "stream of {} entries, group at {}, pending {:?}",
                entries.len(),
                format_id(*last_delivered),
                pending
            ),
            Op::Del => "DEL".into(),
        }
    }
}

/// An entry's fields and values as XRANGE gives them.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The states of `keys` of database `db` as the server has them (an absent key is `Del`),
/// read in a few round trips whatever their number: a check reads thousands of keys.
fn read_states(conn: &mut redis::Connection, db: i64, keys: &[&str]) -> Vec<Op> {
    let _: () = redis::cmd("SELECT").arg(db).query(conn).unwrap();
    let mut pipe = redis::pipe();
    for key in keys {
        pipe.cmd("TYPE").arg(key).cmd("PTTL").arg(key);
    }
    let kinds: Vec<(String, i64)> = pipe.query(conn).unwrap();
    let mut pipe = redis::pipe();
    for (key, (kind, _)) in keys.iter().zip(&kinds) {
        match kind.as_str() {
            "none" => pipe.cmd("PING"),
            "string" => pipe.cmd("GET").arg(key),
            "hash" => pipe.cmd("HGETALL").arg(key),
            "set" => pipe.cmd("SMEMBERS").arg(key),
            "list" => pipe.cmd("LRANGE").arg(key).arg(0).arg(-1),
            "zset" => pipe.cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES"),
            "stream" => pipe.cmd("XRANGE").arg(key).arg("-").arg("+"),
            other => panic!("{key}: unexpected type {other}"),
        };
    }
    let contents: Vec<redis::Value> = pipe.query(conn).unwrap();
    let mut states = Vec::new();
    for ((key, (kind, ttl)), contents) in keys.iter().zip(kinds).zip(contents) {
        states.push(match kind.as_str() {
            "none" => Op::Del,
            "string" => Op::Set(from_value(key, contents), ttl != -1),
            "hash" => Op::Hash(from_value(key, contents)),
            "set" => Op::Members(from_value(key, contents)),
            "list" => Op::List(from_value(key, contents)),
            "zset" => {
                let pairs: Vec<(Vec<u8>, i64)> = from_value(key, contents);
                Op::Scores(pairs.into_iter().collect())
            }
            _ => read_stream(conn, key, from_value(key, contents)),
        });
    }
    states
}

fn from_value<T: redis::FromRedisValue>(key: &str, value: redis::Value) -> T {
    redis::from_redis_value(value).unwrap_or_else(|e| panic!("{key}: {e}"))
}

/// A stream's `entries` (its XRANGE) and, if it has one, its group `group`'s progress and
/// pending entries.
fn read_stream(conn: &mut redis::Connection, key: &str, entries: Vec<(String, Fields)>) -> Op {
    let entries = entries
        .into_iter()
        .map(|(id, mut fields)| {
            assert_eq!(fields.len(), 1, "{key}: one field per entry written");
            let (field, value) = fields.pop().unwrap();
            (id, field, value)
        })
        .collect();
    let groups: Vec<BTreeMap<String, redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(key)
        .query(conn)
        .unwrap();
    let Some(group) = groups.first() else {
        return Op::Stream(entries);
    };
    let last_delivered: String = redis::from_redis_value_ref(&group["last-delivered-id"]).unwrap();
    let pending: Vec<(String, String, u64, u64)> = redis::cmd("XPENDING")
        .arg(key)
        .arg(GROUP)
        .arg(&["-", "+", "100000"])
        .query(conn)
        .unwrap();
    Op::Grouped {
        entries,
        last_delivered: parse_id(&last_delivered),
        pending: pending
            .into_iter()
            .map(|(id, consumer, _idle, deliveries)| (parse_id(&id), (consumer, deliveries)))
            .collect(),
    }
}

/// The consumer group of the load's grouped streams.
const GROUP: &str = "group";

#[derive(Default, Debug)]
pub struct KeyHistory {
    /// The client that writes the key (one client per key: no races).
    pub client: usize,
    /// Every write attempted on the key, in order.
    pub ops: Vec<Op>,
    /// For each of `ops`, its place among all the writes of its client (from 0).
    pub seqs: Vec<usize>,
    /// Index in `ops` of the last acknowledged one.
    pub acked: Option<usize>,
}

impl KeyHistory {
    fn push(&mut self, client: usize, seq: usize, op: Op) -> usize {
        self.client = client;
        self.ops.push(op);
        self.seqs.push(seq);
        self.ops.len() - 1
    }
}

/// Keys by (database, name).
#[derive(Default, Debug)]
pub struct Model {
    pub keys: BTreeMap<(i64, String), KeyHistory>,
    /// How many writes of each command were acknowledged.
    pub acked_commands: BTreeMap<String, usize>,
}

impl Model {
    pub fn merge(&mut self, other: Model) {
        for (key, history) in other.keys {
            assert!(
                self.keys.insert(key, history).is_none(),
                "keys are per client"
            );
        }
        for (command, count) in other.acked_commands {
            *self.acked_commands.entry(command).or_default() += count;
        }
    }

    pub fn acked_count(&self) -> usize {
        self.keys.values().filter(|h| h.acked.is_some()).count()
    }

    /// Keys with an acknowledged write whose name says they are of `kind` (`KINDS`): the
    /// load did reach every type.
    pub fn acked_of_kind(&self, kind: &str) -> usize {
        self.keys
            .iter()
            .filter(|((_, key), h)| h.acked.is_some() && key.contains(&format!(":{kind}")))
            .count()
    }

    /// How many writes of `command` were acknowledged.
    pub fn acked_of_command(&self, command: &str) -> usize {
        self.acked_commands.get(command).copied().unwrap_or(0)
    }

    /// For each client, how many of its writes were acknowledged (its writes are
    /// sequential: they are its first ones).
    pub fn acked_per_client(&self) -> Vec<usize> {
        let mut acked = Vec::new();
        for history in self.keys.values() {
            if acked.len() <= history.client {
                acked.resize(history.client + 1, 0);
            }
            if let Some(index) = history.acked {
                let count = &mut acked[history.client];
                *count = (*count).max(history.seqs[index] + 1);
            }
        }
        acked
    }

    /// Checks that the dataset behind `conn` is what the first writes of each client made,
    /// for some number of them per client — a log replays a prefix of its records, however
    /// a crash cut it — and at least `at_least[client]` of them (the writes known to be
    /// durable). Also reports keys no client wrote, and the function library missing when
    /// some write had to be kept (it was loaded before any). Returns the problems found.
    pub fn verify_prefix(&self, conn: &mut redis::Connection, at_least: &[usize]) -> Vec<String> {
        type Keys<'a> = Vec<(&'a (i64, String), &'a KeyHistory)>;
        let mut by_client: BTreeMap<usize, Keys> = BTreeMap::new();
        for (key, history) in &self.keys {
            by_client
                .entry(history.client)
                .or_default()
                .push((key, history));
        }
        let mut actual_states = self.read_actual_states(conn);
        let mut problems = Vec::new();
        for (client, keys) in by_client {
            let attempted = keys
                .iter()
                .filter_map(|(_, h)| h.seqs.last())
                .max()
                .map_or(0, |seq| seq + 1);
            let at_least = at_least.get(client).copied().unwrap_or(0);
            // possible[c]: the dataset so far is what the client's first c writes made.
            let mut possible: Vec<bool> = (0..=attempted).map(|c| c >= at_least).collect();
            for (name @ (db, key), history) in keys {
                let actual = actual_states.remove(name).unwrap();
                for (cut, possible) in possible.iter_mut().enumerate() {
                    // After `cut` writes, the key holds its last write before them.
                    let applied = history.seqs.partition_point(|&seq| seq < cut);
                    let state = applied.checked_sub(1).map_or(&Op::Del, |i| &history.ops[i]);
                    *possible &= *state == actual;
                }
                if !possible.contains(&true) {
                    problems.push(format!(
                        "client {client}: no prefix of its {attempted} writes (keeping at least \
                         {at_least}) explains db {db} key {key}: found {}, written {:?}",
                        actual.describe(),
                        history.ops.iter().map(Op::describe).collect::<Vec<_>>()
                    ));
                    break;
                }
            }
        }
        problems.extend(self.unexpected_keys(conn));
        problems.extend(missing_library(conn, at_least.iter().any(|&n| n > 0)));
        problems
    }

    /// Checks the dataset behind `conn` against the model; returns the problems found.
    pub fn verify(&self, conn: &mut redis::Connection) -> Vec<String> {
        let mut actual_states = self.read_actual_states(conn);
        let mut problems = Vec::new();
        for (name @ (db, key), history) in &self.keys {
            let actual = actual_states.remove(name).unwrap();
            let candidates = match history.acked {
                Some(index) => &history.ops[index..],
                None => &history.ops[..],
            };
            let never_acked_and_absent = history.acked.is_none() && actual == Op::Del;
            if !(never_acked_and_absent || candidates.contains(&actual)) {
                problems.push(format!(
                    "db {db} key {key}: found {}, acked op {:?} of {} (last acked {:?})",
                    actual.describe(),
                    history.acked,
                    history.ops.len(),
                    history.acked.map(|i| history.ops[i].describe())
                ));
            }
        }
        problems.extend(self.unexpected_keys(conn));
        problems.extend(missing_library(conn, self.acked_count() > 0));
        problems
    }

    /// The state of every key of the model as the server has it.
    fn read_actual_states(&self, conn: &mut redis::Connection) -> BTreeMap<(i64, String), Op> {
        let mut by_db: BTreeMap<i64, Vec<&str>> = BTreeMap::new();
        for (db, key) in self.keys.keys() {
            by_db.entry(*db).or_default().push(key);
        }
        let mut states = BTreeMap::new();
        for (db, keys) in by_db {
            let read = read_states(conn, db, &keys);
            states.extend(keys.into_iter().map(|key| (db, key.to_string())).zip(read));
        }
        states
    }

    /// Keys in the databases used that no client wrote.
    fn unexpected_keys(&self, conn: &mut redis::Connection) -> Vec<String> {
        let mut problems = Vec::new();
        let dbs: BTreeSet<i64> = self.keys.keys().map(|(db, _)| *db).collect();
        for db in dbs {
            let _: () = redis::cmd("SELECT").arg(db).query(conn).unwrap();
            let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
            for key in keys {
                if !self.keys.contains_key(&(db, key.clone())) {
                    problems.push(format!("db {db}: unexpected key {key}"));
                }
            }
        }
        problems
    }
}

/// The load's function library, if `required` and the server does not have it.
fn missing_library(conn: &mut redis::Connection, required: bool) -> Option<String> {
    let listed: Vec<redis::Value> = redis::cmd("FUNCTION")
        .arg("LIST")
        .arg("LIBRARYNAME")
        .arg("model")
        .query(conn)
        .unwrap();
    (required && listed.is_empty())
        .then(|| "the function library, loaded before any write, is missing".to_string())
}

/// The function library of the write load, loaded once before the clients start: the
/// same DEL-then-SET as its script.
const MODEL_LIBRARY: &str = "#!lua name=model
redis.register_function('model_replace', function(keys, args)
  redis.call('del', keys[1])
  return redis.call('set', keys[1], args[1])
end)";

/// The script of the load's two-key writes: INCRBY on a counter and RPUSH on a list.
const COUNT_AND_PUSH: &str =
    "redis.call('incrby', KEYS[1], ARGV[1]) return redis.call('rpush', KEYS[2], ARGV[2])";

/// Far in the future (2100-01-01) in ms since the epoch: a PEXPIREAT no test outlives.
const FAR_FUTURE_MS: u64 = 4_102_444_800_000;

/// The kinds of keys the load writes, by the letter after the client in their names:
/// strings, counters, small hashes, sets of strings, lists, small sorted sets, streams;
/// hashes past 512 fields, sets past 512 members, intsets, sorted sets past 128 members
/// and streams read through a consumer group.
pub const KINDS: [&str; 12] = ["k", "n", "h", "s", "l", "z", "x", "H", "S", "i", "Z", "g"];

/// Fields of a big hash, members of a big set: past 512, tables.
const BIG: u32 = 520;

/// The collections kinds of `KINDS`, one of which a write picks.
const COLLECTIONS: [&str; 10] = ["h", "s", "l", "z", "x", "H", "S", "i", "Z", "g"];

/// A write: the keys it changes (of the client's database) with the state it leaves them in,
/// and the command.
struct Write {
    changes: Vec<(String, Op)>,
    command: redis::Cmd,
}

impl Write {
    fn one(key: String, op: Op, command: redis::Cmd) -> Write {
        Write {
            changes: vec![(key, op)],
            command,
        }
    }
}

/// One client's writes, each drawn from its random generator and the model of its keys.
struct Writer {
    client: usize,
    db: i64,
    rng: rand::rngs::StdRng,
    model: Model,
}

impl Writer {
    /// The last state written to `key` (acknowledged or not), if any.
    fn last(&self, key: &str) -> Option<Op> {
        self.model
            .keys
            .get(&(self.db, key.to_string()))
            .and_then(|h| h.ops.last().cloned())
    }

    /// A key of this client's of `kind`, one of `count`.
    fn key(&mut self, kind: &str, count: u32) -> String {
        format!("c{}:{kind}{}", self.client, self.rng.random_range(0..count))
    }

    /// Write number `n` of the client (from 0).
    fn next_write(&mut self, n: usize) -> Write {
        let choice = self.rng.random_range(0..100u32);
        match choice {
            60.. => {
                let kind = COLLECTIONS[((choice - 60) / 4) as usize];
                self.collection_write(kind, n)
            }
            55.. => self.counter_write(n),
            50.. => self.ttl_write(),
            _ => self.string_write(choice, n),
        }
    }

    fn collection_write(&mut self, kind: &str, n: usize) -> Write {
        match kind {
            "h" => self.hash_write(),
            "H" => self.big_hash_write(),
            "s" => self.set_write(),
            "S" => self.big_set_write(),
            "i" => self.intset_write(),
            "l" => self.list_write(n),
            "x" => self.stream_write(n),
            "g" => self.grouped_stream_write(n),
            "z" => self.zset_write(),
            _ => self.big_zset_write(),
        }
    }

    /// HINCRBY or HDEL of a field of a small hash.
    fn hash_write(&mut self) -> Write {
        let key = self.key("h", 10);
        let fields = match self.last(&key) {
            Some(Op::Hash(fields)) => fields,
            _ => BTreeMap::new(),
        };
        let element = format!("e{}", self.rng.random_range(0..12u32)).into_bytes();
        self.change_hash(key, fields, element)
    }

    /// A hash past 512 fields (a table): made with 600 at once, then as `hash_write`.
    fn big_hash_write(&mut self) -> Write {
        let key = self.key("H", 1);
        let Some(Op::Hash(fields)) = self.last(&key) else {
            // A value past 64 bytes first: a table at once (filling a listpack up to 512
            // fields first holds a debug build's loop for tens of ms).
            let long = (b"long".to_vec(), vec![b'l'; 100]);
            let fields: Vec<_> = std::iter::once(long)
                .chain((0..BIG).map(|f| (format!("f{f}").into_bytes(), b"0".to_vec())))
                .collect();
            let mut command = redis::cmd("HSET");
            command.arg(&key);
            for (field, value) in &fields {
                command.arg(field).arg(value);
            }
            return Write::one(key, Op::Hash(fields.into_iter().collect()), command);
        };
        let element = format!("f{}", self.rng.random_range(0..BIG + 20)).into_bytes();
        self.change_hash(key, fields, element)
    }

    /// HINCRBY (three times in four) or HDEL of `element` in `fields`, the hash at `key`.
    fn change_hash(
        &mut self,
        key: String,
        mut fields: BTreeMap<Vec<u8>, Vec<u8>>,
        element: Vec<u8>,
    ) -> Write {
        let remove = self.rng.random_bool(0.25);
        let mut command = redis::cmd(if remove { "HDEL" } else { "HINCRBY" });
        command.arg(&key).arg(&element);
        if remove {
            fields.remove(&element);
        } else {
            let by = self.rng.random_range(1..1000i64);
            command.arg(by);
            let old: i64 = fields
                .get(&element)
                .map_or(0, |v| String::from_utf8_lossy(v).parse().unwrap());
            fields.insert(element, (old + by).to_string().into_bytes());
        }
        let op = if fields.is_empty() {
            Op::Del
        } else {
            Op::Hash(fields)
        };
        Write::one(key, op, command)
    }

    /// SADD or SREM of a string member.
    fn set_write(&mut self) -> Write {
        let key = self.key("s", 10);
        let element = format!("e{}", self.rng.random_range(0..12u32));
        self.change_set(key, element)
    }

    /// A set of strings past 512 members: made with 600 at once, then as `set_write`.
    fn big_set_write(&mut self) -> Write {
        let key = self.key("S", 1);
        if !matches!(self.last(&key), Some(Op::Members(_))) {
            let members: BTreeSet<Vec<u8>> =
                (0..BIG).map(|m| format!("m{m}").into_bytes()).collect();
            let mut command = redis::cmd("SADD");
            command.arg(&key).arg(members.iter().collect::<Vec<_>>());
            return Write::one(key, Op::Members(members), command);
        }
        let element = format!("m{}", self.rng.random_range(0..BIG + 20));
        self.change_set(key, element)
    }

    /// SADD or SREM of an integer member: an intset.
    fn intset_write(&mut self) -> Write {
        let key = self.key("i", 6);
        let element = self.rng.random_range(-20..20i64).to_string();
        self.change_set(key, element)
    }

    /// SREM (one time in four) or SADD of `element` in the set at `key`.
    fn change_set(&mut self, key: String, element: String) -> Write {
        let mut members = match self.last(&key) {
            Some(Op::Members(members)) => members,
            _ => BTreeSet::new(),
        };
        let remove = self.rng.random_bool(0.25);
        let mut command = redis::cmd(if remove { "SREM" } else { "SADD" });
        command.arg(&key).arg(&element);
        if remove {
            members.remove(element.as_bytes());
        } else {
            members.insert(element.into_bytes());
        }
        let op = if members.is_empty() {
            Op::Del
        } else {
            Op::Members(members)
        };
        Write::one(key, op, command)
    }

    /// RPUSH, or LPOP one time in four.
    fn list_write(&mut self, n: usize) -> Write {
        let key = self.key("l", 10);
        let element = format!("e{}-{n}", self.rng.random_range(0..12u32));
        if self.rng.random_bool(0.25) {
            let mut items = self.list(&key);
            if !items.is_empty() {
                items.remove(0);
            }
            let mut command = redis::cmd("LPOP");
            command.arg(&key);
            Write::one(key, list_op(items), command)
        } else {
            let mut command = redis::cmd("RPUSH");
            command.arg(&key).arg(&element);
            Write::one(key.clone(), self.list_after_push(&key, element), command)
        }
    }

    /// The list at `key`, as last written.
    fn list(&self, key: &str) -> Vec<Vec<u8>> {
        match self.last(key) {
            Some(Op::List(items)) => items,
            _ => Vec::new(),
        }
    }

    /// The list at `key` after an RPUSH of `element`.
    fn list_after_push(&self, key: &str, element: String) -> Op {
        let mut items = self.list(key);
        items.push(element.into_bytes());
        list_op(items)
    }

    /// XADD (some with an exact MAXLEN trim), XDEL of the first entry or XTRIM MINID.
    fn stream_write(&mut self, n: usize) -> Write {
        let key = self.key("x", 10);
        let last = self.last(&key);
        let element = format!("e{}", self.rng.random_range(0..12u32)).into_bytes();
        let remove = self.rng.random_bool(0.25);
        let existed = matches!(last, Some(Op::Stream(_)));
        let mut entries = match last {
            Some(Op::Stream(entries)) => entries,
            _ => Vec::new(),
        };
        // IDs rise with the client's op count: every XADD is accepted.
        let id = format!("{}-1", n + 1);
        let command = match (remove, self.rng.random_range(0..3u32)) {
            (true, 0) if !entries.is_empty() => {
                let first = entries.remove(0).0;
                let mut command = redis::cmd("XDEL");
                command.arg(&key).arg(first);
                command
            }
            (true, _) => {
                // Entries below a recent ID go (exactly, the `=` form).
                let min = format!("{}-0", n.saturating_sub(self.rng.random_range(1..60)));
                let bound = parse_id(&min);
                entries.retain(|(id, _, _)| parse_id(id) >= bound);
                let mut command = redis::cmd("XTRIM");
                command.arg(&key).arg("MINID").arg("=").arg(min);
                command
            }
            (false, cap) => {
                let mut command = redis::cmd("XADD");
                command.arg(&key);
                entries.push((id.clone(), element.clone(), format!("v{n}").into_bytes()));
                if cap == 0 {
                    command.arg("MAXLEN").arg(8);
                    let excess = entries.len().saturating_sub(8);
                    entries.drain(..excess);
                }
                command.arg(&id).arg(&element).arg(format!("v{n}"));
                command
            }
        };
        // A stream stays, empty or not, once made (XTRIM and XDEL on a missing key make
        // nothing).
        let op = if existed || !remove {
            Op::Stream(entries)
        } else {
            Op::Del
        };
        Write::one(key, op, command)
    }

    /// A stream with consumer group `group` (XGROUP CREATE … MKSTREAM first), then XADD,
    /// XREADGROUP of the next entry by one of three consumers, XACK of the oldest pending
    /// entry, or XCLAIM of a pending entry by another consumer (its delivery count goes
    /// up): none idempotent.
    fn grouped_stream_write(&mut self, n: usize) -> Write {
        let key = self.key("g", 2);
        let Some(Op::Grouped {
            mut entries,
            mut last_delivered,
            mut pending,
        }) = self.last(&key)
        else {
            let mut command = redis::cmd("XGROUP");
            command
                .arg("CREATE")
                .arg(&key)
                .arg(GROUP)
                .arg(0)
                .arg("MKSTREAM");
            let op = Op::Grouped {
                entries: Vec::new(),
                last_delivered: (0, 0),
                pending: BTreeMap::new(),
            };
            return Write::one(key, op, command);
        };
        let consumer = format!("consumer{}", self.rng.random_range(0..3u32));
        let mut command = redis::cmd("XADD");
        match self.rng.random_range(0..10u32) {
            0..4 => {
                let id = format!("{}-1", n + 1);
                command.arg(&key).arg(&id).arg("f").arg(format!("v{n}"));
                entries.push((id, b"f".to_vec(), format!("v{n}").into_bytes()));
            }
            4..7 => {
                command = redis::cmd("XREADGROUP");
                command.arg("GROUP").arg(GROUP).arg(&consumer);
                command
                    .arg("COUNT")
                    .arg(1)
                    .arg("STREAMS")
                    .arg(&key)
                    .arg(">");
                let next = entries
                    .iter()
                    .map(|(id, _, _)| parse_id(id))
                    .find(|id| *id > last_delivered);
                if let Some(id) = next {
                    last_delivered = id;
                    pending.insert(id, (consumer, 1));
                }
            }
            7..9 => {
                // Of nothing pending, an ID no entry has: acknowledges nothing.
                let oldest = pending.keys().next().copied().unwrap_or((0, 1));
                pending.remove(&oldest);
                command = redis::cmd("XACK");
                command.arg(&key).arg(GROUP).arg(format_id(oldest));
            }
            _ => {
                let claimed = pending.keys().last().copied().unwrap_or((0, 1));
                if let Some((owner, deliveries)) = pending.get_mut(&claimed) {
                    *owner = consumer.clone();
                    *deliveries += 1;
                }
                command = redis::cmd("XCLAIM");
                command.arg(&key).arg(GROUP).arg(&consumer).arg(0);
                command.arg(format_id(claimed));
            }
        }
        let op = Op::Grouped {
            entries,
            last_delivered,
            pending,
        };
        Write::one(key, op, command)
    }

    /// ZINCRBY or ZREM of a member of a small sorted set.
    fn zset_write(&mut self) -> Write {
        let key = self.key("z", 10);
        let element = format!("e{}", self.rng.random_range(0..12u32));
        self.change_zset(key, element)
    }

    /// A sorted set past 128 members (a skip list): made with 200 at once, then as
    /// `zset_write`.
    fn big_zset_write(&mut self) -> Write {
        let key = self.key("Z", 1);
        if !matches!(self.last(&key), Some(Op::Scores(_))) {
            // A member past 64 bytes first: a skip list at once, as the big hash.
            let long = (vec![b'l'; 100], -1);
            let scores: Vec<_> = std::iter::once(long)
                .chain((0..200).map(|m| (format!("m{m}").into_bytes(), m)))
                .collect();
            let mut command = redis::cmd("ZADD");
            command.arg(&key);
            for (member, score) in &scores {
                command.arg(score).arg(member);
            }
            return Write::one(key, Op::Scores(scores.into_iter().collect()), command);
        }
        let element = format!("m{}", self.rng.random_range(0..220u32));
        self.change_zset(key, element)
    }

    /// ZREM (one time in four) or ZINCRBY of `element` in the sorted set at `key`.
    fn change_zset(&mut self, key: String, element: String) -> Write {
        let mut scores = match self.last(&key) {
            Some(Op::Scores(scores)) => scores,
            _ => BTreeMap::new(),
        };
        let remove = self.rng.random_bool(0.25);
        let mut command = redis::cmd(if remove { "ZREM" } else { "ZINCRBY" });
        command.arg(&key);
        if remove {
            scores.remove(element.as_bytes());
        } else {
            let by = self.rng.random_range(1..100i64);
            command.arg(by);
            *scores.entry(element.clone().into_bytes()).or_insert(0) += by;
        }
        command.arg(&element);
        let op = if scores.is_empty() {
            Op::Del
        } else {
            Op::Scores(scores)
        };
        Write::one(key, op, command)
    }

    /// INCRBY of a counter; one time in three with an RPUSH to a list, by a script: two
    /// keys changed by one write, both or neither after a crash.
    fn counter_write(&mut self, n: usize) -> Write {
        let key = self.key("n", 6);
        let old: i64 = match self.last(&key) {
            Some(Op::Set(value, _)) => String::from_utf8_lossy(&value).parse().unwrap(),
            _ => 0,
        };
        let by = self.rng.random_range(1..1000i64);
        let counter = Op::Set((old + by).to_string().into_bytes(), false);
        if self.rng.random_bool(1.0 / 3.0) {
            let list = self.key("l", 10);
            let element = format!("script-{n}");
            let mut command = redis::cmd("EVAL");
            command.arg(COUNT_AND_PUSH).arg(2).arg(&key).arg(&list);
            command.arg(by).arg(&element);
            let pushed = self.list_after_push(&list, element);
            return Write {
                changes: vec![(key, counter), (list, pushed)],
                command,
            };
        }
        let mut command = redis::cmd("INCRBY");
        command.arg(&key).arg(by);
        Write::one(key, counter, command)
    }

    /// EXPIRE, PEXPIREAT (far in the future) or PERSIST on a string key: its TTL set or
    /// taken away (a missing key stays missing).
    fn ttl_write(&mut self) -> Write {
        let key = self.key("k", 40);
        let current = match self.last(&key) {
            Some(Op::Set(value, _)) => Some(value),
            _ => None,
        };
        let mut command;
        let ttl = match self.rng.random_range(0..3u32) {
            0 => {
                command = redis::cmd("EXPIRE");
                command.arg(&key).arg(100_000);
                true
            }
            1 => {
                command = redis::cmd("PEXPIREAT");
                command.arg(&key).arg(FAR_FUTURE_MS);
                true
            }
            _ => {
                command = redis::cmd("PERSIST");
                command.arg(&key);
                false
            }
        };
        let op = current.map_or(Op::Del, |value| Op::Set(value, ttl));
        Write::one(key, op, command)
    }

    /// On a string key: DEL, APPEND, SETBIT, SET with a far expiry or without (some
    /// through a script or a function that deletes the key and sets it: two records that
    /// the log must replay together, a MULTI/EXEC block, or not at all — replaying the DEL
    /// alone would leave a state nobody wrote).
    fn string_write(&mut self, choice: u32, n: usize) -> Write {
        let key = self.key("k", 40);
        let (current, had_ttl) = match self.last(&key) {
            Some(Op::Set(value, ttl)) => (Some(value), ttl),
            _ => (None, false),
        };
        let suffix = format!("+{n}");
        let mut command;
        let op = match choice {
            0..10 => {
                command = redis::cmd("DEL");
                command.arg(&key);
                Op::Del
            }
            // SETBIT changes a string in place while nobody shares it (a capture does).
            20..25 => {
                let mut value = current.unwrap_or_default();
                let bit = self.rng.random_range(0..(value.len() as u64 * 8 + 64));
                let byte = (bit / 8) as usize;
                if value.len() <= byte {
                    value.resize(byte + 1, 0);
                }
                value[byte] |= 0x80 >> (bit % 8);
                command = redis::cmd("SETBIT");
                command.arg(&key).arg(bit).arg(1);
                Op::Set(value, had_ttl)
            }
            10..20 => {
                let mut value = current.unwrap_or_default();
                value.extend_from_slice(suffix.as_bytes());
                command = redis::cmd("APPEND");
                command.arg(&key).arg(&suffix);
                Op::Set(value, had_ttl)
            }
            _ => {
                let value = self.new_value(n);
                let with_expiry = choice < 35;
                let by_script = !with_expiry && choice >= 40 && self.rng.random_bool(0.3);
                let by_function = by_script && self.rng.random_bool(0.5);
                command = if by_function {
                    let mut command = redis::cmd("FCALL");
                    command.arg("model_replace").arg(1);
                    command
                } else if by_script {
                    let mut command = redis::cmd("EVAL");
                    command
                        .arg(
                            "redis.call('del', KEYS[1]) return redis.call('set', KEYS[1], ARGV[1])",
                        )
                        .arg(1);
                    command
                } else {
                    redis::cmd("SET")
                };
                command.arg(&key).arg(&value);
                if with_expiry {
                    command.arg("PX").arg(3_600_000);
                }
                Op::Set(value, with_expiry)
            }
        };
        Write::one(key, op, command)
    }

    /// A value of one of many sizes, some long and compressible.
    fn new_value(&mut self, n: usize) -> Vec<u8> {
        let size = [8usize, 30, 100, 700, 3000][self.rng.random_range(0..5usize)];
        let mut value = format!("c{}-{n}-", self.client).into_bytes();
        let fill = if self.rng.random_bool(0.5) {
            b'x'
        } else {
            b'a' + (n % 26) as u8
        };
        value.resize(size.max(value.len()), fill);
        value
    }
}

/// A list's state: an empty one is no key.
fn list_op(items: Vec<Vec<u8>>) -> Op {
    if items.is_empty() {
        Op::Del
    } else {
        Op::List(items)
    }
}

/// The name of a command, for `Model::acked_commands`.
fn command_name(command: &redis::Cmd) -> String {
    let name = command.args_iter().next();
    match name {
        Some(redis::Arg::Simple(bytes)) => String::from_utf8_lossy(bytes).to_uppercase(),
        _ => String::new(),
    }
}

/// One client's write load on its keys of database `db` (`KINDS`): strings (SET with or
/// without a far expiry, values of many sizes, some long and compressible, some through a
/// script or a function; APPEND, SETBIT, DEL; EXPIRE, PEXPIREAT, PERSIST), counters
/// (INCRBY, some with an RPUSH by a script), small and big hashes (HINCRBY, HDEL), sets of
/// strings, big ones and intsets (SADD, SREM), lists (RPUSH, LPOP), small and big sorted
/// sets (ZINCRBY, ZREM), streams (XADD, some with an exact MAXLEN trim; XDEL, XTRIM MINID)
/// and streams with a consumer group (XADD, XREADGROUP, XACK, XCLAIM), until `stop` or the
/// first error (an unanswered request counts as attempted, not acknowledged). `acked`
/// counts its writes acknowledged so far. The function library must be loaded
/// (`load_library`).
pub fn write_load(
    url: &str,
    client: usize,
    db: i64,
    seed: u64,
    stop: Arc<AtomicBool>,
    max_ops: usize,
    acked: &AtomicUsize,
) -> Model {
    let mut writer = Writer {
        client,
        db,
        rng: rand::rngs::StdRng::seed_from_u64(seed),
        model: Model::default(),
    };
    let Ok(mut conn) = redis::Client::open(url).and_then(|c| c.get_connection()) else {
        return writer.model;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    if redis::cmd("SELECT").arg(db).query::<()>(&mut conn).is_err() {
        return writer.model;
    }
    for n in 0..max_ops {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let write = writer.next_write(n);
        let indexes: Vec<(String, usize)> = write
            .changes
            .into_iter()
            .map(|(key, op)| {
                let history = writer.model.keys.entry((db, key.clone())).or_default();
                (key, history.push(client, n, op))
            })
            .collect();
        if write.command.query::<redis::Value>(&mut conn).is_err() {
            break;
        }
        for (key, index) in indexes {
            writer.model.keys.get_mut(&(db, key)).unwrap().acked = Some(index);
        }
        *writer
            .model
            .acked_commands
            .entry(command_name(&write.command))
            .or_default() += 1;
        acked.store(n + 1, Ordering::Relaxed);
    }
    writer.model
}

/// Loads the load's function library (once, before its clients start: its FCALLs need it).
pub fn load_library(url: &str) {
    let mut conn = redis::Client::open(url)
        .and_then(|c| c.get_connection())
        .unwrap();
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(MODEL_LIBRARY)
        .query(&mut conn)
        .unwrap();
}

/// How many writes each client of a running load has had acknowledged so far.
#[derive(Clone)]
pub struct Progress(Arc<Vec<AtomicUsize>>);

impl Progress {
    pub fn acked(&self) -> Vec<usize> {
        self.0.iter().map(|n| n.load(Ordering::Relaxed)).collect()
    }
}

/// Runs `clients` write loads at once (databases 0, 1, 2 in turn) until `stop`.
pub fn spawn_load(
    url: &str,
    clients: usize,
    seed: u64,
    stop: &Arc<AtomicBool>,
    max_ops: usize,
) -> Vec<std::thread::JoinHandle<Model>> {
    spawn_load_with_progress(url, clients, seed, stop, max_ops).0
}

/// `spawn_load`, and how far each client is while they run. Loads the function library
/// first.
pub fn spawn_load_with_progress(
    url: &str,
    clients: usize,
    seed: u64,
    stop: &Arc<AtomicBool>,
    max_ops: usize,
) -> (Vec<std::thread::JoinHandle<Model>>, Progress) {
    load_library(url);
    let progress = Progress(Arc::new(
        (0..clients).map(|_| AtomicUsize::new(0)).collect(),
    ));
    let handles = (0..clients)
        .map(|client| {
            let url = url.to_string();
            let stop = stop.clone();
            let progress = progress.clone();
            std::thread::spawn(move || {
                write_load(
                    &url,
                    client,
                    (client % 3) as i64,
                    seed ^ (client as u64 * 7919),
                    stop,
                    max_ops,
                    &progress.0[client],
                )
            })
        })
        .collect();
    (handles, progress)
}

pub fn join_load(handles: Vec<std::thread::JoinHandle<Model>>) -> Model {
    let mut model = Model::default();
    for handle in handles {
        model.merge(handle.join().unwrap());
    }
    model
}
