//! A record of what clients asked and what the server acknowledged, to check a dataset
//! after a crash: every acknowledged write is there (or a later attempted one), every
//! value is one that was written, nothing else appears.

use rand::{RngExt, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A write, as the state it leaves the key in (APPEND is recorded as the value it makes,
/// HINCRBY as the hash it makes, so a write applied twice, say by a replay, shows as a
/// state never written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Set(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    Members(BTreeSet<Vec<u8>>),
    List(Vec<Vec<u8>>),
    /// Member to (integer) score.
    Scores(BTreeMap<Vec<u8>, i64>),
    /// A stream's entries (ID, field, value); empty is a stream with no entries, which a
    /// stream may be.
    Stream(Vec<(String, Vec<u8>, Vec<u8>)>),
    Del,
}

impl Op {
    /// A short description for failure messages.
    fn describe(&self) -> String {
        match self {
            Op::Set(v) => String::from_utf8_lossy(&v[..v.len().min(40)]).into_owned(),
            Op::Hash(h) => format!("hash of {} fields", h.len()),
            Op::Members(m) => format!("set of {} members", m.len()),
            Op::List(l) => format!("list of {} elements", l.len()),
            Op::Scores(z) => format!("sorted set of {} members", z.len()),
            Op::Stream(x) => format!(
                "stream of {} entries (last {:?})",
                x.len(),
                x.last().map(|(id, _, _)| id)
            ),
            Op::Del => "DEL".into(),
        }
    }
}

/// An entry's fields and values as XRANGE gives them.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The state of `key` as the server has it (an absent key is `Del`).
fn read_state(conn: &mut redis::Connection, key: &str) -> Op {
    let kind: String = redis::cmd("TYPE").arg(key).query(conn).unwrap();
    match kind.as_str() {
        "none" => Op::Del,
        "string" => Op::Set(redis::cmd("GET").arg(key).query(conn).unwrap()),
        "hash" => Op::Hash(redis::cmd("HGETALL").arg(key).query(conn).unwrap()),
        "set" => Op::Members(redis::cmd("SMEMBERS").arg(key).query(conn).unwrap()),
        "list" => Op::List(
            redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query(conn)
                .unwrap(),
        ),
        "zset" => {
            let pairs: Vec<(Vec<u8>, i64)> = redis::cmd("ZRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .arg("WITHSCORES")
                .query(conn)
                .unwrap();
            Op::Scores(pairs.into_iter().collect())
        }
        "stream" => {
            let entries: Vec<(String, Fields)> = redis::cmd("XRANGE")
                .arg(key)
                .arg("-")
                .arg("+")
                .query(conn)
                .unwrap();
            Op::Stream(
                entries
                    .into_iter()
                    .map(|(id, mut fields)| {
                        assert_eq!(fields.len(), 1, "{key}: one field per entry written");
                        let (field, value) = fields.pop().unwrap();
                        (id, field, value)
                    })
                    .collect(),
            )
        }
        other => panic!("{key}: unexpected type {other}"),
    }
}

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
}

impl Model {
    pub fn merge(&mut self, other: Model) {
        for (key, history) in other.keys {
            assert!(
                self.keys.insert(key, history).is_none(),
                "keys are per client"
            );
        }
    }

    pub fn acked_count(&self) -> usize {
        self.keys.values().filter(|h| h.acked.is_some()).count()
    }

    /// Keys with an acknowledged write whose name says they are of `kind` ("k" strings,
    /// "h" hashes, "s" sets, "l" lists, "z" sorted sets, "x" streams): the load did reach
    /// every type.
    pub fn acked_of_kind(&self, kind: &str) -> usize {
        self.keys
            .iter()
            .filter(|((_, key), h)| h.acked.is_some() && key.contains(&format!(":{kind}")))
            .count()
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
    /// durable). Also reports keys no client wrote. Returns the problems found.
    pub fn verify_prefix(&self, conn: &mut redis::Connection, at_least: &[usize]) -> Vec<String> {
        type Keys<'a> = Vec<(&'a (i64, String), &'a KeyHistory)>;
        let mut by_client: BTreeMap<usize, Keys> = BTreeMap::new();
        for (key, history) in &self.keys {
            by_client
                .entry(history.client)
                .or_default()
                .push((key, history));
        }
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
            for ((db, key), history) in keys {
                let _: () = redis::cmd("SELECT").arg(*db).query(conn).unwrap();
                let actual = read_state(conn, key);
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
        problems
    }

    /// Checks the dataset behind `conn` against the model; returns the problems found.
    pub fn verify(&self, conn: &mut redis::Connection) -> Vec<String> {
        let mut problems = Vec::new();
        for ((db, key), history) in &self.keys {
            let _: () = redis::cmd("SELECT").arg(*db).query(conn).unwrap();
            let actual = read_state(conn, key);
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
        problems
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

/// The function library of the write load (loaded by every client, REPLACE): the same
/// DEL-then-SET as its script.
const MODEL_LIBRARY: &str = "#!lua name=model
redis.register_function('model_replace', function(keys, args)
  redis.call('del', keys[1])
  return redis.call('set', keys[1], args[1])
end)";

/// One client's write load: SET (some with a far expiry, values of many sizes, some long
/// and compressible; some through a script or a function), APPEND, SETBIT and DEL on its
/// string keys, HINCRBY/HDEL on its hashes, SADD/SREM on its sets, RPUSH/LPOP on its
/// lists, ZINCRBY/ZREM on its sorted sets and XADD (some with an exact MAXLEN
/// trim)/XDEL/XTRIM MINID on its streams,
/// in database `db`, until `stop` or the first error (an unanswered request counts as
/// attempted, not acknowledged). `acked` counts its writes acknowledged so far.
pub fn write_load(
    url: &str,
    client: usize,
    db: i64,
    seed: u64,
    stop: Arc<AtomicBool>,
    max_ops: usize,
    acked: &AtomicUsize,
) -> Model {
    let mut model = Model::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let Ok(mut conn) = redis::Client::open(url).and_then(|c| c.get_connection()) else {
        return model;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    if redis::cmd("SELECT").arg(db).query::<()>(&mut conn).is_err() {
        return model;
    }
    let loaded = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(MODEL_LIBRARY)
        .query::<String>(&mut conn);
    if loaded.is_err() {
        return model;
    }
    for n in 0..max_ops {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let choice = rng.random_range(0..100u32);
        if choice >= 70 {
            // Collections of this client's, changed one element at a time: hashes,
            // sets, lists, sorted sets and streams.
            let kind = ["h", "s", "l", "z", "x"][((choice - 70) / 6) as usize];
            let key = format!("c{client}:{kind}{}", rng.random_range(0..10u32));
            let last = model
                .keys
                .get(&(db, key.clone()))
                .and_then(|h| h.ops.last().cloned());
            let element = format!("e{}", rng.random_range(0..12u32)).into_bytes();
            let remove = rng.random_bool(0.25);
            let (op, command) = match kind {
                "h" => {
                    let mut fields = match last {
                        Some(Op::Hash(fields)) => fields,
                        _ => BTreeMap::new(),
                    };
                    let mut command = redis::cmd(if remove { "HDEL" } else { "HINCRBY" });
                    command.arg(&key).arg(&element);
                    if remove {
                        fields.remove(&element);
                    } else {
                        let by = rng.random_range(1..1000i64);
                        command.arg(by);
                        let old: i64 = fields
                            .get(&element)
                            .map_or(0, |v| String::from_utf8_lossy(v).parse().unwrap());
                        fields.insert(element.clone(), (old + by).to_string().into_bytes());
                    }
                    let op = if fields.is_empty() {
                        Op::Del
                    } else {
                        Op::Hash(fields)
                    };
                    (op, command)
                }
                "s" => {
                    let mut members = match last {
                        Some(Op::Members(members)) => members,
                        _ => BTreeSet::new(),
                    };
                    let mut command = redis::cmd(if remove { "SREM" } else { "SADD" });
                    command.arg(&key).arg(&element);
                    if remove {
                        members.remove(&element);
                    } else {
                        members.insert(element.clone());
                    }
                    let op = if members.is_empty() {
                        Op::Del
                    } else {
                        Op::Members(members)
                    };
                    (op, command)
                }
                "l" => {
                    let mut items = match last {
                        Some(Op::List(items)) => items,
                        _ => Vec::new(),
                    };
                    let command = if remove {
                        if !items.is_empty() {
                            items.remove(0);
                        }
                        let mut command = redis::cmd("LPOP");
                        command.arg(&key);
                        command
                    } else {
                        let mut value = element.clone();
                        value.extend_from_slice(format!("-{n}").as_bytes());
                        let mut command = redis::cmd("RPUSH");
                        command.arg(&key).arg(&value);
                        items.push(value);
                        command
                    };
                    let op = if items.is_empty() {
                        Op::Del
                    } else {
                        Op::List(items)
                    };
                    (op, command)
                }
                "x" => {
                    let existed = matches!(last, Some(Op::Stream(_)));
                    let mut entries = match last {
                        Some(Op::Stream(entries)) => entries,
                        _ => Vec::new(),
                    };
                    // IDs rise with the client's op count: every XADD is accepted.
                    let id = format!("{}-1", n + 1);
                    let command = match (remove, rng.random_range(0..3u32)) {
                        (true, 0) if !entries.is_empty() => {
                            let first = entries.remove(0).0;
                            let mut command = redis::cmd("XDEL");
                            command.arg(&key).arg(first);
                            command
                        }
                        (true, _) => {
                            // Entries below a recent ID go (exactly, the `=` form).
                            let min = format!("{}-0", n.saturating_sub(rng.random_range(1..60)));
                            let parse = |id: &str| -> (u64, u64) {
                                let (ms, seq) = id.split_once('-').unwrap();
                                (ms.parse().unwrap(), seq.parse().unwrap())
                            };
                            let bound = parse(&min);
                            entries.retain(|(id, _, _)| parse(id) >= bound);
                            let mut command = redis::cmd("XTRIM");
                            command.arg(&key).arg("MINID").arg("=").arg(min);
                            command
                        }
                        (false, cap) => {
                            let mut command = redis::cmd("XADD");
                            command.arg(&key);
                            entries.push((
                                id.clone(),
                                element.clone(),
                                format!("v{n}").into_bytes(),
                            ));
                            if cap == 0 {
                                command.arg("MAXLEN").arg(8);
                                let excess = entries.len().saturating_sub(8);
                                entries.drain(..excess);
                            }
                            command.arg(&id).arg(&element).arg(format!("v{n}"));
                            command
                        }
                    };
                    // A stream stays, empty or not, once made (XTRIM and XDEL on a missing
                    // key make nothing).
                    let op = if existed || !remove {
                        Op::Stream(entries)
                    } else {
                        Op::Del
                    };
                    (op, command)
                }
                _ => {
                    let mut scores = match last {
                        Some(Op::Scores(scores)) => scores,
                        _ => BTreeMap::new(),
                    };
                    let mut command = redis::cmd(if remove { "ZREM" } else { "ZINCRBY" });
                    command.arg(&key);
                    if remove {
                        scores.remove(&element);
                    } else {
                        let by = rng.random_range(1..100i64);
                        command.arg(by);
                        *scores.entry(element.clone()).or_insert(0) += by;
                    }
                    command.arg(&element);
                    let op = if scores.is_empty() {
                        Op::Del
                    } else {
                        Op::Scores(scores)
                    };
                    (op, command)
                }
            };
            let history = model.keys.entry((db, key)).or_default();
            let index = history.push(client, n, op);
            match command.query::<redis::Value>(&mut conn) {
                Ok(_) => history.acked = Some(index),
                Err(_) => break,
            }
            acked.store(n + 1, Ordering::Relaxed);
            continue;
        }
        let key = format!("c{client}:k{}", rng.random_range(0..40u32));
        let current = model
            .keys
            .get(&(db, key.clone()))
            .and_then(|h| match h.ops.last() {
                Some(Op::Set(value)) => Some(value.clone()),
                _ => None,
            });
        let suffix = format!("+{n}");
        // SETBIT changes a string in place while nobody shares it (a capture does).
        let set_bit = (25..30).contains(&choice);
        let bit = rng.random_range(0..(current.as_ref().map_or(0, Vec::len) as u64 * 8 + 64));
        let op = if choice < 12 {
            Op::Del
        } else if set_bit {
            let mut value = current.unwrap_or_default();
            let byte = (bit / 8) as usize;
            if value.len() <= byte {
                value.resize(byte + 1, 0);
            }
            value[byte] |= 0x80 >> (bit % 8);
            Op::Set(value)
        } else if choice < 30 {
            let mut value = current.unwrap_or_default();
            value.extend_from_slice(suffix.as_bytes());
            Op::Set(value)
        } else {
            let size = [8usize, 30, 100, 700, 3000][rng.random_range(0..5usize)];
            let mut value = format!("c{client}-{n}-").into_bytes();
            let fill = if rng.random_bool(0.5) {
                b'x'
            } else {
                b'a' + (n % 26) as u8
            };
            value.resize(size.max(value.len()), fill);
            Op::Set(value)
        };
        // Some plain SETs go through a script or a function that deletes the key and sets
        // it: two records that the log must replay together (a MULTI/EXEC block) or not at
        // all — replaying the DEL alone would leave a state nobody wrote.
        let by_script = choice >= 45 && rng.random_bool(0.3);
        let by_function = by_script && rng.random_bool(0.5);
        let history = model.keys.entry((db, key.clone())).or_default();
        let index = history.push(client, n, op.clone());
        let result: redis::RedisResult<redis::Value> = match &op {
            Op::Set(value) if by_function => redis::cmd("FCALL")
                .arg("model_replace")
                .arg(1)
                .arg(&key)
                .arg(value)
                .query(&mut conn),
            Op::Set(value) if by_script => redis::cmd("EVAL")
                .arg("redis.call('del', KEYS[1]) return redis.call('set', KEYS[1], ARGV[1])")
                .arg(1)
                .arg(&key)
                .arg(value)
                .query(&mut conn),
            Op::Del => redis::cmd("DEL").arg(&key).query(&mut conn),
            Op::Set(_) if set_bit => redis::cmd("SETBIT")
                .arg(&key)
                .arg(bit)
                .arg(1)
                .query(&mut conn),
            Op::Set(_) if choice < 30 => {
                redis::cmd("APPEND").arg(&key).arg(&suffix).query(&mut conn)
            }
            Op::Set(value) if choice < 45 => redis::cmd("SET")
                .arg(&key)
                .arg(value)
                .arg("PX")
                .arg(3_600_000)
                .query(&mut conn),
            Op::Set(value) => redis::cmd("SET").arg(&key).arg(value).query(&mut conn),
            _ => unreachable!("strings only here"),
        };
        match result {
            Ok(_) => history.acked = Some(index),
            Err(_) => break,
        }
        acked.store(n + 1, Ordering::Relaxed);
    }
    model
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

/// `spawn_load`, and how far each client is while they run.
pub fn spawn_load_with_progress(
    url: &str,
    clients: usize,
    seed: u64,
    stop: &Arc<AtomicBool>,
    max_ops: usize,
) -> (Vec<std::thread::JoinHandle<Model>>, Progress) {
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
