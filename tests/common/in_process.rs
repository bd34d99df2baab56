//! A server running in-process on a simulated disk (`SimulatedStorage`), for tests of power
//! loss and injected I/O faults: start it, talk to it, halt it where it stands.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera::config::Config;
use tessera::server::Server;
use tessera::storage::SimulatedStorage;

/// A server running on a thread of the test process.
pub struct InProcess {
    pub port: u16,
    halt: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl InProcess {
    pub fn start(storage: &SimulatedStorage, settings: &str) -> InProcess {
        let mut config = Config::default();
        config
            .apply_text(
                &format!("port 0\nbind 127.0.0.1\nsave \"\"\ndir .\n{settings}"),
                false,
            )
            .unwrap();
        let server = Server::start_with_storage(config, String::new(), Arc::new(storage.clone()))
            .unwrap_or_else(|e| panic!("start-up failed: {e}"));
        let port = server.port();
        let halt = server.halt_handle();
        let thread = std::thread::spawn(move || server.run());
        let started = InProcess {
            port,
            halt,
            thread: Some(thread),
        };
        // Ready once loading is over (PING answers -LOADING until then).
        let mut conn = started.connection();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut started = started;
        while redis::cmd("PING").query::<String>(&mut conn).is_err() {
            if started.thread.as_ref().is_some_and(|t| t.is_finished()) {
                let result = started.thread.take().unwrap().join();
                panic!(
                    "the server stopped while loading: {result:?}\n{}",
                    describe(storage)
                );
            }
            assert!(Instant::now() < deadline, "loading did not finish");
            std::thread::sleep(Duration::from_millis(5));
        }
        started
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

/// The log directory as the storage holds it, for failure messages.
pub fn describe(storage: &SimulatedStorage) -> String {
    use tessera::storage::Storage;
    let dir = std::path::Path::new("appendonlydir");
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

/// Every key of the first databases with its value.
pub fn dump(conn: &mut redis::Connection) -> Vec<(i64, String, Vec<u8>)> {
    let mut all = Vec::new();
    for db in 0..4 {
        let _: () = redis::cmd("SELECT").arg(db).query(conn).unwrap();
        let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(conn).unwrap();
        keys.sort();
        for key in keys {
            let value: Vec<u8> = redis::cmd("GET").arg(&key).query(conn).unwrap();
            all.push((db, key, value));
        }
    }
    let _: () = redis::cmd("SELECT").arg(0).query(conn).unwrap();
    all
}

pub fn populate(conn: &mut redis::Connection, count: usize) {
    let mut pipe = redis::pipe();
    for i in 0..count {
        pipe.cmd("SELECT").arg(i % 3).ignore();
        let value = match i % 3 {
            0 => format!("{i}"),
            1 => format!("value {i} {}", "q".repeat(i % 300)),
            _ => format!("{i}").repeat(40),
        };
        pipe.cmd("SET").arg(format!("key:{i}")).arg(value).ignore();
    }
    pipe.cmd("SELECT").arg(0).ignore();
    let _: () = pipe.query(conn).unwrap();
}

pub fn wait_for_checkpoint(storage: &SimulatedStorage, step: &str) {
    let (name, nth) = match step.split_once(':') {
        Some((name, nth)) => (name, nth.parse::<usize>().unwrap()),
        None => (step, 1),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while storage.checkpoints().iter().filter(|s| *s == name).count() < nth {
        assert!(
            Instant::now() < deadline,
            "{step} not reached; reached: {:?}",
            storage.checkpoints()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
