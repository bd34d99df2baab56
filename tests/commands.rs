//! Command semantics that a randomized differential test does not reach well: background
//! expiry, per-connection state (CLIENT), run-time configuration (CONFIG), INFO's fields,
//! COMMAND's shapes, TIME/LASTSAVE, SHUTDOWN, and the binary's own command line.
//! Everything runs against the real `tessera-server` binary with real clients.

mod common;

use common::*;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn cmd(conn: &mut redis::Connection, args: &[&str]) -> redis::Value {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    command.query(conn).unwrap()
}

fn cmd_err(conn: &mut redis::Connection, args: &[&str]) -> String {
    let mut command = redis::cmd(args[0]);
    for arg in &args[1..] {
        command.arg(*arg);
    }
    match command.query::<redis::Value>(conn) {
        Ok(value) => panic!("{args:?} should fail, got {value:?}"),
        Err(e) => error_text(&e),
    }
}

/// The server's error line ("ERR ...", "NOAUTH ..."), as a client library received it.
fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

fn string(conn: &mut redis::Connection, args: &[&str]) -> String {
    redis::from_redis_value(cmd(conn, args)).unwrap()
}

fn int(conn: &mut redis::Connection, args: &[&str]) -> i64 {
    redis::from_redis_value(cmd(conn, args)).unwrap()
}

/// INFO as `field -> value`, plus the section headers seen, in order.
fn info(conn: &mut redis::Connection, sections: &[&str]) -> (HashMap<String, String>, Vec<String>) {
    let mut args = vec!["INFO"];
    args.extend_from_slice(sections);
    let text = string(conn, &args);
    let mut fields = HashMap::new();
    let mut headers = Vec::new();
    for line in text.split("\r\n") {
        if let Some(header) = line.strip_prefix("# ") {
            headers.push(header.to_string());
        } else if let Some((name, value)) = line.split_once(':') {
            fields.insert(name.to_string(), value.to_string());
        } else {
            assert!(
                line.is_empty(),
                "INFO line is neither a header nor a field: {line:?}"
            );
        }
    }
    (fields, headers)
}

fn info_u64(conn: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let (fields, _) = info(conn, &[section]);
    fields
        .get(field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .parse()
        .unwrap()
}

fn raw_request(port: u16, request: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.write_all(request).unwrap();
    read_for(&mut stream, Duration::from_secs(2))
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// Waits (generously) for the process to exit; returns its status.
fn wait_exit(server: &mut TestServer, wait: Duration) -> Option<std::process::ExitStatus> {
    let child = server.child.as_mut()?;
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            server.child = None;
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

// ---------------------------------------------------------------------------------------
// Expiry
// ---------------------------------------------------------------------------------------

#[test]
fn expired_keys_vanish_on_access_and_in_the_background() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();

    // Lazy: a key read after its deadline is gone, whatever the background cycle did.
    cmd(&mut conn, &["SET", "lazy", "v", "PX", "100"]);
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(cmd(&mut conn, &["GET", "lazy"]), redis::Value::Nil);
    assert_eq!(int(&mut conn, &["EXISTS", "lazy"]), 0);
    assert_eq!(int(&mut conn, &["TTL", "lazy"]), -2);
    assert_eq!(info_u64(&mut conn, "stats", "expired_keys"), 1);

    // Active: keys nobody touches disappear from DBSIZE, in every database.
    cmd(&mut conn, &["SET", "forever", "v"]);
    for i in 0..200 {
        cmd(&mut conn, &["SET", &format!("short:{i}"), "v", "PX", "100"]);
    }
    cmd(&mut conn, &["SELECT", "3"]);
    for i in 0..20 {
        cmd(&mut conn, &["SET", &format!("db3:{i}"), "v", "PX", "100"]);
    }
    cmd(&mut conn, &["SELECT", "0"]);
    // Some may already be gone; whatever is left in db0 beyond "forever" is volatile.
    let (fields, _) = info(&mut conn, &["keyspace"]);
    let (keys, expires) = keyspace_counts(&fields["db0"]);
    assert!(keys <= 201 && keys == expires + 1, "{}", fields["db0"]);
    // Generous wait for the background cycle (10 runs a second by default).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let db0 = int(&mut conn, &["DBSIZE"]);
        cmd(&mut conn, &["SELECT", "3"]);
        let db3 = int(&mut conn, &["DBSIZE"]);
        cmd(&mut conn, &["SELECT", "0"]);
        if db0 == 1 && db3 == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "keys with PX 100 not expired in the background: db0={db0} db3={db3}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(info_u64(&mut conn, "stats", "expired_keys"), 1 + 200 + 20);
    let (fields, _) = info(&mut conn, &["keyspace"]);
    assert_eq!(
        fields["db0"].split(",avg_ttl=").next().unwrap(),
        "keys=1,expires=0"
    );
    assert!(
        !fields.contains_key("db3"),
        "an empty database has no keyspace line"
    );
    assert_eq!(string(&mut conn, &["GET", "forever"]), "v");
}

/// `keys=N,expires=M,avg_ttl=T` -> (N, M).
fn keyspace_counts(line: &str) -> (u64, u64) {
    let parts: HashMap<&str, u64> = line
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("{line}"));
            (k, v.parse().unwrap_or_else(|_| panic!("{line}")))
        })
        .collect();
    assert_eq!(parts.len(), 3, "{line}");
    (parts["keys"], parts["expires"])
}

// ---------------------------------------------------------------------------------------
// CLIENT
// ---------------------------------------------------------------------------------------

/// CLIENT LIST / INFO lines as `field -> value` maps.
fn client_lines(text: &str) -> Vec<HashMap<String, String>> {
    assert!(
        text.ends_with('\n'),
        "every CLIENT LIST line ends with \\n: {text:?}"
    );
    text.lines()
        .map(|line| {
            line.split(' ')
                .map(|pair| {
                    let (k, v) = pair
                        .split_once('=')
                        .unwrap_or_else(|| panic!("not a field=value pair: {pair:?} in {line:?}"));
                    (k.to_string(), v.to_string())
                })
                .collect()
        })
        .collect()
}

#[test]
fn client_id_name_setinfo_list_and_info() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut a = server.connection();
    let mut b = server.connection();
    let id_a = int(&mut a, &["CLIENT", "ID"]);
    let id_b = int(&mut b, &["CLIENT", "ID"]);
    assert!(
        id_a > 0 && id_b > id_a,
        "ids grow with each connection: {id_a} {id_b}"
    );
    assert_eq!(int(&mut a, &["CLIENT", "ID"]), id_a, "the id is stable");

    // Names.
    assert_eq!(cmd(&mut a, &["CLIENT", "GETNAME"]), redis::Value::Nil);
    assert_eq!(
        cmd(&mut a, &["CLIENT", "SETNAME", "alpha"]),
        redis::Value::Okay
    );
    assert_eq!(string(&mut a, &["CLIENT", "GETNAME"]), "alpha");
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "SETNAME", "has space"]),
        "ERR Client names cannot contain spaces, newlines or special characters."
    );
    assert_eq!(
        string(&mut a, &["CLIENT", "GETNAME"]),
        "alpha",
        "a refused name changes nothing"
    );
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "SETNAME"]),
        "ERR wrong number of arguments for 'client|setname' command"
    );
    cmd(&mut b, &["CLIENT", "SETNAME", "beta"]);
    cmd(&mut b, &["CLIENT", "SETNAME", ""]);
    assert_eq!(
        cmd(&mut b, &["CLIENT", "GETNAME"]),
        redis::Value::Nil,
        "an empty name clears it"
    );
    cmd(&mut b, &["CLIENT", "SETNAME", "beta"]);

    // Library name and version (Redis 7.2's CLIENT SETINFO).
    assert_eq!(
        cmd(&mut a, &["CLIENT", "SETINFO", "LIB-NAME", "tests"]),
        redis::Value::Okay
    );
    assert_eq!(
        cmd(&mut a, &["CLIENT", "SETINFO", "lib-ver", "1.2.3"]),
        redis::Value::Okay
    );
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "SETINFO", "color", "red"]),
        "ERR Unrecognized option 'color'"
    );
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "SETINFO", "lib-name", "a b"]),
        "ERR lib-name cannot contain spaces, newlines or special characters."
    );

    // CLIENT INFO: one line about the caller.
    cmd(&mut a, &["SELECT", "2"]);
    let text = string(&mut a, &["CLIENT", "INFO"]);
    let lines = client_lines(&text);
    assert_eq!(lines.len(), 1, "{text}");
    let me = &lines[0];
    assert_eq!(me["id"], id_a.to_string());
    assert_eq!(me["name"], "alpha");
    assert_eq!(me["db"], "2");
    assert_eq!(me["cmd"], "client|info");
    assert_eq!(me["resp"], "2");
    assert_eq!(me["lib-name"], "tests");
    assert_eq!(me["lib-ver"], "1.2.3");
    assert_eq!(me["laddr"], format!("127.0.0.1:{}", server.port));
    assert!(me["addr"].starts_with("127.0.0.1:"));
    for field in [
        "fd",
        "age",
        "idle",
        "flags",
        "sub",
        "psub",
        "multi",
        "qbuf",
        "qbuf-free",
        "obl",
        "oll",
        "omem",
        "tot-mem",
        "events",
        "user",
        "redir",
    ] {
        assert!(me.contains_key(field), "CLIENT INFO lacks {field}: {text}");
    }
    assert_eq!(me["flags"], "N");
    assert_eq!(me["user"], "default");

    // CLIENT LIST: every connection, in id order, with its last command.
    cmd(&mut b, &["PING"]);
    let text = string(&mut a, &["CLIENT", "LIST"]);
    let lines = client_lines(&text);
    assert_eq!(lines.len(), 2, "{text}");
    let ids: Vec<i64> = lines.iter().map(|l| l["id"].parse().unwrap()).collect();
    assert_eq!(ids, vec![id_a, id_b]);
    assert_eq!(lines[0]["cmd"], "client|list");
    assert_eq!(lines[1]["name"], "beta");
    assert_eq!(lines[1]["cmd"], "ping");
    assert_eq!(lines[1]["db"], "0");
    assert_eq!(
        string(&mut a, &["CLIENT", "LIST", "TYPE", "normal"])
            .lines()
            .count(),
        2
    );
    assert_eq!(string(&mut a, &["CLIENT", "LIST", "TYPE", "pubsub"]), "");
    assert_eq!(string(&mut a, &["CLIENT", "LIST", "TYPE", "master"]), "");
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "LIST", "TYPE", "bogus"]),
        "ERR Unknown client type 'bogus'"
    );
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "LIST", "TYPE"]),
        "ERR syntax error"
    );

    // A RESP3 client shows resp=3.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.write_all(b"HELLO 3\r\n").unwrap();
    let hello = read_for(&mut stream, Duration::from_secs(2));
    assert!(hello.starts_with(b"%7\r\n"));
    let id_c = {
        let text = String::from_utf8_lossy(&hello).into_owned();
        let after = text.split("$2\r\nid\r\n:").nth(1).unwrap();
        after.split("\r\n").next().unwrap().parse::<i64>().unwrap()
    };
    let text = string(&mut a, &["CLIENT", "LIST"]);
    let lines = client_lines(&text);
    let c = lines.iter().find(|l| l["id"] == id_c.to_string()).unwrap();
    assert_eq!(c["resp"], "3");
    assert_eq!(c["cmd"], "hello");

    // Errors.
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try CLIENT HELP."
    );
    assert_eq!(
        cmd_err(&mut a, &["CLIENT", "ID", "extra"]),
        "ERR wrong number of arguments for 'client|id' command"
    );
    let help: Vec<String> = redis::from_redis_value(cmd(&mut a, &["CLIENT", "HELP"])).unwrap();
    assert!(help[0].starts_with("CLIENT <subcommand>"));
}

// ---------------------------------------------------------------------------------------
// CONFIG
// ---------------------------------------------------------------------------------------

fn config_get(conn: &mut redis::Connection, pattern: &str) -> HashMap<String, String> {
    let flat: Vec<String> =
        redis::from_redis_value(cmd(conn, &["CONFIG", "GET", pattern])).unwrap();
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect()
}

#[test]
fn config_get_set_resetstat() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--maxclients", "123"]);
    let mut conn = server.connection();

    // GET: exact names, globs, several patterns; values as Redis prints them.
    assert_eq!(
        config_get(&mut conn, "maxclients"),
        HashMap::from([("maxclients".into(), "123".into())])
    );
    assert_eq!(config_get(&mut conn, "appendonly")["appendonly"], "yes");
    assert_eq!(
        config_get(&mut conn, "appendfsync")["appendfsync"],
        "everysec"
    );
    assert_eq!(
        config_get(&mut conn, "proto-max-bulk-len")["proto-max-bulk-len"],
        "536870912"
    );
    assert_eq!(
        config_get(&mut conn, "client-query-buffer-limit")["client-query-buffer-limit"],
        "1073741824"
    );
    let dir_value = &config_get(&mut conn, "dir")["dir"];
    assert_eq!(
        std::fs::canonicalize(dir_value).unwrap(),
        std::fs::canonicalize(dir.path()).unwrap()
    );
    let globbed = config_get(&mut conn, "*max*");
    assert!(
        globbed.contains_key("maxclients") && globbed.contains_key("proto-max-bulk-len"),
        "{globbed:?}"
    );
    assert!(config_get(&mut conn, "no-such-thing").is_empty());
    let flat: Vec<String> =
        redis::from_redis_value(cmd(&mut conn, &["CONFIG", "GET", "hz", "timeout"])).unwrap();
    assert_eq!(flat.len(), 4);

    // SET takes effect and is visible to GET and INFO.
    assert_eq!(
        cmd(&mut conn, &["CONFIG", "SET", "hz", "20"]),
        redis::Value::Okay
    );
    assert_eq!(config_get(&mut conn, "hz")["hz"], "20");
    let (fields, _) = info(&mut conn, &["server"]);
    assert_eq!(fields["hz"], "20");
    assert_eq!(
        cmd(&mut conn, &["CONFIG", "SET", "maxclients", "50"]),
        redis::Value::Okay
    );
    let (fields, _) = info(&mut conn, &["clients"]);
    assert_eq!(fields["maxclients"], "50");
    assert_eq!(
        cmd(&mut conn, &["CONFIG", "SET", "APPENDFSYNC", "always"]),
        redis::Value::Okay
    );
    assert_eq!(
        config_get(&mut conn, "appendfsync")["appendfsync"],
        "always"
    );
    cmd(&mut conn, &["SET", "k", "v"]); // a write under the new policy still works
    assert_eq!(string(&mut conn, &["GET", "k"]), "v");

    // Files and addresses can't change at run time: Redis's exact errors.
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "dir", "/tmp"]),
        "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "appendfilename", "other.aof"]),
        "ERR CONFIG SET failed (possibly related to argument 'appendfilename') - can't set immutable config"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "databases", "4"]),
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config"
    );
    // What Redis changes at run time and Tessera only at start: the value in force is
    // taken as a no-op (as Redis's own test units set it), another refused.
    let port = config_get(&mut conn, "port")["port"].clone();
    assert_eq!(
        cmd(&mut conn, &["CONFIG", "SET", "port", &port]),
        redis::Value::Okay
    );
    // The server's log level changes at run time, as Redis's.
    assert_eq!(
        cmd(&mut conn, &["CONFIG", "SET", "loglevel", "WARNING"]),
        redis::Value::Okay
    );
    assert_eq!(config_get(&mut conn, "loglevel")["loglevel"], "warning");
    assert_eq!(
        cmd(&mut conn, &["CONFIG", "SET", "loglevel", "notice"]),
        redis::Value::Okay
    );
    assert_eq!(
        cmd_err(
            &mut conn,
            &["CONFIG", "SET", "loglevel", "notice", "port", "1"]
        ),
        "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "no-such-thing", "1"]),
        "ERR Unknown option or number of arguments for CONFIG SET - 'no-such-thing'"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "hz", "lots"]),
        "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "appendfsync", "sometimes"]),
        "ERR CONFIG SET failed (possibly related to argument 'appendfsync') - argument(s) must be one of the following: everysec, always, no"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "protected-mode", "maybe"]),
        "ERR CONFIG SET failed (possibly related to argument 'protected-mode') - argument must be 'yes' or 'no'"
    );
    // Redis's text, with Tessera's maximum (Redis: 9223372036854775807; a Tessera string
    // stops at 4 GB).
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "proto-max-bulk-len", "10"]),
        "ERR CONFIG SET failed (possibly related to argument 'proto-max-bulk-len') - argument must be between 1048576 and 4294967295 inclusive"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "hz"]),
        "ERR wrong number of arguments for 'config|set' command"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "hz", "5", "timeout"]),
        "ERR syntax error"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "GET"]),
        "ERR wrong number of arguments for 'config|get' command"
    );
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try CONFIG HELP."
    );

    // Several pairs at once: all or nothing.
    assert_eq!(
        cmd_err(
            &mut conn,
            &[
                "CONFIG",
                "SET",
                "hz",
                "30",
                "timeout",
                "7",
                "maxclients",
                "abc"
            ]
        ),
        "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument couldn't be parsed into an integer"
    );
    assert_eq!(
        config_get(&mut conn, "hz")["hz"],
        "20",
        "a failed multi-SET changes nothing"
    );
    assert_eq!(config_get(&mut conn, "timeout")["timeout"], "0");
    assert_eq!(config_get(&mut conn, "maxclients")["maxclients"], "50");
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "hz", "30", "dir", "/tmp"]),
        "ERR CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
    );
    assert_eq!(config_get(&mut conn, "hz")["hz"], "20");
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "SET", "hz", "30", "HZ", "40"]),
        "ERR CONFIG SET failed (possibly related to argument 'HZ') - duplicate parameter"
    );
    assert_eq!(config_get(&mut conn, "hz")["hz"], "20");
    assert_eq!(
        cmd(
            &mut conn,
            &[
                "CONFIG",
                "SET",
                "hz",
                "30",
                "timeout",
                "7",
                "maxclients",
                "60"
            ]
        ),
        redis::Value::Okay
    );
    assert_eq!(config_get(&mut conn, "hz")["hz"], "30");
    assert_eq!(config_get(&mut conn, "timeout")["timeout"], "7");
    assert_eq!(config_get(&mut conn, "maxclients")["maxclients"], "60");

    // RESETSTAT zeroes the counters INFO stats reports.
    cmd(&mut conn, &["GET", "k"]);
    cmd(&mut conn, &["GET", "missing"]);
    cmd_err(&mut conn, &["NOSUCHCOMMAND"]);
    let (before, _) = info(&mut conn, &["stats"]);
    assert!(before["total_commands_processed"].parse::<u64>().unwrap() > 10);
    assert!(before["keyspace_hits"].parse::<u64>().unwrap() >= 1);
    assert!(before["keyspace_misses"].parse::<u64>().unwrap() >= 1);
    assert!(before["total_error_replies"].parse::<u64>().unwrap() >= 1);
    assert!(before["total_connections_received"].parse::<u64>().unwrap() >= 1);
    assert_eq!(cmd(&mut conn, &["CONFIG", "RESETSTAT"]), redis::Value::Okay);
    let (after, _) = info(&mut conn, &["stats"]);
    // RESETSTAT itself is counted after the reset, as in Redis; INFO is not counted yet.
    assert_eq!(after["total_commands_processed"], "1");
    for field in [
        "keyspace_hits",
        "keyspace_misses",
        "total_error_replies",
        "expired_keys",
        "rejected_connections",
        "total_connections_received",
    ] {
        assert_eq!(after[field], "0", "{field} after CONFIG RESETSTAT");
    }
    assert_eq!(
        cmd_err(&mut conn, &["CONFIG", "RESETSTAT", "now"]),
        "ERR wrong number of arguments for 'config|resetstat' command"
    );
}

// ---------------------------------------------------------------------------------------
// INFO
// ---------------------------------------------------------------------------------------

#[test]
fn info_sections_carry_redis_field_names() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let mut other = server.connection();
    cmd(&mut other, &["PING"]);

    let (fields, headers) = info(&mut conn, &[]);
    for section in [
        "Server",
        "Clients",
        "Memory",
        "Persistence",
        "Stats",
        "Keyspace",
    ] {
        assert!(
            headers.iter().any(|h| h == section),
            "INFO lacks # {section}: {headers:?}"
        );
    }
    assert_eq!(fields["redis_version"], "7.0.15");
    assert_eq!(fields["redis_mode"], "standalone");
    assert_eq!(fields["tcp_port"], server.port.to_string());
    assert_eq!(fields["process_id"], server.pid().to_string());
    assert_eq!(fields["run_id"].len(), 40);
    assert!(fields["uptime_in_seconds"].parse::<u64>().is_ok());
    assert_eq!(fields["connected_clients"], "2");
    assert_eq!(fields["maxclients"], "10000");
    assert!(fields["used_memory"].parse::<u64>().unwrap() > 0);
    assert!(fields["used_memory_rss"].parse::<u64>().unwrap() > 0);
    assert!(fields.contains_key("used_memory_human"));
    assert!(fields["mem_aof_buffer"].parse::<u64>().is_ok());
    assert_eq!(fields["aof_delayed_fsync"], "0");
    assert_eq!(fields["aof_enabled"], "1");
    assert_eq!(fields["aof_last_write_status"], "ok");
    assert_eq!(fields["loading"], "0");
    assert!(fields.contains_key("rdb_changes_since_last_save"));
    assert!(fields.contains_key("aof_current_size"));
    for stat in [
        "total_connections_received",
        "total_commands_processed",
        "instantaneous_ops_per_sec",
        "total_net_input_bytes",
        "total_net_output_bytes",
        "rejected_connections",
        "expired_keys",
        "evicted_keys",
        "keyspace_hits",
        "keyspace_misses",
        "total_error_replies",
    ] {
        assert!(
            fields[stat].parse::<u64>().is_ok(),
            "{stat}: {:?}",
            fields.get(stat)
        );
    }
    assert!(
        !fields.keys().any(|k| k.starts_with("db")),
        "no keys, no keyspace lines"
    );

    // Keyspace lines and the counters that move with commands.
    cmd(&mut conn, &["SET", "a", "1"]);
    cmd(&mut conn, &["SET", "b", "2", "EX", "1000"]);
    cmd(&mut conn, &["SET", "c", "3", "PX", "1000000"]);
    cmd(&mut conn, &["SELECT", "5"]);
    cmd(&mut conn, &["SET", "x", "1"]);
    cmd(&mut conn, &["SELECT", "0"]);
    cmd(&mut conn, &["GET", "a"]);
    cmd(&mut conn, &["GET", "nope"]);
    let (fields, headers) = info(&mut conn, &["keyspace"]);
    assert_eq!(headers, vec!["Keyspace"]);
    let db0 = &fields["db0"];
    let (counts, avg) = db0
        .split_once(",avg_ttl=")
        .unwrap_or_else(|| panic!("{db0}"));
    assert_eq!(counts, "keys=3,expires=2");
    assert!(avg.parse::<u64>().is_ok(), "{db0}");
    assert!(fields["db5"].starts_with("keys=1,expires=0,avg_ttl="));
    let (stats, _) = info(&mut conn, &["stats"]);
    assert_eq!(stats["keyspace_hits"], "1");
    assert_eq!(stats["keyspace_misses"], "1");
    let (persistence, _) = info(&mut conn, &["persistence"]);
    assert!(
        persistence["rdb_changes_since_last_save"]
            .parse::<u64>()
            .unwrap()
            >= 4
    );

    // Several sections, any case; unknown sections are empty; all/everything.
    let (_, headers) = info(&mut conn, &["SERVER", "clients"]);
    assert_eq!(headers, vec!["Server", "Clients"]);
    let (_, headers) = info(&mut conn, &["memory"]);
    assert_eq!(headers, vec!["Memory"]);
    assert_eq!(string(&mut conn, &["INFO", "no-such-section"]), "");
    for all in ["all", "everything", "default"] {
        let (_, headers) = info(&mut conn, &[all]);
        assert!(headers.len() >= 6, "INFO {all}: {headers:?}");
    }
    // The raw reply is a bulk string of CRLF-terminated lines.
    let raw = raw_request(server.port, b"INFO clients\r\n");
    let text = String::from_utf8_lossy(&raw);
    assert!(
        text.starts_with('$') && text.contains("\r\n# Clients\r\nconnected_clients:"),
        "{text}"
    );
}

#[test]
fn info_without_the_append_only_log() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let mut conn = server.connection();
    let (fields, _) = info(&mut conn, &["persistence"]);
    assert_eq!(fields["aof_enabled"], "0");
    assert!(!fields.contains_key("aof_current_size"));
}

// ---------------------------------------------------------------------------------------
// COMMAND, TIME, LASTSAVE
// ---------------------------------------------------------------------------------------

#[test]
fn command_count_info_docs_shapes() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let count = int(&mut conn, &["COMMAND", "COUNT"]);
    let all = match cmd(&mut conn, &["COMMAND"]) {
        redis::Value::Array(items) => items,
        other => panic!("COMMAND: {other:?}"),
    };
    assert_eq!(all.len() as i64, count);
    // COMMAND LIST names subcommands too (`config|get`), as Redis 7.0's does; COUNT does
    // not count them.
    let names: Vec<String> = redis::from_redis_value(cmd(&mut conn, &["COMMAND", "LIST"])).unwrap();
    let top_level = names.iter().filter(|name| !name.contains('|')).count();
    assert_eq!(top_level as i64, count);
    for must in [
        "get", "set", "del", "expire", "ping", "info", "config", "command", "client", "hello",
    ] {
        assert!(names.iter().any(|n| n == must), "COMMAND LIST lacks {must}");
    }

    // COMMAND INFO: per name, a 10-element array as in Redis 7; unknown names are nil.
    let reply = cmd(
        &mut conn,
        &["COMMAND", "INFO", "GET", "no-such-command", "set"],
    );
    let redis::Value::Array(entries) = reply else {
        panic!("COMMAND INFO: {reply:?}")
    };
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[1], redis::Value::Nil);
    let redis::Value::Array(get) = &entries[0] else {
        panic!("{:?}", entries[0])
    };
    assert_eq!(get.len(), 10);
    let name: String = redis::from_redis_value(get[0].clone()).unwrap();
    assert_eq!(name, "get");
    assert_eq!(get[1], redis::Value::Int(2));
    let flags: Vec<String> = redis::from_redis_value(get[2].clone()).unwrap();
    assert!(flags.contains(&"readonly".to_string()), "{flags:?}");
    assert_eq!(
        &get[3..6],
        &[
            redis::Value::Int(1),
            redis::Value::Int(1),
            redis::Value::Int(1)
        ]
    );
    for extra in &get[6..10] {
        assert!(
            matches!(extra, redis::Value::Array(_) | redis::Value::Set(_)),
            "{extra:?}"
        );
    }
    let redis::Value::Array(set) = &entries[2] else {
        panic!("{:?}", entries[2])
    };
    assert_eq!(set[1], redis::Value::Int(-3));
    let flags: Vec<String> = redis::from_redis_value(set[2].clone()).unwrap();
    assert!(flags.contains(&"write".to_string()), "{flags:?}");
    // The nil for an unknown command is a null bulk on the wire, as in Redis 7.
    let raw = raw_request(server.port, b"COMMAND INFO no-such-command\r\n");
    assert_eq!(raw, b"*1\r\n$-1\r\n");

    // COMMAND DOCS: name -> map with summary, since, group.
    let reply = cmd(&mut conn, &["COMMAND", "DOCS", "get", "no-such-command"]);
    let docs: Vec<redis::Value> = redis::from_redis_value(reply).unwrap();
    assert_eq!(docs.len(), 2, "one name/doc pair: {docs:?}");
    let name: String = redis::from_redis_value(docs[0].clone()).unwrap();
    assert_eq!(name, "get");
    let doc: HashMap<String, redis::Value> = redis::from_redis_value(docs[1].clone()).unwrap();
    for key in ["summary", "since", "group"] {
        assert!(
            doc.contains_key(key),
            "COMMAND DOCS get lacks {key}: {doc:?}"
        );
    }
    let group: String = redis::from_redis_value(doc["group"].clone()).unwrap();
    assert_eq!(group, "string");

    assert_eq!(
        cmd_err(&mut conn, &["COMMAND", "COUNT", "x"]),
        "ERR wrong number of arguments for 'command|count' command"
    );
    assert_eq!(
        cmd_err(&mut conn, &["COMMAND", "NOPE"]),
        "ERR unknown subcommand 'NOPE'. Try COMMAND HELP."
    );
    let help: Vec<String> = redis::from_redis_value(cmd(&mut conn, &["COMMAND", "HELP"])).unwrap();
    assert!(help[0].starts_with("COMMAND <subcommand>"));
}

#[test]
fn time_and_lastsave() {
    let dir = temp_dir();
    let started = unix_now();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let raw = raw_request(server.port, b"TIME\r\n");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let parts: Vec<&str> = text.split("\r\n").collect();
    // *2, $len, seconds, $len, microseconds: two bulk strings, as Redis.
    assert_eq!(parts[0], "*2", "{text}");
    assert!(
        parts[1].starts_with('$') && parts[3].starts_with('$'),
        "{text}"
    );
    let seconds: i64 = parts[2].parse().unwrap();
    let micros: i64 = parts[4].parse().unwrap();
    assert!(
        (seconds - unix_now()).abs() <= 60,
        "TIME {seconds} is far from the clock"
    );
    assert!((0..1_000_000).contains(&micros));
    let t: Vec<String> = redis::from_redis_value(cmd(&mut conn, &["TIME"])).unwrap();
    assert_eq!(t.len(), 2);
    assert_eq!(
        cmd_err(&mut conn, &["TIME", "now"]),
        "ERR wrong number of arguments for 'time' command"
    );

    let lastsave = int(&mut conn, &["LASTSAVE"]);
    assert!(
        lastsave >= started - 60 && lastsave <= unix_now() + 60,
        "LASTSAVE {lastsave} is not around start-up ({started})"
    );
    let (fields, _) = info(&mut conn, &["persistence"]);
    assert_eq!(fields["rdb_last_save_time"], lastsave.to_string());
}

// ---------------------------------------------------------------------------------------
// SHUTDOWN and the command line
// ---------------------------------------------------------------------------------------

#[test]
fn shutdown_nosave_makes_the_process_exit() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    cmd(&mut conn, &["SET", "k", "v"]);
    // Refused forms leave the server running.
    assert_eq!(
        cmd_err(&mut conn, &["SHUTDOWN", "bogus"]),
        "ERR syntax error"
    );
    assert_eq!(
        cmd_err(&mut conn, &["SHUTDOWN", "NOSAVE", "SAVE"]),
        "ERR syntax error"
    );
    assert_eq!(
        cmd_err(&mut conn, &["SHUTDOWN", "ABORT", "NOW"]),
        "ERR syntax error"
    );
    assert_eq!(
        cmd_err(&mut conn, &["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress."
    );
    assert_eq!(string(&mut conn, &["PING"]), "PONG");

    // SHUTDOWN NOSAVE: no reply, the connection closes and the process exits cleanly.
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.write_all(b"SHUTDOWN NOSAVE\r\n").unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut buf = Vec::new();
    let _ = stream.read_to_end(&mut buf);
    assert!(
        buf.is_empty(),
        "SHUTDOWN replied {:?}",
        String::from_utf8_lossy(&buf)
    );
    let status = wait_exit(&mut server, Duration::from_secs(30)).expect("the server did not exit");
    assert!(status.success(), "exit status {status:?}");
    assert!(
        TcpStream::connect(("127.0.0.1", server.port)).is_err(),
        "still listening"
    );
}

#[test]
fn help_and_version_print_and_exit_zero() {
    for flag in ["--help", "-h"] {
        let out = Command::new(SERVER_BIN).arg(flag).output().unwrap();
        assert!(out.status.success(), "{flag}: {:?}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage: tessera-server"), "{flag}: {text}");
        assert!(text.contains("--port"), "{flag}: {text}");
    }
    for flag in ["--version", "-v"] {
        let out = Command::new(SERVER_BIN).arg(flag).output().unwrap();
        assert!(out.status.success(), "{flag}: {:?}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("Tessera server v=") && text.contains(env!("CARGO_PKG_VERSION")),
            "{flag}: {text}"
        );
    }
}

#[test]
fn bad_directives_stop_start_up_naming_the_line() {
    let dir = temp_dir();
    let expect_failure = |args: &[&str], wanted: &[&str]| {
        let started = Instant::now();
        let log = match try_start_server(dir.path(), args) {
            Ok(mut server) => {
                server.kill9();
                panic!("server started despite {args:?}");
            }
            Err(log) => log,
        };
        assert!(started.elapsed() < Duration::from_secs(30));
        for text in wanted {
            assert!(
                log.contains(text),
                "{args:?}: the message lacks {text:?}:\n{log}"
            );
        }
    };
    // On the command line.
    expect_failure(
        &["--no-such-directive", "1"],
        &[
            "FATAL CONFIG FILE ERROR",
            "Reading the command line arguments",
            "no-such-directive",
            "Bad directive or wrong number of arguments",
        ],
    );
    expect_failure(
        &["--maxclients", "many"],
        &[
            ">>> 'maxclients",
            "argument couldn't be parsed into an integer",
        ],
    );
    expect_failure(
        &["--appendonly", "maybe"],
        &["appendonly", "argument must be 'yes' or 'no'"],
    );
    expect_failure(
        &["--appendfsync", "sometimes"],
        &["appendfsync", "everysec, always, no"],
    );
    expect_failure(
        &["--client-query-buffer-limit", "lots"],
        &["client-query-buffer-limit", "memory value"],
    );
    expect_failure(&["--hz", "1", "2"], &["hz", "wrong number of arguments"]);

    // In a config file (which must come first, before any --flag): the message names the
    // line number and shows the line.
    let conf = dir.path().join("bad.conf");
    std::fs::write(
        &conf,
        "# a comment\n\nmaxclients 100\nappendfsync sometimes\nhz 20\n",
    )
    .unwrap();
    let failed = |conf: &std::path::Path, wanted: &[&str]| {
        let out = run_to_exit(
            Command::new(SERVER_BIN)
                .arg(conf)
                .args(["--port", "0"])
                .arg("--dir")
                .arg(dir.path()),
        );
        assert!(!out.status.success());
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for want in wanted {
            assert!(
                text.contains(want),
                "{}: the message lacks {want:?}:\n{text}",
                conf.display()
            );
        }
    };
    failed(
        &conf,
        &[
            "Reading the configuration file, at line 4",
            ">>> 'appendfsync sometimes'",
            "everysec, always, no",
        ],
    );
    std::fs::write(&conf, "port 0\nnot-a-directive yes\n").unwrap();
    failed(
        &conf,
        &["at line 2", ">>> 'not-a-directive yes'", "Bad directive"],
    );
    std::fs::write(&conf, "requirepass \"unterminated\n").unwrap();
    failed(&conf, &["at line 1", "Unbalanced quotes"]);
    failed(&dir.path().join("missing.conf"), &["missing.conf"]);
    // A good file starts, and command-line flags after it override it.
    std::fs::write(&conf, "maxclients 100\nhz 20\n").unwrap();
    let mut child = Command::new(SERVER_BIN)
        .arg(&conf)
        .args(["--port", "0", "--hz", "15"])
        .arg("--dir")
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if let Some(port) = line.split("Ready to accept connections on port ").nth(1) {
                let _ = sender.send(port.trim().parse::<u16>().unwrap());
            }
        }
    });
    let port = receiver.recv_timeout(Duration::from_secs(60));
    let checked = port.map(|port| {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
        let mut conn = client.get_connection().unwrap();
        (
            config_get(&mut conn, "maxclients")["maxclients"].clone(),
            config_get(&mut conn, "hz")["hz"].clone(),
        )
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        checked.expect("server with a good config file did not start"),
        ("100".into(), "15".into())
    );

    // A command-line flag after a good file is checked too.
    std::fs::write(&conf, "maxclients 100\n").unwrap();
    let out = run_to_exit(
        Command::new(SERVER_BIN)
            .arg(&conf)
            .args(["--port", "0", "--hz", "fast"]),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Reading the command line arguments"));
}

/// Runs the binary expecting it to exit (as on a configuration error); kills it after a
/// generous wait if it does not.
fn run_to_exit(command: &mut Command) -> std::process::Output {
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    match receiver.recv_timeout(Duration::from_secs(30)) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("the server kept running instead of refusing its configuration");
        }
    }
}

#[test]
fn object_answers_encoding_refcount_and_errors_as_redis() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    cmd(&mut conn, &["SET", "small", "9999"]);
    cmd(&mut conn, &["SET", "int", "10000"]);
    cmd(&mut conn, &["SET", "short", "hello"]);
    cmd(&mut conn, &["SET", "long", &"x".repeat(45)]);
    for (key, encoding) in [
        ("small", "int"),
        ("int", "int"),
        ("short", "embstr"),
        ("long", "raw"),
    ] {
        assert_eq!(string(&mut conn, &["OBJECT", "ENCODING", key]), encoding);
    }
    assert_eq!(int(&mut conn, &["OBJECT", "REFCOUNT", "small"]), 2147483647);
    assert_eq!(int(&mut conn, &["OBJECT", "REFCOUNT", "int"]), 1);
    assert_eq!(int(&mut conn, &["object", "idletime", "short"]), 0);
    assert_eq!(
        cmd(&mut conn, &["OBJECT", "ENCODING", "missing"]),
        redis::Value::Nil
    );
    assert!(
        cmd_err(&mut conn, &["OBJECT", "FREQ", "short"])
            .starts_with("ERR An LFU maxmemory policy is not selected")
    );
    assert_eq!(
        cmd_err(&mut conn, &["OBJECT", "foo"]),
        "ERR unknown subcommand 'foo'. Try OBJECT HELP."
    );
    assert_eq!(
        cmd_err(&mut conn, &["OBJECT", "ENCODING"]),
        "ERR wrong number of arguments for 'object|encoding' command"
    );
    let help = cmd(&mut conn, &["OBJECT", "HELP"]);
    let redis::Value::Array(lines) = help else {
        panic!("{help:?}")
    };
    assert_eq!(lines.len(), 15);
}

#[test]
fn encoding_thresholds_are_directives_under_both_names() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--hash-max-ziplist-entries", "16"]);
    let mut conn = server.connection();
    let get = |conn: &mut redis::Connection, name: &str| -> Vec<String> {
        redis::from_redis_value(cmd(conn, &["CONFIG", "GET", name])).unwrap()
    };
    assert_eq!(
        get(&mut conn, "hash-max-listpack-entries"),
        ["hash-max-listpack-entries", "16"]
    );
    cmd(&mut conn, &["CONFIG", "SET", "list-max-ziplist-size", "-3"]);
    assert_eq!(
        get(&mut conn, "list-max-listpack-size"),
        ["list-max-listpack-size", "-3"]
    );
    for (name, default) in [
        ("hash-max-listpack-value", "64"),
        ("zset-max-listpack-entries", "128"),
        ("zset-max-ziplist-value", "64"),
        ("set-max-intset-entries", "512"),
        ("list-compress-depth", "0"),
    ] {
        assert_eq!(get(&mut conn, name), [name, default]);
    }
    assert_eq!(
        cmd_err(
            &mut conn,
            &["CONFIG", "SET", "zset-max-listpack-value", "-1"]
        ),
        "ERR CONFIG SET failed (possibly related to argument 'zset-max-listpack-value') - \
         argument must be a memory value"
    );
    // A memory value, as in Redis: units are read.
    cmd(
        &mut conn,
        &["CONFIG", "SET", "zset-max-listpack-value", "1kb"],
    );
    assert_eq!(
        get(&mut conn, "zset-max-listpack-value"),
        ["zset-max-listpack-value", "1024"]
    );
}
