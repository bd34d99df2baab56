//! MEMORY and LOLWUT against a real redis-server 7.0: the reply shapes, field names and
//! errors are Redis's; the numbers (MEMORY USAGE, STATS) and LOLWUT's art are Tessera's
//! own, so they are checked for what they must do — grow with the data, be nil for a
//! missing key, add up, honour SAMPLES — rather than compared.

mod common;

use common::raw_client::{Conn, V};
use common::side_by_side::{both, differences, words};
use common::*;

/// A reply's kind, for replies whose values are each server's own.
fn kind(reply: &V) -> String {
    match reply {
        V::Array(items) => format!(
            "array[{}]",
            items.iter().map(kind).collect::<Vec<_>>().join(",")
        ),
        V::Map(pairs) => format!(
            "map[{}]",
            pairs
                .iter()
                .map(|(k, v)| format!("{}={}", k.text(), kind(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        V::Int(_) => "int".into(),
        V::Double(_) => "double".into(),
        V::Bulk(None) => "nil".into(),
        V::Bulk(Some(_)) => "bulk".into(),
        V::Simple(_) => "simple".into(),
        V::Error(e) => format!("error {e}"),
        V::Null => "null".into(),
        other => format!("{other:?}"),
    }
}

fn usage(conn: &mut Conn, line: &str) -> i64 {
    match conn.cmd(&words(line)) {
        V::Int(n) => n,
        other => panic!("{line}: {other:?}"),
    }
}

#[test]
fn memory_usage_grows_with_the_value_and_is_nil_for_a_missing_key() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for resp3 in [false, true] {
        if resp3 {
            ours.cmd(&["HELLO", "3"]);
            theirs.cmd(&["HELLO", "3"]);
        }
        let missing = differences(&mut ours, &mut theirs, &["MEMORY USAGE nosuch"]);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
        assert_eq!(
            ours.cmd(&["MEMORY", "USAGE", "nosuch"]),
            if resp3 { V::Null } else { V::Bulk(None) }
        );
    }

    // A string: its bytes show.
    ours.cmd(&["SET", "s", "x"]);
    let small = usage(&mut ours, "MEMORY USAGE s");
    let big = "x".repeat(5000);
    ours.cmd(&["SET", "s", &big]);
    let large = usage(&mut ours, "MEMORY USAGE s");
    assert!(large >= small + 4999, "{small} → {large}");
    // A long key takes memory of its own, a short one is held in the entry.
    let long_key = "k".repeat(200);
    ours.cmd(&["SET", &long_key, "x"]);
    assert!(usage(&mut ours, &format!("MEMORY USAGE {long_key}")) >= small + 200);

    // Collections, small (compact encodings) and past their thresholds (tables).
    let grow = |conn: &mut Conn, key: &str, add: &dyn Fn(&mut Conn, usize)| -> Vec<i64> {
        let mut seen = Vec::new();
        for count in [1usize, 100, 1000] {
            add(conn, count);
            seen.push(usage(conn, &format!("MEMORY USAGE {key} SAMPLES 0")));
        }
        seen
    };
    let field = |i: usize| format!("element-{i:06}");
    let lists = grow(&mut ours, "l", &|conn, n| {
        for i in 0..n {
            conn.cmd(&["RPUSH", "l", &field(i)]);
        }
    });
    let hashes = grow(&mut ours, "h", &|conn, n| {
        for i in 0..n {
            conn.cmd(&["HSET", "h", &field(i), "value"]);
        }
    });
    let sets = grow(&mut ours, "set", &|conn, n| {
        for i in 0..n {
            conn.cmd(&["SADD", "set", &field(i)]);
        }
    });
    let intsets = grow(&mut ours, "ints", &|conn, n| {
        for i in 0..n {
            conn.cmd(&["SADD", "ints", &i.to_string()]);
        }
    });
    let zsets = grow(&mut ours, "z", &|conn, n| {
        for i in 0..n {
            conn.cmd(&["ZADD", "z", &i.to_string(), &field(i)]);
        }
    });
    for (name, seen) in [
        ("list", lists),
        ("hash", hashes),
        ("set", sets),
        ("intset", intsets),
        ("zset", zsets),
    ] {
        assert!(seen[0] < seen[1] && seen[1] < seen[2], "{name}: {seen:?}");
        // A thousand 14-byte elements take more than their 14 KB.
        assert!(seen[2] > 14_000, "{name}: {seen:?}");
    }
}

#[test]
fn samples_measure_that_many_elements_and_scale() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = Conn::new(server.port);
    // A table-encoded hash whose first fields are small and the rest large: measuring
    // the first few and scaling undercounts; measuring all is exact.
    for i in 0..5 {
        conn.cmd(&["HSET", "h", &format!("f{i}"), "v"]);
    }
    let large = "v".repeat(1000);
    for i in 5..600 {
        conn.cmd(&["HSET", "h", &format!("f{i}"), &large]);
    }
    assert_eq!(conn.cmd(&["OBJECT", "ENCODING", "h"]).text(), "hashtable");
    let all = usage(&mut conn, "MEMORY USAGE h SAMPLES 0");
    assert_eq!(usage(&mut conn, "MEMORY USAGE h SAMPLES 100000"), all);
    assert_eq!(usage(&mut conn, "MEMORY USAGE h samples 600"), all);
    let five = usage(&mut conn, "MEMORY USAGE h");
    assert_eq!(usage(&mut conn, "MEMORY USAGE h SAMPLES 5"), five);
    assert!(all > 595 * 1000, "{all}");
    assert!(five < all / 10, "default 5 samples: {five}, all: {all}");
    // The last SAMPLES given wins.
    assert_eq!(usage(&mut conn, "MEMORY USAGE h SAMPLES 5 SAMPLES 0"), all);
    // A string has no elements: the count changes nothing.
    conn.cmd(&["SET", "s", "abc"]);
    assert_eq!(
        usage(&mut conn, "MEMORY USAGE s SAMPLES 1"),
        usage(&mut conn, "MEMORY USAGE s SAMPLES 0")
    );
}

#[test]
fn memory_errors_and_fixed_replies_match_redis() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for conn in [&mut ours, &mut theirs] {
        conn.cmd(&["SET", "k", "v"]);
    }
    let lines = [
        "MEMORY",
        "MEMORY FOO",
        "MEMORY USAGE",
        "MEMORY USAGE k SAMPLES",
        "MEMORY USAGE k SAMPLES -1",
        "MEMORY USAGE k SAMPLES x",
        "MEMORY USAGE k SAMPLES 1.5",
        "MEMORY USAGE k SAMPLES 99999999999999999999",
        "MEMORY USAGE k FOO",
        "MEMORY USAGE k FOO 1",
        "MEMORY USAGE k SAMPLES 1 FOO",
        "MEMORY USAGE nosuch SAMPLES x",
        "MEMORY USAGE nosuch FOO",
        "MEMORY USAGE nosuch SAMPLES 0",
        "MEMORY USAGE nosuch samples 3 SAMPLES 4",
        "MEMORY STATS x",
        "MEMORY DOCTOR x",
        "MEMORY MALLOC-STATS x",
        "MEMORY PURGE x",
        "MEMORY HELP x",
        "MEMORY PURGE",
        "MEMORY HELP",
        "memory help",
        "MEMORY DOCTOR",
    ];
    for resp3 in [false, true] {
        if resp3 {
            ours.cmd(&["HELLO", "3"]);
            theirs.cmd(&["HELLO", "3"]);
        }
        let found = differences(&mut ours, &mut theirs, &lines);
        assert!(found.is_empty(), "{}", found.join("\n"));
        // An existing key: an integer on both (the numbers are each server's own).
        for line in [
            "MEMORY USAGE k",
            "MEMORY USAGE k SAMPLES 0",
            "MEMORY USAGE k samples 7",
        ] {
            assert_eq!(ours.cmd(&words(line)), V::Int(usage(&mut ours, line)));
            assert_eq!(kind(&theirs.cmd(&words(line))), "int", "{line}");
        }
    }
    // Inside MULTI and from a script, as from a client.
    let found = differences(
        &mut ours,
        &mut theirs,
        &["EVAL return(redis.pcall('memory','usage','k','samples','x')['err']) 0"],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
    // The table's view: COMMAND INFO's head (name, arity, flags, key positions, ACL
    // categories) and MEMORY USAGE's key for ACL.
    for name in ["memory", "lolwut"] {
        let head =
            |conn: &mut Conn| conn.cmd(&["COMMAND", "INFO", name]).items()[0].items()[..7].to_vec();
        assert_eq!(head(&mut ours), head(&mut theirs), "COMMAND INFO {name}");
    }
    for conn in [&mut ours, &mut theirs] {
        conn.cmd(&["ACL", "SETUSER", "u", "on", "nopass", "+memory", "~a*"]);
        conn.cmd(&["AUTH", "u", "x"]);
    }
    let found = differences(
        &mut ours,
        &mut theirs,
        &["MEMORY USAGE k", "MEMORY USAGE a-missing", "MEMORY PURGE"],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// MEMORY STATS's field names in order, with the kind of each value.
fn stats_fields(reply: &V) -> Vec<(String, String)> {
    match reply {
        V::Array(items) => items
            .chunks(2)
            .map(|pair| {
                let value = match &pair[1] {
                    // A database's figures: a flat array in RESP2 too.
                    V::Array(inner) => format!(
                        "[{}]",
                        inner
                            .chunks(2)
                            .map(|p| format!("{}={}", p[0].text(), kind(&p[1])))
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                    // RESP2 sends doubles as bulk strings.
                    V::Bulk(Some(text)) => {
                        let text = String::from_utf8_lossy(text);
                        assert!(text.parse::<f64>().is_ok(), "{text}");
                        "double".into()
                    }
                    other => kind(other),
                };
                (pair[0].text(), value)
            })
            .collect(),
        V::Map(pairs) => pairs.iter().map(|(k, v)| (k.text(), kind(v))).collect(),
        other => panic!("MEMORY STATS: {other:?}"),
    }
}

/// MEMORY STATS as (name, value) pairs, RESP2, top level only.
fn stats_numbers(conn: &mut Conn) -> std::collections::HashMap<String, V> {
    conn.cmd(&["MEMORY", "STATS"])
        .items()
        .chunks(2)
        .map(|pair| (pair[0].text(), pair[1].clone()))
        .collect()
}

fn int(stats: &std::collections::HashMap<String, V>, name: &str) -> i64 {
    match &stats[name] {
        V::Int(n) => *n,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn memory_stats_has_redis_s_fields_in_redis_s_order() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for conn in [&mut ours, &mut theirs] {
        conn.cmd(&["SET", "a", "1"]);
        conn.cmd(&["SELECT", "2"]);
        conn.cmd(&["SET", "b", "2", "EX", "100"]);
        conn.cmd(&["SELECT", "0"]);
    }
    for resp3 in [false, true] {
        if resp3 {
            ours.cmd(&["HELLO", "3"]);
            theirs.cmd(&["HELLO", "3"]);
        }
        let tessera = stats_fields(&ours.cmd(&["MEMORY", "STATS"]));
        let redis = stats_fields(&theirs.cmd(&["MEMORY", "STATS"]));
        assert_eq!(tessera, redis, "RESP{}", if resp3 { 3 } else { 2 });
        assert!(tessera.iter().any(|(name, _)| name == "db.2"));
    }

    // Tessera's numbers: real, and adding up as Redis's do.
    let mut conn = Conn::new(server.port);
    let before = stats_numbers(&mut conn);
    assert_eq!(int(&before, "keys.count"), 2);
    let value = "v".repeat(1000);
    for i in 0..2000 {
        conn.cmd(&["SET", &format!("key:{i}"), &value]);
    }
    let after = stats_numbers(&mut conn);
    assert_eq!(int(&after, "keys.count"), 2002);
    assert!(int(&after, "dataset.bytes") >= int(&before, "dataset.bytes") + 2000 * 1000);
    assert!(int(&after, "total.allocated") >= int(&after, "startup.allocated"));
    assert!(int(&after, "peak.allocated") >= int(&after, "total.allocated"));
    let overhead: i64 = [
        "startup.allocated",
        "replication.backlog",
        "clients.slaves",
        "clients.normal",
        "cluster.links",
        "aof.buffer",
        "lua.caches",
        "functions.caches",
    ]
    .iter()
    .map(|name| int(&after, name))
    .sum();
    let tables: i64 = ["db.0", "db.2"]
        .iter()
        .map(|db| match &after[*db] {
            V::Array(fields) => fields.chunks(2).map(|p| int_of(&p[1])).sum::<i64>(),
            other => panic!("{db}: {other:?}"),
        })
        .sum();
    assert!(tables > 0);
    assert_eq!(int(&after, "overhead.total"), overhead + tables);
    assert_eq!(
        int(&after, "dataset.bytes"),
        int(&after, "total.allocated") - int(&after, "overhead.total")
    );
    // Scripts cached show in lua.caches.
    assert_eq!(int(&after, "lua.caches"), 0);
    conn.cmd(&[
        "SCRIPT",
        "LOAD",
        "return 'a fairly long script body, to be seen'",
    ]);
    assert!(int(&stats_numbers(&mut conn), "lua.caches") > 0);
}

fn int_of(value: &V) -> i64 {
    match value {
        V::Int(n) => *n,
        other => panic!("{other:?}"),
    }
}

#[test]
fn memory_malloc_stats_is_jemalloc_s_report_as_redis_s_is() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for resp3 in [false, true] {
        if resp3 {
            ours.cmd(&["HELLO", "3"]);
            theirs.cmd(&["HELLO", "3"]);
        }
        for conn in [&mut ours, &mut theirs] {
            let text = conn.cmd(&["MEMORY", "MALLOC-STATS"]).text();
            // RESP3 sends a verbatim string: its format comes first.
            let text = if resp3 {
                text.strip_prefix("txt:")
                    .expect("a verbatim string")
                    .to_string()
            } else {
                text
            };
            assert!(
                text.starts_with("___ Begin jemalloc statistics ___\n"),
                "{text}"
            );
            assert!(text.ends_with("--- End jemalloc statistics ---\n"));
            assert!(text.contains("Allocated: "));
        }
    }
}

#[test]
fn memory_doctor_speaks_once_there_is_data() {
    let dir = temp_dir();
    // No log: its buffers would hold the writes' bytes a while longer.
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let mut conn = Conn::new(server.port);
    let empty = conn.cmd(&["MEMORY", "DOCTOR"]).text();
    assert!(
        empty.starts_with("Hi Sam, this instance is empty"),
        "{empty}"
    );
    // 30 MB, seen by MEMORY STATS (which samples the peak), then all but 7 MB deleted: a
    // peak of more than 150% of the memory in use.
    let megabyte = "m".repeat(1 << 20);
    for i in 0..30 {
        conn.cmd(&["SET", &format!("big:{i}"), &megabyte]);
    }
    let stats = stats_numbers(&mut conn);
    assert!(int(&stats, "peak.allocated") >= 30 << 20);
    for i in 7..30 {
        conn.cmd(&["DEL", &format!("big:{i}")]);
    }
    let report = conn.cmd(&["MEMORY", "DOCTOR"]).text();
    assert!(
        report.starts_with("Sam, I detected a few issues"),
        "{report}"
    );
    assert!(report.contains(" * Peak memory:"), "{report}");
    assert!(report.ends_with("I want to help you.\n"), "{report}");
    // PURGE gives pages back; the report and the stats still answer.
    assert_eq!(conn.cmd(&["MEMORY", "PURGE"]), V::Simple("OK".into()));
    assert!(
        !conn
            .cmd(&["MEMORY", "DOCTOR"])
            .text()
            .starts_with("Hi Sam, this instance is empty")
    );
}

/// Tessera's version, as INFO reports it.
fn tessera_version(conn: &mut Conn) -> String {
    let info = conn.cmd(&["INFO", "server"]).text();
    info.lines()
        .find_map(|line| line.strip_prefix("tessera_version:"))
        .expect("INFO server has tessera_version")
        .trim()
        .to_string()
}

#[test]
fn lolwut_draws_and_signs_with_tessera_s_version() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let version = tessera_version(&mut ours);
    let signature = format!("Tessera ver. {version}");
    for resp3 in [false, true] {
        if resp3 {
            ours.cmd(&["HELLO", "3"]);
            theirs.cmd(&["HELLO", "3"]);
        }
        for line in [
            "LOLWUT",
            "LOLWUT VERSION",
            "LOLWUT foo bar",
            "LOLWUT VERSION 5",
            "LOLWUT version 5 10 1 1",
            "LOLWUT VERSION 6",
            "LOLWUT VERSION 6 9 3",
            "LOLWUT VERSION 7",
            "LOLWUT VERSION -1",
            "LOLWUT VERSION 5 -3 0 0",
        ] {
            let ours_text = ours.cmd(&words(line)).text();
            let theirs_text = theirs.cmd(&words(line)).text();
            // A verbatim string in RESP3 (its format first), a bulk string in RESP2.
            assert_eq!(ours_text.starts_with("txt:"), resp3, "{line}");
            assert_eq!(theirs_text.starts_with("txt:"), resp3, "{line}");
            // The last line names the server and its version.
            assert!(theirs_text.ends_with("Redis ver. 7.0.15\n"), "{line}");
            let last = ours_text
                .trim_end_matches('\n')
                .lines()
                .last()
                .unwrap_or("");
            assert!(last.ends_with(&signature), "{line}: {ours_text}");
            assert!(ours_text.ends_with('\n'), "{line}");
        }
        let errors = differences(
            &mut ours,
            &mut theirs,
            &[
                "LOLWUT VERSION x",
                "LOLWUT VERSION 1.5",
                "LOLWUT VERSION 5 x",
                "LOLWUT VERSION 5 10 x",
                "LOLWUT VERSION 5 10 1 x",
                "LOLWUT VERSION 6 x",
                "LOLWUT VERSION 6 10 x",
            ],
        );
        assert!(errors.is_empty(), "{}", errors.join("\n"));
    }
}

/// The lines of a LOLWUT piece before its caption (RESP2).
fn art_lines(conn: &mut Conn, line: &str) -> Vec<String> {
    let text = conn.cmd(&words(line)).text();
    let (art, _caption) = text.trim_end_matches('\n').rsplit_once("\n\n").expect(line);
    art.lines().map(str::to_string).collect()
}

#[test]
fn lolwut_parameters_shape_the_art_within_bounds() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = Conn::new(server.port);
    let width = |lines: &[String]| lines.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    // VERSION 5: width, tiles per row, tiles per column.
    let narrow = art_lines(&mut conn, "LOLWUT VERSION 5 20 4 3");
    let wide = art_lines(&mut conn, "LOLWUT VERSION 5 80 4 3");
    assert!(width(&narrow) <= 20 && width(&wide) <= 80);
    assert!(width(&wide) > 20, "{wide:?}");
    let taller = art_lines(&mut conn, "LOLWUT VERSION 5 80 4 6");
    assert!(
        taller.len() > wide.len(),
        "{} vs {}",
        taller.len(),
        wide.len()
    );
    // Clamped as Redis clamps: 1000 columns, 200 tiles each way; the biggest stays small.
    let text = conn
        .cmd(&["LOLWUT", "VERSION", "5", "100000", "1", "100000"])
        .text();
    assert!(text.len() < 2 << 20, "{} bytes", text.len());
    let huge = art_lines(&mut conn, "LOLWUT VERSION 5 100000 1000 1");
    assert!(width(&huge) <= 1000 && !huge.is_empty());
    // VERSION 6: width and height in cells.
    let greys = art_lines(&mut conn, "LOLWUT VERSION 6 9 4");
    assert_eq!(greys.len(), 4);
    assert!(
        greys.iter().all(|line| line.matches(' ').count() == 9),
        "{greys:?}"
    );
    assert_eq!(art_lines(&mut conn, "LOLWUT VERSION 6 0 -5").len(), 1);
}
