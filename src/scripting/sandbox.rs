//! The interpreter scripts run in: Lua 5.1 with the libraries Redis gives scripts (base
//! without `loadfile`/`dofile`/`print`, table, string, math, coroutine, and Redis's
//! cjson, cmsgpack, bit and struct), the `redis` table, and protected globals — built by
//! `prelude.lua`, which receives the functions written in Rust through a private table.
//!
//! Functions written in Rust never raise a Lua error themselves (an error from Rust
//! reaches Lua as an opaque userdata, not Redis's message): they return `true, results…`
//! or `false, error`, and the prelude's wrappers raise it the way Redis's C does. The
//! exceptions are `redis.call` and `redis.pcall` (`run::register`), C functions written
//! against Lua's C API, which raise Redis's error table themselves as Redis's do.

use super::LoadError;
use super::rand::{LRAND48_MAX, Lrand48};
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

/// Redis's version as scripts see it (`redis.REDIS_VERSION`, `REDIS_VERSION_NUM`).
const REDIS_VERSION: &str = "7.0.15";
const REDIS_VERSION_NUM: i64 = 0x0007_000f;

/// The interpreter with the prelude run.
pub struct Sandbox {
    pub lua: Lua,
    /// Shared, so that a run holds them for one atomic increment.
    pub internals: std::sync::Arc<Internals>,
}

/// The prelude's private table, and what Rust needs of it.
pub struct Internals {
    pub table: Table,
    /// Redis's error handler (`__redis__err__handler`), under which scripts are called.
    pub error_handler: Function,
    compile: Function,
    /// The real globals table (scripts see a read-only proxy of it); KEYS and ARGV go here.
    pub real_globals: Table,
}

/// A Rust function as scripts call it: results, or the message to raise.
pub type Checked = fn(&Lua, MultiValue) -> Result<MultiValue, String>;

/// Wraps `f` so that it returns `true, results…` or `false, message` (see the module doc).
pub fn checked_function(lua: &Lua, f: Checked) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: MultiValue| {
        let mut out = MultiValue::new();
        match f(lua, args) {
            Ok(values) => {
                out.push_back(Value::Boolean(true));
                out.extend(values);
            }
            Err(message) => {
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(message)?));
            }
        }
        Ok(out)
    })
}

/// A function that fails with an error table, as Redis's `luaPushError` + `lua_error`.
fn raising_function(
    lua: &Lua,
    f: fn(&Lua, MultiValue) -> Result<MultiValue, String>,
) -> mlua::Result<Function> {
    lua.create_function(move |lua, args: MultiValue| {
        let mut out = MultiValue::new();
        match f(lua, args) {
            Ok(values) => {
                out.push_back(Value::Boolean(true));
                out.extend(values);
            }
            Err(message) => {
                out.push_back(Value::Boolean(false));
                let table = super::reply::error_table(lua, message.as_bytes())?;
                out.push_back(Value::Table(table));
            }
        }
        Ok(out)
    })
}

impl Sandbox {
    pub fn new() -> mlua::Result<Sandbox> {
        let libraries = StdLib::TABLE | StdLib::STRING | StdLib::MATH;
        // SAFETY: `unsafe_new_with` is needed only for the debug library, which the
        // prelude hands to Redis's error handler and then removes from the globals (as
        // Redis does); no C module can be loaded (no package library).
        let lua = unsafe { Lua::unsafe_new_with(libraries | StdLib::DEBUG, LuaOptions::default()) };
        lua.set_memory_limit(super::LUA_MEMORY_BYTES_MAX)?;
        lua.set_app_data(Lrand48::default());
        let internal = lua.create_table()?;
        internal.set("sha1hex", raising_function(&lua, sha1hex)?)?;
        internal.set("log", raising_function(&lua, log)?)?;
        internal.set("set_repl", raising_function(&lua, set_repl)?)?;
        internal.set("random", checked_function(&lua, random)?)?;
        internal.set("randomseed", checked_function(&lua, random_seed)?)?;
        internal.set(
            "error_table",
            lua.create_function(|lua, text: mlua::LuaString| {
                let mut with_dash = b"-".to_vec();
                let text = text.as_bytes();
                if !text.starts_with(b"-") {
                    with_dash.extend_from_slice(&text);
                } else {
                    with_dash = text.to_vec();
                }
                super::reply::error_table(lua, &with_dash)
            })?,
        )?;
        internal.set(
            "command_exists",
            lua.create_function(|_, args: MultiValue| {
                let name = match args.front() {
                    Some(Value::String(s)) => s.as_bytes().to_vec(),
                    _ => return Ok(false),
                };
                Ok(crate::commands::global_registry().get(&name).is_some())
            })?,
        )?;
        internal.set(
            "checked",
            lua.create_function(|lua, f: Function| raise_from_c(lua, f, Raise::WithPosition))?,
        )?;
        internal.set(
            "raising",
            lua.create_function(|lua, f: Function| raise_from_c(lua, f, Raise::AsIs))?,
        )?;
        // SAFETY: `patches::unpack` is a C function written against Lua's C API.
        internal.set("unpack", unsafe {
            lua.create_c_function(super::patches::unpack)?
        })?;
        internal.set("killed_message", super::busy::KILLED)?;
        internal.set("version", REDIS_VERSION)?;
        internal.set("version_num", REDIS_VERSION_NUM)?;
        internal.set("libraries", super::libs::tables(&lua)?)?;
        super::run::register(&lua, &internal)?;
        let debug: Table = lua.globals().get("debug")?;
        lua.load(include_str!("prelude.lua"))
            .set_name("=tessera")
            .call::<()>((internal.clone(), debug))?;
        let internals = Internals {
            error_handler: internal.get("error_handler")?,
            compile: internal.get("compile")?,
            real_globals: internal.get("real_globals")?,
            table: internal,
        };
        Ok(Sandbox {
            lua,
            internals: std::sync::Arc::new(internals),
        })
    }

    /// Compiles a script (named `@user_script`, as Redis names it) in the protected
    /// environment.
    pub fn compile(&self, body: &[u8]) -> Result<Function, LoadError> {
        let source = self
            .lua
            .create_string(body)
            .map_err(|e| LoadError::Interpreter(e.to_string()))?;
        let (function, message): (Option<Function>, Option<String>) = self
            .internals
            .compile
            .call(source)
            .map_err(|e| LoadError::Interpreter(e.to_string()))?;
        function.ok_or_else(|| LoadError::Compile(message.unwrap_or_default()))
    }
}

/// How a wrapped function's failure is raised.
#[derive(Clone, Copy)]
enum Raise {
    /// A message, prefixed with the calling script's position (`luaL_error`).
    WithPosition,
    /// The error value as it is (an error table).
    AsIs,
}

/// Wraps `f` (returning `true, results…` or `false, error`) in a C closure that returns
/// the results or raises the error. A C function, not a Lua one: a script's
/// `return redis.call(…)` is then no Lua tail call, so its own frame — the line Redis's
/// error handler reports — stays on the stack, as with Redis's C functions.
fn raise_from_c(lua: &Lua, f: Function, raise: Raise) -> mlua::Result<Function> {
    let trampoline: mlua::ffi::lua_CFunction = match raise {
        Raise::WithPosition => raise_with_position,
        Raise::AsIs => raise_as_is,
    };
    // SAFETY: `exec_raw` pushes `f` and runs the closure in protected mode; the closure
    // only turns that top value into the closure's single upvalue, leaving one function.
    unsafe {
        lua.exec_raw::<Function>(f, |state| {
            mlua::ffi::lua_pushcclosure(state, trampoline, 1);
        })
    }
}

/// Calls upvalue 1 with the arguments; returns its results after the leading `true`, or
/// raises its second result. Raising is a `longjmp` out of this frame, which holds nothing
/// that needs dropping (only the Lua C API on the given state).
unsafe fn call_and_raise(state: *mut mlua::ffi::lua_State, raise: Raise) -> std::ffi::c_int {
    use mlua::ffi;
    // SAFETY: called by Lua as a C function on a valid state; every index used is
    // within the stack this function builds (arguments, then the results of lua_call);
    // lua_checkstack makes room for the values pushed.
    unsafe {
        let arguments = ffi::lua_gettop(state);
        if ffi::lua_checkstack(state, 3) == 0 {
            ffi::lua_pushstring(state, c"stack overflow".as_ptr());
            ffi::lua_error(state);
        }
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
        ffi::lua_insert(state, 1);
        ffi::lua_call(state, arguments, ffi::LUA_MULTRET);
        let results = ffi::lua_gettop(state);
        if results >= 1 && ffi::lua_toboolean(state, 1) != 0 {
            return results - 1;
        }
        ffi::lua_settop(state, 2);
        if matches!(raise, Raise::WithPosition) && ffi::lua_type(state, 2) == ffi::LUA_TSTRING {
            ffi::luaL_where(state, 1);
            ffi::lua_pushvalue(state, 2);
            ffi::lua_concat(state, 2);
        }
        ffi::lua_error(state)
    }
}

unsafe extern "C-unwind" fn raise_with_position(
    state: *mut mlua::ffi::lua_State,
) -> std::ffi::c_int {
    // SAFETY: see `call_and_raise`.
    unsafe { call_and_raise(state, Raise::WithPosition) }
}

unsafe extern "C-unwind" fn raise_as_is(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: see `call_and_raise`.
    unsafe { call_and_raise(state, Raise::AsIs) }
}

/// The first argument as a number, as `lua_tonumber` reads it (strings convert; else 0).
fn number_arg(args: &MultiValue, index: usize) -> Option<f64> {
    match args.get(index)? {
        Value::Integer(n) => Some(*n as f64),
        Value::Number(n) => Some(*n),
        Value::String(s) => crate::types::score::parse(s.as_bytes().trim_ascii()),
        _ => None,
    }
}

fn one(value: Value) -> MultiValue {
    MultiValue::from_vec(vec![value])
}

/// `redis.sha1hex(text)`.
fn sha1hex(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    if args.len() != 1 {
        return Err("wrong number of arguments".into());
    }
    let bytes = match &args[0] {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Integer(_) | Value::Number(_) => lua
            .coerce_string(args[0].clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let hex = super::sha1_hex(&bytes);
    let text = lua.create_string(hex).map_err(|e| e.to_string())?;
    Ok(one(Value::String(text)))
}

/// `redis.log(level, message, ...)`: to the server's log at Redis's level.
fn log(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    if args.len() < 2 {
        return Err("redis.log() requires two arguments or more.".into());
    }
    let Some(level) = number_arg(&args, 0) else {
        return Err("First argument must be a number (log level).".into());
    };
    let level = level as i64;
    if !(0..=3).contains(&level) {
        return Err("Invalid debug level.".into());
    }
    let mut text = String::new();
    for value in args.iter().skip(1) {
        if let Ok(Some(s)) = lua.coerce_string(value.clone()) {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(&s.to_string_lossy());
        }
    }
    match level {
        0 => tracing::debug!(target: "script", "{text}"),
        1 => tracing::debug!(target: "script", "{text}"),
        2 => tracing::info!(target: "script", "{text}"),
        _ => tracing::warn!(target: "script", "{text}"),
    }
    Ok(MultiValue::new())
}

/// `redis.set_repl(flags)`: checked and accepted. Tessera always logs a script's effects
/// (a script asking not to be logged would make the log disagree with the dataset).
fn set_repl(_: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    if args.len() != 1 {
        return Err("redis.set_repl() requires two arguments.".into());
    }
    let flags = number_arg(&args, 0).unwrap_or(0.0) as i64;
    if flags & !3 != 0 {
        return Err(
            "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.".into(),
        );
    }
    Ok(MultiValue::new())
}

/// Lua's `luaL_checkint`: the argument as an int, or Lua's message.
fn check_int(args: &MultiValue, index: usize, function: &str) -> Result<i32, String> {
    match number_arg(args, index) {
        Some(n) => Ok(n as i64 as i32),
        None => {
            let got = args.get(index).map_or("no value", |v| v.type_name());
            Err(format!(
                "bad argument #{} to '{function}' (number expected, got {got})",
                index + 1
            ))
        }
    }
}

/// Redis's `math.random`: Lua 5.1's, over Redis's lrand48.
fn random(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let drawn = {
        let mut state = lua
            .app_data_mut::<Lrand48>()
            .ok_or("math.random can only be called inside a script invocation")?;
        state.next()
    };
    let r = (drawn % LRAND48_MAX) as f64 / LRAND48_MAX as f64;
    let value = match args.len() {
        0 => r,
        1 => {
            let upper = check_int(&args, 0, "random")?;
            if upper < 1 {
                return Err("bad argument #1 to 'random' (interval is empty)".into());
            }
            (r * upper as f64).floor() + 1.0
        }
        2 => {
            let lower = check_int(&args, 0, "random")?;
            let upper = check_int(&args, 1, "random")?;
            if lower > upper {
                return Err("bad argument #2 to 'random' (interval is empty)".into());
            }
            // `u-l+1` in C int arithmetic, wrapping as Lua 5.1's does on Redis's build.
            let width = upper.wrapping_sub(lower).wrapping_add(1);
            (r * width as f64).floor() + lower as f64
        }
        _ => return Err("wrong number of arguments".into()),
    };
    Ok(one(Value::Number(value)))
}

/// Redis's `math.randomseed`.
fn random_seed(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let seed = check_int(&args, 0, "randomseed")?;
    if let Some(mut state) = lua.app_data_mut::<Lrand48>() {
        state.seed(seed);
    }
    Ok(MultiValue::new())
}
