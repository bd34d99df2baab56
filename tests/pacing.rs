//! How fast a compaction writes: `aof-rewrite-max-rate` and the adaptive pacer
//! (`aof-rewrite-adaptive-rate`), with the real server process. A held-back compaction
//! lets writes through and finishes once it may go on, with every key kept.

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[test]
fn a_rate_limited_compaction_lets_writes_through_and_finishes_once_the_limit_is_lifted() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--save", "", "--rdbcompression", "no"]);
    let mut conn = server.connection();
    // 4 MB of values: at 64 KB/s the parts would take about a minute.
    let value = |i: usize, round: usize| format!("{round:04}-{i:06}-").repeat(200);
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        pipe.cmd("SET")
            .arg(format!("k{i}"))
            .arg(value(i, 0))
            .ignore();
    }
    let _: () = pipe.query(&mut conn).unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-rewrite-max-rate")
        .arg("64kb")
        .query(&mut conn)
        .unwrap();
    let rate: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("aof-rewrite-max-rate")
        .query(&mut conn)
        .unwrap();
    assert_eq!(rate, ["aof-rewrite-max-rate", "65536"]);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();

    // Held back by the limit: still running after a second of writes, every write answered.
    let started = Instant::now();
    let mut round = 1;
    while started.elapsed() < Duration::from_secs(1) {
        let mut pipe = redis::pipe();
        for i in (0..2000).step_by(7) {
            pipe.cmd("SET")
                .arg(format!("k{i}"))
                .arg(value(i, round))
                .ignore();
        }
        let _: () = pipe.query(&mut conn).unwrap();
        round += 1;
    }
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").unwrap(),
        "1",
        "the limit did not hold the compaction back"
    );

    // Lifted while it runs: it finishes.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("aof-rewrite-max-rate")
        .arg("0")
        .query(&mut conn)
        .unwrap();
    wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
        "ok"
    );
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("1")
        .query(&mut conn)
        .unwrap();
    let expected: Vec<(String, String)> = (0..2000)
        .map(|i| {
            let last = if i % 7 == 0 { round - 1 } else { 0 };
            (format!("k{i}"), value(i, last))
        })
        .collect();
    server.kill9();
    let server = start_server(dir.path(), &["--save", ""]);
    let mut conn = server.connection();
    for (key, value) in &expected {
        let got: String = redis::cmd("GET").arg(key).query(&mut conn).unwrap();
        assert!(got == *value, "{key} after the restart");
    }
    let after: String = redis::cmd("GET").arg("after").query(&mut conn).unwrap();
    assert_eq!(after, "1");
}

#[test]
fn a_compaction_backs_off_to_a_pause_under_a_saturating_load_and_finishes_once_it_stops() {
    // Clients keep the event loop busy with reads (KEYS scanning every key): the pacer
    // takes the writers' rate down to a pause, and a compaction started then waits (the
    // reads neither grow the log nor change what it captured). Once the load stops, the
    // rate comes back and the compaction finishes with every key.
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &[
            "--save",
            "",
            "--rdbcompression",
            "no",
            "--aof-rewrite-adaptive-rate",
            "yes",
        ],
    );
    let mut conn = server.connection();
    let value = |i: usize| format!("{i:06}-").repeat(300);
    let mut pipe = redis::pipe();
    for i in 0..8000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(value(i)).ignore();
    }
    let _: () = pipe.query(&mut conn).unwrap();
    let rate =
        |conn: &mut redis::Connection| info_field(conn, "tessera_background_write_rate").unwrap();
    let wait_for_rate = |conn: &mut redis::Connection, wanted: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while rate(conn) != wanted {
            assert!(
                Instant::now() < deadline,
                "the writers' rate never got {wanted}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    wait_for_rate(&mut conn, "unlimited"); // the loading kept the loop busy for a while

    let stop = Arc::new(AtomicBool::new(false));
    let loaders: Vec<_> = (0..3)
        .map(|_| {
            let (stop, mut conn) = (stop.clone(), server.connection());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut pipe = redis::pipe();
                    for _ in 0..10 {
                        pipe.cmd("KEYS").arg("nothing-matches-*");
                    }
                    let _: Vec<Vec<String>> = pipe.query(&mut conn).unwrap();
                }
            })
        })
        .collect();
    wait_for_rate(&mut conn, "paused");
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let keys_written: u64 = info_field(&mut conn, "current_save_keys_processed")
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        info_field(&mut conn, "aof_rewrite_in_progress").unwrap(),
        "1",
        "the compaction did not wait for the load"
    );
    assert!(
        keys_written < 8000,
        "{keys_written} keys written while paused"
    );
    assert_eq!(rate(&mut conn), "paused");

    stop.store(true, Ordering::Relaxed);
    for loader in loaders {
        loader.join().unwrap();
    }
    wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "aof_last_bgrewrite_status").unwrap(),
        "ok"
    );
    wait_for_rate(&mut conn, "unlimited");
    server.kill9();
    let server = start_server(dir.path(), &["--save", ""]);
    let mut conn = server.connection();
    assert_eq!(common::dbsize(&mut conn), 8000);
    for i in (0..8000).step_by(97) {
        let got: String = redis::cmd("GET")
            .arg(format!("k{i}"))
            .query(&mut conn)
            .unwrap();
        assert!(got == value(i), "k{i} after the restart");
    }
}
