//! Tessera as the master of real redis-server 7.0 replicas (issue 17, slices 1 and 3a): a
//! full sync of every value type (diskless, and disk-based by `capa eof`), the stream under a write load (strings, collections,
//! expiries, transactions, scripts, functions, several databases), a partial resync
//! after the link is cut, a replica that stops reading dropped with the master's memory
//! bounded, WAIT, `min-replicas-to-write`, and the ROLE / INFO / CLIENT LIST fields
//! compared with a Redis master's.

mod common;

use common::raw_client::{Conn, V};
use common::replication::*;
use common::{RedisOracle, WHOLE_TEST, info_field, require_redis_or_skip, run, temp_dir};
use std::time::{Duration, Instant};

/// The whole path of a replica: a full sync taken while writes go on (the snapshot is
/// slowed), the stream under load, a cut link and a partial resync, equal datasets at
/// each step.
#[test]
fn a_redis_replica_syncs_follows_and_resumes_partially() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    // A slow snapshot: the load runs during the full sync, so the stream since the
    // snapshot's point accumulates in the replica's output.
    let master = start_master(dir.path(), &["--rdb-key-save-delay", "1000"]);
    let mut conn = master.connection();
    common::dataset::populate(&mut conn, 0);
    populate_more(&mut conn);

    let replica = Replica::start(master.port);
    wait_until(
        "the replica to wait for its snapshot",
        Duration::from_secs(30),
        || {
            field(&info(&mut conn, "replication"), "slave0")
                .is_some_and(|s| s.contains("state=wait_bgsave"))
        },
    );
    write_load(&mut conn, "during-sync", 40);
    // The load ran while the snapshot was written: what it wrote waited in the replica's
    // output, behind the snapshot.
    let slave0 = field(&info(&mut conn, "replication"), "slave0").unwrap();
    assert!(!slave0.contains("state=online"), "{slave0}");
    wait_online(&mut conn, 1);
    let mut replica_conn = replica.connection();
    assert_same_dataset(&mut conn, &mut replica_conn);
    let log = replica.log();
    assert!(
        log.contains("Full resync from master"),
        "replica log:\n{log}"
    );
    assert_eq!(info_field(&mut conn, "sync_full").as_deref(), Some("1"));

    // The stream as it comes.
    run(&mut conn, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    write_load(&mut conn, "online", 80);
    assert_same_dataset(&mut conn, &mut replica_conn);

    // Cut the link: Redis's replica reconnects and continues from the backlog.
    let killed = run(&mut conn, &["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, redis::Value::Int(1));
    write_load(&mut conn, "after-kill", 20);
    wait_until("a partial resync", Duration::from_secs(30), || {
        info_field(&mut conn, "sync_partial_ok").as_deref() == Some("1")
    });
    wait_online(&mut conn, 1);
    assert_same_dataset(&mut conn, &mut replica_conn);
    let log = replica.log();
    assert!(
        log.contains("Successful partial resynchronization with master"),
        "replica log:\n{log}"
    );
    assert_eq!(info_field(&mut conn, "sync_full").as_deref(), Some("1"));
    assert_eq!(
        info_field(&mut conn, "sync_partial_err").as_deref(),
        Some("0")
    );
    // No temporary snapshot left behind.
    let leftovers: Vec<String> = common::dirs::file_names(dir.path())
        .into_iter()
        .filter(|name| name.starts_with("temp-"))
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
}

/// A replica that stops reading (SIGSTOP) is dropped once its output passes the replica
/// limit, the master's memory stays bounded meanwhile, and once it runs again it resyncs.
#[test]
fn a_replica_that_stops_reading_is_dropped_and_the_master_stays_bounded() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(
        dir.path(),
        &[
            "--appendonly",
            "no",
            "--client-output-buffer-limit",
            "replica 4mb 2mb 60",
        ],
    );
    let mut conn = master.connection();
    run(&mut conn, &["SET", "before", "1"]);
    let replica = Replica::start(master.port);
    wait_online(&mut conn, 1);
    let used = |conn: &mut redis::Connection| -> u64 {
        info_field(conn, "used_memory").unwrap().parse().unwrap()
    };
    let before = used(&mut conn);

    replica.signal("STOP");
    let value = "v".repeat(100_000);
    let writes = 400; // 40 MB, far past what the socket buffers and the limit hold
    let mut peak = 0;
    for n in 0..writes {
        run(&mut conn, &["SET", &format!("big:{n}"), &value]);
        if n % 20 == 0 {
            peak = peak.max(used(&mut conn));
        }
    }
    wait_until(
        "the stopped replica to be dropped",
        Duration::from_secs(30),
        || info_field(&mut conn, "connected_slaves").as_deref() == Some("0"),
    );
    let written = (writes * value.len()) as u64;
    // The dataset grew by what was written; the stopped replica's output, which would
    // have doubled that, held at most its limit (4 MB) and a turn's writes.
    let grown = peak.saturating_sub(before);
    assert!(
        grown < written + written / 5 + 8 * 1024 * 1024,
        "the master grew by {grown} bytes for {written} bytes written"
    );
    assert!(
        master.log().contains("overcoming of output buffer limits"),
        "master log:\n{}",
        master.log()
    );

    // Running again, it finds its link gone and syncs anew (the backlog lost what it
    // missed).
    replica.signal("CONT");
    wait_online(&mut conn, 1);
    let mut replica_conn = replica.connection();
    assert_same_dataset(&mut conn, &mut replica_conn);
    assert_eq!(info_field(&mut conn, "sync_full").as_deref(), Some("2"));
}

/// WAIT counts the replicas that acknowledged the client's last write, asking them with
/// GETACK; a replica that does not answer is not counted once the timeout passes.
#[test]
fn wait_counts_the_replicas_that_acknowledged() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let mut conn = master.connection();
    let replica = Replica::start(master.port);
    wait_online(&mut conn, 1);

    run(&mut conn, &["SET", "k", "1"]);
    let started = Instant::now();
    assert_eq!(
        run(&mut conn, &["WAIT", "1", "10000"]),
        redis::Value::Int(1)
    );
    // Answered by the GETACK's reply, not the replica's once-a-second ACK alone.
    assert!(started.elapsed() < Duration::from_secs(5));
    // More replicas than there are: the timeout, with the count.
    let started = Instant::now();
    assert_eq!(run(&mut conn, &["WAIT", "2", "300"]), redis::Value::Int(1));
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert_eq!(run(&mut conn, &["WAIT", "0", "0"]), redis::Value::Int(1));

    // Inside a transaction WAIT does not block.
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("SET")
        .arg("k")
        .arg("2")
        .cmd("WAIT")
        .arg(5)
        .arg(0);
    let replies: Vec<redis::Value> = pipe.query(&mut conn).unwrap();
    assert!(matches!(
        replies[1],
        redis::Value::Int(0) | redis::Value::Int(1)
    ));

    // CLIENT UNBLOCK answers a WAIT as its timeout would, or with the UNBLOCKED error.
    for (how, expected) in [
        ("TIMEOUT", V::Int(1)),
        (
            "ERROR",
            V::Error("UNBLOCKED client unblocked via CLIENT UNBLOCK".into()),
        ),
    ] {
        let mut waiter = Conn::new(master.port);
        let id = match waiter.cmd(&["CLIENT", "ID"]) {
            V::Int(id) => id.to_string(),
            other => panic!("{other:?}"),
        };
        waiter.send(&[b"WAIT", b"5", b"0"]);
        wait_until("the WAIT to block", Duration::from_secs(10), || {
            info_field(&mut conn, "blocked_clients").as_deref() == Some("1")
        });
        assert_eq!(
            run(&mut conn, &["CLIENT", "UNBLOCK", &id, how]),
            redis::Value::Int(1)
        );
        assert_eq!(waiter.read(), expected);
    }

    // A stopped replica acknowledges nothing.
    replica.signal("STOP");
    run(&mut conn, &["SET", "k", "3"]);
    assert_eq!(run(&mut conn, &["WAIT", "1", "300"]), redis::Value::Int(0));
    replica.signal("CONT");
    assert_eq!(
        run(&mut conn, &["WAIT", "1", "10000"]),
        redis::Value::Int(1)
    );
    let mut replica_conn = replica.connection();
    let value: String = redis::cmd("GET").arg("k").query(&mut replica_conn).unwrap();
    assert_eq!(value, "3");

    // PUBLISH reaches the replica's subscribers, as Redis sends it to its replicas; the
    // master's log never has it.
    let mut subscriber = Conn::new(replica.redis.port);
    subscriber.cmd(&["SUBSCRIBE", "news"]);
    assert_eq!(
        run(&mut conn, &["PUBLISH", "news", "hello"]),
        redis::Value::Int(0)
    );
    let message: Vec<String> = subscriber.read().items().iter().map(V::text).collect();
    assert_eq!(message, ["message", "news", "hello"]);
    let log = std::fs::read(master.last_incremental_file()).unwrap();
    let log = String::from_utf8_lossy(&log);
    assert!(log.contains("SET") && !log.contains("PUBLISH"), "{log}");
}

/// The fields a master shows (ROLE, INFO replication, CLIENT LIST's `S`), the shapes of
/// Redis's, and `min-replicas-to-write` refusing writes with Redis's error, compared with
/// a Redis master that has a Redis replica.
#[test]
fn role_info_and_write_quorum_answer_as_a_redis_master() {
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis_master = RedisOracle::start(&binary);
    let ours = Replica::start(master.port);
    let theirs = Replica::start(redis_master.port);
    let mut tessera = master.connection();
    let mut redis = redis_master.connection();
    wait_online(&mut tessera, 1);
    wait_online(&mut redis, 1);
    run(&mut tessera, &["SET", "k", "v"]);
    run(&mut redis, &["SET", "k", "v"]);
    wait_caught_up(&mut tessera, &mut ours.connection());
    wait_caught_up(&mut redis, &mut theirs.connection());

    // INFO replication: the same fields in the same order.
    let (ours_info, _) = same_replication_fields(&mut tessera, &mut redis);
    let slave0 = field(&ours_info, "slave0").unwrap();
    let replica_port = ours.redis.port;
    assert!(
        slave0.starts_with(&format!(
            "ip=127.0.0.1,port={replica_port},state=online,offset="
        )),
        "{slave0}"
    );
    assert_eq!(
        field(&ours_info, "repl_backlog_active").as_deref(),
        Some("1")
    );
    assert_eq!(
        field(&ours_info, "repl_backlog_first_byte_offset").as_deref(),
        Some("1")
    );
    assert_eq!(
        field(&ours_info, "repl_backlog_histlen"),
        field(&ours_info, "master_repl_offset")
    );

    // ROLE: master, the offset, [ip, port, acknowledged offset] per online replica.
    let mut ours_raw = Conn::new(master.port);
    let mut theirs_raw = Conn::new(redis_master.port);
    let shape = |role: V| -> Vec<String> {
        let items = role.items();
        let mut shape = vec![format!("{:?}", items[0])];
        shape.push(matches!(items[1], V::Int(_)).to_string());
        for replica in items[2].items() {
            let fields = replica.items();
            shape.push(format!("{} {}", fields.len(), fields[0].text()));
            assert!(matches!(fields[1], V::Bulk(_)) && matches!(fields[2], V::Bulk(_)));
        }
        shape
    };
    assert_eq!(
        shape(ours_raw.cmd(&["ROLE"])),
        shape(theirs_raw.cmd(&["ROLE"]))
    );
    let role = ours_raw.cmd(&["ROLE"]).items();
    assert_eq!(
        role[2].items()[0].items()[1].text(),
        replica_port.to_string()
    );

    // CLIENT LIST: the replica with flag S, and TYPE replica lists it alone.
    let replicas = ours_raw.cmd(&["CLIENT", "LIST", "TYPE", "replica"]).text();
    assert_eq!(replicas.lines().count(), 1, "{replicas}");
    assert!(replicas.contains(" flags=S "), "{replicas}");
    assert!(replicas.contains(" cmd=replconf "), "{replicas}");
    assert_eq!(
        info_field(&mut tessera, "connected_clients"),
        info_field(&mut redis, "connected_clients")
    );

    // The replication commands' errors, and the write quorum's refusals.
    let lines = [
        "REPLCONF",
        "REPLCONF a",
        "REPLCONF foo bar",
        "REPLCONF listening-port x",
        "REPLCONF listening-port 1 capa eof capa psync2",
        "REPLCONF rdb-only 2",
        "REPLCONF rdb-filter-only foo",
        "WAIT 1 x",
        "WAIT x 0",
        "WAIT 1 -1",
        "PSYNC a b",
        "PSYNC a b c failover",
        "CONFIG SET min-replicas-to-write 2",
        "SET k v2",
        "MULTI",
        "SET k v3",
        "EXEC",
        "EVAL return redis.call('SET','k','v4') 0",
        "EVAL #!lua\nreturn redis.call('SET','k','v5') 0",
        "GET k",
        "CONFIG SET min-replicas-to-write 1",
        "SET k v6",
        "CONFIG SET min-replicas-to-write 0",
    ];
    let mut differences = Vec::new();
    for line in lines {
        let words = split_keeping_scripts(line);
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let a = ours_raw.cmd(&words);
        let b = theirs_raw.cmd(&words);
        if a != b {
            differences.push(format!("{line}\n  tessera: {a:?}\n  redis:   {b:?}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// A line's words, where EVAL's script (up to the numkeys word) is one word.
fn split_keeping_scripts(line: &str) -> Vec<String> {
    if let Some(rest) = line.strip_prefix("EVAL ") {
        let (script, numkeys) = rest.rsplit_once(' ').unwrap();
        return vec!["EVAL".into(), script.into(), numkeys.into()];
    }
    line.split(' ').map(str::to_string).collect()
}

/// redis-cli's replication modes: `--rdb` (SYNC with `rdb-only`: the snapshot, then the
/// link closes), `--functions-rdb` (a filtered snapshot: the libraries, no keys) and
/// `--replica` (an empty filtered snapshot, then the stream as it comes).
#[test]
fn redis_cli_takes_snapshots_and_follows_the_stream() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let cli = binary.with_file_name("redis-cli");
    let dir = temp_dir();
    let master = start_master(dir.path(), &["--repl-ping-replica-period", "1"]);
    let mut conn = master.connection();
    common::dataset::populate(&mut conn, 0);
    run(
        &mut conn,
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=clilib\nredis.register_function('one', function() return 1 end)",
        ],
    );
    let port = master.port.to_string();
    let out = temp_dir();

    let rdb = out.path().join("all.rdb");
    let status = std::process::Command::new(&cli)
        .args(["-p", &port, "--rdb", rdb.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    common::assert_redis_check_rdb_passes(&binary, &rdb);
    // The snapshot is the dataset: a Redis started on it holds the same keys.
    let loaded = RedisOracle::start_with(
        &binary,
        out.path(),
        &["--dbfilename", "all.rdb", "--appendonly", "no"],
    );
    let mut loaded_conn = loaded.connection();
    assert_eq!(
        common::dataset::dataset(&mut loaded_conn),
        common::dataset::dataset(&mut conn)
    );

    let functions = out.path().join("functions.rdb");
    let status = std::process::Command::new(&cli)
        .args(["-p", &port, "--functions-rdb", functions.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let check = std::process::Command::new(binary.with_file_name("redis-check-rdb"))
        .arg(&functions)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(
        report.contains("RDB looks OK!") && report.contains("0 keys read"),
        "{report}"
    );

    let mut follower = std::process::Command::new(&cli)
        .args(["-p", &port, "--replica"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (received, _stderr) = common::read_child_output(&mut follower);
    wait_online(&mut conn, 1);
    run(&mut conn, &["SET", "followed", "yes"]);
    run(&mut conn, &["PUBLISH", "channel", "message"]);
    let mut seen = Vec::new();
    // The writes, and the keepalive PING every `repl-ping-replica-period`.
    while !(seen.iter().any(|l: &String| l.contains("PUBLISH"))
        && seen.iter().any(|l: &String| l.contains(r#""PING""#)))
    {
        match received.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    let joined = seen.join("\n");
    assert!(
        joined.contains(r#""SET","followed","yes""#)
            && joined.contains(r#""PUBLISH","channel","message""#)
            && joined.contains(r#""PING""#),
        "{joined}"
    );
}

/// A full sync is a background job among the others: it waits for a running compaction,
/// and BGSAVE / BGREWRITEAOF wait for it (Redis's replies for another job in progress).
#[test]
fn a_full_sync_takes_its_turn_among_background_jobs() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    // Slow snapshots (about 2 s for the full sync's), so that each job is seen running.
    let master = start_master(dir.path(), &["--rdb-key-save-delay", "1000"]);
    let mut conn = master.connection();
    common::dataset::populate(&mut conn, 0);
    populate_more(&mut conn);
    assert_eq!(
        run(&mut conn, &["BGREWRITEAOF"]),
        redis::Value::SimpleString("Background append only file rewriting started".into())
    );
    let replica = Replica::start(master.port);
    wait_until(
        "the replica to wait behind the compaction",
        Duration::from_secs(30),
        || {
            field(&info(&mut conn, "replication"), "slave0")
                .is_some_and(|s| s.contains("state=wait_bgsave"))
        },
    );
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").as_deref(),
        Some("1")
    );
    // Once the compaction is done, the full sync's snapshot runs (slowly): the other
    // jobs wait for it.
    wait_until("the compaction to end", Duration::from_secs(60), || {
        info_field(&mut conn, "aof_rewrite_in_progress").as_deref() == Some("0")
    });
    // To Redis the full sync's snapshot is a BGSAVE (a child of the same type), and
    // INFO says so.
    let mut raw = Conn::new(master.port);
    assert_eq!(
        raw.cmd(&["BGSAVE"]),
        V::Error("ERR Background save already in progress".into())
    );
    assert_eq!(
        info_field(&mut conn, "rdb_bgsave_in_progress").as_deref(),
        Some("1")
    );
    assert_eq!(
        raw.cmd(&["BGREWRITEAOF"]),
        V::Simple("Background append only file rewriting scheduled".into())
    );
    wait_online(&mut conn, 1);
    run(&mut conn, &["CONFIG", "SET", "rdb-key-save-delay", "0"]);
    common::wait_for_background_jobs(&mut conn);
    assert_same_dataset(&mut conn, &mut replica.connection());
}

/// `repl-timeout`: a replica that stops acknowledging (SIGSTOP) is dropped; running again,
/// it continues from the backlog.
#[test]
fn a_silent_replica_times_out_and_continues_when_it_comes_back() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(dir.path(), &["--repl-timeout", "2"]);
    let mut conn = master.connection();
    let replica = Replica::start(master.port);
    wait_online(&mut conn, 1);
    replica.signal("STOP");
    run(&mut conn, &["SET", "while-stopped", "1"]);
    wait_until(
        "the silent replica to time out",
        Duration::from_secs(20),
        || info_field(&mut conn, "connected_slaves").as_deref() == Some("0"),
    );
    assert!(
        master
            .log()
            .contains("Disconnecting timedout replica (streaming sync)"),
        "master log:\n{}",
        master.log()
    );
    replica.signal("CONT");
    wait_until("a partial resync", Duration::from_secs(30), || {
        info_field(&mut conn, "sync_partial_ok").as_deref() == Some("1")
    });
    wait_online(&mut conn, 1);
    assert_same_dataset(&mut conn, &mut replica.connection());
    assert_eq!(info_field(&mut conn, "sync_full").as_deref(), Some("1"));
}

/// Diskless syncs (`repl-diskless-sync yes`, the default): two redis-server replicas that
/// ask within `repl-diskless-sync-delay` are served by one capture streamed to their
/// sockets with the `$EOF:` framing, no file is written, and the stream follows.
#[test]
fn a_diskless_sync_serves_two_replicas_from_one_capture() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(dir.path(), &["--repl-diskless-sync-delay", "2"]);
    let mut conn = master.connection();
    common::dataset::populate(&mut conn, 0);
    populate_more(&mut conn);

    let first = Replica::start(master.port);
    let second = Replica::start(master.port);
    wait_online(&mut conn, 2);
    let log = master.log();
    assert_eq!(
        log.matches("Starting BGSAVE for SYNC with target: replicas sockets")
            .count(),
        1,
        "master log:\n{log}"
    );
    assert!(!log.contains("target: disk"), "master log:\n{log}");
    assert_eq!(info_field(&mut conn, "sync_full").as_deref(), Some("2"));
    for replica in [&first, &second] {
        let replica_log = replica.log();
        assert!(
            replica_log.contains("receiving streamed RDB from master with EOF"),
            "replica log:\n{replica_log}"
        );
        assert_same_dataset(&mut conn, &mut replica.connection());
    }
    // The stream after the snapshot, once each replica acknowledged it.
    write_load(&mut conn, "after-diskless", 30);
    for replica in [&first, &second] {
        assert_same_dataset(&mut conn, &mut replica.connection());
    }
    let leftovers: Vec<String> = common::dirs::file_names(dir.path())
        .into_iter()
        .filter(|name| name.starts_with("temp-") || name.ends_with(".rdb"))
        .collect();
    assert!(leftovers.is_empty(), "files written: {leftovers:?}");
}

/// The framing a replica gets by what it announced: `$EOF:<40 bytes>`, the snapshot and
/// the mark again with `capa eof`; `$<length>` (a disk-based sync, as Redis) without.
#[test]
fn a_replica_without_capa_eof_gets_a_disk_based_sync() {
    use std::io::Write;
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let mut conn = master.connection();
    run(&mut conn, &["SET", "k", "v"]);
    let snapshot_of = |capas: &[&str]| -> Vec<u8> {
        let mut stream = master.raw();
        for capa in capas {
            let reply = common::raw_exchange(
                &mut stream,
                &common::encode_command(&[b"REPLCONF", b"capa", capa.as_bytes()]),
                Duration::from_secs(5),
            );
            assert_eq!(reply, b"+OK\r\n");
        }
        stream
            .write_all(&common::encode_command(&[b"PSYNC", b"?", b"-1"]))
            .unwrap();
        let (bytes, _) = common::read_bytes(&mut stream, usize::MAX, Duration::from_secs(3));
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("+FULLRESYNC "), "{text}");
        let end = bytes.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        bytes[end..].to_vec()
    };

    let diskless = snapshot_of(&["eof", "psync2"]);
    assert!(diskless.starts_with(b"$EOF:"), "{diskless:?}");
    let mark = &diskless[5..45];
    assert_eq!(&diskless[45..47], b"\r\n");
    assert!(diskless.ends_with(mark), "the snapshot ends with its mark");
    let rdb = &diskless[47..diskless.len() - 40];
    assert!(rdb.starts_with(b"REDIS0010"), "{rdb:?}");

    let disk = snapshot_of(&["psync2"]);
    let header_end = disk.windows(2).position(|w| w == b"\r\n").unwrap();
    let length: usize = std::str::from_utf8(&disk[1..header_end])
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(disk.len(), header_end + 2 + length, "{disk:?}");
    assert!(disk[header_end + 2..].starts_with(b"REDIS0010"));
    assert!(master.log().contains("target: disk"));
}

/// A Tessera replica of a Tessera master reads the diskless snapshot (`$EOF:`) and the
/// stream after it.
#[test]
fn a_tessera_replica_syncs_diskless_from_a_tessera_master() {
    let dir = temp_dir();
    let master = start_master(dir.path(), &[]);
    let mut conn = master.connection();
    common::dataset::populate(&mut conn, 0);
    populate_more(&mut conn);
    let replica_dir = temp_dir();
    let port = master.port.to_string();
    let replica = common::start_server(
        replica_dir.path(),
        &[
            "--replicaof",
            "127.0.0.1",
            &port,
            "--enable-debug-command",
            "yes",
        ],
    );
    let mut replica_conn = replica.connection();
    wait_online(&mut conn, 1);
    assert_same_dataset(&mut conn, &mut replica_conn);
    let log = replica.log();
    assert!(
        log.contains("receiving streamed RDB from master with EOF"),
        "replica log:\n{log}"
    );
    assert!(master.log().contains("target: replicas sockets"));
    write_load(&mut conn, "after-diskless", 30);
    assert_same_dataset(&mut conn, &mut replica_conn);
}

/// `repl-diskless-sync-max-replicas` starts the sync as soon as that many replicas wait
/// (long before the delay), and a replica that stops reading during a diskless sync
/// (SIGSTOP) holds the other back only until `repl-timeout` drops it.
#[test]
fn a_stalled_replica_is_dropped_from_a_diskless_sync_after_the_timeout() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(
        dir.path(),
        &[
            "--repl-diskless-sync-delay",
            "600",
            "--repl-diskless-sync-max-replicas",
            "2",
            "--repl-timeout",
            "2",
        ],
    );
    let mut conn = master.connection();
    // More than the pipe and two sockets' buffers hold, in bytes that do not compress.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut pipeline = redis::pipe();
    for n in 0..80 {
        let value: Vec<u8> = (0..512 * 1024)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        pipeline.set(format!("big:{n}"), value).ignore();
    }
    pipeline.query::<()>(&mut conn).unwrap();

    let stalled = Replica::start(master.port);
    wait_until(
        "the first replica to wait for its sync",
        Duration::from_secs(30),
        || {
            field(&info(&mut conn, "replication"), "slave0")
                .is_some_and(|s| s.contains("state=wait_bgsave"))
        },
    );
    stalled.signal("STOP");
    let reader = Replica::start(master.port);
    wait_online(&mut conn, 1);
    assert_same_dataset(&mut conn, &mut reader.connection());
    let log = master.log();
    assert!(
        log.contains("Disconnecting timedout replica (full sync)"),
        "master log:\n{log}"
    );
    assert_eq!(
        log.matches("Starting BGSAVE for SYNC with target: replicas sockets")
            .count(),
        1,
        "master log:\n{log}"
    );
    stalled.signal("CONT");
}

/// A master with the log off, saved by SHUTDOWN and started again from its snapshot,
/// lets its replicas continue (Redis 7.0's `loadDataFromDisk`): a redis-server replica
/// and a Tessera replica each continue with a partial resync, the saved ID becomes the
/// master's second, and a key that expired while the master was down leaves the replicas
/// by a DEL in the stream (without it their DBSIZE is one more than the master's).
#[test]
fn a_restarted_master_s_replicas_continue_its_history() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let args = ["--appendonly", "no", "--save", "3600 1"];
    let mut master = start_master(dir.path(), &args);
    let port = master.port.to_string();
    let mut conn = master.connection();
    common::dataset::populate(&mut conn, 0);
    populate_more(&mut conn);
    write_load(&mut conn, "before", 10);

    let redis_replica = Replica::start(master.port);
    let tessera_dir = temp_dir();
    let tessera_replica = common::start_server(
        tessera_dir.path(),
        &[
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
            "--replicaof",
            "127.0.0.1",
            &port,
        ],
    );
    wait_online(&mut conn, 2);
    let mut from_redis = redis_replica.connection();
    let mut from_tessera = tessera_replica.connection();
    // A key whose time passes while the master is down, and the stream in database 2
    // when it stops.
    let short_lived = Instant::now();
    run(&mut conn, &["SET", "short-lived", "x", "PX", "3000"]);
    run(&mut conn, &["SELECT", "2"]);
    run(&mut conn, &["INCR", "counter"]);
    wait_caught_up(&mut conn, &mut from_redis);
    wait_caught_up(&mut conn, &mut from_tessera);
    let before = info(&mut conn, "replication");
    let replid = field(&before, "master_replid").unwrap();
    let offset: i64 = field(&before, "master_repl_offset")
        .unwrap()
        .parse()
        .unwrap();
    drop(conn);

    master.shutdown();
    assert!(
        short_lived.elapsed() < Duration::from_millis(2900),
        "too slow: the key may have expired before the snapshot"
    );
    std::thread::sleep(Duration::from_millis(3100).saturating_sub(short_lived.elapsed()));
    master = start_master(dir.path(), &[&args[..], &["--port", &port]].concat());
    let mut conn = master.connection();
    let after = info(&mut conn, "replication");
    assert_eq!(field(&after, "master_replid2"), Some(replid.clone()));
    assert_ne!(field(&after, "master_replid"), Some(replid));
    // At or past the offset read before (the shutdown may ask the replicas for an
    // acknowledgement, a REPLCONF GETACK in the stream, before it saves).
    let second: i64 = field(&after, "second_repl_offset")
        .unwrap()
        .parse()
        .unwrap();
    assert!(second > offset, "{second} after {offset}:\n{after}");
    // That key at least (the load's short expiries too, if the expiry cycle had not
    // deleted them yet).
    let expired: u64 = info_field(&mut conn, "rdb_last_load_keys_expired")
        .unwrap()
        .parse()
        .unwrap();
    assert!(expired >= 1, "{expired}");
    wait_online(&mut conn, 2);
    assert_eq!(info_field(&mut conn, "sync_full").as_deref(), Some("0"));
    assert_eq!(
        info_field(&mut conn, "sync_partial_ok").as_deref(),
        Some("2")
    );
    let log = redis_replica.log();
    assert!(
        log.contains("Successful partial resynchronization with master"),
        "replica log:\n{log}"
    );
    // The stream goes on: writes after the restart (too few rounds for the load's
    // SWAPDB, which would move the counter).
    run(&mut conn, &["SELECT", "2"]);
    run(&mut conn, &["INCR", "counter"]);
    write_load(&mut conn, "after", 5);
    for replica in [&mut from_redis, &mut from_tessera] {
        wait_caught_up(&mut conn, replica);
        assert_same_dataset(&mut conn, replica);
        // The load's own short expiries are deleted by the master's expiry cycle, their
        // DELs a moment behind: equal once they are all through.
        wait_until("the replica's DBSIZE", Duration::from_secs(20), || {
            let master_size: i64 = redis::cmd("DBSIZE").query(&mut conn).unwrap();
            let size: i64 = redis::cmd("DBSIZE").query(replica).unwrap();
            size == master_size
        });
        run(replica, &["SELECT", "2"]);
        let counter: i64 = redis::cmd("GET").arg("counter").query(replica).unwrap();
        assert_eq!(counter, 2);
        run(replica, &["SELECT", "0"]);
    }
}

/// DEBUG RELOAD with the log off drops the keys whose time passed (the active expiry
/// was off, so nothing deleted them) and sends their DELs to the replicas, which would
/// otherwise keep them (Redis's RELOAD drops them silently).
#[test]
fn debug_reload_sends_the_dels_of_the_keys_it_drops() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let dir = temp_dir();
    let master = start_master(dir.path(), &["--appendonly", "no"]);
    let mut conn = master.connection();
    run(&mut conn, &["SET", "kept", "1"]);
    let replica = Replica::start(master.port);
    wait_online(&mut conn, 1);
    let mut replica_conn = replica.connection();
    run(&mut conn, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    run(&mut conn, &["SET", "gone", "1", "PX", "50"]);
    wait_caught_up(&mut conn, &mut replica_conn);
    std::thread::sleep(Duration::from_millis(100));
    // Expired but not deleted on either side: the replica waits for its master's DEL.
    let size: i64 = redis::cmd("DBSIZE").query(&mut replica_conn).unwrap();
    assert_eq!(size, 2);
    run(&mut conn, &["DEBUG", "RELOAD"]);
    assert_eq!(
        info_field(&mut conn, "rdb_last_load_keys_expired").as_deref(),
        Some("1")
    );
    wait_until("the DEL on the replica", Duration::from_secs(20), || {
        redis::cmd("DBSIZE")
            .query::<i64>(&mut replica_conn)
            .unwrap()
            == 1
    });
    run(&mut conn, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}
