//! Running one script (the engine's side of EVAL): KEYS and ARGV, `redis.call` through the
//! engine, the reply, and the script's effects as one unit in the log.
//!
//! A script's commands run as the engine's `Mode::Script` on a session of their own (the
//! script's "client": the caller's database, RESP2 until `redis.setresp(3)`, never in
//! MULTI), so every check, handler and propagation is the one a client's command gets;
//! only the refusals speak as Redis speaks to scripts. The reply of each command is
//! parsed back into Lua (`reply::to_lua`).

use super::busy::{Busy, BusyRequest, HOOK_INSTRUCTIONS, KILLED};
use super::reply;
use crate::commands::{SessionState, flags, global_registry};
use crate::engine::{Engine, Host, Mode, Outcome, Request};
use crate::resp::ReplyWriter;
use mlua::{Lua, MultiValue, Value};
use smallvec::SmallVec;
use std::cell::RefCell;

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

/// The state of one run that the Lua callbacks share.
struct RunState {
    session: SessionState,
    mode: ScriptMode,
    /// What the clients served while the script was busy asked for.
    busy_request: BusyRequest,
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

    fn serve_while_busy(&mut self, busy: &Busy) -> BusyRequest {
        self.host.serve_while_busy(busy)
    }

    fn kill_clients(&mut self, doomed: &crate::acl::Doomed) {
        self.host.kill_clients(doomed)
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
    let scripting = &engine.state.scripting;
    let prepared = match &call.target {
        Target::Script(sha) => scripting.prepare(sha),
        Target::Function(name) => scripting.prepare_function(name),
    };
    let Some((lua, function, internals)) = prepared else {
        out.error(match call.target {
            Target::Script(_) => "NOSCRIPT No matching script. Please use EVAL.",
            Target::Function(_) => "ERR Function not found",
        });
        engine.state.stats.total_error_replies += 1;
        return ScriptEnd::Done;
    };
    let is_eval = matches!(call.target, Target::Script(_));
    let name = call.target.name();
    let config = &engine.state.config;
    let busy_template = Busy {
        wrote: false,
        eval: is_eval,
        may_shutdown: wrap_effects,
        bulk_bytes_max: config.bulk_bytes_max,
        query_buffer_bytes_max: config.query_buffer_bytes_max,
        auth_required: engine.state.acl.auth_required(),
        password_set: !engine.state.acl.default_user().nopass,
        clients_max: config.clients_max,
        protected_mode: config.protected_mode,
    };
    let threshold_ms = config.busy_reply_threshold_ms;
    let mark = engine.effects.mark();
    let state = RefCell::new(RunState {
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
        busy_request: BusyRequest::Continue,
    });
    // The script's commands and the busy hook both reach the host, never at once (the
    // hook runs between Lua instructions, a command inside one).
    let host = RefCell::new(CallerHost {
        host,
        caller: session.id,
        caller_state: &*session,
        resp3: session.resp3,
        messages: Vec::new(),
    });
    // `redis.call` runs commands on the engine; `redis.acl_check_cmd` only reads it.
    let engine_cell = RefCell::new(&mut *engine);
    let result = lua.scope(|scope| {
        let keys = lua.create_sequence_from(strings(&lua, &call.keys)?)?;
        let args = lua.create_sequence_from(strings(&lua, &call.args)?)?;
        if is_eval {
            // EVAL's are globals; a function gets them as arguments.
            let globals = &internals.real_globals;
            globals.raw_set("KEYS", keys.clone())?;
            globals.raw_set("ARGV", args.clone())?;
        }
        let command = scope.create_function_mut(|lua, args: MultiValue| {
            let mut state = state.borrow_mut();
            let mut engine = engine_cell.borrow_mut();
            script_command(lua, &mut engine, &mut state, &mut *host.borrow_mut(), args)
        })?;
        // `redis.acl_check_cmd`: whether the caller's user may run the command (nil for
        // an unknown one), without running or logging it.
        let acl_check = scope.create_function(|lua, args: MultiValue| {
            let argv = match arguments(lua, &args)? {
                Ok(argv) => argv,
                Err(message) => {
                    let err = reply::error_table(lua, message.as_bytes())?;
                    return Ok((Value::Nil, Value::Table(err)));
                }
            };
            let argv: SmallVec<[&[u8]; 8]> = argv.iter().map(Vec::as_slice).collect();
            let Some(spec) = global_registry().get(argv[0]) else {
                return Ok((Value::Nil, Value::Nil));
            };
            let user = state.borrow().session.user.clone();
            let engine = engine_cell.borrow();
            let allowed = engine.state.acl.check(&user, spec.name, &argv).is_ok();
            Ok((Value::Boolean(allowed), Value::Nil))
        })?;
        let setresp = scope.create_function(|lua, args: MultiValue| {
            let mut out = MultiValue::new();
            let version = match args.front() {
                Some(Value::Integer(n)) => Some(*n as f64),
                Some(Value::Number(n)) => Some(*n),
                _ => None,
            };
            if args.len() != 1 {
                out.push_back(Value::Boolean(false));
                let err = reply::error_table(lua, b"redis.setresp() requires one argument.")?;
                out.push_back(Value::Table(err));
            } else if version.map(|v| v as i64) == Some(2) || version.map(|v| v as i64) == Some(3) {
                state.borrow_mut().session.resp3 = version.map(|v| v as i64) == Some(3);
                out.push_back(Value::Boolean(true));
            } else {
                out.push_back(Value::Boolean(false));
                let err = reply::error_table(lua, b"RESP version must be 2 or 3.")?;
                out.push_back(Value::Table(err));
            }
            Ok(out)
        })?;
        // Called by the hook once the script is past the threshold: the host serves the
        // other clients; true when they asked for the script to stop.
        let busy = scope.create_function(|_, ()| {
            let busy = Busy {
                wrote: state.borrow().mode.wrote,
                ..busy_template.clone()
            };
            let request = host.borrow_mut().serve_while_busy(&busy);
            let stop = request != BusyRequest::Continue;
            if stop {
                state.borrow_mut().busy_request = request;
            }
            Ok(stop)
        })?;
        internals.table.raw_set("command", command)?;
        internals.table.raw_set("acl_check", acl_check)?;
        internals.table.raw_set("setresp", setresp)?;
        internals.table.raw_set("busy", busy)?;
        if threshold_ms > 0 {
            set_busy_hook(&lua, &internals.table, threshold_ms)?;
        }
        let outcome = if is_eval {
            internals.run.call::<MultiValue>(function)
        } else {
            let run_function: mlua::Function = internals.table.raw_get("run_function")?;
            run_function.call::<MultiValue>((function, keys, args))
        };
        lua.remove_hook();
        for name in ["command", "acl_check", "setresp", "busy", "killed"] {
            internals.table.raw_set(name, Value::Nil)?;
        }
        outcome
    });
    // Also when the scope failed before the call (the hook must not outlive the run).
    lua.remove_hook();
    let state = state.into_inner();
    let shutdown = state.busy_request == BusyRequest::ShutdownNoSave;
    if shutdown {
        // None of a stopped script's effects may reach the log: they would replay a half.
        engine.effects.discard_since(mark);
    }
    // What the script published to its caller (a RESP3 subscriber) comes before the
    // reply, as in Redis.
    out.buf.extend_from_slice(&host.into_inner().messages);
    // The script's commands revealed what they read and wrote: the EVAL reply waits for
    // the log as long as theirs would have.
    session.reply_shows = session.reply_shows.max(state.session.reply_shows);
    if wrap_effects && !shutdown {
        engine.effects.wrap_since(mark);
    }
    let errors_before = out.errors;
    let counted = match result {
        Ok(values) => write_result(&mut out, &values, state.session.resp3, &name),
        Err(error) => {
            out.error(&format!(
                "ERR Error running script {name}, {:.100}",
                error.to_string()
            ));
            Ok(true)
        }
    };
    let counted = counted.unwrap_or_else(|error| {
        out.error(&format!("ERR Error running script: {error}"));
        true
    });
    if counted {
        engine.state.stats.total_error_replies += out.errors - errors_before;
    }
    if shutdown {
        ScriptEnd::ShutdownNoSave
    } else {
        ScriptEnd::Done
    }
}

/// Looks at the clock every `HOOK_INSTRUCTIONS` instructions; past the threshold, lets the
/// host serve the other clients (`internal.busy`). Once the script is to stop, every later
/// look raises again (and the prelude's pcall rethrows), so a script cannot catch its way
/// past SCRIPT KILL.
fn set_busy_hook(lua: &Lua, internal: &mlua::Table, threshold_ms: u64) -> mlua::Result<()> {
    let started = std::time::Instant::now();
    let threshold = std::time::Duration::from_millis(threshold_ms);
    let internal = internal.clone();
    lua.set_hook(
        mlua::HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
        move |_, _| {
            let killed = matches!(internal.raw_get::<Value>("killed")?, Value::Boolean(true));
            if !killed && started.elapsed() >= threshold {
                let busy: mlua::Function = internal.raw_get("busy")?;
                if busy.call::<bool>(())? {
                    internal.raw_set("killed", true)?;
                }
            }
            if matches!(internal.raw_get::<Value>("killed")?, Value::Boolean(true)) {
                return Err(mlua::Error::runtime(KILLED));
            }
            Ok(mlua::VmState::Continue)
        },
    )
}

fn strings(lua: &Lua, items: &[Vec<u8>]) -> mlua::Result<Vec<mlua::LuaString>> {
    items.iter().map(|item| lua.create_string(item)).collect()
}

/// The result of `internal.run`: `true, value` or `false, error table`. Returns whether an
/// error it wrote counts in the error statistics (not when a command's error was already
/// counted, Redis's `ignore_error_stats_update`).
fn write_result(
    out: &mut ReplyWriter,
    values: &MultiValue,
    script_resp3: bool,
    name: &str,
) -> mlua::Result<bool> {
    let ok = matches!(values.front(), Some(Value::Boolean(true)));
    let value = values.get(1).cloned().unwrap_or(Value::Nil);
    if ok {
        reply::write_lua(out, &value, script_resp3)?;
        return Ok(true);
    }
    let Value::Table(error) = value else {
        // Not a table: the error handler did not run (Lua's "not enough memory").
        let message = match &value {
            Value::String(s) => s.to_string_lossy(),
            _ => "execution failure".to_string(),
        };
        let message: String = message.chars().take(100).collect();
        out.error(&format!("ERR Error running script {name}, {message}"));
        return Ok(true);
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
    out.error(&text);
    let ignore = matches!(
        error.get::<Value>("ignore_error_stats_update")?,
        Value::Boolean(true)
    );
    Ok(!ignore)
}

/// `redis.call` / `redis.pcall`: returns the reply as a Lua value and whether it is an
/// error (which `redis.call` raises).
fn script_command(
    lua: &Lua,
    engine: &mut Engine,
    state: &mut RunState,
    host: &mut dyn Host,
    args: MultiValue,
) -> mlua::Result<(Value, bool)> {
    let argv = match arguments(lua, &args)? {
        Ok(argv) => argv,
        Err(message) => {
            let err = reply::error_table(lua, message.as_bytes())?;
            return Ok((Value::Table(err), true));
        }
    };
    let argv: SmallVec<[&[u8]; 8]> = argv.iter().map(Vec::as_slice).collect();
    let writes = global_registry()
        .get(argv[0])
        .is_some_and(|spec| spec.has(flags::WRITE));
    let mut buffer = Vec::new();
    let mode = Mode::Script(state.mode.clone());
    let outcome = engine.execute(
        &mut state.session,
        &mut buffer,
        Request::plain(&argv),
        mode,
        host,
    );
    if writes && !matches!(outcome, Outcome::Refused(_)) {
        state.mode.wrote = true;
    }
    match reply::to_lua(lua, &buffer)? {
        Ok(parsed) => Ok(parsed),
        Err(reply::Malformed) => {
            let err = reply::error_table(lua, b"reply of the command could not be read")?;
            Ok((Value::Table(err), true))
        }
    }
}

/// Redis's `luaArgsToRedisArgv`: strings as they are, numbers as "%.17g"; anything else
/// is refused with Redis's message.
fn arguments(lua: &Lua, args: &MultiValue) -> mlua::Result<Result<Vec<Vec<u8>>, String>> {
    let _ = lua;
    if args.is_empty() {
        return Ok(Err(
            "Please specify at least one argument for this redis lib call".into(),
        ));
    }
    let mut argv = Vec::with_capacity(args.len());
    for arg in args.iter() {
        match arg {
            Value::String(s) => argv.push(s.as_bytes().to_vec()),
            Value::Number(n) => argv.push(super::format_g(*n, 17).into_bytes()),
            Value::Integer(n) => argv.push(super::format_g(*n as f64, 17).into_bytes()),
            _ => {
                return Ok(Err(
                    "Lua redis lib command arguments must be strings or integers".into(),
                ));
            }
        }
    }
    Ok(Ok(argv))
}
