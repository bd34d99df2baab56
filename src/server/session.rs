//! A client connection: its socket, input buffer and parse progress, its output and the
//! rule that holds replies back until the log has what they acknowledge.
//!
//! A session reads its socket, cuts requests out of its input (`resp::parse_request`,
//! big arguments into buffers of their own: `client_buffers`) and hands each to the engine
//! (`Engine::execute`); the reply lands in its output. The output goes out at the end of
//! the turn unless it must wait for the log (`Client::required_seq`). The state commands
//! see (database, MULTI, WATCH) is the `SessionState` the engine borrows.

use super::{ARGUMENTS_KEEP, INPUT_KEEP_BYTES, READ_PER_TURN_BYTES, Server};
use crate::client_buffers::{BigArgument, BigArguments, OutputBreach};
use crate::commands::blocking::Blocked;
use crate::commands::{ClientKind, KillCandidate, ReplyShows, SessionState, UnblockReply, Victims};
use crate::config::OutputBufferLimits;
use crate::engine::{Host, Mode, Outcome, Request};
use crate::pubsub::{Kind, Message};
use crate::resp::{Parse, ParseLimits, Progress, ReplyWriter, parse_request};
use crate::tracking::{ClientTracking, Tracking};
use smallvec::SmallVec;
use std::io::{ErrorKind, Read};
use std::ops::Range;
use std::time::Instant;

/// The socket side of a session: everything but what commands see.
pub(super) struct Connection {
    pub stream: crate::net::Stream,
    pub peer: crate::net::Peer,
    pub local: crate::net::Peer,
    pub input: Vec<u8>,
    /// Parse state of a request not yet complete in `input`.
    pub progress: Progress,
    /// Arguments of that request read into buffers of their own (`client_buffers`).
    pub big_arguments: BigArguments,
    pub arg_ranges: Vec<Range<usize>>,
    pub output_sent: usize,
    /// When the unsent output went over its class's soft limit (`client_buffers`).
    pub output_soft_since: Option<Instant>,
    /// Set when a pub/sub message found the output over its limit: nothing more is
    /// appended, and the client is closed at the end of the turn (Redis's "close ASAP").
    pub output_breach: Option<OutputBreach>,
    /// Listed in `Server::touched` by a delivered message this turn (listed once however
    /// many messages it gets).
    pub listed_for_delivery: bool,
    /// The log batch that must be durable before the output may be sent: the replies in
    /// it acknowledge writes.
    pub hold_seq: u64,
    /// The log batch that replies of reads in the output wait for: they may show writes
    /// not yet durable. Unlike `hold_seq` this is waived while the log is failing, so that
    /// a full disk stops writes but not reads (see `Client::required_seq`).
    pub read_hold_seq: u64,
    /// Listed in `Server::held`, waiting for its required batch to become durable. Never
    /// flushed while set: the only way out is `release_held`.
    pub in_held: bool,
    pub close_after_reply: bool,
    /// Parked by a blocking command: its later input waits until it is served or times
    /// out (`server::blocked`).
    pub blocked: Option<Blocked>,
    /// A request CLIENT PAUSE holds (its arguments): it runs again when the pause ends or
    /// eases, and the input after it waits in `input` (`server::postponed`).
    pub postponed: Option<Vec<Vec<u8>>>,
    /// A replica's link: what of its output may go (`server::replicas`).
    pub replica: Option<super::replica_output::ReplicaLink>,
    pub created: Instant,
    pub last_interaction: Instant,
    /// The allocation the output keeps between replies (`reply_buffer`).
    pub reply_sizing: crate::reply_buffer::Sizing,
}

impl Connection {
    /// Bytes of requests received and not yet run (`client-query-buffer-limit`).
    pub fn query_bytes(&self) -> usize {
        let postponed = self
            .postponed
            .as_ref()
            .map_or(0, |argv| argv.iter().map(Vec::len).sum());
        self.input.len() + self.big_arguments.held_bytes() + postponed
    }
}

/// A session: the connection, the state its commands see, and the replies not yet sent.
pub(super) struct Client {
    pub conn: Connection,
    pub state: SessionState,
    pub output: Vec<u8>,
}

impl Client {
    pub fn new(connected: crate::net::Connected, state: SessionState) -> Client {
        let crate::net::Connected {
            stream,
            peer,
            local,
        } = connected;
        let now = Instant::now();
        Client {
            conn: Connection {
                stream,
                peer,
                local,
                input: Vec::new(),
                progress: Progress::default(),
                big_arguments: BigArguments::default(),
                arg_ranges: Vec::new(),
                output_sent: 0,
                output_soft_since: None,
                output_breach: None,
                listed_for_delivery: false,
                hold_seq: 0,
                read_hold_seq: 0,
                in_held: false,
                close_after_reply: false,
                blocked: None,
                postponed: None,
                replica: None,
                created: now,
                last_interaction: now,
                reply_sizing: crate::reply_buffer::Sizing::new(crate::clock::unix_ms()),
            },
            state,
            output: Vec::with_capacity(crate::reply_buffer::MIN_BYTES),
        }
    }

    /// Bytes of requests received and not yet run (`client-query-buffer-limit`).
    pub fn query_bytes(&self) -> usize {
        self.conn.query_bytes()
    }

    /// The log batch that must be durable (under `always`; written, otherwise) before this
    /// client's output may go. While the log is failing, replies of reads go out at once:
    /// they may show writes whose acknowledgements are still held (a dirty read, which
    /// Redis under `everysec` also gives), but the disk being full must not stop reads.
    pub fn required_seq(&self, log_failing: bool) -> u64 {
        if log_failing {
            self.conn.hold_seq
        } else {
            self.conn.hold_seq.max(self.conn.read_hold_seq)
        }
    }

    /// Marks the replies produced since the last turn as waiting for log batch `last`, as
    /// far as they reveal state (`ReplyShows`).
    pub fn hold_for(&mut self, last: u64) {
        match std::mem::take(&mut self.state.reply_shows) {
            ReplyShows::Nothing => {}
            ReplyShows::Reads => self.conn.read_hold_seq = last,
            ReplyShows::Writes => self.conn.hold_seq = last,
        }
    }
}

/// Sessions indexed by their poll token; slots are reused after a client leaves.
#[derive(Default)]
pub(super) struct Sessions {
    slots: Vec<Option<Client>>,
    free: Vec<usize>,
    count: usize,
    /// Client id → token: the engine names subscribers by id.
    by_id: hashbrown::HashMap<u64, usize>,
}

impl Sessions {
    pub fn insert(&mut self, client: Client) -> usize {
        self.count += 1;
        let id = client.state.id;
        let token = match self.free.pop() {
            Some(token) => {
                self.slots[token] = Some(client);
                token
            }
            None => {
                self.slots.push(Some(client));
                self.slots.len() - 1
            }
        };
        self.by_id.insert(id, token);
        token
    }

    /// The token of client `id`, if it is connected.
    pub fn token_of(&self, id: u64) -> Option<usize> {
        self.by_id.get(&id).copied()
    }

    pub fn get(&self, token: &usize) -> Option<&Client> {
        self.slots.get(*token).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, token: &usize) -> Option<&mut Client> {
        self.slots.get_mut(*token).and_then(Option::as_mut)
    }

    /// Takes a client out while it runs commands (which need `&mut Server`); the slot stays
    /// reserved until `put_back`.
    pub fn take(&mut self, token: usize) -> Option<Client> {
        self.slots.get_mut(token).and_then(Option::take)
    }

    pub fn put_back(&mut self, token: usize, client: Client) {
        debug_assert!(self.slots[token].is_none());
        self.slots[token] = Some(client);
    }

    pub fn remove(&mut self, token: &usize) -> Option<Client> {
        let client = self.take(*token)?;
        self.count -= 1;
        self.free.push(*token);
        self.by_id.remove(&client.state.id);
        Some(client)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (usize, &mut Client)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(t, c)| c.as_mut().map(|c| (t, c)))
    }

    pub fn iter(&self) -> impl Iterator<Item = (usize, &Client)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(t, c)| c.as_ref().map(|c| (t, c)))
    }

    fn values(&self) -> impl Iterator<Item = &Client> {
        self.slots.iter().flatten()
    }
}

/// The engine's view of the sessions while one of them (taken out of the table) runs a
/// command, or while the cron or the end of a turn runs (no current session): CLIENT
/// LIST sees the others and the current one; pub/sub messages and tracking's
/// invalidations go into the others' output.
pub(super) struct SessionsView<'a> {
    pub(super) others: &'a mut Sessions,
    current: Option<&'a Connection>,
    /// Clients with new output this turn, to be sent at its end.
    touched: &'a mut Vec<usize>,
    /// `client-output-buffer-limit`: a receiver is held to its class's (every receiver of
    /// a pub/sub message is subscribed, so `pubsub`; a tracking client may be `normal`).
    limits: OutputBufferLimits,
    /// The time limits are checked against, read at the first message (most commands
    /// deliver none).
    now: Option<Instant>,
    /// New connections are admitted while a script is busy (a client's SCRIPT KILL often
    /// comes on one); what was admitted is counted for INFO afterwards.
    pub(super) admission: Option<super::Admission<'a>>,
    pub(super) admitted: super::AdmissionCounts,
    /// Clients CLIENT UNBLOCK answered: (token, id, deadline), for the loop's tables.
    pub(super) unblocked: Vec<(usize, u64, Option<i64>)>,
}

impl<'a> SessionsView<'a> {
    /// The view for the session whose connection is `current` (taken out of `others`),
    /// if any.
    pub fn new(
        others: &'a mut Sessions,
        current: Option<&'a Connection>,
        touched: &'a mut Vec<usize>,
        limits: OutputBufferLimits,
    ) -> SessionsView<'a> {
        SessionsView {
            others,
            current,
            touched,
            limits,
            now: None,
            admission: None,
            admitted: Default::default(),
            unblocked: Vec::new(),
        }
    }

    /// The view that also admits new connections while a script is busy.
    pub fn admitting(mut self, admission: super::Admission<'a>) -> SessionsView<'a> {
        self.admission = Some(admission);
        self
    }
}

/// CLIENT LIST's `flags=`, in Redis's order: `S` replica, `O` monitor, `P` subscribed, `x` in MULTI,
/// `b` blocked (on keys, or held by CLIENT PAUSE), then tracking's `t` (tracking), `R`
/// (its redirect is gone), `B` (BCAST); `c` closing after its reply, `U` connected through
/// the Unix socket, `e` no-evict; `N` for none.
fn client_flags(
    conn: &Connection,
    state: &SessionState,
    tracking: Option<&ClientTracking>,
) -> String {
    let mut flags = String::new();
    if state.replica {
        flags.push('S');
    }
    if state.master_link {
        flags.push('M');
    }
    if state.modes.monitor {
        flags.push('O');
    }
    if state.subscriptions.any() {
        flags.push('P');
    }
    if state.multi.is_some() {
        flags.push('x');
    }
    if conn.blocked.is_some() || conn.postponed.is_some() {
        flags.push('b');
    }
    if let Some(tracking) = tracking {
        flags.push_str(&tracking.flag_letters());
    }
    if conn.close_after_reply {
        flags.push('c');
    }
    if matches!(conn.peer, crate::net::Peer::Unix(_)) {
        flags.push('U');
    }
    if state.modes.no_evict {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    flags
}

/// One CLIENT LIST line (Redis's fields in its order; `multi-mem` is the queue's bytes as
/// `client-query-buffer-limit` counts them; `rbs` and `rbp` the reply buffer's kept size
/// and peak (`reply_buffer`); `omem` all unsent output, which is one buffer in Tessera;
/// `argv-mem`, `obl` and `oll`, which Tessera does not track, are 0).
fn describe(
    conn: &Connection,
    state: &SessionState,
    output: (usize, usize),
    cmd: &str,
    tracking: &Tracking,
) -> String {
    let now = Instant::now();
    let (output_len, output_capacity) = output;
    let subscriptions = &state.subscriptions;
    let tracked = tracking.client(state.id);
    // Redis's `redir=`: -1 when not tracking, 0 when tracking without REDIRECT.
    let redirect = tracked.map_or(-1, |t| t.redirect.map_or(0, |id| id as i64));
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} qbuf-free={} argv-mem=0 multi-mem={} rbs={} rbp={} obl=0 oll=0 omem={} tot-mem={} events=r cmd={} user={} redir={} resp={} lib-name={} lib-ver={}\n",
        state.id,
        conn.peer,
        conn.local,
        std::os::fd::AsRawFd::as_raw_fd(&conn.stream),
        state.name.as_deref().unwrap_or(""),
        now.duration_since(conn.created).as_secs(),
        now.duration_since(conn.last_interaction).as_secs(),
        client_flags(conn, state, tracked),
        state.db,
        subscriptions.count(Kind::Channel),
        subscriptions.count(Kind::Pattern),
        subscriptions.count(Kind::Shard),
        state.multi.as_ref().map_or(-1, |m| m.queued.len() as i64),
        conn.input.len(),
        conn.input.capacity() - conn.input.len(),
        state.multi.as_ref().map_or(0, |m| m.bytes),
        conn.reply_sizing.size(),
        conn.reply_sizing.peak(),
        output_len,
        conn.input.capacity() + output_capacity,
        cmd,
        String::from_utf8_lossy(state.user.name()),
        redirect,
        if state.resp3 { 3 } else { 2 },
        state.lib_name.as_deref().unwrap_or(""),
        state.lib_version.as_deref().unwrap_or(""),
    )
}

impl SessionsView<'_> {
    /// Appends to another session's output what `write` writes (a pub/sub message, a
    /// MONITOR line), unless it is condemned or over its class's output limit. Checked
    /// before each append, as Redis checks on each reply, so that a flood in one turn
    /// never grows a slow receiver past its hard limit. (A receiver is authenticated:
    /// RESET, which can undo that, unsubscribes, stops tracking and monitoring.)
    fn append_output(&mut self, token: usize, write: impl FnOnce(&mut Vec<u8>, bool)) {
        let Some(client) = self.others.get_mut(&token) else {
            return;
        };
        if client.conn.output_breach.is_some() || client.conn.close_after_reply {
            return; // condemned: it is closed at the end of the turn
        }
        let unsent = client.output.len() - client.conn.output_sent;
        let limit = ClientKind::of(&client.state).output_limit(&self.limits);
        let breach = crate::client_buffers::check_output(
            unsent,
            true,
            &limit,
            &mut client.conn.output_soft_since,
            *self.now.get_or_insert_with(Instant::now),
        );
        if breach.is_some() {
            client.conn.output_breach = breach;
        } else {
            write(&mut client.output, client.state.resp3);
            // A message may tell of a write (a keyspace notification, a monitored
            // command): it waits for the log as a read's reply does.
            client.state.reply_shows = client.state.reply_shows.max(ReplyShows::Reads);
        }
        if !client.conn.listed_for_delivery {
            client.conn.listed_for_delivery = true;
            self.touched.push(token);
        }
    }
}

impl Host for SessionsView<'_> {
    fn client_list(
        &self,
        current: &SessionState,
        current_output: (usize, usize),
        only_self: bool,
        ids: Option<&[u64]>,
        kind: Option<ClientKind>,
        tracking: &Tracking,
    ) -> String {
        let Some(connection) = self.current else {
            return String::new(); // only a command asks, and it has a session
        };
        let me = |cmd| describe(connection, current, current_output, cmd, tracking);
        if only_self {
            return me("client|info");
        }
        let listed = |state: &SessionState| {
            ids.is_none_or(|ids| ids.contains(&state.id))
                && kind.is_none_or(|kind| ClientKind::of(state) == kind)
        };
        let mut lines: Vec<(u64, String)> = self
            .others
            .values()
            .filter(|c| listed(&c.state))
            .map(|c| {
                let output = (c.output.len(), c.output.capacity());
                let line = describe(&c.conn, &c.state, output, c.state.last_command, tracking);
                (c.state.id, line)
            })
            .collect();
        if listed(current) {
            lines.push((current.id, me("client|list")));
        }
        lines.sort_by_key(|(id, _)| *id);
        lines.into_iter().map(|(_, line)| line).collect()
    }

    fn deliver(&mut self, id: u64, message: &Message<'_>) -> bool {
        // A session taken out of the table runs the command and got its copy already.
        let Some(token) = self.others.token_of(id) else {
            return false;
        };
        let Some(client) = self.others.get(&token) else {
            return false;
        };
        if message.reaches(client.state.resp3, client.state.subscriptions.any()) {
            self.append_output(token, |output, resp3| {
                message.write(&mut ReplyWriter::new(output, resp3))
            });
        }
        true
    }

    fn client_exists(&self, id: u64) -> bool {
        self.others.token_of(id).is_some()
    }

    fn clients_memory(&self) -> u64 {
        let others: usize = self
            .others
            .values()
            .map(|c| c.conn.input.capacity() + c.output.capacity())
            .sum();
        let current = self.current.map_or(0, |conn| conn.input.capacity());
        (others + current) as u64
    }

    fn serve_while_busy(
        &mut self,
        busy: &crate::scripting::busy::Busy,
        desk: &mut crate::commands::transactions::WatchDesk,
    ) -> crate::scripting::busy::BusyRequest {
        self.serve_busy(busy, desk)
    }

    fn kill_clients(&mut self, victims: &Victims<'_>) -> usize {
        let mut killed = Vec::new();
        for (token, client) in self.others.iter_mut() {
            let state = &mut client.state;
            match victims {
                Victims::Acl(doomed) if doomed.includes(&state.user, &state.subscriptions) => {
                    tracing::info!("closing a client whose ACL user was removed or changed");
                    // As Redis does, back to the default user, unauthenticated, until closed.
                    state.user = crate::acl::SessionUser::default();
                    state.authenticated = false;
                }
                Victims::Filter(filter)
                    if filter.matches(&KillCandidate {
                        id: state.id,
                        addr: &client.conn.peer.to_string(),
                        laddr: &client.conn.local.to_string(),
                        kind: ClientKind::of(state),
                        user: state.user.name(),
                    }) =>
                {
                    // Closed at once, as Redis's freeClient: nothing more is sent.
                    client.output.truncate(client.conn.output_sent);
                }
                _ => continue,
            }
            client.conn.close_after_reply = true;
            killed.push(token);
        }
        let count = killed.len();
        self.touched.extend(killed);
        count
    }

    fn unblock_client(&mut self, id: u64, how: UnblockReply) -> Option<Blocked> {
        let token = self.others.token_of(id)?;
        let client = self.others.get_mut(&token)?;
        let blocked = client.conn.blocked.take()?;
        let mut out = ReplyWriter::new(&mut client.output, client.state.resp3);
        match how {
            UnblockReply::Timeout => out.null_array(),
            UnblockReply::WaitTimeout(acknowledged) => acknowledged.write(&mut out),
            UnblockReply::Error => out.error("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
        }
        self.unblocked.push((token, id, blocked.deadline_ms));
        self.touched.push(token);
        Some(blocked)
    }

    fn feed_monitor(&mut self, id: u64, line: &[u8]) {
        // A line is a reply to Redis: CLIENT REPLY OFF silences it too.
        if let Some(token) = self.others.token_of(id)
            && self
                .others
                .get(&token)
                .is_some_and(|client| client.state.modes.reply != crate::commands::ReplyMode::Off)
        {
            self.append_output(token, |output, _| output.extend_from_slice(line));
        }
    }

    fn client_addresses(&self) -> Option<(crate::net::Peer, crate::net::Peer)> {
        self.current
            .map(|conn| (conn.peer.clone(), conn.local.clone()))
    }

    fn describe_client(
        &self,
        current: &SessionState,
        command: &str,
        tracking: &crate::tracking::Tracking,
    ) -> String {
        match self.current {
            Some(connection) => {
                let mut line = describe(connection, current, (0, 0), command, tracking);
                line.pop(); // the newline
                line
            }
            None => String::new(),
        }
    }
}

impl Server {
    /// Reads everything available and executes every complete command.
    /// `until_eof`: the peer has closed its side, so read until EOF rather than stopping
    /// at a short read (no further event would announce the EOF).
    pub(super) fn read_and_execute(&mut self, token: usize, until_eof: bool) {
        let limit = match self.clients.get(&token) {
            // Redis exempts its master's link from `client-query-buffer-limit`.
            Some(client) if client.state.master_link => usize::MAX,
            _ => self.engine.state.config.query_buffer_bytes_max,
        };
        // The peer sent EOF: it may have half-closed, so its replies still go out.
        let mut peer_done = false;
        let mut closed = false;
        let mut more_to_read = false;
        let mut read_now = 0usize;
        {
            let Some(client) = self.clients.get_mut(&token) else {
                return;
            };
            if client.conn.close_after_reply {
                return;
            }
            let conn = &mut client.conn;
            loop {
                // A big argument in progress is read straight into its own buffer.
                let read = match conn.big_arguments.reading() {
                    Some(argument) => argument.read_from(&mut conn.stream),
                    None => conn.stream.read(&mut self.read_buffer).map(|n| {
                        conn.input.extend_from_slice(&self.read_buffer[..n]);
                        (n, self.read_buffer.len())
                    }),
                };
                match read {
                    Ok((0, _)) => {
                        peer_done = true;
                        break;
                    }
                    Ok((n, wanted)) => {
                        conn.big_arguments.settle();
                        self.engine.state.stats.total_net_input_bytes += n as u64;
                        // A short read drained the socket: skip the read that would only
                        // say WouldBlock (bytes arriving later raise a new edge event).
                        let drained = n < wanted && !until_eof;
                        if drained || conn.query_bytes() > limit {
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
            conn.last_interaction = Instant::now();
        }
        self.process_input(token);
        if let Some(client) = self.clients.get(&token)
            && client.query_bytes() > limit
        {
            tracing::warn!(
                "closing client id={} addr={}: query buffer of {} bytes exceeds client-query-buffer-limit",
                client.state.id,
                client.conn.peer,
                client.query_bytes()
            );
            closed = true;
        }
        if peer_done && !closed {
            match self.clients.get_mut(&token) {
                Some(client) if client.output.len() > client.conn.output_sent => {
                    client.conn.close_after_reply = true; // closed once the replies are sent
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
    }

    /// Runs one request of a client taken out of the table. The engine sees the other
    /// sessions through a view that delivers pub/sub messages and, while a script runs
    /// long, serves them and admits new connections (counted in what it returns).
    pub(super) fn execute_for_client(
        &mut self,
        state: &mut SessionState,
        output: &mut Vec<u8>,
        conn: &Connection,
        request: Request<'_>,
    ) -> (Outcome, super::AdmissionCounts) {
        // The master's stream runs as the master's.
        let mode = if state.master_link {
            Mode::Master
        } else {
            Mode::Client
        };
        let limits = self.engine.state.config.output_buffer_limits;
        let mut unblocked = Vec::new();
        let mut host = SessionsView::new(&mut self.clients, Some(conn), &mut self.touched, limits)
            .admitting(super::Admission {
                listeners: &mut self.listeners,
                registry: self.poll.registry(),
                next_client_id: &mut self.next_client_id,
            });
        let replied_from = output.len();
        let argv = request.argv;
        let from_master = mode == Mode::Master;
        let outcome = self.engine.execute(state, output, request, mode, &mut host);
        if from_master && output.get(replied_from) == Some(&b'-') {
            crate::replication::replica::log_error_to_master(&output[replied_from..], argv);
            self.engine.state.stats.unexpected_error_replies += 1;
        }
        let admitted = host.admitted;
        std::mem::swap(&mut unblocked, &mut host.unblocked);
        for (token, id, deadline) in unblocked {
            // CLIENT UNBLOCK answered it: its later input runs this turn.
            if let Some(deadline) = deadline {
                self.block_deadlines.remove(&(deadline, token, id));
            }
            self.resumed.push(token);
        }
        (outcome, admitted)
    }

    /// Counts the connections admitted while a script was busy.
    pub(super) fn note_admitted(&mut self, admitted: super::AdmissionCounts) {
        if admitted.received + admitted.rejected > 0 {
            admitted.add_to(&mut self.engine.state);
            self.engine.state.connected_clients = self.clients.len();
        }
    }

    /// Runs every complete request in the client's input, in order, until it blocks
    /// (SHUTDOWN blocks it too) or closes.
    pub(super) fn process_input(&mut self, token: usize) {
        let mut consumed_total = 0;
        let mut produced_output = false;
        let Some(mut client) = self.clients.take(token) else {
            return;
        };
        let mut ranges = std::mem::take(&mut client.conn.arg_ranges);
        while !client.conn.close_after_reply
            && client.conn.blocked.is_none()
            && client.conn.postponed.is_none()
        {
            // Recomputed per request: an AUTH earlier in the same read lifts the limits.
            let master = client.state.master_link;
            let limits = if master {
                // The master is trusted (Redis exempts it from `proto-max-bulk-len`), and
                // its requests stay whole in the input, so that their bytes count in the
                // processed offset.
                ParseLimits {
                    bulk_bytes_max: crate::types::string::MAX_LEN,
                    inline_bytes_max: 64 * 1024,
                    unauthenticated: false,
                    big_argument_bytes_min: usize::MAX,
                }
            } else {
                ParseLimits {
                    bulk_bytes_max: self.engine.state.config.bulk_bytes_max,
                    inline_bytes_max: 64 * 1024,
                    unauthenticated: self.engine.auth_required(&client.state),
                    big_argument_bytes_min: crate::resp::BIG_ARGUMENT_BYTES_MIN,
                }
            };
            let consumed_before = consumed_total;
            if client.conn.big_arguments.is_reading() {
                break; // the rest of the request waits behind the big argument
            }
            let Client {
                conn,
                state,
                output,
            } = &mut client;
            let input = &conn.input[consumed_total..];
            let outcome = match parse_request(input, &limits, &mut ranges, &mut conn.progress) {
                Parse::Incomplete => break,
                Parse::BigArgument { start, len } => {
                    // Its bytes so far move to a buffer of its final size; the socket's
                    // next bytes go there too (`read_and_execute`).
                    let at = consumed_total + start;
                    let argument = BigArgument::start(ranges.len() - 1, len, &conn.input[at..]);
                    conn.big_arguments.begin(argument);
                    conn.input.truncate(at);
                    break;
                }
                Parse::Invalid(reason) => {
                    conn.big_arguments.clear();
                    ReplyWriter::new(output, state.resp3).error(&format!("ERR {reason}"));
                    let kind = crate::command_stats::ErrorKind::of(b"ERR");
                    self.engine.state.commands.error_replied(kind);
                    conn.close_after_reply = true;
                    produced_output = true;
                    tracing::debug!("protocol error from client id={}: {reason}", state.id);
                    break;
                }
                Parse::Complete(used) => {
                    let frame = &conn.input[consumed_total..consumed_total + used];
                    let big = &conn.big_arguments;
                    let argv: SmallVec<[&[u8]; 8]> = ranges
                        .iter()
                        .enumerate()
                        .map(|(i, r)| big.argument(i, frame, r.clone()))
                        .collect();
                    let mut rogue = None;
                    let outcome = (!argv.is_empty()).then(|| {
                        let request = Request {
                            argv: &argv,
                            big_arguments: big.complete(),
                        };
                        let replica = state.replica;
                        let mut scratch = Vec::new();
                        // Neither a replica nor the master gets replies.
                        let out = if replica || master {
                            &mut scratch
                        } else {
                            &mut *output
                        };
                        let ran = self.execute_for_client(state, out, conn, request);
                        rogue = (replica && !scratch.is_empty()).then_some(scratch);
                        ran
                    });
                    let held = postponed_copy(&outcome, &argv);
                    let rogue = rogue.map(|reply| (table_name(&argv), reply));
                    drop(argv);
                    if let Some((name, reply)) = rogue {
                        rogue_replica(conn, state, &name, &reply);
                    }
                    conn.postponed = held;
                    conn.big_arguments.clear();
                    consumed_total += used;
                    outcome
                }
                Parse::Inline(words, used) => {
                    let argv: SmallVec<[&[u8]; 8]> = words.iter().map(|w| w.as_slice()).collect();
                    if argv.is_empty() && state.replica {
                        // A replica loading a big snapshot sends newlines: it is alive.
                        let now = crate::clock::unix_seconds();
                        let replicas = &mut self.engine.state.replication.replicas;
                        replicas.heard_from(state.id, now);
                    }
                    let mut rogue = None;
                    let outcome = (!argv.is_empty()).then(|| {
                        let replica = state.replica;
                        let mut scratch = Vec::new();
                        let out = if replica || master {
                            &mut scratch
                        } else {
                            &mut *output
                        };
                        let ran = self.execute_for_client(state, out, conn, Request::plain(&argv));
                        rogue = (replica && !scratch.is_empty()).then_some(scratch);
                        ran
                    });
                    if let Some(reply) = rogue {
                        rogue_replica(conn, state, &table_name(&argv), &reply);
                    }
                    conn.postponed = postponed_copy(&outcome, &argv);
                    consumed_total += used;
                    outcome
                }
            };
            if master {
                // The master's stream: each request's bytes, processed (a transaction's
                // with its EXEC), then proxied as they came to this replica's backlog
                // and replicas; an acknowledgement it asked for tells the offset before
                // the asking.
                let replication = &mut self.engine.state.replication;
                let fsynced = replication.fsynced.as_ref().map(|f| f.master_offset());
                if let Some(link) = replication.master.as_mut() {
                    if std::mem::take(&mut link.ack_requested) {
                        let ack = link.acknowledgement(fsynced, true);
                        client.output.extend_from_slice(&ack);
                        produced_output = true;
                    }
                    let request = &client.conn.input[consumed_before..consumed_total];
                    if client.state.multi.is_none() {
                        // Where the stream is, with the offset processed: what a
                        // snapshot of this replica records (`saved_history`).
                        link.stream_db = client.state.db;
                    }
                    if client.state.multi.is_some() {
                        link.transaction.extend_from_slice(request);
                    } else if link.transaction.is_empty() {
                        link.processed(request.len());
                        self.proxy_master_stream(request);
                    } else {
                        let mut applied = std::mem::take(&mut link.transaction);
                        applied.extend_from_slice(request);
                        link.processed(applied.len());
                        self.proxy_master_stream(&applied);
                    }
                }
            }
            if let Some((outcome, admitted)) = outcome {
                self.note_admitted(admitted);
                produced_output = true;
                self.apply_outcome(token, &mut client, outcome);
            }
            if self.engine.state.blocked.has_ready() {
                // Back in the table meanwhile, so that what the served commands publish
                // reaches this client too.
                self.clients.put_back(token, client);
                self.serve_blocked();
                client = self.clients.take(token).expect("put back above");
            }
        }
        if ranges.capacity() > ARGUMENTS_KEEP && ranges.len() < ARGUMENTS_KEEP {
            ranges.shrink_to(ARGUMENTS_KEEP);
        }
        let conn = &mut client.conn;
        conn.arg_ranges = ranges;
        conn.input.drain(..consumed_total);
        if conn.input.capacity() > INPUT_KEEP_BYTES && conn.input.len() < INPUT_KEEP_BYTES {
            conn.input.shrink_to(INPUT_KEEP_BYTES);
        }
        self.clients.put_back(token, client);
        if produced_output {
            self.touched.push(token);
        }
    }

    /// Does what the engine's outcome asks of the event loop, after the reply is written.
    pub(super) fn apply_outcome(&mut self, token: usize, client: &mut Client, outcome: Outcome) {
        match outcome {
            Outcome::Done | Outcome::Refused(_) => {}
            Outcome::Close => client.conn.close_after_reply = true,
            Outcome::Shutdown(call) => self.shutdown_command(token, client, call),
            Outcome::StartJob(job) => self.start_job(job),
            Outcome::Block(blocked) => self.block(token, client, blocked),
            Outcome::Postpone => self.postpone(token),
            Outcome::Reload(reload) => self.reload(client, reload),
            Outcome::Replicate(attach) => self.attach_replica(token, client, attach),
        }
    }
}

/// A replica's command produced `reply`, which its output (the stream) cannot carry:
/// Redis drops such a replica ("Replica generated a reply to command"), naming the
/// command as its table does (`xinfo|help`), after logging an error it was answered.
fn rogue_replica(conn: &mut Connection, state: &SessionState, name: &str, reply: &[u8]) {
    if let Some(error) = reply.strip_prefix(b"-") {
        let line = error.split(|&b| b == b'\r').next().unwrap_or(error);
        tracing::warn!(
            "== CRITICAL == This master is sending an error to its replica: '{}' after processing the command '{name}'",
            String::from_utf8_lossy(line)
        );
    }
    tracing::warn!(
        "Replica generated a reply to command '{name}', disconnecting it: id={} addr={}",
        state.id,
        conn.peer
    );
    conn.close_after_reply = true;
}

/// A request's command as Redis's table names it (`get`, `xinfo|help`).
fn table_name(argv: &[&[u8]]) -> String {
    let name = String::from_utf8_lossy(argv[0]).to_ascii_lowercase();
    crate::acl::table::table()
        .for_request(&name, argv)
        .map_or(name.clone(), |command| command.full_name.clone())
}

/// The arguments of a request CLIENT PAUSE held, kept to run it again.
fn postponed_copy(
    outcome: &Option<(Outcome, super::AdmissionCounts)>,
    argv: &[&[u8]],
) -> Option<Vec<Vec<u8>>> {
    matches!(outcome, Some((Outcome::Postpone, _)))
        .then(|| argv.iter().map(|a| a.to_vec()).collect())
}
