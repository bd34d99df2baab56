//! The engine: the one place a command is executed.
//!
//! `Engine::execute` takes a session's request and does, in Redis's order (its
//! `processCommand`): look the command up; evict keys if memory is over `maxmemory`
//! (`evict`, a client's command only); check its arity, whether a protected command
//! (DEBUG) is allowed from this connection, authentication, MULTI's own
//! rules, the user's ACL permissions (`crate::acl`: the command, its keys, its channels;
//! a denial is logged in ACL LOG), memory (`-OOM` for commands that may grow it, with
//! nothing left to evict), MISCONF (the log failing refuses writes) and
//! `-LOADING`; queue it if the session is inside MULTI; otherwise build the command's
//! context and run its handler, then act on what the handler asked (run an EXEC's queue,
//! ask the host for CLIENT LIST). What the caller must still do — park the client, start
//! a job, reload the dataset from disk, close, shut down — comes back as an `Outcome`;
//! a reloaded dataset comes back to the engine to be put in place (`reload`).
//!
//! Who calls says so with a `Mode`: a client's request, a blocked client's command run
//! again for a key that became ready, a script's `redis.call` (`crate::scripting`), the
//! start-up replay of the log, or, on a replica, its master's stream (`Mode::Master`). Every write's effects go to the effects stream (`crate::effects`) from here,
//! whoever called.
//!
//! The engine owns the dataset (`Keyspace`), the state commands see (`ServerState`) and
//! the effects not yet taken. It owns no socket, thread or file: the event loop
//! (`crate::server`) and the replay (`crate::recovery`) drive it, and lend it a `Host`
//! through which a command reaches the other sessions (CLIENT LIST, pub/sub messages,
//! client-side caching's invalidations).
//!
//! Client-side caching (`crate::tracking`) hangs on this one path too: after a read-only
//! command the keys it read are remembered for a tracking client (`Engine::run`); a
//! change reported by a handler (`Ctx::propagate`), an expiry or a flush invalidates; and
//! what is meant for the client whose request is running waits until its reply is written
//! (`Origin`), whether the change came from its command, its EXEC or its script.

pub mod evict;
mod expire;
mod operator;
mod reload;
mod stats;
mod transaction;

use crate::acl::Denied;
use crate::commands::blocking::{BlockMode, Blocked};
use crate::commands::{
    Action, CommandSpec, Ctx, Registry, ReplyShows, ServerState, SessionState, flags,
    global_registry,
};
use crate::config::Config;
use crate::effects::Effects;
use crate::keyspace::Keyspace;
use crate::resp::ReplyWriter;
use crate::storage::Storage;
use crate::tracking::Origin;
use crate::types::string::Str;
use bytes::Bytes;
use std::fmt;
use std::sync::Arc;

pub use crate::commands::{Job, ShutdownSave};
pub use reload::{Adopt, AdoptError};

/// The dataset, the state commands see, and the effects of writes not yet taken.
pub struct Engine {
    pub keyspace: Keyspace,
    pub state: ServerState,
    pub effects: Effects,
    registry: &'static Registry,
    /// The client whose request is running (a client's command or a blocked client's,
    /// with the EXEC or script it runs): tracking's messages for it wait here for its
    /// reply.
    origin: Option<Origin>,
    /// While a script runs for a client whose reads are tracked: the script's declared
    /// keys, which each read-only command of the script remembers for it (Redis's rule for
    /// scripts: their own key arguments are not the caller's).
    script_tracked_keys: Option<Vec<Vec<u8>>>,
    /// On a writable replica: keys its clients gave an expiry, with a bit per database
    /// (`expire::expire_replica_keys`).
    replica_keys_with_expire: expire::ReplicaKeysWithExpire,
}

/// One command as received.
#[derive(Clone, Copy)]
pub struct Request<'a> {
    pub argv: &'a [&'a [u8]],
    /// Arguments that arrived as big bulks, read into strings of their own
    /// (`client_buffers`): (position, value). Empty for anything but a client's request.
    pub big_arguments: &'a [(usize, Str)],
}

impl<'a> Request<'a> {
    /// A request whose arguments are all in `argv`.
    pub fn plain(argv: &'a [&'a [u8]]) -> Request<'a> {
        Request {
            argv,
            big_arguments: &[],
        }
    }
}

/// Who is calling the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A client's request.
    Client,
    /// A command of an EXEC's queue: checked again (Redis does too), never blocks.
    Exec,
    /// A blocked client's command, run again because this key became ready: it takes from
    /// that key only, or stays blocked.
    ServeBlocked(Bytes),
    /// The start-up replay of the log: only the command's existence and arity are
    /// checked; nothing expires, nothing is logged, the reply is discarded.
    Replay,
    /// A command of this replica's master's stream: only its arity is checked (the
    /// master decided), nothing expires (the master sends the DELs), the reply is
    /// dropped by the caller, and its effects go to this instance's own log.
    Master,
    /// A script's `redis.call` / `redis.pcall`: refused with Redis's script texts
    /// (commands flagged `noscript`, writes in a read-only script), never blocks, and runs
    /// at the script's clock.
    Script(crate::scripting::run::ScriptMode),
}

/// What the caller must do once the engine is done (the reply, if any, is written).
#[derive(Debug)]
pub enum Outcome {
    /// Ran, or was queued inside MULTI.
    Done,
    /// Refused before running; the error reply is written.
    Refused(Refusal),
    /// Send the reply, then close the connection (QUIT).
    Close,
    /// SHUTDOWN (its options), or SHUTDOWN ABORT.
    Shutdown(crate::shutdown::ShutdownCall),
    /// Start this background job now.
    StartJob(Job),
    /// Nothing to take yet: park the client until a key is ready or the deadline passes.
    Block(Blocked),
    /// CLIENT PAUSE holds the command: nothing ran and nothing is written; the caller
    /// keeps the request and runs it again when the pause ends or eases.
    Postpone,
    /// DEBUG RELOAD / LOADAOF: persist and load the dataset, then write the reply
    /// (`Reload::reply`: unless CLIENT REPLY drops it).
    Reload(crate::commands::Reload),
    /// PSYNC / SYNC made the session a replica: the event loop attaches its socket to
    /// the stream (continued from the backlog, or after a full sync).
    Replicate(crate::replication::master::Attach),
}

/// Why a command was refused before it ran (Redis's texts via `Display`).
#[derive(Debug, Clone)]
pub enum Refusal {
    /// The reply text carries the name and the first arguments, as Redis's does.
    UnknownCommand(String),
    WrongArity(&'static str),
    NoAuth,
    /// Over `maxmemory` with nothing left to evict: `denyoom` commands are refused.
    OutOfMemory,
    /// The log can't be written, or the last BGSAVE failed: writes are refused.
    DiskError(crate::commands::DiskError),
    /// A command that may not be queued (WATCH, SHUTDOWN…) inside MULTI.
    NotInTransaction,
    Loading,
    /// The MULTI queue would exceed `client-query-buffer-limit`: it is dropped.
    TransactionTooLarge,
    /// A RESP2 subscriber sent a command other than the subscription commands, PING, QUIT
    /// and RESET (`pubsub::Context`); the command's full name (`config|get`).
    SubscribedContext(String),
    /// From a script: no such command.
    ScriptUnknownCommand,
    /// From a script: the wrong number of arguments.
    ScriptWrongArity,
    /// From a script: a command scripts may not run (`noscript`).
    NotFromScript,
    /// From a read-only script (EVAL_RO, `no-writes`): a write command.
    WriteInReadOnlyScript,
    /// ACL: the user may not run the command, or touch one of its keys or channels.
    /// `at_exec`: found when EXEC ran its queue (the rules changed since it was queued).
    NoPermission {
        denial: crate::acl::Denial,
        at_exec: bool,
    },
    /// ACL, from a script: its user may not run the command, or touch a key or channel.
    ScriptNoPermission(crate::acl::Denial),
    /// A monitor or a replica ran a command that reads or writes keys.
    ReplicaKeyspace,
    /// `min-replicas-to-write`: too few replicas acknowledged within the lag for a write.
    NotEnoughReplicas,
    /// A client's write on a read-only replica (`replica-read-only yes`).
    ReadOnlyReplica,
    /// A replica whose master link is down, with `replica-serve-stale-data no`.
    MasterDown,
    /// A protected command (DEBUG) its directive (`enable-debug-command`) does not allow
    /// from this connection.
    ProtectedCommand {
        name: &'static str,
        directive: &'static str,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::UnknownCommand(message) => f.write_str(message),
            Refusal::WrongArity(name) => {
                write!(f, "ERR wrong number of arguments for '{name}' command")
            }
            Refusal::NoAuth => f.write_str("NOAUTH Authentication required."),
            Refusal::OutOfMemory => {
                f.write_str("OOM command not allowed when used memory > 'maxmemory'.")
            }
            Refusal::DiskError(error) => error.fmt(f),
            Refusal::NotInTransaction => {
                f.write_str("ERR Command not allowed inside a transaction")
            }
            Refusal::Loading => f.write_str("LOADING Redis is loading the dataset in memory"),
            Refusal::ReplicaKeyspace => f.write_str("ERR Replica can't interact with the keyspace"),
            Refusal::NotEnoughReplicas => {
                f.write_str(crate::replication::master::NOT_ENOUGH_REPLICAS)
            }
            Refusal::ReadOnlyReplica => {
                f.write_str("READONLY You can't write against a read only replica.")
            }
            Refusal::MasterDown => f.write_str(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            ),
            Refusal::ProtectedCommand { name, directive } => write!(
                f,
                "ERR {name} command not allowed. If the {directive} option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server."
            ),
            Refusal::TransactionTooLarge => {
                f.write_str(crate::commands::transactions::TRANSACTION_TOO_LARGE)
            }
            Refusal::SubscribedContext(name) => write!(
                f,
                "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
            ),
            Refusal::ScriptUnknownCommand => {
                f.write_str("ERR Unknown Redis command called from script")
            }
            Refusal::ScriptWrongArity => {
                f.write_str("ERR Wrong number of args calling Redis command from script")
            }
            Refusal::NotFromScript => {
                f.write_str("ERR This Redis command is not allowed from script")
            }
            Refusal::WriteInReadOnlyScript => {
                f.write_str("ERR Write commands are not allowed from read-only scripts.")
            }
            Refusal::NoPermission {
                denial,
                at_exec: false,
            } => match denial.denied {
                Denied::Command => write!(
                    f,
                    "NOPERM this user has no permissions to run the '{}' command",
                    denial.command
                ),
                Denied::Key(_) => f.write_str(
                    "NOPERM this user has no permissions to access one of the keys used as arguments",
                ),
                Denied::Channel(_) => f.write_str(
                    "NOPERM this user has no permissions to access one of the channels used as arguments",
                ),
            },
            Refusal::NoPermission {
                denial,
                at_exec: true,
            } => write!(
                f,
                "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {}",
                match denial.denied {
                    Denied::Command => "no permission to execute the command or subcommand",
                    Denied::Key(_) => "no permission to touch the specified keys",
                    Denied::Channel(_) =>
                        "no permission to access one of the channels used as arguments",
                }
            ),
            Refusal::ScriptNoPermission(denial) => write!(
                f,
                "ERR The user executing the script {}",
                match denial.denied {
                    Denied::Command => "can't run this command or subcommand",
                    Denied::Key(_) =>
                        "can't access at least one of the keys mentioned in the command arguments",
                    Denied::Channel(_) => "can't publish to the channel mentioned in the command",
                }
            ),
        }
    }
}

impl std::error::Error for Refusal {}

/// What the engine asks of whoever holds the sessions (the event loop; nobody during
/// replay): CLIENT LIST, pub/sub messages for other sessions, CLIENT KILL and UNBLOCK,
/// MONITOR's lines.
pub trait Host {
    /// CLIENT LIST (every session, or those in `ids`) or, with `only_self`, CLIENT INFO.
    /// `current_output`: the length and capacity of the calling session's reply buffer.
    /// `kind`: only clients of that class (CLIENT LIST TYPE). `tracking`: for the
    /// tracking flags and `redir=`.
    fn client_list(
        &self,
        current: &SessionState,
        current_output: (usize, usize),
        only_self: bool,
        ids: Option<&[u64]>,
        kind: Option<crate::commands::ClientKind>,
        tracking: &crate::tracking::Tracking,
    ) -> String;

    /// Appends a message (pub/sub, or a tracking invalidation) to the output of client
    /// `id`, in that client's protocol (never the calling session's: the engine writes its
    /// copy into its reply). A client that is gone, or over its output limit, or that the
    /// message cannot reach (`Message::reaches`), gets nothing. False when no client `id`
    /// is connected.
    fn deliver(&mut self, id: u64, message: &crate::pubsub::Message<'_>) -> bool;

    /// Whether client `id` is connected (another than the calling session).
    fn client_exists(&self, id: u64) -> bool;

    /// The bytes the clients' buffers hold (CLIENT LIST's `tot-mem`, summed: input and
    /// output by capacity), but the calling session's output, which is the reply being
    /// written (MEMORY STATS `clients.normal`).
    fn clients_memory(&self) -> u64 {
        0
    }

    /// Closes the other sessions that are `victims` (an ACL change's: after this turn's
    /// replies; CLIENT KILL's: without their pending replies); they run no more commands.
    /// The calling session is the engine's to close. Returns how many were closed.
    fn kill_clients(&mut self, _victims: &crate::commands::Victims<'_>) -> usize {
        0
    }

    /// CLIENT UNBLOCK: answers client `id` if it is blocked on keys (its timeout reply, or
    /// the UNBLOCKED error) and lets its later input run; hands back what it waited for,
    /// for the engine's tables. None when it is not blocked.
    fn unblock_client(&mut self, _id: u64, _how: crate::commands::UnblockReply) -> Option<Blocked> {
        None
    }

    /// Appends a MONITOR line to the output of client `id` (another than the calling
    /// session), under its output limit.
    fn feed_monitor(&mut self, _id: u64, _line: &[u8]) {}

    /// The calling session's peer and local addresses, for MONITOR's lines and CLIENT
    /// KILL's filters.
    fn client_addresses(&self) -> Option<(crate::net::Peer, crate::net::Peer)> {
        None
    }

    /// The calling session as CLIENT INFO describes it, with `command` as its last
    /// command (an ACL LOG entry's `client-info`); a script's caller for a script.
    fn describe_client(
        &self,
        _current: &SessionState,
        _command: &str,
        _tracking: &crate::tracking::Tracking,
    ) -> String {
        String::new()
    }

    /// A script has run past `busy-reply-threshold`: answer the other clients now (-BUSY;
    /// SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE; the transaction commands through
    /// `desk`) and say what they asked of the script.
    fn serve_while_busy(
        &mut self,
        _busy: &crate::scripting::busy::Busy,
        _desk: &mut crate::commands::transactions::WatchDesk,
    ) -> crate::scripting::busy::BusyRequest {
        crate::scripting::busy::BusyRequest::Continue
    }
}

/// The host of a replay: no sessions.
pub struct NoSessions;

impl Host for NoSessions {
    fn client_list(
        &self,
        _: &SessionState,
        _: (usize, usize),
        _: bool,
        _: Option<&[u64]>,
        _: Option<crate::commands::ClientKind>,
        _: &crate::tracking::Tracking,
    ) -> String {
        String::new()
    }

    fn deliver(&mut self, _: u64, _: &crate::pubsub::Message<'_>) -> bool {
        false
    }

    fn client_exists(&self, _: u64) -> bool {
        false
    }
}

impl Engine {
    pub fn new(config: Config, config_file: String, storage: Arc<dyn Storage>) -> Engine {
        let keyspace = Keyspace::new(config.databases);
        Engine {
            keyspace,
            state: ServerState::new(config, config_file, storage),
            effects: Effects::default(),
            registry: global_registry(),
            origin: None,
            script_tracked_keys: None,
            replica_keys_with_expire: expire::ReplicaKeysWithExpire::default(),
        }
    }

    /// Runs one request for `session`, its reply appended to `reply`.
    pub fn execute(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        request: Request<'_>,
        mode: Mode,
        host: &mut dyn Host,
    ) -> Outcome {
        // A client's request, or a blocked client's served again, runs on its own; EXEC's
        // commands and a script's run inside one of those, whose client stays the origin.
        if !matches!(mode, Mode::Client | Mode::ServeBlocked(_)) {
            return self.dispatch(session, reply, request, mode, host);
        }
        let client_request = mode == Mode::Client;
        if client_request && self.state.tracking.total_keys() > 0 {
            // Before the command, as Redis's processCommand: what is due to this client
            // comes before its reply.
            self.limit_tracking_table(Some((&*session, &mut *reply)), host);
        }
        let previous = self.origin.replace(Origin::new(
            session.id,
            session.resp3,
            session.subscriptions.any(),
        ));
        debug_assert!(previous.is_none(), "a client's request inside another's");
        let reply_start = reply.len();
        let records_before = self.effects.records;
        let mut outcome = self.dispatch(session, reply, request, mode, host);
        if self.effects.records != records_before {
            // Its records go into the stream at the end of the turn, after those already
            // in the turn's buffer: WAIT waits for replicas to reach their end.
            session.write_offset = self
                .state
                .replication
                .offset_after(self.effects.buffer.len());
            session.write_record = self.effects.records;
        }
        if matches!(outcome, Outcome::Postpone) {
            self.origin = None;
            return outcome;
        }
        if session.modes.reply != crate::commands::ReplyMode::On && operator::drop_reply(session) {
            reply.truncate(reply_start);
            // A reply the event loop writes later is dropped too.
            if let Outcome::Reload(reload) = &mut outcome {
                reload.reply = false;
            }
        }
        // Pub/sub's confirmations go out whatever CLIENT REPLY says.
        reply.append(&mut session.silenced_pushes);
        let origin = self.origin.take().expect("set above");
        reply.extend_from_slice(&origin.messages);
        // CLIENT CACHING covers the next command, or the whole transaction it opens, and
        // survives other CLIENT commands (Redis's `resetClient`).
        if client_request
            && session.multi.is_none()
            && self.state.tracking.has_caching(session.id)
            && self.registry.get(request.argv[0]).map(|spec| spec.name) != Some("client")
        {
            self.state.tracking.command_done(session.id);
        }
        outcome
    }

    /// Keeps the tracking table within `tracking-table-max-keys` (before a client's
    /// command, and from the cron). `current`: the session about to run a command and its
    /// reply buffer, where what is due to it goes (it is out of the host's table).
    pub fn limit_tracking_table(
        &mut self,
        current: Option<(&SessionState, &mut Vec<u8>)>,
        host: &mut dyn Host,
    ) {
        let max_keys = self.state.config.tracking_table_max_keys;
        let (running, mut origin) = match &current {
            Some((session, _)) => (
                Some(session.id),
                Some(Origin::new(
                    session.id,
                    session.resp3,
                    session.subscriptions.any(),
                )),
            ),
            None => (None, None),
        };
        self.state
            .tracking
            .limit_keys(max_keys, running, &mut |id, message| {
                Origin::route(origin.as_mut(), host, id, message)
            });
        if let (Some((_, reply)), Some(origin)) = (current, origin) {
            reply.extend_from_slice(&origin.messages);
        }
    }

    /// Sends the BCAST invalidations of the keys changed since the last call: at the end
    /// of every turn of the event loop, as Redis does before it sleeps (no client runs a
    /// command meanwhile, so every receiver is reached through the host).
    pub fn broadcast_invalidations(&mut self, host: &mut dyn Host) {
        if self.state.tracking.total_prefixes() > 0 {
            self.state
                .tracking
                .broadcast(&mut |id, message| host.deliver(id, message));
        }
    }

    /// Runs one request for `session` (the checks, queueing inside MULTI, the handler and
    /// what it asked for).
    fn dispatch(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        request: Request<'_>,
        mode: Mode,
        host: &mut dyn Host,
    ) -> Outcome {
        let argv = request.argv;
        assert!(!argv.is_empty(), "an empty request reaches no command");
        let (spec, top_id) = match self.registry.resolve(argv) {
            Some(found) => found,
            None => {
                let refusal = match mode {
                    Mode::Script(_) => Refusal::ScriptUnknownCommand,
                    _ => Refusal::UnknownCommand(crate::commands::unknown_command_error(argv)),
                };
                return self.refuse(session, reply, refusal);
            }
        };
        // The entry its statistics go to: the subcommand of a container.
        let id = crate::command_stats::command_id(top_id, argv);
        let refusal = match &mode {
            Mode::Replay | Mode::Master => {
                (!spec.arity_ok(argv.len())).then_some(Refusal::WrongArity(spec.name))
            }
            Mode::Client | Mode::Exec | Mode::ServeBlocked(_) => {
                if mode == Mode::Client {
                    self.evict_before_command(host);
                }
                self.refusal(session, spec, argv, &mode)
                    .or_else(|| subcommand_arity_refusal(top_id, id, argv.len()))
            }
            Mode::Script(script) => self.script_refusal(session, spec, argv, script),
        };
        if let Some(refusal) = refusal {
            self.log_denial(session, argv, &refusal, &mode, host);
            let outcome = if spec.name == "exec" && session.multi.is_some() {
                // Monitors see the EXEC that ends the MULTI they saw (Redis's
                // `execCommandAbort`).
                let outcome = self.abort_exec(session, reply, refusal);
                self.feed_monitors(session, reply, spec, argv, &mode, host);
                outcome
            } else {
                self.refuse(session, reply, refusal)
            };
            self.state.commands.rejected(id);
            return outcome;
        }
        if mode == Mode::Client {
            if self.monitor_refused(session, spec, argv) {
                let outcome = self.refuse(session, reply, Refusal::ReplicaKeyspace);
                self.state.commands.rejected(id);
                return outcome;
            }
            if self.paused(session, spec, argv) {
                return Outcome::Postpone;
            }
        }
        if session.multi.is_some() && !transaction::runs_inside_multi(spec) {
            // The bound protects the server from its clients; the log's own transactions
            // and the master's are trusted, whatever their size (a script's effects can
            // pass the limit; Redis bounds neither).
            let limit = if mode == Mode::Client && !session.master_link {
                self.state.config.query_buffer_bytes_max
            } else {
                usize::MAX
            };
            return match transaction::queue(session, spec, argv, limit) {
                Ok(()) => {
                    ReplyWriter::new(reply, session.resp3).simple("QUEUED");
                    session.last_command = spec.name;
                    Outcome::Done
                }
                Err(refusal) => {
                    let outcome = self.refuse(session, reply, refusal);
                    self.state.commands.rejected(id);
                    outcome
                }
            };
        }
        let in_exec = mode == Mode::Exec;
        let served = matches!(mode, Mode::ServeBlocked(_));
        // The replay is not timed: Redis's AOF loading does not count its commands.
        let started = (mode != Mode::Replay).then(std::time::Instant::now);
        self.state.commands.begin();
        let action = self.run(session, reply, spec, request, mode.clone(), started, host);
        // A script's line comes before the lines of its commands; others' after the
        // command (EXEC's after its queue's).
        let fed_first = matches!(action, Action::RunScript(_));
        if fed_first {
            self.feed_monitors(session, reply, spec, argv, &mode, host);
        }
        let outcome = self.after(session, reply, action, host, in_exec);
        if !fed_first {
            self.feed_monitors(session, reply, spec, argv, &mode, host);
        }
        if let Some(started) = started {
            let ran = stats::Ran {
                spec,
                id,
                argv,
                duration: started.elapsed(),
                blocked: matches!(outcome, Outcome::Block(_)),
                served,
            };
            self.record_call(session, ran, host);
        }
        outcome
    }

    /// Runs the handler of `spec` in a context built here (the only place one is built).
    /// `started`: when the command's timer started (its time is read from that instant).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        spec: &'static CommandSpec,
        request: Request<'_>,
        mode: Mode,
        started: Option<std::time::Instant>,
        host: &mut dyn Host,
    ) -> Action {
        let replay = mode == Mode::Replay;
        // The master's commands (its transactions' too) see keys as the master does:
        // nothing expires here, a past expiry is set rather than deleting (Redis's
        // `checkAlreadyExpired` on a replica).
        let as_master = replay || session.master_link;
        let in_script = matches!(mode, Mode::Script(_));
        let now_ms = match (&mode, started) {
            (Mode::Script(script), _) => script.now_ms,
            (_, Some(started)) => crate::clock::unix_ms_at(started),
            (_, None) => crate::clock::unix_ms(),
        };
        let block_mode = match mode {
            Mode::Client => BlockMode::Normal,
            Mode::ServeBlocked(key) => BlockMode::Serving(key),
            Mode::Exec | Mode::Replay | Mode::Master | Mode::Script(_) => BlockMode::Never,
        };
        // A replica's clients see expired keys as gone, but only the master deletes them
        // (a write on a writable replica deletes the expired key it finds, Redis's
        // `force_delete_expired`); so does everyone during CLIENT PAUSE, which keeps the
        // dataset as it is (Redis's expireIfNeeded while clients are paused).
        let writable_replica_write =
            spec.has(flags::WRITE) && !self.state.config.replication.replica_read_only;
        let replica = self.state.replication.is_replica();
        let keep_expired = !as_master
            && ((replica && !writable_replica_write) || self.state.pause.freezes_dataset(now_ms));
        let mut ctx = Ctx {
            keyspace: &mut self.keyspace,
            out: ReplyWriter::new(reply, session.resp3),
            client: session,
            server: &mut self.state,
            effects: &mut self.effects,
            now_ms,
            loading: as_master,
            keep_expired,
            block_mode,
            in_script,
            big_arguments: request.big_arguments,
            host,
            write_lookups: spec.has(flags::WRITE),
            origin: self.origin.as_mut(),
            accessed: smallvec::SmallVec::new(),
        };
        let memory_max_before = ctx.server.config.memory_bytes_max;
        crate::access::set_now(now_ms);
        // A crash report names the command (never its arguments).
        let running = crate::crash_report::running(spec.name);
        let action = (spec.handler)(&mut ctx, request.argv);
        drop(running);
        let ctx_errors = std::mem::take(&mut ctx.out.error_kinds);
        if spec.has(flags::READONLY) && self.state.tracking.client_count() > 0 && !replay {
            self.remember_tracked_keys(session, spec, request.argv, in_script);
        }
        if replica && writable_replica_write && !as_master && !in_script {
            let keys: Vec<&[u8]> = crate::commands::tracked_key_positions(spec, request.argv)
                .into_iter()
                .map(|index| request.argv[index])
                .collect();
            self.remember_replica_keys_with_expire(session.db, &keys);
        }
        self.state.commands.count_errors(&ctx_errors);
        self.state.stats.total_commands_processed += 1;
        session.last_command = spec.name;
        // Only commands that read or write keys can show state not yet durable.
        let shows = if spec.has(flags::WRITE) {
            ReplyShows::Writes
        } else if spec.has(flags::READONLY) {
            ReplyShows::Reads
        } else {
            ReplyShows::Nothing
        };
        session.reply_shows = session.reply_shows.max(shows);
        if spec.name == "config" {
            self.state.config.encoding_limits.apply();
            crate::server_log::apply(&self.state.config.loglevel);
            self.eviction_after_config(memory_max_before);
            // CONFIG SET min-replicas-*: counted again now (Redis's `updateGoodSlaves`).
            let quorum = self.state.config.replication.write_quorum();
            let now = crate::clock::unix_seconds();
            self.state.replication.replicas.refresh_good(quorum, now);
        }
        action
    }

    /// After a read-only command: its keys are remembered for the client that read them,
    /// if it tracks in the default mode (Redis's `trackingRememberKeys`, whatever the
    /// reply was). A script's reads remember the script's declared keys for its caller;
    /// EVAL_RO and its kin, read-only themselves, remember nothing of their own.
    fn remember_tracked_keys(
        &mut self,
        session: &SessionState,
        spec: &CommandSpec,
        argv: &[&[u8]],
        in_script: bool,
    ) {
        let tracking = &mut self.state.tracking;
        if in_script {
            if let (Some(keys), Some(origin)) = (&self.script_tracked_keys, &self.origin) {
                tracking.remember(origin.id, keys.iter().map(Vec::as_slice));
            }
        } else if !matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
            && !spec.has(flags::PUBSUB)
        {
            let keys = crate::commands::tracked_key_positions(spec, argv);
            tracking.remember(session.id, keys.into_iter().map(|index| argv[index]));
        }
    }

    /// Acts on what a handler asked that the engine can do itself; hands the rest back.
    /// `in_exec`: the command was part of an EXEC's queue.
    fn after(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        action: Action,
        host: &mut dyn Host,
        in_exec: bool,
    ) -> Outcome {
        match action {
            Action::None => Outcome::Done,
            Action::Exec(queued) => {
                // A crash report names EXEC between its commands (each names itself).
                let _running = crate::crash_report::running(session.last_command);
                transaction::exec(self, session, reply, queued, host);
                Outcome::Done
            }
            Action::RunScript(call) => {
                self.script_tracked_keys = self
                    .state
                    .tracking
                    .remembers_reads(session.id)
                    .then(|| call.keys.clone());
                let _running = crate::crash_report::running(session.last_command);
                // Inside EXEC the script's records are already inside EXEC's own block.
                let end = crate::scripting::run::run(self, session, reply, *call, !in_exec, host);
                self.script_tracked_keys = None;
                match end {
                    crate::scripting::run::ScriptEnd::Done => Outcome::Done,
                    // The script was stopped with its effects dropped: the server
                    // cannot go on serving, so it does not wait for replicas.
                    crate::scripting::run::ScriptEnd::ShutdownNoSave => Outcome::Shutdown(
                        crate::shutdown::ShutdownCall::Begin(crate::shutdown::ShutdownFlags {
                            save: ShutdownSave::NoSave,
                            now: true,
                            force: false,
                        }),
                    ),
                }
            }
            Action::ClientList {
                only_self,
                ids,
                kind,
            } => {
                let output = (reply.len(), reply.capacity());
                let text = host.client_list(
                    session,
                    output,
                    only_self,
                    ids.as_deref(),
                    kind,
                    &self.state.tracking,
                );
                ReplyWriter::new(reply, session.resp3).verbatim(text.as_bytes());
                Outcome::Done
            }
            Action::Close => Outcome::Close,
            Action::Shutdown(call) => Outcome::Shutdown(call),
            Action::StartJob(job) => Outcome::StartJob(job),
            Action::Block(blocked) => Outcome::Block(blocked),
            Action::Reload(reload) => Outcome::Reload(reload),
            Action::Replicate(attach) => Outcome::Replicate(attach),
        }
    }

    /// Writes a refusal's error reply and counts it.
    fn refuse(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        refusal: Refusal,
    ) -> Outcome {
        let text = refusal.to_string();
        ReplyWriter::new(reply, session.resp3).error(&text);
        let kind = crate::command_stats::ErrorKind::of(text.as_bytes());
        self.state.commands.error_replied(kind);
        // Redis's flagTransaction: a refused command dooms the transaction.
        if let Some(multi) = &mut session.multi {
            multi.failed = true;
        }
        Outcome::Refused(refusal)
    }

    /// An EXEC refused before it runs discards the transaction (Redis's
    /// `execCommandAbort`): EXECABORT with the refusal's text.
    fn abort_exec(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        refusal: Refusal,
    ) -> Outcome {
        let mut desk = crate::commands::transactions::WatchDesk {
            watches: &mut self.state.watches,
            keyspace: &self.keyspace,
            now_ms: crate::clock::unix_ms(),
        };
        let resp3 = session.resp3;
        desk.abort_exec(
            session,
            &refusal.to_string(),
            &mut ReplyWriter::new(reply, resp3),
        );
        let kind = crate::command_stats::ErrorKind::of(b"EXECABORT ");
        self.state.commands.error_replied(kind);
        Outcome::Refused(refusal)
    }

    /// Why a client's command may not run now, if it may not (Redis's `processCommand`
    /// order of checks). The subscribed context is a client's own rule: the commands of an
    /// EXEC that subscribed run on (Redis runs them without these checks).
    fn refusal(
        &self,
        session: &SessionState,
        spec: &CommandSpec,
        argv: &[&[u8]],
        mode: &Mode,
    ) -> Option<Refusal> {
        if session.master_link {
            // The master's transaction: only the arity, as for its other commands.
            return (!spec.arity_ok(argv.len())).then_some(Refusal::WrongArity(spec.name));
        }
        if !spec.arity_ok(argv.len()) {
            Some(Refusal::WrongArity(spec.name))
        } else if let Some(refusal) = protected_refusal(&self.state.config, session, spec) {
            // Before authentication, as Redis's `processCommand` checks it.
            Some(refusal)
        } else if self.auth_required(session) && !spec.has(flags::NO_AUTH) {
            Some(Refusal::NoAuth)
        } else if session.multi.is_some() && spec.has(flags::NO_MULTI) {
            Some(Refusal::NotInTransaction)
        } else if let Err(denial) = self.state.acl.check(&session.user, spec.name, argv) {
            Some(Refusal::NoPermission {
                denial,
                at_exec: *mode == Mode::Exec,
            })
        } else if *mode == Mode::Client && self.refused_for_memory(session, spec, argv) {
            Some(Refusal::OutOfMemory)
        } else if let Some(error) = self.state.disk_error()
            && (spec.has(flags::WRITE)
                || crate::scripting::declares_writes(&self.state.scripting, spec, argv))
        {
            Some(Refusal::DiskError(error))
        } else if *mode == Mode::Client
            && !self.enough_replicas_for_writes()
            && (spec.has(flags::WRITE)
                || crate::scripting::declares_writes(&self.state.scripting, spec, argv))
        {
            // An EXEC that queued writes is refused by EXEC itself (EXECABORT).
            Some(Refusal::NotEnoughReplicas)
        } else if *mode == Mode::Client
            && self.state.replication.is_replica()
            && self.state.config.replication.replica_read_only
            && (spec.has(flags::WRITE)
                || crate::scripting::declares_writes(&self.state.scripting, spec, argv))
        {
            Some(Refusal::ReadOnlyReplica)
        } else if *mode == Mode::Client
            && !crate::pubsub::Context::of(session.resp3, &session.subscriptions).allows(spec.name)
        {
            Some(Refusal::SubscribedContext(full_name(spec, argv)))
        } else if *mode == Mode::Client
            && !self.state.config.replication.replica_serve_stale_data
            && self.state.replication.master_link_down()
            && (!spec.has(flags::STALE) || transaction::exec_denies_stale(session, spec))
        {
            Some(Refusal::MasterDown)
        } else if self.loading_refuses(spec, argv) {
            Some(Refusal::Loading)
        } else {
            None
        }
    }

    /// -LOADING (Redis's checks, in its order): while the dataset loads, a command not
    /// marked `loading`; while a replica loads its master's asynchronously, one Redis
    /// marks `no-async-loading`.
    fn loading_refuses(&self, spec: &CommandSpec, argv: &[&[u8]]) -> bool {
        let persistence = &self.state.persistence;
        (persistence.loading.is_some() && !spec.has(flags::LOADING))
            || (persistence.async_loading
                && crate::acl::table::table().request_has_flag(spec.name, argv, "no_async_loading"))
    }

    /// Why a script's command may not run (Redis's `scriptCall` checks, in its order).
    fn script_refusal(
        &self,
        session: &SessionState,
        spec: &CommandSpec,
        argv: &[&[u8]],
        script: &crate::scripting::run::ScriptMode,
    ) -> Option<Refusal> {
        let writes = spec.has(flags::WRITE);
        if !spec.arity_ok(argv.len()) {
            Some(Refusal::ScriptWrongArity)
        } else if !self.state.scripts_may_run_noscript
            && (spec.has(flags::NO_SCRIPT) || crate::scripting::subcommand_not_allowed(spec, argv))
        {
            Some(Refusal::NotFromScript)
        } else if let Err(denial) = self.state.acl.check(&session.user, spec.name, argv) {
            Some(Refusal::ScriptNoPermission(denial))
        } else if script.read_only && (writes || crate::pause::may_replicate_by_name(spec.name)) {
            // Redis counts `may_replicate` commands (PFCOUNT, which may write its cached
            // count; PUBLISH, SPUBLISH) as writes here (`scriptVerifyWriteCommandAllow`).
            Some(Refusal::WriteInReadOnlyScript)
        } else if writes
            && !script.wrote
            && let Some(error) = self.state.disk_error()
        {
            Some(Refusal::DiskError(error))
        } else if writes
            && !script.wrote
            && self.state.replication.is_replica()
            && self.state.config.replication.replica_read_only
        {
            Some(Refusal::ReadOnlyReplica)
        } else if writes && !script.wrote && !self.enough_replicas_for_writes() {
            Some(Refusal::NotEnoughReplicas)
        } else if spec.has(flags::DENYOOM)
            && !script.wrote
            && !script.allow_oom
            && self.state.eviction.out_of_memory
            && self.state.config.memory_bytes_max != 0
        {
            // Redis's `scriptVerifyOOM`: as the script started over the limit, it may not
            // begin to grow memory (once it wrote, it cannot be stopped half done).
            Some(Refusal::OutOfMemory)
        } else if self.loading_refuses(spec, argv) {
            Some(Refusal::Loading)
        } else {
            None
        }
    }

    /// Records an ACL denial in ACL LOG (Redis's `addACLLogEntry`): the command, key or
    /// channel refused, where it ran, who ran it.
    fn log_denial(
        &mut self,
        session: &SessionState,
        argv: &[&[u8]],
        refusal: &Refusal,
        mode: &Mode,
        host: &dyn Host,
    ) {
        let (denial, context) = match (refusal, mode) {
            (Refusal::ScriptNoPermission(denial), _) => (denial, crate::acl::log::Context::Lua),
            (Refusal::NoPermission { denial, .. }, Mode::Exec) => {
                (denial, crate::acl::log::Context::Multi)
            }
            (Refusal::NoPermission { denial, .. }, _) if session.multi.is_some() => {
                (denial, crate::acl::log::Context::Multi)
            }
            (Refusal::NoPermission { denial, .. }, _) => {
                (denial, crate::acl::log::Context::TopLevel)
            }
            _ => return,
        };
        let (reason, object) = match denial.denied {
            Denied::Command => (
                crate::acl::log::Reason::Command,
                denial.command.as_bytes().to_vec(),
            ),
            Denied::Key(index) => (crate::acl::log::Reason::Key, argv[index].to_vec()),
            Denied::Channel(index) => (crate::acl::log::Reason::Channel, argv[index].to_vec()),
        };
        let entry = crate::acl::log::Entry {
            count: 1,
            reason,
            context,
            object,
            username: session.user.name().to_vec(),
            time_ms: crate::clock::unix_ms(),
            client_info: host.describe_client(session, &denial.command, &self.state.tracking),
        };
        let max_len = self.state.config.acllog_max_len as usize;
        self.state.acl.log.add(entry, max_len);
    }

    /// Over `maxmemory` with nothing to evict, whether this command is refused (Redis's
    /// `processCommand`): a `denyoom` command, or a script declaring it may write
    /// without `allow-oom`; inside MULTI, anything that would be queued (EXEC of a queue
    /// holding one of those is refused by EXEC: `commands::transactions`). A command not
    /// allowed in MULTI gets that error instead.
    fn refused_for_memory(
        &self,
        session: &SessionState,
        spec: &CommandSpec,
        argv: &[&[u8]],
    ) -> bool {
        if !self.state.eviction.out_of_memory || self.state.config.memory_bytes_max == 0 {
            return false;
        }
        match &session.multi {
            Some(_) if spec.has(flags::NO_MULTI) => false,
            // EXEC of a queue holding one is refused by EXEC itself, which must end the
            // transaction (EXECABORT, as for MISCONF).
            Some(_) => !matches!(spec.name, "exec" | "discard" | "quit" | "reset"),
            None => evict::denies_memory(&self.state.scripting, spec, argv),
        }
    }

    /// `min-replicas-to-write`: whether enough replicas acknowledged within
    /// `min-replicas-max-lag` for writes to run (Redis's `checkGoodReplicasStatus`).
    pub fn enough_replicas_for_writes(&self) -> bool {
        if self.state.replication.is_replica() {
            return true; // Redis's checkGoodReplicasStatus: a replica is never refused so
        }
        let quorum = self.state.config.replication.write_quorum();
        self.state.replication.replicas.enough_for_writes(quorum)
    }

    /// Whether the session must still AUTH: a password is set now and it has not given it.
    pub fn auth_required(&self, session: &SessionState) -> bool {
        self.state.acl.auth_required() && !session.authenticated
    }
}

/// A protected command its directive does not allow from `session` (Redis's
/// `allowProtectedAction`): DEBUG under `enable-debug-command`. (MODULE's protected
/// subcommands answer in their handler: `commands::standalone`.)
fn protected_refusal(
    config: &Config,
    session: &SessionState,
    spec: &CommandSpec,
) -> Option<Refusal> {
    (spec.name == "debug" && !config.enable_debug_command.allows(session.local)).then_some(
        Refusal::ProtectedCommand {
            name: "DEBUG",
            directive: "enable-debug-command",
        },
    )
}

/// A subcommand given the wrong number of arguments (Redis checks a subcommand's arity
/// with its command's, before running it).
fn subcommand_arity_refusal(
    top_id: Option<usize>,
    id: Option<usize>,
    argc: usize,
) -> Option<Refusal> {
    let id = id.filter(|&id| Some(id) != top_id)?;
    let command = &crate::acl::table::table().commands[id];
    let arity = command.arity;
    let argc = argc as i64;
    let fits = if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    };
    (!fits).then_some(Refusal::WrongArity(command.full_name.as_str()))
}

/// Commands whose first argument names a subcommand: Redis names them `name|sub` in
/// errors.
const CONTAINERS: &[&str] = &["client", "command", "config", "memory", "object", "pubsub"];

/// A command's name as Redis's errors give it: `get`, `config|get`.
fn full_name(spec: &CommandSpec, argv: &[&[u8]]) -> String {
    match argv.get(1) {
        Some(sub) if CONTAINERS.contains(&spec.name) => {
            format!(
                "{}|{}",
                spec.name,
                crate::commands::lossy(sub).to_ascii_lowercase()
            )
        }
        _ => spec.name.to_string(),
    }
}
