//! Durability, shown by crashing: no write is acknowledged before it is in the log file
//! (`kill -9`), and under `appendfsync always` none before it is fsynced (power loss on the
//! simulated disk); under `everysec` a power loss loses at most the writes not yet fsynced;
//! a log cut mid-record loads with a warning; a damaged log stops start-up with the file
//! and offset; a failing disk refuses writes and loses nothing.
//!
//! `kill -9` leaves the page cache intact: it shows what the process does, not what the
//! disk keeps. Power loss — dropping what was not fsynced — runs the server in-process on
//! `SimulatedStorage` (here, and with compactions in `tests/crash.rs`).

mod common;

use common::in_process::{InProcess, restart_after_power_loss};
use common::model::{Progress, join_load, spawn_load_with_progress};
use common::{
    check_aof, info_field, start_server, temp_dir, try_start_server, try_start_server_with,
    wait_until,
};
use redis::Commands;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tessera::storage::{SimulatedStorage, TornFile, TornWrites};

/// Several rounds of: 8 clients writing, `kill -9` while they write, restart on the same
/// directory. Every write acknowledged in any round is present. (Rounds matter: a reply
/// released early shows up only now and then.)
fn acknowledged_writes_survive_kill9(policy: &str) {
    let dir = temp_dir();
    let mut all_acknowledged: Vec<(String, String)> = Vec::new();
    for round in 0..4 {
        let mut server = start_server(dir.path(), &["--appendfsync", policy]);
        let acknowledged: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for client in 0..8 {
            let acknowledged = acknowledged.clone();
            let stop = stop.clone();
            let url = server.url();
            writers.push(std::thread::spawn(move || {
                let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("round{round}:client{client}:key{n}");
                    let value = format!("value-{client}-{n}-{}", "x".repeat((n % 50) as usize));
                    // Every reply received is an acknowledgement; the kill ends the loop.
                    match conn.set::<_, _, ()>(&key, &value) {
                        Ok(()) => acknowledged.lock().unwrap().push((key, value)),
                        Err(_) => break,
                    }
                    n += 1;
                }
            }));
        }
        // Let the writers run, then kill the server while they are still writing.
        let deadline = Instant::now() + Duration::from_secs(20);
        while acknowledged.lock().unwrap().len() < 2000 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        server.kill9();
        stop.store(true, Ordering::Relaxed);
        for writer in writers {
            writer.join().unwrap();
        }
        let acknowledged = acknowledged.lock().unwrap().clone();
        assert!(
            acknowledged.len() >= 2000,
            "round {round}: too few acknowledged: {}",
            acknowledged.len()
        );
        all_acknowledged.extend(acknowledged);

        let server = start_server(dir.path(), &["--appendfsync", policy]);
        let mut conn = server.connection();
        for (key, value) in &all_acknowledged {
            let found: Option<String> = conn.get(key).unwrap();
            assert_eq!(
                found.as_deref(),
                Some(value.as_str()),
                "{policy} round {round}: acknowledged write to {key} lost"
            );
        }
    }
}

/// What `kill -9` shows under `always`: no reply goes out before its write is in the log
/// file. Not that it was fsynced — the page cache survives the process, and a server that
/// never fsyncs passes this test; the fsync is what
/// `always_keeps_every_acknowledged_write_across_power_loss` checks.
#[test]
fn always_replies_only_after_the_write_is_in_the_log_file_across_kill9() {
    acknowledged_writes_survive_kill9("always");
}

/// `clients` write on the simulated disk (each fsync taking `sync_delay`);
/// `before_crash` lets them run and says how many writes of each client must survive
/// (None: every acknowledged one). Then the disk dies, the server halts and the power goes
/// (`torn` for the bytes not synced). Restarts and checks that the dataset is what the
/// first writes of each client made — no later write without the earlier ones — keeping at
/// least those. Returns what the power loss did to the log's bytes that were not durable.
fn power_loss_under_load(
    policy: &str,
    clients: usize,
    sync_delay: Duration,
    (seed, torn): (u64, TornWrites),
    before_crash: impl FnOnce(&SimulatedStorage, &Progress) -> Option<Vec<usize>>,
) -> Option<TornFile> {
    let storage = SimulatedStorage::new();
    let server = InProcess::start(&storage, &format!("appendfsync {policy}"));
    storage.set_sync_delay(sync_delay);
    let stop = Arc::new(AtomicBool::new(false));
    let (load, progress) =
        spawn_load_with_progress(&server.url(), clients, seed, &stop, usize::MAX);
    let must_keep = before_crash(&storage, &progress);
    storage.crash_now();
    server.halt();
    stop.store(true, Ordering::Relaxed);
    let model = join_load(load);
    let acked = model.acked_per_client();
    let at_least = must_keep.unwrap_or_else(|| acked.clone());
    let tears = storage.power_loss(torn);
    let log = tears
        .iter()
        .find(|t| t.path.to_string_lossy().ends_with(".incr.aof"))
        .cloned();
    let (restarted, cut) = restart_after_power_loss(&storage, &tears, "");
    let context = format!(
        "{policy}, {torn:?}: writes acknowledged per client {acked:?}, at least {at_least:?} \
         must survive; the log's bytes not durable: {log:?}; cut by hand: {cut:?}"
    );
    assert!(
        at_least.iter().all(|&n| n >= 100),
        "{context}: too few writes"
    );
    let problems = model.verify_prefix(&mut restarted.connection(), &at_least);
    assert!(problems.is_empty(), "{context}: {problems:#?}");
    restarted.halt();
    log
}

/// Waits until every client of a load has `writes` acknowledged; returns how many each has.
fn wait_for_writes(progress: &Progress, writes: usize) -> Vec<usize> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while progress.acked().iter().any(|&n| n < writes) {
        assert!(
            Instant::now() < deadline,
            "the load is stuck: {:?}",
            progress.acked()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    progress.acked()
}

/// Power loss under `always`: what the page cache held is gone too, and every
/// acknowledged write must still be there, however the writes in flight were torn. (A
/// slow fsync: the power goes while a batch is written and not yet fsynced.)
#[test]
fn always_keeps_every_acknowledged_write_across_power_loss() {
    let mut in_flight = 0;
    for seed in 0..8 {
        let torn = match seed % 4 {
            0 => TornWrites::None,
            1 => TornWrites::Seeded(seed),
            2 => TornWrites::Hole(seed),
            _ => TornWrites::Scattered(seed),
        };
        // Twelve clients: a batch in flight often spans several pages.
        let delay = Duration::from_millis(3);
        let log = power_loss_under_load("always", 12, delay, (seed, torn), |_, progress| {
            wait_for_writes(progress, 100);
            None
        });
        in_flight += usize::from(log.is_some());
    }
    assert!(
        in_flight > 2,
        "the power went with a write in flight {in_flight} times in 8"
    );
}

/// Power loss under `everysec`: the writes acknowledged since the last fsync of the log
/// may be lost — they were written, not fsynced — but nothing else: what survives is a
/// prefix of each client's writes that holds every write acknowledged before an fsync.
/// The pages of the unsynced end of the log survive in part, with holes or in any order:
/// start-up cuts a torn end off, or refuses with the offset of damage in bytes that were
/// not durable (then cut there, as `tessera-check-aof --fix` does), and never loads the
/// lost bytes as data.
#[test]
fn everysec_loses_at_most_the_writes_not_yet_fsynced_across_power_loss() {
    let mut holes = 0;
    let tears = [
        TornWrites::Seeded(11),
        TornWrites::Hole(12),
        TornWrites::Scattered(13),
        TornWrites::Hole(14),
        TornWrites::Scattered(15),
    ];
    for (seed, torn) in tears.into_iter().enumerate() {
        let seed = (seed as u64, torn);
        let log =
            power_loss_under_load("everysec", 4, Duration::ZERO, seed, |storage, progress| {
                // Acknowledged, so written: the next fsync of the log covers them.
                let written = wait_for_writes(progress, 100);
                let syncs = storage.counts().syncs;
                let deadline = Instant::now() + Duration::from_secs(10);
                while storage.counts().syncs == syncs {
                    assert!(Instant::now() < deadline, "no fsync within 10 s");
                    std::thread::sleep(Duration::from_millis(5));
                }
                // Then more writes, not yet fsynced when the power goes.
                let synced = progress.acked();
                wait_for_writes(progress, synced.iter().max().unwrap() + 100);
                Some(written)
            });
        holes += usize::from(log.is_some_and(|log| log.has_hole()));
    }
    assert!(holes > 0, "no power loss left a hole in the log");
}

/// Under `everysec` a reply goes out once its write is in the file, so the death of the
/// process alone loses nothing acknowledged (the page cache keeps it), as with Redis.
/// Power loss may lose up to about a second; that is what `everysec` means.
#[test]
fn everysec_keeps_every_acknowledged_write_across_kill9() {
    acknowledged_writes_survive_kill9("everysec");
}

/// Writes `count` keys and shuts down cleanly; returns the server's data dir contents.
fn populate(dir: &std::path::Path, count: usize) {
    let mut server = start_server(dir, &["--appendfsync", "always"]);
    let mut conn = server.connection();
    for i in 0..count {
        let _: () = conn.set(format!("key:{i}"), format!("value:{i}")).unwrap();
    }
    server.shutdown();
}

fn incremental_file(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("appendonlydir").join("appendonly.aof.1.incr.aof")
}

#[test]
fn record_cut_at_the_end_is_dropped_with_a_warning() {
    let dir = temp_dir();
    populate(dir.path(), 50);
    let file = incremental_file(dir.path());
    let good_len = std::fs::metadata(&file).unwrap().len();
    // A crash in the middle of writing a record leaves its first bytes only.
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$7\r\npartial\r\n$5\r\nval");
    std::fs::write(&file, &bytes).unwrap();

    let mut server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    for i in 0..50 {
        let value: Option<String> = conn.get(format!("key:{i}")).unwrap();
        assert_eq!(value, Some(format!("value:{i}")));
    }
    assert!(!conn.exists::<_, bool>("partial").unwrap());
    assert!(
        server.log().contains("ends in the middle of a record"),
        "no warning in:\n{}",
        server.log()
    );
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        good_len,
        "the torn tail must be cut off"
    );
    // The repaired log keeps working: new writes are appended after the cut.
    let _: () = conn.set("after", "repair").unwrap();
    server.shutdown();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(
        conn.get::<_, Option<String>>("after").unwrap().as_deref(),
        Some("repair")
    );
    assert_eq!(common::dbsize(&mut conn), 51);
}

#[test]
fn truncated_log_is_refused_when_aof_load_truncated_is_no() {
    let dir = temp_dir();
    populate(dir.path(), 5);
    let file = incremental_file(dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    bytes.extend_from_slice(b"*2\r\n$3\r\nDEL");
    std::fs::write(&file, &bytes).unwrap();
    let log = try_start_server(dir.path(), &["--aof-load-truncated", "no"])
        .err()
        .expect("must refuse");
    assert!(log.contains("appendonly.aof.1.incr.aof"), "{log}");
    assert!(log.contains("ends in the middle of a record"), "{log}");
}

/// Offsets at which each record starts.
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    (0..bytes.len())
        .filter(|&i| bytes[i] == b'*' && (i == 0 || bytes[i - 1] == b'\n'))
        .collect()
}

#[test]
fn damage_in_the_middle_stops_start_up_naming_file_and_offset() {
    let dir = temp_dir();
    populate(dir.path(), 200);
    let file = incremental_file(dir.path());
    let original = std::fs::read(&file).unwrap();
    let offsets = record_offsets(&original);
    let middle = offsets[offsets.len() / 2];

    // 1. The record marker itself is damaged.
    let mut bytes = original.clone();
    bytes[middle] = b'?';
    std::fs::write(&file, &bytes).unwrap();
    let log = try_start_server(dir.path(), &[])
        .err()
        .expect("must refuse a damaged log");
    assert!(log.contains("appendonly.aof.1.incr.aof"), "{log}");
    assert!(log.contains(&format!("at offset {middle}")), "{log}");

    // 2. A bulk length digit is damaged so that the record runs into the next ones.
    let mut bytes = original.clone();
    let dollar = middle + bytes[middle..].iter().position(|&b| b == b'$').unwrap();
    bytes[dollar + 1] = b'9';
    std::fs::write(&file, &bytes).unwrap();
    let log = try_start_server(dir.path(), &[])
        .err()
        .expect("must refuse a damaged length");
    assert!(log.contains("Bad file format"), "{log}");
    assert!(log.contains(&format!("at offset {middle}")), "{log}");

    // 3. A length that claims more bytes than the file holds is damage too, not a torn
    //    tail, because complete records follow it.
    let mut bytes = original.clone();
    bytes.splice(dollar + 1..dollar + 2, b"99999".iter().copied());
    std::fs::write(&file, &bytes).unwrap();
    let log = try_start_server(dir.path(), &[])
        .err()
        .expect("must refuse an overlong length");
    assert!(log.contains(&format!("at offset {middle}")), "{log}");

    // Restoring the file restores the data.
    std::fs::write(&file, &original).unwrap();
    let server = start_server(dir.path(), &[]);
    assert_eq!(common::dbsize(&mut server.connection()), 200);
}

#[test]
fn unknown_command_in_the_log_stops_start_up() {
    let dir = temp_dir();
    populate(dir.path(), 3);
    let file = incremental_file(dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    let offset = bytes.len();
    bytes.extend_from_slice(
        b"*2\r\n$7\r\nNOSUCHC\r\n$1\r\nx\r\n*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nb\r\n",
    );
    std::fs::write(&file, &bytes).unwrap();
    let log = try_start_server(dir.path(), &[])
        .err()
        .expect("must refuse");
    assert!(log.contains("Unknown command 'NOSUCHC'"), "{log}");
    assert!(log.contains(&format!("at offset {offset}")), "{log}");
}

#[test]
fn check_tool_reports_the_first_bad_offset_and_fixes_after_confirmation() {
    let dir = temp_dir();
    populate(dir.path(), 100);
    let manifest = dir.path().join("appendonlydir/appendonly.aof.manifest");
    let manifest = manifest.to_str().unwrap();
    let (ok, text) = check_aof(&[manifest], "");
    assert!(ok, "a clean log is valid: {text}");
    assert!(text.contains("is valid"), "{text}");

    let file = incremental_file(dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    let offsets = record_offsets(&bytes);
    let bad = offsets[offsets.len() - 10];
    // Not '#': a line starting with it is an annotation, which loaders skip.
    bytes[bad] = b'!';
    std::fs::write(&file, &bytes).unwrap();

    let (ok, text) = check_aof(&[manifest], "");
    assert!(!ok, "damage must be reported: {text}");
    assert!(text.contains(&format!("ok_up_to={bad}")), "{text}");

    // --fix asks first; "n" leaves the file alone.
    let (ok, text) = check_aof(&["--fix", manifest], "n\n");
    assert!(!ok && text.contains("Continue? [y/N]"), "{text}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), bytes.len() as u64);

    let (ok, text) = check_aof(&["--fix", manifest], "y\n");
    assert!(ok, "{text}");
    assert!(text.contains("Successfully truncated"), "{text}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), bad as u64);

    // The server now starts with the records before the damage.
    let server = start_server(dir.path(), &[]);
    let keys = common::dbsize(&mut server.connection());
    assert!(
        keys > 80 && keys < 100,
        "kept the keys before the damage, got {keys}"
    );
    assert!(
        !server.log().contains("WARN"),
        "clean start expected:\n{}",
        server.log()
    );
}

#[test]
fn expiry_is_logged_as_absolute_time_and_survives_restart() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let _: () = redis::cmd("SET")
        .arg("session")
        .arg("v")
        .arg("EX")
        .arg(100)
        .query(&mut conn)
        .unwrap();
    let _: () = redis::cmd("SETEX")
        .arg("short")
        .arg(1)
        .arg("v")
        .query(&mut conn)
        .unwrap();
    let _: bool = conn.expire("later", 100).unwrap();
    let _: () = conn.set("later", "v").unwrap();
    let _: bool = redis::cmd("PEXPIRE")
        .arg("later")
        .arg(50_000)
        .query(&mut conn)
        .unwrap();
    let before: i64 = conn.pttl("session").unwrap();
    let read_before = Instant::now();
    // `short` expires and the active cycle removes it (logged as DEL)...
    wait_until(
        "the active cycle to expire `short`",
        Duration::from_secs(30),
        || info_field(&mut conn, "expired_keys").as_deref() == Some("1"),
    );
    // ... and the TTLs read after the restart are 2 s shorter at least.
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(read_before.elapsed()));
    server.shutdown();

    let log = std::fs::read_to_string(incremental_file(dir.path())).unwrap();
    assert!(
        log.contains("PXAT"),
        "relative expiry must be logged as absolute:\n{log}"
    );
    assert!(log.contains("PEXPIREAT"), "{log}");
    assert!(
        log.contains("$3\r\nDEL\r\n$5\r\nshort"),
        "expiration must be logged as DEL:\n{log}"
    );

    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let after: i64 = conn.pttl("session").unwrap();
    assert!(
        after > 0 && after <= before - 2000,
        "TTL continues from the absolute time: {before} -> {after}"
    );
    assert!(!conn.exists::<_, bool>("short").unwrap());
    let later: i64 = conn.pttl("later").unwrap();
    assert!(later > 0 && later <= 50_000 - 2000, "{later}");
}

#[test]
fn databases_swapdb_and_flush_replay_to_the_same_state() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["SET", "a", "1"],
        vec!["SELECT", "3"],
        vec!["SET", "b", "2"],
        vec!["INCRBYFLOAT", "f", "0.1"],
        vec!["INCRBYFLOAT", "f", "0.2"],
        vec!["MOVE", "b", "5"],
        vec!["SWAPDB", "0", "5"],
        vec!["SELECT", "0"],
        vec!["RENAME", "b", "c"],
        vec!["COPY", "c", "d", "DB", "7"],
        vec!["APPEND", "c", "xyz"],
        vec!["SETRANGE", "c", "10", "!"],
        vec!["SELECT", "1"],
        vec!["SET", "gone", "x"],
        vec!["FLUSHDB"],
    ];
    for command in commands.drain(..) {
        let mut cmd = redis::cmd(command[0]);
        for arg in &command[1..] {
            cmd.arg(*arg);
        }
        let _: redis::Value = cmd.query(&mut conn).unwrap();
    }
    let snapshot = |conn: &mut redis::Connection| {
        let mut state = Vec::new();
        for db in 0..16 {
            let _: () = redis::cmd("SELECT").arg(db).query(conn).unwrap();
            let mut keys: Vec<String> = conn.keys("*").unwrap();
            keys.sort();
            for key in keys {
                let value: Vec<u8> = conn.get(&key).unwrap();
                state.push((db, key, value));
            }
        }
        state
    };
    let before = snapshot(&mut conn);
    assert!(before.len() >= 4, "{before:?}");
    server.kill9();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    assert_eq!(snapshot(&mut conn), before);
}

#[test]
fn unlisted_files_are_removed_at_start_up_only_when_a_crash_explains_them() {
    let dir = temp_dir();
    populate(dir.path(), 3);
    let aof = dir.path().join("appendonlydir");
    // What crashes mid-change leave: the empty new file of a rotation that did not
    // commit, a part of a compaction that did not commit, a temp manifest.
    let stray = aof.join("appendonly.aof.7.incr.aof");
    let part = aof.join("appendonly.aof.1.base.2.rdb");
    let temp = aof.join("temp-appendonly.aof.manifest");
    std::fs::write(&stray, b"").unwrap();
    std::fs::write(&part, b"REDIS0010").unwrap();
    std::fs::write(&temp, b"garbage").unwrap();
    let mut server = start_server(dir.path(), &[]);
    assert_eq!(common::dbsize(&mut server.connection()), 3);
    assert!(
        !stray.exists() && !part.exists() && !temp.exists(),
        "crash leftovers must be removed"
    );
    server.shutdown();
    // A file above the manifest with records is no crash leftover: it is neither
    // replayed nor removed, and start-up refuses, naming it.
    std::fs::write(&stray, b"*1\r\n$8\r\nFLUSHALL\r\n").unwrap();
    let log = match try_start_server(dir.path(), &[]) {
        Ok(_) => panic!("started with records the manifest does not list"),
        Err(log) => log,
    };
    assert!(
        log.contains("appendonly.aof.7.incr.aof (18 bytes)"),
        "{log}"
    );
    assert_eq!(std::fs::read(&stray).unwrap(), b"*1\r\n$8\r\nFLUSHALL\r\n");
}

fn set_file_size_limit(pid: u32, bytes: u64) {
    let limit = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    let result = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_FSIZE,
            &limit,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(
        result,
        0,
        "prlimit failed: {}",
        std::io::Error::last_os_error()
    );
}

/// A full disk, simulated with a file-size limit on the server process (RLIMIT_FSIZE makes
/// write(2) fail with EFBIG once the log reaches it): writes are refused with MISCONF, and
/// once the limit is lifted the log heals and nothing acknowledged is lost.
#[test]
fn a_failing_log_refuses_writes_then_heals_without_loss() {
    for policy in ["always", "everysec"] {
        let dir = temp_dir();
        let server = try_start_server_with(dir.path(), &["--appendfsync", policy], |_| {}).unwrap();
        set_file_size_limit(server.pid(), 64 * 1024);
        // Probes use fresh connections with a read timeout: under `always` a probe that runs
        // just before the failure is noticed is held like any write, and is abandoned.
        let probe = |key: &str| -> redis::RedisResult<()> {
            let mut conn = server.connection();
            conn.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            conn.set(key, "x")
        };
        let mut acknowledged = Vec::new();
        let mut refused = None;
        let value = "v".repeat(1000);
        // Sequential writes: under `always`, the write that hits the limit waits (its reply is
        // held until the log is durable), so a second connection watches for MISCONF.
        let writer_url = server.url();
        let (sender, receiver) = std::sync::mpsc::channel();
        let writer_value = value.clone();
        let writer = std::thread::spawn(move || {
            let mut conn = redis::Client::open(writer_url)
                .unwrap()
                .get_connection()
                .unwrap();
            for i in 0..1000 {
                let key = format!("k{i}");
                match conn.set::<_, _, ()>(&key, &writer_value) {
                    Ok(()) => sender.send(Ok(key)).unwrap(),
                    Err(e) => {
                        sender.send(Err(e.to_string())).unwrap();
                        return;
                    }
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while refused.is_none() && Instant::now() < deadline {
            while let Ok(result) = receiver.try_recv() {
                match result {
                    Ok(key) => acknowledged.push(key),
                    Err(e) => refused = Some(e),
                }
            }
            if refused.is_none()
                && let Err(e) = probe("probe")
                && !e.is_timeout()
            {
                refused = Some(e.to_string());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let refused = refused.unwrap_or_else(|| panic!("{policy}: writes were never refused"));
        assert!(
            refused.contains("MISCONF") && refused.contains("AOF"),
            "{policy}: {refused}"
        );
        let info: String = redis::cmd("INFO")
            .arg("persistence")
            .query(&mut server.connection())
            .unwrap();
        assert!(
            info.contains("aof_last_write_status:err"),
            "{policy}: {info}"
        );

        // Free space again: the log heals, held replies go out, writes are accepted.
        set_file_size_limit(server.pid(), libc::RLIM_INFINITY);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let attempt = probe("healed");
            if attempt.is_ok() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{policy}: log never healed: {attempt:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        writer.join().unwrap();
        while let Ok(result) = receiver.try_recv() {
            if let Ok(key) = result {
                acknowledged.push(key);
            }
        }
        assert!(!acknowledged.is_empty());
        let mut server = server;
        server.kill9();
        let server = start_server(dir.path(), &[]);
        let mut conn = server.connection();
        for key in &acknowledged {
            let found: Option<String> = conn.get(key).unwrap();
            assert_eq!(
                found.as_deref(),
                Some(value.as_str()),
                "{policy}: acknowledged {key} lost"
            );
        }
        assert_eq!(
            conn.get::<_, Option<String>>("healed").unwrap().as_deref(),
            Some("x")
        );
    }
}
