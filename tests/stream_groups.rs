//! Stream consumer groups against redis-server 7.0: the commands' replies side by side
//! (RESP2 and RESP3), blocking XREADGROUP and what wakes it, and the groups' state —
//! pending entries, owners, delivery counts and times, last delivered IDs, entries read —
//! across kill -9 under `appendfsync always`, a compaction and a restart, RDB files both
//! ways between Tessera and Redis, and DUMP / RESTORE both ways.
//!
//! Times: both servers read the same clock at slightly different instants, so replies
//! that hold times (XPENDING's idle times, XINFO CONSUMERS' idle, XINFO STREAM FULL's
//! delivery and seen times) are compared with those fields blanked (`normalized`). State
//! moved by a file or a payload keeps its times and is compared exactly, but for a
//! consumer's seen time after a log replay, which Redis's XCLAIM too sets to the replay's
//! clock.

mod common;

use common::raw_client::{Conn, V};
use common::side_by_side::{both, connections, words};
use common::{RedisOracle, WHOLE_TEST, require_redis_or_skip, start_server, temp_dir};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::time::Duration;

/// Blanks what depends on the instant a server read its clock: Unix-millisecond times
/// (any integer past 2001), XPENDING's idle times, XINFO CONSUMERS' idle.
fn normalized(line: &str, reply: V) -> V {
    let upper = line.to_ascii_uppercase();
    let idle_rows = upper.starts_with("XPENDING") && words(line).len() >= 6;
    blank(reply, idle_rows)
}

fn blank(reply: V, idle_rows: bool) -> V {
    match reply {
        V::Int(n) if n > 1_000_000_000_000 => V::Simple("<time>".into()),
        V::Array(items) => {
            let is_pending_row = idle_rows
                && items.len() == 4
                && matches!(items[1], V::Bulk(_))
                && matches!(items[2], V::Int(_));
            let mut items: Vec<V> = items.into_iter().map(|v| blank(v, idle_rows)).collect();
            if is_pending_row {
                items[2] = V::Simple("<idle>".into());
            }
            // RESP2 maps: a value after "idle" or "seen-time".
            for i in 1..items.len() {
                if matches!(&items[i - 1], V::Bulk(Some(k)) if k == b"idle" || k == b"seen-time") {
                    items[i] = V::Simple("<idle>".into());
                }
            }
            V::Array(items)
        }
        V::Map(pairs) => V::Map(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    let timed = matches!(&k, V::Bulk(Some(k)) if k == b"idle" || k == b"seen-time");
                    let v = if timed {
                        V::Simple("<idle>".into())
                    } else {
                        blank(v, idle_rows)
                    };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

/// Sends each line to both servers; the replies must be equal once normalized.
fn compare(ours: &mut Conn, theirs: &mut Conn, lines: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for line in lines {
        let a = normalized(line, ours.cmd(&words(line)));
        let b = normalized(line, theirs.cmd(&words(line)));
        if a != b {
            found.push(format!("{line}\n  tessera: {a:?}\n  redis:   {b:?}"));
        }
    }
    found
}

/// Groups made, read from, acknowledged, claimed and shown, with every error on the way.
const LINES: &[&str] = &[
    "XGROUP HELP",
    "XGROUP CREATE s g 0",
    "XGROUP CREATE s g 0 MKSTREAM",
    "XGROUP CREATE s g 0 MKSTREAM",
    "XGROUP CREATE s g2 $ MKSTREAM ENTRIESREAD 5",
    "XGROUP CREATE s g3 $ ENTRIESREAD -2",
    "XGROUP CREATE s g3 $ ENTRIESREAD x",
    "XGROUP CREATE s g3 $ BAD",
    "XGROUP CREATE s g3 +",
    "XGROUP CREATE s g3 abc",
    "XGROUP FOO s g",
    "XGROUP CREATE s",
    "XGROUP DESTROY s g x",
    "XGROUP SETID s nog 0",
    "XGROUP SETID s g +",
    "XGROUP SETID s g - ENTRIESREAD 3",
    "XGROUP SETID s g 5 ENTRIESREAD 3 MKSTREAM",
    "XGROUP SETID nokey g 0",
    "XINFO GROUPS s",
    "XADD s 1-1 a 1",
    "XADD s 2-1 b 2 c 3",
    "XADD s 3-1 a 4",
    "XADD s 4-1 a 5",
    "XADD s 5-1 a 6",
    "XGROUP SETID s g 0",
    "XINFO GROUPS s",
    "XREADGROUP GROUP g alice COUNT 2 STREAMS s >",
    "XINFO GROUPS s",
    "XREADGROUP GROUP g bob COUNT 2 STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS s 0",
    "XREADGROUP GROUP g alice COUNT 1 STREAMS s 1-1",
    "XREADGROUP GROUP g alice STREAMS s $",
    "XREADGROUP GROUP g alice STREAMS s",
    "XREADGROUP GROUP g alice STREAMS s x",
    "XREADGROUP GROUP g alice STREAMS s +",
    "XREADGROUP GROUP nog alice STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS nokey >",
    "XREADGROUP STREAMS s >",
    "XREADGROUP GROUP g alice NOACK STREAMS s >",
    "XREADGROUP GROUP g alice NOACK STREAMS s >",
    "XREADGROUP GROUP g alice BLOCK x STREAMS s >",
    "XREADGROUP GROUP g alice BLOCK -1 STREAMS s >",
    "XREADGROUP GROUP g alice COUNT x STREAMS s >",
    "XREADGROUP GROUP g alice FOO STREAMS s >",
    "XREADGROUP GROUP g alice STREAMS s s 0 >",
    "XREADGROUP GROUP g dave STREAMS s 0",
    "XPENDING s g",
    "XPENDING s g - + 10",
    "XPENDING s g - + 10 alice",
    "XPENDING s g - + 10 carol",
    "XPENDING s g (1-1 + 10",
    "XPENDING s g - (4-1 10",
    "XPENDING s g IDLE 100000 - + 10",
    "XPENDING s g IDLE 0 - + 1",
    "XPENDING s g - +",
    "XPENDING s g - + x",
    "XPENDING s g IDLE x - + 1",
    "XPENDING s g IDLE 5 - +",
    "XPENDING s nog",
    "XPENDING nokey g",
    "XPENDING s g (18446744073709551615-18446744073709551615 + 1",
    "XPENDING s g - (0-0 1",
    "XDEL s 2-1",
    "XREADGROUP GROUP g alice STREAMS s 0",
    "XINFO CONSUMERS s g",
    "XINFO CONSUMERS s nog",
    "XINFO CONSUMERS nokey g",
    "XCLAIM s g bob 0 1-1 JUSTID",
    "XCLAIM s g bob 0 1-1 3-1",
    "XCLAIM s g bob 100000 1-1",
    "XCLAIM s g bob 0 5-1",
    "XCLAIM s g bob 0 5-1 FORCE JUSTID",
    "XCLAIM s g carol 0 1-1 RETRYCOUNT 7 JUSTID",
    "XCLAIM s g carol 0 1-1 RETRYCOUNT -1 JUSTID",
    "XCLAIM s g carol 0 1-1 RETRYCOUNT x",
    "XCLAIM s g carol x 1-1",
    "XCLAIM s g carol 0 1-1 IDLE x",
    "XCLAIM s g carol 0 1-1 TIME x",
    "XCLAIM s g carol 0 1-1 BOGUS",
    "XCLAIM s g carol 0 1-1 IDLE",
    "XCLAIM s g carol 0 1-1 LASTID x",
    "XCLAIM s g carol 0 1-1 LASTID 9-9 JUSTID",
    "XCLAIM s g carol 0 LASTID 10-1",
    "XCLAIM s g carol 0 1-1 1-1 FORCE",
    "XCLAIM s g carol 0 2-1 JUSTID",
    "XCLAIM s nog carol 0 1-1",
    "XCLAIM nokey g carol 0 1-1",
    "XPENDING s g - + 10",
    "XINFO GROUPS s",
    "XDEL s 3-1",
    "XAUTOCLAIM s g erin 0 0 COUNT 1",
    "XAUTOCLAIM s g erin 0 0 COUNT 1 JUSTID",
    "XAUTOCLAIM s g erin 0 0",
    "XAUTOCLAIM s g erin 0 (1-1",
    "XAUTOCLAIM s g erin 0 (18446744073709551615-18446744073709551615",
    "XAUTOCLAIM s g erin 0 0 COUNT 0",
    "XAUTOCLAIM s g erin 0 0 COUNT x",
    "XAUTOCLAIM s g erin 0 0 FOO",
    "XAUTOCLAIM s g erin x 0",
    "XAUTOCLAIM s g erin 0 x",
    "XAUTOCLAIM s nog erin 0 0",
    "XAUTOCLAIM s g erin 1000000 0",
    "XAUTOCLAIM s g erin 0 0 COUNT 576460752303423487",
    "XAUTOCLAIM s g erin 0 0 COUNT 576460752303423488",
    "XPENDING s g",
    "XACK s g 1-1 1-1 9-9",
    "XACK s g x",
    "XACK s nog 1-1",
    "XACK nokey g 1-1",
    "XGROUP CREATECONSUMER s g frank",
    "XGROUP CREATECONSUMER s g frank",
    "XGROUP DELCONSUMER s g bob",
    "XGROUP DELCONSUMER s g nobody",
    "XPENDING s g",
    "XGROUP DESTROY s g2",
    "XGROUP DESTROY s g2",
    "XINFO GROUPS s",
    "XINFO STREAM s",
    "XINFO STREAM s FULL",
    "XINFO STREAM s FULL COUNT 1",
    "XINFO STREAM s FULL COUNT 0",
    "XINFO STREAM s FULL COUNT -5",
    "XINFO STREAM nokey",
    "XINFO STREAM s FULL X",
    "XINFO STREAM s FULL COUNT x",
    "XINFO STREAM s COUNT",
    "XINFO FOO s",
    "XINFO HELP",
    "XINFO HELP x",
    "XINFO STREAM",
    // The counters: trims, deletions and positions set by hand.
    "XGROUP SETID s g 0 ENTRIESREAD 0",
    "XREADGROUP GROUP g frank COUNT 1 STREAMS s >",
    "XINFO GROUPS s",
    "XTRIM s MAXLEN 1",
    "XINFO GROUPS s",
    "XADD s 6-1 x y",
    "XGROUP CREATE s g5 3-0",
    "XGROUP CREATE s g6 5-1",
    "XGROUP CREATE s g7 7-0",
    "XINFO GROUPS s",
    "XSETID s 9-9",
    "XINFO GROUPS s",
    "XREADGROUP GROUP g frank STREAMS s >",
    "XINFO STREAM s FULL",
    // Another type at the key.
    "SET str x",
    "XINFO STREAM str",
    "XGROUP CREATE str g 0",
    "XREADGROUP GROUP g c STREAMS str >",
    "XACK str g 1-1",
    "XPENDING str g",
    "XCLAIM str g c 0 1-1",
    "XAUTOCLAIM str g c 0 0",
    // An empty stream with a group.
    "XGROUP CREATE e g $ MKSTREAM",
    "XINFO STREAM e",
    "XINFO STREAM e FULL",
    "XREADGROUP GROUP g alice STREAMS e >",
    "XREADGROUP GROUP g alice STREAMS e 0",
    "MEMORY USAGE e",
];

#[test]
fn replies_match_redis() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    for resp3 in [false, true] {
        let (mut ours, mut theirs) = connections(&server, &redis, resp3);
        for conn in [&mut ours, &mut theirs] {
            conn.cmd(&["FLUSHALL"]);
        }
        let mut found = compare(&mut ours, &mut theirs, LINES);
        // MEMORY USAGE measures each server's own structures: only its presence counts.
        found.retain(|diff| !diff.starts_with("MEMORY USAGE"));
        assert!(
            found.is_empty(),
            "RESP{}:\n{}",
            if resp3 { 3 } else { 2 },
            found.join("\n")
        );
    }
}

/// What a blocked `XREADGROUP ... BLOCK 2000 STREAMS s >` answers after `then` runs on
/// another connection, on a server given fresh: `s` holds 1-1, group `g` is at its end.
fn blocked_read(port: u16, resp3: bool, then: &[&str]) -> (V, V) {
    let mut reader = Conn::new(port);
    let mut other = Conn::new(port);
    if resp3 {
        reader.cmd(&["HELLO", "3"]);
    }
    other.cmd(&["FLUSHALL"]);
    other.cmd(&["XADD", "s", "1-1", "f", "v"]);
    other.cmd(&["XGROUP", "CREATE", "s", "g", "$"]);
    reader.send(
        &words("XREADGROUP GROUP g c BLOCK 800 STREAMS s >")
            .iter()
            .map(|w| w.as_bytes())
            .collect::<Vec<_>>(),
    );
    // The reader is parked once CLIENT LIST shows it blocked.
    for _ in 0..200 {
        let list = other.cmd(&["CLIENT", "LIST"]).text();
        if list.contains("cmd=xreadgroup") {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for line in then {
        other.cmd(&words(line));
    }
    let reply = reader.read();
    let pending = other.cmd(&["XPENDING", "s", "g"]);
    (reply, pending)
}

#[test]
fn blocked_readers_are_served_and_told_as_redis_does() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let cases: &[&[&str]] = &[
        &["XADD s 2-1 a b"],
        &["XADD s 2-1 a b", "XADD s 3-1 c d"],
        &["XGROUP DESTROY s g"],
        &["DEL s"],
        &["SET s x"],
        &["XACK s g 1-1"],
        &[],
        // Expired under the reader, by the active cycle: told at once, as for a DEL.
        &["PEXPIRE s 20"],
        // XSETID signals nothing: the reader times out.
        &["XSETID s 9-1"],
        &[
            "MULTI",
            "DEL s",
            "XGROUP CREATE s g 0 MKSTREAM",
            "XADD s 3-3 x y",
            "EXEC",
        ],
        &["MULTI", "XADD s 2-1 a b", "XDEL s 2-1", "EXEC"],
        &["XGROUP SETID s g 0"],
        &[
            "XGROUP CREATECONSUMER s g other",
            "XGROUP DELCONSUMER s g other",
        ],
        &["FLUSHALL"],
        &["FLUSHDB"],
        &["SELECT 1", "FLUSHDB", "SWAPDB 0 1"],
        &[
            "SELECT 1",
            "FLUSHDB",
            "XADD s 5-5 a b",
            "XGROUP CREATE s g 0",
            "SWAPDB 0 1",
        ],
    ];
    for resp3 in [false, true] {
        for then in cases {
            let ours = blocked_read(server.port, resp3, then);
            let theirs = blocked_read(redis.port, resp3, then);
            assert_eq!(ours, theirs, "RESP3 {resp3}, then {then:?}");
        }
    }
}

#[test]
fn blocked_readers_of_one_group_share_what_arrives() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let run = |port: u16| {
        let mut first = Conn::new(port);
        let mut second = Conn::new(port);
        let mut other = Conn::new(port);
        other.cmd(&["FLUSHALL"]);
        other.cmd(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
        for (blocked, (conn, name)) in [(&mut first, "c1"), (&mut second, "c2")]
            .into_iter()
            .enumerate()
        {
            let line = format!("XREADGROUP GROUP g {name} COUNT 1 BLOCK 0 STREAMS s >");
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            conn.send(&args);
            // Blocked in this order: c1, then c2.
            let wanted = format!("blocked_clients:{}", blocked + 1);
            common::wait_until(&wanted, Duration::from_secs(20), || {
                let info = other.cmd(&["INFO", "clients"]).text();
                info.lines().any(|line| line.trim() == wanted)
            });
        }
        other.cmd(&["MULTI"]);
        other.cmd(&["XADD", "s", "1-1", "a", "1"]);
        other.cmd(&["XADD", "s", "2-1", "b", "2"]);
        other.cmd(&["EXEC"]);
        (
            first.read(),
            second.read(),
            other.cmd(&["XPENDING", "s", "g", "-", "+", "10"]),
        )
    };
    let (a1, b1, p1) = run(server.port);
    let (a2, b2, p2) = run(redis.port);
    assert_eq!((a1, b1), (a2, b2));
    assert_eq!(
        normalized("XPENDING s g - + 10", p1),
        normalized("XPENDING s g - + 10", p2)
    );
}

/// Redis changes groups (and XSETID the stream's last ID) without `signalModifiedKey`: a
/// WATCH on the stream survives every group command (but XGROUP CREATE MKSTREAM's new
/// key) and XSETID, inside the watching client's own
/// session or another's.
#[test]
fn group_commands_leave_watch_as_redis_does() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let changes: &[&str] = &[
        "XACK s g 1-1",
        "XREADGROUP GROUP g c2 STREAMS s >",
        "XREADGROUP GROUP g c STREAMS s 0",
        "XREADGROUP GROUP g c3 NOACK STREAMS s >",
        "XCLAIM s g c3 0 1-1",
        "XAUTOCLAIM s g c3 0 0",
        "XGROUP CREATECONSUMER s g z",
        "XGROUP DELCONSUMER s g c",
        "XGROUP SETID s g 0",
        "XGROUP DESTROY s g",
        "XGROUP CREATE s g2 0",
        "XGROUP CREATE new g 0 MKSTREAM",
        "XSETID s 9-1",
        "XADD s 3-1 a b",
    ];
    for change in changes {
        for own_session in [true, false] {
            let run = |port: u16| {
                let mut watcher = Conn::new(port);
                let mut other = Conn::new(port);
                for line in [
                    "FLUSHALL",
                    "XADD s 1-1 a b",
                    "XADD s 2-1 a b",
                    "XGROUP CREATE s g 0",
                    "XREADGROUP GROUP g c COUNT 1 STREAMS s >",
                ] {
                    other.cmd(&words(line));
                }
                watcher.cmd(&["WATCH", "s", "new"]);
                let changer = if own_session {
                    &mut watcher
                } else {
                    &mut other
                };
                changer.cmd(&words(change));
                watcher.cmd(&["MULTI"]);
                watcher.cmd(&["PING"]);
                watcher.cmd(&["EXEC"])
            };
            assert_eq!(
                run(server.port),
                run(redis.port),
                "{change} (own session: {own_session})"
            );
        }
    }
}

/// A seeded mix of everything that changes a group (and the entries under it).
fn group_workload(conn: &mut Conn, seed: u64, ops: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    for ms in 1..=40 {
        conn.cmd(&["XADD", "s", &format!("{ms}-1"), "f", &ms.to_string()]);
    }
    conn.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    conn.cmd(&["XGROUP", "CREATE", "s", "h", "$", "ENTRIESREAD", "7"]);
    conn.cmd(&["XGROUP", "CREATE", "s", "n", "10-0"]);
    let mut next_ms = 41;
    for _ in 0..ops {
        let group = ["g", "h", "n"][rng.random_range(0..3)];
        let consumer = ["a", "b", "c"][rng.random_range(0..3)];
        let id = format!("{}-1", rng.random_range(1..next_ms));
        let count = rng.random_range(1..5).to_string();
        let line: Vec<String> = match rng.random_range(0..100) {
            0..25 => {
                let mut l = vec!["XREADGROUP", "GROUP", group, consumer, "COUNT", &count];
                if rng.random_bool(0.2) {
                    l.push("NOACK");
                }
                l.extend(["STREAMS", "s", ">"]);
                l.into_iter().map(String::from).collect()
            }
            25..35 => [
                "XREADGROUP",
                "GROUP",
                group,
                consumer,
                "COUNT",
                &count,
                "STREAMS",
                "s",
                "0",
            ]
            .map(String::from)
            .to_vec(),
            35..45 => ["XACK", "s", group, &id].map(String::from).to_vec(),
            45..55 => {
                let mut l = vec!["XCLAIM", "s", group, consumer, "0", &id];
                if rng.random_bool(0.3) {
                    l.push("FORCE");
                }
                if rng.random_bool(0.3) {
                    l.push("JUSTID");
                }
                l.into_iter().map(String::from).collect()
            }
            55..63 => [
                "XAUTOCLAIM",
                "s",
                group,
                consumer,
                "0",
                "0",
                "COUNT",
                &count,
            ]
            .map(String::from)
            .to_vec(),
            63..68 => ["XDEL", "s", &id].map(String::from).to_vec(),
            68..78 => {
                next_ms += 1;
                ["XADD", "s", &format!("{}-1", next_ms - 1), "f", "x"]
                    .map(String::from)
                    .to_vec()
            }
            78..82 => ["XGROUP", "SETID", "s", group, &id]
                .map(String::from)
                .to_vec(),
            82..85 => ["XGROUP", "DELCONSUMER", "s", group, consumer]
                .map(String::from)
                .to_vec(),
            85..88 => ["XGROUP", "CREATECONSUMER", "s", group, consumer]
                .map(String::from)
                .to_vec(),
            88..90 => ["XTRIM", "s", "MAXLEN", "30"].map(String::from).to_vec(),
            _ => ["XREADGROUP", "GROUP", group, consumer, "STREAMS", "s", &id]
                .map(String::from)
                .to_vec(),
        };
        let words: Vec<&str> = line.iter().map(String::as_str).collect();
        let reply = conn.cmd(&words);
        assert!(
            !matches!(reply, V::Error(_) | V::Closed),
            "{line:?}: {reply:?}"
        );
    }
}

/// Everything the groups hold (and the stream's entries and counters), with each
/// consumer's seen time blanked: a replayed XCLAIM sets it to the replay's clock.
fn group_state(conn: &mut Conn) -> V {
    let full = conn.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]);
    blank_seen_times(full)
}

fn blank_seen_times(reply: V) -> V {
    match reply {
        V::Array(items) => {
            let mut items: Vec<V> = items.into_iter().map(blank_seen_times).collect();
            for i in 1..items.len() {
                if matches!(&items[i - 1], V::Bulk(Some(k)) if k == b"seen-time") {
                    items[i] = V::Simple("<seen>".into());
                }
            }
            V::Array(items)
        }
        other => other,
    }
}

#[test]
fn pending_lists_survive_kill_9_under_appendfsync_always() {
    let dir = temp_dir();
    let args = ["--appendfsync", "always", "--stream-node-max-entries", "3"];
    let mut server = start_server(dir.path(), &args);
    let mut conn = Conn::new(server.port);
    group_workload(&mut conn, 7, 400);
    // A stream without holes, whose groups count their reads exactly: the counters too
    // must come back (a replayed XCLAIM moves the position but not the counter).
    for ms in 1..=20 {
        conn.cmd(&["XADD", "t", &format!("{ms}-0"), "f", "v"]);
    }
    conn.cmd(&["XGROUP", "CREATE", "t", "exact", "0", "ENTRIESREAD", "0"]);
    conn.cmd(&["XGROUP", "CREATE", "t", "quiet", "0", "ENTRIESREAD", "0"]);
    for count in ["3", "4"] {
        conn.cmd(&[
            "XREADGROUP",
            "GROUP",
            "exact",
            "r",
            "COUNT",
            count,
            "STREAMS",
            "t",
            ">",
        ]);
        conn.cmd(&[
            "XREADGROUP",
            "GROUP",
            "quiet",
            "r",
            "NOACK",
            "COUNT",
            count,
            "STREAMS",
            "t",
            ">",
        ]);
    }
    conn.cmd(&["XADD", "t", "30-0", "f", "v"]);
    let counters = conn.cmd(&["XINFO", "GROUPS", "t"]);
    assert_eq!(counters.items()[0].items()[9], V::Int(7), "{counters:?}");
    let before = group_state(&mut conn);
    server.kill9();
    let server = start_server(dir.path(), &args);
    let mut conn = Conn::new(server.port);
    assert_eq!(group_state(&mut conn), before);
    assert_eq!(conn.cmd(&["XINFO", "GROUPS", "t"]), counters);
    // And the groups go on from there as they would have.
    let reply = conn.cmd(&["XREADGROUP", "GROUP", "g", "z", "STREAMS", "s", "0"]);
    assert_eq!(reply.items()[0].items()[1], V::Array(vec![]));
}

#[test]
fn groups_survive_a_compaction_and_a_restart() {
    let dir = temp_dir();
    let args = ["--appendfsync", "always", "--stream-node-max-entries", "3"];
    let mut server = start_server(dir.path(), &args);
    let mut conn = Conn::new(server.port);
    group_workload(&mut conn, 11, 300);
    assert_eq!(
        conn.cmd(&["BGREWRITEAOF"]),
        V::Simple("Background append only file rewriting started".into())
    );
    common::wait_for_background_jobs(&mut server.connection());
    // After the compaction: the base holds the groups, the log what followed.
    conn.cmd(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "late",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ]);
    conn.cmd(&["XGROUP", "CREATE", "s", "after", "0"]);
    conn.cmd(&[
        "XREADGROUP",
        "GROUP",
        "after",
        "x",
        "COUNT",
        "3",
        "STREAMS",
        "s",
        ">",
    ]);
    let before = group_state(&mut conn);
    let base = common::manifest_files(&server.aof_dir());
    assert!(base.iter().any(|f| f.contains(".base.")), "{base:?}");
    server.shutdown();
    let server = start_server(dir.path(), &args);
    let mut conn = Conn::new(server.port);
    assert_eq!(group_state(&mut conn), before);
}

/// A Redis 7.0 dataset with groups, consumers and pending entries (times included) is
/// loaded by Tessera from a Redis base RDB, and Redis loads Tessera's back: the state is
/// the same, to the millisecond.
#[test]
fn rdb_files_with_groups_load_both_ways() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let from_redis = {
        let oracle = RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
        let mut conn = Conn::new(oracle.port);
        group_workload(&mut conn, 3, 300);
        conn.cmd(&["BGREWRITEAOF"]);
        common::wait_for_background_jobs(&mut oracle.connection());
        let state = conn.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]);
        conn.cmd(&["SHUTDOWN", "NOSAVE"]);
        state
    };
    // Tessera on Redis's directory: a base RDB and an empty incremental file. (One base
    // part when it compacts: Redis's own layout.)
    let mut server = start_server(dir.path(), &["--aof-rewrite-threads", "1"]);
    let mut conn = Conn::new(server.port);
    assert_eq!(
        blank_node_counts(conn.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"])),
        blank_node_counts(from_redis.clone())
    );
    // Tessera's own base, loaded by Redis.
    conn.cmd(&["BGREWRITEAOF"]);
    common::wait_for_background_jobs(&mut server.connection());
    let from_tessera = conn.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]);
    server.shutdown();
    let oracle = RedisOracle::start_with(&redis_binary, dir.path(), &["--appendonly", "yes"]);
    let mut conn = Conn::new(oracle.port);
    assert_eq!(
        conn.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]),
        from_tessera
    );
}

/// The node layout is each server's (a stream's nodes are written as they are, and
/// Tessera's are Redis's too, but a replayed log packs entries as its configuration
/// says): the two radix-tree figures are left out where a load may repack.
fn blank_node_counts(reply: V) -> V {
    match reply {
        V::Array(mut items) => {
            for i in 1..items.len() {
                if matches!(&items[i - 1], V::Bulk(Some(k)) if k.starts_with(b"radix-tree")) {
                    items[i] = V::Simple("<nodes>".into());
                }
            }
            V::Array(items)
        }
        other => other,
    }
}

#[test]
fn dump_and_restore_carry_groups_both_ways() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for (conn, seed) in [(&mut ours, 5), (&mut theirs, 6)] {
        conn.cmd(&["FLUSHALL"]);
        group_workload(conn, seed, 200);
    }
    let ours_dump = ours.cmd(&["DUMP", "s"]);
    let theirs_dump = theirs.cmd(&["DUMP", "s"]);
    let (V::Bulk(Some(ours_dump)), V::Bulk(Some(theirs_dump))) = (ours_dump, theirs_dump) else {
        panic!("DUMP did not answer a payload");
    };
    let ours_state = ours.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]);
    let theirs_state = theirs.cmd(&["XINFO", "STREAM", "s", "FULL", "COUNT", "0"]);
    // Each payload restored on the other server.
    assert_eq!(
        ours.call(&[b"RESTORE", b"from-redis", b"0", &theirs_dump]),
        V::Simple("OK".into())
    );
    assert_eq!(
        theirs.call(&[b"RESTORE", b"from-tessera", b"0", &ours_dump]),
        V::Simple("OK".into())
    );
    assert_eq!(
        ours.cmd(&["XINFO", "STREAM", "from-redis", "FULL", "COUNT", "0"]),
        theirs_state
    );
    assert_eq!(
        theirs.cmd(&["XINFO", "STREAM", "from-tessera", "FULL", "COUNT", "0"]),
        ours_state
    );
}

/// A payload with its checksum made right again after `change` edits its body.
fn with_checksum(mut payload: Vec<u8>, change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    payload.truncate(payload.len() - 8);
    change(&mut payload);
    let checksum = tessera::rdb::crc64(&payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

/// Groups that do not hold together, in payloads whose checksum is right: what Redis
/// refuses is refused with Redis's reply, and the server goes on.
#[test]
fn damaged_groups_in_a_payload_are_refused() {
    let Some((server, redis, _dir)) = both() else {
        return;
    };
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    theirs.cmd(&["FLUSHALL"]);
    // A stream whose entries are all deleted: the payload is metadata and groups only.
    for line in common::stream_dump::TWO_CONSUMERS {
        theirs.cmd(&words(line));
    }
    let V::Bulk(Some(payload)) = theirs.cmd(&["DUMP", "s"]) else {
        panic!("no payload");
    };
    let at = |name: &[u8]| {
        let mut pattern = vec![name.len() as u8];
        pattern.extend_from_slice(name);
        payload
            .windows(pattern.len())
            .position(|w| w == pattern)
            .expect("the consumer's name")
            + pattern.len()
    };
    // After a consumer's name: its seen time (8 bytes), its count of IDs (1 byte), the
    // IDs (16 bytes each).
    let alice_id = at(b"alice") + 8 + 1;
    let bob = at(b"bob") - 4;
    let cases = [
        // alice owns 1-9, which the group's PEL lacks.
        with_checksum(payload.clone(), |body| body[alice_id + 15] = 9),
        // bob is named alice too: a consumer twice.
        with_checksum(payload.clone(), |body| {
            body.splice(bob..bob + 4, [5, b'a', b'l', b'i', b'c', b'e']);
        }),
        // alice owns bob's entry too (2-2 in both consumers): the NACK shared between
        // consumers of CVE-2026-66373, refused by Redis's fix (Debian's 7.0.15 has it).
        with_checksum(payload.clone(), |body| {
            body[alice_id + 7] = 2;
            body[alice_id + 15] = 2;
        }),
    ];
    for damaged in &cases {
        let restore = |conn: &mut Conn| conn.call(&[b"RESTORE", b"d", b"0", damaged, b"REPLACE"]);
        let reply = restore(&mut ours);
        assert!(matches!(reply, V::Error(_)), "{reply:?}");
        assert_eq!(reply, restore(&mut theirs));
    }
    // The undamaged payload loads, and the server is still there.
    assert_eq!(
        ours.call(&[b"RESTORE", b"d", b"0", &payload, b"REPLACE"]),
        V::Simple("OK".into())
    );
    assert_eq!(
        ours.cmd(&["XPENDING", "d", "g1", "-", "+", "10", "bob"])
            .items()
            .len(),
        1
    );
}

/// DEBUG DIGEST-VALUE and DEBUG DIGEST of a stream are its entries' only: Redis 7.0 mixes
/// no group into them, and neither does Tessera.
#[test]
fn digests_leave_the_groups_out_as_redis_does() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis_dir = temp_dir();
    let redis = RedisOracle::start_with(
        &redis_binary,
        redis_dir.path(),
        &["--enable-debug-command", "yes"],
    );
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--enable-debug-command", "yes"]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let found = compare(
        &mut ours,
        &mut theirs,
        &[
            "XADD s 1-1 a b",
            "XADD s 2-1 c d",
            "DEBUG DIGEST-VALUE s",
            "XGROUP CREATE s g 0",
            "XREADGROUP GROUP g c STREAMS s >",
            "DEBUG DIGEST-VALUE s",
            "DEBUG DIGEST",
            "XDEL s 1-1",
            "DEBUG DIGEST-VALUE s",
        ],
    );
    assert!(found.is_empty(), "{}", found.join("\n"));
    let grouped = ours.cmd(&["DEBUG", "DIGEST-VALUE", "s"]);
    ours.cmd(&["XGROUP", "DESTROY", "s", "g"]);
    assert_eq!(ours.cmd(&["DEBUG", "DIGEST-VALUE", "s"]), grouped);
}

/// MEMORY USAGE counts the groups whole, as Redis's `objectComputeSize` does: a PEL of a
/// thousand entries and its consumers weigh, and go with the group.
#[test]
fn memory_usage_counts_the_groups() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = Conn::new(server.port);
    for ms in 1..=1000 {
        conn.cmd(&["XADD", "s", &format!("{ms}-0"), "f", "v"]);
    }
    let usage = |conn: &mut Conn| match conn.cmd(&["MEMORY", "USAGE", "s", "SAMPLES", "0"]) {
        V::Int(bytes) => bytes,
        other => panic!("{other:?}"),
    };
    let entries_only = usage(&mut conn);
    conn.cmd(&["XGROUP", "CREATE", "s", "g", "0"]);
    for consumer in ["a", "b", "c", "d"] {
        conn.cmd(&[
            "XREADGROUP",
            "GROUP",
            "g",
            consumer,
            "COUNT",
            "250",
            "STREAMS",
            "s",
            ">",
        ]);
    }
    let with_pel = usage(&mut conn);
    // At least an ID, a delivery time and count and an owner per entry, and the ID again
    // in its consumer's list.
    assert!(
        with_pel >= entries_only + 1000 * (16 + 8 + 8 + 16),
        "{entries_only} -> {with_pel}"
    );
    conn.cmd(&["XGROUP", "DESTROY", "s", "g"]);
    assert_eq!(usage(&mut conn), entries_only);
}
