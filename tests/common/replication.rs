//! Helpers for the replication tests (`tests/replication.rs`: Tessera as a master,
//! `tests/replica.rs`: Tessera as a replica): redis-server replicas and masters, waiting
//! for states and offsets, comparing datasets, a dataset and a write load for the stream.

use super::{RedisOracle, TestServer, run, start_server, temp_dir};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A redis-server replica of `master`, its log in `dir` (the replica's log says how it
/// synchronised).
pub struct Replica {
    pub redis: RedisOracle,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Replica {
    pub fn start(master_port: u16) -> Replica {
        let binary = super::gated_redis();
        let dir = temp_dir();
        let log = dir.path().join("replica.log");
        let redis = RedisOracle::start_with(
            &binary,
            dir.path(),
            &[
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
                "--logfile",
                log.to_str().unwrap(),
                "--replicaof",
                "127.0.0.1",
                &master_port.to_string(),
            ],
        );
        Replica {
            redis,
            log,
            _dir: dir,
        }
    }

    pub fn connection(&self) -> redis::Connection {
        self.redis.connection()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pid(&self) -> i32 {
        self.redis.child.id() as i32
    }

    pub fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }
}

/// A Tessera master; its full syncs are diskless (the default) and start at once
/// (`repl-diskless-sync-delay 0`) unless `args` say otherwise.
pub fn start_master(dir: &Path, args: &[&str]) -> TestServer {
    let mut all = vec![
        "--enable-debug-command",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ];
    all.extend_from_slice(args);
    start_server(dir, &all)
}

pub use super::wait_until;

pub fn info(conn: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(conn).unwrap()
}

pub fn field(info: &str, name: &str) -> Option<String> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// The master lists `count` replicas, all online.
pub fn wait_online(master: &mut redis::Connection, count: usize) {
    wait_until(
        &format!("{count} online replica(s)"),
        Duration::from_secs(60),
        || {
            let text = info(master, "replication");
            field(&text, "connected_slaves") == Some(count.to_string())
                && (0..count).all(|n| {
                    field(&text, &format!("slave{n}")).is_some_and(|s| s.contains("state=online"))
                })
        },
    );
}

/// The replica has processed the master's whole stream.
pub fn wait_caught_up(master: &mut redis::Connection, replica: &mut redis::Connection) {
    wait_until(
        "the replica to reach the master's offset",
        Duration::from_secs(60),
        || {
            let offset = field(&info(master, "replication"), "master_repl_offset");
            let text = info(replica, "replication");
            field(&text, "master_link_status").as_deref() == Some("up")
                && field(&text, "slave_repl_offset") == offset
        },
    );
}

pub fn digest(conn: &mut redis::Connection) -> String {
    redis::cmd("DEBUG").arg("DIGEST").query(conn).unwrap()
}

/// Master and replica hold the same dataset: DEBUG DIGEST (Redis's, which Tessera
/// computes too), and on a difference the keys that differ.
pub fn assert_same_dataset(master: &mut redis::Connection, replica: &mut redis::Connection) {
    // Keys whose time has passed are deleted by the master when its expiry cycle finds
    // them, and the DEL reaches the replica a moment later: the digests may differ that
    // long. A real difference stays.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        wait_caught_up(master, replica);
        if digest(master) == digest(replica) {
            return;
        }
        if Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let ours = super::dataset::dataset(master);
    let theirs = super::dataset::dataset(replica);
    let mut differences = Vec::new();
    for key in ours.keys().chain(theirs.keys()) {
        if ours.get(key) != theirs.get(key) {
            differences.push(format!(
                "{key:?}\n  master:  {:?}\n  replica: {:?}",
                ours.get(key),
                theirs.get(key)
            ));
        }
    }
    differences.dedup();
    panic!(
        "the datasets differ (first databases: {} differences)\n{}",
        differences.len(),
        differences
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Values beyond `dataset::populate`'s: HyperLogLog, geo, bitmaps, integers, a long
/// string, keys with an expiry, and a function library.
pub fn populate_more(conn: &mut redis::Connection) {
    run(conn, &["PFADD", "hll", "a", "b", "c", "d"]);
    run(
        conn,
        &["GEOADD", "geo", "13.361389", "38.115556", "Palermo"],
    );
    run(conn, &["SETBIT", "bits", "1000", "1"]);
    run(conn, &["SET", "counter", "41"]);
    run(conn, &["INCR", "counter"]);
    run(conn, &["SET", "long", &"x".repeat(10_000)]);
    run(conn, &["SET", "volatile", "v", "EX", "100000"]);
    run(
        conn,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=replib\nredis.register_function('bump', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)",
        ],
    );
    // Enough keys that a slow snapshot (rdb-key-save-delay) takes a while.
    for chunk in 0..10 {
        let mut args = vec!["MSET".to_string()];
        for n in 0..200 {
            args.push(format!("filler:{chunk}:{n}"));
            args.push(format!("value {n}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(conn, &args);
    }
}

/// A write load of every kind the stream carries, `rounds` times over.
pub fn write_load(conn: &mut redis::Connection, tag: &str, rounds: usize) {
    for round in 0..rounds {
        let key = |name: &str| format!("{tag}:{name}:{}", round % 7);
        run(conn, &["SELECT", &(round % 3).to_string()]);
        run(conn, &["SET", &key("s"), &format!("value {round}")]);
        run(conn, &["APPEND", &key("s"), "+"]);
        run(conn, &["INCRBY", &key("n"), &round.to_string()]);
        run(conn, &["INCRBYFLOAT", &key("f"), "0.1"]);
        run(conn, &["RPUSH", &key("list"), "a", "b", &round.to_string()]);
        run(conn, &["LPOP", &key("list")]);
        run(
            conn,
            &["HSET", &key("hash"), "f", &round.to_string(), "g", "h"],
        );
        run(conn, &["HDEL", &key("hash"), "g"]);
        run(conn, &["SADD", &key("set"), &round.to_string(), "x"]);
        run(conn, &["SPOP", &key("set")]);
        run(
            conn,
            &["ZADD", &key("zset"), &round.to_string(), "m", "1.5", "n"],
        );
        run(conn, &["ZINCRBY", &key("zset"), "2", "n"]);
        // Expiries: a long one, one that passes during the load (its DEL is in the
        // stream), relative forms the stream carries as absolute times.
        run(conn, &["SET", &key("ttl"), "t", "EX", "1000"]);
        run(conn, &["SET", &key("short"), "gone", "PX", "30"]);
        run(conn, &["EXPIRE", &key("hash"), "5000"]);
        run(conn, &["PERSIST", &key("hash")]);
        run(conn, &["GETEX", &key("s"), "PX", "900000"]);
        // A transaction.
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(key("tx"))
            .arg(round)
            .cmd("LPUSH")
            .arg(key("txlist"))
            .arg(round)
            .cmd("DEL")
            .arg(key("txgone"));
        let _: redis::Value = pipe.query(conn).unwrap();
        // Scripts: effects, not the script; a random choice replays exactly.
        run(
            conn,
            &[
                "EVAL",
                "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SADD', KEYS[2], math.random(1000)); return redis.call('SPOP', KEYS[2])",
                "2",
                &key("script"),
                &key("scriptset"),
                &round.to_string(),
            ],
        );
        run(conn, &["FCALL", "bump", "1", &key("fcall"), "3"]);
        if round % 10 == 9 {
            run(conn, &["SWAPDB", "1", "2"]);
            run(conn, &["SET", &key("s"), "to rename"]);
            run(conn, &["RENAME", &key("s"), &key("renamed")]);
            run(conn, &["COPY", &key("renamed"), &key("copied"), "DB", "2"]);
        }
    }
    run(conn, &["SELECT", "0"]);
}

/// A redis-server master (`repl-diskless-sync` as given, no delay before a sync) and
/// its directory.
pub fn redis_master(diskless: bool) -> (RedisOracle, tempfile::TempDir) {
    let binary = super::gated_redis();
    let dir = temp_dir();
    let master = RedisOracle::start_with(
        &binary,
        dir.path(),
        &[
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
            "--repl-diskless-sync",
            if diskless { "yes" } else { "no" },
            "--repl-diskless-sync-delay",
            "0",
        ],
    );
    (master, dir)
}

/// The replica's link to its master is up.
pub fn wait_link_up(replica: &mut redis::Connection) {
    wait_until("the link to the master", Duration::from_secs(60), || {
        field(&info(replica, "replication"), "master_link_status").as_deref() == Some("up")
    });
}

/// INFO replication of two nodes, asserted to list the same fields in the same order
/// (a Tessera node and a Redis one in the same role); the two texts, for more checks.
pub fn same_replication_fields(
    ours: &mut redis::Connection,
    theirs: &mut redis::Connection,
) -> (String, String) {
    let names = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|line| line.split_once(':').map(|(name, _)| name.to_string()))
            .collect()
    };
    let ours_info = info(ours, "replication");
    let theirs_info = info(theirs, "replication");
    assert_eq!(
        names(&ours_info),
        names(&theirs_info),
        "{ours_info}\n{theirs_info}"
    );
    (ours_info, theirs_info)
}

/// The replication stream `redis-cli --replica` shows for `commands` (each its words as
/// bytes), lower-cased, up to the final
/// `SET done 1` (the SYNC's own lines and the keepalive PINGs left out).
pub fn stream_of(cli: &std::path::Path, port: u16, commands: &[Vec<Vec<u8>>]) -> Vec<String> {
    let mut follower = std::process::Command::new(cli)
        .args(["-p", &port.to_string(), "--replica"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (received, _stderr) = super::read_child_output(&mut follower);
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut conn = client.get_connection().unwrap();
    // The follower takes the stream once its (empty) snapshot is sent.
    super::wait_until(
        "redis-cli to be online",
        std::time::Duration::from_secs(30),
        || {
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query(&mut conn)
                .unwrap();
            info.contains("state=online")
        },
    );
    for command in commands {
        let mut request = redis::cmd(std::str::from_utf8(&command[0]).unwrap());
        for arg in &command[1..] {
            request.arg(&arg[..]);
        }
        let _: redis::Value = request.query(&mut conn).unwrap();
    }
    run(&mut conn, &["SET", "done", "1"]);
    let mut lines = Vec::new();
    while let Ok(line) = received.recv_timeout(std::time::Duration::from_secs(10)) {
        if line.contains(r#""done""#) {
            break;
        }
        if line.starts_with('"') && !line.contains(r#""PING""#) && !line.contains(r#""SELECT""#) {
            lines.push(line.to_lowercase());
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    lines
}
