//! A missing, empty, truncated, stale or wrong manifest never costs data: start-up refuses
//! (the process exits non-zero, its log names the files and the repair command) and keeps
//! every byte; `tessera-check-aof --rebuild-manifest` rebuilds a manifest that loads every
//! key; start-up removes only what the manifest proves garbage (temp files, parts and
//! empty incremental files above its sequence numbers, history files) and keeps the rest.

mod common;

use common::dirs::{contents, string_keys as dump};
use common::*;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera::storage::{CRASH_AT_ENV, CrashPoint};

const MANIFEST: &str = "appendonly.aof.manifest";

fn names(dir: &Path) -> Vec<String> {
    contents(dir).into_keys().collect()
}

/// Writes `count` keys from `first`, and INCRs a counter `count / 4` times: replaying a
/// file twice, or skipping one, shows in the counter.
fn write_keys(conn: &mut redis::Connection, first: usize, count: usize) {
    let mut pipe = redis::pipe();
    for i in first..first + count {
        pipe.cmd("SET")
            .arg(format!("key:{i}"))
            .arg(format!("value {i}"))
            .ignore();
        if i % 4 == 0 {
            pipe.cmd("INCR").arg("counter").ignore();
        }
    }
    let _: () = pipe.query(conn).unwrap();
}

/// How the server that wrote a directory stopped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    Shutdown,
    Kill9,
}

/// What a test directory holds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    /// Incremental file 1 only.
    LogOnly,
    /// A compaction with 3 parts, then writes after it.
    Compacted,
}

/// A log directory with data, written by the real server; returns it and its dataset.
fn written_dir(shape: Shape, stop: Stop) -> (tempfile::TempDir, BTreeMap<String, String>) {
    let dir = temp_dir();
    let mut server = start_server(
        dir.path(),
        &[
            "--appendfsync",
            "always",
            "--aof-rewrite-threads",
            "3",
            "--save",
            "",
        ],
    );
    let mut conn = server.connection();
    write_keys(&mut conn, 0, 400);
    if shape == Shape::Compacted {
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_background_jobs(&mut conn);
        write_keys(&mut conn, 400, 100);
    }
    let expected = dump(&mut conn);
    match stop {
        Stop::Shutdown => server.shutdown(),
        Stop::Kill9 => server.kill9(),
    }
    (dir, expected)
}

fn aof_dir(dir: &Path) -> PathBuf {
    dir.join("appendonlydir")
}

/// Runs the server on `dir` and expects it to refuse: it must exit non-zero by itself
/// before accepting connections. Returns what it printed.
fn expect_refusal(dir: &Path) -> String {
    let mut child = Command::new(SERVER_BIN)
        .args(["--port", "0", "--save", "", "--dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the server did not refuse to start");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut output = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut output)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut output)
        .unwrap();
    assert!(!status.success(), "exit status {status}: {output}");
    assert!(!output.contains("panicked"), "{output}");
    assert!(!output.contains("Ready to accept connections"), "{output}");
    output
}

fn rebuild(dir: &Path) -> String {
    let (ok, output) = check_aof(&["--rebuild-manifest", "-y", dir.to_str().unwrap()], "");
    assert!(ok, "{output}");
    output
}

/// The refusal names every log file, the problem and the repair command, and nothing
/// on disk changed.
fn assert_refused_keeping_everything(
    dir: &Path,
    before: &BTreeMap<String, Vec<u8>>,
    problem: &str,
) {
    let output = expect_refusal(dir);
    assert!(output.contains(problem), "{output}");
    for name in before
        .keys()
        .filter(|n| n.contains(".base.") || n.contains(".incr."))
    {
        assert!(output.contains(name.as_str()), "{name} not named: {output}");
    }
    assert!(
        output.contains(&format!(
            "tessera-check-aof --rebuild-manifest {}",
            aof_dir(dir).display()
        )),
        "{output}"
    );
    assert_eq!(&contents(&aof_dir(dir)), before, "bytes changed");
}

#[test]
fn a_missing_manifest_refuses_to_start_and_a_rebuild_loads_every_key() {
    for (shape, stop) in [
        (Shape::LogOnly, Stop::Kill9),
        (Shape::Compacted, Stop::Shutdown),
        (Shape::Compacted, Stop::Kill9),
    ] {
        let (dir, expected) = written_dir(shape, stop);
        let aof = aof_dir(dir.path());
        std::fs::remove_file(aof.join(MANIFEST)).unwrap();
        let before = contents(&aof);
        if shape == Shape::Compacted {
            assert_eq!(
                before.keys().filter(|n| n.contains(".base.")).count(),
                3,
                "{before:?}"
            );
        }
        assert_refused_keeping_everything(dir.path(), &before, "is missing");
        // A second attempt refuses the same way: nothing was half-done.
        assert_refused_keeping_everything(dir.path(), &before, "is missing");
        // Asked, answering no: nothing is written.
        let (ok, output) = check_aof(&["--rebuild-manifest", aof.to_str().unwrap()], "n\n");
        assert!(!ok && output.contains("Continue? [y/N]"), "{output}");
        assert_eq!(contents(&aof), before);
        let output = rebuild(&aof);
        for name in before.keys() {
            assert!(output.contains(name.as_str()), "{name}: {output}");
        }
        let server = start_server(dir.path(), &["--save", ""]);
        assert_eq!(
            dump(&mut server.connection()),
            expected,
            "{shape:?} {stop:?}"
        );
    }
}

#[test]
fn an_empty_or_truncated_manifest_refuses_to_start_and_keeps_every_byte() {
    let (dir, expected) = written_dir(Shape::Compacted, Stop::Shutdown);
    let aof = aof_dir(dir.path());
    let good = std::fs::read_to_string(aof.join(MANIFEST)).unwrap();
    // Parts first, the incremental file last: a cut can lose the incremental file.
    assert!(good.lines().last().unwrap().contains(".incr.aof"), "{good}");
    let last_line_start = good[..good.len() - 1].rfind('\n').unwrap() + 1;
    let cases = [
        ("", "is empty"),
        ("# nothing but a comment\n", "is empty"),
        // Cut in the middle of a name.
        (&good[..last_line_start + 12], "cut short"),
        // Cut right before a newline: every line left looks whole, but the last one lost
        // its end, and the incremental file after it is gone from the text.
        (&good[..last_line_start - 1], "cut short"),
    ];
    for (text, problem) in cases {
        std::fs::write(aof.join(MANIFEST), text).unwrap();
        let before = contents(&aof);
        assert_refused_keeping_everything(dir.path(), &before, problem);
    }
    // The repair: the rebuilt manifest is the one that was lost; the damaged one is kept.
    let output = rebuild(&aof);
    assert!(output.contains("appendonly.aof.manifest.bak"), "{output}");
    assert_eq!(std::fs::read_to_string(aof.join(MANIFEST)).unwrap(), good);
    let server = start_server(dir.path(), &["--save", ""]);
    assert_eq!(dump(&mut server.connection()), expected);
}

#[test]
fn a_garbage_manifest_refuses_even_without_log_files() {
    let dir = temp_dir();
    let aof = aof_dir(dir.path());
    std::fs::create_dir_all(&aof).unwrap();
    for text in [
        &b"file ../../etc/passwd seq 1 type i\n"[..],
        b"file a seq 1 type i\nfile a seq 2 type i\n",
        b"file \xff seq 1 type i\n",
        b"file x seq 99999999999999999999 type i\n",
    ] {
        std::fs::write(aof.join(MANIFEST), text).unwrap();
        let output = expect_refusal(dir.path());
        assert!(output.contains("is not valid"), "{output}");
        assert_eq!(std::fs::read(aof.join(MANIFEST)).unwrap(), text);
    }
}

#[test]
fn a_manifest_listing_missing_files_refuses_naming_them() {
    let (dir, _) = written_dir(Shape::Compacted, Stop::Shutdown);
    let aof = aof_dir(dir.path());
    std::fs::remove_file(aof.join("appendonly.aof.1.base.2.rdb")).unwrap();
    let before = contents(&aof);
    let output = expect_refusal(dir.path());
    assert!(
        output.contains("lists files that do not exist: appendonly.aof.1.base.2.rdb"),
        "{output}"
    );
    assert_eq!(contents(&aof), before);
    // Nor can the manifest be rebuilt from an incomplete base.
    let (ok, output) = check_aof(&["--rebuild-manifest", "-y", aof.to_str().unwrap()], "");
    assert!(!ok, "{output}");
    assert!(output.contains("part 2 is missing"), "{output}");
    assert_eq!(contents(&aof), before);
}

#[test]
fn unlisted_files_above_the_manifest_are_removed_only_when_a_crash_explains_them() {
    let (dir, expected) = written_dir(Shape::Compacted, Stop::Shutdown);
    let aof = aof_dir(dir.path());
    // Manifest: base 1 (3 parts) + incremental file 2.
    assert_eq!(
        manifest_files(&aof).last().unwrap(),
        "appendonly.aof.2.incr.aof"
    );
    // Left by crashes mid-change: an empty new incremental file (a rotation before its
    // manifest commit), parts of a compaction that did not commit, a temp manifest.
    std::fs::write(aof.join("appendonly.aof.3.incr.aof"), b"").unwrap();
    std::fs::write(
        aof.join("appendonly.aof.2.base.1.rdb"),
        b"REDIS0010 partial",
    )
    .unwrap();
    std::fs::write(aof.join("temp-appendonly.aof.manifest"), b"file x").unwrap();
    // Older than the manifest and unlisted: superseded, most likely, but not provably.
    std::fs::write(
        aof.join("appendonly.aof.1.incr.aof"),
        b"*3\r\n$3\r\nSET\r\n$3\r\nold\r\n$1\r\n1\r\n",
    )
    .unwrap();
    // Not a file of the log at all.
    std::fs::write(aof.join("notes.txt"), b"mine").unwrap();
    let mut server = start_server(dir.path(), &["--save", ""]);
    assert_eq!(dump(&mut server.connection()), expected);
    let left = names(&aof);
    for removed in [
        "appendonly.aof.3.incr.aof",
        "appendonly.aof.2.base.1.rdb",
        "temp-appendonly.aof.manifest",
    ] {
        assert!(!left.contains(&removed.to_string()), "{removed}: {left:?}");
    }
    for kept in ["appendonly.aof.1.incr.aof", "notes.txt"] {
        assert!(left.contains(&kept.to_string()), "{kept}: {left:?}");
    }
    assert!(
        server
            .log()
            .contains("keeping files the manifest does not list: appendonly.aof.1.incr.aof"),
        "{}",
        server.log()
    );
    server.shutdown();

    // An incremental file above the manifest that holds records: the manifest is older
    // than the directory. Refuse, naming it, and keep everything.
    std::fs::write(
        aof.join("appendonly.aof.3.incr.aof"),
        b"*3\r\n$3\r\nSET\r\n$3\r\nnew\r\n$1\r\n1\r\n",
    )
    .unwrap();
    let before = contents(&aof);
    let output = expect_refusal(dir.path());
    assert!(
        output.contains("appendonly.aof.3.incr.aof (29 bytes)")
            && output.contains("older than the directory")
            && output.contains("--rebuild-manifest"),
        "{output}"
    );
    assert_eq!(contents(&aof), before);
    // The rebuild lists it after incremental file 2 (the parts record that the base is
    // followed by file 2), and leaves file 1 out.
    let output = rebuild(&aof);
    assert!(
        output.contains(
            "appendonly.aof.1.incr.aof: not listed: incremental file 1 comes before base 1"
        ),
        "{output}"
    );
    assert_eq!(
        manifest_files(&aof),
        [
            "appendonly.aof.1.base.1.rdb",
            "appendonly.aof.1.base.2.rdb",
            "appendonly.aof.1.base.3.rdb",
            "appendonly.aof.2.incr.aof",
            "appendonly.aof.3.incr.aof"
        ]
    );
    let server = start_server(dir.path(), &["--save", ""]);
    let mut with_new = expected.clone();
    with_new.insert("new".into(), "1".into());
    assert_eq!(dump(&mut server.connection()), with_new);
}

#[test]
fn history_files_are_deleted_at_start_up_and_dropped_from_the_manifest() {
    let (dir, expected) = written_dir(Shape::Compacted, Stop::Shutdown);
    let aof = aof_dir(dir.path());
    // A second compaction: base 2 (3 parts) + incremental file 3.
    let mut server = start_server(dir.path(), &["--save", "", "--aof-rewrite-threads", "3"]);
    let mut conn = server.connection();
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    wait_for_background_jobs(&mut conn);
    server.shutdown();
    let manifest = std::fs::read_to_string(aof.join(MANIFEST)).unwrap();
    assert!(!manifest.contains("type h"), "{manifest}");
    // As that compaction leaves it when it crashes after committing its manifest: the
    // files it made obsolete listed as history, some already deleted, some not.
    let (parts, incr) = manifest.split_at(manifest.find("file appendonly.aof.3.incr").unwrap());
    std::fs::write(
        aof.join(MANIFEST),
        format!(
            "{parts}file appendonly.aof.1.base.1.rdb seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type h\n{incr}"
        ),
    )
    .unwrap();
    // Were it loaded, `old` would appear.
    std::fs::write(
        aof.join("appendonly.aof.2.incr.aof"),
        b"*3\r\n$3\r\nSET\r\n$3\r\nold\r\n$1\r\n1\r\n",
    )
    .unwrap();
    let server = start_server(dir.path(), &["--save", ""]);
    assert_eq!(dump(&mut server.connection()), expected);
    assert!(!aof.join("appendonly.aof.2.incr.aof").exists());
    assert_eq!(
        std::fs::read_to_string(aof.join(MANIFEST)).unwrap(),
        manifest,
        "the manifest is committed again without its history"
    );
    assert!(
        server
            .log()
            .contains("removing appendonly.aof.2.incr.aof: a history file"),
        "{}",
        server.log()
    );
}

#[test]
fn a_manifest_with_a_base_and_no_incremental_file_loads_and_gains_one() {
    let (dir, expected) = written_dir(Shape::Compacted, Stop::Shutdown);
    let aof = aof_dir(dir.path());
    // What Redis 7.0 accepts: the base alone (its incremental file, and the records in it,
    // gone with it).
    let manifest = std::fs::read_to_string(aof.join(MANIFEST)).unwrap();
    let parts: String = manifest
        .lines()
        .filter(|l| l.contains("type b"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(aof.join(MANIFEST), &parts).unwrap();
    std::fs::remove_file(aof.join("appendonly.aof.2.incr.aof")).unwrap();
    let mut server = start_server(dir.path(), &["--save", ""]);
    let mut conn = server.connection();
    let loaded = dump(&mut conn);
    assert!(loaded.len() >= 400 && loaded.len() < expected.len());
    assert_eq!(
        std::fs::read_to_string(aof.join(MANIFEST)).unwrap(),
        format!("{parts}file appendonly.aof.1.incr.aof seq 1 type i\n")
    );
    // The new file takes writes, and they survive a restart.
    let _: () = redis::cmd("SET")
        .arg("after")
        .arg("x")
        .query(&mut conn)
        .unwrap();
    let loaded = dump(&mut conn);
    server.kill9();
    let server = start_server(dir.path(), &["--save", ""]);
    assert_eq!(dump(&mut server.connection()), loaded);
}

#[test]
fn a_fresh_directory_still_starts() {
    // No directory; an empty one; one where a first start crashed before its manifest
    // commit (an empty incremental file and a temp manifest).
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--save", ""]);
    assert_eq!(
        manifest_files(&aof_dir(dir.path())),
        ["appendonly.aof.1.incr.aof"]
    );
    drop(server);
    for leftovers in [
        &[][..],
        &["appendonly.aof.1.incr.aof", "temp-appendonly.aof.manifest"],
    ] {
        let dir = temp_dir();
        let aof = aof_dir(dir.path());
        std::fs::create_dir_all(&aof).unwrap();
        for name in leftovers {
            std::fs::write(aof.join(name), b"").unwrap();
        }
        let server = start_server(dir.path(), &["--save", ""]);
        let mut conn = server.connection();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query(&mut conn)
            .unwrap();
        assert_eq!(names(&aof), ["appendonly.aof.1.incr.aof", MANIFEST]);
    }
}

#[test]
fn a_rebuild_after_a_compaction_crashed_before_its_deletions_replays_only_what_follows_the_base() {
    // The compaction commits its manifest and dies before deleting the files it made
    // obsolete; then the manifest is lost. Incremental file 1 (whose records are in the
    // base) and file 2 (the records after the base) are both there: replaying file 1 on
    // top of the base would apply its INCRs twice. The parts record that file 2 follows.
    let dir = temp_dir();
    let mut server = try_start_server_with(
        dir.path(),
        &[
            "--appendfsync",
            "always",
            "--aof-rewrite-threads",
            "3",
            "--rdb-key-save-delay",
            "2000",
            "--save",
            "",
        ],
        |command| {
            command.env(CRASH_AT_ENV, CrashPoint::RewriteCommitted.as_str());
        },
    )
    .unwrap();
    let mut conn = server.connection();
    write_keys(&mut conn, 0, 400);
    let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    // While the slow parts are written: these go to incremental file 2.
    write_keys(&mut conn, 400, 50);
    let deadline = Instant::now() + Duration::from_secs(20);
    let child = server.child.as_mut().unwrap();
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the crash point was not reached");
        std::thread::sleep(Duration::from_millis(10));
    }
    server.child = None;
    let mut expected: BTreeMap<String, String> = (0..450)
        .map(|i| (format!("key:{i}"), format!("value {i}")))
        .collect();
    expected.insert(
        "counter".into(),
        (0..450).filter(|i| i % 4 == 0).count().to_string(),
    );
    let aof = aof_dir(dir.path());
    let present = names(&aof);
    for name in ["appendonly.aof.1.incr.aof", "appendonly.aof.2.incr.aof"] {
        assert!(present.contains(&name.to_string()), "{present:?}");
    }
    std::fs::remove_file(aof.join(MANIFEST)).unwrap();
    let output = rebuild(&aof);
    assert!(
        output.contains(
            "appendonly.aof.1.incr.aof: not listed: incremental file 1 comes before base 1"
        ) && output.contains("the first after base 1, as its parts record"),
        "{output}"
    );
    let server = start_server(dir.path(), &["--save", ""]);
    assert_eq!(dump(&mut server.connection()), expected);
}
