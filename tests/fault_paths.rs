//! I/O failures injected where they hurt, with the server in-process on a simulated disk
//! (`SimulatedStorage::fail_file_op` aims a fault at one file whatever other threads do):
//!
//! - the log writer's failure path: a write or fsync of the log that fails while clients
//!   write, under `always` and `everysec`: `-MISCONF` replies, reads still answered, the
//!   retry, writes resuming by themselves, and every acknowledged write kept across a
//!   power loss or a restart (also when the process stops while the disk still fails);
//! - a compaction that fails at each step that can fail (a part's creation and write, the
//!   new incremental file, each step of either manifest commit): the previous state stays
//!   in force, no file of the attempt is left, the next compaction succeeds;
//! - SAVE and BGSAVE, the only persistence with `appendonly no`: a crash at each step of
//!   the temp file, its fsync, the rename and the directory fsync leaves the previous
//!   `dump.rdb` or the new one after a power loss, never a broken one.

mod common;

use common::crash_points::{Protocol, points_of};
use common::in_process::{
    Dataset, InProcess, assert_same, count_reached, describe, dump, populate, wait_for_checkpoint,
    workload,
};
use common::{info_field, wait_for_background_jobs};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::storage::{CrashPoint, Fault, FileOp, SimulatedStorage, Storage, TornWrites};

const LOG_DIR: &str = "appendonlydir";
const MANIFEST: &str = "appendonlydir/appendonly.aof.manifest";

/// INFO field `field` is `expected`; `context` says which case failed.
fn assert_info(conn: &mut redis::Connection, field: &str, expected: &str, context: &str) {
    let value = info_field(conn, field);
    assert_eq!(value.as_deref(), Some(expected), "{context}: INFO {field}");
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------
// The log writer's failure path.

/// What became of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Acked,
    /// `-MISCONF`: refused before running, so it must have changed nothing.
    Refused,
    /// No answer (the client gave up): it may or may not have been applied.
    Unknown,
}

/// One client's requests: `SET c<n>:k<i> v<i>` for even i, `APPEND c<n>:tail ",<i>"`
/// for odd i (an APPEND replayed twice, or a batch written twice, shows in the tail).
#[derive(Default)]
struct ClientLog {
    ops: Vec<Outcome>,
}

fn key_of(client: usize, i: usize) -> String {
    format!("c{client}:k{i}")
}

fn tail_of(client: usize) -> String {
    format!("c{client}:tail")
}

fn write_until_stopped(url: String, client: usize, stop: Arc<AtomicBool>) -> ClientLog {
    let mut log = ClientLog::default();
    let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    while !stop.load(Ordering::Relaxed) {
        let i = log.ops.len();
        let result: redis::RedisResult<redis::Value> = if i % 2 == 0 {
            redis::cmd("SET")
                .arg(key_of(client, i))
                .arg(format!("v{i}"))
                .query(&mut conn)
        } else {
            redis::cmd("APPEND")
                .arg(tail_of(client))
                .arg(format!(",{i}"))
                .query(&mut conn)
        };
        match result {
            Ok(_) => log.ops.push(Outcome::Acked),
            Err(e) if e.to_string().contains("MISCONF") => {
                log.ops.push(Outcome::Refused);
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => {
                log.ops.push(Outcome::Unknown);
                break;
            }
        }
    }
    log
}

/// Checks the dataset against what the clients were told; returns the problems.
fn verify_clients(conn: &mut redis::Connection, clients: &[ClientLog]) -> Vec<String> {
    let mut problems = Vec::new();
    for (client, log) in clients.iter().enumerate() {
        let mut tail = String::new();
        let mut unknown_append = None;
        for (i, outcome) in log.ops.iter().enumerate() {
            if i % 2 == 1 {
                match outcome {
                    Outcome::Acked => tail.push_str(&format!(",{i}")),
                    Outcome::Unknown => unknown_append = Some(format!(",{i}")),
                    Outcome::Refused => {}
                }
                continue;
            }
            let found: Option<String> = redis::cmd("GET")
                .arg(key_of(client, i))
                .query(conn)
                .unwrap();
            let expected = format!("v{i}");
            let ok = match outcome {
                Outcome::Acked => found.as_deref() == Some(&expected),
                Outcome::Refused => found.is_none(),
                Outcome::Unknown => found.is_none() || found.as_deref() == Some(&expected),
            };
            if !ok {
                problems.push(format!(
                    "{}: {outcome:?}, found {found:?}",
                    key_of(client, i)
                ));
            }
        }
        let found: Option<String> = redis::cmd("GET").arg(tail_of(client)).query(conn).unwrap();
        let found = found.unwrap_or_default();
        let with_unknown = unknown_append.map(|extra| format!("{tail}{extra}"));
        if found != tail && Some(&found) != with_unknown.as_ref() {
            problems.push(format!(
                "{}: expected {tail:?} (acknowledged appends), found {found:?}",
                tail_of(client)
            ));
        }
    }
    problems
}

/// A SET on a fresh connection: refused (MISCONF), answered, or held past the timeout.
fn probe(server: &InProcess, key: &str) -> Result<(), String> {
    let mut conn = server.connection();
    conn.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    redis::cmd("SET")
        .arg(key)
        .arg("x")
        .query::<()>(&mut conn)
        .map_err(|e| e.to_string())
}

/// How a log-failure run ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// The disk heals, the server runs on; then the power goes.
    HealThenPowerLoss,
    /// The disk heals; the server stops (no power loss) and restarts.
    HealThenRestart,
    /// The server stops while the disk still fails; it restarts once the disk works,
    /// without a power loss (what the page cache held is still there).
    StopWhileFailing,
}

const END_OF_RUN: [End; 3] = [
    End::HealThenPowerLoss,
    End::HealThenRestart,
    End::StopWhileFailing,
];

fn log_failure_run(policy: &str, op: FileOp, end: End) {
    let case = format!("{policy}, failing {op:?}, {end:?}");
    let storage = SimulatedStorage::new();
    let server = InProcess::start(&storage, &format!("appendfsync {policy}"));
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..3)
        .map(|client| {
            let (url, stop) = (server.url(), stop.clone());
            std::thread::spawn(move || write_until_stopped(url, client, stop))
        })
        .collect();
    let mut conn = server.connection();
    wait_until("the clients wrote", Duration::from_secs(10), || {
        common::dbsize(&mut conn) >= 30
    });

    // Every write (or fsync) of the log fails from now on.
    storage.fail_file_op(op, ".incr.aof", Fault::Io, u64::MAX);
    let mut refusal = String::new();
    wait_until(
        "a write is refused",
        Duration::from_secs(10),
        || match probe(&server, "probe") {
            Err(e) if e.contains("MISCONF") => {
                refusal = e;
                true
            }
            _ => false,
        },
    );
    assert!(
        refusal.contains("Errors writing to the AOF file") && refusal.contains("os error 5"),
        "{case}: {refusal}"
    );
    assert_info(&mut conn, "aof_last_write_status", "err", &case);
    // Reads are answered at once while writes are refused.
    let started = Instant::now();
    let _: Option<String> = redis::cmd("GET").arg("c0:k0").query(&mut conn).unwrap();
    assert!(started.elapsed() < Duration::from_millis(500), "{case}");
    std::thread::sleep(Duration::from_millis(300));

    if end == End::StopWhileFailing {
        stop.store(true, Ordering::Relaxed);
        server.halt();
        let clients: Vec<ClientLog> = writers.into_iter().map(|w| w.join().unwrap()).collect();
        storage.clear_faults();
        let restarted = InProcess::start(&storage, "");
        let problems = verify_clients(&mut restarted.connection(), &clients);
        assert!(problems.is_empty(), "{case}: {problems:#?}");
        restarted.halt();
        if policy == "always" {
            // Under `always` every acknowledged write was fsynced: a power loss keeps it.
            storage.power_loss(TornWrites::Seeded(7));
            let restarted = InProcess::start(&storage, "");
            let problems = verify_clients(&mut restarted.connection(), &clients);
            assert!(problems.is_empty(), "{case}, power loss: {problems:#?}");
            restarted.halt();
        }
        return;
    }

    // The disk works again: the writer's retry (once a second) heals the log by itself.
    storage.clear_faults();
    wait_until("writes are accepted again", Duration::from_secs(10), || {
        probe(&server, "healed").is_ok()
    });
    assert_info(&mut conn, "aof_last_write_status", "ok", &case);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let clients: Vec<ClientLog> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    for (client, log) in clients.iter().enumerate() {
        // Each client's writes resumed: its last request was acknowledged.
        assert_eq!(
            log.ops.last(),
            Some(&Outcome::Acked),
            "{case}: client {client}"
        );
    }
    let refused: usize = clients
        .iter()
        .map(|c| c.ops.iter().filter(|o| **o == Outcome::Refused).count())
        .sum();
    eprintln!(
        "{case}: {} requests, {refused} refused",
        clients.iter().map(|c| c.ops.len()).sum::<usize>()
    );
    if policy == "everysec" {
        // What `everysec` promises against a power loss: writes older than a second.
        std::thread::sleep(Duration::from_millis(1200));
    }
    server.halt();
    if end == End::HealThenPowerLoss {
        storage.power_loss(TornWrites::Seeded(11));
    }
    let restarted = InProcess::start(&storage, "");
    let mut conn = restarted.connection();
    let problems = verify_clients(&mut conn, &clients);
    assert!(problems.is_empty(), "{case}: {problems:#?}");
    let healed: Option<String> = redis::cmd("GET").arg("healed").query(&mut conn).unwrap();
    assert_eq!(healed.as_deref(), Some("x"), "{case}");
    restarted.halt();
}

#[test]
fn a_failing_log_write_refuses_writes_heals_and_loses_nothing_acknowledged() {
    for policy in ["always", "everysec"] {
        for end in END_OF_RUN {
            log_failure_run(policy, FileOp::Write, end);
        }
    }
}

#[test]
fn a_failing_log_fsync_refuses_writes_heals_and_loses_nothing_acknowledged() {
    for policy in ["always", "everysec"] {
        for end in END_OF_RUN {
            // Under `everysec`, bytes whose fsync failed are not trusted: the writer cuts
            // them off and keeps them in memory until a retry succeeds, so a process that
            // stops before that loses the writes acknowledged since the last good fsync
            // (ARCHITECTURE.md, "Failure"). Only `always` promises them.
            if policy == "everysec" && end == End::StopWhileFailing {
                continue;
            }
            log_failure_run(policy, FileOp::Sync, end);
        }
    }
}

// ---------------------------------------------------------------------------------------
// A compaction that fails.

/// The names the manifest text lists.
fn manifest_names(text: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

/// Where a compaction is made to fail.
struct FailurePoint {
    what: &'static str,
    op: FileOp,
    /// Matched against the path of the file.
    name: &'static str,
    fault: Fault,
    /// Injected once the compaction reached this checkpoint (the manifest commit that
    /// installs the parts comes after the rotation's); None: before it starts.
    after: Option<CrashPoint>,
    /// Whether the rotation (manifest M1 with the new incremental file) is in force after
    /// the failure.
    rotated: bool,
}

const FAILURE_POINTS: &[FailurePoint] = &[
    FailurePoint {
        what: "a part's creation",
        op: FileOp::Create,
        name: ".base.",
        fault: Fault::NoSpace,
        after: None,
        rotated: true,
    },
    FailurePoint {
        what: "a part's write",
        op: FileOp::Write,
        name: ".base.",
        fault: Fault::NoSpace,
        after: None,
        rotated: true,
    },
    FailurePoint {
        what: "a part's fsync",
        op: FileOp::Sync,
        name: ".base.",
        fault: Fault::Io,
        after: None,
        rotated: true,
    },
    FailurePoint {
        what: "the new incremental file's creation",
        op: FileOp::Create,
        name: "appendonly.aof.2.incr.aof",
        fault: Fault::NoSpace,
        after: None,
        rotated: false,
    },
    FailurePoint {
        what: "the new incremental file's fsync",
        op: FileOp::Sync,
        name: "appendonly.aof.2.incr.aof",
        fault: Fault::Io,
        after: None,
        rotated: false,
    },
    FailurePoint {
        what: "the rotation's manifest temp write",
        op: FileOp::Write,
        name: "temp-appendonly.aof.manifest",
        fault: Fault::NoSpace,
        after: None,
        rotated: false,
    },
    FailurePoint {
        what: "the rotation's manifest temp fsync",
        op: FileOp::Sync,
        name: "temp-appendonly.aof.manifest",
        fault: Fault::Io,
        after: None,
        rotated: false,
    },
    FailurePoint {
        what: "the rotation's manifest rename",
        op: FileOp::Rename,
        name: "temp-appendonly.aof.manifest",
        fault: Fault::Io,
        after: None,
        rotated: false,
    },
    FailurePoint {
        what: "the installing manifest's temp write",
        op: FileOp::Write,
        name: "temp-appendonly.aof.manifest",
        fault: Fault::NoSpace,
        after: Some(CrashPoint::RewriteIncrCommitted),
        rotated: true,
    },
    FailurePoint {
        what: "the installing manifest's temp fsync",
        op: FileOp::Sync,
        name: "temp-appendonly.aof.manifest",
        fault: Fault::Io,
        after: Some(CrashPoint::RewriteIncrCommitted),
        rotated: true,
    },
    FailurePoint {
        what: "the installing manifest's rename",
        op: FileOp::Rename,
        name: "temp-appendonly.aof.manifest",
        fault: Fault::Io,
        after: Some(CrashPoint::RewriteIncrCommitted),
        rotated: true,
    },
];

#[test]
fn a_compaction_failing_at_any_step_leaves_the_previous_state_and_no_file_behind() {
    for point in FAILURE_POINTS {
        let what = point.what;
        let storage = SimulatedStorage::new();
        // Slow parts (1.2 ms a key, some 330 keys): the installing commit comes well after
        // the rotation.
        let server = InProcess::start(
            &storage,
            "appendfsync always\naof-rewrite-threads 2\nrdb-key-save-delay 1200",
        );
        let mut conn = server.connection();
        populate(&mut conn, 200);
        let before = storage.read(Path::new(MANIFEST)).unwrap();
        if point.after.is_none() {
            storage.fail_file_op(point.op, point.name, point.fault, 1);
        }
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        if let Some(step) = point.after {
            wait_for_checkpoint(&storage, step);
            storage.fail_file_op(point.op, point.name, point.fault, 1);
        }
        // A write during the compaction: it must survive whichever file it went to.
        let _: () = redis::cmd("SET")
            .arg("during")
            .arg("compaction")
            .query(&mut conn)
            .unwrap();
        wait_for_background_jobs(&mut conn);
        assert_info(
            &mut conn,
            "aof_last_bgrewrite_status",
            "err",
            &format!("{what}: the failure is reported"),
        );
        assert_info(
            &mut conn,
            "aof_last_write_status",
            "ok",
            &format!("{what}: the log itself is healthy"),
        );
        // The manifest in force is the one before, or the rotation's.
        let manifest = storage.read(Path::new(MANIFEST)).unwrap();
        let mut expected = before.clone();
        if point.rotated {
            expected.extend_from_slice(b"file appendonly.aof.2.incr.aof seq 2 type i\n");
        }
        assert_eq!(
            String::from_utf8_lossy(&manifest),
            String::from_utf8_lossy(&expected),
            "{what}: manifest in force"
        );
        // Nothing of the attempt is left: no part, no temp file, no unlisted log file.
        let mut listed = manifest_names(&manifest);
        listed.push("appendonly.aof.manifest".into());
        listed.sort();
        assert_eq!(
            storage.list_dir(Path::new(LOG_DIR)).unwrap(),
            listed,
            "{what}: files left in the log directory\n{}",
            describe(&storage)
        );

        // Writes go on, and the next compaction succeeds.
        let _: () = redis::cmd("SET")
            .arg("after")
            .arg("failure")
            .query(&mut conn)
            .unwrap();
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("rdb-key-save-delay")
            .arg("0")
            .query(&mut conn)
            .unwrap();
        let expected_data = dump(server.port);
        assert_eq!(
            expected_data.string(0, "during"),
            Some("compaction"),
            "{what}"
        );
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        assert_info(
            &mut conn,
            "aof_last_bgrewrite_status",
            "ok",
            &format!("{what}: the next compaction"),
        );
        assert_info(&mut conn, "tessera_aof_base_parts", "2", what);
        server.halt();
        storage.power_loss(TornWrites::None);
        let restarted = InProcess::start(&storage, "");
        assert_same(
            &dump(restarted.port),
            &expected_data,
            &format!("{what}: after a power loss"),
        );
        restarted.halt();
    }
}

// ---------------------------------------------------------------------------------------
// SAVE and BGSAVE with the log off.

/// Sets the dataset to `generation`: a few hundred strings whose values name it, and values
/// of every type in three databases, with TTLs, a script's and a function's writes
/// (`workload::add_collections`), changed by `generation` rounds of writes that are not
/// idempotent (`workload::add_changes`): generations differ in every type.
fn write_generation(conn: &mut redis::Connection, generation: u32) {
    let mut pipe = redis::pipe();
    pipe.cmd("FLUSHALL").ignore();
    pipe.cmd("FUNCTION").arg("FLUSH").ignore();
    for i in 0..300 {
        pipe.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!(
                "generation {generation} value {i} {}",
                "z".repeat(i % 50)
            ))
            .ignore();
    }
    workload::add_collections(&mut pipe);
    for round in 1..=generation {
        workload::add_changes(&mut pipe, &format!("generation{generation}-round{round}"));
    }
    let _: () = pipe.query(conn).unwrap();
}

/// Which of the two generations a dump holds (for failure messages).
fn which_generation(data: &Dataset, old: &Dataset, new: &Dataset) -> &'static str {
    if data == old {
        "the old dataset"
    } else if data == new {
        "the new dataset"
    } else {
        "neither dataset"
    }
}

/// Files in the root of the simulated disk other than `dump.rdb`.
fn stray_files(storage: &SimulatedStorage) -> Vec<String> {
    storage
        .list_dir(Path::new(""))
        .unwrap()
        .into_iter()
        .filter(|name| name != "dump.rdb")
        .collect()
}

/// A crash at `step` of a SAVE or BGSAVE (with an older `dump.rdb` or none), then a power
/// loss: the restart has the old dataset before `dump-dir-synced`, the new one from it —
/// the dataset of the moment BGSAVE was called, though a round of writes changes every
/// type while its part is written.
fn dump_crash_run(command: &str, step: CrashPoint, with_previous: bool, torn: TornWrites) {
    let case = format!("{command}, crash at {step}, previous dump: {with_previous}, {torn:?}");
    let storage = SimulatedStorage::new();
    let settings = "appendonly no";
    let server = InProcess::start(&storage, settings);
    let mut conn = server.connection();
    let old = if with_previous {
        write_generation(&mut conn, 1);
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        dump(server.port)
    } else {
        Dataset::default()
    };
    write_generation(&mut conn, 2);
    let new = dump(server.port);
    // The step's next occurrence (the SAVE of the previous dump reached some of them).
    let at = step.nth(count_reached(&storage, step) + 1);
    storage.crash_at(at);
    if command == "SAVE" {
        let _: redis::RedisResult<()> = redis::cmd("SAVE").query(&mut conn);
    } else {
        bgsave_while_writing(&storage, &mut conn);
    }
    wait_for_checkpoint(&storage, at);
    server.halt();
    storage.power_loss(torn);
    assert_eq!(stray_files(&storage), Vec::<String>::new(), "{case}");
    let restarted = InProcess::start(&storage, settings);
    let expected = if step == CrashPoint::DumpDirSynced {
        &new
    } else {
        &old
    };
    let actual = dump(restarted.port);
    let found = which_generation(&actual, &old, &new);
    assert_same(&actual, expected, &format!("{case}: found {found}"));
    restarted.halt();
}

/// Runs a BGSAVE to its end, with a round of changes to every type made (and answered)
/// while its part thread is held at its first capture: values a capture shares are
/// changed in place only once it has them (ARCHITECTURE.md, "Serialise before write").
fn bgsave_while_writing(storage: &SimulatedStorage, conn: &mut redis::Connection) {
    let point = CrashPoint::SnapshotFirstCaptureTaken;
    let first_capture = point.nth(count_reached(storage, point) + 1);
    storage.pause_at(first_capture);
    let _: String = redis::cmd("BGSAVE").query(conn).unwrap();
    wait_for_checkpoint(storage, first_capture);
    let mut pipe = redis::pipe();
    workload::add_changes(&mut pipe, "during-bgsave");
    let _: () = pipe.query(conn).unwrap();
    storage.resume();
    wait_for_background_jobs(conn);
}

/// `dump_crash_run` at each checkpoint of `protocol`, with and without a previous dump and
/// torn writes.
fn crash_at_each_step(command: &str, protocol: Protocol, seed: u64) {
    for step in points_of(protocol) {
        for with_previous in [true, false] {
            for torn in [TornWrites::None, TornWrites::Seeded(seed)] {
                dump_crash_run(command, step, with_previous, torn);
            }
        }
    }
}

#[test]
fn a_crash_at_any_step_of_save_leaves_the_old_dump_or_the_new_one() {
    // The temp file written, after its fsync, then its installation.
    crash_at_each_step("SAVE", Protocol::Save, 5);
}

#[test]
fn a_crash_at_any_step_of_bgsave_leaves_the_old_dump_or_the_new_one() {
    // Writing the temp file, after its fsync, before its rename, then as SAVE.
    crash_at_each_step("BGSAVE", Protocol::Bgsave, 9);
}

/// SAVE reports a failure at each step and leaves no temp file; the old dump stays.
#[test]
fn a_failing_save_reports_the_error_and_removes_its_temp_file() {
    for (op, name) in [
        (FileOp::Create, "temp-"),
        (FileOp::Write, "temp-"),
        (FileOp::Sync, "temp-"),
        (FileOp::Rename, "temp-"),
    ] {
        let storage = SimulatedStorage::new();
        let server = InProcess::start(&storage, "appendonly no");
        let mut conn = server.connection();
        write_generation(&mut conn, 1);
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        let old = storage.read(Path::new("dump.rdb")).unwrap();
        write_generation(&mut conn, 2);
        storage.fail_file_op(op, name, Fault::NoSpace, 1);
        // Redis's reply to a failed SAVE is a bare `-ERR` (the reason goes to the log).
        let error = redis::cmd("SAVE")
            .query::<()>(&mut conn)
            .expect_err("SAVE must fail");
        assert_eq!(error.code(), Some("ERR"), "{op:?}: {error}");
        assert_eq!(stray_files(&storage), Vec::<String>::new(), "{op:?}");
        assert_eq!(storage.read(Path::new("dump.rdb")).unwrap(), old, "{op:?}");
        // BGSAVE the same way.
        storage.fail_file_op(op, "temp-bgsave", Fault::NoSpace, 1);
        let _: String = redis::cmd("BGSAVE").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        assert_info(
            &mut conn,
            "rdb_last_bgsave_status",
            "err",
            &format!("{op:?}"),
        );
        assert_eq!(stray_files(&storage), Vec::<String>::new(), "{op:?}");
        assert_eq!(storage.read(Path::new("dump.rdb")).unwrap(), old, "{op:?}");
        // And the next one succeeds.
        let _: () = redis::cmd("SAVE").query(&mut conn).unwrap();
        let expected = dump(server.port);
        server.halt();
        storage.power_loss(TornWrites::None);
        let restarted = InProcess::start(&storage, "appendonly no");
        assert_same(&dump(restarted.port), &expected, &format!("{op:?}"));
        restarted.halt();
    }
}
