//! Tessera as the replica of a real redis-server 7.0 master (issue 17, slice 2): REPLICAOF
//! and `replicaof`, the handshake, the master's snapshot (diskless `$EOF:` and disk
//! `$<len>`), the stream applied as the master's, acknowledgements (WAIT on the master
//! counts Tessera), a partial resync after the link is cut, the replica's own log (a
//! restart loads the master's dataset), a read-only replica's refusals, REPLICAOF NO ONE,
//! and ROLE / INFO compared with a Redis replica's; a writable replica's expiry and the
//! errors a replica's master's commands get, beside a Redis replica of the same master.

mod common;

use common::raw_client::{Conn, V};
use common::replication::*;
use common::{
    RedisOracle, WHOLE_TEST, info_field, require_redis_or_skip, run, start_server, temp_dir,
};
use std::time::Duration;

/// The dataset a Redis master replicates to Tessera, through a full sync (diskless or
/// not), the stream, a cut link (a partial resync), and into Tessera's own log.
#[test]
fn tessera_replicates_a_redis_master_into_its_own_log() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    for diskless in [true, false] {
        let (master, _master_dir) = redis_master(diskless);
        let mut source = master.connection();
        common::dataset::populate(&mut source, 0);
        populate_more(&mut source);

        let dir = temp_dir();
        let mut tessera = start_server(dir.path(), &["--enable-debug-command", "yes"]);
        let mut replica = tessera.connection();
        // The log's last record is in database 2: the new file after the master's
        // snapshot must still say which database its first record is for.
        run(&mut replica, &["SELECT", "2"]);
        run(&mut replica, &["SET", "local-only", "1"]);
        run(&mut replica, &["SELECT", "0"]);
        let port = master.port.to_string();
        assert_eq!(
            run(&mut replica, &["REPLICAOF", "127.0.0.1", &port]),
            redis::Value::Okay
        );
        wait_link_up(&mut replica);
        run(&mut source, &["SELECT", "2"]);
        run(&mut source, &["SET", "first-after-sync", "in db 2"]);
        run(&mut source, &["SELECT", "0"]);
        write_load(&mut source, "stream", 60);
        assert_same_dataset(&mut source, &mut replica);
        let gone: redis::Value = redis::cmd("EXISTS")
            .arg("local-only")
            .query(&mut replica)
            .unwrap();
        assert_eq!(
            gone,
            redis::Value::Int(0),
            "a full sync replaces the dataset"
        );
        // The master counts Tessera's acknowledgements.
        assert_eq!(
            run(&mut source, &["WAIT", "1", "5000"]),
            redis::Value::Int(1)
        );

        // Cut the link: Tessera continues from the master's backlog.
        assert_eq!(
            run(&mut replica, &["CLIENT", "KILL", "TYPE", "master"]),
            redis::Value::Int(1)
        );
        write_load(&mut source, "after-kill", 20);
        wait_until("a partial resync", Duration::from_secs(30), || {
            info_field(&mut source, "sync_partial_ok").as_deref() == Some("1")
        });
        wait_link_up(&mut replica);
        assert_same_dataset(&mut source, &mut replica);
        assert!(
            tessera
                .log()
                .contains("Successful partial resynchronization with master"),
            "{}",
            tessera.log()
        );

        // Tessera's log holds what it replicated: a restart (as a master: REPLICAOF was
        // not written to a config file) loads the master's dataset.
        let expected = digest(&mut source);
        tessera.shutdown();
        let restarted = start_server(dir.path(), &["--enable-debug-command", "yes"]);
        let mut conn = restarted.connection();
        assert_eq!(digest(&mut conn), expected, "diskless: {diskless}");
    }
}

/// A Tessera replica and a Redis replica of the same master answer alike: INFO's fields,
/// ROLE, a read-only replica's refusals, REPLICAOF again, CLIENT LIST's master link; then
/// REPLICAOF NO ONE promotes both with the same second replication ID and offset.
#[test]
fn a_tessera_replica_answers_as_a_redis_replica() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir) = redis_master(true);
    let mut source = master.connection();
    run(&mut source, &["SET", "k", "v"]);
    let ours_dir = temp_dir();
    let ours = start_server(ours_dir.path(), &[]);
    let mut tessera = ours.connection();
    let port = master.port.to_string();
    run(&mut tessera, &["REPLICAOF", "127.0.0.1", &port]);
    let theirs = Replica::start(master.port);
    let mut redis = theirs.connection();
    wait_link_up(&mut tessera);
    wait_link_up(&mut redis);
    run(&mut source, &["SET", "k", "v2"]);
    wait_caught_up(&mut source, &mut tessera);
    wait_caught_up(&mut source, &mut redis);

    let (ours_info, theirs_info) = same_replication_fields(&mut tessera, &mut redis);
    for name in ["master_replid", "master_repl_offset", "slave_repl_offset"] {
        assert_eq!(field(&ours_info, name), field(&theirs_info, name), "{name}");
    }

    let mut ours_raw = Conn::new(ours.port);
    let mut theirs_raw = Conn::new(theirs.redis.port);
    let lines = [
        "ROLE",
        "SET k mine",
        "GET k",
        "INCR counter",
        "WAIT 1 0",
        "EVAL #!lua\nreturn redis.call('SET','k','x') 0",
        "EVAL return redis.call('GET','k') 0",
        &format!("REPLICAOF 127.0.0.1 {port}"),
        "REPLICAOF 127.0.0.1 notaport",
        "PSYNC ? -1",
    ];
    let mut differences = Vec::new();
    for line in lines {
        let words: Vec<String> = match line.strip_prefix("EVAL ") {
            Some(rest) => {
                let (script, numkeys) = rest.rsplit_once(' ').unwrap();
                vec!["EVAL".into(), script.into(), numkeys.into()]
            }
            None => line.split(' ').map(str::to_string).collect(),
        };
        if line.starts_with("PSYNC") {
            // A replica serves replicas of its own (a chain), its master's history: on
            // connections of their own, as they become replicas.
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            let a = Conn::new(ours.port).cmd(&words);
            let b = Conn::new(theirs.redis.port).cmd(&words);
            let history = |v: &V| match v {
                V::Simple(s) if s.starts_with("FULLRESYNC ") => {
                    s.split(' ').nth(1).map(str::to_string)
                }
                _ => None,
            };
            assert!(
                history(&a).is_some() && history(&a) == history(&b),
                "{a:?} {b:?}"
            );
            continue;
        }
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let a = ours_raw.cmd(&words);
        let b = theirs_raw.cmd(&words);
        if a != b {
            differences.push(format!("{line}\n  tessera: {a:?}\n  redis:   {b:?}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    let links = ours_raw.cmd(&["CLIENT", "LIST", "TYPE", "master"]).text();
    assert_eq!(links.lines().count(), 1, "{links}");
    assert!(links.contains(" flags=M "), "{links}");

    // Promotion: the history goes on under a new ID; the master's is the second one,
    // valid up to the offset both processed.
    assert_eq!(
        ours_raw.cmd(&["REPLICAOF", "NO", "ONE"]),
        V::Simple("OK".into())
    );
    assert_eq!(
        theirs_raw.cmd(&["REPLICAOF", "NO", "ONE"]),
        V::Simple("OK".into())
    );
    let ours_info = info(&mut tessera, "replication");
    let theirs_info = info(&mut redis, "replication");
    assert_eq!(field(&ours_info, "role").as_deref(), Some("master"));
    for name in ["master_replid2", "second_repl_offset"] {
        assert_eq!(field(&ours_info, name), field(&theirs_info, name), "{name}");
    }
    assert_ne!(
        field(&ours_info, "master_replid"),
        field(&ours_info, "master_replid2")
    );
    assert_eq!(
        run(&mut tessera, &["SET", "k", "promoted"]),
        redis::Value::Okay
    );
}

/// `replicaof` in the configuration makes a replica from the start; REPLICAOF changes
/// what CONFIG GET (and so CONFIG REWRITE) says.
#[test]
fn replicaof_in_the_configuration_starts_a_replica() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir) = redis_master(false);
    let mut source = master.connection();
    run(&mut source, &["SET", "from-master", "yes"]);
    let port = master.port.to_string();
    let dir = temp_dir();
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
    let mut replica = tessera.connection();
    wait_link_up(&mut replica);
    assert_same_dataset(&mut source, &mut replica);
    let configured = |conn: &mut redis::Connection| -> String {
        let pair: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("replicaof")
            .query(conn)
            .unwrap();
        pair[1].clone()
    };
    assert_eq!(configured(&mut replica), format!("127.0.0.1 {port}"));
    run(&mut replica, &["REPLICAOF", "NO", "ONE"]);
    assert_eq!(configured(&mut replica), "");
}

/// A master that wants a password (`masterauth`); and while the link is down, a replica
/// with `replica-serve-stale-data no` answers MASTERDOWN but to `stale` commands.
#[test]
fn masterauth_and_stale_data() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let master_dir = temp_dir();
    let master = RedisOracle::start_with(
        &binary,
        master_dir.path(),
        &[
            "--requirepass",
            "secret",
            "--repl-diskless-sync-delay",
            "0",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut source = redis::Client::open(format!("redis://:secret@127.0.0.1:{}/", master.port))
        .unwrap()
        .get_connection()
        .unwrap();
    run(&mut source, &["SET", "guarded", "1"]);
    let port = master.port.to_string();
    let dir = temp_dir();
    let tessera = start_server(
        dir.path(),
        &[
            "--replicaof",
            "127.0.0.1",
            &port,
            "--masterauth",
            "secret",
            "--replica-serve-stale-data",
            "no",
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut replica = tessera.connection();
    wait_link_up(&mut replica);
    assert_same_dataset(&mut source, &mut replica);

    // The master goes away: stale data is not served.
    drop(source);
    drop(master);
    wait_until("the link to go down", Duration::from_secs(30), || {
        field(&info(&mut replica, "replication"), "master_link_status").as_deref() == Some("down")
    });
    let mut raw = Conn::new(tessera.port);
    assert_eq!(
        raw.cmd(&["GET", "guarded"]),
        V::Error(
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."
                .into()
        )
    );
    assert!(matches!(
        raw.cmd(&["INFO", "replication"]),
        V::Bulk(Some(_))
    ));
}

/// A master's transaction larger than the replica's `client-query-buffer-limit` (here a
/// script's effects, which Redis sends as one MULTI … EXEC block) applies whole: the
/// bound is for clients, not for the master (Redis bounds neither its master's query
/// buffer nor its transactions).
#[test]
fn a_master_transaction_past_the_query_buffer_limit_applies_whole() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir) = redis_master(true);
    let mut source = master.connection();
    let dir = temp_dir();
    let tessera = start_server(
        dir.path(),
        &[
            "--enable-debug-command",
            "yes",
            "--client-query-buffer-limit",
            "1mb",
        ],
    );
    let mut replica = tessera.connection();
    let port = master.port.to_string();
    run(&mut replica, &["REPLICAOF", "127.0.0.1", &port]);
    wait_link_up(&mut replica);
    // 300 keys of 8 KB in one script: 2.4 MB in one block.
    let script = "for i = 1, 300 do redis.call('SET', 'k' .. i, string.rep('x', 8192)) end";
    run(&mut source, &["EVAL", script, "0"]);
    run(&mut source, &["SET", "after", "1"]);
    wait_caught_up(&mut source, &mut replica);
    assert_same_dataset(&mut source, &mut replica);
}

/// Two role changes in one turn of the event loop (here in one MULTI): the second is
/// refused (the turn's records are split between the stream and the log once, at the
/// change), and goes through when sent again.
#[test]
fn a_second_role_change_in_one_turn_is_refused() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir) = redis_master(true);
    let dir = temp_dir();
    let tessera = start_server(dir.path(), &[]);
    let mut conn = Conn::new(tessera.port);
    let port = master.port.to_string();
    conn.cmd(&["MULTI"]);
    conn.cmd(&["SET", "k", "v"]);
    conn.cmd(&["REPLICAOF", "127.0.0.1", &port]);
    conn.cmd(&["REPLICAOF", "NO", "ONE"]);
    let V::Array(replies) = conn.cmd(&["EXEC"]) else {
        panic!("EXEC answers an array");
    };
    assert_eq!(replies[1], V::Simple("OK".into()));
    assert!(
        matches!(&replies[2], V::Error(e) if e.contains("role already changed")),
        "{replies:?}"
    );
    assert_eq!(
        conn.cmd(&["REPLICAOF", "NO", "ONE"]),
        V::Simple("OK".into())
    );
    let role = conn.cmd(&["ROLE"]).items();
    assert_eq!(role.first().map(V::text).as_deref(), Some("master"));
}

/// A replica whose compaction or BGSAVE is running when its master's snapshot arrives
/// stops the job (Redis's replica kills its child there) instead of running it to its
/// end with the event loop held: with a job slowed to minutes, the sync must finish in
/// well under that, the job counted neither failed nor running, and the replica's log,
/// restarted, must hold the master's dataset.
#[test]
fn a_full_sync_stops_the_replicas_running_job() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir) = redis_master(true);
    let mut source = master.connection();
    common::dataset::populate(&mut source, 0);
    for job in ["BGREWRITEAOF", "BGSAVE"] {
        let dir = temp_dir();
        // 2,000 keys at 50 ms each: the job would run for 100 s.
        let mut tessera = start_server(
            dir.path(),
            &[
                "--rdb-key-save-delay",
                "50000",
                "--aof-rewrite-threads",
                "1",
                "--enable-debug-command",
                "yes",
            ],
        );
        let mut replica = tessera.connection();
        for i in 0..2000 {
            run(&mut replica, &["SET", &format!("local:{i}"), "x"]);
        }
        run(&mut replica, &[job]);
        let in_progress = if job == "BGSAVE" {
            "rdb_bgsave_in_progress"
        } else {
            "aof_rewrite_in_progress"
        };
        assert_eq!(info_field(&mut replica, in_progress).as_deref(), Some("1"));
        let port = master.port.to_string();
        run(&mut replica, &["REPLICAOF", "127.0.0.1", &port]);
        // Far less than the job's 100 s.
        wait_until("the full sync", Duration::from_secs(30), || {
            info_field(&mut replica, "master_link_status").as_deref() == Some("up")
        });
        assert_eq!(info_field(&mut replica, in_progress).as_deref(), Some("0"));
        for status in ["aof_last_bgrewrite_status", "rdb_last_bgsave_status"] {
            assert_eq!(
                info_field(&mut replica, status).as_deref(),
                Some("ok"),
                "{job}"
            );
        }
        assert!(
            tessera.log().contains("in progress: stopping it"),
            "{}",
            tessera.log()
        );
        assert_same_dataset(&mut source, &mut replica);
        // The cancelled job left nothing behind that start-up would load or trip on.
        let expected = digest(&mut source);
        tessera.shutdown();
        let restarted = start_server(dir.path(), &["--enable-debug-command", "yes"]);
        let mut conn = restarted.connection();
        assert_eq!(digest(&mut conn), expected, "{job}");
        let leftovers: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("temp-"))
            .collect();
        assert!(leftovers.is_empty(), "{job}: {leftovers:?}");
    }
}

/// With the log off, a replica's own snapshot (SAVE or BGSAVE) records where in its
/// master's history it was taken (`repl-id`, `repl-offset`, `repl-stream-db`, as
/// Redis's), and a replica restarted from it continues with a partial resync: the
/// master's writes after the snapshot (and after a kill -9) come from its backlog,
/// none twice (INCRs), none lost.
#[test]
fn a_replica_restarted_from_its_snapshot_continues_partially() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir) = redis_master(true);
    let mut source = master.connection();
    common::dataset::populate(&mut source, 0);
    populate_more(&mut source);
    let port = master.port.to_string();
    let args = [
        "--appendonly",
        "no",
        "--replicaof",
        "127.0.0.1",
        &port,
        "--enable-debug-command",
        "yes",
    ];
    let dir = temp_dir();
    let mut tessera = start_server(dir.path(), &args);
    let mut replica = tessera.connection();
    wait_link_up(&mut replica);
    for (round, save) in ["SAVE", "BGSAVE"].into_iter().enumerate() {
        // The stream in database 3 when the snapshot is taken: it must go on there.
        run(&mut source, &["SELECT", "3"]);
        for _ in 0..50 {
            run(&mut source, &["INCR", "counter"]);
        }
        wait_caught_up(&mut source, &mut replica);
        run(&mut replica, &[save]);
        common::wait_for_background_jobs(&mut replica);
        // Writes after the snapshot: only the master's backlog has them now.
        for _ in 0..30 {
            run(&mut source, &["INCR", "counter"]);
        }
        run(&mut source, &["SELECT", "0"]);
        write_load(&mut source, &format!("after-{save}"), 5);
        wait_caught_up(&mut source, &mut replica);
        tessera.kill9();
        let partial_before = info_field(&mut source, "sync_partial_ok");
        let full_before = info_field(&mut source, "sync_full");
        tessera = start_server(dir.path(), &args);
        replica = tessera.connection();
        wait_link_up(&mut replica);
        assert_eq!(
            info_field(&mut source, "sync_full"),
            full_before,
            "{save}: a full sync"
        );
        let partial: u64 = info_field(&mut source, "sync_partial_ok")
            .unwrap()
            .parse()
            .unwrap();
        let before: u64 = partial_before.unwrap().parse().unwrap();
        assert_eq!(partial, before + 1, "{save}");
        assert_same_dataset(&mut source, &mut replica);
        run(&mut replica, &["SELECT", "3"]);
        let counter: i64 = redis::cmd("GET")
            .arg("counter")
            .query(&mut replica)
            .unwrap();
        assert_eq!(counter, 80 * (round as i64 + 1), "{save}");
        run(&mut replica, &["SELECT", "0"]);
    }
}

/// A replica started from its own snapshot keeps the keys whose time passed, as Redis's
/// does: its master decides when they go (its DEL), and here it has not (its expiry
/// cycle is off and nobody read them), so both still count them. Dropping them at load
/// would leave the replica one key short of its master for good.
#[test]
fn a_restarted_replica_keeps_what_its_master_has_not_expired_yet() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let (master, _master_dir) = redis_master(true);
    let mut source = master.connection();
    run(&mut source, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    run(&mut source, &["SET", "kept", "1"]);
    let port = master.port.to_string();
    let args = ["--appendonly", "no", "--replicaof", "127.0.0.1", &port];
    let dir = temp_dir();
    let mut tessera = start_server(dir.path(), &args);
    let mut replica = tessera.connection();
    wait_link_up(&mut replica);
    run(&mut source, &["SET", "passing", "1", "PX", "100"]);
    wait_caught_up(&mut source, &mut replica);
    run(&mut replica, &["SAVE"]);
    std::thread::sleep(Duration::from_millis(200));
    tessera.kill9();
    tessera = start_server(dir.path(), &args);
    let mut replica = tessera.connection();
    wait_link_up(&mut replica);
    wait_caught_up(&mut source, &mut replica);
    let master_size: i64 = redis::cmd("DBSIZE").query(&mut source).unwrap();
    let size: i64 = redis::cmd("DBSIZE").query(&mut replica).unwrap();
    assert_eq!((size, master_size), (2, 2));
    // Read as gone on both sides, as a replica reads an expired key.
    let value: Option<String> = redis::cmd("GET")
        .arg("passing")
        .query(&mut replica)
        .unwrap();
    assert_eq!(value, None);
    run(&mut source, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}

/// A Tessera master (DEBUG allowed) with a redis-server replica and a Tessera replica,
/// both online: the same steps on both replicas, side by side.
struct Trio {
    master: common::TestServer,
    redis_replica: Replica,
    tessera_replica: common::TestServer,
    _dirs: [tempfile::TempDir; 2],
}

impl Trio {
    fn start() -> Trio {
        let dir = temp_dir();
        let master = start_master(dir.path(), &["--enable-debug-command", "yes"]);
        let redis_replica = Replica::start(master.port);
        let replica_dir = temp_dir();
        let port = master.port.to_string();
        let tessera_replica =
            common::start_server(replica_dir.path(), &["--replicaof", "127.0.0.1", &port]);
        wait_online(&mut master.connection(), 2);
        Trio {
            master,
            redis_replica,
            tessera_replica,
            _dirs: [dir, replica_dir],
        }
    }
}

/// DEBUG REPLICATE sends a command to the replicas without running it (Redis's way to
/// make datasets diverge on purpose); a replica that answers its master's command with an
/// error logs it as Redis logs it (`== CRITICAL ==`, the error, the command's name) and
/// counts it in INFO's `unexpected_error_replies`. A redis-server replica and a Tessera
/// replica of one Tessera master, side by side.
#[test]
fn a_replica_logs_the_errors_its_master_s_commands_get_as_redis_does() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let trio = Trio::start();
    let (redis_replica, tessera_replica) = (&trio.redis_replica, &trio.tessera_replica);
    let mut conn = trio.master.connection();
    let mut replicas = [redis_replica.connection(), tessera_replica.connection()];
    for replica in &mut replicas {
        // Not before its sync is over: the master's dataset would replace the write.
        wait_link_up(replica);
        run(replica, &["CONFIG", "SET", "replica-read-only", "no"]);
        run(replica, &["SET", "number", "foo"]);
    }
    run(&mut conn, &["DEBUG", "REPLICATE", "fake-command-1", "x"]);
    run(&mut conn, &["INCRBY", "number", "1"]);
    run(&mut conn, &["SET", "after", "1"]);
    for (index, replica) in replicas.iter_mut().enumerate() {
        wait_caught_up(&mut conn, replica);
        assert_eq!(
            field(&info(replica, "stats"), "unexpected_error_replies").as_deref(),
            Some("2"),
            "replica {index}"
        );
        // The master ran neither the fake command nor the replica's write.
        let number: String = redis::cmd("GET").arg("number").query(replica).unwrap();
        assert_eq!(number, "foo");
    }
    assert_eq!(
        redis::cmd("GET")
            .arg("number")
            .query::<String>(&mut conn)
            .unwrap(),
        "1"
    );
    for log in [redis_replica.log(), tessera_replica.log()] {
        let critical: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("== CRITICAL =="))
            .collect();
        assert_eq!(critical.len(), 2, "{log}");
        assert!(
            critical[0].contains(
                "This replica is sending an error to its master: 'unknown command 'fake-command-1', with args beginning with: 'x' ' after processing the command '<unknown>'"
            ),
            "{log}"
        );
        assert!(
            critical[1].contains(
                "This replica is sending an error to its master: 'value is not an integer or out of range' after processing the command 'incrby'"
            ),
            "{log}"
        );
    }
}

/// A writable replica (`replica-read-only no`): a write finding a key its master let
/// expire deletes it first (INCR starts again, with no TTL); a read sees it gone but
/// leaves it; the keys its own clients gave an expiry, it expires itself (Redis's
/// `expireSlaveKeys`), the master's it leaves to the master. A redis-server replica and a
/// Tessera replica of one Tessera master, side by side.
#[test]
fn a_writable_replica_expires_as_redis_does() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let trio = Trio::start();
    let (redis_replica, tessera_replica) = (&trio.redis_replica, &trio.tessera_replica);
    let mut conn = trio.master.connection();
    run(&mut conn, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    run(&mut conn, &["SET", "key1", "5", "PX", "10"]);
    run(&mut conn, &["SET", "key2", "5", "PX", "10"]);
    run(&mut conn, &["SET", "master-ttl", "5", "PX", "10"]);
    std::thread::sleep(Duration::from_millis(20));
    let mut replicas = [redis_replica.connection(), tessera_replica.connection()];
    let mut transcripts = Vec::new();
    for replica in &mut replicas {
        wait_caught_up(&mut conn, replica);
        let mut t = Vec::new();
        let mut step = |replica: &mut redis::Connection, args: &[&str]| {
            let mut command = redis::cmd(args[0]);
            for arg in &args[1..] {
                command.arg(*arg);
            }
            t.push(format!("{:?}", command.query::<redis::Value>(replica)));
        };
        step(replica, &["DBSIZE"]);
        step(replica, &["CONFIG", "SET", "replica-read-only", "no"]);
        step(replica, &["INCR", "key1"]);
        step(replica, &["TTL", "key1"]);
        step(replica, &["GET", "key2"]);
        step(replica, &["DBSIZE"]);
        step(replica, &["SET", "own", "1", "PX", "300"]);
        step(replica, &["SET", "own-later", "1", "EX", "100"]);
        transcripts.push(t);
    }
    // The replica's cron expires its own key (the second expiry, after INCR's of key1);
    // the master's expired ones stay.
    for replica in &mut replicas {
        wait_until(
            "the replica's own key to expire",
            Duration::from_secs(10),
            || info_field(replica, "expired_keys").as_deref() == Some("2"),
        );
        let size: i64 = redis::cmd("DBSIZE").query(replica).unwrap();
        transcripts.push(vec![format!("{size}")]);
    }
    assert_eq!(transcripts[0], transcripts[1]);
    assert_eq!(transcripts[2], transcripts[3]);
    assert_eq!(transcripts[1][2], "Ok(int(1))");
    assert_eq!(transcripts[1][3], "Ok(int(-1))");
    assert_eq!(transcripts[3][0], "4", "key1, key2, master-ttl, own-later");
}

/// A Tessera master holding `keys` keys whose snapshots take `delay_us` µs a key
/// (`rdb-key-save-delay`), so that a replica's full sync lasts.
fn slow_master(
    dir: &std::path::Path,
    args: &[&str],
    keys: &str,
    delay_us: &str,
) -> common::TestServer {
    let master = start_master(dir, args);
    let mut source = master.connection();
    run(&mut source, &["DEBUG", "POPULATE", keys, "key", "10"]);
    run(
        &mut source,
        &["CONFIG", "SET", "rdb-key-save-delay", delay_us],
    );
    master
}

/// What a replica's clients see while a full sync runs, by `repl-diskless-load`, as
/// Redis's loading and async loading show it: with `swapdb` and a master of another
/// history, -LOADING from the transfer on; with `swapdb` and the same history (a full
/// sync after the backlog lost the replica's offset), the old dataset is served, but not
/// the commands and settings Redis refuses during async loading; either way the master's
/// dataset replaces the old one at the end.
#[test]
fn a_replica_s_clients_see_its_full_sync_as_repl_diskless_load_says() {
    let master_dir = temp_dir();
    // 10 ms a key: the snapshot takes some 3 s to write.
    let master = slow_master(master_dir.path(), &[], "300", "10000");
    let mut source = master.connection();
    let replica_dir = temp_dir();
    let tessera = start_server(
        replica_dir.path(),
        &[
            "--repl-diskless-load",
            "swapdb",
            "--replica-read-only",
            "no",
        ],
    );
    let mut replica = tessera.connection();
    run(&mut replica, &["SET", "mine", "1"]);
    let persistence =
        |conn: &mut redis::Connection, name: &str| field(&info(conn, "persistence"), name).unwrap();

    // Another history: clients wait.
    let port = master.port.to_string();
    run(&mut replica, &["REPLICAOF", "127.0.0.1", &port]);
    wait_until("loading", Duration::from_secs(20), || {
        persistence(&mut replica, "loading") == "1"
    });
    assert_eq!(persistence(&mut replica, "async_loading"), "0");
    let refused: redis::RedisResult<Option<String>> =
        redis::cmd("GET").arg("mine").query(&mut replica);
    assert_eq!(refused.unwrap_err().code(), Some("LOADING"));
    wait_link_up(&mut replica);
    assert_eq!(persistence(&mut replica, "loading"), "0");
    let mine: Option<String> = redis::cmd("GET").arg("mine").query(&mut replica).unwrap();
    assert_eq!(mine, None, "the master's dataset replaced the replica's");

    // The same history, a full sync all the same: clients are served the old dataset.
    run(&mut replica, &["SET", "mine", "2"]);
    let mut transaction = redis::pipe();
    transaction.atomic();
    transaction
        .cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("replica");
    transaction
        .cmd("CONFIG")
        .arg("SET")
        .arg("repl-backlog-size")
        .arg("16384");
    for n in 0..4 {
        transaction
            .cmd("SET")
            .arg(format!("big{n}"))
            .arg("A".repeat(16384));
    }
    let _: redis::Value = transaction.query(&mut source).unwrap();
    wait_until("async loading", Duration::from_secs(20), || {
        persistence(&mut replica, "async_loading") == "1"
    });
    assert_eq!(persistence(&mut replica, "loading"), "0");
    let mine: Option<String> = redis::cmd("GET").arg("mine").query(&mut replica).unwrap();
    assert_eq!(mine.as_deref(), Some("2"));
    for refused in [
        &["CONFIG", "SET", "appendonly", "no"][..],
        &["REPLICAOF", "NO", "ONE"],
        &["BGSAVE"],
    ] {
        let reply: redis::RedisResult<redis::Value> = redis::cmd(refused[0])
            .arg(&refused[1..])
            .query(&mut replica);
        assert_eq!(reply.unwrap_err().code(), Some("LOADING"), "{refused:?}");
    }
    wait_link_up(&mut replica);
    assert_eq!(persistence(&mut replica, "async_loading"), "0");
    let mine: Option<String> = redis::cmd("GET").arg("mine").query(&mut replica).unwrap();
    assert_eq!(mine, None);
    let big: Option<String> = redis::cmd("GET").arg("big3").query(&mut replica).unwrap();
    assert_eq!(big.map(|v| v.len()), Some(16384));
}

/// A replica that stops its sync (REPLICAOF NO ONE) closes its link at once, as Redis
/// does: its master drops it, and stops the snapshot no other replica waits for, well
/// before `repl-timeout`.
#[test]
fn a_replica_that_gives_up_its_sync_closes_the_link_at_once() {
    let master_dir = temp_dir();
    // A second a key: the snapshot would take minutes.
    let master = slow_master(
        master_dir.path(),
        &["--repl-diskless-sync", "no"],
        "100",
        "1000000",
    );
    let mut source = master.connection();
    let replica_dir = temp_dir();
    let tessera = start_server(replica_dir.path(), &[]);
    let mut replica = tessera.connection();
    let port = master.port.to_string();
    run(&mut replica, &["REPLICAOF", "127.0.0.1", &port]);
    let saving = |conn: &mut redis::Connection| {
        field(&info(conn, "persistence"), "rdb_bgsave_in_progress").unwrap()
    };
    wait_until("the master's snapshot", Duration::from_secs(20), || {
        saving(&mut source) == "1"
    });
    run(&mut replica, &["REPLICAOF", "NO", "ONE"]);
    wait_until(
        "the master to drop the replica",
        Duration::from_secs(5),
        || {
            field(&info(&mut source, "replication"), "connected_slaves").as_deref() == Some("0")
                && saving(&mut source) == "0"
        },
    );
}
