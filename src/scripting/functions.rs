//! Function libraries (FUNCTION LOAD, FCALL): Redis 7.0's functions, kept as data.
//!
//! A library is its code (`#!lua name=<library>` first): loading runs it once in the
//! interpreter, where `redis.register_function` names its functions, their callbacks and
//! flags. The code is what persists — logged as the FUNCTION command that loaded it, and
//! written to snapshots as Redis's function opcode — and loading it again rebuilds the
//! functions.

use super::ScriptFlags;
use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Table, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// How long a library's code may run while it loads (Redis's 500 ms).
const LOAD_TIMEOUT_MS: u64 = 500;

/// One registered function.
pub struct FunctionEntry {
    pub name: String,
    pub description: Option<String>,
    pub flags: ScriptFlags,
    pub(super) callback: Function,
}

/// One library: its name, code and functions.
pub struct Library {
    pub name: String,
    pub code: Bytes,
    pub functions: BTreeMap<String, FunctionEntry>,
}

/// Why FUNCTION LOAD refused a library (Redis's texts, without "ERR ").
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LibraryError {
    #[error("Missing library metadata")]
    MissingMetadata,
    #[error("Invalid library metadata")]
    InvalidMetadata,
    #[error("Invalid metadata value, name argument was given multiple times")]
    NameTwice,
    #[error("Invalid metadata value given: {0}")]
    InvalidMetadataValue(String),
    #[error("Library name was not given")]
    NoName,
    #[error(
        "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"
    )]
    BadName,
    #[error("Engine '{0}' not found")]
    UnknownEngine(String),
    #[error("Library '{0}' already exists")]
    Exists(String),
    #[error("No functions registered")]
    NoFunctions,
    #[error("Function {0} already exists")]
    FunctionExists(String),
    /// FUNCTION RESTORE APPEND of a library that is there (Redis's text has no quotes).
    #[error("Library {0} already exists")]
    RestoredExists(String),
    /// Compiling or running the code failed; the message is Redis's whole text.
    #[error("{0}")]
    Code(String),
}

/// A library's first line: its engine and name (Redis's `functionExtractLibMetaData`).
pub fn metadata(code: &[u8]) -> Result<String, LibraryError> {
    if !code.starts_with(b"#!") {
        return Err(LibraryError::MissingMetadata);
    }
    let line_len = code
        .iter()
        .position(|&b| b == b'\n')
        .ok_or(LibraryError::InvalidMetadata)?;
    // Redis splits the whole line and takes the engine from the first word, after "#!":
    // `#! name=x` names the engine ''.
    let parts = crate::resp::split_args(&code[..line_len]).ok_or(LibraryError::InvalidMetadata)?;
    let Some(engine) = parts.first().and_then(|first| first.get(2..)) else {
        return Err(LibraryError::InvalidMetadata);
    };
    let mut name = None;
    for part in &parts[1..] {
        match part.strip_prefix(b"name=") {
            Some(value) => {
                if name.is_some() {
                    return Err(LibraryError::NameTwice);
                }
                name = Some(String::from_utf8_lossy(value).into_owned());
            }
            None => {
                return Err(LibraryError::InvalidMetadataValue(
                    String::from_utf8_lossy(part).into_owned(),
                ));
            }
        }
    }
    let name = name.ok_or(LibraryError::NoName)?;
    if !valid_name(&name) {
        return Err(LibraryError::BadName);
    }
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(LibraryError::UnknownEngine(
            String::from_utf8_lossy(engine).into_owned(),
        ));
    }
    Ok(name)
}

/// What FUNCTION RESTORE does with the libraries there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Refuse if any library is there already (the default).
    Append,
    /// Replace the libraries of the same names.
    Replace,
    /// Drop every library first.
    Flush,
}

/// Letters, digits and underscores, at least one.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Runs a library's code in `lua` (its `internal` table given) and returns its functions.
/// `timeout`: stop code that runs past 500 ms (not while the log is replayed).
pub(super) fn load(
    lua: &Lua,
    internal: &Table,
    name: &str,
    code: &[u8],
    timeout: bool,
) -> Result<Library, LibraryError> {
    let registered: RefCell<BTreeMap<String, FunctionEntry>> = RefCell::new(BTreeMap::new());
    let code_error = |e: mlua::Error| LibraryError::Code(e.to_string());
    let outcome = lua
        .scope(|scope| {
            let register = scope.create_function(|lua, args: MultiValue| {
                let mut out = MultiValue::new();
                match read_registration(&args) {
                    Ok(entry) => {
                        let mut registered = registered.borrow_mut();
                        if registered.contains_key(&entry.name) {
                            out.push_back(Value::Boolean(false));
                            let err = super::reply::error_table(
                                lua,
                                b"Function already exists in the library",
                            )?;
                            out.push_back(Value::Table(err));
                        } else {
                            registered.insert(entry.name.clone(), entry);
                            out.push_back(Value::Boolean(true));
                        }
                    }
                    Err(message) => {
                        out.push_back(Value::Boolean(false));
                        let err = super::reply::error_table(lua, message.as_bytes())?;
                        out.push_back(Value::Table(err));
                    }
                }
                Ok(out)
            })?;
            internal.raw_set("register", register)?;
            let started = std::time::Instant::now();
            let flag = internal.clone();
            // Global, as `run::watch_busy`'s: code in a coroutine is timed too.
            lua.set_global_hook(
                mlua::HookTriggers::new().every_nth_instruction(super::busy::HOOK_INSTRUCTIONS),
                move |_, _| {
                    if timeout && started.elapsed().as_millis() as u64 > LOAD_TIMEOUT_MS {
                        flag.raw_set("load_timed_out", true)?;
                        return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
                    }
                    Ok(mlua::VmState::Continue)
                },
            )?;
            let load: Function = internal.raw_get("load_library")?;
            let source = lua.create_string(code)?;
            let outcome = load.call::<(bool, Option<String>)>(source);
            internal.raw_set("register", Value::Nil)?;
            internal.raw_set("load_timed_out", Value::Nil)?;
            outcome
        })
        .map_err(code_error);
    // The load's hook gives way to the one that watches runs, whatever happened (it must not
    // outlive the load).
    let watched = super::run::watch_busy(lua, internal).map_err(code_error);
    let outcome = outcome?;
    watched?;
    if let (false, message) = outcome {
        return Err(LibraryError::Code(message.unwrap_or_default()));
    }
    let functions = registered.into_inner();
    if functions.is_empty() {
        return Err(LibraryError::NoFunctions);
    }
    Ok(Library {
        name: name.to_string(),
        code: Bytes::copy_from_slice(code),
        functions,
    })
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name=…,
/// callback=…, flags={…}, description=…}` (Redis's messages).
fn read_registration(args: &MultiValue) -> Result<FunctionEntry, String> {
    match args.len() {
        1 => {
            let Value::Table(named) = &args[0] else {
                return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
            };
            let (mut name, mut description, mut callback, mut flags) =
                (None, None, None, ScriptFlags::default());
            for pair in named.pairs::<Value, Value>() {
                let (key, value) = pair.map_err(|e| e.to_string())?;
                let key = match key {
                    Value::String(s) => s.to_string_lossy(),
                    Value::Integer(n) => n.to_string(),
                    Value::Number(n) => n.to_string(),
                    _ => {
                        return Err(
                            "named argument key given to redis.register_function is not a string"
                                .into(),
                        );
                    }
                };
                match key.to_ascii_lowercase().as_str() {
                    "function_name" => match value {
                        Value::String(s) => name = Some(s.to_string_lossy()),
                        _ => return Err("function_name argument given to redis.register_function must be a string".into()),
                    },
                    "description" => match value {
                        Value::String(s) => description = Some(s.to_string_lossy()),
                        _ => return Err("description argument given to redis.register_function must be a string".into()),
                    },
                    "callback" => match value {
                        Value::Function(f) => callback = Some(f),
                        _ => return Err("callback argument given to redis.register_function must be a function".into()),
                    },
                    "flags" => match value {
                        Value::Table(list) => flags = read_flags(&list)?,
                        _ => return Err("flags argument to redis.register_function must be a table representing function flags".into()),
                    },
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let name = name.ok_or("redis.register_function must get a function name argument")?;
            let callback =
                callback.ok_or("redis.register_function must get a callback argument")?;
            entry(name, description, callback, flags)
        }
        2 => {
            let name = match &args[0] {
                Value::String(s) => s.to_string_lossy(),
                Value::Integer(n) => n.to_string(),
                _ => {
                    return Err("first argument to redis.register_function must be a string".into());
                }
            };
            let Value::Function(callback) = &args[1] else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            entry(name, None, callback.clone(), ScriptFlags::default())
        }
        _ => Err("wrong number of arguments to redis.register_function".into()),
    }
}

fn entry(
    name: String,
    description: Option<String>,
    callback: Function,
    flags: ScriptFlags,
) -> Result<FunctionEntry, String> {
    if !valid_name(&name) {
        // Redis 7.0 says "Library names" here too.
        return Err(LibraryError::BadName.to_string());
    }
    Ok(FunctionEntry {
        name,
        description,
        flags,
        callback,
    })
}

fn read_flags(list: &Table) -> Result<ScriptFlags, String> {
    let mut flags = ScriptFlags::default();
    for index in 1.. {
        let value: Value = list.get(index).map_err(|e| e.to_string())?;
        let text = match value {
            Value::Nil => break,
            Value::String(s) => s.to_string_lossy().to_ascii_lowercase(),
            _ => return Err("unknown flag given".into()),
        };
        match text.as_str() {
            "no-writes" => flags.no_writes = true,
            "allow-oom" => flags.allow_oom = true,
            "allow-stale" => flags.allow_stale = true,
            "no-cluster" => flags.no_cluster = true,
            "allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
            _ => return Err("unknown flag given".into()),
        }
    }
    Ok(flags)
}

impl ScriptFlags {
    /// The flags' names, as FUNCTION LIST shows them.
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        for (on, name) in [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot_keys, "allow-cross-slot-keys"),
        ] {
            if on {
                names.push(name);
            }
        }
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_as_redis_reads_it() {
        assert_eq!(metadata(b"#!lua name=lib\nx"), Ok("lib".into()));
        assert_eq!(metadata(b"return 1"), Err(LibraryError::MissingMetadata));
        assert_eq!(metadata(b"#!lua name=a-b\n"), Err(LibraryError::BadName));
        assert_eq!(
            metadata(b"#!lua name=x flags=y\n"),
            Err(LibraryError::InvalidMetadataValue("flags=y".into()))
        );
        assert_eq!(
            metadata(b"#!js name=x\n"),
            Err(LibraryError::UnknownEngine("js".into()))
        );
    }
}
