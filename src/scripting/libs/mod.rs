//! The libraries Redis bundles for scripts — `cjson`, `cmsgpack`, `bit` and `struct` —
//! written in Rust after their C sources in Redis's `deps/lua` (no maintained crate
//! provides them for mlua), with the same results and error messages.
//!
//! Each function takes the Lua arguments and returns its results or the message Lua's
//! C API would raise (`luaL_error`, `luaL_argerror`); the prelude raises it with the
//! script's position (`sandbox::checked_function`).

mod bit;
mod cjson;
mod cmsgpack;
mod structs;

use super::sandbox::{Checked, checked_function};
use mlua::{Lua, MultiValue, Table, Value};

/// `{ cjson = {...}, cmsgpack = {...}, bit = {...}, struct = {...} }`.
pub fn tables(lua: &Lua) -> mlua::Result<Table> {
    let all = lua.create_table()?;
    all.set("bit", library(lua, bit::FUNCTIONS)?)?;
    all.set("struct", library(lua, structs::FUNCTIONS)?)?;
    let cjson = library(lua, cjson::FUNCTIONS)?;
    cjson.set("null", Value::NULL)?;
    cjson.set("_NAME", "cjson")?;
    cjson.set("_VERSION", "2.1.0")?;
    all.set("cjson", cjson)?;
    let cmsgpack = library(lua, cmsgpack::FUNCTIONS)?;
    cmsgpack.set("_NAME", "cmsgpack")?;
    cmsgpack.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    cmsgpack.set("_COPYRIGHT", "Copyright (C) 2012, Salvatore Sanfilippo")?;
    cmsgpack.set("_DESCRIPTION", "MessagePack C implementation for Lua")?;
    all.set("cmsgpack", cmsgpack)?;
    Ok(all)
}

fn library(lua: &Lua, functions: &[(&str, Checked)]) -> mlua::Result<Table> {
    let table = lua.create_table()?;
    for (name, function) in functions {
        table.set(*name, checked_function(lua, *function)?)?;
    }
    Ok(table)
}

/// Lua's "bad argument #n to 'f' (message)".
fn bad_argument(index: usize, function: &str, message: &str) -> String {
    format!("bad argument #{} to '{function}' ({message})", index + 1)
}

/// `luaL_checknumber`: a number, or a string Lua converts to one.
fn check_number(lua: &Lua, args: &MultiValue, index: usize, function: &str) -> Result<f64, String> {
    let value = args.get(index).cloned().unwrap_or(Value::Nil);
    let type_name = if index < args.len() {
        value.type_name()
    } else {
        "no value"
    };
    match lua.coerce_number(value) {
        Ok(Some(n)) => Ok(n),
        _ => Err(bad_argument(
            index,
            function,
            &format!("number expected, got {type_name}"),
        )),
    }
}

/// `luaL_optnumber`.
fn opt_number(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    function: &str,
    default: f64,
) -> Result<f64, String> {
    match args.get(index) {
        None | Some(Value::Nil) => Ok(default),
        Some(_) => check_number(lua, args, index, function),
    }
}

/// `luaL_checklstring`: a string, or a number converted as Lua converts it ("%.14g").
fn check_string(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    function: &str,
) -> Result<Vec<u8>, String> {
    let value = args.get(index).cloned().unwrap_or(Value::Nil);
    let type_name = if index < args.len() {
        value.type_name()
    } else {
        "no value"
    };
    match &value {
        Value::String(s) => Ok(s.as_bytes().to_vec()),
        Value::Integer(_) | Value::Number(_) => match lua.coerce_string(value.clone()) {
            Ok(Some(s)) => Ok(s.as_bytes().to_vec()),
            _ => Err(bad_argument(index, function, "string expected, got number")),
        },
        _ => Err(bad_argument(
            index,
            function,
            &format!("string expected, got {type_name}"),
        )),
    }
}

fn results(lua: &Lua, values: Vec<Value>) -> Result<MultiValue, String> {
    let _ = lua;
    Ok(MultiValue::from_vec(values))
}

fn lua_error(error: mlua::Error) -> String {
    error.to_string()
}
