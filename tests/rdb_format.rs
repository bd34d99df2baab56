//! Tessera's RDB files against the oracle: `redis-check-rdb` accepts them, Redis 7.0
//! loads them with the same keys, values and expiry times, and Tessera loads the
//! `dump.rdb` that Redis itself writes.

mod common;

use common::{RedisOracle, WHOLE_TEST, require_redis_or_skip, temp_dir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tessera::keyspace::{Entry, NO_EXPIRY, Value};
use tessera::rdb::{RdbError, RdbVisitor, RdbWriter, RdbWriterOptions, Refusal, load};

/// (db, key) → (value, absolute expiry in ms or NO_EXPIRY)
type Dataset = BTreeMap<(u32, Vec<u8>), (Vec<u8>, i64)>;

/// Seeded pseudo-random numbers and bytes, so failures reproduce.
struct Random(rand::rngs::StdRng);

impl Random {
    fn new(seed: u64) -> Random {
        Random(rand::SeedableRng::seed_from_u64(seed))
    }
    fn next(&mut self) -> u64 {
        rand::Rng::next_u64(&mut self.0)
    }
    fn bytes(&mut self, length: usize) -> Vec<u8> {
        (0..length).map(|_| self.next() as u8).collect()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Strings in every encoding RDB has: integers of each width and texts that only look
/// like integers, empty and binary strings, short, compressible and incompressible long
/// ones (past the 14-bit and the staging-buffer sizes), with and without expiry.
fn string_values(random: &mut Random) -> Vec<Vec<u8>> {
    let mut values: Vec<Vec<u8>> = [
        "0",
        "-1",
        "127",
        "-128",
        "128",
        "32767",
        "-32768",
        "65536",
        "2147483647",
        "-2147483648",
        "2147483648",
        "123456789012",
        "-9223372036854775808",
        "007",
        "-0",
        "+5",
        " 5",
        "1.5",
        "",
        "short",
        "exactly twenty bytes",
        "twenty-one bytes long",
    ]
    .iter()
    .map(|text| text.as_bytes().to_vec())
    .collect();
    values.push(vec![0, 255, b'\r', b'\n', 0]);
    values.push(b"abc".repeat(5000));
    values.push(random.bytes(100_000));
    values.push(b"0123456789".repeat(110_000));
    values.push(random.bytes(40));
    values
}

/// The dataset Tessera writes for Redis to load: several databases, every kind of
/// string, binary keys, expiries in the future (and one in the past, which Redis drops).
fn tessera_dataset() -> Dataset {
    let mut random = Random::new(0x7e55e7a);
    let future = now_ms() + 3_600_000;
    let mut dataset = Dataset::new();
    for (index, value) in string_values(&mut random).into_iter().enumerate() {
        let expiry = if index % 3 == 0 {
            future + index as i64
        } else {
            NO_EXPIRY
        };
        dataset.insert((0, format!("value:{index}").into_bytes()), (value, expiry));
    }
    for index in 0..1500u32 {
        let db = [0, 1, 15][(index % 3) as usize];
        let mut key = format!("key:{index}:").into_bytes();
        key.extend_from_slice(&random.bytes((index % 7) as usize));
        let value = if index % 2 == 0 {
            index.to_string().into_bytes()
        } else {
            format!("value-{index}-")
                .repeat((index % 5) as usize)
                .into_bytes()
        };
        let expiry = if index % 4 == 0 {
            future + i64::from(index)
        } else {
            NO_EXPIRY
        };
        dataset.insert((db, key), (value, expiry));
    }
    dataset.insert((1, b"123".to_vec()), (b"int key".to_vec(), NO_EXPIRY));
    dataset.insert((1, Vec::new()), (b"empty key".to_vec(), future));
    dataset.insert((1, vec![0, 1, 2, 255]), (Vec::new(), NO_EXPIRY));
    dataset
}

fn expired_key() -> (u32, Vec<u8>) {
    (1, b"expired".to_vec())
}

fn write_rdb(path: &Path, dataset: &Dataset, extra: &[(u32, Entry)]) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = RdbWriter::new(file, &RdbWriterOptions::default()).unwrap();
    let databases: std::collections::BTreeSet<u32> = dataset.keys().map(|(db, _)| *db).collect();
    for db in databases {
        let entries: Vec<_> = dataset
            .range((db, Vec::new())..(db + 1, Vec::new()))
            .collect();
        let expires = entries.iter().filter(|(_, (_, e))| *e != NO_EXPIRY).count();
        writer
            .select_db(db, entries.len() as u64, expires as u64)
            .unwrap();
        for ((_, key), (value, expire_at_ms)) in entries {
            let entry = Entry {
                key: key.to_vec().into(),
                value: Value::string(value.to_vec().into()),
                expire_at_ms: *expire_at_ms,
            };
            writer.write_entry(db, &entry).unwrap();
        }
    }
    for (db, entry) in extra {
        writer.write_entry(*db, entry).unwrap();
    }
    let (file, size) = writer.finish().unwrap();
    file.sync_all().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), size);
    size
}

fn load_rdb(path: &Path) -> Result<Dataset, RdbError> {
    let mut dataset = Dataset::new();
    load(
        std::fs::File::open(path).unwrap(),
        &mut |db: u32, entry: Entry| {
            let Value::String(value, _) = entry.value else {
                panic!("only strings are expected in these files");
            };
            dataset.insert(
                (db, entry.key.to_vec()),
                (value.to_vec(), entry.expire_at_ms),
            );
            Ok(())
        },
    )?;
    Ok(dataset)
}

fn redis_check_rdb(redis_server: &Path) -> PathBuf {
    let path = redis_server.with_file_name("redis-check-rdb");
    assert!(path.exists(), "{} is missing", path.display());
    path
}

fn select(connection: &mut redis::Connection, db: u32) {
    let _: () = redis::cmd("SELECT").arg(db).query(connection).unwrap();
}

#[test]
fn tessera_file_round_trips() {
    let dir = temp_dir();
    let path = dir.path().join("part.rdb");
    let mut dataset = tessera_dataset();
    let expired = Entry {
        key: expired_key().1.into(),
        value: Value::string("gone".into()),
        expire_at_ms: 1000,
    };
    write_rdb(&path, &dataset, &[(1, expired)]);
    // The loader hands over expired keys too: dropping them is the caller's decision.
    dataset.insert(expired_key(), (b"gone".to_vec(), 1000));
    assert_eq!(load_rdb(&path).unwrap(), dataset);
}

#[test]
fn redis_check_rdb_accepts_a_tessera_file() {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let path = dir.path().join("part.rdb");
    let dataset = tessera_dataset();
    write_rdb(&path, &dataset, &[]);
    let output = std::process::Command::new(redis_check_rdb(&redis_server))
        .arg(&path)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "redis-check-rdb failed:\n{report}");
    assert!(report.contains("RDB looks OK"), "{report}");
    let expires = dataset.values().filter(|(_, e)| *e != NO_EXPIRY).count();
    assert!(
        report.contains(&format!("{} keys read", dataset.len())),
        "{report}"
    );
    assert!(report.contains(&format!("{expires} expires")), "{report}");
}

#[test]
fn redis_check_rdb_rejects_a_damaged_tessera_file() {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let path = dir.path().join("part.rdb");
    write_rdb(&path, &tessera_dataset(), &[]);
    // One flipped bit in a value: only the checksum can tell.
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let status = std::process::Command::new(redis_check_rdb(&redis_server))
        .arg(&path)
        .output()
        .unwrap()
        .status;
    assert!(!status.success());
    assert!(load_rdb(&path).is_err());
}

#[test]
fn redis_server_loads_a_tessera_file() {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let dataset = tessera_dataset();
    let expired = Entry {
        key: expired_key().1.into(),
        value: Value::string("gone".into()),
        expire_at_ms: 1000,
    };
    let size = write_rdb(&dir.path().join("x.rdb"), &dataset, &[(1, expired)]);
    // Over 1.2 MB of values, most of it repetitive: Redis is handed LZF strings to decode.
    assert!(
        size < 400_000,
        "the long values were not compressed: {size} bytes"
    );
    let redis = RedisOracle::start_with(
        &redis_server,
        dir.path(),
        &["--dbfilename", "x.rdb", "--appendonly", "no"],
    );
    let mut connection = redis.connection();
    for db in [0u32, 1, 15] {
        select(&mut connection, db);
        let expected: Vec<_> = dataset.iter().filter(|((d, _), _)| *d == db).collect();
        // The expired key was dropped at load, as Redis does when it is a master.
        assert_eq!(common::dbsize(&mut connection), expected.len(), "db {db}");
        let mut pipe = redis::pipe();
        for ((_, key), _) in &expected {
            pipe.cmd("GET").arg(key).cmd("PEXPIRETIME").arg(key);
        }
        let replies: Vec<redis::Value> = pipe.query(&mut connection).unwrap();
        for (((_, key), (value, expire_at_ms)), reply) in expected.iter().zip(replies.chunks(2)) {
            let got_value: Vec<u8> = redis::from_redis_value(reply[0].clone()).unwrap();
            let got_expiry: i64 = redis::from_redis_value(reply[1].clone()).unwrap();
            assert_eq!(&got_value, value, "db {db} key {key:?}");
            assert_eq!(got_expiry, *expire_at_ms, "db {db} key {key:?}");
        }
    }
}

/// Fills a real Redis with strings of every kind in two databases, some with an absolute
/// expiry (exact) and some with a relative one, and returns what it should hold.
fn fill_redis(connection: &mut redis::Connection) -> (Dataset, Vec<(u32, Vec<u8>, i64)>) {
    let mut random = Random::new(0xd0e);
    let future = now_ms() + 7_200_000;
    let mut dataset = Dataset::new();
    let mut relative = Vec::new();
    for (index, value) in string_values(&mut random).into_iter().enumerate() {
        let db = (index % 2) as u32;
        let key = if index == 5 {
            vec![b'k', 0, 255, b'\n']
        } else {
            format!("redis:{index}").into_bytes()
        };
        select(connection, db);
        match index % 4 {
            0 => {
                let expiry = future + index as i64;
                let _: () = redis::cmd("SET")
                    .arg(&key)
                    .arg(&value)
                    .arg("PXAT")
                    .arg(expiry)
                    .query(connection)
                    .unwrap();
                dataset.insert((db, key), (value, expiry));
            }
            1 => {
                let _: () = redis::cmd("SET")
                    .arg(&key)
                    .arg(&value)
                    .arg("EX")
                    .arg(1000)
                    .query(connection)
                    .unwrap();
                relative.push((db, key.clone(), 1_000_000));
                dataset.insert((db, key), (value, NO_EXPIRY));
            }
            _ => {
                let _: () = redis::cmd("SET")
                    .arg(&key)
                    .arg(&value)
                    .query(connection)
                    .unwrap();
                dataset.insert((db, key), (value, NO_EXPIRY));
            }
        }
    }
    // Values Redis keeps as integers internally, and counters changed in place.
    select(connection, 1);
    for index in 0..200i64 {
        let key = format!("counter:{index}").into_bytes();
        let value = index * index * index * 1000 - 500_000;
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(value)
            .query(connection)
            .unwrap();
        let _: i64 = redis::cmd("INCRBY")
            .arg(&key)
            .arg(7)
            .query(connection)
            .unwrap();
        dataset.insert((1, key), ((value + 7).to_string().into_bytes(), NO_EXPIRY));
    }
    (dataset, relative)
}

fn assert_loads_redis_dump(policy: &str) {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    // Eviction policies decide whether Redis writes LRU (IDLE) or LFU (FREQ) hints.
    let redis = RedisOracle::start_with(
        &redis_server,
        dir.path(),
        &[
            "--dbfilename",
            "dump.rdb",
            "--appendonly",
            "no",
            "--maxmemory-policy",
            policy,
        ],
    );
    let mut connection = redis.connection();
    let before = now_ms();
    let (expected, relative) = fill_redis(&mut connection);
    let after = now_ms();
    let _: () = redis::cmd("SAVE").query(&mut connection).unwrap();
    // Redis compressed the long repetitive values (`rdbcompression yes`): Tessera decodes
    // Redis's LZF output.
    let size = std::fs::metadata(dir.path().join("dump.rdb"))
        .unwrap()
        .len();
    assert!(size < 400_000, "Redis did not compress: {size} bytes");
    let mut loaded = load_rdb(&dir.path().join("dump.rdb")).unwrap();
    // Relative expiries: within the window in which the commands ran.
    for (db, key, ttl_ms) in relative {
        let (_, expiry) = loaded.get_mut(&(db, key.clone())).unwrap();
        assert!(
            (before + ttl_ms..=after + ttl_ms).contains(expiry),
            "{key:?}: {expiry}"
        );
        *expiry = NO_EXPIRY;
    }
    assert_eq!(loaded.len(), expected.len());
    for (key, value) in &expected {
        assert_eq!(loaded.get(key), Some(value), "{key:?}");
    }
}

#[test]
fn tessera_loads_a_dump_redis_wrote() {
    assert_loads_redis_dump("noeviction");
}

#[test]
fn tessera_loads_a_dump_redis_wrote_with_lru_hints() {
    assert_loads_redis_dump("allkeys-lru");
}

#[test]
fn tessera_loads_a_dump_redis_wrote_with_lfu_hints() {
    assert_loads_redis_dump("allkeys-lfu");
}

struct AcceptFunctions {
    functions: Vec<Vec<u8>>,
    keys: usize,
}

impl RdbVisitor for AcceptFunctions {
    fn entry(&mut self, _db: u32, _entry: Entry) -> Result<(), Refusal> {
        self.keys += 1;
        Ok(())
    }
    fn function(&mut self, code: bytes::Bytes) -> Result<(), Refusal> {
        self.functions.push(code.to_vec());
        Ok(())
    }
}

#[test]
fn functions_and_other_types_in_a_redis_dump_are_reported() {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let redis = RedisOracle::start_with(
        &redis_server,
        dir.path(),
        &["--dbfilename", "dump.rdb", "--appendonly", "no"],
    );
    let mut connection = redis.connection();
    let library =
        "#!lua name=tessera_test\nredis.register_function('one', function() return 1 end)";
    let _: String = redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(library)
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("s")
        .arg("v")
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut connection).unwrap();
    let path = dir.path().join("dump.rdb");

    // By default a function library stops loading rather than being dropped silently.
    match load_rdb(&path) {
        Err(RdbError::Unsupported { reason, .. }) => assert_eq!(reason, Refusal::Function),
        other => panic!("{other:?}"),
    }
    let mut visitor = AcceptFunctions {
        functions: Vec::new(),
        keys: 0,
    };
    load(std::fs::File::open(&path).unwrap(), &mut visitor).unwrap();
    assert_eq!(visitor.functions, vec![library.as_bytes().to_vec()]);
    assert_eq!(visitor.keys, 1);

    // Redis 7.0 writes a list as a quicklist of listpacks (type 18): it loads.
    let _: i64 = redis::cmd("RPUSH")
        .arg("list")
        .arg("a")
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("SAVE").query(&mut connection).unwrap();
    let mut visitor = AcceptFunctions {
        functions: Vec::new(),
        keys: 0,
    };
    load(std::fs::File::open(&path).unwrap(), &mut visitor).unwrap();
    assert_eq!(visitor.keys, 2);
}
