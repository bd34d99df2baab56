//! The event loop: sockets, sessions, and when replies may go out.
//!
//! One thread owns the engine (the dataset) and runs every command, as in Redis. Each
//! loop turn: read what sockets have, and hand every complete command to the engine
//! (`session`); serve blocked clients whose keys became ready (`blocked`); do a share of
//! the background jobs' capture (`jobs`); then, once per turn, hand the turn's effects
//! to the log writer as one batch and send the replies that may go out. Under
//! `appendfsync always` a reply produced while any batch is not yet durable is held until
//! the writer reports that batch fsynced (group commit); the loop keeps serving meanwhile.
//! Under `everysec` and `no` a reply waits only until its batch is written to the file.
//! `hz` times a second the cron runs (`cron`).
//!
//! This module holds the loop itself, accepting connections, sending replies and
//! shutting down; nothing here knows a command.

mod blocked;
mod busy;
mod cron;
mod error;
mod failover;
mod jobs;
mod log_switch;
mod master_link;
mod pace;
mod postponed;
mod reload;
mod replica_output;
mod replicas;
mod session;
mod shutdown;

use crate::commands::{LoadingStatus, SessionState};
use crate::config::{Config, FsyncPolicy};
use crate::engine::Engine;
use crate::log::manifest::Manifest;
use crate::log::{self, LogPaths, LogWriter};
use crate::storage::{RealStorage, Storage};
pub use error::ServerError;
use mio::{Events, Interest, Poll, Token, Waker};
use session::{Client, Sessions};
use std::io::{ErrorKind, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX - 1);
const FIRST_LISTENER: usize = usize::MAX - 64;
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Buffers larger than these are shrunk once drained, rather than at the cron's next visit
/// (`reply_buffer`) or never (the input).
const OUTPUT_KEEP_BYTES: usize = 64 * 1024;
const INPUT_KEEP_BYTES: usize = 64 * 1024;
const ARGUMENTS_KEEP: usize = 1024;
/// Bytes read from one client in one turn, at most (then others get their turn).
const READ_PER_TURN_BYTES: usize = 4 * 1024 * 1024;

pub struct Server {
    poll: Poll,
    listeners: crate::net::Listeners,
    clients: Sessions,
    /// Reused for every socket read, so each read does not zero a fresh buffer.
    read_buffer: Box<[u8]>,
    next_client_id: u64,
    engine: Engine,
    log_writer: Option<LogWriter>,
    log_paths: Option<LogPaths>,
    /// The manifest in force (the log writer and compactions change it; this is the
    /// event loop's record of their outcomes).
    manifest: Option<Manifest>,
    /// The start-up load, until it is over (clients get -LOADING meanwhile).
    loading: Option<
        std::thread::JoinHandle<Result<crate::recovery::Loaded, crate::recovery::LoadError>>,
    >,
    jobs: jobs::Jobs,
    /// The background jobs' writers' rate, from how busy the loop is (`pace`).
    pacer: pace::Pacer,
    /// Time the loop spent waiting for events, in all (the pacer's measure of room).
    loop_idle: Duration,
    /// `aof-disable-auto-gc` as the loop last saw it (`log_switch::apply_auto_gc`).
    auto_gc_disabled: bool,
    /// The fsync policy the log writer was last given (CONFIG SET changes the config).
    writer_policy: FsyncPolicy,
    /// The `maxmemory` the log writer was last told (it bounds what `everysec` keeps).
    writer_memory_limit: u64,
    storage: Arc<dyn Storage>,
    waker: Arc<Waker>,
    /// Set by `halt`: leave the loop at once, saving nothing (crash tests in-process).
    halt_flag: Arc<AtomicBool>,
    /// Bytes of the listed log files other than the one being appended to.
    closed_log_bytes: u64,
    /// Readable clients not read yet because the log writer is behind (events are
    /// edge-triggered: they must be remembered). The flag: the peer has closed its side.
    deferred_reads: Vec<(usize, bool)>,
    /// Clients whose output is waiting for a log batch to become durable.
    held: Vec<usize>,
    /// Clients that produced output this turn.
    touched: Vec<usize>,
    /// Set by the SIGTERM and SIGINT handlers; the loop acts on them (`shutdown`).
    sigterm_flag: Arc<AtomicBool>,
    sigint_flag: Arc<AtomicBool>,
    expire_cursor: Vec<usize>,
    block_deadlines: blocked::Deadlines,
    /// Clients unblocked this turn whose buffered input still waits to be run.
    resumed: Vec<usize>,
    /// Clients whose request CLIENT PAUSE holds (`postponed`).
    postponed: Vec<usize>,
    /// When the once-a-second replication cron runs next (`replicas`).
    replication_cron_due: Instant,
    /// A replica's sync with its master in progress (`master_link`), those REPLICAOF
    /// abandoned (their threads end on their own), and where the log is in persisting
    /// the master's snapshot last adopted.
    master_sync: Option<master_link::MasterSync>,
    abandoned_syncs: Vec<master_link::MasterSync>,
    master_base: master_link::MasterBase,
}

/// The highest log batch whose replies may go out. Under `always`, fsynced. Otherwise,
/// written to the file: then an acknowledged write survives the death of the process (the
/// page cache keeps it), as in Redis, which writes its log before sending replies.
fn release_watermark(writer: &LogWriter, policy: FsyncPolicy) -> u64 {
    match policy {
        FsyncPolicy::Always => writer.durable_seq(),
        FsyncPolicy::EverySec | FsyncPolicy::No => writer.written_seq(),
    }
}

impl Server {
    /// Binds the listeners and starts loading the data on a thread of its own; `run`
    /// answers -LOADING until the data is in, then opens the log for appending.
    pub fn start(config: Config, config_file: String) -> Result<Server, ServerError> {
        Server::start_with_storage(config, config_file, Arc::new(RealStorage::new("")))
    }

    /// As `start`, with the files in `storage` (a simulated disk in crash tests).
    pub fn start_with_storage(
        config: Config,
        config_file: String,
        storage: Arc<dyn Storage>,
    ) -> Result<Server, ServerError> {
        let poll = Poll::new().map_err(|e| ServerError::Setup("create the event loop", e))?;
        let waker = Arc::new(
            Waker::new(poll.registry(), WAKER)
                .map_err(|e| ServerError::Setup("create waker", e))?,
        );
        config.encoding_limits.apply();
        crate::engine::evict::apply_config(&config);
        crate::access::set_now(crate::clock::unix_ms());
        let writer_policy = config.appendfsync;
        let mut engine = Engine::new(config, config_file, storage.clone());
        let state = &mut engine.state;
        state.acl = crate::acl::Acl::at_startup(&state.config, || {
            let config = &state.config;
            storage
                .read(&config.dir.join(&config.aclfile))
                .map_err(|error| {
                    format!(
                        "Aborting Redis startup because of ACL errors: Error loading ACLs, opening file '{}': {}",
                        config.aclfile,
                        crate::process::os_error_text(&error)
                    )
                })
        })
        .map_err(ServerError::Acl)?;
        let bound = crate::net::listen(&state.config).map_err(ServerError::Listen)?;
        state.tcp_port = bound.port;
        // Listening from here: " PID: <pid>" (Redis prints it then too) and, once the
        // dataset is loaded, "Ready to accept connections" are what Redis's own test
        // harness and operators' scripts wait for.
        tracing::info!("Server initialized, PID: {}", std::process::id());
        let mut listeners = crate::net::Listeners::new(bound.sockets);
        for (index, listener) in listeners.sockets_mut().enumerate() {
            poll.registry()
                .register(listener, Token(FIRST_LISTENER + index), Interest::READABLE)
                .map_err(|e| ServerError::Setup("register listener", e))?;
        }
        let sigterm_flag = Arc::new(AtomicBool::new(false));
        let sigint_flag = Arc::new(AtomicBool::new(false));
        for (signal, flag) in [
            (signal_hook::consts::SIGTERM, &sigterm_flag),
            (signal_hook::consts::SIGINT, &sigint_flag),
        ] {
            signal_hook::flag::register(signal, flag.clone())
                .map_err(|e| ServerError::Setup("install signal handler", e))?;
        }
        // The dataset loads on its own thread; meanwhile clients get -LOADING.
        let progress = Arc::new(crate::commands::LoadProgress::default());
        state.persistence.loading = Some(LoadingStatus {
            start_unix_seconds: crate::clock::unix_seconds(),
            started: Instant::now(),
            progress: progress.clone(),
        });
        let loading = {
            let config = state.config.clone();
            let storage = storage.clone();
            let waker = waker.clone();
            std::thread::Builder::new()
                .name("loading".into())
                .spawn(move || {
                    let loaded = crate::recovery::load_dataset(&config, storage, &progress);
                    let _ = waker.wake();
                    loaded
                })
                .map_err(|e| ServerError::Setup("start loading", e))?
        };
        let databases = state.config.databases;
        let server = Server {
            poll,
            listeners,
            clients: Sessions::default(),
            read_buffer: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            next_client_id: 1,
            engine,
            log_writer: None,
            log_paths: None,
            manifest: None,
            loading: Some(loading),
            jobs: jobs::Jobs::default(),
            pacer: pace::Pacer::default(),
            loop_idle: Duration::ZERO,
            auto_gc_disabled: false,
            writer_policy,
            writer_memory_limit: 0,
            storage,
            waker,
            halt_flag: Arc::new(AtomicBool::new(false)),
            closed_log_bytes: 0,
            deferred_reads: Vec::new(),
            held: Vec::new(),
            touched: Vec::new(),
            sigterm_flag,
            sigint_flag,
            expire_cursor: vec![0; databases],
            block_deadlines: Default::default(),
            resumed: Vec::new(),
            postponed: Vec::new(),
            replication_cron_due: Instant::now(),
            master_sync: None,
            abandoned_syncs: Vec::new(),
            master_base: master_link::MasterBase::Persisted,
        };
        Ok(server)
    }

    /// Adopts the dataset the loading thread built and opens the log for appending.
    fn finish_loading(&mut self) -> Result<(), ServerError> {
        let thread = self.loading.take().expect("loading in progress");
        let loaded = thread
            .join()
            .map_err(|_| ServerError::LoadPanicked)?
            .map_err(ServerError::Load)?;
        self.engine.keyspace = loaded.keyspace;
        // The libraries the loading engine built: loaded again into this engine's
        // interpreter (they loaded once already, so this does not fail but for memory).
        for code in &loaded.functions {
            if let Err(error) = self.engine.state.scripting.load_library(code, true, false) {
                tracing::warn!("a function library could not be loaded again: {error}");
            }
        }
        if let Some(manifest) = loaded.manifest {
            let paths = LogPaths::from_config(&self.engine.state.config);
            let writer = log::open_writer(
                &self.storage,
                &paths,
                &manifest,
                &self.engine.state.config,
                {
                    let waker = self.waker.clone();
                    Arc::new(move || {
                        let _ = waker.wake();
                    })
                },
            )
            .map_err(ServerError::OpenLog)?;
            self.adopt_log_writer(writer, paths, manifest);
        }
        self.refresh_log_sizes();
        let state = &mut self.engine.state;
        let p = &mut state.persistence;
        p.aof_rewrite_base_size = p.aof_current_size;
        p.loading = None;
        p.loading_seconds = loaded.seconds;
        p.loaded_keys = loaded.keys;
        if !state.config.appendonly {
            p.rdb_last_load_keys_loaded = loaded.keys;
            p.rdb_last_load_keys_expired = loaded.expired.len() as u64;
        }
        state.dirty = 0;
        if !state.config.bind.is_empty() {
            tracing::info!("Ready to accept connections on port {}", state.tcp_port);
        }
        if let Some(path) = &state.config.unixsocket {
            tracing::info!("The server is now ready to accept connections at {path}");
        }
        if let Some((host, port)) = state.config.replicaof() {
            // `replicaof` in the configuration: a replica from the start, its link never
            // up (INFO's `master_link_down_since_seconds` -1, as Redis).
            // With the log off, `dbfilename` may say where in its master's history this
            // replica was saved: it continues from there (PSYNC), as Redis's does.
            let history = loaded
                .history
                .as_ref()
                .filter(|h| h.stream_db < state.config.databases);
            let mut link = crate::replication::replica::MasterLink::new(
                host,
                port,
                history.map(|h| (h.replid.clone(), h.offset)),
            );
            if let Some(history) = history {
                tracing::info!(
                    "continuing the replication history {} from offset {} (saved in the snapshot)",
                    history.replid,
                    history.offset
                );
                link.stream_db = history.stream_db;
            }
            link.down_since = None;
            state.replication.master = Some(link);
            self.master_changed();
        } else if let Some(history) = loaded
            .history
            .as_ref()
            .filter(|h| h.stream_db < state.config.databases)
        {
            // A master saved with its history: its replicas may continue it. The keys
            // dropped as expired are DELs in the stream after the saved offset, as
            // Redis's loading propagates them.
            let backlog_bytes = state.config.replication.backlog_bytes;
            state.replication.resume_own_history(history, backlog_bytes);
            let effects = &mut self.engine.effects;
            effects.enabled = true;
            for (db, key) in &loaded.expired {
                effects.record(*db, &[b"DEL" as &[u8], key]);
            }
        }
        Ok(())
    }

    /// The port the server listens on (the bound one when configured with port 0).
    pub fn port(&self) -> u16 {
        self.engine.state.tcp_port
    }

    /// A flag that makes `run` return at once, saving and syncing nothing: for crash tests
    /// that run the server in-process on a simulated disk.
    pub fn halt_handle(&self) -> Arc<AtomicBool> {
        self.halt_flag.clone()
    }

    /// Runs until SHUTDOWN or a termination signal.
    pub fn run(mut self) -> Result<(), ServerError> {
        let mut events = Events::with_capacity(1024);
        let mut next_cron = Instant::now();
        loop {
            if self.loading.as_ref().is_some_and(|t| t.is_finished()) {
                self.finish_loading()?;
            }
            self.master_sync_work();
            if self.halt_flag.load(Ordering::Relaxed) {
                // As a process that dies: no file is touched from now on, so background
                // threads must be gone before `run` returns (a test then cuts the power).
                tracing::warn!("halted");
                self.jobs.cancel_all(&mut self.engine.keyspace);
                if let Some(thread) = self.loading.take() {
                    let _ = thread.join();
                }
                return Ok(());
            }
            let mut timeout = next_cron.saturating_duration_since(Instant::now());
            if !self.deferred_reads.is_empty() && !self.log_backlogged() {
                timeout = Duration::ZERO; // clients put aside can be read now
            }
            if let Some(wait) = self.pause_wait_ms() {
                timeout = timeout.min(Duration::from_millis(wait));
            }
            if let Some(&(deadline, _, _)) = self.block_deadlines.first() {
                let wait = (deadline - crate::clock::unix_ms()).max(0) as u64;
                timeout = timeout.min(Duration::from_millis(wait));
            }
            if let Some(throttled) = self.jobs.capture_pending() {
                // Keep capturing between events; poll briefly while the writers catch up.
                timeout = timeout.min(if throttled {
                    Duration::from_millis(1)
                } else {
                    Duration::ZERO
                });
            }
            let waiting = Instant::now();
            let polled = self.poll.poll(&mut events, Some(timeout));
            self.loop_idle += waiting.elapsed();
            if let Err(e) = polled
                && e.kind() != ErrorKind::Interrupted
            {
                return Err(ServerError::EventLoop(e));
            }
            // The log's fsyncs may release clients parked by WAITAOF; taken before the
            // turn's commands (and again at its end), so that a WAITAOF sent after a
            // reply held for its fsync (`always`) finds that fsync counted.
            self.note_fsynced();
            // Commands read their time from their timer's instant and this anchor.
            crate::clock::refresh_anchor();
            if !self.deferred_reads.is_empty() && !self.log_backlogged() {
                self.read_deferred();
            }
            for event in events.iter() {
                let token = event.token().0;
                if token == WAKER.0 {
                    continue; // durable progress is checked below
                } else if token >= FIRST_LISTENER {
                    self.accept(token - FIRST_LISTENER);
                } else if event.is_error() || (event.is_read_closed() && event.is_write_closed()) {
                    // The peer is gone both ways (reset or hang-up): nothing can be delivered.
                    // But what a master sent before it died is still in the socket (a reset
                    // keeps the bytes received) and is its stream: applied first, as Redis
                    // reads them before it sees the error, or the writes its replicas
                    // acknowledged would be missing here if this replica is promoted next.
                    if self
                        .clients
                        .get(&token)
                        .is_some_and(|c| c.state.master_link)
                    {
                        self.read_and_execute(token, true);
                    }
                    self.close_client(token);
                } else {
                    if event.is_readable() || event.is_read_closed() {
                        let until_eof = event.is_read_closed();
                        if self.log_backlogged() {
                            self.deferred_reads.push((token, until_eof));
                        } else {
                            self.read_and_execute(token, until_eof);
                        }
                    }
                    if event.is_writable() {
                        self.touched.push(token);
                    }
                }
            }
            // Acknowledgements read this turn may release clients parked by WAIT.
            self.release_waiting_clients();
            if !self.block_deadlines.is_empty() {
                self.expire_blocked();
            }
            self.resume_postponed();
            self.run_resumed();
            self.background_snapshot_work();
            self.end_of_turn();
            if Instant::now() >= next_cron {
                self.cron();
                let hz = self.engine.state.config.hz as u64;
                next_cron = Instant::now() + Duration::from_millis(1000 / hz);
            }
            self.take_signals()?;
            if self.shutdown_if_ready() {
                return Ok(());
            }
        }
    }

    fn accept(&mut self, index: usize) {
        let config = &self.engine.state.config;
        let acl = &self.engine.state.acl;
        let rules = AdmissionRules {
            clients_max: config.clients_max,
            protected_mode: config.protected_mode,
            password_set: !acl.default_user().nopass,
            authenticated: acl.new_sessions_authenticated(),
        };
        let mut admission = Admission {
            listeners: &mut self.listeners,
            registry: self.poll.registry(),
            next_client_id: &mut self.next_client_id,
        };
        let counts = admission.admit(&mut self.clients, &rules, Some(index));
        counts.add_to(&mut self.engine.state);
        self.engine.state.connected_clients = self.clients.len();
    }

    /// Closes the clients of this turn whose unsent replies went over their limits,
    /// before anything is sent (Redis closes them "ASAP", without flushing).
    fn enforce_output_limits(&mut self) {
        let now = Instant::now();
        let limits = self.engine.state.config.output_buffer_limits;
        let backlog_bytes = self.engine.state.config.replication.backlog_bytes;
        let auth_required = self.engine.state.acl.auth_required();
        let mut over = Vec::new();
        for &token in &self.touched {
            let Some(client) = self.clients.get_mut(&token) else {
                continue;
            };
            client.conn.listed_for_delivery = false;
            if over.contains(&token) {
                continue; // listed twice this turn
            }
            let kind = crate::commands::ClientKind::of(&client.state);
            let mut unsent = client.output.len() - client.conn.output_sent;
            if kind == crate::commands::ClientKind::Replica
                && let Some(backlog) = &self.engine.state.replication.backlog
            {
                // A replica's share of the shared buffer: the stream it has not been sent.
                unsent += backlog.pending_bytes(client.state.id) as usize;
            }
            let authenticated = !auth_required || client.state.authenticated;
            let mut limit = kind.output_limit(&limits);
            if kind == crate::commands::ClientKind::Replica && limit.hard_bytes != 0 {
                // As Redis: a replica's hard limit is never below the backlog, or a
                // partial resync would be dropped at once.
                limit.hard_bytes = limit.hard_bytes.max(backlog_bytes);
            }
            // A breach a pub/sub message found stands (nothing was appended since).
            let breach = client.conn.output_breach.or_else(|| {
                crate::client_buffers::check_output(
                    unsent,
                    authenticated,
                    &limit,
                    &mut client.conn.output_soft_since,
                    now,
                )
            });
            if let Some(breach) = breach {
                tracing::warn!(
                    "Client id={} addr={} omem={unsent} scheduled to be closed ASAP for overcoming of output buffer limits ({breach:?})",
                    client.state.id,
                    client.conn.peer,
                );
                over.push(token);
            }
        }
        for token in over {
            self.close_client(token);
        }
    }

    /// Hands this turn's effects to the replication stream and the log writer and sends
    /// the replies that may go, with the turn's BCAST invalidations (Redis sends them
    /// before it sleeps).
    fn end_of_turn(&mut self) {
        let limits = self.engine.state.config.output_buffer_limits;
        let mut host =
            session::SessionsView::new(&mut self.clients, None, &mut self.touched, limits);
        self.engine.broadcast_invalidations(&mut host);
        self.apply_appendonly(); // CONFIG SET appendonly
        self.apply_auto_gc(); // CONFIG SET aof-disable-auto-gc no
        self.failover_work();
        if std::mem::take(&mut self.engine.state.replication.link_changed) {
            self.master_changed(); // REPLICAOF, FAILOVER
        }
        if let Some(writer) = &mut self.log_writer {
            let policy = self.engine.state.config.appendfsync;
            if policy != self.writer_policy {
                writer.set_policy(policy); // CONFIG SET appendfsync
                self.writer_policy = policy;
            }
            writer.set_flush_sleep(self.engine.state.aof_flush_sleep_us); // DEBUG AOF-FLUSH-SLEEP
            let maxmemory = self.engine.state.config.memory_bytes_max;
            if maxmemory != self.writer_memory_limit {
                writer.set_memory_limit(maxmemory); // CONFIG SET maxmemory
                self.writer_memory_limit = maxmemory;
            }
        }
        // The replicas' copy of the turn's effects, then the log's.
        self.take_effects();
        self.note_fsynced();
        self.replication_end_of_turn();
        self.enforce_output_limits();
        if let Some(writer) = &self.log_writer {
            let p = &mut self.engine.state.persistence;
            p.aof_pending_peak_bytes = p.aof_pending_peak_bytes.max(writer.pending_bytes());
            let durable = release_watermark(writer, self.engine.state.config.appendfsync);
            let failing = writer.is_failing();
            let last = writer.last_submitted();
            for token in std::mem::take(&mut self.touched) {
                let Some(client) = self.clients.get_mut(&token) else {
                    continue;
                };
                client.hold_for(last);
                if client.required_seq(failing) > durable {
                    if !client.conn.in_held {
                        client.conn.in_held = true;
                        self.held.push(token);
                    }
                } else if !client.conn.in_held {
                    self.flush_client(token);
                }
            }
            if !self.held.is_empty() {
                self.release_held(durable, failing);
            }
        } else {
            for token in std::mem::take(&mut self.touched) {
                // Nothing waits for a log: what the replies showed is forgotten, so that
                // a busy script's -BUSY replies later go out at once (`busy`).
                if let Some(client) = self.clients.get_mut(&token) {
                    client.hold_for(0);
                }
                self.flush_client(token);
            }
        }
    }

    /// Sends the output of held clients whose batch is now durable. A client is listed in
    /// `held` at most once (its `in_held` flag), so one pass releases it.
    fn release_held(&mut self, durable: u64, log_failing: bool) {
        let mut still_held = Vec::new();
        for token in std::mem::take(&mut self.held) {
            let Some(client) = self.clients.get_mut(&token) else {
                continue; // closed meanwhile
            };
            if !client.conn.in_held {
                continue; // the token was reused by a client that is not waiting
            }
            if client.required_seq(log_failing) > durable {
                still_held.push(token);
            } else {
                client.conn.in_held = false;
                self.flush_client(token);
            }
        }
        self.held = still_held;
    }

    fn flush_client(&mut self, token: usize) {
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        if client.conn.replica.is_some() {
            self.flush_replica(token);
            return;
        }
        let mut failed = false;
        let conn = &mut client.conn;
        conn.reply_sizing.observe(client.output.len());
        while conn.output_sent < client.output.len() {
            match conn.stream.write(&client.output[conn.output_sent..]) {
                Ok(0) => {
                    failed = true;
                    break;
                }
                Ok(n) => {
                    conn.output_sent += n;
                    self.engine.state.stats.total_net_output_bytes += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if conn.output_sent == client.output.len() {
            client.output.clear();
            conn.output_sent = 0;
            // Nothing is left that waits for the log.
            conn.hold_seq = 0;
            conn.read_hold_seq = 0;
            if client.output.capacity() > OUTPUT_KEEP_BYTES {
                conn.reply_sizing.fit(&mut client.output);
            }
            if conn.close_after_reply {
                failed = true;
            }
        }
        if failed {
            self.close_client(token);
        }
    }

    fn close_client(&mut self, token: usize) {
        if let Some(mut client) = self.clients.remove(&token) {
            let _ = self.poll.registry().deregister(&mut client.conn.stream);
            self.engine.state.watches.unwatch_all(&mut client.state);
            let id = client.state.id;
            self.engine
                .state
                .pubsub
                .forget(&mut client.state.subscriptions, id);
            self.engine.state.tracking.disable(id);
            if let Some(blocked) = client.conn.blocked.take() {
                self.forget_blocked(token, client.state.id, &blocked);
            }
            if client.conn.postponed.is_some() {
                self.forget_postponed(token);
            }
            if client.state.modes.monitor {
                self.engine.state.monitors.remove(id);
            }
            if client.state.replica {
                self.replica_gone(id);
            }
            if client.state.master_link {
                self.master_link_lost(client.state.db);
            }
        }
        self.engine.state.connected_clients = self.clients.len();
    }

    /// The log writer is behind: stop taking new requests (`LogWriter::is_backlogged`).
    fn log_backlogged(&self) -> bool {
        self.log_writer
            .as_ref()
            .is_some_and(|writer| writer.is_backlogged(self.engine.effects.buffer.len() as u64))
    }

    /// Reads the clients put aside while the log writer was behind, until it is behind
    /// again.
    fn read_deferred(&mut self) {
        let mut deferred = std::mem::take(&mut self.deferred_reads);
        deferred.sort_unstable();
        deferred.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 |= later.1;
            }
            same
        });
        let mut pending = deferred.into_iter();
        while let Some((token, until_eof)) = pending.next() {
            self.read_and_execute(token, until_eof);
            if self.log_backlogged() {
                self.deferred_reads.extend(pending);
                break;
            }
        }
    }
}

/// What admitting a connection checks, copied out of the configuration (a busy script
/// holds the engine while connections are admitted: `server::busy`).
pub(super) struct AdmissionRules {
    pub clients_max: usize,
    pub protected_mode: bool,
    /// The default user has a password (protected mode admits anyone then).
    pub password_set: bool,
    /// New sessions start authenticated (the default user is on and needs no password).
    pub authenticated: bool,
}

/// The parts of the server that admitting a connection needs.
pub(super) struct Admission<'a> {
    pub listeners: &'a mut crate::net::Listeners,
    pub registry: &'a mio::Registry,
    pub next_client_id: &'a mut u64,
}

/// Connections admitted and refused, for INFO.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AdmissionCounts {
    pub received: u64,
    pub rejected: u64,
}

impl AdmissionCounts {
    fn add_to(self, state: &mut crate::commands::ServerState) {
        state.stats.total_connections_received += self.received;
        state.stats.rejected_connections += self.rejected;
    }

    fn add(&mut self, other: AdmissionCounts) {
        self.received += other.received;
        self.rejected += other.rejected;
    }
}

impl Admission<'_> {
    /// Accepts what waits on listener `index` (every listener if None) into `clients`.
    fn admit(
        &mut self,
        clients: &mut Sessions,
        rules: &AdmissionRules,
        index: Option<usize>,
    ) -> AdmissionCounts {
        let mut counts = AdmissionCounts::default();
        let indexes: Vec<usize> = match index {
            Some(index) => vec![index],
            None => (0..self.listeners.len()).collect(),
        };
        for index in indexes {
            loop {
                let mut connected = match self.listeners.accept(index) {
                    crate::net::Accepted::Connection(connected) => connected,
                    crate::net::Accepted::Refused => {
                        counts.rejected += 1;
                        continue;
                    }
                    crate::net::Accepted::Done => break,
                };
                // Redis's order: the client limit, then protected mode; only admitted
                // connections count in total_connections_received.
                if clients.len() >= rules.clients_max {
                    crate::net::refuse(&mut connected.stream, crate::net::MAX_CLIENTS_REACHED);
                    counts.rejected += 1;
                    continue;
                }
                if crate::net::protected_mode_denies_with(
                    rules.protected_mode,
                    rules.password_set,
                    &connected.peer,
                ) {
                    crate::net::refuse(&mut connected.stream, crate::net::DENIED);
                    counts.rejected += 1;
                    continue;
                }
                counts.received += 1;
                let _ = connected.stream.set_nodelay(true);
                let id = *self.next_client_id;
                *self.next_client_id += 1;
                let state = SessionState {
                    id,
                    authenticated: rules.authenticated,
                    local: connected.peer.is_local(),
                    last_command: "NULL",
                    ..SessionState::default()
                };
                let token = clients.insert(Client::new(connected, state));
                let client = clients.get_mut(&token).expect("just inserted");
                if let Err(e) = self.registry.register(
                    &mut client.conn.stream,
                    Token(token),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    tracing::warn!("can't register a client: {e}");
                    clients.remove(&token);
                }
            }
        }
        counts
    }
}
