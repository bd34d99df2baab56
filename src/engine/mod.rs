//! The engine: the one place a command is executed.
//!
//! `Engine::execute` takes a session's request and does, in Redis's order (its
//! `processCommand`): look the command up; evict keys if memory is over `maxmemory`
//! (`evict`, a client's command only); check its arity, authentication (ACL will join
//! here), memory (`-OOM` for commands that may grow it, with nothing left to evict),
//! MISCONF (the log failing refuses writes), MULTI's own rules and `-LOADING`; queue it if the session is inside MULTI; otherwise build the command's
//! context and run its handler, then act on what the handler asked (run an EXEC's queue,
//! ask the host for CLIENT LIST). What the caller must still do — park the client, start
//! a job, close, shut down — comes back as an `Outcome`.
//!
//! Who calls says so with a `Mode`: a client's request, a blocked client's command run
//! again for a key that became ready, a script's `redis.call` (`crate::scripting`), or
//! the start-up replay of the log. A replica's stream of writes will be one more mode of
//! the same call. Every write's effects go to the effects stream (`crate::effects`) from here,
//! whoever called.
//!
//! The engine owns the dataset (`Keyspace`), the state commands see (`ServerState`) and
//! the effects not yet taken. It owns no socket, thread or file: the event loop
//! (`crate::server`) and the replay (`crate::recovery`) drive it, and lend it a `Host`
//! through which a command reaches the other sessions (CLIENT LIST, pub/sub messages).

pub mod evict;
mod expire;
mod transaction;

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
use crate::types::string::Str;
use bytes::Bytes;
use std::fmt;
use std::sync::Arc;

pub use crate::commands::{Job, ShutdownSave};

/// The dataset, the state commands see, and the effects of writes not yet taken.
pub struct Engine {
    pub keyspace: Keyspace,
    pub state: ServerState,
    pub effects: Effects,
    registry: &'static Registry,
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
    /// SHUTDOWN, with or without a final snapshot.
    Shutdown(ShutdownSave),
    /// Start this background job now.
    StartJob(Job),
    /// Nothing to take yet: park the client until a key is ready or the deadline passes.
    Block(Blocked),
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
    /// The log can't be written (the writer's error): writes are refused.
    LogFailing(crate::log::writer::LogError),
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
            Refusal::LogFailing(error) => {
                write!(f, "MISCONF Errors writing to the AOF file: {error}")
            }
            Refusal::NotInTransaction => {
                f.write_str("ERR Command not allowed inside a transaction")
            }
            Refusal::Loading => f.write_str("LOADING Redis is loading the dataset in memory"),
            Refusal::TransactionTooLarge => f.write_str(
                "ERR Transaction discarded: the queued commands exceed client-query-buffer-limit",
            ),
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
        }
    }
}

impl std::error::Error for Refusal {}

/// What the engine asks of whoever holds the sessions (the event loop; nobody during
/// replay): CLIENT LIST, and pub/sub messages for other sessions. CLIENT KILL and
/// MONITOR will ask it too.
pub trait Host {
    /// CLIENT LIST (every session, or those in `ids`) or, with `only_self`, CLIENT INFO.
    /// `current_output`: the length and capacity of the calling session's reply buffer.
    /// `kind`: only clients of that class (CLIENT LIST TYPE).
    fn client_list(
        &self,
        current: &SessionState,
        current_output: (usize, usize),
        only_self: bool,
        ids: Option<&[u64]>,
        kind: Option<crate::commands::ClientKind>,
    ) -> String;

    /// Appends a pub/sub message to the output of client `id`, in that client's protocol
    /// (never the calling session's: the engine writes its copy into its reply). A client
    /// that is gone, or over its output limit, gets nothing.
    fn deliver(&mut self, id: u64, message: &crate::pubsub::Message<'_>);

    /// A script has run past `busy-reply-threshold`: answer the other clients now (-BUSY;
    /// SCRIPT KILL, FUNCTION KILL, SHUTDOWN NOSAVE) and say what they asked of the script.
    fn serve_while_busy(
        &mut self,
        _busy: &crate::scripting::busy::Busy,
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
    ) -> String {
        String::new()
    }

    fn deliver(&mut self, _: u64, _: &crate::pubsub::Message<'_>) {}
}

impl Engine {
    pub fn new(config: Config, config_file: String, storage: Arc<dyn Storage>) -> Engine {
        let keyspace = Keyspace::new(config.databases);
        Engine {
            keyspace,
            state: ServerState::new(config, config_file, storage),
            effects: Effects::default(),
            registry: global_registry(),
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
        let argv = request.argv;
        assert!(!argv.is_empty(), "an empty request reaches no command");
        let spec = match self.registry.get(argv[0]) {
            Some(spec) => spec,
            None => {
                let refusal = match mode {
                    Mode::Script(_) => Refusal::ScriptUnknownCommand,
                    _ => Refusal::UnknownCommand(crate::commands::unknown_command_error(argv)),
                };
                return self.refuse(session, reply, refusal);
            }
        };
        let refusal = match &mode {
            Mode::Replay => (!spec.arity_ok(argv.len())).then_some(Refusal::WrongArity(spec.name)),
            Mode::Client | Mode::Exec | Mode::ServeBlocked(_) => {
                if mode == Mode::Client {
                    self.evict_before_command(host);
                }
                self.refusal(session, spec, argv, &mode)
            }
            Mode::Script(script) => self.script_refusal(spec, argv, script),
        };
        if let Some(refusal) = refusal {
            return self.refuse(session, reply, refusal);
        }
        if session.multi.is_some() && !transaction::runs_inside_multi(spec) {
            return match transaction::queue(session, spec, argv, &self.state.config) {
                Ok(()) => {
                    ReplyWriter::new(reply, session.resp3).simple("QUEUED");
                    session.last_command = spec.name;
                    Outcome::Done
                }
                Err(refusal) => self.refuse(session, reply, refusal),
            };
        }
        let in_exec = mode == Mode::Exec;
        let action = self.run(session, reply, spec, request, mode, host);
        self.after(session, reply, action, host, in_exec)
    }

    /// Runs the handler of `spec` in a context built here (the only place one is built).
    fn run(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        spec: &'static CommandSpec,
        request: Request<'_>,
        mode: Mode,
        host: &mut dyn Host,
    ) -> Action {
        let replay = mode == Mode::Replay;
        let now_ms = match &mode {
            Mode::Script(script) => script.now_ms,
            _ => crate::clock::unix_ms(),
        };
        let block_mode = match mode {
            Mode::Client => BlockMode::Normal,
            Mode::ServeBlocked(key) => BlockMode::Serving(key),
            Mode::Exec | Mode::Replay | Mode::Script(_) => BlockMode::Never,
        };
        let mut ctx = Ctx {
            keyspace: &mut self.keyspace,
            out: ReplyWriter::new(reply, session.resp3),
            client: session,
            server: &mut self.state,
            effects: &mut self.effects,
            now_ms,
            loading: replay,
            block_mode,
            big_arguments: request.big_arguments,
            host,
            write_lookups: spec.has(flags::WRITE),
            accessed: smallvec::SmallVec::new(),
        };
        let memory_max_before = ctx.server.config.memory_bytes_max;
        crate::access::set_now(now_ms);
        let action = (spec.handler)(&mut ctx, request.argv);
        let errors = ctx.out.errors;
        self.state.stats.total_error_replies += errors;
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
            self.eviction_after_config(memory_max_before);
        }
        action
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
                transaction::exec(self, session, reply, queued, host);
                Outcome::Done
            }
            Action::RunScript(call) => {
                // Inside EXEC the script's records are already inside EXEC's own block.
                match crate::scripting::run::run(self, session, reply, *call, !in_exec, host) {
                    crate::scripting::run::ScriptEnd::Done => Outcome::Done,
                    crate::scripting::run::ScriptEnd::ShutdownNoSave => {
                        Outcome::Shutdown(ShutdownSave::NoSave)
                    }
                }
            }
            Action::ClientList {
                only_self,
                ids,
                kind,
            } => {
                let output = (reply.len(), reply.capacity());
                let text = host.client_list(session, output, only_self, ids.as_deref(), kind);
                ReplyWriter::new(reply, session.resp3).verbatim(text.as_bytes());
                Outcome::Done
            }
            Action::Close => Outcome::Close,
            Action::Shutdown(save) => Outcome::Shutdown(save),
            Action::StartJob(job) => Outcome::StartJob(job),
            Action::Block(blocked) => Outcome::Block(blocked),
        }
    }

    /// Writes a refusal's error reply and counts it.
    fn refuse(
        &mut self,
        session: &mut SessionState,
        reply: &mut Vec<u8>,
        refusal: Refusal,
    ) -> Outcome {
        ReplyWriter::new(reply, session.resp3).error(&refusal.to_string());
        self.state.stats.total_error_replies += 1;
        // Redis's flagTransaction: a refused command dooms the transaction.
        if let Some(multi) = &mut session.multi {
            multi.failed = true;
        }
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
        if !spec.arity_ok(argv.len()) {
            Some(Refusal::WrongArity(spec.name))
        } else if self.auth_required(session) && !spec.has(flags::NO_AUTH) {
            Some(Refusal::NoAuth)
        } else if *mode == Mode::Client && self.refused_for_memory(session, spec, argv) {
            Some(Refusal::OutOfMemory)
        } else if let Some(error) = &self.state.log_error
            && (spec.has(flags::WRITE)
                || crate::scripting::declares_writes(&self.state.scripting, spec, argv))
        {
            Some(Refusal::LogFailing(error.clone()))
        } else if session.multi.is_some() && spec.has(flags::NO_MULTI) {
            Some(Refusal::NotInTransaction)
        } else if *mode == Mode::Client
            && !crate::pubsub::Context::of(session.resp3, &session.subscriptions).allows(spec.name)
        {
            Some(Refusal::SubscribedContext(full_name(spec, argv)))
        } else if self.state.persistence.loading.is_some() && !spec.has(flags::LOADING) {
            Some(Refusal::Loading)
        } else {
            None
        }
    }

    /// Why a script's command may not run (Redis's `scriptCall` checks, in its order).
    fn script_refusal(
        &self,
        spec: &CommandSpec,
        argv: &[&[u8]],
        script: &crate::scripting::run::ScriptMode,
    ) -> Option<Refusal> {
        let writes = spec.has(flags::WRITE);
        if !spec.arity_ok(argv.len()) {
            Some(Refusal::ScriptWrongArity)
        } else if spec.has(flags::NO_SCRIPT) || crate::scripting::subcommand_not_allowed(spec, argv)
        {
            Some(Refusal::NotFromScript)
        } else if script.read_only && writes {
            Some(Refusal::WriteInReadOnlyScript)
        } else if writes
            && !script.wrote
            && let Some(error) = &self.state.log_error
        {
            Some(Refusal::LogFailing(error.clone()))
        } else if spec.has(flags::DENYOOM)
            && !script.wrote
            && !script.allow_oom
            && self.state.eviction.out_of_memory
            && self.state.config.memory_bytes_max != 0
        {
            // Redis's `scriptVerifyOOM`: as the script started over the limit, it may not
            // begin to grow memory (once it wrote, it cannot be stopped half done).
            Some(Refusal::OutOfMemory)
        } else if self.state.persistence.loading.is_some() && !spec.has(flags::LOADING) {
            Some(Refusal::Loading)
        } else {
            None
        }
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

    /// Whether the session must still AUTH: a password is set now and it has not given it.
    pub fn auth_required(&self, session: &SessionState) -> bool {
        self.state.config.requirepass.is_some() && !session.authenticated
    }
}

/// Commands whose first argument names a subcommand: Redis names them `name|sub` in
/// errors.
const CONTAINERS: &[&str] = &["client", "command", "config", "object", "pubsub"];

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
