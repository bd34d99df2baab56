//! SHUTDOWN and the termination signals with replicas (Redis 7.0's `shutdown-timeout`):
//! a master waits for its lagging redis-server 7.0.15 replicas before it exits, holding
//! writes meanwhile; SHUTDOWN NOW does not wait; SHUTDOWN ABORT cancels the wait; SIGTERM
//! waits too and a second SIGINT exits at once. Each situation runs against a Tessera
//! master and a redis-server master, and their replies and exits are compared.

mod common;

use common::raw_client::{Conn, V};
use common::replication::*;
use common::{
    RedisOracle, TestServer, WHOLE_TEST, require_redis_or_skip, run, start_server, temp_dir,
};
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// A master under test: Tessera, or redis-server for comparison.
struct Master {
    tessera: Option<TestServer>,
    redis: Option<RedisOracle>,
    port: u16,
    log_path: PathBuf,
    _dir: tempfile::TempDir,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Tessera,
    Redis,
}

impl Master {
    fn start(kind: Kind, args: &[&str]) -> Master {
        let dir = temp_dir();
        match kind {
            Kind::Tessera => {
                let server = start_master(dir.path(), args);
                Master {
                    port: server.port,
                    log_path: server.log_path.clone(),
                    tessera: Some(server),
                    redis: None,
                    _dir: dir,
                }
            }
            Kind::Redis => {
                let binary = common::gated_redis();
                let log_path = dir.path().join("master.log");
                let mut all = vec![
                    "--appendonly",
                    "no",
                    "--enable-debug-command",
                    "yes",
                    "--repl-diskless-sync-delay",
                    "0",
                    "--logfile",
                    log_path.to_str().unwrap(),
                ];
                all.extend_from_slice(args);
                let redis = RedisOracle::start_with(&binary, dir.path(), &all);
                Master {
                    port: redis.port,
                    log_path,
                    tessera: None,
                    redis: Some(redis),
                    _dir: dir,
                }
            }
        }
    }

    fn child(&mut self) -> &mut Child {
        match (&mut self.tessera, &mut self.redis) {
            (Some(server), _) => server.child.as_mut().expect("running"),
            (_, Some(redis)) => &mut redis.child,
            _ => unreachable!(),
        }
    }

    fn connection(&self) -> redis::Connection {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))
            .unwrap()
            .get_connection()
            .unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Waits for `text` in the log: Tessera's reaches its file through a relay thread,
    /// which may lag under load (even past the process's exit).
    fn wait_log(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.log().contains(text) {
            assert!(
                Instant::now() < deadline,
                "{text:?} not logged:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&mut self, signal: &str) {
        let pid = self.child().id().to_string();
        let status = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    fn exit_status(&mut self) -> Option<ExitStatus> {
        self.child().try_wait().unwrap()
    }

    /// Waits up to `timeout` for the process to exit.
    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A master of `kind` with one redis-server replica, online.
fn master_with_replica(kind: Kind, args: &[&str]) -> (Master, Replica) {
    let master = Master::start(kind, args);
    let replica = Replica::start(master.port);
    wait_online(&mut master.connection(), 1);
    (master, replica)
}

/// A master whose replica is stopped (SIGSTOP) and one write behind: the replica lags.
fn master_with_a_lagging_replica(
    kind: Kind,
    args: &[&str],
    key: &str,
) -> (Master, Replica, redis::Connection) {
    let (master, replica) = master_with_replica(kind, args);
    let mut conn = master.connection();
    replica.signal("STOP");
    common::run(&mut conn, &["SET", key, "1"]);
    (master, replica, conn)
}

/// The reply, or None if none came within `wait` (the connection stays usable).
fn reply_within(conn: &mut Conn, wait: Duration) -> Option<V> {
    let stream = conn.reader.get_mut();
    stream.set_read_timeout(Some(wait)).unwrap();
    let reply = common::raw_client::read_value(&mut conn.reader);
    conn.reader
        .get_mut()
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    reply
}

/// Writes the replica cannot have taken yet: it is stopped, and the writes are more than
/// the sockets' buffers hold.
fn writes_behind_a_stopped_replica(master: &mut redis::Connection) {
    let value = "v".repeat(4096);
    for chunk in 0..40 {
        let mut pipe = redis::pipe();
        for n in 0..100 {
            pipe.cmd("SET")
                .arg(format!("key:{chunk}:{n}"))
                .arg(&value)
                .ignore();
        }
        pipe.cmd("RPUSH").arg("list").arg(chunk).ignore();
        pipe.cmd("INCR").arg("counter").ignore();
        pipe.query::<()>(master).unwrap();
    }
}

/// A replica stopped while the master took writes is resumed after SHUTDOWN: the master
/// waits for it, and the replica has every write (the master's last digest).
#[test]
fn shutdown_waits_until_the_replica_has_every_write() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    for kind in [Kind::Tessera, Kind::Redis] {
        let (mut master, replica) = master_with_replica(kind, &["--shutdown-timeout", "60"]);
        let mut conn = master.connection();
        replica.signal("STOP");
        writes_behind_a_stopped_replica(&mut conn);
        let expected = digest(&mut conn);
        let mut shutdown = Conn::new(master.port);
        shutdown.send(&[b"SHUTDOWN"]);
        std::thread::sleep(Duration::from_millis(500));
        assert!(
            master.exit_status().is_none(),
            "{kind:?}: exited before the replica caught up"
        );
        replica.signal("CONT");
        let status = master.wait_exit(Duration::from_secs(30));
        assert!(
            status.is_some_and(|s| s.success()),
            "{kind:?}: {status:?}\n{}",
            master.log()
        );
        assert_eq!(shutdown.read(), V::Closed, "{kind:?}");
        master.wait_log("1 of 1 replicas are in sync when shutting down.");
        let mut replica_conn = replica.connection();
        assert_eq!(digest(&mut replica_conn), expected, "{kind:?}");
    }
}

/// A replica that stays stopped: SHUTDOWN waits `shutdown-timeout` (2 s), logs the
/// lagging replica and exits; SHUTDOWN NOW exits without waiting.
#[test]
fn shutdown_gives_up_on_a_stopped_replica_after_the_timeout_and_now_does_not_wait() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    for kind in [Kind::Tessera, Kind::Redis] {
        let (mut master, replica, _conn) =
            master_with_a_lagging_replica(kind, &["--shutdown-timeout", "2"], "late");
        let started = Instant::now();
        let mut shutdown = Conn::new(master.port);
        shutdown.send(&[b"SHUTDOWN"]);
        let status = master.wait_exit(Duration::from_secs(30));
        let waited = started.elapsed();
        assert!(status.is_some_and(|s| s.success()), "{kind:?}: {status:?}");
        assert!(waited >= Duration::from_secs(1), "{kind:?}: {waited:?}");
        assert_eq!(shutdown.read(), V::Closed, "{kind:?}");
        master.wait_log("Lagging replica");
        master.wait_log("0 of 1 replicas are in sync");
        replica.signal("CONT");

        let (mut master, replica, _conn) =
            master_with_a_lagging_replica(kind, &["--shutdown-timeout", "300"], "late");
        let mut shutdown = Conn::new(master.port);
        shutdown.send(&[b"SHUTDOWN", b"NOW"]);
        let status = master.wait_exit(Duration::from_secs(30));
        assert!(status.is_some_and(|s| s.success()), "{kind:?}: {status:?}");
        assert_eq!(shutdown.read(), V::Closed, "{kind:?}");
        replica.signal("CONT");
    }
}

/// What the clients see while a SHUTDOWN waits and is aborted, the same from Tessera and
/// Redis: reads answered, writes held (then run), INFO's `shutdown_in_milliseconds`, the
/// ABORT's +OK and the waiting SHUTDOWN's error, a second ABORT refused, and the server
/// serving on (writes too; CLIENT PAUSE's own pause unaffected).
#[test]
fn shutdown_abort_cancels_the_wait_as_redis_does() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let transcripts: Vec<Vec<String>> = [Kind::Tessera, Kind::Redis]
        .into_iter()
        .map(|kind| {
            let (mut master, replica, mut conn) =
                master_with_a_lagging_replica(kind, &["--shutdown-timeout", "300"], "before");
            let mut transcript = Vec::new();
            let mut shutdown = Conn::new(master.port);
            shutdown.send(&[b"SHUTDOWN"]);
            let mut other = Conn::new(master.port);
            wait_until("the shutdown to wait", Duration::from_secs(10), || {
                field(&info(&mut conn, "server"), "shutdown_in_milliseconds").is_some()
            });
            // Reads go on; the write is held.
            transcript.push(format!("{:?}", other.cmd(&["GET", "before"])));
            other.send(&[b"SET", b"during", b"2"]);
            transcript.push(format!(
                "held: {:?}",
                reply_within(&mut other, Duration::from_millis(500))
            ));
            // Another SHUTDOWN joins the wait.
            let mut second = Conn::new(master.port);
            second.send(&[b"SHUTDOWN", b"NOW"]);
            transcript.push(format!(
                "second: {:?}",
                reply_within(&mut second, Duration::from_millis(500))
            ));
            let mut aborter = Conn::new(master.port);
            transcript.push(format!("{:?}", aborter.cmd(&["SHUTDOWN", "ABORT", "NOW"])));
            transcript.push(format!("{:?}", aborter.cmd(&["SHUTDOWN", "ABORT"])));
            transcript.push(format!("first: {:?}", shutdown.read()));
            transcript.push(format!("second: {:?}", second.read()));
            transcript.push(format!("held write: {:?}", other.read()));
            transcript.push(format!("{:?}", aborter.cmd(&["SHUTDOWN", "ABORT"])));
            transcript.push(format!(
                "info: {:?}",
                field(&info(&mut conn, "server"), "shutdown_in_milliseconds")
            ));
            transcript.push(format!("{:?}", other.cmd(&["GET", "during"])));
            transcript.push(format!("{:?}", other.cmd(&["SET", "after", "3"])));
            assert!(master.exit_status().is_none(), "{kind:?}: exited");
            master.wait_log("Shutdown manually aborted.");
            replica.signal("CONT");
            wait_caught_up(&mut conn, &mut replica.connection());
            transcript
        })
        .collect();
    assert_eq!(transcripts[0], transcripts[1]);
    assert!(transcripts[0].contains(&"held: None".to_string()));
}

/// SIGTERM waits for the stopped replica (INFO shows the wait) until
/// `shutdown-timeout`; a second SIGINT during a signal's wait exits at once, with an
/// error status; `shutdown-on-sigterm now` does not wait.
#[test]
fn termination_signals_wait_for_replicas_too() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    for kind in [Kind::Tessera, Kind::Redis] {
        let (mut master, replica, mut conn) =
            master_with_a_lagging_replica(kind, &["--shutdown-timeout", "2"], "late");
        let started = Instant::now();
        master.signal("TERM");
        wait_until("the signal's wait", Duration::from_secs(10), || {
            field(&info(&mut conn, "server"), "shutdown_in_milliseconds").is_some()
        });
        let status = master.wait_exit(Duration::from_secs(30));
        assert!(status.is_some_and(|s| s.success()), "{kind:?}: {status:?}");
        assert!(started.elapsed() >= Duration::from_secs(1), "{kind:?}");
        replica.signal("CONT");

        let (mut master, replica, mut conn) =
            master_with_a_lagging_replica(kind, &["--shutdown-timeout", "300"], "late");
        master.signal("INT");
        wait_until("the signal's wait", Duration::from_secs(10), || {
            field(&info(&mut conn, "server"), "shutdown_in_milliseconds").is_some()
        });
        master.signal("INT");
        let status = master.wait_exit(Duration::from_secs(30));
        assert!(status.is_some_and(|s| !s.success()), "{kind:?}: {status:?}");
        master.wait_log("You insist... exiting now.");
        replica.signal("CONT");

        let (mut master, replica) = master_with_replica(kind, &["--shutdown-timeout", "300"]);
        let mut conn = master.connection();
        common::run(
            &mut conn,
            &["CONFIG", "SET", "shutdown-on-sigterm", "now nosave"],
        );
        replica.signal("STOP");
        common::run(&mut conn, &["SET", "late", "1"]);
        master.signal("TERM");
        let status = master.wait_exit(Duration::from_secs(30));
        assert!(status.is_some_and(|s| s.success()), "{kind:?}: {status:?}");
        replica.signal("CONT");
    }
}

/// A final snapshot that cannot be written (`dbfilename` is a directory): SHUTDOWN SAVE
/// answers Redis's error and the server serves on; with FORCE it exits anyway.
#[test]
fn force_shuts_down_despite_a_failed_final_snapshot() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    let transcripts: Vec<Vec<String>> = [Kind::Tessera, Kind::Redis]
        .into_iter()
        .map(|kind| {
            let mut master = Master::start(kind, &["--dbfilename", "blocked.rdb"]);
            let mut conn = master.connection();
            let dir: String = match common::run(&mut conn, &["CONFIG", "GET", "dir"]) {
                redis::Value::Array(items) => redis::from_redis_value(items[1].clone()).unwrap(),
                other => panic!("{other:?}"),
            };
            std::fs::create_dir(PathBuf::from(dir).join("blocked.rdb")).unwrap();
            common::run(&mut conn, &["SET", "k", "v"]);
            let mut client = Conn::new(master.port);
            let mut transcript = vec![format!("{:?}", client.cmd(&["SHUTDOWN", "SAVE"]))];
            transcript.push(format!("{:?}", client.cmd(&["GET", "k"])));
            assert!(master.exit_status().is_none(), "{kind:?}");
            client.send(&[b"SHUTDOWN", b"SAVE", b"FORCE"]);
            let status = master.wait_exit(Duration::from_secs(30));
            assert!(status.is_some_and(|s| s.success()), "{kind:?}: {status:?}");
            transcript.push(format!("{:?}", client.read()));
            transcript
        })
        .collect();
    assert_eq!(transcripts[0], transcripts[1]);
    assert!(transcripts[0][0].contains("Errors trying to SHUTDOWN"));
}

/// A plain SHUTDOWN and SIGTERM write `dbfilename` when `save` points are configured
/// (the log off), as Redis's do, and nothing when none are: a dataset kept only in
/// snapshots is not lost by a clean stop. Tessera loads either server's file.
#[test]
fn a_plain_shutdown_saves_when_save_points_are_configured() {
    if require_redis_or_skip(WHOLE_TEST).is_none() {
        return;
    }
    for kind in [Kind::Tessera, Kind::Redis] {
        for (how, save, saved) in [
            ("SHUTDOWN", "3600 1", true),
            ("TERM", "3600 1", true),
            ("SHUTDOWN", "", false),
        ] {
            let what = format!("{kind:?}, {how}, save {save:?}");
            let mut master = Master::start(kind, &["--appendonly", "no", "--save", save]);
            let mut conn = master.connection();
            common::run(&mut conn, &["SET", "kept", "by the snapshot"]);
            if how == "SHUTDOWN" {
                let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").query(&mut conn);
            } else {
                master.signal(how);
            }
            let status = master.wait_exit(Duration::from_secs(30));
            assert!(status.is_some_and(|s| s.success()), "{what}: {status:?}");
            let dir = master._dir.path();
            assert_eq!(dir.join("dump.rdb").exists(), saved, "{what}");
            if saved {
                let restarted = common::start_server(dir, &["--appendonly", "no"]);
                let value: String = redis::cmd("GET")
                    .arg("kept")
                    .query(&mut restarted.connection())
                    .unwrap();
                assert_eq!(value, "by the snapshot", "{what}");
            }
        }
    }
}

#[test]
fn a_background_save_slowed_by_rdb_key_save_delay_does_not_hold_up_shutdown() {
    let dir = temp_dir();
    // A minute per key: the writer is in that pause (or about to be) when SHUTDOWN comes.
    let args = ["--save", "", "--rdb-key-save-delay", "60000000"];
    let mut server = start_server(dir.path(), &args);
    let mut conn = server.connection();
    for i in 0..100 {
        run(&mut conn, &["SET", &format!("k{i}"), "v"]);
    }
    run(&mut conn, &["BGSAVE"]);
    // A slot captured is a slot a writer takes (and pauses in) at once.
    common::wait_until("a captured slot", Duration::from_secs(10), || {
        common::info_field(&mut conn, "tessera_capture_held_bytes")
            .is_some_and(|bytes| bytes != "0")
    });
    let asked = std::time::Instant::now();
    let _ = redis::cmd("SHUTDOWN").arg("NOSAVE").query::<()>(&mut conn);
    server.child.as_mut().unwrap().wait().unwrap();
    // Redis kills its child at once; the writer's pause must end with the job.
    assert!(
        asked.elapsed() < std::time::Duration::from_secs(30),
        "the shutdown waited {:?} for the writer's pause",
        asked.elapsed()
    );
    assert!(
        server
            .log()
            .contains("there is a background save in progress: stopping it")
    );
}
