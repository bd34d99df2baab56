//! The link to this instance's master, when it is a replica (REPLICAOF, `replicaof`; the
//! protocol's pieces are `replication::replica`).
//!
//! - **The sync** runs on a thread of its own with a blocking socket, as start-up loading
//!   does, while the loop serves its clients the data it has: connect, the handshake
//!   (PING, AUTH with `masterauth` / `masteruser`, REPLCONF listening-port, ip-address,
//!   capa eof psync2), PSYNC — to continue the history it followed, or `? -1` — then,
//!   for a full sync, the master's snapshot (`$<len>` or diskless `$EOF:<mark>`) written
//!   to a temporary file and loaded into databases of its own (keys already expired
//!   kept: the master deletes them). While it loads, a newline a second keeps the link
//!   alive, as Redis's replica sends.
//! - **The adoption**, on the loop: a loaded snapshot replaces the dataset (a running
//!   compaction, BGSAVE or sub-replica's sync is stopped first, as Redis's replica kills
//!   its children); the snapshot file becomes the log's new base in one manifest
//!   commit at the log writer's switch to a new incremental file (history: the old
//!   files), so the log is the new dataset plus what the master sends next, whatever
//!   crashes when; with the log off it becomes `dbfilename`, as Redis's replica keeps it.
//! - **The stream**: the socket becomes a session (`SessionState::master_link`, CLIENT
//!   LIST flag `M`) whose requests run through the engine as the master's
//!   (`engine::Mode::Master`, no reply); each request's bytes advance the processed
//!   offset (a transaction's with its `EXEC`) and go on as they came to this replica's
//!   backlog and replicas (chains); `REPLCONF GETACK` is answered with `REPLCONF ACK <offset>` after it, and the
//!   replication cron acknowledges once a second and drops a master silent for
//!   `repl-timeout`. When the link closes, the history, offset and stream database stay
//!   (Redis's cached master), and the next cron connects again and asks to continue.
//! - **This replica's replicas** follow the same history: dropped (to resync) when a full
//!   sync replaces it or a `+CONTINUE` renames it, and when REPLICAOF NO ONE renames it.

use super::Server;
use super::session::Client;
use crate::commands::SessionState;
use crate::config::DisklessLoad;
use crate::keyspace::Keyspace;
use crate::log::manifest::{FileKind, Manifest, ManifestEntry};
use crate::log::writer::{Rotation, RotationWaiter};
use crate::replication::failover::FailoverState;
use crate::replication::replica::{self, END_MARK_BYTES, LinkState, Preamble, PsyncAnswer};
use crate::storage::Storage;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The longest line the handshake reads from the master (its replies are short).
const LINE_BYTES_MAX: usize = 64 * 1024;
/// Bytes read from the master's socket per read while the snapshot arrives.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Syncs started by this process, naming their temporary files.
static SYNCS: AtomicU64 = AtomicU64::new(0);

/// What the sync thread tells the loop while it runs (INFO's `master_sync_*`).
#[derive(Default)]
pub(super) struct SyncProgress {
    /// 0: handshake, 1: transfer (`LinkState`).
    state: AtomicU8,
    /// The snapshot's size, or u64::MAX when the framing does not say it.
    size: AtomicU64,
    read: AtomicU64,
    last_io: AtomicI64,
    /// PSYNC was sent (a FAILOVER's handshake that fails after it is aborted, not retried).
    psync_sent: AtomicBool,
    /// What clients see now (`LoadView` as a number).
    view: AtomicU8,
    /// A handle on the sync's socket, to close it when the sync is abandoned (as Redis's
    /// `cancelReplicationHandshake`: the master sees the replica go at once).
    socket: std::sync::Mutex<Option<TcpStream>>,
}

/// What a replica's clients see while a full sync runs (`repl-diskless-load`, Redis's
/// loading and async loading). The old dataset stays in memory until the new one is
/// whole either way, so a failed sync leaves it as it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoadView {
    /// The old dataset, served as before.
    Served = 0,
    /// -LOADING (INFO `loading:1`): the new dataset is of another history, or its load
    /// has begun.
    Loading = 1,
    /// The old dataset, served, but for commands Redis refuses during async loading
    /// (INFO `async_loading:1`): the new one continues the same history.
    AsyncLoading = 2,
}

impl LoadView {
    fn of(value: u8) -> LoadView {
        match value {
            1 => LoadView::Loading,
            2 => LoadView::AsyncLoading,
            _ => LoadView::Served,
        }
    }
}

/// When clients stop being served plainly, by `repl-diskless-load` (resolved when the sync
/// starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoadFrom {
    /// `disabled` (and `on-empty-db` with keys): once the received file starts loading.
    Load,
    /// `swapdb` (and `on-empty-db` without keys): from the transfer on, as Redis loads
    /// from the socket; with `swapdb`, asynchronously when the history is the same.
    Transfer { async_if_same_history: bool },
}

/// Shows clients a full sync's `view` (INFO `loading` / `async_loading`; the engine
/// answers -LOADING by them). The start-up load (`starting_up`) holds back syncs, and its
/// own -LOADING is never lifted here.
fn show_sync_load(
    persistence: &mut crate::commands::PersistenceInfo,
    starting_up: bool,
    view: LoadView,
) {
    persistence.async_loading = view == LoadView::AsyncLoading;
    match (view == LoadView::Loading, persistence.loading.is_some()) {
        (true, false) => {
            persistence.loading = Some(crate::commands::LoadingStatus {
                start_unix_seconds: crate::clock::unix_seconds(),
                started: Instant::now(),
                progress: Arc::default(),
            });
        }
        (false, true) if !starting_up => persistence.loading = None,
        _ => {}
    }
}

/// A sync in progress: its thread, and whether REPLICAOF made it moot.
pub(super) struct MasterSync {
    thread: std::thread::JoinHandle<Result<Synced, SyncError>>,
    progress: Arc<SyncProgress>,
    /// Set when the link it serves was replaced (REPLICAOF): its outcome is dropped.
    abandoned: Arc<AtomicBool>,
    /// The snapshot's temporary file, removed if the outcome is dropped.
    temp_path: PathBuf,
}

/// What a sync ends with.
enum Synced {
    /// PSYNC continued the history (with its new ID, if the master was promoted).
    Continued {
        stream: TcpStream,
        replid: Option<String>,
        leftover: Vec<u8>,
    },
    /// A full sync: the snapshot, loaded, taken at `offset` of history `replid`.
    Full {
        stream: TcpStream,
        replid: String,
        offset: i64,
        keyspace: Keyspace,
        functions: Vec<bytes::Bytes>,
        keys: u64,
        /// The database the stream continues in (`repl-stream-db`).
        stream_db: Option<usize>,
        leftover: Vec<u8>,
    },
}

/// Why a sync did not end with a stream.
#[derive(Debug, thiserror::Error)]
enum SyncError {
    #[error("can't connect to the master: {0}")]
    Connect(String),
    #[error("I/O error with the master: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Protocol(String),
    #[error("the master can't PSYNC now, will try later: {0}")]
    TryLater(String),
    #[error("can't load the master's snapshot: {0}")]
    Load(#[from] crate::snapshot::SnapshotError),
    /// Nothing came for `repl-timeout` (Redis's words, which operators' alerts and its
    /// tests match).
    #[error("Timeout connecting to the MASTER...")]
    HandshakeTimeout,
    #[error(
        "Timeout receiving bulk data from MASTER... If the problem persists try to set the 'repl-timeout' parameter in redis.conf to a larger value."
    )]
    TransferTimeout,
}

/// What the sync thread needs, copied out of the configuration.
struct SyncParams {
    host: String,
    port: u16,
    /// `masteruser` (if any) and `masterauth`.
    auth: Option<(Option<String>, String)>,
    listening_port: u16,
    announce_ip: Option<String>,
    history: Option<(String, i64)>,
    storage: Arc<dyn Storage>,
    temp_path: PathBuf,
    databases: usize,
    timeout: Duration,
    /// A FAILOVER made this instance the replica of its target: PSYNC says `FAILOVER`, and
    /// the target promotes itself before it answers.
    failover: bool,
    load_from: LoadFrom,
}

/// The master's socket, read a line or a number of bytes at a time, with what was read
/// beyond kept for the stream.
struct Link {
    stream: TcpStream,
    buffer: Vec<u8>,
    progress: Arc<SyncProgress>,
}

impl Link {
    fn fill(&mut self) -> Result<usize, SyncError> {
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        let n = match self.stream.read(&mut chunk) {
            Ok(n) => n,
            // The read timeout is `repl-timeout`.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(if self.progress.state.load(Ordering::Relaxed) == 1 {
                    SyncError::TransferTimeout
                } else {
                    SyncError::HandshakeTimeout
                });
            }
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            return Err(SyncError::Protocol(
                "the master closed the connection".into(),
            ));
        }
        self.buffer.extend_from_slice(&chunk[..n]);
        self.progress
            .last_io
            .store(crate::clock::unix_seconds(), Ordering::Relaxed);
        Ok(n)
    }

    /// The next line, without its CRLF.
    fn line(&mut self) -> Result<Vec<u8>, SyncError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.buffer.len() > LINE_BYTES_MAX {
                return Err(SyncError::Protocol(
                    "the master sent a line too long".into(),
                ));
            }
            self.fill()?;
        }
    }

    /// The next line that is not empty (the master sends newlines to keep the link alive
    /// while it prepares the snapshot).
    fn reply(&mut self) -> Result<String, SyncError> {
        loop {
            let line = self.line()?;
            if !line.is_empty() {
                return Ok(String::from_utf8_lossy(&line).into_owned());
            }
        }
    }

    fn send(&mut self, args: &[&[u8]]) -> Result<(), SyncError> {
        let mut command = Vec::new();
        crate::resp::encode_command(&mut command, args);
        self.stream.write_all(&command)?;
        Ok(())
    }

    /// Sends a command of the handshake and reads its one-line reply.
    fn ask(&mut self, args: &[&[u8]]) -> Result<String, SyncError> {
        self.send(args)?;
        self.reply()
    }
}

/// The sync, on its thread (Redis's `syncWithMaster` and `readSyncBulkPayload`).
fn sync_with_master(params: SyncParams, progress: Arc<SyncProgress>) -> Result<Synced, SyncError> {
    let address = (params.host.as_str(), params.port)
        .to_socket_addrs()
        .map_err(|e| SyncError::Connect(e.to_string()))?
        .next()
        .ok_or_else(|| SyncError::Connect("no address".into()))?;
    let stream = TcpStream::connect_timeout(&address, params.timeout)
        .map_err(|e| SyncError::Connect(e.to_string()))?;
    *progress.socket.lock().unwrap_or_else(|e| e.into_inner()) = stream.try_clone().ok();
    stream.set_read_timeout(Some(params.timeout))?;
    stream.set_nodelay(true)?;
    tracing::info!("Non blocking connect for SYNC fired the event.");
    let mut link = Link {
        stream,
        buffer: Vec::new(),
        progress: progress.clone(),
    };
    let pong = link.ask(&[b"PING"])?;
    if !replica::ping_answer_ok(&pong) {
        return Err(SyncError::Protocol(format!(
            "Error reply to PING from master: '{pong}'"
        )));
    }
    tracing::info!("Master replied to PING, replication can continue...");
    if let Some((user, password)) = &params.auth {
        let mut args: Vec<&[u8]> = vec![b"AUTH"];
        if let Some(user) = user {
            args.push(user.as_bytes());
        }
        args.push(password.as_bytes());
        let reply = link.ask(&args)?;
        if reply.starts_with('-') {
            return Err(SyncError::Protocol(format!(
                "Unable to AUTH to MASTER: {reply}"
            )));
        }
    }
    let port = params.listening_port.to_string();
    let reply = link.ask(&[b"REPLCONF", b"listening-port", port.as_bytes()])?;
    if reply.starts_with('-') {
        tracing::info!(
            "(Non critical) Master does not understand REPLCONF listening-port: {reply}"
        );
    }
    if let Some(ip) = &params.announce_ip {
        let reply = link.ask(&[b"REPLCONF", b"ip-address", ip.as_bytes()])?;
        if reply.starts_with('-') {
            tracing::info!(
                "(Non critical) Master does not understand REPLCONF ip-address: {reply}"
            );
        }
    }
    let reply = link.ask(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
    if reply.starts_with('-') {
        tracing::info!("(Non critical) Master does not understand REPLCONF capa: {reply}");
    }
    let (replid, offset) = replica::psync_arguments(params.history.as_ref());
    if params.history.is_some() {
        tracing::info!("Trying a partial resynchronization (request {replid}:{offset}).");
    } else {
        tracing::info!("Partial resynchronization not possible (no cached master)");
    }
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), offset.as_bytes()];
    if params.failover {
        psync.push(b"FAILOVER");
    }
    progress.psync_sent.store(true, Ordering::Relaxed);
    let answer = link.ask(&psync)?;
    match replica::parse_psync_answer(&answer) {
        PsyncAnswer::Continue { replid } => {
            tracing::info!("Successful partial resynchronization with master.");
            Ok(Synced::Continued {
                leftover: std::mem::take(&mut link.buffer),
                stream: link.stream,
                replid,
            })
        }
        PsyncAnswer::TryLater(reply) => Err(SyncError::TryLater(reply)),
        PsyncAnswer::Refused(reply) => Err(SyncError::Protocol(format!(
            "Unexpected reply to PSYNC from master: {reply}"
        ))),
        PsyncAnswer::FullResync { replid, offset } => {
            tracing::info!("Full resync from master: {replid}:{offset}");
            progress.state.store(1, Ordering::Relaxed);
            if let LoadFrom::Transfer {
                async_if_same_history,
            } = params.load_from
            {
                let same = params.history.as_ref().is_some_and(|(id, _)| *id == replid);
                let view = if async_if_same_history && same {
                    LoadView::AsyncLoading
                } else {
                    LoadView::Loading
                };
                progress.view.store(view as u8, Ordering::Relaxed);
            }
            receive_snapshot(&mut link, &params)?;
            tracing::info!("MASTER <-> REPLICA sync: Loading DB in memory");
            if params.load_from == LoadFrom::Load {
                progress
                    .view
                    .store(LoadView::Loading as u8, Ordering::Relaxed);
            }
            let read = load_keeping_link_alive(&link.stream, &params)?;
            let mut keyspace = Keyspace::new(params.databases);
            for (target, db) in keyspace.dbs.iter_mut().zip(read.dbs) {
                target.absorb(db);
            }
            Ok(Synced::Full {
                leftover: std::mem::take(&mut link.buffer),
                stream: link.stream,
                replid,
                offset,
                keyspace,
                functions: read.functions,
                keys: read.keys,
                stream_db: read.stream_db,
            })
        }
    }
}

/// The snapshot, from its preamble to its end, into the temporary file.
fn receive_snapshot(link: &mut Link, params: &SyncParams) -> Result<(), SyncError> {
    let preamble =
        replica::parse_preamble(&link.line_skipping_newlines()?).map_err(SyncError::Protocol)?;
    let mut file = params.storage.create(&params.temp_path)?;
    let mut written = 0u64;
    match preamble {
        Preamble::Length(size) => {
            link.progress.size.store(size, Ordering::Relaxed);
            tracing::info!("MASTER <-> REPLICA sync: receiving {size} bytes from master to disk");
            while written < size {
                if link.buffer.is_empty() {
                    link.fill()?;
                }
                let take = link.buffer.len().min((size - written) as usize);
                file.append(&link.buffer[..take])?;
                link.buffer.drain(..take);
                written += take as u64;
                link.progress.read.store(written, Ordering::Relaxed);
            }
        }
        Preamble::EndMark(mark) => {
            link.progress.size.store(u64::MAX, Ordering::Relaxed);
            tracing::info!(
                "MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF to disk"
            );
            // The master sends nothing after the mark until this replica acknowledges,
            // so the mark ends what has been received.
            let mut tail: Vec<u8> = Vec::with_capacity(2 * END_MARK_BYTES);
            loop {
                if link.buffer.is_empty() {
                    link.fill()?;
                }
                let chunk = std::mem::take(&mut link.buffer);
                // Hold back the last bytes: they may be the mark.
                tail.extend_from_slice(&chunk);
                if tail.len() > END_MARK_BYTES {
                    let out = tail.len() - END_MARK_BYTES;
                    file.append(&tail[..out])?;
                    written += out as u64;
                    tail.drain(..out);
                }
                link.progress.read.store(written, Ordering::Relaxed);
                if tail == mark {
                    break;
                }
            }
        }
    }
    file.sync_data()?;
    Ok(())
}

impl Link {
    fn line_skipping_newlines(&mut self) -> Result<Vec<u8>, SyncError> {
        loop {
            let line = self.line()?;
            if !line.is_empty() {
                return Ok(line);
            }
        }
    }
}

/// Loads the snapshot file while a newline a second tells the master this replica lives
/// (Redis's `replicationSendNewlineToMaster`: a loading replica acknowledges nothing).
fn load_keeping_link_alive(
    stream: &TcpStream,
    params: &SyncParams,
) -> Result<crate::snapshot::ReadFile, SyncError> {
    let done = AtomicBool::new(false);
    let mut keepalive = stream.try_clone()?;
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut last = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                if last.elapsed() >= Duration::from_secs(1) {
                    let _ = keepalive.write_all(b"\n");
                    last = Instant::now();
                }
            }
        });
        let read = crate::snapshot::read_into_dbs(
            &*params.storage,
            &params.temp_path,
            params.databases,
            0,
            crate::snapshot::ExpiredKeys::Keep,
        );
        done.store(true, Ordering::Relaxed);
        read.map_err(SyncError::from)
    })
}

/// Where a replica's log is in persisting the master's snapshot it adopted; its FACK
/// (`replication::fsynced`) is paused until the log holds that dataset.
#[derive(Default)]
pub(super) enum MasterBase {
    /// Nothing pending: the log holds the dataset (or there is no log).
    #[default]
    Persisted,
    /// The snapshot file is the base of `manifest`, committed at the log writer's switch.
    Switching {
        waiter: RotationWaiter,
        manifest: Manifest,
    },
    /// The switch could not be made: the next compaction to succeed persists the
    /// dataset instead.
    AwaitingCompaction,
}

impl Server {
    /// REPLICAOF (or `replicaof` at start-up) changed the master, or made this a master:
    /// the old link goes, blocked clients are told (Redis's
    /// `disconnectAllBlockedClients`), and a new link connects now. This instance's
    /// replicas stay while it changes masters (Redis 7.0): they are dropped only when
    /// the history they follow changes — a full sync with the new master, or its new ID
    /// on `+CONTINUE`. A promoted replica drops them so that they learn its new ID; they
    /// continue at once (`+CONTINUE`), as its former siblings can.
    pub(super) fn master_changed(&mut self) {
        // The turn's records made in the old role go where they belong first.
        self.take_effects();
        self.drop_master_link();
        if self.engine.state.replication.is_replica() {
            self.unblock_all_for_role_change();
            self.start_master_sync();
        } else {
            // Redis's `replicationUnsetMaster`.
            let attached = std::mem::take(&mut self.engine.state.replication.replicas_at_promotion);
            self.close_replicas(attached);
            let replication = &mut self.engine.state.replication;
            replication.no_replicas_since = crate::clock::unix_seconds();
            if replication.stream_active() {
                // Its own stream starts here, in a database its replicas are told of.
                self.engine.effects.enabled = true;
                self.engine.effects.selected_db = None;
            }
        }
    }

    /// Closes the master's session and abandons a sync in progress.
    fn drop_master_link(&mut self) {
        if let Some(sync) = self.master_sync.take() {
            sync.abandoned.store(true, Ordering::Release);
            // Its socket is closed, so its thread ends at its next read (or it finishes);
            // its outcome is dropped, its file removed.
            let socket = sync
                .progress
                .socket
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(socket) = socket {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
            self.abandoned_syncs.push(sync);
            self.show_sync_load(LoadView::Served);
        }
        self.close_master_session();
    }

    /// At shutdown: a sync in progress is left to its thread, its file removed (the
    /// thread writes on to a file no name leads to).
    pub(super) fn abandon_master_sync(&mut self) {
        if self.master_sync.is_some()
            && let Some(link) = &mut self.engine.state.replication.master
            && matches!(link.state, LinkState::Handshake | LinkState::Transfer)
        {
            // A shutdown that fails serves on: the cron connects again.
            link.state = LinkState::Connect;
        }
        for sync in self
            .master_sync
            .take()
            .into_iter()
            .chain(self.abandoned_syncs.drain(..))
        {
            sync.abandoned.store(true, Ordering::Release);
            let _ = self.storage.remove_file(&sync.temp_path);
        }
    }

    fn close_master_session(&mut self) {
        let tokens: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| c.state.master_link)
            .map(|(token, _)| token)
            .collect();
        for token in tokens {
            self.close_client(token);
        }
    }

    /// Clients blocked (on keys, or WAIT) when the role changes get Redis's error.
    fn unblock_all_for_role_change(&mut self) {
        let blocked: Vec<usize> = self
            .clients
            .iter()
            .filter(|(_, c)| c.conn.blocked.is_some())
            .map(|(token, _)| token)
            .collect();
        for token in blocked {
            let Some(mut client) = self.clients.take(token) else {
                continue;
            };
            crate::resp::ReplyWriter::new(&mut client.output, client.state.resp3).error(
                "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
            );
            self.unblock(token, &mut client);
            client.conn.close_after_reply = true;
            self.clients.put_back(token, client);
        }
    }

    fn show_sync_load(&mut self, view: LoadView) {
        show_sync_load(
            &mut self.engine.state.persistence,
            self.loading.is_some(),
            view,
        );
    }

    /// Starts the sync thread for the link to connect.
    pub(super) fn start_master_sync(&mut self) {
        if self.master_sync.is_some() || self.loading.is_some() {
            return;
        }
        let state = &mut self.engine.state;
        let Some(link) = &mut state.replication.master else {
            return;
        };
        if link.state != LinkState::Connect {
            return;
        }
        let config = &state.config;
        let password = config.directive_value("masterauth");
        let user = config.directive_value("masteruser");
        let announce_port = config
            .directive_value("replica-announce-port")
            .parse::<u16>()
            .unwrap_or(0);
        let announce_ip = config.directive_value("replica-announce-ip");
        let temp_name = format!(
            "temp-repl-{}-{}.rdb",
            std::process::id(),
            SYNCS.fetch_add(1, Ordering::Relaxed)
        );
        let temp_path = match &self.log_paths {
            Some(paths) => paths.file(&temp_name),
            None => config.dir.join(&temp_name),
        };
        let params = SyncParams {
            host: link.host.clone(),
            port: link.port,
            auth: (!password.is_empty()).then(|| ((!user.is_empty()).then_some(user), password)),
            listening_port: if announce_port != 0 {
                announce_port
            } else {
                state.tcp_port
            },
            announce_ip: (!announce_ip.is_empty()).then_some(announce_ip),
            history: link.history.clone(),
            storage: self.storage.clone(),
            temp_path: temp_path.clone(),
            databases: config.databases,
            timeout: Duration::from_secs(config.replication.timeout_seconds.max(1)),
            failover: state.replication.failover.state == FailoverState::InProgress,
            load_from: match config.replication.diskless_load {
                DisklessLoad::Swapdb => LoadFrom::Transfer {
                    async_if_same_history: true,
                },
                DisklessLoad::OnEmptyDb if self.engine.keyspace.total_keys() == 0 => {
                    LoadFrom::Transfer {
                        async_if_same_history: false,
                    }
                }
                DisklessLoad::Disabled | DisklessLoad::OnEmptyDb => LoadFrom::Load,
            },
        };
        tracing::info!("Connecting to MASTER {}:{}", link.host, link.port);
        tracing::info!("MASTER <-> REPLICA sync started");
        link.state = LinkState::Handshake;
        link.transfer_size = None;
        link.transfer_read = 0;
        let progress = Arc::new(SyncProgress::default());
        let waker = self.waker.clone();
        let thread_progress = progress.clone();
        let spawned = std::thread::Builder::new()
            .name("master-sync".into())
            .spawn(move || {
                let synced = sync_with_master(params, thread_progress);
                let _ = waker.wake();
                synced
            });
        match spawned {
            Ok(thread) => {
                self.master_sync = Some(MasterSync {
                    thread,
                    progress,
                    abandoned: Arc::new(AtomicBool::new(false)),
                    temp_path,
                });
            }
            Err(error) => {
                tracing::warn!("can't start the sync with the master: {error}");
                link.state = LinkState::Connect;
            }
        }
    }

    /// Each loop turn: a finished sync is adopted; abandoned ones are reaped; the
    /// progress of one running is copied for INFO.
    pub(super) fn master_sync_work(&mut self) {
        let (finished, running): (Vec<MasterSync>, Vec<MasterSync>) =
            std::mem::take(&mut self.abandoned_syncs)
                .into_iter()
                .partition(|sync| sync.thread.is_finished());
        self.abandoned_syncs = running;
        for sync in finished {
            // Whatever it got is dropped with it (its socket closes), and its file.
            let _ = sync.thread.join();
            let _ = self.storage.remove_file(&sync.temp_path);
        }
        if let MasterBase::Switching { waiter, .. } = &self.master_base
            && let Some(result) = waiter.peek()
        {
            let MasterBase::Switching { manifest, .. } = std::mem::take(&mut self.master_base)
            else {
                unreachable!("checked");
            };
            match result {
                Ok(()) => {
                    tracing::info!("the master's snapshot is the log's new base");
                    self.manifest = Some(manifest);
                    self.refresh_log_sizes();
                    self.master_base_persisted();
                }
                Err(error) => {
                    tracing::warn!(
                        "the log could not switch to the master's snapshot as its base: {error}; a compaction persists it instead"
                    );
                    self.master_base = MasterBase::AwaitingCompaction;
                    self.start_job(crate::engine::Job::Rewrite);
                }
            }
        }
        let Some(sync) = &self.master_sync else {
            return;
        };
        let view = LoadView::of(sync.progress.view.load(Ordering::Relaxed));
        show_sync_load(
            &mut self.engine.state.persistence,
            self.loading.is_some(),
            view,
        );
        if let Some(link) = &mut self.engine.state.replication.master {
            let progress = &sync.progress;
            if progress.state.load(Ordering::Relaxed) == 1 {
                link.state = LinkState::Transfer;
            }
            let size = progress.size.load(Ordering::Relaxed);
            link.transfer_size = (size != 0 && size != u64::MAX).then_some(size);
            link.transfer_read = progress.read.load(Ordering::Relaxed);
            let last_io = progress.last_io.load(Ordering::Relaxed);
            if last_io != 0 {
                link.last_io = last_io;
            }
        }
        if !sync.thread.is_finished() {
            return;
        }
        let sync = self.master_sync.take().expect("checked");
        // Whatever the outcome, clients are served again: the new dataset, or the old one.
        self.show_sync_load(LoadView::Served);
        let outcome = sync.thread.join();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(_) => Err(SyncError::Protocol("the sync thread panicked".into())),
        };
        if sync.abandoned.load(Ordering::Acquire) {
            let _ = self.storage.remove_file(&sync.temp_path);
            return;
        }
        // A FAILOVER's handshake ends with the PSYNC's answer (a transfer follows only
        // `+FULLRESYNC`).
        let psync_answered = outcome.is_ok() || sync.progress.state.load(Ordering::Relaxed) == 1;
        self.failover_handshake_ended(
            psync_answered,
            sync.progress.psync_sent.load(Ordering::Relaxed),
        );
        match outcome {
            Err(error) => {
                match &error {
                    SyncError::TryLater(_) => tracing::info!("{error}"),
                    SyncError::HandshakeTimeout | SyncError::TransferTimeout => {
                        tracing::warn!("{error}")
                    }
                    _ => tracing::warn!("MASTER <-> REPLICA sync failed: {error}"),
                }
                let _ = self.storage.remove_file(&sync.temp_path);
                if let Some(link) = &mut self.engine.state.replication.master {
                    link.state = LinkState::Connect;
                }
            }
            Ok(Synced::Continued {
                stream,
                replid,
                leftover,
            }) => {
                tracing::info!(
                    "MASTER <-> REPLICA sync: Master accepted a Partial Resynchronization."
                );
                let backlog_bytes = self.engine.state.config.replication.backlog_bytes;
                let replication = &mut self.engine.state.replication;
                let mut new_id = false;
                if let Some(link) = &replication.master
                    && let Some((old, offset)) = &link.history
                {
                    // The history goes on: the offsets are the master's, and so is the
                    // backlog (one this instance had as a master, or kept as a replica,
                    // if it ends where the history does).
                    let offset = (*offset).max(0) as u64;
                    let ends_here = replication.offset == offset
                        && replication
                            .backlog
                            .as_ref()
                            .is_some_and(|b| b.covers(offset + 1));
                    if !ends_here {
                        replication.backlog = None;
                    }
                    replication.offset = offset;
                    replication.ids.replid = old.clone();
                    replication.ensure_backlog(backlog_bytes);
                }
                if let (Some(new), Some(link)) = (replid, &mut replication.master)
                    && let Some((old, offset)) = &mut link.history
                    && *old != new
                {
                    tracing::warn!("Master replication ID changed to {new}");
                    replication.ids.replid2 = std::mem::replace(old, new.clone());
                    replication.ids.second_offset = *offset + 1;
                    replication.ids.replid = new;
                    new_id = true;
                }
                if new_id {
                    // Redis: the replicas must learn the new ID (they continue with it).
                    self.disconnect_replicas();
                }
                self.attach_master(stream, leftover, false);
            }
            Ok(Synced::Full {
                stream,
                replid,
                offset,
                keyspace,
                functions,
                keys,
                stream_db,
                leftover,
            }) => {
                // Redis's `replicationAttachToNewMaster`: a new history, which this
                // instance's replicas cannot continue — they resync.
                self.disconnect_replicas();
                self.adopt_master_snapshot(keyspace, &functions, &sync.temp_path);
                tracing::info!(
                    "MASTER <-> REPLICA sync: Finished with success ({keys} keys loaded)"
                );
                let backlog_bytes = self.engine.state.config.replication.backlog_bytes;
                let databases = self.engine.state.config.databases;
                let replication = &mut self.engine.state.replication;
                replication.follow(replid.clone(), offset, backlog_bytes);
                if let Some(link) = &mut replication.master {
                    link.history = Some((replid, offset));
                    link.stream_db = stream_db.filter(|&db| db < databases).unwrap_or(0);
                }
                self.attach_master(stream, leftover, true);
            }
        }
    }

    /// A full sync's dataset replaces this one, and its file becomes what persists it.
    fn adopt_master_snapshot(
        &mut self,
        keyspace: Keyspace,
        functions: &[bytes::Bytes],
        file: &std::path::Path,
    ) {
        // The files must not change under a job, nor the dataset under a capture; what
        // the jobs would write is being replaced.
        self.cancel_jobs_for_new_dataset();
        self.take_effects();
        // The master's history is fsynced here once its snapshot is the log's committed
        // base (`master_sync_work`): FACK 0 until then, as Redis 7.2's replica sends.
        if let Some(fsynced) = &mut self.engine.state.replication.fsynced {
            fsynced.restart();
        }
        self.master_base = MasterBase::Persisted;
        let limits = self.engine.state.config.output_buffer_limits;
        let mut host =
            super::session::SessionsView::new(&mut self.clients, None, &mut self.touched, limits);
        let nobody = SessionState::default();
        if let Err(error) = self.engine.adopt_dataset(
            &nobody,
            keyspace,
            functions,
            crate::engine::Adopt::Replace,
            &mut host,
        ) {
            tracing::warn!("the master's function libraries could not all be loaded: {error}");
        }
        self.engine.state.dirty = 0;
        let (Some(writer), Some(paths), Some(manifest)) =
            (&mut self.log_writer, &self.log_paths, &self.manifest)
        else {
            // No log: the snapshot is `dbfilename`, as Redis's replica keeps it.
            let config = &self.engine.state.config;
            if let Err(error) =
                crate::snapshot::install_file(&*self.storage, file, &config.dir, &config.dbfilename)
            {
                tracing::warn!(
                    "can't keep the master's snapshot as {}: {error}",
                    config.dbfilename
                );
                let _ = self.storage.remove_file(file);
            }
            return;
        };
        // The log: the snapshot becomes its base, and what the master sends next goes to
        // a new incremental file — one manifest, committed at the switch.
        let base_seq = manifest.base().map(|e| e.seq).max().unwrap_or(0) + 1;
        let incr_seq = manifest.last_incremental().map_or(1, |e| e.seq + 1);
        let base = ManifestEntry {
            name: paths.base_part_name(base_seq, 1, 1),
            seq: base_seq,
            kind: FileKind::Base,
        };
        let incr = ManifestEntry {
            name: paths.incremental_name(incr_seq),
            seq: incr_seq,
            kind: FileKind::Incremental,
        };
        let installed = self
            .storage
            .rename(file, &paths.file(&base.name))
            .and_then(|()| self.storage.sync_dir(&paths.dir));
        if let Err(error) = installed {
            // The log stays as it was: the new dataset is persisted by the compaction
            // started below instead.
            tracing::warn!("can't make the master's snapshot the log's base: {error}");
            let _ = self.storage.remove_file(file);
            self.master_base = MasterBase::AwaitingCompaction;
            self.start_job(crate::engine::Job::Rewrite);
            return;
        }
        let mut next = Manifest {
            entries: vec![base],
        };
        next.entries
            .extend(manifest.entries.iter().map(|e| ManifestEntry {
                kind: FileKind::History,
                ..e.clone()
            }));
        next.entries.push(incr.clone());
        let waiter = writer.prepare_rotation();
        writer.request_rotation(Rotation {
            paths: paths.clone(),
            file_name: incr.name.clone(),
            manifest: next.clone(),
        });
        self.master_base = MasterBase::Switching {
            waiter,
            manifest: next,
        };
        // The new file starts empty: its first record needs its SELECT.
        self.engine.effects.selected_db = None;
    }

    /// The log holds the dataset of the master's snapshot last adopted: the FACK
    /// positions noted since count again.
    pub(super) fn master_base_persisted(&mut self) {
        self.master_base = MasterBase::Persisted;
        if let Some(fsynced) = &mut self.engine.state.replication.fsynced {
            fsynced.resume();
        }
    }

    /// The master's socket becomes a session applying its stream. `acknowledge`: send the
    /// first ACK at once (after a full sync: a diskless master starts its stream on it).
    fn attach_master(&mut self, stream: TcpStream, leftover: Vec<u8>, acknowledge: bool) {
        let prepared = stream
            .set_nonblocking(true)
            .and_then(|()| stream.set_read_timeout(None))
            .and_then(|()| stream.peer_addr());
        let peer = match prepared {
            Ok(peer) => peer,
            Err(error) => {
                tracing::warn!("the master's link failed: {error}");
                if let Some(link) = &mut self.engine.state.replication.master {
                    link.state = LinkState::Connect;
                }
                return;
            }
        };
        let local = stream.local_addr().unwrap_or(peer);
        let stream = crate::net::Stream::Tcp(mio::net::TcpStream::from_std(stream));
        let (peer, local) = (crate::net::Peer::Tcp(peer), crate::net::Peer::Tcp(local));
        let id = self.next_client_id;
        self.next_client_id += 1;
        let db = self
            .engine
            .state
            .replication
            .master
            .as_ref()
            .map_or(0, |link| link.stream_db);
        let state = SessionState {
            id,
            db,
            authenticated: true,
            master_link: true,
            local: peer.is_local(),
            last_command: "NULL",
            ..SessionState::default()
        };
        let connected = crate::net::Connected {
            stream,
            peer,
            local,
        };
        let token = self.clients.insert(Client::new(connected, state));
        let client = self.clients.get_mut(&token).expect("just inserted");
        if let Err(error) = self.poll.registry().register(
            &mut client.conn.stream,
            mio::Token(token),
            mio::Interest::READABLE | mio::Interest::WRITABLE,
        ) {
            tracing::warn!("can't register the master's link: {error}");
            self.clients.remove(&token);
            if let Some(link) = &mut self.engine.state.replication.master {
                link.state = LinkState::Connect;
            }
            return;
        }
        client.conn.input = leftover;
        let replication = &mut self.engine.state.replication;
        let Some(link) = &mut replication.master else {
            return;
        };
        link.state = LinkState::Connected;
        link.down_since = None;
        link.last_io = crate::clock::unix_seconds();
        if acknowledge {
            let fsynced = replication.fsynced.as_ref().map(|f| f.master_offset());
            let Some(link) = &mut replication.master else {
                return;
            };
            client
                .output
                .extend_from_slice(&link.acknowledgement(fsynced, false));
        }
        self.touched.push(token);
        self.engine.state.connected_clients = self.clients.len();
        // The stream may have come with the snapshot's last bytes.
        self.process_input(token);
    }

    /// An acknowledgement to the master now (its FACK moved since one it asked for).
    pub(super) fn send_ack_to_master(&mut self) {
        let master = self
            .clients
            .iter()
            .find(|(_, c)| c.state.master_link)
            .map(|(token, _)| token);
        let replication = &mut self.engine.state.replication;
        let fsynced = replication.fsynced.as_ref().map(|f| f.master_offset());
        let (Some(token), Some(link)) = (master, &mut replication.master) else {
            return;
        };
        if link.state != LinkState::Connected {
            return;
        }
        let ack = link.acknowledgement(fsynced, false);
        if let Some(client) = self.clients.get_mut(&token) {
            client.output.extend_from_slice(&ack);
            self.touched.push(token);
        }
    }

    /// The master's session closed (its stream was in database `db`): keep the history,
    /// the offset and the database to continue (Redis's cached master; a transaction cut
    /// short is dropped, its bytes not processed) and connect again from the next cron.
    pub(super) fn master_link_lost(&mut self, db: usize) {
        if let Some(link) = &mut self.engine.state.replication.master
            && link.state == LinkState::Connected
        {
            link.stream_db = db;
            link.transaction.clear();
            tracing::warn!("Connection with master lost.");
            tracing::info!("Caching the disconnected master state.");
            link.state = LinkState::Connect;
            link.down_since = Some(crate::clock::unix_seconds());
        }
    }

    /// The replica's part of the replication cron: connect, acknowledge, time out.
    pub(super) fn master_link_cron(&mut self) {
        let timeout = self.engine.state.config.replication.timeout_seconds as i64;
        let now = crate::clock::unix_seconds();
        let Some(link) = &self.engine.state.replication.master else {
            return;
        };
        match link.state {
            LinkState::Connect => self.start_master_sync(),
            LinkState::Connected => {
                let master = self
                    .clients
                    .iter()
                    .find(|(_, c)| c.state.master_link)
                    .map(|(token, _)| token);
                let Some(token) = master else {
                    return;
                };
                let client = self.clients.get_mut(&token).expect("found above");
                let silent = client.conn.last_interaction.elapsed().as_secs() as i64;
                if silent > timeout {
                    tracing::warn!("MASTER timeout: no data nor PING received...");
                    self.close_client(token);
                    return;
                }
                let replication = &mut self.engine.state.replication;
                let fsynced = replication.fsynced.as_ref().map(|f| f.master_offset());
                if let Some(link) = &mut replication.master {
                    client
                        .output
                        .extend_from_slice(&link.acknowledgement(fsynced, false));
                    link.last_io = now - silent;
                }
                self.touched.push(token);
            }
            LinkState::Handshake | LinkState::Transfer => {}
        }
    }
}
