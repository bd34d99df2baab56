//! FAILOVER (issue 17, slice 3) with real redis-server 7.0.15 processes: a Tessera master
//! hands its role to a Redis replica under a write load with no acknowledged write lost
//! and continues as its replica partially; writes held while it waits are refused as a
//! replica's once it switched; TIMEOUT, ABORT and FORCE; the argument errors, the
//! refusals during a failover and `master_failover_state` compared with a Redis master's;
//! a Tessera replica promoted by its Redis master's FAILOVER (`PSYNC … FAILOVER`), and
//! a failover between two Tessera instances.

mod common;

use common::raw_client::{Conn, V};
use common::replication::*;
use common::{RedisOracle, WHOLE_TEST, require_redis_or_skip, run, start_server, temp_dir};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn state(conn: &mut redis::Connection) -> String {
    field(&info(conn, "replication"), "master_failover_state").unwrap()
}

fn wait_state(conn: &mut redis::Connection, wanted: &str) {
    wait_until(
        &format!("master_failover_state:{wanted}"),
        Duration::from_secs(30),
        || state(conn) == wanted,
    );
}

/// `conn`'s server is a replica of `port`, its link up.
fn wait_replica_of(conn: &mut redis::Connection, port: u16) {
    wait_until(
        &format!("a replica of port {port} with its link up"),
        Duration::from_secs(30),
        || {
            let text = info(conn, "replication");
            field(&text, "role").as_deref() == Some("slave")
                && field(&text, "master_port") == Some(port.to_string())
                && field(&text, "master_link_status").as_deref() == Some("up")
        },
    );
}

fn role(conn: &mut redis::Connection) -> String {
    field(&info(conn, "replication"), "role").unwrap()
}

/// The whole path under load: every write acknowledged before the switch is on the new
/// master, Tessera follows it with a partial resync, and the datasets agree.
#[test]
fn failover_under_a_write_load_loses_no_acknowledged_write() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let mut conn = master.connection();
    common::dataset::populate(&mut conn, 0);
    populate_more(&mut conn);
    let replica = Replica::start(master.port);
    wait_online(&mut conn, 1);

    // A writer that records each write acknowledged, until it is refused.
    let keys_before = common::dbsize(&mut conn);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let mut writer_conn = master.connection();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut acknowledged = Vec::new();
            let mut refusal = None;
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let reply: redis::RedisResult<String> = redis::cmd("SET")
                    .arg(format!("load:{i}"))
                    .arg(i)
                    .query(&mut writer_conn);
                match reply {
                    Ok(_) => acknowledged.push(i),
                    Err(error) => {
                        refusal = Some(error.to_string());
                        break;
                    }
                }
            }
            (acknowledged, refusal)
        })
    };
    // The failover starts under the load, once writes are acknowledged.
    wait_until("the writer's first writes", Duration::from_secs(30), || {
        common::dbsize(&mut conn) > keys_before + 20
    });
    assert_eq!(run(&mut conn, &["FAILOVER"]), redis::Value::Okay);
    let mut replica_conn = replica.connection();
    wait_until(
        "the replica to be a master",
        Duration::from_secs(30),
        || role(&mut replica_conn) == "master",
    );
    wait_replica_of(&mut conn, replica.redis.port);
    wait_state(&mut conn, "no-failover");
    stop.store(true, Ordering::Relaxed);
    let (acknowledged, refusal) = writer.join().unwrap();
    assert!(acknowledged.len() > 10, "{} writes", acknowledged.len());
    // The write held at the switch is refused as a replica refuses writes.
    let refusal = refusal.expect("the writer was refused once Tessera was a replica");
    assert!(
        refusal.contains("You can't write against a read only replica"),
        "{refusal}"
    );

    for chunk in acknowledged.chunks(500) {
        let keys: Vec<String> = chunk.iter().map(|i| format!("load:{i}")).collect();
        let values: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&keys)
            .query(&mut replica_conn)
            .unwrap();
        for (i, value) in chunk.iter().zip(values) {
            assert_eq!(value, Some(i.to_string()), "load:{i} lost");
        }
    }
    // Tessera continued the history from the new master's backlog: no full sync.
    let log = replica.log();
    assert!(
        log.contains("MASTER MODE enabled (failover request"),
        "replica log:\n{log}"
    );
    assert_eq!(
        field(&info(&mut replica_conn, "stats"), "sync_partial_ok").as_deref(),
        Some("1")
    );
    assert_eq!(
        field(&info(&mut replica_conn, "stats"), "sync_full").as_deref(),
        Some("0")
    );
    // The stream flows the other way now.
    write_load(&mut replica_conn, "after-failover", 20);
    wait_caught_up(&mut replica_conn, &mut conn);
    assert_same_dataset(&mut replica_conn, &mut conn);
    let ours = info(&mut conn, "replication");
    let theirs = info(&mut replica_conn, "replication");
    // Tessera's old history is the second ID of both.
    assert_eq!(
        field(&ours, "master_replid"),
        field(&theirs, "master_replid")
    );
    assert_eq!(
        field(&ours, "master_replid2"),
        field(&theirs, "master_replid2")
    );
}

/// Writes held while the target has not caught up (it is stopped) wait, then are refused
/// as a replica's once the master switched; reads go on meanwhile.
#[test]
fn held_writes_wait_for_the_switch_then_are_refused_as_a_replica_s() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let mut conn = master.connection();
    let replica = Replica::start(master.port);
    wait_online(&mut conn, 1);
    run(&mut conn, &["SET", "before", "1"]);
    wait_caught_up(&mut conn, &mut replica.connection());
    replica.signal("STOP");
    run(&mut conn, &["SET", "unacknowledged", "1"]);
    let port = replica.redis.port.to_string();
    assert_eq!(
        run(&mut conn, &["FAILOVER", "TO", "127.0.0.1", &port]),
        redis::Value::Okay
    );
    assert_eq!(state(&mut conn), "waiting-for-sync");
    let mut writer = Conn::new(master.port);
    writer.send(&[b"SET", b"held", b"1"]);
    let mut reader = Conn::new(master.port);
    assert_eq!(reader.cmd(&["GET", "before"]), V::Bulk(Some(b"1".to_vec())));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(state(&mut conn), "waiting-for-sync");
    assert_eq!(
        common::info_field(&mut conn, "blocked_clients").as_deref(),
        Some("1")
    );
    replica.signal("CONT");
    assert_eq!(
        writer.read(),
        V::Error("READONLY You can't write against a read only replica.".into())
    );
    wait_replica_of(&mut conn, replica.redis.port);
    assert_eq!(state(&mut conn), "no-failover");
    let mut replica_conn = replica.connection();
    assert_eq!(role(&mut replica_conn), "master");
    let value: Option<String> = redis::cmd("GET")
        .arg("unacknowledged")
        .query(&mut replica_conn)
        .unwrap();
    assert_eq!(value.as_deref(), Some("1"));
}

/// TIMEOUT without FORCE gives up, ABORT gives up at once (held writes then run), and
/// FORCE fails over at the timeout to a target that had not caught up.
#[test]
fn timeout_abort_and_force() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let mut conn = master.connection();
    let replica = Replica::start(master.port);
    wait_online(&mut conn, 1);
    wait_caught_up(&mut conn, &mut replica.connection());
    replica.signal("STOP");
    run(&mut conn, &["SET", "k", "1"]);

    // TIMEOUT: the replica never catches up; the held write runs after the abort.
    assert_eq!(
        run(&mut conn, &["FAILOVER", "TIMEOUT", "300"]),
        redis::Value::Okay
    );
    let mut writer = Conn::new(master.port);
    writer.send(&[b"INCR", b"k"]);
    wait_state(&mut conn, "no-failover");
    assert_eq!(writer.read(), V::Int(2));
    // The server's log reaches its file through the test's relay thread: wait for it.
    wait_until("the abort in the log", Duration::from_secs(10), || {
        master
            .log()
            .contains("aborted: Replica never caught up before timeout")
    });
    assert_eq!(role(&mut conn), "master");

    // ABORT; CLIENT UNPAUSE does not lift the failover's hold (another purpose of the
    // pause, as in Redis).
    assert_eq!(run(&mut conn, &["FAILOVER"]), redis::Value::Okay);
    writer.send(&[b"INCR", b"k"]);
    assert_eq!(run(&mut conn, &["CLIENT", "UNPAUSE"]), redis::Value::Okay);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(state(&mut conn), "waiting-for-sync");
    assert_eq!(
        common::info_field(&mut conn, "blocked_clients").as_deref(),
        Some("1")
    );
    assert_eq!(run(&mut conn, &["FAILOVER", "ABORT"]), redis::Value::Okay);
    assert_eq!(writer.read(), V::Int(3));
    assert_eq!(state(&mut conn), "no-failover");

    // FORCE: at the timeout Tessera becomes the stopped replica's replica, and the
    // failover stays in progress until the target answers its PSYNC.
    let port = replica.redis.port.to_string();
    assert_eq!(
        run(
            &mut conn,
            &[
                "FAILOVER",
                "TO",
                "127.0.0.1",
                &port,
                "FORCE",
                "TIMEOUT",
                "200"
            ]
        ),
        redis::Value::Okay
    );
    wait_state(&mut conn, "failover-in-progress");
    assert_eq!(role(&mut conn), "slave");
    replica.signal("CONT");
    wait_replica_of(&mut conn, replica.redis.port);
    wait_state(&mut conn, "no-failover");
    let mut replica_conn = replica.connection();
    assert_eq!(role(&mut replica_conn), "master");
    wait_caught_up(&mut replica_conn, &mut conn);
    assert_same_dataset(&mut replica_conn, &mut conn);
}

/// The argument errors, the preconditions and the refusals during a failover, as a
/// Redis master answers them, reply for reply.
#[test]
fn errors_and_states_are_redis_s() {
    let dir = temp_dir();
    let tessera = start_master(dir.path(), &[]);
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis_master = RedisOracle::start(&redis_binary);
    let mut ours = Conn::new(tessera.port);
    let mut theirs = Conn::new(redis_master.port);
    let mut differences = Vec::new();
    let mut compare = |ours: &mut Conn, theirs: &mut Conn, lines: &[&str]| {
        for line in lines {
            let words: Vec<&str> = line.split(' ').collect();
            let a = ours.cmd(&words);
            let b = theirs.cmd(&words);
            if a != b {
                differences.push(format!("{line}\n  tessera: {a:?}\n  redis:   {b:?}"));
            }
        }
    };
    // No replicas yet.
    compare(
        &mut ours,
        &mut theirs,
        &[
            "FAILOVER",
            "FAILOVER TIMEOUT 10",
            "FAILOVER ABORT",
            "FAILOVER abort",
        ],
    );
    let our_replica = Replica::start(tessera.port);
    let their_replica = Replica::start(redis_master.port);
    wait_online(&mut tessera.connection(), 1);
    wait_online(&mut redis_master.connection(), 1);
    let our_port = our_replica.redis.port.to_string();
    let their_port = their_replica.redis.port.to_string();
    let lines = [
        "FAILOVER bogus",
        "FAILOVER TIMEOUT",
        "FAILOVER TIMEOUT 0",
        "FAILOVER TIMEOUT -5",
        "FAILOVER TIMEOUT x",
        "FAILOVER TIMEOUT 5 TIMEOUT 6",
        "FAILOVER TO 127.0.0.1",
        "FAILOVER TO 127.0.0.1 x",
        "FAILOVER TO 127.0.0.1 1",
        "FAILOVER TO 127.0.0.1 1 TO 127.0.0.1 2",
        "FAILOVER TO 127.0.0.2 99999999999",
        "FAILOVER FORCE",
        "FAILOVER FORCE FORCE",
        "FAILOVER FORCE TIMEOUT 100",
        "FAILOVER TO 127.0.0.1 1 FORCE",
        "FAILOVER ABORT TIMEOUT 5",
        "FAILOVER TIMEOUT 5 ABORT",
        "FAILOVER ABORT ABORT",
    ];
    compare(&mut ours, &mut theirs, &lines);
    // The replica's own port, each on its side: FORCE without a timeout.
    let a = ours.cmd(&["FAILOVER", "TO", "127.0.0.1", &our_port, "FORCE"]);
    let b = theirs.cmd(&["FAILOVER", "TO", "127.0.0.1", &their_port, "FORCE"]);
    assert_eq!(a, b);
    // During a failover (the replicas stopped, so it waits).
    our_replica.signal("STOP");
    their_replica.signal("STOP");
    compare(
        &mut ours,
        &mut theirs,
        &[
            "FAILOVER TIMEOUT 60000",
            "FAILOVER",
            "FAILOVER TIMEOUT 10",
            "REPLICAOF no one",
            "REPLICAOF 127.0.0.1 1",
            "PSYNC ? -1",
            "SYNC",
        ],
    );
    assert_eq!(
        state(&mut tessera.connection()),
        state(&mut redis_master.connection())
    );
    compare(
        &mut ours,
        &mut theirs,
        &["FAILOVER ABORT", "FAILOVER ABORT", "PSYNC a 1 FAILOVER"],
    );
    assert_eq!(
        state(&mut tessera.connection()),
        state(&mut redis_master.connection())
    );
    our_replica.signal("CONT");
    their_replica.signal("CONT");
    // On a replica.
    compare(
        &mut ours,
        &mut theirs,
        &["REPLICAOF 127.0.0.1 1", "FAILOVER", "FAILOVER ABORT"],
    );
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// A Tessera replica whose Redis master fails over to it takes the master's role when
/// the master's PSYNC says FAILOVER, and the Redis master becomes its replica.
#[test]
fn a_tessera_replica_promotes_itself_on_its_redis_master_s_failover() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis_dir = temp_dir();
    let redis_master = RedisOracle::start_with(
        &redis_binary,
        redis_dir.path(),
        &["--enable-debug-command", "yes"],
    );
    let mut master_conn = redis_master.connection();
    common::dataset::populate(&mut master_conn, 0);
    populate_more(&mut master_conn);
    let dir = temp_dir();
    let port = redis_master.port.to_string();
    let tessera = start_server(
        dir.path(),
        &[
            "--replicaof",
            "127.0.0.1",
            &port,
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut conn = tessera.connection();
    wait_online(&mut master_conn, 1);
    wait_caught_up(&mut master_conn, &mut conn);
    assert_eq!(run(&mut master_conn, &["FAILOVER"]), redis::Value::Okay);
    wait_until("Tessera to be a master", Duration::from_secs(30), || {
        role(&mut conn) == "master"
    });
    wait_replica_of(&mut master_conn, tessera.port);
    wait_state(&mut master_conn, "no-failover");
    wait_until("the promotion in the log", Duration::from_secs(10), || {
        tessera
            .log()
            .contains("MASTER MODE enabled (failover request")
    });
    write_load(&mut conn, "after-failover", 20);
    wait_caught_up(&mut conn, &mut master_conn);
    assert_same_dataset(&mut conn, &mut master_conn);
}

/// Both sides Tessera: the master's PSYNC FAILOVER promotes its Tessera replica, which
/// keeps no backlog of its master's stream and so serves the old master a full sync.
#[test]
fn a_tessera_master_fails_over_to_a_tessera_replica() {
    let master_dir = temp_dir();
    let master = start_master(master_dir.path(), &[]);
    let mut master_conn = master.connection();
    common::dataset::populate(&mut master_conn, 0);
    populate_more(&mut master_conn);
    let replica_dir = temp_dir();
    let port = master.port.to_string();
    let replica = start_master(replica_dir.path(), &["--replicaof", "127.0.0.1", &port]);
    let mut replica_conn = replica.connection();
    wait_online(&mut master_conn, 1);
    wait_caught_up(&mut master_conn, &mut replica_conn);
    run(&mut master_conn, &["SET", "last", "before-failover"]);
    assert_eq!(run(&mut master_conn, &["FAILOVER"]), redis::Value::Okay);
    wait_until(
        "the replica to be a master",
        Duration::from_secs(30),
        || role(&mut replica_conn) == "master",
    );
    wait_replica_of(&mut master_conn, replica.port);
    wait_state(&mut master_conn, "no-failover");
    // The promoted replica kept the stream's backlog (chains): the old master continues.
    assert_eq!(
        common::info_fields(&mut replica_conn, &["sync_partial_ok", "sync_full"]),
        [Some("1".to_string()), Some("0".to_string())]
    );
    let last: Option<String> = redis::cmd("GET")
        .arg("last")
        .query(&mut replica_conn)
        .unwrap();
    assert_eq!(last.as_deref(), Some("before-failover"));
    write_load(&mut replica_conn, "after-failover", 20);
    wait_caught_up(&mut replica_conn, &mut master_conn);
    assert_same_dataset(&mut replica_conn, &mut master_conn);
}
