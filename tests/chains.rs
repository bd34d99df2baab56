//! Chains and PSYNC2 continuation (issue 17), with real processes: a Tessera replica
//! serving replicas of its own (its master's stream proxied as it came, the same
//! replication ID and offsets on every node), a sub-replica's cut link continued from the
//! middle node's backlog, and a promoted replica continuing its former siblings'
//! history (`+CONTINUE`), Tessera and redis-server in either role.

mod common;

use common::replication::*;
use common::{
    RedisOracle, TestServer, WHOLE_TEST, require_redis_or_skip, run, start_server, temp_dir,
};
use std::time::Duration;

fn replicaof(conn: &mut redis::Connection, port: u16) {
    assert_eq!(
        run(conn, &["REPLICAOF", "127.0.0.1", &port.to_string()]),
        redis::Value::Okay
    );
}

/// A redis-server master holding the shared dataset, and a connection to it.
fn populated_redis_master() -> (RedisOracle, tempfile::TempDir, redis::Connection) {
    let (master, dir) = redis_master(true);
    let mut source = master.connection();
    common::dataset::populate(&mut source, 0);
    populate_more(&mut source);
    (master, dir, source)
}

/// A Tessera told REPLICAOF `port`, its directory and a connection to it.
fn tessera_replica_of(port: u16) -> (TestServer, tempfile::TempDir, redis::Connection) {
    let dir = temp_dir();
    let tessera = start_server(dir.path(), &["--enable-debug-command", "yes"]);
    let mut conn = tessera.connection();
    replicaof(&mut conn, port);
    (tessera, dir, conn)
}

fn stat(conn: &mut redis::Connection, name: &str) -> u64 {
    field(&info(conn, "stats"), name)
        .unwrap_or_else(|| panic!("INFO stats has no {name}"))
        .parse()
        .unwrap()
}

/// Every node of the chain names the same history at the same offset.
fn assert_one_history(nodes: &mut [&mut redis::Connection]) {
    wait_until(
        "the same replication ID and offset on every node",
        Duration::from_secs(30),
        || {
            let seen: Vec<(Option<String>, Option<String>)> = nodes
                .iter_mut()
                .map(|conn| {
                    let text = info(conn, "replication");
                    (
                        field(&text, "master_replid"),
                        field(&text, "master_repl_offset"),
                    )
                })
                .collect();
            seen.iter().all(|s| s == &seen[0]) && seen[0].0.is_some()
        },
    );
}

/// Redis → Tessera → Redis: the sub-replica's full sync (taken while the master writes)
/// and the stream proxied through Tessera give one dataset and one history on all three;
/// the sub-replica's cut link continues from Tessera's backlog.
#[test]
fn a_redis_tessera_redis_chain_holds_one_history() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir, mut source) = populated_redis_master();

    let (tessera, _dir, mut middle) = tessera_replica_of(master.port);
    wait_link_up(&mut middle);

    // The sub-replica syncs while the master writes (in several databases).
    let mut loader = master.connection();
    let load = std::thread::spawn(move || write_load(&mut loader, "load", 80));
    let sub = Replica::start(tessera.port);
    load.join().unwrap();
    let mut end = sub.connection();
    wait_online(&mut middle, 1);
    write_load(&mut source, "after", 20);
    assert_same_dataset(&mut source, &mut middle);
    assert_same_dataset(&mut middle, &mut end);
    assert_same_dataset(&mut source, &mut end);
    assert_one_history(&mut [&mut source, &mut middle, &mut end]);
    // INFO and ROLE as a Redis replica with a replica of its own say them.
    let redis_middle = Replica::start(master.port);
    let mut theirs = redis_middle.connection();
    let _redis_end = Replica::start(redis_middle.redis.port);
    wait_online(&mut theirs, 1);
    wait_caught_up(&mut source, &mut theirs);
    let (text, _) = same_replication_fields(&mut middle, &mut theirs);
    assert_eq!(field(&text, "role").as_deref(), Some("slave"));
    assert_eq!(field(&text, "connected_slaves").as_deref(), Some("1"));
    assert!(
        field(&text, "slave0").is_some_and(|s| s.contains("state=online")),
        "{text}"
    );
    let role = |conn: &mut redis::Connection| -> Vec<redis::Value> {
        redis::cmd("ROLE").query(conn).unwrap()
    };
    let (ours_role, their_role) = (role(&mut middle), role(&mut theirs));
    assert_eq!(
        ours_role.len(),
        their_role.len(),
        "{ours_role:?} {their_role:?}"
    );
    assert_eq!(ours_role[0], their_role[0]);

    // The sub-replica's link cut: it continues from Tessera's backlog.
    let full = stat(&mut middle, "sync_full");
    let partial = stat(&mut middle, "sync_partial_ok");
    run(&mut middle, &["CLIENT", "KILL", "TYPE", "replica"]);
    write_load(&mut source, "cut", 10);
    wait_until(
        "the sub-replica to continue",
        Duration::from_secs(30),
        || stat(&mut middle, "sync_partial_ok") == partial + 1,
    );
    assert_eq!(stat(&mut middle, "sync_full"), full);
    write_load(&mut source, "continued", 10);
    assert_same_dataset(&mut source, &mut end);
    assert_one_history(&mut [&mut source, &mut middle, &mut end]);
}

/// Tessera → Tessera → Tessera with diskless syncs; a cut sub-replica continues; a full
/// resync of the middle node (its master's history replaced) makes the sub-replica
/// resync too.
#[test]
fn a_tessera_chain_with_diskless_syncs() {
    let dirs = [temp_dir(), temp_dir(), temp_dir()];
    let top = start_master(dirs[0].path(), &[]);
    let mid = start_master(dirs[1].path(), &[]);
    let low = start_master(dirs[2].path(), &[]);
    let (mut a, mut b, mut c) = (top.connection(), mid.connection(), low.connection());
    common::dataset::populate(&mut a, 0);
    populate_more(&mut a);
    replicaof(&mut b, top.port);
    wait_link_up(&mut b);
    replicaof(&mut c, mid.port);
    wait_link_up(&mut c);
    assert_eq!(
        stat(&mut b, "sync_full"),
        1,
        "the sub-replica's first sync is full"
    );
    write_load(&mut a, "load", 60);
    assert_same_dataset(&mut a, &mut b);
    assert_same_dataset(&mut b, &mut c);
    assert_one_history(&mut [&mut a, &mut b, &mut c]);

    let partial = stat(&mut b, "sync_partial_ok");
    run(&mut b, &["CLIENT", "KILL", "TYPE", "replica"]);
    write_load(&mut a, "cut", 10);
    wait_until(
        "the sub-replica to continue",
        Duration::from_secs(30),
        || stat(&mut b, "sync_partial_ok") == partial + 1,
    );
    assert_eq!(stat(&mut b, "sync_full"), 1);
    write_load(&mut a, "continued", 10);
    assert_same_dataset(&mut a, &mut c);
    assert_one_history(&mut [&mut a, &mut b, &mut c]);

    // The middle follows another master, of another history: its full sync replaces
    // the history its replica follows, which resyncs in full too.
    let other_dir = temp_dir();
    let other = start_master(other_dir.path(), &[]);
    let mut d = other.connection();
    populate_more(&mut d);
    replicaof(&mut b, other.port);
    wait_until(
        "the middle's new full sync",
        Duration::from_secs(30),
        || stat(&mut d, "sync_full") == 1,
    );
    wait_until(
        "the sub-replica's new full sync",
        Duration::from_secs(30),
        || stat(&mut b, "sync_full") == 2,
    );
    write_load(&mut d, "other", 10);
    assert_same_dataset(&mut d, &mut b);
    assert_same_dataset(&mut b, &mut c);
    assert_one_history(&mut [&mut d, &mut b, &mut c]);
}

/// The promoted node is a Tessera replica: after its master dies and REPLICAOF NO ONE, a
/// redis-server sibling that follows it continues (`+CONTINUE`), no full sync.
#[test]
fn a_promoted_tessera_continues_its_sibling() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir, mut source) = populated_redis_master();
    let (tessera, _dir, mut promoted) = tessera_replica_of(master.port);
    let sibling = Replica::start(master.port);
    let mut follower = sibling.connection();
    wait_link_up(&mut promoted);
    wait_online(&mut source, 2);
    write_load(&mut source, "load", 40);
    assert_same_dataset(&mut source, &mut promoted);
    assert_same_dataset(&mut source, &mut follower);
    let old_id = field(&info(&mut source, "replication"), "master_replid").unwrap();
    drop(source);
    drop(master);

    assert_eq!(
        run(&mut promoted, &["REPLICAOF", "NO", "ONE"]),
        redis::Value::Okay
    );
    let text = info(&mut promoted, "replication");
    assert_eq!(field(&text, "master_replid2"), Some(old_id));
    let full = stat(&mut promoted, "sync_full");
    replicaof(&mut follower, tessera.port);
    wait_link_up(&mut follower);
    wait_until("the sibling to continue", Duration::from_secs(30), || {
        stat(&mut promoted, "sync_partial_ok") == 1
    });
    assert_eq!(stat(&mut promoted, "sync_full"), full);
    assert!(
        sibling
            .log()
            .contains("Successful partial resynchronization")
    );
    write_load(&mut promoted, "promoted", 20);
    assert_same_dataset(&mut promoted, &mut follower);
    assert_one_history(&mut [&mut promoted, &mut follower]);
}

/// The promoted node is a redis-server replica: Tessera, its former sibling, follows it
/// and continues the history it followed (`+CONTINUE <new id>`).
#[test]
fn a_tessera_replica_continues_with_a_promoted_redis() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir, mut source) = populated_redis_master();
    let promoted = Replica::start(master.port);
    let mut new_master = promoted.connection();
    let (_tessera, _dir, mut follower) = tessera_replica_of(master.port);
    wait_link_up(&mut follower);
    wait_online(&mut source, 2);
    write_load(&mut source, "load", 40);
    assert_same_dataset(&mut source, &mut follower);
    assert_same_dataset(&mut source, &mut new_master);
    drop(source);
    drop(master);

    assert_eq!(
        run(&mut new_master, &["REPLICAOF", "NO", "ONE"]),
        redis::Value::Okay
    );
    let full = stat(&mut new_master, "sync_full");
    replicaof(&mut follower, promoted.redis.port);
    wait_link_up(&mut follower);
    wait_until("Tessera to continue", Duration::from_secs(30), || {
        stat(&mut new_master, "sync_partial_ok") == 1
    });
    assert_eq!(stat(&mut new_master, "sync_full"), full);
    let text = info(&mut follower, "replication");
    let theirs = info(&mut new_master, "replication");
    assert_eq!(
        field(&text, "master_replid"),
        field(&theirs, "master_replid")
    );
    write_load(&mut new_master, "promoted", 20);
    assert_same_dataset(&mut new_master, &mut follower);
    assert_one_history(&mut [&mut new_master, &mut follower]);
}

/// A Tessera master with a redis-server replica becomes the replica of another master:
/// it keeps its replica until its full sync replaces the history, then the replica
/// resyncs from it, and the chain has the new master's dataset and history.
#[test]
fn a_demoted_tessera_master_takes_its_replica_along() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let tessera = start_master(dir.path(), &[]);
    let mut middle = tessera.connection();
    common::dataset::populate(&mut middle, 0);
    populate_more(&mut middle);
    let sub = Replica::start(tessera.port);
    let mut end = sub.connection();
    wait_online(&mut middle, 1);
    write_load(&mut middle, "own", 10);
    assert_same_dataset(&mut middle, &mut end);

    let (master, _master_dir) = redis_master(true);
    let mut source = master.connection();
    populate_more(&mut source);
    write_load(&mut source, "theirs", 10);
    replicaof(&mut middle, master.port);
    wait_link_up(&mut middle);
    wait_until("the replica's resync", Duration::from_secs(30), || {
        stat(&mut middle, "sync_full") == 2
    });
    write_load(&mut source, "chained", 20);
    assert_same_dataset(&mut source, &mut middle);
    assert_same_dataset(&mut source, &mut end);
    assert_one_history(&mut [&mut source, &mut middle, &mut end]);
}
