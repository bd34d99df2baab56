//! Power loss, not only process death: the server runs in-process on a simulated disk
//! that keeps apart what was written and what was made durable. A crash stops the disk
//! (every later operation fails and changes nothing), the server is halted, and
//! `power_loss` keeps only the durable image (optionally with a torn prefix of unsynced
//! appends). A new server then starts on what is left, and its dataset is checked.
//!
//! Crash moments: every named step of the compaction protocol, every fsync of a
//! compaction, a failed fsync, and random moments under load with compactions running
//! back to back (`TESSERA_CRASH_SEEDS=N` runs N seeds instead of the default).

mod common;

use common::in_process::{InProcess, dump, populate, wait_for_checkpoint};
use common::model::{Model, join_load, spawn_load};
use common::{PROTOCOL_STEPS, info_field, wait_for_background_jobs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tessera::storage::{Fault, SimulatedStorage, TornWrites};

#[test]
fn power_loss_at_every_step_of_the_compaction_keeps_every_acknowledged_write() {
    for (index, step) in PROTOCOL_STEPS.iter().enumerate() {
        for torn in [TornWrites::None, TornWrites::Seeded(index as u64 + 1)] {
            let storage = SimulatedStorage::new();
            let server = InProcess::start(&storage, "appendfsync always\naof-rewrite-threads 2");
            let mut conn = server.connection();
            populate(&mut conn, 600);
            let expected = dump(&mut conn);
            storage.crash_at(step);
            let reply: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
            assert_eq!(reply, "Background append only file rewriting started");
            // A write after the start goes to the new incremental file: if acknowledged,
            // it must survive.
            let post: redis::RedisResult<()> =
                redis::cmd("SET").arg("post").arg("write").query(&mut conn);
            wait_for_checkpoint(&storage, step);
            server.halt();
            storage.power_loss(torn);
            let restarted = InProcess::start(&storage, "");
            let mut conn = restarted.connection();
            let mut actual = dump(&mut conn);
            let post_value = actual
                .iter()
                .position(|(db, key, _)| *db == 0 && key == "post")
                .map(|i| actual.remove(i).2);
            if post.is_ok() {
                assert_eq!(
                    post_value.as_deref(),
                    Some(&b"write"[..]),
                    "{step} {torn:?}"
                );
            }
            assert_eq!(actual, expected, "{step} {torn:?}");
            // The directory is sound: a compaction completes and changes nothing.
            let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
            wait_for_background_jobs(&mut conn);
            assert_eq!(
                info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
                "ok"
            );
            restarted.halt();
        }
    }
}

#[test]
fn power_loss_after_every_fsync_of_a_compaction_keeps_the_dataset() {
    // A dry run counts the fsyncs of one compaction; then, for each N, durability
    // freezes after the Nth of them and the power goes once the compaction is over.
    let count_syncs = || {
        let storage = SimulatedStorage::new();
        let server = InProcess::start(&storage, "aof-rewrite-threads 3");
        let mut conn = server.connection();
        populate(&mut conn, 300);
        let before = storage.counts().syncs;
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        let syncs = storage.counts().syncs - before;
        server.halt();
        syncs
    };
    let syncs = count_syncs();
    assert!(
        syncs >= 8,
        "a compaction makes at least 8 fsyncs, saw {syncs}"
    );
    for n in 0..=syncs {
        let storage = SimulatedStorage::new();
        let server = InProcess::start(&storage, "aof-rewrite-threads 3");
        let mut conn = server.connection();
        populate(&mut conn, 300);
        let expected = dump(&mut conn);
        // Make the data durable before the experiment (everysec would sync it later).
        let _: () = redis::cmd("SET")
            .arg("sync")
            .arg("point")
            .query(&mut conn)
            .unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let mut expected_with_sync = expected.clone();
        expected_with_sync.push((0, "sync".into(), b"point".to_vec()));
        expected_with_sync.sort();
        storage.freeze_durability_after_syncs(storage.counts().syncs + n);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        server.halt();
        storage.power_loss(TornWrites::Seeded(n));
        let restarted = InProcess::start(&storage, "");
        let mut actual = dump(&mut restarted.connection());
        actual.sort();
        assert_eq!(
            actual, expected_with_sync,
            "power loss after fsync {n} of {syncs}"
        );
        restarted.halt();
    }
}

#[test]
fn a_failed_compaction_leaves_the_previous_state_and_is_reported() {
    for fault in [Fault::NoSpace, Fault::Io] {
        let storage = SimulatedStorage::new();
        // `always`: every write is fsynced before its reply, so no log fsync is pending
        // when the compaction starts and the failed sync is surely a part's.
        let server = InProcess::start(&storage, "appendfsync always\naof-rewrite-threads 2");
        let mut conn = server.connection();
        populate(&mut conn, 400);
        // Fail the fsync of a part: the first sync once a part holds captured keys.
        storage.fail_sync_after("snapshot-first-capture-taken", fault);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        assert_eq!(
            info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
            "err",
            "{fault:?}"
        );
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
        let expected = dump(&mut conn);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        assert_eq!(
            info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
            "ok"
        );
        assert_eq!(
            info_field(&mut conn, "tessera_aof_base_parts").unwrap(),
            "2"
        );
        server.halt();
        storage.power_loss(TornWrites::None);
        let restarted = InProcess::start(&storage, "");
        assert_eq!(dump(&mut restarted.connection()), expected, "{fault:?}");
        restarted.halt();
    }
}

fn seeds() -> u64 {
    common::env_number("TESSERA_CRASH_SEEDS", 10, 1)
}

#[test]
fn random_power_loss_under_load_with_back_to_back_compactions() {
    let first: u64 = common::env_number("TESSERA_CRASH_FIRST_SEED", 0, 0);
    for seed in first..first + seeds() {
        eprintln!("random crash, seed {seed}");
        let threads = 1 + seed % 4;
        let storage = SimulatedStorage::new();
        let server = InProcess::start(
            &storage,
            &format!("appendfsync always\naof-rewrite-threads {threads}"),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let load = spawn_load(&server.url(), 4, seed, &stop, usize::MAX);
        let compactor = {
            let url = server.url();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let Ok(mut conn) = redis::Client::open(url).and_then(|c| c.get_connection()) else {
                    return 0;
                };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
                let mut started = 0;
                while !stop.load(Ordering::Relaxed) {
                    match redis::cmd("BGREWRITEAOF").query::<String>(&mut conn) {
                        Ok(reply) if reply.ends_with("started") => started += 1,
                        Ok(_) => {}
                        Err(e) if e.is_timeout() || e.is_io_error() => break,
                        Err(_) => {} // already in progress
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                started
            })
        };
        let run_for = 150 + (seed * 7919 % 500);
        std::thread::sleep(Duration::from_millis(run_for));
        storage.crash_now();
        server.halt();
        let reached = storage.checkpoints();
        eprintln!(
            "last checkpoints: {:?}",
            &reached[reached.len().saturating_sub(12)..]
        );
        stop.store(true, Ordering::Relaxed);
        let model: Model = join_load(load);
        let compactions = compactor.join().unwrap();
        storage.power_loss(TornWrites::Seeded(seed));
        let restarted = InProcess::start(&storage, "");
        let problems = model.verify(&mut restarted.connection());
        assert!(
            problems.is_empty(),
            "seed {seed} ({threads} threads, {compactions} compactions, crash after {run_for} ms): {problems:#?}"
        );
        assert!(
            model.acked_count() > 0,
            "seed {seed}: the load made progress"
        );
        if run_for > 200 {
            for kind in ["k", "h", "s", "l", "z"] {
                assert!(
                    model.acked_of_kind(kind) > 0,
                    "seed {seed}: no {kind} keys written"
                );
            }
        }
        restarted.halt();
    }
}

#[test]
fn a_failed_directory_fsync_after_a_manifest_rename_loses_nothing() {
    // The directory fsync that follows the rename of a new manifest fails: at the switch
    // to the new incremental file (the 2nd commit) and at the installation (the 3rd).
    for (step, what) in [
        ("manifest-renamed:2", "rotation"),
        ("manifest-renamed:3", "installation"),
    ] {
        // Without power loss the restart sees the new manifest; with it, maybe the old one.
        for power_loss in [false, true] {
            let storage = SimulatedStorage::new();
            // Slow parts: the write below is answered before the installation.
            let server = InProcess::start(
                &storage,
                "aof-rewrite-threads 2\nappendfsync always\nrdb-key-save-delay 5000",
            );
            let mut conn = server.connection();
            populate(&mut conn, 300);
            let expected = dump(&mut conn);
            storage.fail_sync_after(step, Fault::Io);
            let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
            // Under `always` this reply waits for the new file's fsync and, after a failed
            // directory fsync, for a successful retry of it (once a second).
            let acked: redis::RedisResult<()> =
                redis::cmd("SET").arg("post").arg("write").query(&mut conn);
            if power_loss {
                wait_for_checkpoint(&storage, step);
            } else {
                wait_for_background_jobs(&mut conn);
            }
            let reached = storage.checkpoints();
            let (name, nth) = step.split_once(':').unwrap();
            assert!(
                reached.iter().filter(|s| *s == name).count() >= nth.parse().unwrap(),
                "{what}: {step} not reached: {reached:?}"
            );
            server.halt();
            if power_loss {
                storage.power_loss(TornWrites::None);
            } else {
                storage.clear_faults();
            }
            let restarted = InProcess::start(&storage, "");
            let mut actual = dump(&mut restarted.connection());
            let post = actual
                .iter()
                .position(|(_, key, _)| key == "post")
                .map(|i| actual.remove(i));
            if acked.is_ok() {
                assert!(post.is_some(), "{what}: an acknowledged write was lost");
            }
            assert_eq!(actual, expected, "{what}, power loss: {power_loss}");
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
