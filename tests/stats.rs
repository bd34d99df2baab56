//! The operator's statistics against a real redis-server 7.0: INFO's sections (which a
//! set of names selects, in Redis's order), commandstats / errorstats / total_error_replies
//! after the same commands (calls, rejected and failed calls as Redis counts them), the
//! slow log's entries (arguments truncated and secrets redacted as Redis does), LATENCY's
//! replies, and CONFIG RESETSTAT.

mod common;

use common::raw_client::{Conn, V};
use common::side_by_side::{both, words};

/// INFO's text, as lines.
fn info(conn: &mut Conn, sections: &str) -> Vec<String> {
    let mut command = vec!["INFO"];
    command.extend(sections.split(' ').filter(|s| !s.is_empty()));
    conn.cmd(&command)
        .text()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn info_selects_redis_s_sections_in_redis_s_order() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for sections in [
        "",
        "default",
        "all",
        "everything",
        "commandstats",
        "server clients",
        "CPU latencystats",
        "keyspace server",
        "default commandstats",
        "nosuch",
        "cluster modules errorstats",
    ] {
        let headers = |conn: &mut Conn| -> Vec<String> {
            info(conn, sections)
                .into_iter()
                .filter(|line| line.starts_with('#'))
                .collect()
        };
        assert_eq!(headers(&mut ours), headers(&mut theirs), "INFO {sections}");
    }
    assert!(info(&mut ours, "cluster").contains(&"cluster_enabled:0".to_string()));
    // Within a section, Tessera's fields (but its own `tessera_*`) are Redis's, in Redis's
    // order; the fields of Redis's it lacks are printed. (Persistence is left out: this
    // Redis runs without its AOF, whose fields Tessera, with its log on, shows.)
    for section in ["server", "clients", "memory", "stats", "replication", "cpu"] {
        let names = |conn: &mut Conn| -> Vec<String> {
            info(conn, section)
                .into_iter()
                .filter(|line| !line.starts_with('#') && !line.is_empty())
                .filter_map(|line| line.split_once(':').map(|(name, _)| name.to_string()))
                .filter(|name| !name.starts_with("tessera_"))
                .collect()
        };
        let (mine, redis) = (names(&mut ours), names(&mut theirs));
        let mut at = 0;
        for name in &mine {
            match redis[at..].iter().position(|r| r == name) {
                Some(offset) => at += offset + 1,
                None => panic!("INFO {section}: {name} is not Redis's, or out of Redis's order"),
            }
        }
        let lacking: Vec<&String> = redis.iter().filter(|r| !mine.contains(r)).collect();
        if !lacking.is_empty() {
            eprintln!("INFO {section}: Redis's fields Tessera lacks: {lacking:?}");
        }
    }
}

/// The counters of `INFO commandstats` and `errorstats` without the times, sorted, and
/// `total_error_replies`.
fn counters(conn: &mut Conn) -> Vec<String> {
    let mut lines: Vec<String> = info(conn, "commandstats errorstats stats")
        .into_iter()
        .filter(|line| {
            line.starts_with("cmdstat_")
                || line.starts_with("errorstat_")
                || line.starts_with("total_error_replies:")
        })
        .map(|line| {
            // cmdstat_x:calls=1,usec=2,usec_per_call=2.00,rejected_calls=0,failed_calls=0
            line.split(',')
                .filter(|field| !field.starts_with("usec"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn command_and_error_counters_match_redis() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let script = "return redis.call('INCR', KEYS[1])";
    let sequence = [
        "SET a 1",
        "GET a",
        "GET",
        "NOSUCH x",
        "LPUSH a x",
        "CONFIG GET maxmemory",
        "CONFIG NOSUCH",
        "OBJECT ENCODING a",
        "SET s notanumber",
        "MULTI",
        "INCR s",
        "SET b 2",
        "EXEC",
        "MULTI",
        "GET",
        "EXEC",
        "CLIENT ID",
        "SUBSCRIBE",
    ];
    for resp3 in [false, true] {
        let mut ours = Conn::new(server.port);
        let mut theirs = Conn::new(redis.port);
        for conn in [&mut ours, &mut theirs] {
            if resp3 {
                conn.cmd(&["HELLO", "3"]);
            }
            conn.cmd(&["CONFIG", "RESETSTAT"]);
            for line in sequence {
                conn.cmd(&words(line));
            }
            conn.cmd(&["EVAL", script, "1", "s"]);
            conn.cmd(&["EVAL", script, "1", "a"]);
            // A command's error the script returns was counted when it failed; the
            // script fails all the same (once per error, at any depth).
            conn.cmd(&["EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "s"]);
            let two = "return {redis.pcall('INCR', KEYS[1]), redis.pcall('INCR', KEYS[1])}";
            conn.cmd(&["EVAL", two, "1", "s"]);
            // A subcommand scripts may not run (Redis's `noscript` CLUSTER RESET).
            conn.cmd(&["EVAL", "return redis.call('CLUSTER', 'RESET')", "0"]);
        }
        assert_eq!(
            counters(&mut ours),
            counters(&mut theirs),
            "RESP{}",
            if resp3 { 3 } else { 2 }
        );
    }
    // CONFIG RESETSTAT clears them (the RESETSTAT itself is then counted, as in Redis).
    let mut ours = Conn::new(server.port);
    ours.cmd(&["CONFIG", "RESETSTAT"]);
    let left = counters(&mut ours);
    assert!(
        left.contains(&"total_error_replies:0".to_string()),
        "{left:?}"
    );
    assert!(
        !left.iter().any(|l| l.starts_with("cmdstat_get:")),
        "{left:?}"
    );
}

/// A slow log entry without its id, time, duration and client address (which differ).
fn entry_shape(entry: &V) -> Vec<V> {
    let fields = entry.items();
    assert_eq!(fields.len(), 6, "{entry:?}");
    vec![fields[3].clone(), fields[5].clone()]
}

#[test]
fn slow_log_matches_redis() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let long = "x".repeat(200);
    let mut many: Vec<String> = vec!["RPUSH".into(), "list".into()];
    many.extend((0..40).map(|i| format!("e{i}")));
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for conn in [&mut ours, &mut theirs] {
        conn.cmd(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        conn.cmd(&["CONFIG", "SET", "slowlog-max-len", "5"]);
        conn.cmd(&["SLOWLOG", "RESET"]);
        conn.cmd(&["CLIENT", "SETNAME", "probe"]);
        conn.cmd(&["SET", "k", &long]);
        conn.cmd(&many);
        conn.cmd(&["ACL", "SETUSER", "u", "on", ">secret", "~*", "+@all"]);
        conn.cmd(&["AUTH", "u", "secret"]);
        conn.cmd(&["EXEC"]);
    }
    let entries = |conn: &mut Conn| -> Vec<Vec<V>> {
        conn.cmd(&["SLOWLOG", "GET", "-1"])
            .items()
            .iter()
            .map(entry_shape)
            .collect()
    };
    assert_eq!(entries(&mut ours), entries(&mut theirs));
    let found = |conn: &mut Conn| {
        [
            "SLOWLOG LEN",
            "SLOWLOG GET 1 2",
            "SLOWLOG GET -2",
            "SLOWLOG GET x",
            "SLOWLOG NOSUCH",
            "SLOWLOG LEN x",
            "SLOWLOG HELP",
            "SLOWLOG RESET",
            "SLOWLOG LEN",
        ]
        .map(|line| conn.cmd(&words(line)))
    };
    assert_eq!(found(&mut ours), found(&mut theirs));
    // The refused requests above (unknown subcommand, wrong arity) were not logged; the
    // RESET and the LEN were.
    assert_eq!(entries(&mut ours), entries(&mut theirs));

    // Secrets, where each command's parser finds them (a command stopped by a syntax
    // error first keeps its arguments).
    // (MIGRATE finds no key and answers NOKEY before it connects anywhere.)
    for conn in [&mut ours, &mut theirs] {
        conn.cmd(&["CONFIG", "SET", "slowlog-max-len", "20"]);
        conn.cmd(&["SLOWLOG", "RESET"]);
        for line in [
            "MIGRATE 127.0.0.1 1 key 9 5000",
            "MIGRATE 127.0.0.1 1 key 9 5000 AUTH user",
            "MIGRATE 127.0.0.1 1 key 9 5000 COPY AUTH2 user password",
            "MIGRATE 127.0.0.1 1 \"\" 9 5000 KEYS AUTH x",
            "AUTH a b c",
            "HELLO 3 AUTH default wrong SETNAME n",
            "HELLO 9 AUTH default wrong",
            "CONFIG SET masteruser someone masterauth secret",
            "CONFIG SET masterauth",
        ] {
            conn.cmd(&words(line));
        }
    }
    assert_eq!(entries(&mut ours), entries(&mut theirs));
}

#[test]
fn latency_replies_match_redis() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    for resp3 in [false, true] {
        let mut ours = Conn::new(server.port);
        let mut theirs = Conn::new(redis.port);
        let replies = |conn: &mut Conn| {
            if resp3 {
                conn.cmd(&["HELLO", "3"]);
            }
            conn.cmd(&["CONFIG", "RESETSTAT"]);
            conn.cmd(&["SET", "a", "1"]);
            conn.cmd(&["GET", "a"]);
            conn.cmd(&["GET", "a"]);
            let lines = [
                "LATENCY LATEST",
                "LATENCY HISTORY command",
                "LATENCY RESET",
                "LATENCY RESET command fast-command",
                "LATENCY GRAPH command",
                "LATENCY DOCTOR",
                "LATENCY HELP",
                "LATENCY NOSUCH",
                "LATENCY HISTORY",
                "LATENCY HISTOGRAM nosuch",
            ];
            let mut replies: Vec<V> = lines.iter().map(|l| conn.cmd(&words(l))).collect();
            // The histogram's counts and shape (its buckets depend on the time taken).
            let histogram = conn.cmd(&["LATENCY", "HISTOGRAM", "get", "set"]);
            let items = histogram.items();
            assert_eq!(items.len(), 4, "{histogram:?}");
            for pair in items.chunks(2) {
                let fields = pair[1].items();
                assert_eq!(fields[0].text(), "calls");
                assert_eq!(fields[2].text(), "histogram_usec");
                replies.push(pair[0].clone());
                replies.push(fields[1].clone());
            }
            replies
        };
        let (a, b) = (replies(&mut ours), replies(&mut theirs));
        assert_eq!(a, b, "RESP{}", if resp3 { 3 } else { 2 });
    }
}

/// INFO memory counts the scripts' cache and the functions' libraries as Redis does.
#[test]
fn info_counts_cached_scripts_and_functions_as_redis() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let fields = [
        "number_of_cached_scripts",
        "number_of_functions",
        "number_of_libraries",
    ];
    for port in [server.port, redis.port] {
        let mut conn = Conn::new(port);
        for n in 0..3 {
            conn.cmd(&["SCRIPT", "LOAD", &format!("return {n}")]);
        }
        conn.cmd(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=lib\nredis.register_function('a', function() return 1 end)\n\
             redis.register_function('b', function() return 2 end)",
        ]);
        let values = |conn: &mut Conn| -> Vec<String> {
            let lines = info(conn, "memory");
            fields
                .iter()
                .map(|field| {
                    lines
                        .iter()
                        .find_map(|line| line.strip_prefix(&format!("{field}:")))
                        .unwrap_or_else(|| panic!("port {port}: no {field}"))
                        .to_string()
                })
                .collect()
        };
        assert_eq!(values(&mut conn), ["3", "2", "1"], "port {port}");
        conn.cmd(&["SCRIPT", "FLUSH", "ASYNC"]);
        conn.cmd(&["FUNCTION", "FLUSH"]);
        assert_eq!(values(&mut conn), ["0", "0", "0"], "port {port}");
    }
}

/// CONFIG RESETSTAT zeroes the sync and persistence counters too (Redis's
/// `resetServerStats`): a full sync served (`sync_full`), a partial one refused
/// (`sync_partial_err`), a SAVE (`rdb_saves`).
#[test]
fn resetstat_zeroes_the_sync_and_save_counters_as_redis_does() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let counted = [
        "sync_full",
        "sync_partial_ok",
        "sync_partial_err",
        "rdb_saves",
    ];
    let observe = |port: u16| -> Vec<Vec<String>> {
        let mut conn = Conn::new(port);
        conn.cmd(&["SET", "k", "v"]);
        // A PSYNC of an unknown history: refused (sync_partial_err), then served in full
        // (sync_full); the link is dropped once the snapshot's header came.
        let mut replica = Conn::new(port);
        replica.send(&[b"PSYNC", b"0123456789012345678901234567890123456789", b"1"]);
        let header = replica.read();
        assert!(
            matches!(&header, V::Simple(line) if line.starts_with("FULLRESYNC")),
            "{header:?}"
        );
        drop(replica);
        conn.cmd(&["SAVE"]);
        let mut seen = Vec::new();
        for _ in 0..2 {
            seen.push(
                info(&mut conn, "stats persistence")
                    .into_iter()
                    .filter(|line| counted.iter().any(|c| line.starts_with(&format!("{c}:"))))
                    .collect(),
            );
            conn.cmd(&["CONFIG", "RESETSTAT"]);
        }
        seen
    };
    let ours = observe(server.port);
    let theirs = observe(redis.port);
    assert_eq!(ours, theirs);
    assert!(ours[0].contains(&"sync_full:1".to_string()), "{ours:?}");
    assert!(ours[1].contains(&"sync_full:0".to_string()), "{ours:?}");
}
