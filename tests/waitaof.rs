//! WAITAOF numlocal numreplicas timeout (Redis 7.2's; the redis-server here is 7.0, which
//! lacks it, so its replies follow 7.2's documented behaviour): a Tessera master with a
//! Tessera replica, which acknowledges what its log fsynced (`REPLCONF ACK … FACK`), and
//! a redis-server 7.0 replica, which never does and so never counts; the errors, MULTI,
//! CLIENT UNBLOCK; and the durability claim: under kill -9 of the master and the replica,
//! and, for the local count, under a power loss on a simulated disk that keeps apart what
//! was written and what was fsynced.

mod common;

use common::replication::{Replica, start_master, wait_online};
use common::*;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn waitaof(conn: &mut redis::Connection, local: i64, replicas: i64, timeout_ms: i64) -> Vec<i64> {
    redis::cmd("WAITAOF")
        .arg(local)
        .arg(replicas)
        .arg(timeout_ms)
        .query(conn)
        .unwrap()
}

fn error_of(conn: &mut redis::Connection, args: &[&str]) -> String {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    match command.query::<redis::Value>(conn) {
        Err(error) => error.to_string(),
        Ok(value) => panic!("{args:?} answered {value:?}"),
    }
}

/// A Tessera replica of the server on `master_port`, its data in `dir`.
fn start_tessera_replica(dir: &std::path::Path, master_port: u16, args: &[&str]) -> TestServer {
    let port = master_port.to_string();
    let mut all = vec!["--replicaof", "127.0.0.1", &port];
    all.extend_from_slice(args);
    start_server(dir, &all)
}

#[test]
fn a_tessera_replica_counts_once_its_log_fsynced_and_a_redis_7_0_replica_never() {
    let dir = temp_dir();
    let master = start_master(dir.path(), &["--appendfsync", "everysec"]);
    let mut conn = master.connection();
    let replica_dir = temp_dir();
    let replica = start_tessera_replica(replica_dir.path(), master.port, &[]);
    let redis_replica = Replica::start(master.port);
    wait_online(&mut conn, 2);
    for policy in ["everysec", "always"] {
        for server in [&master, &replica] {
            run(
                &mut server.connection(),
                &["CONFIG", "SET", "appendfsync", policy],
            );
        }
        for n in 0..5 {
            run(&mut conn, &["SET", &format!("{policy}:{n}"), "v"]);
            // An `everysec` fsync within about a second on each side, and the replica's
            // FACK after it.
            assert_eq!(waitaof(&mut conn, 1, 1, 5000), [1, 1], "{policy}");
        }
        // WAIT counts both replicas; WAITAOF never the Redis 7.0 one, which sends no FACK.
        let acknowledged: i64 = redis::cmd("WAIT")
            .arg(2)
            .arg(5000)
            .query(&mut conn)
            .unwrap();
        assert_eq!(acknowledged, 2);
        let started = Instant::now();
        assert_eq!(waitaof(&mut conn, 1, 2, 300), [1, 1], "{policy}");
        assert!(started.elapsed() >= Duration::from_millis(290));
    }
    // A PUBLISH goes to the replicas' stream and to no log: covered by the replica's FACK
    // with the log bytes before it.
    let received: i64 = redis::cmd("PUBLISH")
        .arg("ch")
        .arg("m")
        .query(&mut conn)
        .unwrap();
    assert_eq!(received, 0);
    assert_eq!(waitaof(&mut conn, 1, 1, 5000), [1, 1]);
    // Nothing written by this connection: nothing to wait for, and every online replica
    // counts, the Redis 7.0 one too (Redis 7.2 compares its `repl_aof_off`, 0, with the
    // client's `woff`, 0).
    let mut fresh = master.connection();
    assert_eq!(waitaof(&mut fresh, 1, 1, 0), [1, 2]);
    // A replica with its log off sends no FACK either (Redis 7.2's `fsynced_reploff` is
    // -1 then): it never counts.
    let no_log_dir = temp_dir();
    let no_log = start_tessera_replica(no_log_dir.path(), master.port, &["--appendonly", "no"]);
    wait_online(&mut conn, 3);
    run(&mut conn, &["SET", "after-no-log", "v"]);
    assert_eq!(waitaof(&mut conn, 1, 2, 1500), [1, 1]);
    let acknowledged: i64 = redis::cmd("WAIT")
        .arg(3)
        .arg(5000)
        .query(&mut conn)
        .unwrap();
    assert_eq!(acknowledged, 3);
    drop((no_log, redis_replica, replica));
}

#[test]
fn with_only_a_redis_7_0_replica_waitaof_times_out_with_the_local_count() {
    let dir = temp_dir();
    let master = start_master(dir.path(), &["--appendfsync", "always"]);
    let mut conn = master.connection();
    let redis_replica = Replica::start(master.port);
    wait_online(&mut conn, 1);
    run(&mut conn, &["SET", "k", "v"]);
    let started = Instant::now();
    // Under `always` the SET's reply waited for its fsync: the local count is 1.
    assert_eq!(waitaof(&mut conn, 0, 1, 300), [1, 0]);
    // (Timed by the server's clock, in whole milliseconds.)
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(waitaof(&mut conn, 1, 0, 0), [1, 0]);

    // Inside MULTI nothing blocks: the counts as they are.
    let replies: Vec<redis::Value> = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("k")
        .arg("w")
        .cmd("WAITAOF")
        .arg(0)
        .arg(1)
        .arg(0)
        .query(&mut conn)
        .unwrap();
    assert_eq!(replies.len(), 2);
    let counts: Vec<i64> = redis::from_redis_value(replies[1].clone()).unwrap();
    assert_eq!(counts.len(), 2);
    assert_eq!(counts[1], 0);

    // Timeout 0 waits until CLIENT UNBLOCK, which answers the counts so far.
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
    let waiter = std::thread::spawn(move || waitaof(&mut conn, 1, 1, 0));
    let mut other = master.connection();
    let mut unblocked = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while unblocked == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        unblocked = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .query(&mut other)
            .unwrap();
    }
    assert_eq!(unblocked, 1);
    assert_eq!(waiter.join().unwrap(), [1, 0]);
    // CLIENT UNBLOCK ERROR: the error instead.
    let mut conn = master.connection();
    run(&mut conn, &["SET", "k", "x"]);
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut conn).unwrap();
    let waiter = std::thread::spawn(move || {
        redis::cmd("WAITAOF")
            .arg(0)
            .arg(1)
            .arg(0)
            .query::<Vec<i64>>(&mut conn)
            .unwrap_err()
            .to_string()
    });
    let mut unblocked = 0;
    while unblocked == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        unblocked = redis::cmd("CLIENT")
            .arg("UNBLOCK")
            .arg(id)
            .arg("ERROR")
            .query(&mut other)
            .unwrap();
    }
    let error = waiter.join().unwrap();
    assert!(
        error.contains("client unblocked via CLIENT UNBLOCK"),
        "{error}"
    );
    drop(redis_replica);
}

#[test]
fn waitaof_errors_are_redis_7_2_s() {
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let mut conn = master.connection();
    for (args, expected) in [
        (
            &["WAITAOF", "2", "0", "0"][..],
            "value is out of range, value must between 0 and 1",
        ),
        (
            &["WAITAOF", "x", "0", "0"],
            "value is not an integer or out of range",
        ),
        (
            &["WAITAOF", "0", "-1", "0"],
            "value is out of range, must be positive",
        ),
        (&["WAITAOF", "0", "0", "-1"], "timeout is negative"),
        (
            &["WAITAOF", "0", "0", "x"],
            "timeout is not an integer or out of range",
        ),
        (
            &["WAITAOF", "0", "0"],
            "wrong number of arguments for 'waitaof' command",
        ),
    ] {
        let error = error_of(&mut conn, args);
        assert!(error.contains(expected), "{args:?}: {error}");
    }
    let error = error_of(
        &mut conn,
        &["EVAL", "return redis.call('waitaof', 0, 0, 0)", "0"],
    );
    assert!(
        error.contains("This Redis command is not allowed from script"),
        "{error}"
    );

    // ACL checks it as WAIT, whose categories it has (it is not in Redis 7.0's table).
    run(
        &mut conn,
        &[
            "ACL", "SETUSER", "waiter", "on", ">p", "~*", "+set", "+wait",
        ],
    );
    run(
        &mut conn,
        &["ACL", "SETUSER", "writer", "on", ">p", "~*", "+set"],
    );
    let mut waiter = master.connection();
    run(&mut waiter, &["AUTH", "waiter", "p"]);
    assert_eq!(waitaof(&mut waiter, 1, 0, 0), [1, 0]);
    let mut writer = master.connection();
    run(&mut writer, &["AUTH", "writer", "p"]);
    let error = error_of(&mut writer, &["WAITAOF", "1", "0", "0"]);
    assert!(
        error.contains("no permissions to run the 'waitaof' command"),
        "{error}"
    );

    // With the log off, numlocal is refused, and the local count is 0.
    let off_dir = temp_dir();
    let off = start_server(off_dir.path(), &["--appendonly", "no"]);
    let mut off_conn = off.connection();
    run(&mut off_conn, &["SET", "k", "v"]);
    let error = error_of(&mut off_conn, &["WAITAOF", "1", "0", "0"]);
    assert!(
        error.contains("WAITAOF cannot be used when numlocal is set but appendonly is disabled."),
        "{error}"
    );
    assert_eq!(waitaof(&mut off_conn, 0, 0, 0), [0, 0]);

    // A replica refuses it (after reading the arguments, as Redis 7.2).
    let replica_dir = temp_dir();
    let replica = start_tessera_replica(replica_dir.path(), master.port, &[]);
    let mut replica_conn = replica.connection();
    let error = error_of(&mut replica_conn, &["WAITAOF", "0", "0", "0"]);
    assert!(
        error.contains(
            "WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated."
        ),
        "{error}"
    );
    let error = error_of(&mut replica_conn, &["WAITAOF", "5", "0", "0"]);
    assert!(error.contains("value must between 0 and 1"), "{error}");
}

/// What the writers were told: per key, the WAITAOF reply after its SET.
type Acknowledged = Arc<Mutex<BTreeMap<String, [i64; 2]>>>;

/// Each write is followed by WAITAOF 1 1; the master and the replica are killed with
/// SIGKILL while writers run. Restarted from their own directories, the replica has every
/// write WAITAOF said one replica fsynced, and the master every write it said it fsynced.
#[test]
fn writes_waitaof_acknowledged_survive_kill_9_of_master_and_replica() {
    let master_dir = temp_dir();
    let mut master = start_master(master_dir.path(), &["--appendfsync", "everysec"]);
    let replica_dir = temp_dir();
    let mut replica = start_tessera_replica(
        replica_dir.path(),
        master.port,
        &["--appendfsync", "everysec"],
    );
    let mut conn = master.connection();
    wait_online(&mut conn, 1);
    // One policy per side: `always` answers at once, `everysec` within about a second.
    run(&mut conn, &["CONFIG", "SET", "appendfsync", "always"]);

    let acknowledged: Acknowledged = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..6)
        .map(|writer| {
            let mut conn = master.connection();
            let acknowledged = acknowledged.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("w{writer}:{n}");
                    if redis::cmd("SET")
                        .arg(&key)
                        .arg(n)
                        .query::<()>(&mut conn)
                        .is_err()
                    {
                        return;
                    }
                    let reply = redis::cmd("WAITAOF")
                        .arg(1)
                        .arg(1)
                        .arg(3000)
                        .query::<Vec<i64>>(&mut conn);
                    match reply {
                        Ok(counts) => {
                            acknowledged
                                .lock()
                                .unwrap()
                                .insert(key, [counts[0], counts[1]]);
                        }
                        Err(_) => return,
                    }
                    n += 1;
                }
            })
        })
        .collect();
    // Killed while writes go on, once the replica has acknowledged twice the writes
    // checked below.
    wait_until(
        "12 writes acknowledged by the replica",
        Duration::from_secs(60),
        || {
            let acknowledged = acknowledged.lock().unwrap();
            acknowledged
                .values()
                .filter(|counts| counts[1] >= 1)
                .count()
                >= 12
        },
    );
    replica.kill9();
    master.kill9();
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let by_replica: Vec<&String> = acknowledged
        .iter()
        .filter(|(_, counts)| counts[1] >= 1)
        .map(|(key, _)| key)
        .collect();
    let by_master: Vec<&String> = acknowledged
        .iter()
        .filter(|(_, counts)| counts[0] == 1)
        .map(|(key, _)| key)
        .collect();
    eprintln!(
        "{} writes: {} acknowledged by the replica, {} locally",
        acknowledged.len(),
        by_replica.len(),
        by_master.len()
    );
    assert!(
        by_replica.len() >= 6,
        "too few writes acknowledged by the replica: {}",
        by_replica.len()
    );
    assert!(by_master.len() >= by_replica.len());

    // The replica alone, from its own directory (no master to sync from).
    let replica = start_server(replica_dir.path(), &[]);
    let mut replica_conn = replica.connection();
    wait_loaded(&mut replica_conn);
    let missing = missing_keys(&mut replica_conn, &by_replica);
    assert!(
        missing.is_empty(),
        "acknowledged as fsynced by a replica, missing there: {missing:?}"
    );

    let master = start_server(master_dir.path(), &[]);
    let mut master_conn = master.connection();
    wait_loaded(&mut master_conn);
    let missing = missing_keys(&mut master_conn, &by_master);
    assert!(
        missing.is_empty(),
        "acknowledged as fsynced locally, missing on the master: {missing:?}"
    );
}

/// The keys among `keys` the server does not hold.
fn missing_keys<'a, K: AsRef<str> + 'a>(
    conn: &mut redis::Connection,
    keys: impl IntoIterator<Item = &'a K>,
) -> Vec<String> {
    keys.into_iter()
        .map(|key| key.as_ref().to_string())
        .filter(|key| {
            redis::cmd("EXISTS")
                .arg(key)
                .query::<i64>(&mut *conn)
                .unwrap()
                == 0
        })
        .collect()
}

/// Waits until the server has loaded its data (it answers -LOADING meanwhile).
fn wait_loaded(conn: &mut redis::Connection) {
    wait_until("the data to load", Duration::from_secs(30), || {
        redis::cmd("DBSIZE").query::<i64>(conn).is_ok()
    });
}

/// A power loss, not only a process's death: a server on a simulated disk that keeps
/// apart what was written and what was fsynced, under `appendfsync everysec`. Writers
/// follow each SET with WAITAOF 1 0; the server is halted where it stands while they run
/// and every byte not fsynced is lost. Every write WAITAOF said was fsynced is there after
/// the restart (the replies of SET alone promise nothing of the kind under `everysec`).
#[test]
fn writes_waitaof_acknowledged_locally_survive_a_power_loss() {
    use common::in_process::{InProcess, restart_after_power_loss};
    use tessera::storage::{SimulatedStorage, TornWrites};

    let storage = SimulatedStorage::new();
    let server = InProcess::start(&storage, "appendfsync everysec");
    let acknowledged: Acknowledged = Arc::default();
    let writers: Vec<_> = (0..4)
        .map(|writer| {
            let mut conn = server.connection();
            let acknowledged = acknowledged.clone();
            std::thread::spawn(move || {
                for n in 0.. {
                    let key = format!("w{writer}:{n}");
                    if redis::cmd("SET")
                        .arg(&key)
                        .arg(n)
                        .query::<()>(&mut conn)
                        .is_err()
                    {
                        return;
                    }
                    // Every other write is followed by WAITAOF: the rest may be lost.
                    if n % 2 == 1 {
                        continue;
                    }
                    match redis::cmd("WAITAOF")
                        .arg(1)
                        .arg(0)
                        .arg(3000)
                        .query::<Vec<i64>>(&mut conn)
                    {
                        Ok(counts) => {
                            acknowledged
                                .lock()
                                .unwrap()
                                .insert(key, [counts[0], counts[1]]);
                        }
                        Err(_) => return,
                    }
                }
            })
        })
        .collect();
    // The power goes while writes go on, once twice the fsynced writes checked below
    // are acknowledged.
    wait_until(
        "8 writes acknowledged as fsynced",
        Duration::from_secs(60),
        || {
            let acknowledged = acknowledged.lock().unwrap();
            acknowledged
                .values()
                .filter(|counts| counts[0] == 1)
                .count()
                >= 8
        },
    );
    // The disk dies first: nothing the halt does reaches it.
    storage.crash_now();
    server.halt();
    for writer in writers {
        writer.join().unwrap();
    }
    let tears = storage.power_loss(TornWrites::None);
    let acknowledged = acknowledged.lock().unwrap().clone();
    let fsynced: Vec<&String> = acknowledged
        .iter()
        .filter(|(_, counts)| counts[0] == 1)
        .map(|(key, _)| key)
        .collect();
    assert!(
        fsynced.len() >= 4,
        "too few writes acknowledged as fsynced: {}",
        fsynced.len()
    );
    let (restarted, _) = restart_after_power_loss(&storage, &tears, "appendfsync everysec");
    let mut conn = restarted.connection();
    let missing = missing_keys(&mut conn, &fsynced);
    assert!(
        missing.is_empty(),
        "acknowledged as fsynced, lost with the power: {missing:?}"
    );
    restarted.halt();
}

/// A replica whose log could not take the master's snapshot as its base (on a simulated
/// disk: the rename of the received file fails, or the log writer's switch to a new
/// incremental file does) persists the dataset by a compaction instead, and counts for
/// WAITAOF again once that compaction succeeded: before, its FACK stayed at 0 until its
/// next full sync.
#[test]
fn a_replica_whose_log_base_switch_failed_counts_again_after_its_compaction() {
    use common::in_process::InProcess;
    use tessera::storage::{Fault, FileOp, SimulatedStorage};

    for (op, file) in [(FileOp::Rename, "temp-repl"), (FileOp::Create, ".incr.aof")] {
        let dir = temp_dir();
        let master = start_master(dir.path(), &["--appendfsync", "always"]);
        let mut conn = master.connection();
        run(&mut conn, &["SET", "before-sync", "1"]);
        let storage = SimulatedStorage::new();
        let replica = InProcess::start(&storage, "appendfsync always");
        let mut replica_conn = replica.connection();
        storage.fail_file_op(op, file, Fault::Io, 1);
        let port = master.port.to_string();
        run(&mut replica_conn, &["REPLICAOF", "127.0.0.1", &port]);
        wait_online(&mut conn, 1);
        run(&mut conn, &["SET", "after-sync", "1"]);
        assert_eq!(waitaof(&mut conn, 1, 1, 20_000), vec![1, 1], "{file}");
        let got: Option<String> = redis::cmd("GET")
            .arg("before-sync")
            .query(&mut replica_conn)
            .unwrap();
        assert_eq!(got.as_deref(), Some("1"), "{file}");
        // The compaction that persisted the master's dataset is what made it count.
        assert_eq!(
            info_field(&mut replica_conn, "aof_last_bgrewrite_status").as_deref(),
            Some("ok"),
            "{file}"
        );
        assert_ne!(
            info_field(&mut replica_conn, "aof_rewrites").as_deref(),
            Some("0"),
            "{file}"
        );
        replica.halt();
    }
}
