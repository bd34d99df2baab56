//! CONFIG SET appendonly at run time, as Redis's: turned on, the log's first base is the
//! dataset of that instant and every write after it is in the log (a kill -9 loses
//! nothing acknowledged); turned off, the log holds the dataset of that instant and
//! nothing after; a crash or SHUTDOWN while it is being turned on leaves the directory
//! as it was.

mod common;

use common::replication::digest;
use common::*;
use std::path::Path;

fn cmd_str(conn: &mut redis::Connection, args: &[&str]) -> Result<String, String> {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query::<String>(conn).map_err(|e| e.to_string())
}

/// CONFIG GET appendonly's value.
fn appendonly_in_force(conn: &mut redis::Connection) -> String {
    let pair: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendonly")
        .query(conn)
        .unwrap();
    pair[1].clone()
}

fn config_set(conn: &mut redis::Connection, name: &str, value: &str) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg(name)
        .arg(value)
        .query(conn)
        .unwrap();
}

/// Non-idempotent writes to keys of every kind: a base holding any of them, replayed
/// with the log after it, would show them twice.
fn write_round(conn: &mut redis::Connection, round: usize) {
    run(conn, &["INCRBY", "counter", "7"]);
    run(conn, &["RPUSH", "list", &format!("r{round}")]);
    run(conn, &["HINCRBY", "big-hash:0", "field:0:1", "1"]);
    run(conn, &["ZINCRBY", "zset", "1.5", "m"]);
    run(conn, &["XADD", "events", "*", "round", &round.to_string()]);
    run(conn, &["SELECT", "2"]);
    run(conn, &["APPEND", "text", "x"]);
    run(conn, &["SELECT", "0"]);
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn turned_on_at_run_time_the_log_holds_the_dataset_and_every_write_after() {
    let dir = temp_dir();
    let args = [
        "--appendonly",
        "no",
        "--save",
        "",
        "--enable-debug-command",
        "yes",
        "--appendfsync",
        "always",
        // A slow base, so that writes land while it is written.
        "--rdb-key-save-delay",
        "2000",
    ];
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    dataset::populate(&mut conn, 0);
    write_round(&mut conn, 0);
    assert_eq!(info_field(&mut conn, "aof_enabled").unwrap(), "0");
    config_set(&mut conn, "appendonly", "yes");
    assert_eq!(appendonly_in_force(&mut conn), "yes");
    assert_eq!(info_field(&mut conn, "aof_enabled").unwrap(), "1");
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").unwrap(),
        "1"
    );
    for round in 1..20 {
        write_round(&mut conn, round);
    }
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").unwrap(),
        "1",
        "the base was written before the writes: nothing raced it"
    );
    let files = files_in(&server.aof_dir());
    assert!(
        files.iter().any(|f| f == "temp-appendonly.aof.incr"),
        "{files:?}"
    );
    wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
        "ok"
    );
    for round in 20..25 {
        write_round(&mut conn, round);
    }
    let listed = manifest_files(&server.aof_dir());
    assert!(listed.iter().any(|f| f.contains(".base.")), "{listed:?}");
    assert!(
        !files_in(&server.aof_dir())
            .iter()
            .any(|f| f.starts_with("temp-")),
        "{:?}",
        files_in(&server.aof_dir())
    );
    let live = digest(&mut conn);
    let live_dataset = dataset::dataset(&mut conn);
    server.kill9();
    let mut restart_args = args.to_vec();
    restart_args[1] = "yes";
    let server = start_server(dir.path(), &restart_args);
    let mut conn = server.connection();
    assert_eq!(dataset::dataset(&mut conn), live_dataset);
    assert_eq!(digest(&mut conn), live);
}

#[test]
fn turned_off_the_log_keeps_the_dataset_of_that_instant() {
    let dir = temp_dir();
    let args = ["--save", "", "--enable-debug-command", "yes"];
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    dataset::populate(&mut conn, 0);
    write_round(&mut conn, 0);
    let at_turn_off = digest(&mut conn);
    config_set(&mut conn, "appendonly", "no");
    assert_eq!(info_field(&mut conn, "aof_enabled").unwrap(), "0");
    // Not logged: the log is off.
    write_round(&mut conn, 1);
    assert_ne!(digest(&mut conn), at_turn_off);
    server.kill9();
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    assert_eq!(digest(&mut conn), at_turn_off);
    // With the log off, BGREWRITEAOF writes a base alone, as Redis 7's: the dataset of
    // its instant, which a restart with the log on loads.
    config_set(&mut conn, "appendonly", "no");
    write_round(&mut conn, 2);
    let at_rewrite = digest(&mut conn);
    assert_eq!(
        cmd_str(&mut conn, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting started"
    );
    wait_for_background_jobs(&mut conn);
    write_round(&mut conn, 3);
    assert!(
        manifest_files(&server.aof_dir())
            .iter()
            .all(|f| f.contains(".base."))
    );
    server.kill9();
    let server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    assert_eq!(digest(&mut conn), at_rewrite);
}

#[test]
fn off_and_on_again_the_log_starts_from_the_dataset_of_that_instant() {
    let dir = temp_dir();
    let args = [
        "--save",
        "",
        "--enable-debug-command",
        "yes",
        "--aof-rewrite-threads",
        "2",
    ];
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    dataset::populate(&mut conn, 0);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    wait_for_background_jobs(&mut conn);
    let old_files = manifest_files(&server.aof_dir());
    config_set(&mut conn, "appendonly", "no");
    write_round(&mut conn, 0); // not logged; in the next base
    config_set(&mut conn, "appendonly", "yes");
    write_round(&mut conn, 1);
    wait_for_background_jobs(&mut conn);
    write_round(&mut conn, 2);
    let live = digest(&mut conn);
    let files = manifest_files(&server.aof_dir());
    for old in &old_files {
        assert!(!files.contains(old), "{old} is still listed: {files:?}");
        assert!(
            !server.aof_dir().join(old).exists(),
            "{old} was not deleted"
        );
    }
    server.kill9();
    let server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    assert_eq!(digest(&mut conn), live);
}

#[test]
fn a_log_being_turned_on_is_given_up_by_appendonly_no_and_a_crash_leaves_the_directory_as_it_was() {
    let dir = temp_dir();
    let args = [
        "--appendonly",
        "no",
        "--save",
        "",
        "--enable-debug-command",
        "yes",
        "--rdb-key-save-delay",
        "2000",
    ];
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    dataset::populate(&mut conn, 0);
    config_set(&mut conn, "appendonly", "yes");
    write_round(&mut conn, 0);
    // SHUTDOWN is refused while the base is not written, as Redis refuses it.
    let refused = cmd_str(&mut conn, &["SHUTDOWN"]).unwrap_err();
    assert!(refused.contains("Errors trying to SHUTDOWN"), "{refused}");
    assert!(
        server.log().contains("Writing initial AOF, can't exit."),
        "{}",
        server.log()
    );
    // Given up: the new log's file goes, nothing is listed.
    config_set(&mut conn, "appendonly", "no");
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").unwrap(),
        "0"
    );
    let files = files_in(&server.aof_dir());
    assert!(!files.iter().any(|f| f.starts_with("temp-")), "{files:?}");
    assert!(!files.iter().any(|f| f.contains(".base.")), "{files:?}");
    // On again, and killed before the base is written: the directory is as it was
    // before (start-up removes the new log's temporary file), empty as Redis leaves a
    // directory it made for a log that is not on yet; start-up then makes a new log.
    let before = files_in(&server.aof_dir());
    assert!(before.is_empty(), "{before:?}");
    config_set(&mut conn, "appendonly", "yes");
    write_round(&mut conn, 1);
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").unwrap(),
        "1"
    );
    server.kill9();
    let mut restart_args = args.to_vec();
    restart_args[1] = "yes";
    restart_args.truncate(restart_args.len() - 2);
    let server = start_server(dir.path(), &restart_args);
    assert_eq!(
        files_in(&server.aof_dir()),
        ["appendonly.aof.1.incr.aof", "appendonly.aof.manifest"]
    );
    let mut conn = server.connection();
    assert_eq!(dbsize(&mut conn), 0, "the log never held the dataset");
}

#[test]
fn a_log_that_cannot_be_turned_on_leaves_appendonly_no() {
    let dir = temp_dir();
    // The log directory's name is taken by a file: the log can't be opened.
    std::fs::write(dir.path().join("appendonlydir"), b"not a directory").unwrap();
    let server = start_server(dir.path(), &["--appendonly", "no", "--save", ""]);
    let mut conn = server.connection();
    run(&mut conn, &["SET", "k", "v"]);
    config_set(&mut conn, "appendonly", "yes");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if appendonly_in_force(&mut conn) == "no" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "appendonly stayed yes"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(info_field(&mut conn, "aof_enabled").unwrap(), "0");
    assert!(
        server
            .log()
            .contains("the append-only log could not be turned on"),
        "{}",
        server.log()
    );
    // The server goes on.
    run(&mut conn, &["SET", "k2", "v"]);
    assert_eq!(dbsize(&mut conn), 2);
}

/// A server's log directory as text: its manifest, then the files it holds, sorted.
fn log_dir_state(aof_dir: &Path) -> String {
    let manifest = std::fs::read_to_string(aof_dir.join("appendonly.aof.manifest"))
        .unwrap_or_else(|e| format!("(no manifest: {e})\n"));
    let mut names: Vec<String> = std::fs::read_dir(aof_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    format!("{manifest}files: {}", names.join(" "))
}

/// INFO persistence says no rewrite runs or waits.
fn wait_for_rewrites(conn: &mut redis::Connection) {
    wait_until(
        "the rewrites' end",
        std::time::Duration::from_secs(30),
        || {
            info_fields(conn, &["aof_rewrite_in_progress", "aof_rewrite_scheduled"])
                == [Some("0".to_string()), Some("0".to_string())]
        },
    );
}

#[test]
fn the_log_directory_is_named_and_numbered_as_redis_s_through_switches_rewrites_and_reloads() {
    let Some(redis) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (ours_dir, theirs_dir) = (temp_dir(), temp_dir());
    let args = [
        "--appendonly",
        "no",
        "--save",
        "",
        "--enable-debug-command",
        "yes",
    ];
    let server = start_server(ours_dir.path(), &args);
    let oracle = RedisOracle::start_with(&redis, theirs_dir.path(), &args);
    let mut ours = server.connection();
    let mut theirs = oracle.connection();
    let dirs = [
        ours_dir.path().join("appendonlydir"),
        theirs_dir.path().join("appendonlydir"),
    ];
    // Each step on both servers, then the two directories compared once Redis's
    // background deletion of history files is done (the manifest no longer lists them).
    let mut step = |what: &str, commands: &[&[&str]]| {
        for conn in [&mut ours, &mut theirs] {
            // Writes both servers apply alike (no stream IDs of their clocks).
            run(conn, &["INCRBY", "counter", "7"]);
            run(conn, &["RPUSH", "list", what]);
            run(conn, &["HSET", "hash", what, "1"]);
            for command in commands {
                run(conn, command);
                wait_for_rewrites(conn);
            }
        }
        let listed_only = |dir: &Path| {
            let state = log_dir_state(dir);
            let (manifest, files) = state.split_once("files: ").unwrap();
            files
                .split(' ')
                .all(|f| f == "appendonly.aof.manifest" || manifest.contains(f))
        };
        wait_until(
            "Redis's history deletion",
            std::time::Duration::from_secs(10),
            || listed_only(&dirs[1]),
        );
        assert_eq!(log_dir_state(&dirs[0]), log_dir_state(&dirs[1]), "{what}");
        assert_eq!(digest(&mut ours), digest(&mut theirs), "{what}");
    };
    step("turned on", &[&["CONFIG", "SET", "appendonly", "yes"]]);
    step("rewritten", &[&["BGREWRITEAOF"]]);
    step(
        "rewritten with the log off",
        &[&["CONFIG", "SET", "appendonly", "no"], &["BGREWRITEAOF"]],
    );
    step("loaded with the log off", &[&["DEBUG", "LOADAOF"]]);
    step("on again", &[&["CONFIG", "SET", "appendonly", "yes"]]);
    step(
        "history kept",
        &[
            &["CONFIG", "SET", "aof-disable-auto-gc", "yes"],
            &["BGREWRITEAOF"],
            &["BGREWRITEAOF"],
        ],
    );
    step(
        "history collected",
        &[&["CONFIG", "SET", "aof-disable-auto-gc", "no"]],
    );
    step(
        "rewritten after a reload",
        &[&["DEBUG", "LOADAOF"], &["BGREWRITEAOF"]],
    );
}
