//! Compaction (BGREWRITEAOF) and background snapshots (BGSAVE) with the real server
//! process: data kept under load, Redis's replies, RDB parts Redis accepts, point-in-time
//! snapshots, and a crash (SIGKILL) at every step of a compaction, in a fresh directory and
//! in one with history.

mod common;

use common::in_process::{
    Prepared, Step, assert_same, assert_steps_cover_the_protocol, compact, compaction_steps,
    directory_with_history, dump, fresh_directory, manifest, populate, populate_named,
    start_compaction_after_writes, write_after_the_switch,
};
use common::model::{join_load, spawn_load};
use common::*;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::storage::{CRASH_AT_ENV, CrashPoint};

fn cmd_str(conn: &mut redis::Connection, args: &[&str]) -> redis::RedisResult<String> {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query(conn)
}

fn error_text(result: redis::RedisResult<String>) -> String {
    match result {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => {
            // The redis crate splits "ERR text" into a kind and a detail.
            let detail = e.detail().unwrap_or("").to_string();
            format!("{} {detail}", e.code().unwrap_or("?"))
        }
    }
}

#[test]
fn back_to_back_rewrites_under_load_keep_every_acknowledged_write() {
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &[
            "--appendfsync",
            "always",
            "--aof-rewrite-threads",
            "3",
            "--save",
            "",
        ],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let load = spawn_load(&server.url(), 6, 11, &stop, usize::MAX);
    let mut conn = server.connection();
    let mut rewrites = 0;
    let deadline = Instant::now() + Duration::from_secs(4);
    while Instant::now() < deadline || rewrites < 3 {
        let reply = cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap();
        assert_eq!(reply, "Background append only file rewriting started");
        wait_for_background_jobs(&mut conn);
        rewrites += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let model = join_load(load);
    assert!(model.acked_count() > 100, "the load made progress");
    assert_eq!(
        info_field(&mut conn, "aof_rewrites").unwrap(),
        rewrites.to_string()
    );
    assert_eq!(
        info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
        "ok"
    );
    assert_eq!(
        info_field(&mut conn, "tessera_aof_base_parts").unwrap(),
        "3"
    );
    // Only the files of the manifest remain: three parts, one incremental file.
    let listed = manifest_files(&server.aof_dir());
    let mut expected: Vec<String> = listed.clone();
    expected.push("appendonly.aof.manifest".into());
    expected.sort();
    assert_eq!(common::dirs::file_names(&server.aof_dir()), expected);
    assert_eq!(listed.iter().filter(|n| n.ends_with(".rdb")).count(), 3);
    assert_eq!(
        listed.iter().filter(|n| n.ends_with(".incr.aof")).count(),
        1
    );
    server.kill9();
    let server = start_server(dir.path(), &["--save", ""]);
    let problems = model.verify(&mut server.connection());
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Fills databases 0 and 3 with strings of every encoding: small integers, short strings,
/// long compressible ones (LZF), long random ones, some with an expiry.
fn populate_varied(conn: &mut redis::Connection, count: usize) {
    let mut pipe = redis::pipe();
    for i in 0..count {
        let db = if i % 2 == 0 { 0 } else { 3 };
        pipe.cmd("SELECT").arg(db).ignore();
        let key = format!("key:{i}");
        match i % 5 {
            0 => pipe.cmd("SET").arg(&key).arg(i as i64 - 500).ignore(),
            1 => pipe.cmd("SET").arg(&key).arg(format!("v{i}")).ignore(),
            2 => pipe
                .cmd("SET")
                .arg(&key)
                .arg("z".repeat(200 + i % 50))
                .ignore(),
            3 => {
                let noise: String = (0..300)
                    .map(|j| char::from(b'!' + ((i * 31 + j * 17) % 90) as u8))
                    .collect();
                pipe.cmd("SET").arg(&key).arg(noise).ignore()
            }
            _ => pipe
                .cmd("SET")
                .arg(&key)
                .arg(format!("expiring {i}"))
                .arg("PX")
                .arg(3_600_000)
                .ignore(),
        };
    }
    pipe.cmd("SELECT").arg(0).ignore();
    let _: () = pipe.query(conn).unwrap();
}

/// Every key of databases 0..16 (strings only) with its value and whether it has an
/// expiry.
fn dump_dataset(conn: &mut redis::Connection) -> Vec<(i64, String, Vec<u8>, bool)> {
    dump_matching(conn, "*")
}

/// `dump_dataset` of the keys that match `pattern`.
fn dump_matching(conn: &mut redis::Connection, pattern: &str) -> Vec<(i64, String, Vec<u8>, bool)> {
    let mut all = Vec::new();
    for db in 0..16 {
        let _: () = redis::cmd("SELECT").arg(db).query(conn).unwrap();
        let mut keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(conn).unwrap();
        keys.sort();
        for key in keys {
            let value: Vec<u8> = redis::cmd("GET").arg(&key).query(conn).unwrap();
            let ttl: i64 = redis::cmd("PTTL").arg(&key).query(conn).unwrap();
            all.push((db, key, value, ttl > 0));
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(conn).unwrap();
    all
}

#[test]
fn every_part_passes_redis_check_rdb_and_redis_loads_a_single_part_directory() {
    let Some(redis_server) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--aof-rewrite-threads", "4", "--save", ""]);
    let mut conn = server.connection();
    populate_varied(&mut conn, 4000);
    assert_eq!(
        cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting started"
    );
    wait_for_background_jobs(&mut conn);
    let parts: Vec<String> = manifest_files(&server.aof_dir())
        .into_iter()
        .filter(|n| n.ends_with(".rdb"))
        .collect();
    assert_eq!(parts.len(), 4);
    for part in &parts {
        assert_redis_check_rdb_passes(&redis_server, &server.aof_dir().join(part));
    }
    // Writes after the compaction go to the new incremental file.
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("rewrite")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-rewrite-threads")
        .arg(1)
        .query(&mut conn)
        .unwrap();
    cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap();
    wait_for_background_jobs(&mut conn);
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("second")
        .query(&mut conn)
        .unwrap();
    let expected = dump_dataset(&mut conn);
    assert_eq!(expected.len(), 4001);
    server.shutdown();
    assert_eq!(
        manifest_files(&dir.path().join("appendonlydir")),
        vec![
            "appendonly.aof.2.base.rdb".to_string(),
            "appendonly.aof.3.incr.aof".to_string()
        ]
    );
    // Redis 7.0 on a copy of the directory: the same dataset.
    let copy = temp_dir();
    let copied_aof = copy.path().join("appendonlydir");
    std::fs::create_dir_all(&copied_aof).unwrap();
    for name in common::dirs::file_names(&dir.path().join("appendonlydir")) {
        std::fs::copy(
            dir.path().join("appendonlydir").join(&name),
            copied_aof.join(&name),
        )
        .unwrap();
    }
    let redis = RedisOracle::start_with(&redis_server, copy.path(), &["--appendonly", "yes"]);
    assert_eq!(dump_dataset(&mut redis.connection()), expected);
}

#[test]
fn concurrent_jobs_answer_as_redis_and_scheduled_ones_run_after() {
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &[
            "--aof-rewrite-threads",
            "1",
            "--rdb-key-save-delay",
            "1000",
            "--save",
            "",
        ],
    );
    let mut conn = server.connection();
    populate_varied(&mut conn, 1000);
    assert_eq!(
        cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting started"
    );
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").unwrap(),
        "1"
    );
    assert_eq!(
        error_text(cmd_str(&mut conn, &["BGREWRITEAOF"])),
        "ERR Background append only file rewriting already in progress"
    );
    assert_eq!(
        error_text(cmd_str(&mut conn, &["BGSAVE"])),
        "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible."
    );
    assert_eq!(
        cmd_str(&mut conn, &["BGSAVE", "SCHEDULE"]).unwrap(),
        "Background saving scheduled"
    );
    assert_eq!(
        error_text(cmd_str(&mut conn, &["BGSAVE", "FOO"])),
        "ERR syntax error"
    );
    // Clients are served throughout.
    let value: String = redis::cmd("GET").arg("key:0").query(&mut conn).unwrap();
    assert_eq!(value, "-500");
    let held: u64 = info_field(&mut conn, "tessera_capture_held_bytes")
        .unwrap()
        .parse()
        .unwrap();
    assert!(held < 1 << 30);
    wait_for_background_jobs(&mut conn);
    // The scheduled BGSAVE ran after the rewrite.
    assert_eq!(info_field(&mut conn, "rdb_saves").unwrap(), "1");
    assert_eq!(
        info_field(&mut conn, "rdb_last_bgsave_status").unwrap(),
        "ok"
    );
    assert!(dir.path().join("dump.rdb").exists());

    // During a BGSAVE: BGREWRITEAOF is scheduled, SAVE and BGSAVE refused.
    assert_eq!(
        cmd_str(&mut conn, &["BGSAVE"]).unwrap(),
        "Background saving started"
    );
    assert_eq!(
        cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting scheduled"
    );
    assert_eq!(info_field(&mut conn, "aof_rewrite_scheduled").unwrap(), "1");
    assert_eq!(
        error_text(cmd_str(&mut conn, &["SAVE"])),
        "ERR Background save already in progress"
    );
    assert_eq!(
        error_text(cmd_str(&mut conn, &["BGSAVE", "SCHEDULE"])),
        "ERR Background save already in progress"
    );
    wait_for_background_jobs(&mut conn);
    assert_eq!(info_field(&mut conn, "aof_rewrites").unwrap(), "2");
    assert_eq!(info_field(&mut conn, "rdb_saves").unwrap(), "2");
    let expected = dump_dataset(&mut conn);
    server.kill9();
    let server = start_server(dir.path(), &["--save", ""]);
    assert_eq!(dump_dataset(&mut server.connection()), expected);
}

#[test]
fn background_snapshots_are_point_in_time() {
    // BGSAVE with slow writers while every key is overwritten and some deleted: the dump
    // holds the values of the moment BGSAVE was called. The same capture serves compaction.
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &[
            "--rdb-key-save-delay",
            "500",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
    );
    let mut conn = server.connection();
    populate_varied(&mut conn, 2000);
    let before = dump_dataset(&mut conn);
    assert_eq!(
        cmd_str(&mut conn, &["BGSAVE"]).unwrap(),
        "Background saving started"
    );
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SELECT")
            .arg(if i % 2 == 0 { 0 } else { 3 })
            .ignore();
        if i % 7 == 0 {
            pipe.cmd("DEL").arg(format!("key:{i}")).ignore();
        } else {
            pipe.cmd("SET")
                .arg(format!("key:{i}"))
                .arg("overwritten")
                .ignore();
        }
    }
    pipe.cmd("FLUSHDB").ignore(); // db 3, whole: its tables are moved to the capture
    pipe.cmd("SELECT").arg(0).ignore();
    pipe.cmd("SWAPDB").arg(0).arg(5).ignore();
    let _: () = pipe.query(&mut conn).unwrap();
    assert_eq!(
        info_field(&mut conn, "rdb_bgsave_in_progress").unwrap(),
        "1"
    );
    wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "rdb_last_bgsave_status").unwrap(),
        "ok"
    );
    server.kill9();
    let server = start_server(dir.path(), &["--save", "", "--appendonly", "no"]);
    assert_eq!(dump_dataset(&mut server.connection()), before);
}

/// The big collections of `big_collections_…`: (key, its members/fields sorted, scores).
fn collections_state(conn: &mut redis::Connection, count: usize) -> Vec<(String, String)> {
    let mut state = Vec::new();
    for i in 0..count {
        let mut hash: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(format!("hash:{i}"))
            .query(conn)
            .unwrap();
        hash.sort();
        state.push((format!("hash:{i}"), format!("{hash:?}")));
        let mut set: Vec<String> = redis::cmd("SMEMBERS")
            .arg(format!("set:{i}"))
            .query(conn)
            .unwrap();
        set.sort();
        state.push((format!("set:{i}"), format!("{set:?}")));
        let zset: Vec<(String, String)> = redis::cmd("ZRANGE")
            .arg(format!("zset:{i}"))
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(conn)
            .unwrap();
        state.push((format!("zset:{i}"), format!("{zset:?}")));
    }
    state
}

/// `count` hashes, sets and sorted sets past their compact encodings (tables, skip lists).
fn build_big_collections(conn: &mut redis::Connection, count: usize) {
    let mut pipe = redis::pipe();
    for i in 0..count {
        for j in 0..600 {
            pipe.cmd("HSET")
                .arg(format!("hash:{i}"))
                .arg(format!("f{j}"))
                .arg(j)
                .ignore();
            pipe.cmd("SADD")
                .arg(format!("set:{i}"))
                .arg(format!("m{j}"))
                .ignore();
            pipe.cmd("ZADD")
                .arg(format!("zset:{i}"))
                .arg(j)
                .arg(format!("m{j}"))
                .ignore();
        }
    }
    let _: () = pipe.query(conn).unwrap();
    for kind in ["hash", "set", "zset"] {
        let encoding: String = redis::cmd("OBJECT")
            .arg("ENCODING")
            .arg(format!("{kind}:0"))
            .query(conn)
            .unwrap();
        let deep = if kind == "zset" {
            "skiplist"
        } else {
            "hashtable"
        };
        assert_eq!(encoding, deep, "{kind}");
    }
}

/// Writes that are not idempotent (HINCRBY, ZINCRBY) to the big collections while a
/// slow background job (`in_progress`: its INFO field) runs; checks that some value was
/// serialised before a write, and that the job was still running.
fn change_big_collections_during_a_job(
    conn: &mut redis::Connection,
    count: usize,
    in_progress: &str,
) {
    // Two rounds: the first mostly finds the captures queued, the second (after some
    // writing) may find some with the writer.
    for round in 0..2 {
        let mut pipe = redis::pipe();
        for i in 0..count {
            pipe.cmd("HINCRBY")
                .arg(format!("hash:{i}"))
                .arg("f1")
                .arg(1000)
                .ignore();
            pipe.cmd("HDEL").arg(format!("hash:{i}")).arg("f2").ignore();
            pipe.cmd("SREM").arg(format!("set:{i}")).arg("m3").ignore();
            pipe.cmd("SADD")
                .arg(format!("set:{i}"))
                .arg(format!("new{round}"))
                .ignore();
            pipe.cmd("ZINCRBY")
                .arg(format!("zset:{i}"))
                .arg(0.5)
                .arg("m4")
                .ignore();
        }
        let _: () = pipe.query(conn).unwrap();
        if round == 0 {
            // The writer moves on before the second round.
            let written: u64 = info_field(conn, "current_save_keys_processed")
                .unwrap()
                .parse()
                .unwrap();
            wait_for_keys_saved(conn, written + 1);
        }
    }
    let serialised: u64 = info_field(conn, "tessera_capture_serialised_values")
        .unwrap()
        .parse()
        .unwrap();
    let copied: u64 = info_field(conn, "tessera_capture_copied_values")
        .unwrap()
        .parse()
        .unwrap();
    assert!(serialised > 0, "no value was serialised before a write");
    // Each collection is released (serialised or copied) at most once per snapshot.
    assert!(
        serialised + copied <= 3 * count as u64,
        "{serialised} + {copied}"
    );
    assert_eq!(
        info_field(conn, in_progress).unwrap(),
        "1",
        "the job ended before the writes: nothing raced it"
    );
}

#[test]
fn a_base_of_commands_written_during_writes_replays_to_the_live_dataset() {
    // `aof-use-rdb-preamble no`: values serialised before a write become commands in the
    // base. The base and the incremental file after it must replay to the dataset as it
    // is: a base holding a value after a non-idempotent write (HINCRBY, ZINCRBY) would
    // apply it twice.
    const COUNT: usize = 20;
    let dir = temp_dir();
    // 3 ms a key: the job runs for a second or more, well past the writes.
    let args = [
        "--rdb-key-save-delay",
        "3000",
        "--save",
        "",
        "--aof-use-rdb-preamble",
        "no",
    ];
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    populate_varied(&mut conn, 1000);
    build_big_collections(&mut conn, COUNT);
    assert_eq!(
        cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting started"
    );
    change_big_collections_during_a_job(&mut conn, COUNT, "aof_rewrite_in_progress");
    wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
        "ok"
    );
    let files = manifest_files(&dir.path().join("appendonlydir"));
    assert!(files.iter().any(|f| f.ends_with(".base.aof")), "{files:?}");
    let live = collections_state(&mut conn, COUNT);
    let live_strings = dump_matching(&mut conn, "key:*");
    server.kill9();
    let server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    assert_eq!(collections_state(&mut conn, COUNT), live);
    assert_eq!(dump_matching(&mut conn, "key:*"), live_strings);
}

#[test]
fn big_collections_changed_during_a_snapshot_are_serialised_first_and_stay_point_in_time() {
    // Hash tables, set tables and skip lists that a queued capture shares are serialised
    // into it before a write changes them in place (serialise before write). The event loop
    // races the writer thread, which may have taken the slot already (then the write copies
    // the value). Either way the dump holds the values of the moment BGSAVE was called;
    // the writes are not idempotent (HINCRBY, ZINCRBY), so a base holding a value after
    // them would show.
    const COUNT: usize = 40;
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &[
            // 3 ms a key: the save runs for seconds, well past the writes.
            "--rdb-key-save-delay",
            "3000",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
    );
    let mut conn = server.connection();
    populate_varied(&mut conn, 1000); // slows the writer: its slots come first, mostly
    build_big_collections(&mut conn, COUNT);
    let before_strings = dump_matching(&mut conn, "key:*");
    let before = collections_state(&mut conn, COUNT);
    assert_eq!(
        cmd_str(&mut conn, &["BGSAVE"]).unwrap(),
        "Background saving started"
    );
    change_big_collections_during_a_job(&mut conn, COUNT, "rdb_bgsave_in_progress");
    wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "rdb_last_bgsave_status").unwrap(),
        "ok"
    );
    let after_writes = collections_state(&mut conn, COUNT);
    assert_ne!(after_writes, before);
    server.kill9();
    let server = start_server(dir.path(), &["--save", "", "--appendonly", "no"]);
    let mut conn = server.connection();
    let loaded = collections_state(&mut conn, COUNT);
    if let Some((got, want)) = loaded.iter().zip(&before).find(|(got, want)| got != want) {
        panic!(
            "{} in the dump is not as it was at BGSAVE ({} bytes of state)",
            want.0,
            got.1.len()
        );
    }
    assert_eq!(loaded.len(), before.len());
    assert_eq!(dump_matching(&mut conn, "key:*"), before_strings);
}

#[test]
fn the_log_is_compacted_automatically_when_it_doubles() {
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &[
            "--auto-aof-rewrite-min-size",
            "1mb",
            "--auto-aof-rewrite-percentage",
            "0",
            "--save",
            "",
        ],
    );
    let mut conn = server.connection();
    let value = "v".repeat(1000);
    // 200 keys rewritten 15 times: about 3 MB of log for 200 KB of data.
    for _round in 0..15 {
        let mut pipe = redis::pipe();
        for i in 0..200 {
            pipe.cmd("SET").arg(format!("k{i}")).arg(&value).ignore();
        }
        let _: () = pipe.query(&mut conn).unwrap();
    }
    assert_eq!(info_field(&mut conn, "aof_rewrites").unwrap(), "0");
    // The trigger armed only now, so that the rewrite starts after every write (a rewrite
    // that started half way would leave the later writes in the new incremental file).
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("auto-aof-rewrite-percentage")
        .arg("100")
        .query(&mut conn)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(&mut conn, "aof_rewrites").unwrap() == "0" {
        assert!(Instant::now() < deadline, "no automatic rewrite");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for_background_jobs(&mut conn);
    let size: u64 = info_field(&mut conn, "aof_current_size")
        .unwrap()
        .parse()
        .unwrap();
    assert!(size < 1_000_000, "compacted to {size} bytes");
    assert!(server.log().contains("automatic append-only log rewrite"));
}

/// `aof-rewrite-max-rate` holds a compaction back while writes go on at full speed; lifted
/// with CONFIG SET while the job runs, the compaction finishes, and a restart has every
/// write — the ones made before it, during it and after it.
/// The settings of the SIGKILL experiments, as `in_process::CRASH_SETTINGS`.
const CRASH_ARGS: [&str; 6] = [
    "--appendfsync",
    "always",
    "--aof-rewrite-threads",
    "2",
    "--save",
    "",
];

/// Copies the log directory of data directory `from` into data directory `to`.
fn copy_log_dir(from: &Path, to: &Path) {
    let (from, to) = (from.join("appendonlydir"), to.join("appendonlydir"));
    std::fs::create_dir_all(&to).unwrap();
    for name in common::dirs::file_names(&from) {
        std::fs::copy(from.join(&name), to.join(&name)).unwrap();
    }
}

/// Waits until the server's process is gone, having logged its crash at `step`.
fn wait_for_crash(server: &mut TestServer, step: &Step) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let child = server.child.as_mut().unwrap();
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "{step}: the crash point was not reached"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The log is copied from the process's pipe by a thread: give it a moment.
    let line = format!("crashing at step '{}'", step.point);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !server.log().contains(&line) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(server.log().contains(&line), "{step}: {}", server.log());
    server.child = None;
}

/// The directory `prepared` describes (built on the simulated disk), built again with real
/// processes by the same writes: a first start, and for a directory with history a
/// compaction, then two compactions killed once their parts are written (the writes after
/// their switch to a new incremental file acknowledged before). Checks that it has the same
/// manifest and holds the same data.
fn real_directory(prepared: &Prepared) -> tempfile::TempDir {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &CRASH_ARGS);
    let mut conn = server.connection();
    populate(&mut conn, 300);
    if prepared.has_base() {
        assert_eq!(compact(&mut conn), "ok");
        populate_named(&mut conn, "incr2", 40);
        for file in 3..=4 {
            server.kill9();
            let slow = [&CRASH_ARGS[..], &["--rdb-key-save-delay", "2000"]].concat();
            server = try_start_server_with(dir.path(), &slow, |command| {
                command.env(CRASH_AT_ENV, CrashPoint::SnapshotPartsWritten.as_str());
            })
            .unwrap();
            let mut conn = server.connection();
            cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap();
            populate_named(&mut conn, &format!("incr{file}"), 40);
            let step = Step {
                point: CrashPoint::SnapshotPartsWritten,
                nth: 1,
                in_rotation: false,
            };
            wait_for_crash(&mut server, &step);
        }
    }
    server.kill9();
    // Start-up removes the parts of the compactions that did not commit.
    let server = start_server(dir.path(), &CRASH_ARGS);
    assert_same(
        &dump(server.port),
        &prepared.dataset,
        &format!("{}: the real directory", prepared.name),
    );
    let real = std::fs::read(server.aof_dir().join("appendonly.aof.manifest")).unwrap();
    assert_eq!(
        tessera::log::manifest::Manifest::parse(&real).unwrap(),
        manifest(&prepared.storage),
        "{}",
        prepared.name
    );
    dir
}

/// Kills a server by SIGKILL (`TESSERA_CRASH_AT`) at each step of a compaction, in a copy
/// of a directory built as `prepared` is; see `sigkill_at_step`.
fn sigkill_at_every_step(prepared: &Prepared) {
    let dir = real_directory(prepared);
    let steps = compaction_steps(prepared);
    assert_steps_cover_the_protocol(&steps, prepared);
    for step in &steps {
        // The parts are slowed (µs a key; some 450 keys, two parts: about 0.2 s a part) so
        // that the writes after the switch are acknowledged before the crash; a disk too
        // slow for that gets slower parts.
        let done = [1_000, 4_000, 16_000]
            .into_iter()
            .any(|delay| sigkill_at_step(prepared, dir.path(), step, delay));
        assert!(
            done,
            "{}: {step}: the write after the switch was never acknowledged",
            prepared.name
        );
    }
}

/// One run of `sigkill_at_every_step`, with a block of writes to values of every type in
/// several databases sent with BGREWRITEAOF (in the old incremental file, which the switch
/// fsyncs before any step) and one after the switch, which the server must acknowledge
/// before any later step than the first captures (else returns false: run again, with
/// slower parts). The restart has exactly the writes acknowledged (and maybe the writes
/// after the switch when the crash came at a first capture) — each key's type, TTL
/// presence and contents, and the function library —, only the manifest's files, and a
/// further compaction succeeds.
fn sigkill_at_step(prepared: &Prepared, dir: &Path, step: &Step, delay_us: u64) -> bool {
    let context = format!("{}: crash at {step}", prepared.name);
    let run = temp_dir();
    copy_log_dir(dir, run.path());
    let delay = delay_us.to_string();
    let slow = [&CRASH_ARGS[..], &["--rdb-key-save-delay", &delay]].concat();
    let mut server = try_start_server_with(run.path(), &slow, |command| {
        command.env(CRASH_AT_ENV, step.to_string());
    })
    .unwrap();
    let mut conn = server.connection();
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let started = start_compaction_after_writes(&mut conn);
    let post = write_after_the_switch(&mut conn);
    wait_for_crash(&mut server, step);
    let early = step.in_rotation || step.point == CrashPoint::SnapshotFirstCaptureTaken;
    if !early && (started.is_err() || post.is_err()) {
        eprintln!("{context}: the writes were not acknowledged in time ({delay_us} µs a key)");
        return false;
    }
    let restarted = start_server(run.path(), &["--save", ""]);
    let mut conn = restarted.connection();
    let actual = dump(restarted.port);
    // Each block of writes is a transaction, whole or absent; its string says which.
    let post_found = actual.string(0, "post").is_some();
    match (step.in_rotation, early, &post, post_found) {
        // Killed before the new incremental file took a byte.
        (true, _, Err(_), false) => {}
        (false, _, Ok(()), true) => {}
        // Killed at a first capture: the writes may not be acknowledged, but if they are in
        // the file, they are whole.
        (false, true, Err(_), _) => {}
        (_, _, post, found) => {
            panic!("{context}: the writes after the switch: {post:?}, found: {found}")
        }
    }
    // Written and fsynced at the switch, before any of the log writer's steps,
    // acknowledged or not. A part thread's first capture races that switch (requested
    // once the job exists): killed there, the writes may be neither fsynced nor
    // acknowledged, and then may be missing.
    let pre_found = actual.string(0, "pre").is_some();
    assert!(
        pre_found || (step.point == CrashPoint::SnapshotFirstCaptureTaken && started.is_err()),
        "{context}: the writes before the switch are missing ({started:?})"
    );
    let expected = match (pre_found, post_found) {
        (true, true) => &prepared.after_post,
        (true, false) => &prepared.after_pre,
        (false, false) => &prepared.dataset,
        (false, true) => panic!("{context}: the writes after the switch without those before"),
    };
    assert_same(&actual, expected, &context);
    // Whatever the crash left behind, start-up removed it, each file proven garbage by the
    // manifest (a part above its base, an empty new file, a temp file, a history file).
    let aof_dir = run.path().join("appendonlydir");
    assert_only_the_manifest_s_files(&aof_dir, &context);
    // And a compaction after the crash completes, deleting what it made history.
    let before = dump(restarted.port);
    assert_eq!(compact(&mut conn), "ok", "{context}");
    assert_same(
        &dump(restarted.port),
        &before,
        &format!("{context}, compacted"),
    );
    assert_only_the_manifest_s_files(&aof_dir, &format!("{context}, compacted"));
    true
}

/// The log directory holds the manifest and what it lists, no history among it, and
/// nothing else.
fn assert_only_the_manifest_s_files(aof_dir: &Path, context: &str) {
    let mut expected_files = manifest_files(aof_dir);
    expected_files.push("appendonly.aof.manifest".into());
    expected_files.sort();
    assert_eq!(
        common::dirs::file_names(aof_dir),
        expected_files,
        "{context}"
    );
    assert!(
        !std::fs::read_to_string(aof_dir.join("appendonly.aof.manifest"))
            .unwrap()
            .contains("type h"),
        "{context}: no history entries"
    );
}

#[test]
fn sigkill_at_every_step_of_the_first_compaction_keeps_the_dataset() {
    sigkill_at_every_step(&fresh_directory());
}

/// Here a compaction also deletes two base parts and three incremental files: each
/// deletion is a step.
#[test]
fn sigkill_at_every_step_of_a_compaction_over_history_keeps_the_dataset() {
    sigkill_at_every_step(&directory_with_history());
}

#[test]
fn clients_get_loading_while_the_dataset_loads_and_info_shows_progress() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--aof-rewrite-threads", "2", "--save", ""]);
    let mut conn = server.connection();
    populate_varied(&mut conn, 3000);
    cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap();
    wait_for_background_jobs(&mut conn);
    // Some records in the incremental file too.
    for i in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("late:{i}"))
            .arg(i)
            .query(&mut conn)
            .unwrap();
    }
    server.shutdown();
    // Restart on a known port with a slow load (key-load-delay, as in Redis's tests).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(SERVER_BIN)
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--key-load-delay",
            "2000",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut stream = loop {
        if let Ok(stream) = std::net::TcpStream::connect(("127.0.0.1", port)) {
            break stream;
        }
        assert!(Instant::now() < deadline, "the server did not listen");
        std::thread::sleep(Duration::from_millis(5));
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let wait = Duration::from_millis(300);
    let loading = b"-LOADING Redis is loading the dataset in memory\r\n".to_vec();
    assert_eq!(raw_exchange(&mut stream, b"PING\r\n", wait), loading);
    assert_eq!(raw_exchange(&mut stream, b"GET key:0\r\n", wait), loading);
    assert_eq!(raw_exchange(&mut stream, b"SET a b\r\n", wait), loading);
    assert_eq!(raw_exchange(&mut stream, b"DBSIZE\r\n", wait), loading);
    assert_eq!(raw_exchange(&mut stream, b"SELECT 1\r\n", wait), b"+OK\r\n");
    assert_eq!(
        raw_exchange(&mut stream, b"CONFIG GET port\r\n", wait),
        format!(
            "*2\r\n$4\r\nport\r\n${}\r\n{port}\r\n",
            port.to_string().len()
        )
        .into_bytes()
    );
    let info = String::from_utf8(raw_exchange(&mut stream, b"INFO persistence\r\n", wait)).unwrap();
    assert!(info.contains("loading:1\r\n"), "{info}");
    assert!(info.contains("aof_enabled:0\r\n"), "{info}");
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("{name} missing: {info}"))
            .trim()
            .parse::<f64>()
            .unwrap() as u64
    };
    assert!(field("loading_total_bytes") > 100_000);
    assert!(field("loading_loaded_bytes") <= field("loading_total_bytes"));
    assert!(field("loading_start_time") > 1_700_000_000);
    // Then loading ends and everything is there.
    let deadline = Instant::now() + Duration::from_secs(60);
    while raw_exchange(&mut stream, b"PING\r\n", wait) != b"+PONG\r\n" {
        assert!(Instant::now() < deadline, "loading did not finish");
    }
    let info = String::from_utf8(raw_exchange(&mut stream, b"INFO persistence\r\n", wait)).unwrap();
    assert!(
        info.contains("loading:0\r\n") && info.contains("aof_enabled:1\r\n"),
        "{info}"
    );
    assert_eq!(
        raw_exchange(&mut stream, b"SELECT 0\r\nDBSIZE\r\n", wait),
        b"+OK\r\n:1700\r\n"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_due_save_point_writes_dump_rdb_in_the_background() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendonly", "no", "--save", "1 2"]);
    let mut conn = server.connection();
    assert_eq!(info_field(&mut conn, "rdb_saves").unwrap(), "0");
    let _: () = redis::cmd("SET")
        .arg("a")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("b")
        .arg("2")
        .query(&mut conn)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut conn, "rdb_saves").unwrap() == "0" {
        assert!(Instant::now() < deadline, "the save point did not fire");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "rdb_last_bgsave_status").unwrap(),
        "ok"
    );
    assert_eq!(
        info_field(&mut conn, "rdb_changes_since_last_save").unwrap(),
        "0"
    );
    server.kill9();
    let server = start_server(dir.path(), &["--appendonly", "no", "--save", ""]);
    let mut conn = server.connection();
    assert_eq!(dbsize(&mut conn), 2);
}
