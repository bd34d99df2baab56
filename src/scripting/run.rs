//! Running one script (the engine's side of EVAL): KEYS and ARGV, `redis.call` through the
//! engine, the reply, and the script's effects as one unit in the log.
//!
//! A script's commands run as the engine's `Mode::Script` on a session of their own (the
//! script's "client": the caller's database, RESP2 until `redis.setresp(3)`, never in
//! MULTI), so every check, handler and propagation is the one a client's command gets;
//! only the refusals speak as Redis speaks to scripts. The reply of each command is
//! parsed back into Lua (`reply::push_reply`).
//!
//! The Lua side is made once per interpreter (`register`): `redis.call` and `redis.pcall`
//! are C functions, `redis.setresp` and `redis.acl_check_cmd` Rust callbacks, and a count
//! hook watches for busy scripts. They reach the run in progress — the engine, the
//! script's session, the caller's host — through a `RunContext` that `run` installs for
//! exactly the length of its Lua call (`Installed`); reached with no run installed, they
//! answer with Redis's "can only be called inside a script invocation" error.

use super::busy::{Busy, BusyRequest, HOOK_INSTRUCTIONS, KILLED};
use super::reply;
use crate::commands::{SessionState, flags, global_registry};
use crate::engine::{Engine, Host, Mode, Outcome, Request};
use crate::resp::ReplyWriter;
use mlua::{Lua, MultiValue, Value, ffi};
use smallvec::SmallVec;
use std::cell::Cell;
use std::ffi::c_int;
use std::time::{Duration, Instant};

/// What runs: a cached script (EVAL, EVALSHA) or a library's function (FCALL).
#[derive(Debug, PartialEq, Eq)]
pub enum Target {
    Script([u8; 40]),
    Function(String),
}

impl Target {
    /// How errors name it ("script: <name>").
    fn name(&self) -> String {
        match self {
            Target::Script(sha) => String::from_utf8_lossy(sha).into_owned(),
            Target::Function(name) => name.clone(),
        }
    }
}

/// An EVAL or FCALL the handler has checked: the engine runs it (`Action::RunScript`).
#[derive(Debug, PartialEq, Eq)]
pub struct ScriptCall {
    pub target: Target,
    /// For a function, the caller's command name, the function's name and the key count
    /// as sent (FUNCTION STATS shows the whole command while it runs); empty for a script.
    pub head: Vec<Vec<u8>>,
    pub keys: Vec<Vec<u8>>,
    pub args: Vec<Vec<u8>>,
    /// EVAL_RO / EVALSHA_RO, or a script declaring `no-writes`: write commands are refused.
    pub read_only: bool,
    /// The script declares `allow-oom`: over `maxmemory`, its commands run anyway.
    pub allow_oom: bool,
}

/// What the engine checks for a command a script runs (`Mode::Script`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptMode {
    pub read_only: bool,
    /// The script has written: later writes are no longer refused for the state of the
    /// server (MISCONF), since a script cannot be stopped half done (Redis's
    /// SCRIPT_WRITE_DIRTY).
    pub wrote: bool,
    /// The script declares `allow-oom` (Redis's SCRIPT_ALLOW_OOM).
    pub allow_oom: bool,
    /// The script's start, the clock of all its commands (Redis's `scriptTimeSnapshot`):
    /// a key does not expire in the middle of a script.
    pub now_ms: i64,
}

/// How a script's run ended, for the engine.
#[derive(Debug, PartialEq, Eq)]
pub enum ScriptEnd {
    Done,
    /// SHUTDOWN NOSAVE arrived while it ran: it was stopped and its effects dropped.
    ShutdownNoSave,
}

/// The host the script's commands see. The caller is out of the sessions' table while it
/// runs the script, and its script runs on a session of its own: a message for the
/// caller (a RESP3 client subscribed to what the script publishes) is kept here, in the
/// caller's protocol, for its reply.
struct CallerHost<'a> {
    host: &'a mut dyn Host,
    caller: u64,
    /// The caller's session (ACL LOG describes it for a script's denials).
    caller_state: &'a SessionState,
    resp3: bool,
    messages: Vec<u8>,
}

impl Host for CallerHost<'_> {
    fn client_list(
        &self,
        current: &SessionState,
        current_output: (usize, usize),
        only_self: bool,
        ids: Option<&[u64]>,
        kind: Option<crate::commands::ClientKind>,
        tracking: &crate::tracking::Tracking,
    ) -> String {
        self.host
            .client_list(current, current_output, only_self, ids, kind, tracking)
    }

    fn deliver(&mut self, id: u64, message: &crate::pubsub::Message<'_>) -> bool {
        if id == self.caller {
            let subscribed = self.caller_state.subscriptions.any();
            if message.reaches(self.resp3, subscribed) {
                message.write(&mut ReplyWriter::new(&mut self.messages, self.resp3));
            }
            true
        } else {
            self.host.deliver(id, message)
        }
    }

    fn client_exists(&self, id: u64) -> bool {
        id == self.caller || self.host.client_exists(id)
    }

    fn clients_memory(&self) -> u64 {
        self.host.clients_memory()
    }

    fn serve_while_busy(
        &mut self,
        busy: &Busy,
        desk: &mut crate::commands::transactions::WatchDesk,
    ) -> BusyRequest {
        self.host.serve_while_busy(busy, desk)
    }

    fn kill_clients(&mut self, victims: &crate::commands::Victims<'_>) -> usize {
        self.host.kill_clients(victims)
    }

    fn feed_monitor(&mut self, id: u64, line: &[u8]) {
        self.host.feed_monitor(id, line)
    }

    /// The script's caller, as Redis logs a script's denials.
    fn describe_client(
        &self,
        _current: &SessionState,
        command: &str,
        tracking: &crate::tracking::Tracking,
    ) -> String {
        self.host
            .describe_client(self.caller_state, command, tracking)
    }
}

/// The run in progress, as the Lua callbacks reach it.
struct RunContext<'a> {
    engine: &'a mut Engine,
    /// What runs, and how it was called.
    call: &'a ScriptCall,
    /// The script's own session (its "client").
    session: SessionState,
    mode: ScriptMode,
    host: CallerHost<'a>,
    /// An EVAL (not a function), and whether SHUTDOWN NOSAVE may stop it (see `Busy`).
    eval: bool,
    may_shutdown: bool,
    /// When the run started and `busy-reply-threshold` (None: 0, never busy).
    started: Instant,
    threshold: Option<Duration>,
    /// What the clients served while the script was busy asked for.
    busy_request: BusyRequest,
    /// The script is to stop (`internal.killed` is set): every later look raises again.
    killed: bool,
    /// The reply of the command `redis.call` ran last (a buffer kept from run to run).
    reply: Vec<u8>,
    /// Numeric arguments of `redis.call`, formatted as Redis formats them (also kept).
    numbers: Vec<u8>,
    /// A panic in a command, resumed once the Lua call is over.
    panic: Option<Box<dyn std::any::Any + Send>>,
}

thread_local! {
    /// The `RunContext` of the run in progress on this thread, or null (see `Installed`).
    static CURRENT_RUN: Cell<*mut ()> = const { Cell::new(std::ptr::null_mut()) };
}

/// Makes a `RunContext` reachable from the Lua callbacks until it is dropped — on every
/// way out of `run`'s Lua call, a panic's unwinding included. The owner of the context
/// must not touch it while this guard lives.
struct Installed {
    previous: *mut (),
}

impl Installed {
    fn new(run: *mut RunContext<'_>) -> Installed {
        let previous = CURRENT_RUN.with(|current| current.replace(run.cast()));
        Installed { previous }
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        CURRENT_RUN.with(|current| current.set(self.previous));
    }
}

/// Calls `f` with the run in progress; None when no run is installed (a callback reached
/// outside `run`) or when another callback holds it: while `f` runs, the run is out of
/// reach, so no two callbacks ever hold it at once.
fn with_run<R>(f: impl FnOnce(&mut RunContext<'_>) -> R) -> Option<R> {
    let pointer = CURRENT_RUN.with(|current| current.replace(std::ptr::null_mut()));
    if pointer.is_null() {
        return None;
    }
    struct PutBack(*mut ());
    impl Drop for PutBack {
        fn drop(&mut self) {
            CURRENT_RUN.with(|current| current.set(self.0));
        }
    }
    let _put_back = PutBack(pointer);
    // SAFETY: a non-null pointer was stored by `Installed::new` from the `RunContext` that
    // `run` keeps on its stack and does not touch until the `Installed` guard is dropped,
    // which takes the pointer away again; Lua calls back only from inside that call, so the
    // context is alive. The pointer was swapped for null above and is put back only when
    // `f` is done, so this is the one reference to the context meanwhile. `f` is generic
    // over the context's lifetime and cannot keep the reference.
    let run = unsafe { &mut *(pointer as *mut RunContext<'_>) };
    Some(f(run))
}

/// Runs `call` for `session`, writing the EVAL reply to `reply`. `wrap_effects`: wrap the
/// script's records in MULTI … EXEC when there are several (not inside EXEC, whose own
/// block already holds them). `host` delivers what the script publishes and answers the
/// other clients if the script runs past `busy-reply-threshold`.
pub fn run(
    engine: &mut Engine,
    session: &mut SessionState,
    reply: &mut Vec<u8>,
    call: ScriptCall,
    wrap_effects: bool,
    host: &mut dyn Host,
) -> ScriptEnd {
    let mut out = ReplyWriter::new(reply, session.resp3);
    let scripting = &mut engine.state.scripting;
    let prepared = match &call.target {
        Target::Script(sha) => scripting.prepare(sha),
        Target::Function(name) => scripting.prepare_function(name),
    };
    let Some((lua, function, internals)) = prepared else {
        out.error(match call.target {
            Target::Script(_) => "NOSCRIPT No matching script. Please use EVAL.",
            Target::Function(_) => "ERR Function not found",
        });
        engine.state.commands.count_errors(&out.error_kinds);
        return ScriptEnd::Done;
    };
    let (command_reply, numbers) = scripting.take_buffers();
    let is_eval = matches!(call.target, Target::Script(_));
    let threshold_ms = engine.state.config.busy_reply_threshold_ms;
    let mark = engine.effects.mark();
    let mut context = RunContext {
        engine: &mut *engine,
        call: &call,
        session: SessionState {
            id: u64::MAX,
            db: session.db,
            authenticated: true,
            user: session.user.clone(),
            local: session.local,
            ..SessionState::default()
        },
        mode: ScriptMode {
            read_only: call.read_only,
            wrote: false,
            allow_oom: call.allow_oom,
            now_ms: crate::clock::unix_ms(),
        },
        host: CallerHost {
            host,
            caller: session.id,
            caller_state: &*session,
            resp3: session.resp3,
            messages: Vec::new(),
        },
        eval: is_eval,
        may_shutdown: wrap_effects,
        started: Instant::now(),
        threshold: (threshold_ms > 0).then(|| Duration::from_millis(threshold_ms)),
        busy_request: BusyRequest::Continue,
        killed: false,
        reply: command_reply,
        numbers,
        panic: None,
    };
    let result = {
        let _installed = Installed::new(&mut context);
        call_script(&lua, &function, &internals, &call, is_eval)
    };
    if context.killed {
        // Also when the run failed: the next one must not start stopped.
        let _ = internals.table.raw_set("killed", Value::Nil);
    }
    if let Some(panic) = context.panic.take() {
        std::panic::resume_unwind(panic);
    }
    let RunContext {
        session: script_session,
        host: CallerHost { messages, .. },
        busy_request,
        reply: command_reply,
        numbers,
        ..
    } = context;
    engine.state.scripting.put_buffers(command_reply, numbers);
    let shutdown = busy_request == BusyRequest::ShutdownNoSave;
    if shutdown {
        // None of a stopped script's effects may reach the log: they would replay a half.
        engine.effects.discard_since(mark);
    }
    // What the script published to its caller (a RESP3 subscriber) comes before the
    // reply, as in Redis.
    out.buf.extend_from_slice(&messages);
    // The script's commands revealed what they read and wrote: the EVAL reply waits for
    // the log as long as theirs would have.
    session.reply_shows = session.reply_shows.max(script_session.reply_shows);
    if wrap_effects && !shutdown {
        engine.effects.wrap_since(mark);
    }
    let counted_before = out.error_kinds.len();
    let elsewhere_before = out.errors_counted_elsewhere;
    let written = match result {
        Ok((ok, value)) => write_result(&mut out, ok, value, script_session.resp3, &call.target),
        Err(error) => {
            out.error(&format!(
                "ERR Error running script {}, {:.100}",
                call.target.name(),
                error.to_string()
            ));
            Ok(())
        }
    };
    if let Err(error) = written {
        out.error(&format!("ERR Error running script: {error}"));
    }
    engine
        .state
        .commands
        .count_errors(&out.error_kinds[counted_before..]);
    // The errors commands of the script replied, already counted there: the script
    // failed all the same (Redis's ERR_REPLY_FLAG_NO_STATS_UPDATE).
    engine
        .state
        .commands
        .failed_without_count(out.errors_counted_elsewhere - elsewhere_before);
    if shutdown {
        ScriptEnd::ShutdownNoSave
    } else {
        ScriptEnd::Done
    }
}

/// Calls the script under Redis's error handler, KEYS and ARGV set (EVAL) or given as its
/// two arguments (a function): `(true, result)` or `(false, error)`, as Redis's
/// `lua_pcall` with `__redis__err__handler` ends.
fn call_script(
    lua: &Lua,
    function: &mlua::Function,
    internals: &super::sandbox::Internals,
    call: &ScriptCall,
    is_eval: bool,
) -> mlua::Result<(bool, Value)> {
    let (keys, args) = (&call.keys, &call.args);
    // SAFETY: `exec_raw` pushes the three values (stack 1-3) and runs the closure in
    // protected mode, so the Lua errors its calls may raise (out of memory) are caught;
    // the closure holds only references and plain values, nothing to drop if one unwinds
    // it. `lua_checkstack` makes room for what it pushes; the script runs under
    // `lua_pcall`, which catches its errors. It leaves exactly two values: the outcome
    // and the result or error.
    unsafe {
        lua.exec_raw::<(bool, Value)>(
            (&internals.error_handler, &internals.real_globals, function),
            |state| {
                if ffi::lua_checkstack(state, 4) == 0 {
                    ffi::lua_pushstring(state, c"stack overflow".as_ptr());
                    ffi::lua_error(state);
                }
                let arguments = if is_eval {
                    // EVAL's are globals (new tables every run, as Redis's luaCreateArray).
                    reply::push_bytes(state, b"KEYS");
                    push_array(state, keys);
                    ffi::lua_rawset(state, 2);
                    reply::push_bytes(state, b"ARGV");
                    push_array(state, args);
                    ffi::lua_rawset(state, 2);
                    0
                } else {
                    // A function gets them as its arguments.
                    push_array(state, keys);
                    push_array(state, args);
                    2
                };
                let status = ffi::lua_pcall(state, arguments, 1, 1);
                // Stack: error handler, globals, result or error.
                ffi::lua_pushboolean(state, (status == 0) as c_int);
                ffi::lua_replace(state, 1);
                ffi::lua_remove(state, 2);
            },
        )
    }
}

/// Pushes a new table holding `items` as a sequence.
///
/// # Safety
/// A valid state with room for two values; may raise Lua's out-of-memory error.
unsafe fn push_array(state: *mut ffi::lua_State, items: &[Vec<u8>]) {
    // SAFETY: the caller's guarantees; the table is on top when each item is pushed.
    unsafe {
        ffi::lua_createtable(state, items.len().min(c_int::MAX as usize) as c_int, 0);
        for (i, item) in items.iter().enumerate() {
            reply::push_bytes(state, item);
            ffi::lua_rawseti_(state, -2, (i + 1) as c_int);
        }
    }
}

/// Makes this interpreter's side of every run: `internal.call` and `internal.pcall`
/// (`redis.call` and `redis.pcall`), `internal.setresp`, `internal.acl_check`, and the
/// busy hook. Called once, when the interpreter is created.
pub(super) fn register(lua: &Lua, internal: &mlua::Table) -> mlua::Result<()> {
    // SAFETY: `redis_call` and `redis_pcall` follow the Lua C function protocol (see
    // `command_from_lua`).
    let (call, pcall) = unsafe {
        (
            lua.create_c_function(redis_call)?,
            lua.create_c_function(redis_pcall)?,
        )
    };
    internal.raw_set("call", call)?;
    internal.raw_set("pcall", pcall)?;
    internal.raw_set("setresp", lua.create_function(setresp)?)?;
    internal.raw_set("acl_check", lua.create_function(acl_check)?)?;
    watch_busy(lua, internal)
}

/// Installs the hook that watches a run past `busy-reply-threshold`. Every
/// `HOOK_INSTRUCTIONS` instructions it looks at the run in progress (none: nothing to do);
/// past the threshold it lets the host serve the other clients. Once the script is to stop,
/// every later look raises again (and the prelude's pcall rethrows), so a script cannot
/// catch its way past SCRIPT KILL. A global hook, not a thread's: Lua 5.1 gives a
/// coroutine its creator's hook, and only the global one finds its callback from any
/// thread (a script looping in a coroutine would not be killable otherwise).
pub(super) fn watch_busy(lua: &Lua, internal: &mlua::Table) -> mlua::Result<()> {
    let internal = internal.clone();
    lua.set_global_hook(
        mlua::HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
        move |_, _| {
            let look = with_run(|run| {
                if !run.killed
                    && let Some(threshold) = run.threshold
                    && run.started.elapsed() >= threshold
                {
                    let busy = busy_of(run);
                    // Between two instructions no command of the script is running: the
                    // transaction commands the clients send meanwhile may watch keys.
                    let mut desk = crate::commands::transactions::WatchDesk {
                        watches: &mut run.engine.state.watches,
                        keyspace: &run.engine.keyspace,
                        now_ms: crate::clock::unix_ms(),
                    };
                    let request = run.host.serve_while_busy(&busy, &mut desk);
                    if request != BusyRequest::Continue {
                        run.busy_request = request;
                        run.killed = true;
                        return Look::Stopped;
                    }
                }
                if run.killed {
                    Look::Killed
                } else {
                    Look::Running
                }
            });
            match look {
                None | Some(Look::Running) => Ok(mlua::VmState::Continue),
                Some(Look::Stopped) => {
                    internal.raw_set("killed", true)?;
                    Err(mlua::Error::runtime(KILLED))
                }
                Some(Look::Killed) => Err(mlua::Error::runtime(KILLED)),
            }
        },
    )
}

/// What the busy hook saw.
enum Look {
    Running,
    /// The host's clients asked for the script to stop, just now.
    Stopped,
    /// It was to stop already.
    Killed,
}

/// What the host is told of the running script.
fn busy_of<'a>(run: &RunContext<'a>) -> Busy<'a> {
    let state = &run.engine.state;
    let config = &state.config;
    let call: &'a ScriptCall = run.call;
    let function = match &call.target {
        Target::Function(name) => Some(crate::scripting::busy::RunningFunction {
            name,
            head: &call.head,
            keys: &call.keys,
            args: &call.args,
            duration_ms: run.started.elapsed().as_millis() as i64,
        }),
        Target::Script(_) => None,
    };
    let (libraries, functions) = state.scripting.function_counts();
    Busy {
        function,
        libraries,
        functions,
        wrote: run.mode.wrote,
        eval: run.eval,
        may_shutdown: run.may_shutdown,
        bulk_bytes_max: config.bulk_bytes_max,
        query_buffer_bytes_max: config.query_buffer_bytes_max,
        auth_required: state.acl.auth_required(),
        password_set: !state.acl.default_user().nopass,
        clients_max: config.clients_max,
        protected_mode: config.protected_mode,
    }
}

/// The result of the script's call: `true, value` or `false, error table`. An error that
/// a command replied was counted then, and is not again (Redis's
/// `ignore_error_stats_update`).
fn write_result(
    out: &mut ReplyWriter,
    ok: bool,
    value: Value,
    script_resp3: bool,
    target: &Target,
) -> mlua::Result<()> {
    if ok {
        return reply::write_lua(out, &value, script_resp3);
    }
    let name = target.name();
    let Value::Table(error) = value else {
        // Not a table: the error handler did not run (Lua's "not enough memory").
        let message = match &value {
            Value::String(s) => s.to_string_lossy(),
            _ => "execution failure".to_string(),
        };
        let message: String = message.chars().take(100).collect();
        out.error(&format!("ERR Error running script {name}, {message}"));
        return Ok(());
    };
    let message = match error.get::<Value>("err")? {
        Value::String(s) => s.to_string_lossy(),
        Value::Integer(n) => n.to_string(),
        Value::Number(n) => super::format_g(n, 14),
        // Redis 7.0 crashes on `error({})`; an error without a message is reported so.
        _ => "ERR unknown error".to_string(),
    };
    let mut text = message;
    let source = error
        .get::<Option<mlua::LuaString>>("source")
        .ok()
        .flatten();
    let line = error.get::<Value>("line")?;
    let line = match line {
        Value::Integer(n) => Some(n.to_string()),
        Value::Number(n) => Some((n as i64).to_string()),
        Value::String(s) => Some(s.to_string_lossy()),
        _ => None,
    };
    if let (Some(source), Some(line)) = (source, line) {
        text.push_str(&format!(
            " script: {name}, on {}:{}.",
            source.to_string_lossy(),
            line
        ));
    }
    if reply::counted_already(&error)? {
        out.error_counted_elsewhere(&text);
    } else {
        out.error(&text);
    }
    Ok(())
}

/// Redis's texts for `redis.call` / `redis.pcall` refused before any command ran.
const NO_RUN: &[u8] = b"redis.call/pcall can only be called inside a script invocation";
const NO_ARGUMENTS: &[u8] = b"Please specify at least one argument for this redis lib call";
const BAD_ARGUMENTS: &[u8] = b"Lua redis lib command arguments must be strings or integers";

/// What `run_command` did (plain data: see `command_from_lua`).
#[derive(Clone, Copy)]
enum Ran {
    /// The command ran; its reply is these bytes (the run's `reply` buffer).
    Reply(*const u8, usize),
    /// Refused before running, with this message.
    Refused(&'static [u8]),
    /// No run is installed.
    NoRun,
    /// The command panicked (the panic is kept in the run, resumed after the Lua call).
    Panicked,
}

unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C function; see `command_from_lua`.
    unsafe { command_from_lua(state, true) }
}

unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    // SAFETY: called by Lua as a C function; see `command_from_lua`.
    unsafe { command_from_lua(state, false) }
}

/// `redis.call` (`raise`) and `redis.pcall`: runs the command given as arguments and
/// returns its reply as a Lua value; an error reply is raised by `redis.call` (as it is,
/// Redis's error table) and returned by `redis.pcall`.
///
/// Two phases, so that a Lua error (raised here, or out of memory while pushing) never
/// unwinds through a frame holding something to drop: `run_command` does the Rust work
/// and returns plain data; only then is the reply pushed.
///
/// # Safety
/// Called by Lua as a C function, on a valid state with its arguments on the stack.
unsafe fn command_from_lua(state: *mut ffi::lua_State, raise: bool) -> c_int {
    let ran = with_run(|run| {
        if run.panic.is_some() {
            // No command runs on an engine a panic left behind, even if the script caught
            // the error.
            return Ran::Panicked;
        }
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            // SAFETY: `state` is the calling Lua state with the arguments on it.
            unsafe { run_command(state, run) }
        }));
        ran.unwrap_or_else(|panic| {
            run.panic = Some(panic);
            Ran::Panicked
        })
    })
    .unwrap_or(Ran::NoRun);
    // SAFETY: a valid state (the caller's guarantee); `lua_checkstack` makes room for what
    // is pushed. The reply bytes are the run's `reply` buffer, which only the next command
    // changes and which lives until the run ends, after this returns: pushing runs no Lua
    // code that could call back (the only finalizers, mlua's, are Rust that does not).
    unsafe {
        // The arguments are done with (the reply is the run's own bytes): popped, as
        // Redis pops them, so that a call with as many arguments as the stack holds (7,999
        // from `unpack`) still has room for its reply.
        ffi::lua_settop(state, 0);
        if ffi::lua_checkstack(state, 4) == 0 {
            ffi::lua_pushstring(state, c"stack overflow".as_ptr());
            ffi::lua_error(state);
        }
        let failed = match ran {
            Ran::Reply(bytes, len) => {
                let reply = std::slice::from_raw_parts(bytes, len);
                match reply::push_reply(state, reply) {
                    Ok(is_error) => is_error,
                    Err(reply::Malformed) => {
                        reply::push_error_table(state, b"reply of the command could not be read");
                        true
                    }
                }
            }
            Ran::Refused(message) => {
                reply::push_error_table(state, message);
                true
            }
            Ran::NoRun => {
                reply::push_error_table(state, NO_RUN);
                true
            }
            Ran::Panicked => {
                // Whatever the script does with this error, the run resumes the panic once
                // its Lua call returns.
                ffi::lua_pushstring(state, c"a command panicked".as_ptr());
                ffi::lua_error(state)
            }
        };
        if failed && raise {
            ffi::lua_error(state);
        }
        1
    }
}

/// Runs the command whose arguments are on the Lua stack, as the script's client: Redis's
/// `luaArgsToRedisArgv` (strings as they are, numbers as "%.17g", anything else refused),
/// then `Engine::execute` in `Mode::Script`, its reply left in `run.reply`.
///
/// # Safety
/// `state` is a valid Lua state whose stack holds the arguments (1 to top) for as long as
/// this runs. Calls no Lua function that may raise an error.
unsafe fn run_command(state: *mut ffi::lua_State, run: &mut RunContext<'_>) -> Ran {
    crate::crash_report::inject(crate::crash_report::PanicPoint::ScriptCall);
    // SAFETY: the caller's guarantees; `lua_type`, `lua_tonumber` and `lua_tolstring` of a
    // string read the stack without allocating or raising. A string's bytes stay valid
    // while the string is on the stack, which outlasts this function.
    unsafe {
        let count = ffi::lua_gettop(state);
        if count == 0 {
            return Ran::Refused(NO_ARGUMENTS);
        }
        enum Arg {
            Lua(*const u8, usize),
            Number(usize, usize),
        }
        let numbers = &mut run.numbers;
        numbers.clear();
        let mut spans: SmallVec<[Arg; 8]> = SmallVec::with_capacity(count as usize);
        for index in 1..=count {
            match ffi::lua_type(state, index) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let bytes = ffi::lua_tolstring(state, index, &mut len);
                    spans.push(Arg::Lua(bytes as *const u8, len));
                }
                ffi::LUA_TNUMBER => {
                    let start = numbers.len();
                    super::format_g_into(numbers, ffi::lua_tonumber(state, index), 17);
                    spans.push(Arg::Number(start, numbers.len()));
                }
                _ => return Ran::Refused(BAD_ARGUMENTS),
            }
        }
        let numbers = &run.numbers;
        let argv: SmallVec<[&[u8]; 8]> = spans
            .iter()
            .map(|span| match *span {
                Arg::Lua(bytes, len) => std::slice::from_raw_parts(bytes, len),
                Arg::Number(start, end) => &numbers[start..end],
            })
            .collect();
        let writes = global_registry()
            .resolve(&argv)
            .is_some_and(|(spec, _)| spec.has(flags::WRITE));
        run.reply.clear();
        let mode = Mode::Script(run.mode.clone());
        let outcome = run.engine.execute(
            &mut run.session,
            &mut run.reply,
            Request::plain(&argv),
            mode,
            &mut run.host,
        );
        if writes && !matches!(outcome, Outcome::Refused(_)) {
            run.mode.wrote = true;
        }
        Ran::Reply(run.reply.as_ptr(), run.reply.len())
    }
}

/// `redis.setresp(version)`: `true`, or `false, error` (the prelude raises it).
fn setresp(lua: &Lua, args: MultiValue) -> mlua::Result<MultiValue> {
    let refused = with_run(|run| {
        let version = match args.front() {
            Some(Value::Integer(n)) => Some(*n as f64),
            Some(Value::Number(n)) => Some(*n),
            _ => None,
        }
        .map(|v| v as i64);
        if args.len() != 1 {
            Some(&b"redis.setresp() requires one argument."[..])
        } else if version == Some(2) || version == Some(3) {
            run.session.resp3 = version == Some(3);
            None
        } else {
            Some(&b"RESP version must be 2 or 3."[..])
        }
    })
    .unwrap_or(Some(
        &b"redis.setresp can only be called inside a script invocation"[..],
    ));
    let mut out = MultiValue::new();
    match refused {
        None => out.push_back(Value::Boolean(true)),
        Some(message) => {
            out.push_back(Value::Boolean(false));
            out.push_back(Value::Table(reply::error_table(lua, message)?));
        }
    }
    Ok(out)
}

/// `redis.acl_check_cmd`: whether the caller's user may run the command (nil for an
/// unknown one), without running or logging it; or nil and an error table.
fn acl_check(lua: &Lua, args: MultiValue) -> mlua::Result<(Value, Value)> {
    let checked = with_run(|run| {
        let argv = arguments(&args)?;
        let argv: SmallVec<[&[u8]; 8]> = argv.iter().map(Vec::as_slice).collect();
        let Some(spec) = global_registry().get(argv[0]) else {
            return Ok(None);
        };
        let user = &run.session.user;
        Ok(Some(
            run.engine.state.acl.check(user, spec.name, &argv).is_ok(),
        ))
    })
    .unwrap_or(Err(
        &b"redis.acl_check_cmd can only be called inside a script invocation"[..],
    ));
    match checked {
        Ok(None) => Ok((Value::Nil, Value::Nil)),
        Ok(Some(allowed)) => Ok((Value::Boolean(allowed), Value::Nil)),
        Err(message) => {
            let err = reply::error_table(lua, message)?;
            Ok((Value::Nil, Value::Table(err)))
        }
    }
}

/// Redis's `luaArgsToRedisArgv` for Rust callbacks: strings as they are, numbers as
/// "%.17g"; anything else is refused with Redis's message.
fn arguments(args: &MultiValue) -> Result<Vec<Vec<u8>>, &'static [u8]> {
    if args.is_empty() {
        return Err(NO_ARGUMENTS);
    }
    let mut argv = Vec::with_capacity(args.len());
    for arg in args.iter() {
        match arg {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Number(n) => argv.push(super::format_g(*n, 17).into_bytes()),
            Value::Integer(n) => argv.push(super::format_g(*n as f64, 17).into_bytes()),
            _ => return Err(BAD_ARGUMENTS),
        }
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::super::sandbox::Sandbox;
    use mlua::{Function, Value};

    /// Outside a run, the callbacks made once per interpreter answer Redis's error (they
    /// find no context to use), and the busy hook lets any code run.
    #[test]
    fn callbacks_without_a_run_answer_errors() {
        let sandbox = Sandbox::new().unwrap();
        let internal = &sandbox.internals.table;
        let message = |value: Value| -> String {
            value.as_table().unwrap().raw_get::<String>("err").unwrap()
        };
        let no_run = "ERR redis.call/pcall can only be called inside a script invocation";
        let pcall: Function = internal.raw_get("pcall").unwrap();
        assert_eq!(message(pcall.call::<Value>("ping").unwrap()), no_run);
        let call: Function = internal.raw_get("call").unwrap();
        // Raised as Redis's error table (which Redis's pcall turns into its message).
        let raised: String = sandbox
            .lua
            .load("local call = ... local ok, err = pcall(call, 'ping') return err")
            .call(call)
            .unwrap();
        assert_eq!(raised, no_run);
        let setresp: Function = internal.raw_get("setresp").unwrap();
        let (ok, err): (bool, Value) = setresp.call(3).unwrap();
        assert!(!ok);
        assert_eq!(
            message(err),
            "ERR redis.setresp can only be called inside a script invocation"
        );
        let acl_check: Function = internal.raw_get("acl_check").unwrap();
        let (_, err): (Value, Value) = acl_check.call("get").unwrap();
        assert_eq!(
            message(err),
            "ERR redis.acl_check_cmd can only be called inside a script invocation"
        );
        // Past many hook looks, with no run to watch.
        let sum: f64 = sandbox
            .lua
            .load("local n = 0 for i = 1, 1000000 do n = n + 1 end return n")
            .call(())
            .unwrap();
        assert_eq!(sum, 1_000_000.0);
    }
}
