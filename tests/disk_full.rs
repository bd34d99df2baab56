//! A full disk, for real: the server's directory is a small tmpfs the test mounts, filled
//! with a file the test can delete. While the log cannot be written, writes are refused
//! with `-MISCONF` but reads, INFO and CONFIG answer at once; when space returns, writes
//! resume by themselves and nothing acknowledged is lost. A compaction that runs out of
//! space half way leaves the previous manifest in force and no part behind.
//!
//! Mounting needs root (CAP_SYS_ADMIN); where it is refused the tests fail, or skip with
//! `TESSERA_SKIP_PRIVILEGED=1` (the file-size-limit test in `durability.rs` covers the
//! write path without root).

mod common;

use common::{Capability, WHOLE_TEST, info_field, manifest_files, skip, start_server, temp_dir};
use redis::Commands;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A tmpfs of a fixed size, unmounted when dropped (lazily: a server killed by a failed
/// assertion may still be closing its files).
struct SmallDisk {
    path: PathBuf,
    _parent: tempfile::TempDir,
}

impl SmallDisk {
    /// Mounts the tmpfs, or `skip`s the test (see `common::skip`) and returns None.
    fn mount(megabytes: u64) -> Option<SmallDisk> {
        let parent = temp_dir();
        let path = parent.path().join("disk");
        std::fs::create_dir(&path).unwrap();
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={megabytes}m"), "tmpfs"])
            .arg(&path)
            .output();
        let reason = match output {
            Ok(output) if output.status.success() => {
                return Some(SmallDisk {
                    path,
                    _parent: parent,
                });
            }
            // The first line of mount's complaint, the same for every test.
            Ok(output) => format!(
                "can't mount a tmpfs (needs root): {}",
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .replace(&path.display().to_string(), "<dir>")
            ),
            Err(e) => format!("can't run mount: {e}"),
        };
        skip(Capability::Privileged, WHOLE_TEST, &reason);
        None
    }

    /// Fills the disk with `filler` until it is full, then frees `headroom` bytes of it.
    fn fill_leaving(&self, headroom: u64) -> PathBuf {
        let filler = self.path.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xa5u8; 64 * 1024];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
        file.set_len(written.saturating_sub(headroom)).unwrap();
        file.sync_all().unwrap();
        filler
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}

/// A connection whose every reply must come within `limit`: a reply that waits for the
/// disk fails the test with a timeout instead of hanging it.
fn prompt_connection(server: &common::TestServer, limit: Duration) -> redis::Connection {
    let conn = server.connection();
    conn.set_read_timeout(Some(limit)).unwrap();
    conn
}

const PROMPT: Duration = Duration::from_secs(5);

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn log_status(server: &common::TestServer) -> String {
    let mut conn = prompt_connection(server, PROMPT);
    info_field(&mut conn, "aof_last_write_status").unwrap_or_default()
}

#[test]
fn reads_answer_while_the_disk_is_full_and_writes_resume_when_space_returns() {
    for policy in ["always", "everysec"] {
        let Some(disk) = SmallDisk::mount(16) else {
            return;
        };
        let mut server = start_server(&disk.path, &["--appendfsync", policy]);
        let mut conn = prompt_connection(&server, PROMPT);
        for i in 0..100 {
            let _: () = conn.set(format!("before:{i}"), i).unwrap();
        }
        let filler = disk.fill_leaving(256 * 1024);

        // One client writes 1 KB values in turn until it is refused. Under `always` the
        // write that hits the full disk is not acknowledged until its bytes are durable:
        // that reply is held (its thread waits) until space returns.
        // It stops once the test has seen the log fail: after space returns, its held
        // reply goes out, and writing on would fill the disk again and hold its next
        // reply for good (it might slip in before the cron clears the failure).
        let url = server.url();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop_writing = stop.clone();
        let writer = std::thread::spawn(move || {
            let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
            let value = "w".repeat(1024);
            let mut acknowledged = Vec::new();
            for i in 0..100_000 {
                if stop_writing.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let key = format!("written:{i}");
                match conn.set::<_, _, ()>(&key, &value) {
                    Ok(()) => acknowledged.push(key),
                    Err(e) => return (acknowledged, Some(e.to_string())),
                }
            }
            (acknowledged, None)
        });
        wait_until("the log to fail", Duration::from_secs(30), || {
            log_status(&server) == "err"
        });
        stop.store(true, std::sync::atomic::Ordering::SeqCst);

        // The log is failing: reads, INFO and CONFIG answer at once, on connections that
        // have read keys, again and again; writes are refused with Redis's MISCONF text.
        let mut reader = prompt_connection(&server, PROMPT);
        for round in 0..5 {
            let value: Option<i64> = reader.get(format!("before:{}", round * 7)).unwrap();
            assert_eq!(value, Some(round * 7), "{policy}");
            let _: usize = redis::cmd("DBSIZE").query(&mut reader).unwrap();
            let _: Vec<String> = reader.keys("before:1*").unwrap();
            let info: String = redis::cmd("INFO").query(&mut reader).unwrap();
            assert!(info.contains("aof_last_write_status:err"), "{policy}");
            let fsync: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("appendfsync")
                .query(&mut reader)
                .unwrap();
            assert_eq!(fsync, ["appendfsync", policy]);
            let refused = reader.set::<_, _, ()>("refused", "x").unwrap_err();
            assert!(
                refused.to_string().contains("MISCONF") && refused.to_string().contains("AOF"),
                "{policy}: {refused}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }

        // Space returns: the writer's retry succeeds, held replies go out, writes resume.
        std::fs::remove_file(&filler).unwrap();
        wait_until("writes to resume", Duration::from_secs(30), || {
            let mut conn = prompt_connection(&server, PROMPT);
            conn.set::<_, _, ()>("healed", "yes").is_ok()
        });
        assert_eq!(log_status(&server), "ok");
        wait_until("the recovery to be logged", Duration::from_secs(10), || {
            server.log().contains("AOF write error looks solved")
        });
        let (acknowledged, error) = writer.join().unwrap();
        assert!(!acknowledged.is_empty(), "{policy}: nothing was written");
        if let Some(error) = &error {
            assert!(error.contains("MISCONF"), "{policy}: {error}");
        }

        server.kill9();
        let server = start_server(&disk.path, &["--appendfsync", policy]);
        let mut conn = prompt_connection(&server, PROMPT);
        for key in &acknowledged {
            let value: Option<String> = conn.get(key).unwrap();
            assert_eq!(
                value.map(|v| v.len()),
                Some(1024),
                "{policy}: acknowledged {key} lost"
            );
        }
        let healed: Option<String> = conn.get("healed").unwrap();
        assert_eq!(healed.as_deref(), Some("yes"));
        let before: Option<i64> = conn.get("before:99").unwrap();
        assert_eq!(before, Some(99));
    }
}

/// Base parts present in the log directory.
fn base_files(aof_dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(aof_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".base."))
        .collect();
    names.sort();
    names
}

#[test]
fn a_compaction_that_runs_out_of_space_leaves_the_previous_manifest_in_force() {
    let Some(disk) = SmallDisk::mount(32) else {
        return;
    };
    let args = [
        "--aof-rewrite-threads",
        "2",
        "--rdbcompression",
        "no",
        "--auto-aof-rewrite-percentage",
        "0",
    ];
    let mut server = start_server(&disk.path, &args);
    let mut conn = prompt_connection(&server, PROMPT);
    // A first compaction, so that there is a previous base to keep.
    let _: () = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    common::wait_for_background_jobs(&mut conn);
    // 4 MB of distinct values that do not compress.
    let mut pipe = redis::pipe();
    for i in 0..4000u32 {
        let value: Vec<u8> = (0..1024u32)
            .map(|j| (i.wrapping_mul(2654435761) ^ j.wrapping_mul(40503)).to_le_bytes()[1])
            .collect();
        pipe.set(format!("key:{i}"), value).ignore();
    }
    let _: () = pipe.query(&mut conn).unwrap();
    let aof_dir = server.aof_dir();
    let manifest_before = manifest_files(&aof_dir);
    let bases_before = base_files(&aof_dir);
    assert_eq!(bases_before.len(), 2, "{bases_before:?}");

    // About 1.5 MB free: the new parts (4 MB) cannot fit.
    let filler = disk.fill_leaving(1536 * 1024);
    let _: () = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    common::wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "aof_last_bgrewrite_status").as_deref(),
        Some("err")
    );
    // The log line may land a moment after INFO shows the outcome.
    wait_until("the failure to be logged", Duration::from_secs(10), || {
        server.log().contains("No space left on device")
    });
    // The previous base is still the one in force, its files all there; the new parts
    // are gone; the manifest lists the old files (plus the new incremental file the
    // compaction switched to).
    let manifest_after = manifest_files(&aof_dir);
    for name in &manifest_before {
        assert!(
            manifest_after.contains(name),
            "{name} dropped: {manifest_after:?}"
        );
    }
    assert_eq!(base_files(&aof_dir), bases_before, "new parts left behind");
    for name in &manifest_after {
        assert!(aof_dir.join(name).exists(), "{name} listed but missing");
    }

    // Still serving, and once space returns, writing and compacting again.
    let value: Option<Vec<u8>> = conn.get("key:17").unwrap();
    assert_eq!(value.map(|v| v.len()), Some(1024));
    std::fs::remove_file(&filler).unwrap();
    wait_until("writes to be accepted", Duration::from_secs(30), || {
        let mut conn = prompt_connection(&server, PROMPT);
        conn.set::<_, _, ()>("after", "1").is_ok()
    });
    let _: () = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
    common::wait_for_background_jobs(&mut conn);
    assert_eq!(
        info_field(&mut conn, "aof_last_bgrewrite_status").as_deref(),
        Some("ok")
    );
    server.kill9();
    let server = start_server(&disk.path, &args);
    let mut conn = prompt_connection(&server, PROMPT);
    assert_eq!(common::dbsize(&mut conn), 4001);
}
