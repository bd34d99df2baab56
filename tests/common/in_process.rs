//! A server running in-process on a simulated disk (`SimulatedStorage`), for tests of power
//! loss and injected I/O faults: start it, talk to it, halt it where it stands, restart it
//! on what a power loss left; log directories to crash in (fresh, or with history), and the
//! steps of a compaction as the code reaches them.

use super::crash_points::{Protocol, points_of};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::config::Config;
use tessera::log::manifest::Manifest;
use tessera::server::Server;
use tessera::storage::{CrashPoint, CrashStep, SimulatedStorage, Storage, TornFile};

/// A server running on a thread of the test process.
pub struct InProcess {
    pub port: u16,
    halt: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), tessera::server::ServerError>>>,
}

impl InProcess {
    pub fn start(storage: &SimulatedStorage, settings: &str) -> InProcess {
        InProcess::try_start(storage, settings)
            .unwrap_or_else(|e| panic!("start-up failed: {e}\n{}", describe(storage)))
    }

    /// Starts a server and waits until it has loaded its data; the reason if start-up
    /// refused or loading failed.
    pub fn try_start(storage: &SimulatedStorage, settings: &str) -> Result<InProcess, String> {
        let mut config = Config::default();
        config
            .apply_text(
                &format!("port 0\nbind 127.0.0.1\nsave \"\"\ndir .\n{settings}"),
                false,
            )
            .unwrap();
        let server = Server::start_with_storage(config, String::new(), Arc::new(storage.clone()))
            .map_err(|e| e.to_string())?;
        let port = server.port();
        let halt = server.halt_handle();
        let thread = std::thread::spawn(move || server.run());
        let mut started = InProcess {
            port,
            halt,
            thread: Some(thread),
        };
        // Ready once loading is over (PING answers -LOADING until then).
        let mut conn = started.connection();
        let deadline = Instant::now() + Duration::from_secs(30);
        while redis::cmd("PING").query::<String>(&mut conn).is_err() {
            if started.thread.as_ref().is_some_and(|t| t.is_finished()) {
                return Err(match started.thread.take().unwrap().join() {
                    Ok(Err(reason)) => reason.to_string(),
                    other => format!("the server stopped while loading: {other:?}"),
                });
            }
            assert!(Instant::now() < deadline, "loading did not finish");
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(started)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connection(&self) -> redis::Connection {
        let conn = redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        conn
    }

    /// Stops the event loop where it is: nothing is saved or synced.
    pub fn halt(mut self) {
        self.halt.store(true, Ordering::Relaxed);
        // The loop checks the flag when it wakes: a connection wakes it now rather than at
        // its next timer (up to 100 ms away), which a crash test would wait for hundreds of
        // times. (Refused if the loop is gone already.)
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        self.halt.store(true, Ordering::Relaxed);
    }
}

/// The log directory of the servers here.
pub const LOG_DIR: &str = "appendonlydir";

/// The log directory as the storage holds it, for failure messages.
pub fn describe(storage: &SimulatedStorage) -> String {
    let dir = Path::new(LOG_DIR);
    let mut text = String::new();
    for name in storage.list_dir(dir).unwrap_or_default() {
        let len = storage.len(&dir.join(&name)).unwrap_or(0);
        text.push_str(&format!("  {name} ({len} bytes)\n"));
    }
    let manifest = storage
        .read(&dir.join("appendonly.aof.manifest"))
        .unwrap_or_default();
    text.push_str(&String::from_utf8_lossy(&manifest));
    text
}

pub mod workload;

// Not every test binary uses every one.
#[allow(unused_imports)]
pub use workload::{Dataset, assert_same, dump};

/// `count` strings `key:<i>` in databases 0 to 2, and values of every type with TTLs, a
/// script's and a function's writes in each (`workload::add_collections`).
pub fn populate(conn: &mut redis::Connection, count: usize) {
    let mut pipe = redis::pipe();
    workload::add_strings(&mut pipe, "key", count);
    workload::add_collections(&mut pipe);
    let () = pipe.query(conn).unwrap();
}

/// `count` strings `<prefix>:<i>` in databases 0 to 2, and a round of changes to the
/// values `populate` made, not idempotent (`workload::add_changes`), named `prefix`.
pub fn populate_named(conn: &mut redis::Connection, prefix: &str, count: usize) {
    let mut pipe = redis::pipe();
    workload::add_strings(&mut pipe, prefix, count);
    workload::add_changes(&mut pipe, prefix);
    let () = pipe.query(conn).unwrap();
}

/// How many times checkpoint `point` was reached since the storage's creation or its last
/// power loss.
pub fn count_reached(storage: &SimulatedStorage, point: CrashPoint) -> u64 {
    storage
        .checkpoints()
        .iter()
        .filter(|p| **p == point)
        .count() as u64
}

/// Waits until `step` (a checkpoint, or its Nth occurrence) is reached.
pub fn wait_for_checkpoint(storage: &SimulatedStorage, step: impl Into<CrashStep>) {
    let step = step.into();
    let deadline = Instant::now() + Duration::from_secs(20);
    while count_reached(storage, step.point) < step.nth {
        assert!(
            Instant::now() < deadline,
            "{step} not reached; reached: {:?}",
            storage.checkpoints()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// What a restart after a power loss needed: the file cut, and where.
pub type Cut = Option<(PathBuf, u64)>;

/// Starts a server on what a power loss left (`torn`: what it did to bytes not durable).
/// Start-up may refuse a log file damaged by the power loss, but only where a hole of lost
/// pages lies in bytes that were not durable (a torn prefix is cut off by start-up
/// itself). Then the file is cut at the offset start-up names, as `tessera-check-aof --fix`
/// would after confirmation, and the server started again. Any other refusal fails.
pub fn restart_after_power_loss(
    storage: &SimulatedStorage,
    torn: &[TornFile],
    settings: &str,
) -> (InProcess, Cut) {
    let error = match InProcess::try_start(storage, settings) {
        Ok(server) => return (server, None),
        Err(error) => error,
    };
    let (path, offset) = damage_named_in(&error).unwrap_or_else(|| {
        panic!(
            "start-up refused after a power loss: {error}\n{}",
            describe(storage)
        )
    });
    let tear = torn.iter().find(|t| t.path == path).unwrap_or_else(|| {
        panic!("start-up found damage in {path:?}, whose bytes were all durable: {error}")
    });
    assert!(
        offset >= tear.synced && tear.has_hole(),
        "start-up found damage at offset {offset} of {path:?}, which is not in a hole of \
         bytes that were not durable ({tear:?}): {error}"
    );
    let mut file = storage.open_append(&path).unwrap();
    file.set_len(offset).unwrap();
    file.sync_data().unwrap();
    let server = InProcess::try_start(storage, settings).unwrap_or_else(|e| {
        panic!(
            "start-up failed after cutting {path:?} at {offset}: {e}\n{}",
            describe(storage)
        )
    });
    (server, Some((path, offset)))
}

/// The file and offset of "Bad file format reading the append only file <path> at offset
/// <n>: ..." (start-up's refusal of a damaged log file).
fn damage_named_in(error: &str) -> Option<(PathBuf, u64)> {
    let rest = error.split("reading the append only file ").nth(1)?;
    let (path, rest) = rest.split_once(" at offset ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    // As the storage names it: `./dir/file` is `dir/file`.
    let path = Path::new(path)
        .components()
        .filter(|c| *c != std::path::Component::CurDir)
        .collect();
    Some((path, digits.parse().ok()?))
}

/// Runs a compaction (BGREWRITEAOF) to its end; returns `aof_last_bgrewrite_status`.
pub fn compact(conn: &mut redis::Connection) -> String {
    let _: String = redis::cmd("BGREWRITEAOF").query(conn).unwrap();
    wait_for_persistence(conn, |info| {
        let busy = ["aof_rewrite_in_progress:1", "aof_rewrite_scheduled:1"];
        !busy
            .iter()
            .any(|field| info.lines().any(|line| line == *field))
    });
    super::info_field(conn, "aof_last_bgrewrite_status").unwrap()
}

/// Waits until INFO persistence satisfies `done`, reading it every 2 ms: a compaction of a
/// few hundred keys in-process takes a few ms, and the crash tests run hundreds
/// (`common::wait_for_background_jobs` reads all of INFO three times every 20 ms).
fn wait_for_persistence(conn: &mut redis::Connection, done: impl Fn(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let info: String = redis::cmd("INFO").arg("persistence").query(conn).unwrap();
        if done(&info) {
            return;
        }
        assert!(Instant::now() < deadline, "still running: {info}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The manifest in force.
pub fn manifest(storage: &SimulatedStorage) -> Manifest {
    let bytes = storage
        .read(&Path::new(LOG_DIR).join("appendonly.aof.manifest"))
        .unwrap();
    Manifest::parse(&bytes).unwrap()
}

/// After a start-up: the log directory holds the manifest and the files it lists, no
/// history among them, and nothing else (the files a crash left behind were all proved
/// garbage by the manifest and removed).
pub fn assert_directory_is_the_manifest(storage: &SimulatedStorage, context: &str) {
    let manifest = manifest(storage);
    assert!(
        manifest.history().next().is_none(),
        "{context}: history files are deleted at start-up\n{}",
        describe(storage)
    );
    let mut expected: Vec<String> = manifest.entries.iter().map(|e| e.name.clone()).collect();
    expected.push("appendonly.aof.manifest".into());
    expected.sort();
    assert_eq!(
        storage.list_dir(Path::new(LOG_DIR)).unwrap(),
        expected,
        "{context}: only the manifest and its files remain\n{}",
        describe(storage)
    );
}

/// The settings of the crash experiments: every write is fsynced before its reply, and a
/// compaction writes two parts.
pub const CRASH_SETTINGS: &str = "appendfsync always\naof-rewrite-threads 2";

/// A log directory to crash a compaction in: the durable image of `storage`, holding
/// `dataset`; and what it holds after the writes a crash test makes before the compaction's
/// switch to a new incremental file, and after those it makes after the switch (read from a
/// server that ran them on a copy, with no compaction and no crash).
pub struct Prepared {
    pub name: &'static str,
    pub storage: SimulatedStorage,
    pub dataset: Dataset,
    /// `dataset` and `start_compaction_after_writes`'s writes.
    pub after_pre: Dataset,
    /// `after_pre` and `write_after_the_switch`'s writes.
    pub after_post: Dataset,
}

impl Prepared {
    /// How many base parts and incremental files its manifest lists.
    pub fn shape(&self) -> (usize, usize) {
        let manifest = manifest(&self.storage);
        (manifest.base().count(), manifest.incremental().count())
    }

    /// Whether an earlier compaction left a base.
    pub fn has_base(&self) -> bool {
        self.shape().0 > 0
    }
}

/// A directory with one incremental file and no base yet (the first compaction).
pub fn fresh_directory() -> Prepared {
    let storage = SimulatedStorage::new();
    let server = InProcess::start(&storage, CRASH_SETTINGS);
    populate(&mut server.connection(), 300);
    server.halt();
    prepared("fresh directory", storage)
}

/// A directory with history: a base of two parts (an earlier compaction), then three
/// incremental files with records, as left by two compactions that crashed after their
/// switch to a new incremental file. A compaction there deletes two parts and three
/// incremental files once it commits.
pub fn directory_with_history() -> Prepared {
    let storage = SimulatedStorage::new();
    let server = InProcess::start(&storage, CRASH_SETTINGS);
    let mut conn = server.connection();
    populate(&mut conn, 300);
    assert_eq!(compact(&mut conn), "ok");
    populate_named(&mut conn, "incr2", 40);
    let mut server = server;
    for file in 3..=4 {
        // Held once its parts are written: the writes after the switch are acknowledged,
        // then the compaction crashes before its commit.
        let point = CrashPoint::SnapshotPartsWritten;
        let step = point.nth(count_reached(&storage, point) + 1);
        storage.pause_at(step);
        storage.crash_at(step);
        let _: String = redis::cmd("BGREWRITEAOF").query(&mut conn).unwrap();
        wait_for_checkpoint(&storage, step);
        populate_named(&mut conn, &format!("incr{file}"), 40);
        storage.resume();
        server.halt();
        let _ = storage.power_loss(tessera::storage::TornWrites::None);
        server = InProcess::start(&storage, CRASH_SETTINGS);
        conn = server.connection();
    }
    server.halt();
    let prepared = prepared("directory with history", storage);
    assert_eq!(prepared.shape(), (2, 3), "{}", describe(&prepared.storage));
    prepared
}

/// Reads the dataset of the durable image of `storage`, then makes the crash tests' writes
/// before and after a compaction's switch and reads it again (on a copy: no checkpoint of
/// the reading server is counted in `storage`).
fn prepared(name: &'static str, storage: SimulatedStorage) -> Prepared {
    let storage = storage.durable_copy();
    let copy = storage.durable_copy();
    let server = InProcess::start(&copy, "");
    let mut conn = server.connection();
    for db in 0..workload::DATABASES {
        workload::assert_encodings(&mut conn, db);
    }
    let dataset = dump(server.port);
    let _: redis::Value = writes_before_the_switch().query(&mut conn).unwrap();
    let after_pre = dump(server.port);
    write_after_the_switch(&mut conn).unwrap();
    let after_post = dump(server.port);
    server.halt();
    assert!(dataset.len() >= 300, "{name}: {} keys", dataset.len());
    Prepared {
        name,
        storage,
        dataset,
        after_pre,
        after_post,
    }
}

/// `SET pre "before the switch"` and a round of changes to every type in every database
/// (`workload::add_changes`), in one MULTI/EXEC block.
fn writes_before_the_switch() -> redis::Pipeline {
    workload::changes_in_a_transaction("pre", "before the switch")
}

/// The same as `writes_before_the_switch`, with `SET post "after the switch"`.
fn writes_after_the_switch() -> redis::Pipeline {
    workload::changes_in_a_transaction("post", "after the switch")
}

/// Starts a compaction: writes and BGREWRITEAOF sent together, so that the writes are the
/// last records of the old incremental file, which the switch to the new one fsyncs before
/// any step of the compaction: they are acknowledged whatever step the compaction crashes
/// at. Changes that are not idempotent there show a base that holds them (a capture taken
/// after the split) or misses them.
pub fn start_compaction_after_writes(conn: &mut redis::Connection) -> redis::RedisResult<()> {
    let mut pipe = writes_before_the_switch();
    pipe.cmd("BGREWRITEAOF");
    let (_, reply): (redis::Value, String) = pipe.query(conn)?;
    assert_eq!(reply, "Background append only file rewriting started");
    Ok(())
}

/// The writes after a compaction's switch (changes to values the compaction is capturing,
/// not idempotent), answered: acknowledged.
pub fn write_after_the_switch(conn: &mut redis::Connection) -> redis::RedisResult<()> {
    writes_after_the_switch()
        .query::<redis::Value>(conn)
        .map(drop)
}

/// Sends `write_after_the_switch`'s writes without waiting for their reply.
pub fn send_write_after_the_switch(conn: &mut redis::Connection) {
    let pipe = writes_after_the_switch();
    conn.send_packed_command(&pipe.get_packed_pipeline())
        .unwrap();
}

/// A step of a compaction at which a crash test stops the world: a checkpoint and which of
/// its occurrences, counted from the server's start, as `TESSERA_CRASH_AT` counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub point: CrashPoint,
    pub nth: u64,
    /// Reached by the log writer while it switches to the new incremental file: a write
    /// after the start of the compaction can't be acknowledged before it.
    pub in_rotation: bool,
}

impl Step {
    /// The occurrence of the checkpoint, as `crash_at` and `TESSERA_CRASH_AT` take it.
    pub fn at(&self) -> CrashStep {
        self.point.nth(self.nth)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.at())
    }
}

/// Every checkpoint that a compaction reaches in `prepared`, in the order of one run:
/// `start_compaction_after_writes`, then `write_after_the_switch`, on a server started on
/// a copy of it.
pub fn compaction_steps(prepared: &Prepared) -> Vec<Step> {
    let storage = prepared.storage.durable_copy();
    let server = InProcess::start(&storage, CRASH_SETTINGS);
    let mut conn = server.connection();
    let before = storage.checkpoints().len();
    start_compaction_after_writes(&mut conn).expect("the writes before the switch");
    write_after_the_switch(&mut conn).expect("the writes after the switch are acknowledged");
    super::wait_for_background_jobs(&mut conn);
    let status = super::info_field(&mut conn, "aof_last_bgrewrite_status");
    assert_eq!(status.as_deref(), Some("ok"));
    server.halt();
    steps_after(&storage.checkpoints(), before)
}

/// The checkpoints `reached` from index `before` on, each numbered by its occurrence in
/// all of `reached`.
pub fn steps_after(reached: &[CrashPoint], before: usize) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut in_rotation = false;
    for (index, &point) in reached.iter().enumerate() {
        let nth = reached[..=index].iter().filter(|p| **p == point).count() as u64;
        in_rotation |= point == CrashPoint::RewriteIncrCreated;
        if index >= before {
            steps.push(Step {
                point,
                nth,
                in_rotation: in_rotation && ROTATION.contains(&point),
            });
        }
        in_rotation &= point != CrashPoint::RewriteIncrCommitted;
    }
    steps
}

/// How many files a compaction in `prepared` deletes once it commits: the base parts and
/// the incremental files it makes history.
pub fn history_files(prepared: &Prepared) -> usize {
    let (parts, incremental) = prepared.shape();
    parts + incremental
}

/// The checkpoints of the log writer's switch to the new incremental file, in order: the
/// file, the manifest that lists it (its second commit since the server started; the first
/// is at start-up), the switch.
const ROTATION: [CrashPoint; 4] = [
    CrashPoint::RewriteIncrCreated,
    CrashPoint::ManifestTempWritten,
    CrashPoint::ManifestRenamed,
    CrashPoint::RewriteIncrCommitted,
];

/// Checks that `steps` hold every checkpoint of the compaction protocol and each repeated
/// one as often as `prepared` makes it happen: a step per part written, a deletion per
/// history file, three manifest commits (at the switch, at the installation, and without
/// the history files once they are deleted).
pub fn assert_steps_cover_the_protocol(steps: &[Step], prepared: &Prepared) {
    let count = |point: CrashPoint| steps.iter().filter(|s| s.point == point).count();
    for point in points_of(Protocol::Compaction) {
        assert!(
            count(point) > 0,
            "{}: {point} not reached: {steps:?}",
            prepared.name
        );
    }
    let expected = [
        (CrashPoint::SnapshotFirstCaptureTaken, 2),
        (CrashPoint::SnapshotPartSynced, 2),
        (CrashPoint::RewriteDeletedOne, history_files(prepared)),
        (CrashPoint::ManifestTempWritten, 3),
        (CrashPoint::ManifestRenamed, 3),
    ];
    for (point, times) in expected {
        assert_eq!(
            count(point),
            times,
            "{}: {point} in {steps:?}",
            prepared.name
        );
    }
    let rotation: Vec<CrashPoint> = steps
        .iter()
        .filter(|s| s.in_rotation)
        .map(|s| s.point)
        .collect();
    assert_eq!(rotation, ROTATION, "{}", prepared.name);
}
