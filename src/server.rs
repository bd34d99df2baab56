//! The event loop and client sessions.
//!
//! One thread owns the keyspace and runs every command, as in Redis. Each loop turn:
//! read what sockets have, parse and execute every complete command, append replies to
//! each client's output buffer; then, once per turn, hand the turn's log records to the
//! log writer as one batch and send the replies that may go out. Under
//! `appendfsync always` a reply produced while any batch is not yet durable is held until
//! the writer reports that batch fsynced (group commit); the loop keeps serving meanwhile.
//! Under `everysec` and `no` a reply waits only until its batch is written to the file.

use crate::client_buffers::{BigArgument, BigArguments};
use crate::commands::blocking::{BlockMode, Blocked};
use crate::commands::{
    Action, ClientState, CommandSpec, Ctx, Propagation, Registry, ServerState, flags,
};
use crate::compaction::Compaction;
use crate::config::{Config, FsyncPolicy};
use crate::keyspace::{Keyspace, SLOT_COUNT};
use crate::log::manifest::Manifest;
use crate::log::{self, LogPaths, LogWriter};
use crate::resp::{Parse, ParseLimits, Progress, ReplyWriter, parse_request};
use crate::snapshot::SnapshotJob;
use crate::storage::{RealStorage, Storage};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token, Waker};
use smallvec::SmallVec;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX - 1);
const FIRST_LISTENER: usize = usize::MAX - 64;
const READ_CHUNK_BYTES: usize = 16 * 1024;
/// Buffers larger than these are shrunk once drained, not kept for reuse.
const OUTPUT_KEEP_BYTES: usize = 64 * 1024;
const INPUT_KEEP_BYTES: usize = 64 * 1024;
const ARGUMENTS_KEEP: usize = 1024;
/// Time the active expiry cycle may take per cron run, as Redis's 25 % of a 100 ms tick.
const EXPIRE_CYCLE_BUDGET: Duration = Duration::from_millis(25);
/// Slots a background snapshot captures per event-loop turn (a table copy each).
const CAPTURE_SLOTS_PER_TURN: usize = 32;
/// Bytes read from one client in one turn, at most (then others get their turn).
const READ_PER_TURN_BYTES: usize = 4 * 1024 * 1024;
/// Log bytes waiting for the writer beyond which the loop stops reading from clients
/// (TCP then slows the senders down) until the writer catches up.
const LOG_BACKLOG_BYTES: u64 = 64 * 1024 * 1024;
/// Redis's CONFIG_BGSAVE_RETRY_DELAY: after a failed BGSAVE, save points wait this long.
const BGSAVE_RETRY_DELAY: Duration = Duration::from_secs(5);
/// The commands that run, rather than queue, inside MULTI (as in Redis).
const TRANSACTION_CONTROL: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

struct Client {
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
    state: ClientState,
    input: Vec<u8>,
    /// Parse state of a request not yet complete in `input`.
    progress: Progress,
    /// Arguments of that request read into buffers of their own (`client_buffers`).
    big_arguments: BigArguments,
    arg_ranges: Vec<Range<usize>>,
    output: Vec<u8>,
    output_sent: usize,
    /// When the unsent output went over its class's soft limit (`client_buffers`).
    output_soft_since: Option<Instant>,
    /// The log batch that must be durable before `output` may be sent: the replies in it
    /// acknowledge writes.
    hold_seq: u64,
    /// The log batch that replies of reads in `output` wait for: they may show writes not
    /// yet durable. Unlike `hold_seq` this is waived while the log is failing, so that a
    /// full disk stops writes but not reads (see `Client::required_seq`).
    read_hold_seq: u64,
    /// The most a reply produced this turn may reveal. Replies of commands refused before
    /// running (MISCONF, NOAUTH, arity) reveal nothing and need not wait, so a client can
    /// learn promptly that the log is failing.
    reply_shows: ReplyShows,
    /// Listed in `Server::held`, waiting for its required batch to become durable. Never
    /// flushed while set: the only way out is `release_held`.
    in_held: bool,
    close_after_reply: bool,
    /// Parked by a blocking command: its later input waits until it is served or times out.
    blocked: Option<Blocked>,
    created: Instant,
    last_interaction: Instant,
    last_command: &'static str,
}

/// What a command's reply may reveal of state not yet in the log, which decides how long
/// it waits for the log writer. Ordered: a turn's replies wait as long as the most
/// revealing one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
enum ReplyShows {
    /// Refused before running, or touched no key (PING, INFO, CONFIG).
    #[default]
    Nothing,
    /// Read keys: may show another client's write that is not yet acknowledged.
    Reads,
    /// Wrote keys: the reply is the write's acknowledgement.
    Writes,
}

impl Client {
    /// Bytes of requests received and not yet run (`client-query-buffer-limit`).
    fn query_bytes(&self) -> usize {
        self.input.len() + self.big_arguments.held_bytes()
    }

    /// The log batch that must be durable (under `always`; written, otherwise) before this
    /// client's output may go. While the log is failing, replies of reads go out at once:
    /// they may show writes whose acknowledgements are still held (a dirty read, which
    /// Redis under `everysec` also gives), but the disk being full must not stop reads.
    fn required_seq(&self, log_failing: bool) -> u64 {
        if log_failing {
            self.hold_seq
        } else {
            self.hold_seq.max(self.read_hold_seq)
        }
    }
}

/// Sessions indexed by their poll token; slots are reused after a client leaves.
#[derive(Default)]
struct Sessions {
    slots: Vec<Option<Client>>,
    free: Vec<usize>,
    count: usize,
}

impl Sessions {
    fn insert(&mut self, client: Client) -> usize {
        self.count += 1;
        match self.free.pop() {
            Some(token) => {
                self.slots[token] = Some(client);
                token
            }
            None => {
                self.slots.push(Some(client));
                self.slots.len() - 1
            }
        }
    }

    fn get(&self, token: &usize) -> Option<&Client> {
        self.slots.get(*token).and_then(Option::as_ref)
    }

    fn get_mut(&mut self, token: &usize) -> Option<&mut Client> {
        self.slots.get_mut(*token).and_then(Option::as_mut)
    }

    /// Takes a client out while it runs commands (which need `&mut Server`); the slot stays
    /// reserved until `put_back`.
    fn take(&mut self, token: usize) -> Option<Client> {
        self.slots.get_mut(token).and_then(Option::take)
    }

    fn put_back(&mut self, token: usize, client: Client) {
        debug_assert!(self.slots[token].is_none());
        self.slots[token] = Some(client);
    }

    fn remove(&mut self, token: &usize) -> Option<Client> {
        let client = self.take(*token)?;
        self.count -= 1;
        self.free.push(*token);
        Some(client)
    }

    fn len(&self) -> usize {
        self.count
    }

    fn iter(&self) -> impl Iterator<Item = (usize, &Client)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(t, c)| c.as_ref().map(|c| (t, c)))
    }

    fn values(&self) -> impl Iterator<Item = &Client> {
        self.slots.iter().flatten()
    }
}

pub struct Server {
    poll: Poll,
    listeners: crate::net::Listeners,
    clients: Sessions,
    /// Reused for every socket read, so each read does not zero a fresh buffer.
    read_buffer: Box<[u8]>,
    next_client_id: u64,
    keyspace: Keyspace,
    state: ServerState,
    registry: Registry,
    propagation: Propagation,
    log_writer: Option<LogWriter>,
    log_paths: Option<LogPaths>,
    /// The manifest in force (the log writer and compactions change it; this is the
    /// event loop's record of their outcomes).
    manifest: Option<Manifest>,
    /// The start-up load, until it is over (clients get -LOADING meanwhile).
    loading: Option<std::thread::JoinHandle<Result<crate::recovery::Loaded, String>>>,
    compaction: Option<Compaction>,
    /// A BGSAVE in progress, and `dirty` when it started.
    background_save: Option<(SnapshotJob, u64)>,
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
    shutdown_flag: Arc<AtomicBool>,
    expire_cursor: Vec<usize>,
    /// Deadlines of blocked clients: (unix ms, token, client id).
    block_deadlines: std::collections::BTreeSet<(i64, usize, u64)>,
    /// Clients unblocked this turn whose buffered input still waits to be run.
    resumed: Vec<usize>,
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
    pub fn start(config: Config, config_file: String) -> Result<Server, String> {
        Server::start_with_storage(config, config_file, Arc::new(RealStorage::new("")))
    }

    /// As `start`, with the files in `storage` (a simulated disk in crash tests).
    pub fn start_with_storage(
        config: Config,
        config_file: String,
        storage: Arc<dyn Storage>,
    ) -> Result<Server, String> {
        let poll = Poll::new().map_err(|e| format!("can't create the event loop: {e}"))?;
        let waker = Arc::new(
            Waker::new(poll.registry(), WAKER).map_err(|e| format!("can't create waker: {e}"))?,
        );
        config.encoding_limits.apply();
        let mut state = ServerState::new(config, config_file, storage.clone());
        let registry = Registry::new();
        let keyspace = Keyspace::new(state.config.databases);
        let propagation = Propagation::default();
        let bound = crate::net::listen(&state.config).map_err(|e| e.to_string())?;
        state.tcp_port = bound.port;
        let mut listeners = crate::net::Listeners::new(bound.sockets);
        for (index, listener) in listeners.sockets_mut().enumerate() {
            poll.registry()
                .register(listener, Token(FIRST_LISTENER + index), Interest::READABLE)
                .map_err(|e| format!("can't register listener: {e}"))?;
        }
        let shutdown_flag = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
            signal_hook::flag::register(signal, shutdown_flag.clone())
                .map_err(|e| format!("can't install signal handler: {e}"))?;
        }
        // The dataset loads on its own thread; meanwhile clients get -LOADING.
        let progress = Arc::new(crate::recovery::LoadProgress::default());
        state.persistence.loading = Some(crate::commands::LoadingStatus {
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
                .map_err(|e| format!("can't start loading: {e}"))?
        };
        let databases = state.config.databases;
        let server = Server {
            poll,
            listeners,
            clients: Sessions::default(),
            read_buffer: vec![0; READ_CHUNK_BYTES].into_boxed_slice(),
            next_client_id: 1,
            keyspace,
            state,
            registry,
            propagation,
            log_writer: None,
            log_paths: None,
            manifest: None,
            loading: Some(loading),
            compaction: None,
            background_save: None,
            storage,
            waker,
            halt_flag: Arc::new(AtomicBool::new(false)),
            closed_log_bytes: 0,
            deferred_reads: Vec::new(),
            held: Vec::new(),
            touched: Vec::new(),
            shutdown_flag,
            expire_cursor: vec![0; databases],
            block_deadlines: Default::default(),
            resumed: Vec::new(),
        };
        Ok(server)
    }

    /// Adopts the dataset the loading thread built and opens the log for appending.
    fn finish_loading(&mut self) -> Result<(), String> {
        let thread = self.loading.take().expect("loading in progress");
        let loaded = thread
            .join()
            .unwrap_or_else(|_| Err("the loading thread panicked".into()))?;
        self.keyspace = loaded.keyspace;
        if let Some(manifest) = loaded.manifest {
            let paths = LogPaths::from_config(&self.state.config);
            let writer = log::open_writer(
                &self.storage,
                &paths,
                &manifest,
                &self.state.config,
                self.waker_notify(),
            )
            .map_err(|e| format!("can't open the append-only log: {e}"))?;
            self.log_writer = Some(writer);
            self.log_paths = Some(paths);
            self.manifest = Some(manifest);
            self.propagation.enabled = true;
        }
        self.refresh_log_sizes();
        let p = &mut self.state.persistence;
        p.aof_rewrite_base_size = p.aof_current_size;
        p.loading = None;
        p.loading_seconds = loaded.seconds;
        p.loaded_keys = loaded.keys;
        if !self.state.config.appendonly {
            p.rdb_last_load_keys_loaded = loaded.keys;
        }
        self.state.dirty = 0;
        tracing::info!(
            "ready to accept connections on port {}",
            self.state.tcp_port
        );
        Ok(())
    }

    /// The port the server listens on (the bound one when configured with port 0).
    pub fn port(&self) -> u16 {
        self.state.tcp_port
    }

    /// A flag that makes `run` return at once, saving and syncing nothing: for crash tests
    /// that run the server in-process on a simulated disk.
    pub fn halt_handle(&self) -> Arc<AtomicBool> {
        self.halt_flag.clone()
    }

    /// Runs until SHUTDOWN or a termination signal.
    pub fn run(mut self) -> Result<(), String> {
        let mut events = Events::with_capacity(1024);
        let mut next_cron = Instant::now();
        loop {
            if self.loading.as_ref().is_some_and(|t| t.is_finished()) {
                self.finish_loading()?;
            }
            if self.halt_flag.load(Ordering::Relaxed) {
                // As a process that dies: no file is touched from now on, so background
                // threads must be gone before `run` returns (a test then cuts the power).
                tracing::warn!("halted");
                if let Some(mut compaction) = self.compaction.take() {
                    compaction.job.cancel_and_wait(&mut self.keyspace);
                }
                if let Some((mut job, _)) = self.background_save.take() {
                    job.cancel_and_wait(&mut self.keyspace);
                }
                if let Some(thread) = self.loading.take() {
                    let _ = thread.join();
                }
                return Ok(());
            }
            let mut timeout = next_cron.saturating_duration_since(Instant::now());
            if !self.deferred_reads.is_empty() && !self.log_backlogged() {
                timeout = Duration::ZERO; // clients put aside can be read now
            }
            if let Some(&(deadline, _, _)) = self.block_deadlines.first() {
                let wait = (deadline - crate::clock::unix_ms()).max(0) as u64;
                timeout = timeout.min(Duration::from_millis(wait));
            }
            if let Some(throttled) = self.capture_pending() {
                // Keep capturing between events; poll briefly while the writers catch up.
                timeout = timeout.min(if throttled {
                    Duration::from_millis(1)
                } else {
                    Duration::ZERO
                });
            }
            if let Err(e) = self.poll.poll(&mut events, Some(timeout))
                && e.kind() != ErrorKind::Interrupted
            {
                return Err(format!("event loop failed: {e}"));
            }
            let mut shutdown: Option<Option<bool>> = None;
            let mut requester: Option<usize> = None;
            if !self.deferred_reads.is_empty() && !self.log_backlogged() {
                (shutdown, requester) = self.read_deferred();
            }
            for event in events.iter() {
                let token = event.token().0;
                if token == WAKER.0 {
                    continue; // durable progress is checked below
                } else if token >= FIRST_LISTENER {
                    self.accept(token - FIRST_LISTENER);
                } else if event.is_error() || (event.is_read_closed() && event.is_write_closed()) {
                    // The peer is gone both ways (reset or hang-up): nothing can be delivered.
                    self.close_client(token);
                } else {
                    if event.is_readable() || event.is_read_closed() {
                        let until_eof = event.is_read_closed();
                        if self.log_backlogged() {
                            self.deferred_reads.push((token, until_eof));
                        } else if let Some(request) = self.read_and_execute(token, until_eof) {
                            shutdown = Some(request);
                            requester = Some(token);
                        }
                    }
                    if event.is_writable() {
                        self.touched.push(token);
                    }
                }
                if shutdown.is_some() {
                    break;
                }
            }
            if !self.block_deadlines.is_empty() {
                self.expire_blocked();
            }
            if shutdown.is_none()
                && let Some(request) = self.run_resumed()
            {
                shutdown = Some(request);
            }
            self.background_snapshot_work();
            self.end_of_turn();
            if Instant::now() >= next_cron {
                self.cron();
                next_cron =
                    Instant::now() + Duration::from_millis(1000 / self.state.config.hz as u64);
            }
            if self.shutdown_flag.swap(false, Ordering::Relaxed) {
                tracing::info!("received a termination signal, shutting down");
                shutdown = Some(None);
            }
            if let Some(save) = shutdown {
                match self.shutdown(save) {
                    Ok(()) => return Ok(()),
                    Err(e) => {
                        tracing::warn!("SHUTDOWN failed, not exiting: {e}");
                        if let Some(token) = requester
                            && let Some(client) = self.clients.get_mut(&token)
                        {
                            ReplyWriter::new(&mut client.output, client.state.resp3)
                                .error("ERR Errors trying to SHUTDOWN. Check logs.");
                            self.touched.push(token);
                        }
                    }
                }
            }
        }
    }

    fn accept(&mut self, index: usize) {
        loop {
            let (mut stream, peer) = match self.listeners.accept(index) {
                crate::net::Accepted::Connection(stream, peer) => (stream, peer),
                crate::net::Accepted::Refused => {
                    self.state.stats.rejected_connections += 1;
                    continue;
                }
                crate::net::Accepted::Done => return,
            };
            // Redis's order: the client limit, then protected mode; only admitted
            // connections count in total_connections_received.
            if self.clients.len() >= self.state.config.clients_max {
                crate::net::refuse(&mut stream, crate::net::MAX_CLIENTS_REACHED);
                self.state.stats.rejected_connections += 1;
                continue;
            }
            if crate::net::protected_mode_denies(&self.state.config, &peer) {
                crate::net::refuse(&mut stream, crate::net::DENIED);
                self.state.stats.rejected_connections += 1;
                continue;
            }
            self.state.stats.total_connections_received += 1;
            let _ = stream.set_nodelay(true);
            let id = self.next_client_id;
            self.next_client_id += 1;
            let local = stream.local_addr().unwrap_or(peer);
            let now = Instant::now();
            let token = self.clients.insert(Client {
                stream,
                peer,
                local,
                state: ClientState {
                    id,
                    authenticated: self.state.config.requirepass.is_none(),
                    ..ClientState::default()
                },
                input: Vec::new(),
                progress: Progress::default(),
                big_arguments: BigArguments::default(),
                arg_ranges: Vec::new(),
                output: Vec::new(),
                output_sent: 0,
                output_soft_since: None,
                hold_seq: 0,
                read_hold_seq: 0,
                reply_shows: ReplyShows::Nothing,
                in_held: false,
                close_after_reply: false,
                blocked: None,
                created: now,
                last_interaction: now,
                last_command: "NULL",
            });
            let client = self.clients.get_mut(&token).expect("just inserted");
            if let Err(e) = self.poll.registry().register(
                &mut client.stream,
                Token(token),
                Interest::READABLE | Interest::WRITABLE,
            ) {
                tracing::warn!("can't register a client: {e}");
                self.clients.remove(&token);
                continue;
            }
            self.state.connected_clients = self.clients.len();
        }
    }

    /// Reads everything available and executes every complete command.
    /// Returns Some(save) when a client asked for SHUTDOWN.
    /// `until_eof`: the peer has closed its side, so read until EOF rather than stopping
    /// at a short read (no further event would announce the EOF).
    fn read_and_execute(&mut self, token: usize, until_eof: bool) -> Option<Option<bool>> {
        let limit = self.state.config.query_buffer_bytes_max;
        // The peer sent EOF: it may have half-closed, so its replies still go out.
        let mut peer_done = false;
        let mut closed = false;
        let mut more_to_read = false;
        let mut read_now = 0usize;
        {
            let client = self.clients.get_mut(&token)?;
            if client.close_after_reply {
                return None;
            }
            loop {
                // A big argument in progress is read straight into its own buffer.
                let read = match client.big_arguments.reading() {
                    Some(argument) => argument.read_from(&mut client.stream),
                    None => client.stream.read(&mut self.read_buffer).map(|n| {
                        client.input.extend_from_slice(&self.read_buffer[..n]);
                        (n, self.read_buffer.len())
                    }),
                };
                match read {
                    Ok((0, _)) => {
                        peer_done = true;
                        break;
                    }
                    Ok((n, wanted)) => {
                        client.big_arguments.settle();
                        self.state.stats.total_net_input_bytes += n as u64;
                        // A short read drained the socket: skip the read that would only
                        // say WouldBlock (bytes arriving later raise a new edge event).
                        let drained = n < wanted && !until_eof;
                        if drained || client.query_bytes() > limit {
                            break;
                        }
                        read_now += n;
                        if read_now >= READ_PER_TURN_BYTES {
                            // A fast sender is not read to exhaustion in one go: the rest
                            // waits for the next turn (events are edge-triggered, so the
                            // client is remembered).
                            more_to_read = true;
                            break;
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
            client.last_interaction = Instant::now();
        }
        let shutdown = self.process_input(token);
        if let Some(client) = self.clients.get(&token)
            && client.query_bytes() > limit
        {
            tracing::warn!(
                "closing client id={} addr={}: query buffer of {} bytes exceeds client-query-buffer-limit",
                client.state.id,
                client.peer,
                client.query_bytes()
            );
            closed = true;
        }
        if peer_done && !closed {
            match self.clients.get_mut(&token) {
                Some(client) if client.output.len() > client.output_sent => {
                    client.close_after_reply = true; // closed once the replies are sent
                }
                Some(_) => closed = true,
                None => {}
            }
        }
        if closed {
            self.close_client(token);
        } else if more_to_read {
            self.deferred_reads.push((token, until_eof));
        }
        shutdown
    }

    fn process_input(&mut self, token: usize) -> Option<Option<bool>> {
        let mut consumed_total = 0;
        let mut shutdown = None;
        let mut produced_output = false;
        let mut client = self.clients.take(token)?;
        let mut ranges = std::mem::take(&mut client.arg_ranges);
        let mut pending_action: Option<Action> = None;
        while !client.close_after_reply && client.blocked.is_none() {
            // Recomputed per request: an AUTH earlier in the same read lifts the limits.
            let limits = ParseLimits {
                bulk_bytes_max: self.state.config.bulk_bytes_max,
                inline_bytes_max: 64 * 1024,
                unauthenticated: self.auth_required(&client.state),
                big_argument_bytes_min: crate::resp::BIG_ARGUMENT_BYTES_MIN,
            };
            if client.big_arguments.is_reading() {
                break; // the rest of the request waits behind the big argument
            }
            let input = &client.input[consumed_total..];
            match parse_request(input, &limits, &mut ranges, &mut client.progress) {
                Parse::Incomplete => break,
                Parse::BigArgument { start, len } => {
                    // Its bytes so far move to a buffer of its final size; the socket's
                    // next bytes go there too (`read_and_execute`).
                    let at = consumed_total + start;
                    let argument = BigArgument::start(ranges.len() - 1, len, &client.input[at..]);
                    client.big_arguments.begin(argument);
                    client.input.truncate(at);
                    break;
                }
                Parse::Invalid(reason) => {
                    client.big_arguments.clear();
                    let mut writer = ReplyWriter::new(&mut client.output, client.state.resp3);
                    writer.error(&format!("ERR {reason}"));
                    self.state.stats.total_error_replies += 1;
                    client.close_after_reply = true;
                    produced_output = true;
                    tracing::debug!(
                        "protocol error from client id={}: {reason}",
                        client.state.id
                    );
                    break;
                }
                Parse::Complete(used) => {
                    let frame = &client.input[consumed_total..consumed_total + used];
                    let big = &client.big_arguments;
                    let args: SmallVec<[&[u8]; 8]> = ranges
                        .iter()
                        .enumerate()
                        .map(|(i, r)| big.argument(i, frame, r.clone()))
                        .collect();
                    if !args.is_empty() {
                        let (action, name, shows) = self.execute(
                            &mut client.state,
                            &mut client.output,
                            &args,
                            BlockMode::Normal,
                            big.complete(),
                        );
                        produced_output = true;
                        client.last_command = name.unwrap_or(client.last_command);
                        client.reply_shows = client.reply_shows.max(shows);
                        pending_action = Some(action);
                    }
                    drop(args);
                    client.big_arguments.clear();
                    consumed_total += used;
                }
                Parse::Inline(words, used) => {
                    if !words.is_empty() {
                        let args: Vec<&[u8]> = words.iter().map(|w| w.as_slice()).collect();
                        let (action, name, shows) = self.execute(
                            &mut client.state,
                            &mut client.output,
                            &args,
                            BlockMode::Normal,
                            &[],
                        );
                        produced_output = true;
                        client.last_command = name.unwrap_or(client.last_command);
                        client.reply_shows = client.reply_shows.max(shows);
                        pending_action = Some(action);
                    }
                    consumed_total += used;
                }
            }
            if let Some(action) = pending_action.take() {
                self.apply_action(token, &mut client, action, &mut shutdown);
            }
            if self.state.blocked.has_ready() {
                self.serve_blocked();
            }
            if shutdown.is_some() {
                break;
            }
        }
        if ranges.capacity() > ARGUMENTS_KEEP && ranges.len() < ARGUMENTS_KEEP {
            ranges.shrink_to(ARGUMENTS_KEEP);
        }
        client.arg_ranges = ranges;
        client.input.drain(..consumed_total);
        if client.input.capacity() > INPUT_KEEP_BYTES && client.input.len() < INPUT_KEEP_BYTES {
            client.input.shrink_to(INPUT_KEEP_BYTES);
        }
        self.clients.put_back(token, client);
        if produced_output {
            self.touched.push(token);
        }
        shutdown
    }

    /// Does what a command's action asks of the server, after its reply is written.
    fn apply_action(
        &mut self,
        token: usize,
        client: &mut Client,
        action: Action,
        shutdown: &mut Option<Option<bool>>,
    ) {
        match action {
            Action::None => {}
            Action::Close => client.close_after_reply = true,
            Action::Shutdown { save } => *shutdown = Some(save),
            Action::ClientList { only_self, ids } => {
                let text = self.client_list(client, only_self, ids.as_deref());
                ReplyWriter::new(&mut client.output, client.state.resp3).verbatim(text.as_bytes());
            }
            Action::StartRewrite => self.start_rewrite(),
            Action::StartBackgroundSave => self.start_background_save(),
            Action::Exec(queued) => self.run_transaction(token, client, queued, shutdown),
            Action::Block(blocked) => {
                self.state.blocked.block(token, client.state.id, &blocked);
                if let Some(deadline) = blocked.deadline_ms {
                    self.block_deadlines
                        .insert((deadline, token, client.state.id));
                }
                client.blocked = Some(blocked);
            }
        }
    }

    /// Serves clients blocked on keys that became ready, oldest first per key, until no
    /// key is ready (a served BLMOVE can make its destination ready in turn).
    fn serve_blocked(&mut self) {
        while self.state.blocked.has_ready() {
            for (db, key) in self.state.blocked.take_ready() {
                for (token, id) in self.state.blocked.waiters(db, &key) {
                    // The client running the current command is out of `clients`; it is
                    // not blocked (a blocked client runs nothing).
                    let Some(mut client) = self.clients.take(token) else {
                        continue;
                    };
                    let command = match &client.blocked {
                        Some(blocked) if client.state.id == id => blocked.command.clone(),
                        _ => {
                            self.clients.put_back(token, client);
                            continue;
                        }
                    };
                    let args: SmallVec<[&[u8]; 8]> = command.iter().map(Vec::as_slice).collect();
                    let mode = BlockMode::Serving(key.clone());
                    let (action, _, shows) =
                        self.execute(&mut client.state, &mut client.output, &args, mode, &[]);
                    if !matches!(action, Action::Block(_)) {
                        self.unblock(token, &mut client);
                        client.reply_shows = client.reply_shows.max(shows);
                        let mut shutdown = None;
                        self.apply_action(token, &mut client, action, &mut shutdown);
                    }
                    self.clients.put_back(token, client);
                }
            }
        }
    }

    /// Takes a client out of the blocked state; its reply (written by the caller) goes
    /// out with this turn and its buffered input runs next.
    fn unblock(&mut self, token: usize, client: &mut Client) {
        if let Some(blocked) = client.blocked.take() {
            self.state.blocked.unblock(client.state.id, &blocked);
            if let Some(deadline) = blocked.deadline_ms {
                self.block_deadlines
                    .remove(&(deadline, token, client.state.id));
            }
            self.touched.push(token);
            self.resumed.push(token);
        }
    }

    /// Answers blocked clients whose timeout has passed (a null array, as Redis 7.0 does
    /// for every blocking command).
    fn expire_blocked(&mut self) {
        let now = crate::clock::unix_ms();
        while let Some(&(deadline, token, id)) = self.block_deadlines.first() {
            if deadline > now {
                break;
            }
            self.block_deadlines.pop_first();
            let Some(mut client) = self.clients.take(token) else {
                continue;
            };
            if client.state.id == id && client.blocked.is_some() {
                ReplyWriter::new(&mut client.output, client.state.resp3).null_array();
                self.unblock(token, &mut client);
            }
            self.clients.put_back(token, client);
        }
    }

    /// Runs the buffered input of clients unblocked this turn.
    fn run_resumed(&mut self) -> Option<Option<bool>> {
        let mut shutdown = None;
        while let Some(token) = self.resumed.pop() {
            if let Some(request) = self.process_input(token) {
                shutdown = Some(request);
            }
        }
        shutdown
    }

    /// EXEC: runs the queued commands in order, their replies in one array, in this one
    /// turn (nothing else runs in between). More than one log record is wrapped in
    /// `MULTI … EXEC`, so that replay applies all of them or none.
    fn run_transaction(
        &mut self,
        token: usize,
        client: &mut Client,
        queued: Vec<Vec<Vec<u8>>>,
        shutdown: &mut Option<Option<bool>>,
    ) {
        let log_start = self.propagation.buffer.len();
        let records_before = self.propagation.records;
        ReplyWriter::new(&mut client.output, client.state.resp3).array(queued.len());
        for command in &queued {
            let args: SmallVec<[&[u8]; 8]> = command.iter().map(Vec::as_slice).collect();
            let (action, name, shows) = self.execute(
                &mut client.state,
                &mut client.output,
                &args,
                BlockMode::Never,
                &[],
            );
            client.last_command = name.unwrap_or(client.last_command);
            client.reply_shows = client.reply_shows.max(shows);
            self.apply_action(token, client, action, shutdown);
        }
        if self.propagation.records - records_before > 1 {
            let mut multi = Vec::new();
            crate::resp::encode_command(&mut multi, &[b"MULTI" as &[u8]]);
            self.propagation.buffer.splice(log_start..log_start, multi);
            crate::resp::encode_command(&mut self.propagation.buffer, &[b"EXEC" as &[u8]]);
        }
    }

    /// Why a command may not run now (Redis's `processCommand` checks), if it may not.
    fn rejection(&self, client: &ClientState, spec: &CommandSpec, argc: usize) -> Option<String> {
        if !spec.arity_ok(argc) {
            Some(format!(
                "ERR wrong number of arguments for '{}' command",
                spec.name
            ))
        } else if self.auth_required(client) && !spec.has(flags::NO_AUTH) {
            Some("NOAUTH Authentication required.".to_string())
        } else if spec.has(flags::WRITE)
            && let Some(error) = &self.state.log_error
        {
            Some(format!("MISCONF Errors writing to the AOF file: {error}"))
        } else if client.multi.is_some() && spec.has(flags::NO_MULTI) {
            Some("ERR Command not allowed inside a transaction".to_string())
        } else if self.loading.is_some() && !spec.has(flags::LOADING) {
            Some("LOADING Redis is loading the dataset in memory".to_string())
        } else {
            None
        }
    }

    /// Runs one command for a client; the reply goes to `output`. Returns the action and
    /// the command's name if it ran, and what its reply may reveal. Inside
    /// MULTI, commands other than the transaction's own are checked and queued.
    fn execute(
        &mut self,
        client: &mut ClientState,
        output: &mut Vec<u8>,
        args: &[&[u8]],
        block_mode: BlockMode,
        big_arguments: &[(usize, crate::types::string::Str)],
    ) -> (Action, Option<&'static str>, ReplyShows) {
        let mut out = ReplyWriter::new(output, client.resp3);
        let spec = self.registry.get(args[0]);
        let rejection = match spec {
            None => Some(crate::commands::unknown_command_error(args)),
            Some(spec) => self.rejection(client, spec, args.len()),
        };
        if let Some(message) = rejection {
            out.error(&message);
            self.state.stats.total_error_replies += 1;
            // Redis's flagTransaction: a rejected command dooms the transaction.
            if let Some(multi) = &mut client.multi {
                multi.failed = true;
            }
            return (Action::None, None, ReplyShows::Nothing);
        }
        let spec = spec.expect("rejected above when unknown");
        if let Some(multi) = &mut client.multi
            && !TRANSACTION_CONTROL.contains(&spec.name)
        {
            let bytes: usize = args.iter().map(|a| a.len() + 16).sum();
            if multi.bytes + bytes > self.state.config.query_buffer_bytes_max {
                // Bounded like the query buffer; the queue is dropped at once.
                multi.queued = Vec::new();
                multi.failed = true;
                out.error("ERR Transaction discarded: the queued commands exceed client-query-buffer-limit");
                self.state.stats.total_error_replies += 1;
                return (Action::None, None, ReplyShows::Nothing);
            }
            multi.bytes += bytes;
            multi.has_write |= spec.has(flags::WRITE);
            multi.queued.push(args.iter().map(|a| a.to_vec()).collect());
            out.simple("QUEUED");
            return (Action::None, Some(spec.name), ReplyShows::Nothing);
        }
        let mut ctx = Ctx {
            keyspace: &mut self.keyspace,
            client,
            server: &mut self.state,
            out,
            log: &mut self.propagation,
            now_ms: crate::clock::unix_ms(),
            loading: false,
            block_mode,
            big_arguments,
        };
        let action = (spec.handler)(&mut ctx, args);
        let errors = ctx.out.errors;
        self.state.stats.total_error_replies += errors;
        self.state.stats.total_commands_processed += 1;
        let name = spec.name;
        // Only commands that read or write keys can show state not yet durable.
        let shows = if spec.has(flags::WRITE) {
            ReplyShows::Writes
        } else if spec.has(flags::READONLY) {
            ReplyShows::Reads
        } else {
            ReplyShows::Nothing
        };
        if name == "config" {
            self.apply_runtime_config();
        }
        (action, Some(name), shows)
    }

    /// Whether the client must still AUTH: a password is set now and it has not given it.
    fn auth_required(&self, client: &ClientState) -> bool {
        self.state.config.requirepass.is_some() && !client.authenticated
    }

    /// Pushes changed run-time settings to the parts that cache them.
    fn apply_runtime_config(&mut self) {
        if let Some(writer) = &self.log_writer {
            writer.set_policy(self.state.config.appendfsync);
        }
        self.state.config.encoding_limits.apply();
    }

    fn client_list(&self, current: &Client, only_self: bool, ids: Option<&[u64]>) -> String {
        let describe = |c: &Client| {
            let now = Instant::now();
            format!(
                "id={} addr={} laddr={} fd=0 name={} age={} idle={} flags={} db={} sub=0 psub=0 ssub=0 multi={} qbuf={} qbuf-free=0 argv-mem=0 multi-mem=0 rbs={} rbp=0 obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}\n",
                c.state.id,
                c.peer,
                c.local,
                c.state.name.as_deref().unwrap_or(""),
                now.duration_since(c.created).as_secs(),
                now.duration_since(c.last_interaction).as_secs(),
                if c.state.multi.is_some() {
                    "x"
                } else if c.blocked.is_some() {
                    "b"
                } else {
                    "N"
                },
                c.state.db,
                c.state.multi.as_ref().map_or(-1, |m| m.queued.len() as i64),
                c.input.len(),
                c.input.capacity(),
                c.output.len(),
                c.input.capacity() + c.output.capacity(),
                if std::ptr::eq(c, current) {
                    "client|list"
                } else {
                    c.last_command
                },
                if c.state.resp3 { 3 } else { 2 },
                c.state.lib_name.as_deref().unwrap_or(""),
                c.state.lib_version.as_deref().unwrap_or(""),
            )
        };
        if only_self {
            let mut line = describe(current);
            line = line.replace("cmd=client|list", "cmd=client|info");
            return line;
        }
        let mut all: Vec<&Client> = self.clients.values().collect();
        all.push(current);
        all.retain(|c| ids.is_none_or(|ids| ids.contains(&c.state.id)));
        all.sort_by_key(|c| c.state.id);
        all.into_iter().map(describe).collect()
    }

    /// Closes the clients of this turn whose unsent replies went over their limits,
    /// before anything is sent (Redis closes them "ASAP", without flushing).
    fn enforce_output_limits(&mut self) {
        let now = Instant::now();
        let limit = self.state.config.output_buffer_limits.normal;
        let password_set = self.state.config.requirepass.is_some();
        let mut over = Vec::new();
        for &token in &self.touched {
            let Some(client) = self.clients.get_mut(&token) else {
                continue;
            };
            if over.contains(&token) {
                continue; // listed twice this turn
            }
            let unsent = client.output.len() - client.output_sent;
            let authenticated = !password_set || client.state.authenticated;
            let breach = crate::client_buffers::check_output(
                unsent,
                authenticated,
                &limit,
                &mut client.output_soft_since,
                now,
            );
            if let Some(breach) = breach {
                tracing::warn!(
                    "Client id={} addr={} omem={unsent} scheduled to be closed ASAP for overcoming of output buffer limits ({breach:?})",
                    client.state.id,
                    client.peer,
                );
                over.push(token);
            }
        }
        for token in over {
            self.close_client(token);
        }
    }

    /// Hands this turn's log records to the writer and sends the replies that may go.
    fn end_of_turn(&mut self) {
        self.enforce_output_limits();
        if let Some(writer) = &mut self.log_writer {
            if !self.propagation.buffer.is_empty() {
                writer.submit(&mut self.propagation.buffer);
                let p = &mut self.state.persistence;
                p.aof_pending_peak_bytes = p.aof_pending_peak_bytes.max(writer.pending_bytes());
            }
            let durable = release_watermark(writer, self.state.config.appendfsync);
            let failing = writer.is_failing();
            let last = writer.last_submitted();
            for token in std::mem::take(&mut self.touched) {
                let Some(client) = self.clients.get_mut(&token) else {
                    continue;
                };
                match std::mem::take(&mut client.reply_shows) {
                    ReplyShows::Nothing => {}
                    ReplyShows::Reads => client.read_hold_seq = last,
                    ReplyShows::Writes => client.hold_seq = last,
                }
                if client.required_seq(failing) > durable {
                    if !client.in_held {
                        client.in_held = true;
                        self.held.push(token);
                    }
                } else if !client.in_held {
                    self.flush_client(token);
                }
            }
            if !self.held.is_empty() {
                self.release_held(durable, failing);
            }
        } else {
            for token in std::mem::take(&mut self.touched) {
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
            if !client.in_held {
                continue; // the token was reused by a client that is not waiting
            }
            if client.required_seq(log_failing) > durable {
                still_held.push(token);
            } else {
                client.in_held = false;
                self.flush_client(token);
            }
        }
        self.held = still_held;
    }

    fn flush_client(&mut self, token: usize) {
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        let mut failed = false;
        while client.output_sent < client.output.len() {
            match client.stream.write(&client.output[client.output_sent..]) {
                Ok(0) => {
                    failed = true;
                    break;
                }
                Ok(n) => {
                    client.output_sent += n;
                    self.state.stats.total_net_output_bytes += n as u64;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        if client.output_sent == client.output.len() {
            client.output.clear();
            client.output_sent = 0;
            // Nothing is left that waits for the log.
            client.hold_seq = 0;
            client.read_hold_seq = 0;
            if client.output.capacity() > OUTPUT_KEEP_BYTES {
                client.output = Vec::new();
            }
            if client.close_after_reply {
                failed = true;
            }
        }
        if failed {
            self.close_client(token);
        }
    }

    fn close_client(&mut self, token: usize) {
        if let Some(mut client) = self.clients.remove(&token) {
            let _ = self.poll.registry().deregister(&mut client.stream);
            self.state.watches.unwatch_all(&mut client.state);
            if let Some(blocked) = client.blocked.take() {
                self.state.blocked.unblock(client.state.id, &blocked);
                if let Some(deadline) = blocked.deadline_ms {
                    self.block_deadlines
                        .remove(&(deadline, token, client.state.id));
                }
            }
        }
        self.state.connected_clients = self.clients.len();
    }

    /// The log writer is this far behind: stop taking new requests.
    fn log_backlogged(&self) -> bool {
        self.log_writer.as_ref().is_some_and(|writer| {
            writer.pending_bytes() + self.propagation.buffer.len() as u64 > LOG_BACKLOG_BYTES
        })
    }

    /// Reads the clients put aside while the log writer was behind, until it is behind
    /// again. Returns a SHUTDOWN request and its client, if one came.
    fn read_deferred(&mut self) -> (Option<Option<bool>>, Option<usize>) {
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
            if let Some(request) = self.read_and_execute(token, until_eof) {
                self.deferred_reads.extend(pending);
                return (Some(request), Some(token));
            }
            if self.log_backlogged() {
                self.deferred_reads.extend(pending);
                break;
            }
        }
        (None, None)
    }

    /// Some(throttled) while a background snapshot still has slots to capture.
    fn capture_pending(&self) -> Option<bool> {
        let jobs = self
            .compaction
            .as_ref()
            .map(|c| &c.job)
            .into_iter()
            .chain(self.background_save.as_ref().map(|(job, _)| job));
        jobs.filter(|job| job.capturing())
            .map(|job| job.throttled())
            .reduce(|a, b| a && b)
    }

    /// One turn's share of background capture, and the end of finished jobs.
    fn background_snapshot_work(&mut self) {
        if let Some(compaction) = &mut self.compaction {
            compaction
                .job
                .step(&mut self.keyspace, CAPTURE_SLOTS_PER_TURN);
            let before = self.manifest.as_ref().expect("the log is on");
            if let Some(finished) = compaction.poll(before) {
                self.compaction = None;
                self.finish_rewrite(finished);
            }
        }
        if let Some((job, _)) = &mut self.background_save {
            job.step(&mut self.keyspace, CAPTURE_SLOTS_PER_TURN);
            if let Some(outcome) = job.outcome() {
                let (_, dirty_at_start) = self.background_save.take().expect("checked");
                self.finish_background_save(outcome, dirty_at_start);
            }
        }
        let held = self.compaction.as_ref().map_or(0, |c| c.job.held_bytes())
            + self
                .background_save
                .as_ref()
                .map_or(0, |(job, _)| job.held_bytes());
        self.state.persistence.capture_held_bytes = held;
        let job = self
            .compaction
            .as_ref()
            .map(|c| &c.job)
            .or(self.background_save.as_ref().map(|(job, _)| job));
        let p = &mut self.state.persistence;
        match job {
            Some(job) => p.current_save_keys_processed = job.keys_written(),
            None => (p.current_save_keys_processed, p.current_save_keys_total) = (0, 0),
        }
    }

    fn waker_notify(&self) -> Box<dyn Fn() + Send> {
        let waker = self.waker.clone();
        Box::new(move || {
            let _ = waker.wake();
        })
    }

    /// Starts a compaction (BGREWRITEAOF, the automatic trigger, a scheduled one).
    fn start_rewrite(&mut self) {
        let notify = self.waker_notify();
        let (Some(writer), Some(paths), Some(manifest)) =
            (&mut self.log_writer, &self.log_paths, &self.manifest)
        else {
            return;
        };
        if self.compaction.is_some() || self.background_save.is_some() {
            self.state.persistence.aof_rewrite_scheduled = true;
            return;
        }
        // The switch to the new file comes after every record logged so far.
        if !self.propagation.buffer.is_empty() {
            writer.submit(&mut self.propagation.buffer);
        }
        let compaction = Compaction::start(
            &mut self.keyspace,
            writer,
            self.storage.clone(),
            paths,
            manifest,
            crate::compaction::Settings {
                parts: self.state.config.aof_rewrite_threads(),
                key_delay_us: self.state.config.rdb_key_save_delay_us,
                compression: self.state.config.rdbcompression,
            },
            notify,
        );
        let compaction = match compaction {
            Ok(compaction) => compaction,
            Err(error) => {
                // Nothing changed (no capture, no log switch): report it as a failure.
                tracing::warn!("background append-only log rewrite failed to start: {error}");
                let p = &mut self.state.persistence;
                p.aof_rewrite_scheduled = false;
                p.aof_rewrites += 1;
                p.aof_last_bgrewrite_failed = true;
                p.aof_rewrites_consecutive_failures += 1;
                p.aof_last_rewrite_failure = Some(Instant::now());
                return;
            }
        };
        self.state.persistence.current_save_keys_total = self.keyspace.total_keys() as u64;
        // The new file starts empty: the next record needs its SELECT.
        self.propagation.selected_db = None;
        self.compaction = Some(compaction);
        let p = &mut self.state.persistence;
        p.aof_rewrite_scheduled = false;
        p.aof_rewrite_in_progress = true;
        p.aof_rewrites += 1; // counted at the start, as Redis does
        p.aof_rewrite_started = Some(Instant::now());
    }

    fn finish_rewrite(&mut self, finished: crate::compaction::Finished) {
        let p = &mut self.state.persistence;
        let seconds = p.aof_rewrite_started.take().map(|t| t.elapsed());
        p.aof_rewrite_in_progress = false;
        p.aof_last_rewrite_seconds = seconds.map(|d| d.as_secs());
        match finished.result {
            Ok(outcome) => {
                let bytes: u64 = outcome.part_bytes.iter().sum();
                tracing::info!(
                    "background append-only log rewrite finished successfully: {} keys in {} part(s), {:.1} MB in {:.3}s",
                    outcome.keys,
                    outcome.part_bytes.len(),
                    bytes as f64 / 1e6,
                    outcome.seconds
                );
                p.aof_last_bgrewrite_failed = false;
                p.aof_rewrites_consecutive_failures = 0;
                p.aof_last_rewrite_failure = None;
                p.aof_last_rewrite_bytes = bytes;
                p.aof_last_rewrite_keys = outcome.keys;
            }
            Err(error) => {
                tracing::warn!("background append-only log rewrite failed: {error}");
                self.keyspace.cancel_capture();
                p.aof_last_bgrewrite_failed = true;
                p.aof_rewrites_consecutive_failures += 1;
                p.aof_last_rewrite_failure = Some(Instant::now());
            }
        }
        self.manifest = Some(finished.manifest);
        self.refresh_log_sizes();
        let p = &mut self.state.persistence;
        if !p.aof_last_bgrewrite_failed {
            p.aof_rewrite_base_size = p.aof_current_size;
        }
        self.start_scheduled_jobs();
    }

    /// BGSAVE: a forkless snapshot to `dbfilename`, written under a temporary name and
    /// renamed into place when complete.
    fn start_background_save(&mut self) {
        if self.compaction.is_some() || self.background_save.is_some() {
            self.state.persistence.rdb_bgsave_scheduled = true;
            return;
        }
        let config = &self.state.config;
        let dir = config.dir.clone();
        let name = config.dbfilename.clone();
        let temp = dir.join(format!("temp-bgsave-{}.rdb", std::process::id()));
        let storage = self.storage.clone();
        let finisher = {
            let temp = temp.clone();
            let storage = storage.clone();
            Box::new(move |_sizes: &[u64]| {
                crate::snapshot::install_file(&*storage, &temp, &dir, &name)
            })
        };
        let notify = self.waker_notify();
        let job = SnapshotJob::start(
            &mut self.keyspace,
            crate::snapshot::JobSpec {
                storage,
                part_paths: vec![temp],
                options: crate::rdb::RdbWriterOptions {
                    compression: self.state.config.rdbcompression,
                    ..crate::rdb::RdbWriterOptions::default()
                },
                part_aux: Vec::new(),
                finisher,
                key_delay_us: self.state.config.rdb_key_save_delay_us,
                notify,
            },
        );
        let job = match job {
            Ok(job) => job,
            Err(error) => {
                tracing::warn!("background saving failed to start: {error}");
                let p = &mut self.state.persistence;
                p.rdb_bgsave_scheduled = false;
                p.rdb_saves += 1;
                p.rdb_last_bgsave_failed = true;
                p.rdb_last_bgsave_failure = Some(Instant::now());
                return;
            }
        };
        tracing::info!("background saving started");
        self.state.persistence.current_save_keys_total = self.keyspace.total_keys() as u64;
        self.background_save = Some((job, self.state.dirty));
        let p = &mut self.state.persistence;
        p.rdb_bgsave_scheduled = false;
        p.rdb_bgsave_in_progress = true;
        p.rdb_saves += 1; // counted at the start, as Redis does
        p.rdb_bgsave_started = Some(Instant::now());
    }

    fn finish_background_save(
        &mut self,
        outcome: Result<crate::snapshot::JobOutcome, String>,
        dirty_at_start: u64,
    ) {
        let p = &mut self.state.persistence;
        let seconds = p.rdb_bgsave_started.take().map(|t| t.elapsed());
        p.rdb_bgsave_in_progress = false;
        p.rdb_last_bgsave_seconds = seconds.map(|d| d.as_secs());
        match outcome {
            Ok(outcome) => {
                tracing::info!(
                    "background saving terminated with success: {} keys, {} bytes",
                    outcome.keys,
                    outcome.part_bytes.iter().sum::<u64>()
                );
                p.rdb_last_bgsave_failed = false;
                p.rdb_last_bgsave_failure = None;
                self.state.dirty = self.state.dirty.saturating_sub(dirty_at_start);
                self.state.last_save_unix_seconds = crate::clock::unix_seconds();
            }
            Err(error) => {
                tracing::warn!("background saving failed: {error}");
                self.keyspace.cancel_capture();
                p.rdb_last_bgsave_failed = true;
                p.rdb_last_bgsave_failure = Some(Instant::now());
            }
        }
        self.start_scheduled_jobs();
    }

    fn start_scheduled_jobs(&mut self) {
        if self.compaction.is_some() || self.background_save.is_some() {
            return;
        }
        if self.state.persistence.aof_rewrite_scheduled {
            self.start_rewrite();
        } else if self.state.persistence.rdb_bgsave_scheduled
            && self
                .state
                .persistence
                .rdb_last_bgsave_failure
                .is_none_or(|t| t.elapsed() > BGSAVE_RETRY_DELAY)
        {
            self.start_background_save();
        }
    }

    /// Recomputes the log sizes of INFO from the manifest in force: the files other than
    /// the one being appended to do not change size, so this runs only when it changes.
    fn refresh_log_sizes(&mut self) {
        let (Some(paths), Some(manifest)) = (&self.log_paths, &self.manifest) else {
            return;
        };
        let size = |name: &str| self.storage.len(&paths.file(name)).unwrap_or(0);
        let base: u64 = manifest.base().map(|e| size(&e.name)).sum();
        let last = manifest.last_incremental().map(|e| e.name.as_str());
        let closed: u64 = manifest
            .incremental()
            .filter(|e| Some(e.name.as_str()) != last)
            .map(|e| size(&e.name))
            .sum();
        let p = &mut self.state.persistence;
        p.aof_base_size = base;
        p.aof_base_parts = manifest.base().count();
        self.closed_log_bytes = base + closed;
        let current = self.log_writer.as_ref().map_or(0, LogWriter::file_bytes);
        p.aof_current_size = self.closed_log_bytes + current;
    }

    /// Redis's automatic triggers: the log grew by `auto-aof-rewrite-percentage` since the
    /// last compaction (and is past `auto-aof-rewrite-min-size`), or a `save` point is due.
    fn automatic_jobs(&mut self) {
        if self.compaction.is_some() || self.background_save.is_some() {
            return;
        }
        let config = &self.state.config;
        let p = &self.state.persistence;
        let now_seconds = crate::clock::unix_seconds();
        let save_due = config.save_points.iter().any(|&(seconds, changes)| {
            self.state.dirty >= changes
                && now_seconds - self.state.last_save_unix_seconds >= seconds as i64
        }) && p
            .rdb_last_bgsave_failure
            .is_none_or(|t| t.elapsed() >= BGSAVE_RETRY_DELAY);
        if save_due {
            tracing::info!("a save point is due: saving in the background");
            self.start_background_save();
            return;
        }
        if self.log_writer.is_none() || config.auto_aof_rewrite_percentage == 0 {
            return;
        }
        let base = p.aof_rewrite_base_size.max(1);
        let growth = (p.aof_current_size * 100 / base).saturating_sub(100);
        let backed_off = p.aof_last_rewrite_failure.is_some_and(|t| {
            // Redis's back-off: after 3 consecutive failures, wait 1, 2, 4 ... 60 minutes.
            let failures = p.aof_rewrites_consecutive_failures;
            failures >= 3
                && t.elapsed() < Duration::from_secs(60 * (1u64 << (failures - 3).min(6)).min(60))
        });
        if p.aof_current_size > config.auto_aof_rewrite_min_size
            && growth >= config.auto_aof_rewrite_percentage
            && !backed_off
        {
            tracing::info!("starting an automatic append-only log rewrite: {growth}% growth");
            self.start_rewrite();
        }
    }

    /// Periodic work: log health, stats, expiry, idle clients (Redis's serverCron).
    fn cron(&mut self) {
        if self.listeners.take_retry() {
            (0..self.listeners.len()).for_each(|index| self.accept(index));
        }
        let now_ms = crate::clock::unix_ms();
        self.state.stats.sample(now_ms);
        if let Some(writer) = &self.log_writer {
            let error = writer.error();
            if error.is_some() != self.state.log_error.is_some() {
                match &error {
                    Some(e) => tracing::warn!(
                        "refusing writes: the append-only log can't be written ({e})"
                    ),
                    None => tracing::info!("append-only log healthy again"),
                }
            }
            self.state.log_error = error;
            self.state.persistence.aof_current_size = self.closed_log_bytes + writer.file_bytes();
            self.state.persistence.aof_pending_bytes = writer.pending_bytes();
            let durable = release_watermark(writer, self.state.config.appendfsync);
            if !self.held.is_empty() {
                self.release_held(durable, writer.is_failing());
            }
        }
        self.active_expire_cycle(now_ms);
        // Jobs scheduled while nothing was running (BGREWRITEAOF inside EXEC).
        self.start_scheduled_jobs();
        self.automatic_jobs();
        if self.state.config.timeout_seconds > 0 {
            let limit = Duration::from_secs(self.state.config.timeout_seconds);
            let policy = self.state.config.appendfsync;
            let durable = self
                .log_writer
                .as_ref()
                .map_or(0, |w| release_watermark(w, policy));
            // A client waiting for its replies to become durable is not idle.
            let idle: Vec<usize> = self
                .clients
                .iter()
                .filter(|(_, c)| {
                    c.last_interaction.elapsed() > limit
                        && c.hold_seq <= durable
                        && c.blocked.is_none()
                })
                .map(|(t, _)| t)
                .collect();
            for token in idle {
                self.close_client(token);
            }
        }
        // Expiry DELs are log records too.
        self.end_of_turn();
    }

    /// Deletes expired keys slot by slot, within a time budget, logging each as DEL.
    fn active_expire_cycle(&mut self, now_ms: i64) {
        let started = Instant::now();
        for db_index in 0..self.keyspace.dbs.len() {
            if self.keyspace.dbs[db_index].volatile_len() == 0 {
                continue;
            }
            let mut cursor = self.expire_cursor[db_index];
            for _ in 0..SLOT_COUNT {
                if started.elapsed() > EXPIRE_CYCLE_BUDGET {
                    break;
                }
                let db = &mut self.keyspace.dbs[db_index];
                if db.slot_volatile_count(cursor) > 0 {
                    for key in db.expired_in_slot(cursor, now_ms) {
                        db.remove(&key);
                        self.state.stats.expired_keys += 1;
                        self.state.dirty += 1;
                        self.propagation.record(db_index, &[b"DEL", &key]);
                        self.state.watches.touch(db_index, &key, false);
                    }
                }
                cursor = (cursor + 1) % SLOT_COUNT;
                if cursor == self.expire_cursor[db_index] {
                    break;
                }
            }
            self.expire_cursor[db_index] = cursor;
        }
    }

    /// `save`: Some(true) for SHUTDOWN SAVE. (Without save points configured, a plain
    /// SHUTDOWN does not write `dbfilename`, as in Redis.)
    fn shutdown(&mut self, save: Option<bool>) -> Result<(), String> {
        tracing::info!("user requested shutdown...");
        self.end_of_turn();
        // As Redis kills its rewrite or save child and removes its temp file: the job is
        // stopped and waited for, so that its thread removes its files (unlisted parts, a
        // BGSAVE's temp file in `dir`, which no start-up would remove) before the process
        // exits. A writer notices the cancellation after the key or slot in hand.
        if let Some(mut compaction) = self.compaction.take() {
            tracing::info!(
                "there is a background append-only log rewrite in progress: stopping it"
            );
            compaction.job.cancel_and_wait(&mut self.keyspace);
        }
        if let Some((mut job, _)) = self.background_save.take() {
            tracing::info!("there is a background save in progress: stopping it");
            job.cancel_and_wait(&mut self.keyspace);
        }
        if save == Some(true) {
            tracing::info!("saving the final RDB snapshot before exiting");
            let config = &self.state.config;
            crate::snapshot::save(
                &*self.storage,
                &self.keyspace,
                &config.dir,
                &config.dbfilename,
                config.rdbcompression,
            )?;
        }
        if let Some(writer) = &self.log_writer {
            tracing::info!("flushing and syncing the append-only log");
            // On failure the writer stays in place and keeps retrying; the server runs on.
            writer.sync()?;
        }
        if !self.state.config.pidfile.is_empty() {
            let _ = std::fs::remove_file(&self.state.config.pidfile);
        }
        if let Some(paths) = &self.log_paths {
            tracing::info!("append-only log in {} is up to date", paths.dir.display());
        }
        tracing::info!("Tessera is now ready to exit, bye bye...");
        Ok(())
    }
}
