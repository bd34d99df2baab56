//! A record of what clients asked and what the server acknowledged, to check a dataset
//! after a crash: every acknowledged write is there (or a later attempted one), every
//! value is one that was written, nothing else appears.

use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A write, as the state it leaves the key in (APPEND is recorded as the value it makes,
/// so a write applied twice, say by a replay, shows as a value never written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Set(Vec<u8>),
    Del,
}

#[derive(Default, Debug)]
pub struct KeyHistory {
    /// Every write attempted on the key, in order (one client per key: no races).
    pub ops: Vec<Op>,
    /// Index in `ops` of the last acknowledged one.
    pub acked: Option<usize>,
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

    /// Checks the dataset behind `conn` against the model; returns the problems found.
    pub fn verify(&self, conn: &mut redis::Connection) -> Vec<String> {
        let mut problems = Vec::new();
        for ((db, key), history) in &self.keys {
            let _: () = redis::cmd("SELECT").arg(*db).query(conn).unwrap();
            let actual: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(conn).unwrap();
            let candidates = match history.acked {
                Some(index) => &history.ops[index..],
                None => &history.ops[..],
            };
            let matches = |op: &Op| match (op, &actual) {
                (Op::Set(v), Some(a)) => v == a,
                (Op::Del, None) => true,
                _ => false,
            };
            let never_acked_and_absent = history.acked.is_none() && actual.is_none();
            if !(never_acked_and_absent || candidates.iter().any(matches)) {
                problems.push(format!(
                    "db {db} key {key}: found {:?}, acked op {:?} of {} (last acked {:?})",
                    actual
                        .as_ref()
                        .map(|v| String::from_utf8_lossy(&v[..v.len().min(40)]).into_owned()),
                    history.acked,
                    history.ops.len(),
                    history.acked.map(|i| match &history.ops[i] {
                        Op::Set(v) => String::from_utf8_lossy(&v[..v.len().min(40)]).into_owned(),
                        Op::Del => "DEL".into(),
                    })
                ));
            }
        }
        // Nothing else: every key in the databases used was written by some client.
        let dbs: std::collections::BTreeSet<i64> = self.keys.keys().map(|(db, _)| *db).collect();
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

/// One client's write load: SET (some with a far expiry, values of many sizes, some long
/// and compressible), APPEND and DEL, on its own keys in database `db`, until `stop` or
/// the first error (an unanswered request counts as attempted, not acknowledged).
pub fn write_load(
    url: &str,
    client: usize,
    db: i64,
    seed: u64,
    stop: Arc<AtomicBool>,
    max_ops: usize,
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
    for n in 0..max_ops {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let key = format!("c{client}:k{}", rng.random_range(0..40u32));
        let choice = rng.random_range(0..100u32);
        let current = model
            .keys
            .get(&(db, key.clone()))
            .and_then(|h| match h.ops.last() {
                Some(Op::Set(value)) => Some(value.clone()),
                _ => None,
            });
        let suffix = format!("+{n}");
        let op = if choice < 12 {
            Op::Del
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
        let history = model.keys.entry((db, key.clone())).or_default();
        history.ops.push(op.clone());
        let index = history.ops.len() - 1;
        let result: redis::RedisResult<redis::Value> = match &op {
            Op::Del => redis::cmd("DEL").arg(&key).query(&mut conn),
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
        };
        match result {
            Ok(_) => history.acked = Some(index),
            Err(_) => break,
        }
    }
    model
}

/// Runs `clients` write loads at once (databases 0, 1, 2 in turn) until `stop`.
pub fn spawn_load(
    url: &str,
    clients: usize,
    seed: u64,
    stop: &Arc<AtomicBool>,
    max_ops: usize,
) -> Vec<std::thread::JoinHandle<Model>> {
    (0..clients)
        .map(|client| {
            let url = url.to_string();
            let stop = stop.clone();
            std::thread::spawn(move || {
                write_load(
                    &url,
                    client,
                    (client % 3) as i64,
                    seed ^ (client as u64 * 7919),
                    stop,
                    max_ops,
                )
            })
        })
        .collect()
}

pub fn join_load(handles: Vec<std::thread::JoinHandle<Model>>) -> Model {
    let mut model = Model::default();
    for handle in handles {
        model.merge(handle.join().unwrap());
    }
    model
}
