//! Power loss, not only process death: the server runs in-process on a simulated disk
//! that keeps apart what was written and what was made durable. A crash stops the disk
//! (every later operation fails and changes nothing), the server is halted, and
//! `power_loss` keeps only the durable image — with none, a prefix, a hole or a scattering
//! of the pages written since the last fsync of each file. A new server then starts on what
//! is left, and its dataset is checked.
//!
//! Crash moments: every step of a compaction (every occurrence of every checkpoint) in a
//! fresh directory and in one with a base of several parts and several incremental files,
//! every step of a base written alone (BGREWRITEAOF with the log off), every fsync of a
//! compaction, a failed fsync, and random moments under load with
//! compactions running back to back.
//!
//! Longer runs: `TESSERA_CRASH_SEEDS=N` random crashes instead of 10, from seed
//! `TESSERA_CRASH_FIRST_SEED` (0 by default).

mod common;

use common::crash_points::{Protocol, crash_tested_in, points_of};
use common::in_process::{
    CRASH_SETTINGS, InProcess, Prepared, assert_directory_is_the_manifest, assert_same,
    assert_steps_cover_the_protocol, compact, compaction_steps, count_reached,
    directory_with_history, dump, fresh_directory, populate, restart_after_power_loss,
    send_write_after_the_switch, start_compaction_after_writes, wait_for_checkpoint,
    write_after_the_switch,
};
use common::model::{KINDS, Model, join_load, spawn_load_with_progress};
use common::{info_field, wait_for_background_jobs};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::storage::{CrashPoint, Fault, SimulatedStorage, TornWrites};

/// Every way a power loss may treat the bytes not yet synced, drawn from `seed`.
fn every_tear(seed: u64) -> [TornWrites; 4] {
    [
        TornWrites::None,
        TornWrites::Seeded(seed),
        TornWrites::Hole(seed),
        TornWrites::Scattered(seed),
    ]
}

/// One of the ways that keep some unsynced bytes, by `seed`.
fn some_tear(seed: u64) -> TornWrites {
    every_tear(seed)[1 + (seed % 3) as usize]
}

/// Runs a compaction in a copy of `prepared` and crashes it at `step` (every later disk
/// operation fails), with two blocks of writes to values of every type in several
/// databases: one sent with BGREWRITEAOF, which the switch to the new incremental file
/// makes durable before any step, and one after the switch, which is acknowledged before
/// the crash (the compaction waits at the step until it is) unless the step is part of the
/// switch itself. Cuts the power as `torn` says and restarts. Checks that the dataset is
/// exactly the acknowledged writes (each key's type, TTL presence and contents, and the
/// function library), that only the manifest's files remain, and that a further compaction
/// succeeds.
fn crash_at_step(prepared: &Prepared, step: &common::in_process::Step, torn: TornWrites) {
    let context = format!("{}: crash at {step}, {torn:?}", prepared.name);
    let storage = prepared.storage.durable_copy();
    let server = InProcess::start(&storage, CRASH_SETTINGS);
    let mut conn = server.connection();
    storage.crash_at(step.at());
    if !step.in_rotation {
        storage.pause_at(step.at());
    }
    start_compaction_after_writes(&mut conn)
        .unwrap_or_else(|e| panic!("{context}: the writes before the switch: {e}"));
    let expected = if step.in_rotation {
        // Their reply needs the new incremental file, and the crash comes before a byte is
        // written to it: sent, never acknowledged, and lost.
        send_write_after_the_switch(&mut conn);
        &prepared.after_pre
    } else {
        wait_for_checkpoint(&storage, step.at());
        write_after_the_switch(&mut conn)
            .unwrap_or_else(|e| panic!("{context}: the writes after the switch: {e}"));
        storage.resume();
        &prepared.after_post
    };
    wait_for_checkpoint(&storage, step.at());
    server.halt();
    let tears = storage.power_loss(torn);
    let (restarted, cut) = restart_after_power_loss(&storage, &tears, "");
    assert_eq!(cut, None, "{context}: no log write was in flight");
    let mut conn = restarted.connection();
    assert_same(&dump(restarted.port), expected, &context);
    assert_directory_is_the_manifest(&storage, &context);
    assert_eq!(
        compact(&mut conn),
        "ok",
        "{context}: the compaction after the restart"
    );
    assert_same(
        &dump(restarted.port),
        expected,
        &format!("{context}: after a further compaction"),
    );
    restarted.halt();
    assert_directory_is_the_manifest(&storage, &context);
}

fn power_loss_at_every_step(prepared: &Prepared) {
    let steps = compaction_steps(prepared);
    assert_steps_cover_the_protocol(&steps, prepared);
    for (index, step) in steps.iter().enumerate() {
        for torn in every_tear(index as u64) {
            crash_at_step(prepared, step, torn);
        }
    }
}

/// Every checkpoint the code declares is a crash point of some protocol's crash tests:
/// `crash_tested_in` gives each its protocols (its match does not compile without a new
/// one), and none may be left with none. Those tests check that they reach each point:
/// `assert_steps_cover_the_protocol` for a compaction, `wait_for_checkpoint` for SAVE and
/// BGSAVE (tests/fault_paths.rs).
#[test]
fn every_crash_point_is_crash_tested() {
    let untested: Vec<CrashPoint> = CrashPoint::ALL
        .iter()
        .copied()
        .filter(|point| crash_tested_in(*point).is_empty())
        .collect();
    assert!(untested.is_empty(), "no crash test stops at {untested:?}");
}

#[test]
fn power_loss_at_every_step_of_the_first_compaction_keeps_every_acknowledged_write() {
    power_loss_at_every_step(&fresh_directory());
}

/// Here a compaction also deletes two base parts and three incremental files: each
/// deletion is a step.
#[test]
fn power_loss_at_every_step_of_a_compaction_over_history_keeps_every_acknowledged_write() {
    power_loss_at_every_step(&directory_with_history());
}

/// The settings of a server with the log off, on a log directory a crash test prepared.
const LOG_OFF: &str = "appendonly no\naof-rewrite-threads 2";

/// Starts a server with the log off on a copy of `prepared`, writes a dataset of its own
/// (a server with the log off does not load the log), and runs BGREWRITEAOF, which writes
/// it as a base alone (Redis 7's rewrite with the log off), crashing at `step` if one is
/// given. Returns the storage, that dataset, and how many checkpoints were reached before
/// the BGREWRITEAOF.
fn write_a_base_alone(
    prepared: &Prepared,
    step: Option<&common::in_process::Step>,
) -> (SimulatedStorage, common::in_process::Dataset, usize) {
    let storage = prepared.storage.durable_copy();
    let server = InProcess::start(&storage, LOG_OFF);
    let mut conn = server.connection();
    populate(&mut conn, 120);
    let written = dump(server.port);
    assert!(written != prepared.dataset, "the two datasets must differ");
    let before = storage.checkpoints().len();
    if let Some(step) = step {
        storage.crash_at(step.at());
    }
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    match step {
        Some(step) => wait_for_checkpoint(&storage, step.at()),
        None => {
            wait_for_background_jobs(&mut conn);
            let status = info_field(&mut conn, "aof_last_bgrewrite_status");
            assert_eq!(status.as_deref(), Some("ok"));
        }
    }
    server.halt();
    (storage, written, before)
}

/// BGREWRITEAOF with the log off replaces the log directory's contents with one base: a
/// power loss at any step of it leaves a directory that loads either the dataset it held
/// before or the one written, never a mix, with only the manifest's files; and once a
/// step has left the new one, every later step does.
fn power_loss_at_every_step_of_a_base_written_alone(prepared: &Prepared) {
    let (storage, written, before) = write_a_base_alone(prepared, None);
    let steps = common::in_process::steps_after(&storage.checkpoints(), before);
    for point in points_of(Protocol::BaseAlone) {
        assert!(
            steps.iter().any(|s| s.point == point),
            "{}: {point} not reached: {steps:?}",
            prepared.name
        );
    }
    let mut committed = false;
    for (index, step) in steps.iter().enumerate() {
        for torn in every_tear(index as u64) {
            let context = format!("{}: base alone, crash at {step}, {torn:?}", prepared.name);
            let (storage, _, _) = write_a_base_alone(prepared, Some(step));
            let tears = storage.power_loss(torn);
            let (restarted, cut) = restart_after_power_loss(&storage, &tears, "");
            assert_eq!(cut, None, "{context}: no log write was in flight");
            let actual = dump(restarted.port);
            let new = if actual == written {
                true
            } else {
                assert_same(&actual, &prepared.dataset, &context);
                false
            };
            assert!(
                new || !committed,
                "{context}: the old dataset after the new one"
            );
            committed |= new;
            restarted.halt();
            assert_directory_is_the_manifest(&storage, &context);
        }
    }
    assert!(committed, "{}: the base was never committed", prepared.name);
}

#[test]
fn power_loss_at_every_step_of_a_base_written_alone_leaves_the_old_or_the_new_dataset() {
    power_loss_at_every_step_of_a_base_written_alone(&fresh_directory());
    power_loss_at_every_step_of_a_base_written_alone(&directory_with_history());
}

/// Freezes durability after each fsync of a compaction in turn (numbered in the run
/// itself, from the compaction's start: under `always` every write before it was already
/// fsynced) and cuts the power once the compaction is over; the dataset is intact, and the
/// directory holds only the manifest's files.
fn power_loss_after_every_fsync(prepared: &Prepared) {
    let mut first_run: Option<Vec<std::path::PathBuf>> = None;
    for n in 0.. {
        let storage = prepared.storage.durable_copy();
        let server = InProcess::start(&storage, "appendfsync always\naof-rewrite-threads 3");
        let mut conn = server.connection();
        let before = storage.counts().syncs;
        storage.freeze_durability_after_syncs(before + n as u64);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        let syncs = storage.synced_paths().split_off(before as usize);
        server.halt();
        // The same fsyncs each run, the parts' in any order (their threads race).
        let mut sorted = syncs.clone();
        sorted.sort();
        let runs = first_run.get_or_insert_with(|| sorted.clone());
        assert_eq!(
            *runs, sorted,
            "{}: each run makes the same fsyncs",
            prepared.name
        );
        let last_durable = match n {
            0 => "none".to_string(),
            n => syncs[n - 1].display().to_string(),
        };
        let context = format!(
            "{}: power loss after fsync {n} of {} (last durable: {last_durable})",
            prepared.name,
            syncs.len()
        );
        let tears = storage.power_loss(some_tear(n as u64));
        let (restarted, _) = restart_after_power_loss(&storage, &tears, "");
        assert_same(&dump(restarted.port), &prepared.dataset, &context);
        restarted.halt();
        assert_directory_is_the_manifest(&storage, &context);
        if n == syncs.len() {
            break;
        }
    }
    // The switch (old file, new file, manifest, directory), three parts, the directory,
    // the commit (manifest, directory) and the commit without history.
    let syncs = first_run.unwrap_or_default();
    let parts = syncs
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".rdb"));
    assert!(
        syncs.len() >= 12 && parts.count() == 3,
        "{}: the fsyncs of a compaction: {syncs:?}",
        prepared.name
    );
}

#[test]
fn power_loss_after_every_fsync_of_a_compaction_keeps_the_dataset() {
    power_loss_after_every_fsync(&fresh_directory());
    power_loss_after_every_fsync(&directory_with_history());
}

#[test]
fn a_failed_compaction_leaves_the_previous_state_and_is_reported() {
    for fault in [Fault::NoSpace, Fault::Io] {
        let storage = SimulatedStorage::new();
        let server = InProcess::start(&storage, "appendfsync always\naof-rewrite-threads 2");
        let mut conn = server.connection();
        populate(&mut conn, 400);
        // Fail the fsync of a part: the first sync once the switch to the new incremental
        // file is done (its syncs race with the parts': a part is held at its first capture
        // until then). Under `always` no write is waiting for the log's fsync.
        storage.pause_at(CrashPoint::SnapshotFirstCaptureTaken);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_checkpoint(&storage, CrashPoint::RewriteIncrCommitted);
        wait_for_checkpoint(&storage, CrashPoint::SnapshotFirstCaptureTaken);
        let failing = storage.counts().syncs + 1;
        storage.fail_sync(failing, fault);
        storage.resume();
        wait_for_background_jobs(&mut conn);
        let failed = storage.synced_paths()[failing as usize - 1].clone();
        assert!(failed.to_string_lossy().ends_with(".rdb"), "{failed:?}");
        let status = info_field(&mut conn, "aof_last_bgrewrite_status");
        assert_eq!(status.as_deref(), Some("err"), "{fault:?}");
        assert_eq!(
            info_field(&mut conn, "aof_rewrites_consecutive_failures").unwrap(),
            "1"
        );
        assert_eq!(
            info_field(&mut conn, "tessera_aof_base_parts").unwrap(),
            "0"
        );
        // Writes go on; the next compaction succeeds.
        let _: () = redis::cmd("SET")
            .arg("after")
            .arg("failure")
            .query(&mut conn)
            .unwrap();
        let expected = dump(server.port);
        assert_eq!(compact(&mut conn), "ok");
        assert_eq!(
            info_field(&mut conn, "tessera_aof_base_parts").unwrap(),
            "2"
        );
        server.halt();
        let _ = storage.power_loss(TornWrites::None);
        let restarted = InProcess::start(&storage, "");
        assert_same(&dump(restarted.port), &expected, &format!("{fault:?}"));
        restarted.halt();
    }
}

/// The writes of the load that are not idempotent, or change a TTL, or are a script's or a
/// function's: a run long enough has some of each acknowledged.
const COMMANDS_TO_ACKNOWLEDGE: [&str; 14] = [
    "INCRBY",
    "HINCRBY",
    "ZINCRBY",
    "RPUSH",
    "LPOP",
    "XADD",
    "XREADGROUP",
    "XACK",
    "XCLAIM",
    "EXPIRE",
    "PEXPIREAT",
    "PERSIST",
    "EVAL",
    "FCALL",
];

/// Acknowledged writes of all the random runs, at least, for them to have some of each
/// command of `COMMANDS_TO_ACKNOWLEDGE` (a run acknowledges a few hundred).
const ENOUGH_TO_HAVE_EVERY_COMMAND: usize = 2000;

/// Every kind of key (`model::KINDS`) has an acknowledged write.
fn assert_the_load_wrote_every_kind(model: &Model, context: &str) {
    for kind in KINDS {
        assert!(
            model.acked_of_kind(kind) > 0,
            "{context}: no {kind} keys written"
        );
    }
}

/// Every command of `COMMANDS_TO_ACKNOWLEDGE` has an acknowledged write in `acked` (counts
/// by command).
fn assert_every_command_was_acknowledged(acked: &BTreeMap<String, usize>) {
    for command in COMMANDS_TO_ACKNOWLEDGE {
        assert!(
            acked.get(command).is_some_and(|&n| n > 0),
            "no {command} acknowledged in any run: {acked:?}"
        );
    }
}

/// Compactions committed before the crash, at least, in each random run.
const MIN_COMPACTIONS: u64 = 2;
/// Writes acknowledged before the crash, at least, to each client of each random run.
const MIN_ACKNOWLEDGED: usize = 25;

#[test]
fn random_power_loss_under_load_with_back_to_back_compactions() {
    let first = common::env_number("TESSERA_CRASH_FIRST_SEED", 0, 0);
    let mut cuts = 0;
    let mut acked_commands: BTreeMap<String, usize> = BTreeMap::new();
    for seed in first..first + common::env_number("TESSERA_CRASH_SEEDS", 10, 1) {
        eprintln!("random crash, seed {seed}");
        let threads = 1 + seed % 4;
        let storage = SimulatedStorage::new();
        let server = InProcess::start(
            &storage,
            &format!("appendfsync always\naof-rewrite-threads {threads}"),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let crashed = Arc::new(AtomicBool::new(false));
        let (load, progress) = spawn_load_with_progress(&server.url(), 4, seed, &stop, usize::MAX);
        let compactor = {
            let mut conn = server.connection();
            let (stop, crashed) = (stop.clone(), crashed.clone());
            std::thread::spawn(move || {
                let mut started = 0;
                while !stop.load(Ordering::Relaxed) {
                    match redis::cmd("BGREWRITEAOF").query::<String>(&mut conn) {
                        Ok(reply) if reply.ends_with("started") => started += 1,
                        Err(e) if e.to_string().contains("already in progress") => {}
                        // After the crash anything goes, and the halt closes the connection.
                        _ if crashed.load(Ordering::Relaxed) => break,
                        other => panic!("BGREWRITEAOF answered {other:?}"),
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                started
            })
        };
        let run_for = 150 + (seed * 7919 % 500);
        let began = Instant::now();
        std::thread::sleep(Duration::from_millis(run_for));
        // At least that long, and until the run has what it must show (on a loaded
        // machine 150 ms may hold a handful of fsyncs): then the crash.
        let enough = Instant::now() + Duration::from_secs(60);
        while Instant::now() < enough
            && (count_reached(&storage, CrashPoint::RewriteCommitted) < MIN_COMPACTIONS
                || progress.acked().iter().any(|&n| n < MIN_ACKNOWLEDGED))
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        let ran_ms = began.elapsed().as_millis();
        crashed.store(true, Ordering::Relaxed);
        storage.crash_now();
        server.halt();
        let reached = storage.checkpoints();
        eprintln!(
            "last checkpoints: {:?}",
            &reached[reached.len().saturating_sub(12)..]
        );
        let completed = count_reached(&storage, CrashPoint::RewriteCommitted);
        stop.store(true, Ordering::Relaxed);
        let model: Model = join_load(load);
        let started = compactor.join().unwrap();
        let acked = model.acked_per_client();
        let tears = storage.power_loss(some_tear(seed));
        let (restarted, cut) = restart_after_power_loss(&storage, &tears, "");
        cuts += usize::from(cut.is_some());
        let context = format!(
            "seed {seed} ({threads} threads, {started} compactions started, {completed} \
             committed, crash after {ran_ms} ms, writes acknowledged per client {acked:?}, \
             log cut by hand: {cut:?})"
        );
        let problems = model.verify_prefix(&mut restarted.connection(), &acked);
        assert!(problems.is_empty(), "{context}: {problems:#?}");
        assert!(
            completed >= MIN_COMPACTIONS,
            "{context}: too few compactions"
        );
        assert!(
            acked.len() == 4 && acked.iter().all(|&n| n >= MIN_ACKNOWLEDGED),
            "{context}: too few writes"
        );
        if run_for > 200 {
            assert_the_load_wrote_every_kind(&model, &context);
        }
        for (command, count) in &model.acked_commands {
            *acked_commands.entry(command.clone()).or_default() += count;
        }
        restarted.halt();
    }
    eprintln!("{cuts} restarts needed the damaged end of the log cut");
    eprintln!("acknowledged writes: {acked_commands:?}");
    if acked_commands.values().sum::<usize>() >= ENOUGH_TO_HAVE_EVERY_COMMAND {
        assert_every_command_was_acknowledged(&acked_commands);
    }
}

#[test]
fn a_failed_directory_fsync_after_a_manifest_rename_loses_nothing() {
    // The directory fsync that follows the rename of a new manifest fails: at the switch
    // to the new incremental file (the 2nd commit) and at the installation (the 3rd).
    for (step, what) in [
        (CrashPoint::ManifestRenamed.nth(2), "rotation"),
        (CrashPoint::ManifestRenamed.nth(3), "installation"),
    ] {
        // Without power loss the restart sees the new manifest; with it, maybe the old one.
        for power_loss in [false, true] {
            let context = format!("{what}, power loss: {power_loss}");
            let storage = SimulatedStorage::new();
            let server = InProcess::start(&storage, "aof-rewrite-threads 2\nappendfsync always");
            let mut conn = server.connection();
            conn.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            populate(&mut conn, 300);
            let mut expected = dump(server.port);
            storage.fail_sync_after(step, Fault::Io);
            if what == "installation" {
                // The installation waits after its rename until the write below is
                // acknowledged.
                storage.pause_at(step);
            }
            let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
            // Under `always` this reply waits for the new file's fsync and, after a failed
            // directory fsync at the switch, for a successful retry of it (once a second).
            let () = redis::cmd("SET")
                .arg("post")
                .arg("write")
                .query(&mut conn)
                .unwrap_or_else(|e| panic!("{context}: the write is acknowledged: {e}"));
            expected = expected.with_string(0, "post", "write");
            wait_for_checkpoint(&storage, step);
            storage.resume();
            if power_loss {
                // Whatever the compaction is doing now.
                storage.crash_now();
            } else {
                wait_for_background_jobs(&mut conn);
            }
            server.halt();
            if power_loss {
                let _ = storage.power_loss(TornWrites::None);
            } else {
                storage.clear_faults();
            }
            let restarted = InProcess::start(&storage, "");
            assert_same(&dump(restarted.port), &expected, &context);
            restarted.halt();
        }
    }
}

#[test]
fn a_slow_disk_makes_the_server_stop_reading_instead_of_queueing_without_bound() {
    // Each fsync takes 500 ms; one client pipelines 160 MB of writes under `always`
    // without reading replies. The log bytes waiting for the writer stay near the 64 MB
    // backlog bound (TCP slows the sender down), and every write is applied.
    let storage = SimulatedStorage::new();
    let server = InProcess::start(&storage, "appendfsync always");
    storage.set_sync_delay(Duration::from_millis(500));
    let count = 160_000;
    let value = "v".repeat(1000);
    let url_port = server.port;
    let sender = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", url_port)).unwrap();
        let reader_stream = stream.try_clone().unwrap();
        let reader = std::thread::spawn(move || {
            let mut reader_stream = reader_stream;
            let mut seen = 0usize;
            let mut buf = vec![0u8; 1 << 16];
            while seen < count * 5 {
                let n = reader_stream.read(&mut buf).unwrap();
                assert!(n > 0, "connection closed after {seen} bytes");
                seen += n;
            }
            seen
        });
        let mut batch = Vec::new();
        for i in 0..count {
            let key = format!("key:{i}");
            batch.extend_from_slice(
                format!(
                    "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                    key.len(),
                    value.len()
                )
                .as_bytes(),
            );
            if batch.len() > 1 << 20 {
                stream.write_all(&batch).unwrap();
                batch.clear();
            }
        }
        stream.write_all(&batch).unwrap();
        reader.join().unwrap()
    });
    let replies = sender.join().unwrap();
    assert_eq!(replies, count * 5, "every SET answered +OK");
    let mut conn = server.connection();
    assert_eq!(common::dbsize(&mut conn), count);
    let peak: u64 = info_field(&mut conn, "tessera_aof_buffer_peak")
        .unwrap()
        .parse()
        .unwrap();
    eprintln!("log backlog peak: {peak} bytes");
    assert!(
        peak > 1_000_000,
        "the writer fell behind at all ({peak} bytes)"
    );
    assert!(
        peak < 64 * 1024 * 1024 + 32 * 1024 * 1024,
        "log backlog peaked at {peak} bytes"
    );
    storage.set_sync_delay(Duration::ZERO);
    server.halt();
}
