//! Replies ↔ Lua values, as Redis 7.0 converts them (`script_lua.c`).
//!
//! A command run by `redis.call` writes its reply in RESP like any client's; `to_lua`
//! parses those bytes into Lua values (integers → numbers, bulks → strings, nulls →
//! `false` in RESP2 and `nil` in RESP3, status → `{ok=…}`, errors → `{err=…}`, RESP3 maps,
//! sets, doubles, big numbers and verbatim strings → Redis's tagged tables).
//! `write_lua` writes a script's return value as the EVAL reply: numbers truncated to
//! integers, `false` → null, tables as arrays up to their first nil, or as the reply their
//! `err`, `ok`, `double`, `big_number`, `verbatim_string`, `map` or `set` field says.

use crate::resp::ReplyWriter;
use mlua::{Lua, Table, Value, ffi};

/// How deep a script's return value may nest before its elements are replaced by an
/// error (a table that contains itself would never end). Redis stops where its conversion
/// finds no room left on Lua's stack (its fix of CVE-2021-32626), 7,995 arrays deep;
/// Tessera stops at 1,000, with Redis's error: deeper, its reads of the tables exhaust the
/// native stack (a crash seen at 7,900).
const NESTING_MAX: usize = 1000;

/// A reply that could not be parsed (never from Tessera's own writers; kept as an error
/// rather than a panic because the bytes are a reply buffer, not a promise).
#[derive(Clone, Copy, Debug)]
pub struct Malformed;

/// Parses the one reply at the front of `reply` into a Lua value. `Ok((value, is_error))`.
/// (`redis.call` pushes replies straight onto the Lua stack with `push_reply`; this is the
/// same conversion for Rust callers.)
pub fn to_lua(lua: &Lua, reply: &[u8]) -> mlua::Result<Result<(Value, bool), Malformed>> {
    let parsed = std::cell::Cell::new(None);
    // SAFETY: `exec_raw` runs the closure in protected mode on a valid state with room for
    // the values `push_reply` checks for; the closure leaves exactly one value (the reply,
    // or nil) and holds nothing that needs dropping if an out-of-memory error unwinds it.
    let value = unsafe {
        lua.exec_raw::<Value>((), |state| {
            let result = push_reply(state, reply);
            if result.is_err() {
                ffi::lua_pushnil(state);
            }
            parsed.set(Some(result));
        })?
    };
    Ok(match parsed.get() {
        Some(Ok(is_error)) => Ok((value, is_error)),
        _ => Err(Malformed),
    })
}

/// Pushes the one reply at the front of `reply` onto the Lua stack, converted as Redis
/// converts its fake client's output: `Ok(is_error)` with one value pushed, or `Malformed`
/// with the stack as it was.
///
/// # Safety
/// `state` must be a valid Lua state on which a Lua error may be raised (out of memory): the
/// caller's frames, up to the protected call that catches it, hold nothing to drop.
pub unsafe fn push_reply(state: *mut ffi::lua_State, reply: &[u8]) -> Result<bool, Malformed> {
    // SAFETY: the caller's guarantees; the parser only pushes onto `state` after checking
    // for room, and on a malformed reply the stack is cut back to where it was.
    unsafe {
        let top = ffi::lua_gettop(state);
        let mut parser = RawParser {
            state,
            bytes: reply,
            at: 0,
        };
        if parser.value() {
            Ok(reply.first() == Some(&b'-'))
        } else {
            ffi::lua_settop(state, top);
            Err(Malformed)
        }
    }
}

/// The parser behind `push_reply`: reads RESP from `bytes` and pushes Lua values. Holds
/// only borrowed and plain data, so a Lua error unwinding through it drops nothing.
struct RawParser<'a> {
    state: *mut ffi::lua_State,
    bytes: &'a [u8],
    at: usize,
}

impl RawParser<'_> {
    fn line(&mut self) -> Option<&[u8]> {
        let rest = &self.bytes[self.at..];
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        self.at += end + 2;
        Some(&rest[..end])
    }

    fn length(&mut self) -> Option<i64> {
        let line = self.line()?;
        std::str::from_utf8(line).ok()?.parse().ok()
    }

    fn bulk(&mut self, len: usize) -> Option<&[u8]> {
        let data = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len + 2;
        Some(data)
    }

    /// Pushes `{ [tag] = <the value on top> }` in place of the value on top.
    ///
    /// # Safety
    /// A value on top of the stack, room for two more.
    unsafe fn tag(&self, tag: &std::ffi::CStr) {
        // SAFETY: the caller's guarantees; the table is new (no metatable, so the set is raw).
        unsafe {
            ffi::lua_createtable(self.state, 0, 1);
            ffi::lua_insert(self.state, -2);
            ffi::lua_setfield(self.state, -2, tag.as_ptr());
        }
    }

    /// Pushes the next value; false (with whatever it pushed left for the caller to cut)
    /// if the bytes are not a reply.
    fn value(&mut self) -> bool {
        let Some(&kind) = self.bytes.get(self.at) else {
            return false;
        };
        self.at += 1;
        let state = self.state;
        // SAFETY (every block below): `state` is valid (see `push_reply`); each value needs
        // at most four slots at once on top of those of the enclosing ones, checked here.
        if unsafe { ffi::lua_checkstack(state, 4) } == 0 {
            return false;
        }
        match kind {
            b'+' => {
                let Some(text) = self.line() else {
                    return false;
                };
                unsafe {
                    push_bytes(state, text);
                    self.tag(c"ok");
                }
            }
            b'-' => {
                let Some(text) = self.line() else {
                    return false;
                };
                // Redis's luaPushErrorBuff of "-<text>": the code is the reply's own.
                let (code, message) = error_parts_of_reply(text);
                unsafe {
                    push_error_parts(state, code, message);
                    // Counted when the command failed: the script's error must not count again.
                    ffi::lua_pushboolean(state, 1);
                    ffi::lua_setfield(state, -2, c"ignore_error_stats_update".as_ptr());
                }
            }
            b':' => match self.length() {
                Some(n) => unsafe { ffi::lua_pushnumber(state, n as f64) },
                None => return false,
            },
            b'$' | b'=' => match self.length() {
                Some(-1) => unsafe { ffi::lua_pushboolean(state, 0) },
                Some(n) if n >= 0 => {
                    let Some(data) = self.bulk(n as usize) else {
                        return false;
                    };
                    if kind == b'$' {
                        unsafe { push_bytes(state, data) };
                    } else {
                        // Verbatim: "txt:" then the text.
                        let (format, text) = data.split_at(data.len().min(4));
                        let format = &format[..format.len().min(3)];
                        unsafe {
                            ffi::lua_createtable(state, 0, 2);
                            push_bytes(state, text);
                            ffi::lua_setfield(state, -2, c"string".as_ptr());
                            push_bytes(state, format);
                            ffi::lua_setfield(state, -2, c"format".as_ptr());
                            self.tag(c"verbatim_string");
                        }
                    }
                }
                _ => return false,
            },
            b'*' | b'~' | b'%' | b'>' => {
                let Some(n) = self.length() else {
                    return false;
                };
                if n < 0 {
                    unsafe { ffi::lua_pushboolean(state, 0) };
                    return true;
                }
                let Ok(count) = std::ffi::c_int::try_from(n) else {
                    return false;
                };
                unsafe {
                    match kind {
                        b'*' | b'>' => ffi::lua_createtable(state, count.min(1024), 0),
                        _ => ffi::lua_createtable(state, 0, count.min(1024)),
                    }
                }
                for i in 1..=count {
                    if !self.value() {
                        return false;
                    }
                    unsafe {
                        match kind {
                            b'~' => {
                                ffi::lua_pushboolean(state, 1);
                                if !set_key(state) {
                                    return false;
                                }
                            }
                            b'%' => {
                                if !self.value() {
                                    return false;
                                }
                                if !set_key(state) {
                                    return false;
                                }
                            }
                            _ => ffi::lua_rawseti_(state, -2, i),
                        }
                    }
                }
                unsafe {
                    match kind {
                        b'~' => self.tag(c"set"),
                        b'%' => self.tag(c"map"),
                        _ => {}
                    }
                }
            }
            b'_' => {
                self.line();
                unsafe { ffi::lua_pushnil(state) };
            }
            b'#' => match self.line() {
                Some(b"t") => unsafe { ffi::lua_pushboolean(state, 1) },
                Some(b"f") => unsafe { ffi::lua_pushboolean(state, 0) },
                _ => return false,
            },
            b',' => {
                let Some(text) = self.line() else {
                    return false;
                };
                let number = match text {
                    b"inf" => f64::INFINITY,
                    b"-inf" => f64::NEG_INFINITY,
                    other => crate::types::score::parse(other).unwrap_or(f64::NAN),
                };
                unsafe {
                    ffi::lua_pushnumber(state, number);
                    self.tag(c"double");
                }
            }
            b'(' => {
                let Some(text) = self.line() else {
                    return false;
                };
                unsafe {
                    push_bytes(state, text);
                    self.tag(c"big_number");
                }
            }
            b'|' => {
                // Attributes are not shown to scripts: skip them, keep the reply.
                let Some(n) = self.length() else {
                    return false;
                };
                for _ in 0..n.max(0) * 2 {
                    if !self.value() {
                        return false;
                    }
                    unsafe { ffi::lua_pop(state, 1) };
                }
                return self.value();
            }
            _ => return false,
        }
        true
    }
}

/// `t[k] = v` for the table under a key and a value on top of the stack (both popped).
/// False for a key Lua cannot index with (nil or NaN), which no reply has.
///
/// # Safety
/// A table, a key and a value on top of a valid stack.
unsafe fn set_key(state: *mut ffi::lua_State) -> bool {
    // SAFETY: the caller's guarantees.
    unsafe {
        let key_type = ffi::lua_type(state, -2);
        if key_type == ffi::LUA_TNIL
            || (key_type == ffi::LUA_TNUMBER && ffi::lua_tonumber(state, -2).is_nan())
        {
            return false;
        }
        ffi::lua_rawset(state, -3);
    }
    true
}

/// Pushes a Lua string with these bytes.
///
/// # Safety
/// A valid state with room for one value; may raise Lua's out-of-memory error.
pub(crate) unsafe fn push_bytes(state: *mut ffi::lua_State, bytes: &[u8]) {
    // SAFETY: `bytes` is valid for its length (an empty slice's dangling pointer is never
    // read: Lua copies zero bytes, but is given a real address all the same).
    unsafe {
        let pointer = if bytes.is_empty() {
            c"".as_ptr()
        } else {
            bytes.as_ptr() as *const std::ffi::c_char
        };
        ffi::lua_pushlstring_(state, pointer, bytes.len());
    }
}

/// Pushes Redis's error table `{err = "<code> <message>"}`.
///
/// # Safety
/// A valid state with room for three values; may raise Lua's out-of-memory error.
unsafe fn push_error_parts(state: *mut ffi::lua_State, code: &[u8], message: &[u8]) {
    // SAFETY: the caller's guarantees.
    unsafe {
        ffi::lua_createtable(state, 0, 2);
        push_bytes(state, code);
        push_bytes(state, b" ");
        push_bytes(state, message);
        ffi::lua_concat(state, 3);
        ffi::lua_setfield(state, -2, c"err".as_ptr());
    }
}

/// Pushes `error_table(text)` (see there).
///
/// # Safety
/// A valid state with room for three values; may raise Lua's out-of-memory error.
pub(crate) unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8]) {
    let (code, message) = error_parts(text);
    // SAFETY: the caller's guarantees.
    unsafe { push_error_parts(state, code, message) }
}

/// The code and message of an error text with or without its leading '-' ("-CODE message"
/// keeps its code; a bare message gets "ERR").
fn error_parts(text: &[u8]) -> (&[u8], &[u8]) {
    match text.strip_prefix(b"-") {
        Some(rest) => error_parts_of_reply(rest),
        None => (b"ERR", trim_line_ends(text)),
    }
}

/// The code and message of an error reply's line (after its '-').
fn error_parts_of_reply(rest: &[u8]) -> (&[u8], &[u8]) {
    let (code, message): (&[u8], &[u8]) = match rest.iter().position(|&b| b == b' ') {
        Some(space) => (&rest[..space], &rest[space + 1..]),
        None => (b"ERR", rest),
    };
    (code, trim_line_ends(message))
}

/// Redis's `luaPushErrorBuff`: `{err = "<CODE> <message>"}` from an error text with or
/// without its leading '-' ("-CODE message" keeps its code; a bare message gets "ERR").
pub fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let (code, message) = error_parts(text);
    let mut full = Vec::with_capacity(code.len() + 1 + message.len());
    full.extend_from_slice(code);
    full.push(b' ');
    full.extend_from_slice(message);
    let table = lua.create_table()?;
    table.raw_set("err", lua.create_string(&full)?)?;
    Ok(table)
}

fn trim_line_ends(mut text: &[u8]) -> &[u8] {
    while let [b'\r' | b'\n', rest @ ..] = text {
        text = rest;
    }
    while let [rest @ .., b'\r' | b'\n'] = text {
        text = rest;
    }
    text
}

/// C's conversion of a double to `long long` on x86-64 (`cvttsd2si`): truncation, and
/// the "integer indefinite" value i64::MIN for NaN and anything out of range — what Redis
/// replies for `return 1e20`.
pub fn truncate_like_c(number: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if number.is_nan() || !(-LIMIT..LIMIT).contains(&number) {
        i64::MIN
    } else {
        number as i64
    }
}

/// Writes a script's return value as the reply. `script_resp3`: the protocol the script
/// chose with `redis.setresp` (decides how booleans are sent, as in Redis).
pub fn write_lua(out: &mut ReplyWriter, value: &Value, script_resp3: bool) -> mlua::Result<()> {
    write_value(out, value, script_resp3, 0)
}

fn write_value(
    out: &mut ReplyWriter,
    value: &Value,
    script_resp3: bool,
    depth: usize,
) -> mlua::Result<()> {
    super::deep(|| write_value_here(out, value, script_resp3, depth))
}

fn write_value_here(
    out: &mut ReplyWriter,
    value: &Value,
    script_resp3: bool,
    depth: usize,
) -> mlua::Result<()> {
    if depth > NESTING_MAX {
        out.error("ERR reached lua stack limit");
        return Ok(());
    }
    match value {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => {
            if script_resp3 {
                boolean(out, *b);
            } else if *b {
                out.integer(1);
            } else {
                out.null();
            }
        }
        Value::Integer(n) => out.integer(*n),
        Value::Number(n) => out.integer(truncate_like_c(*n)),
        Value::Table(table) => write_table(out, table, script_resp3, depth)?,
        _ => out.null(),
    }
    Ok(())
}

/// RESP3 `#t` / `#f`; a RESP2 client gets 1 / 0 (Redis's `addReplyBool`).
fn boolean(out: &mut ReplyWriter, value: bool) {
    if out.resp3 {
        out.buf
            .extend_from_slice(if value { b"#t\r\n" } else { b"#f\r\n" });
    } else {
        out.integer(value as i64);
    }
}

/// An error table from a command's error (`redis.pcall`'s, or one a `redis.call` raised
/// and the script caught), counted when the command failed: Redis's
/// `ignore_error_stats_update`.
pub(super) fn counted_already(error: &Table) -> mlua::Result<bool> {
    Ok(matches!(
        error.raw_get::<Value>("ignore_error_stats_update")?,
        Value::Boolean(true)
    ))
}

fn write_table(
    out: &mut ReplyWriter,
    table: &Table,
    script_resp3: bool,
    depth: usize,
) -> mlua::Result<()> {
    if let Value::String(message) = table.raw_get::<Value>("err")? {
        // Redis reads `err` again with lua_getfield: a number would do too, but a table
        // only gets here with a string.
        if counted_already(table)? {
            out.error_counted_elsewhere(&message.to_string_lossy());
        } else {
            out.error(&message.to_string_lossy());
        }
        return Ok(());
    }
    if let Value::String(status) = table.raw_get::<Value>("ok")? {
        let text = status.to_string_lossy().replace(['\r', '\n'], " ");
        out.simple(&text);
        return Ok(());
    }
    if let Value::Number(_) | Value::Integer(_) = table.raw_get::<Value>("double")? {
        let number: f64 = table.raw_get("double")?;
        out.double(number);
        return Ok(());
    }
    if let Value::String(digits) = table.raw_get::<Value>("big_number")? {
        let text = digits.to_string_lossy().replace(['\r', '\n'], " ");
        if out.resp3 {
            out.buf.push(b'(');
            out.buf.extend_from_slice(text.as_bytes());
            out.buf.extend_from_slice(b"\r\n");
        } else {
            out.bulk(text.as_bytes());
        }
        return Ok(());
    }
    if let Value::Table(verbatim) = table.raw_get::<Value>("verbatim_string")?
        && let Value::String(format) = verbatim.raw_get::<Value>("format")?
        && let Value::String(text) = verbatim.raw_get::<Value>("string")?
    {
        let (format, text) = (format.as_bytes(), text.as_bytes());
        if out.resp3 {
            let mut format3 = [b' '; 3];
            for (dst, src) in format3.iter_mut().zip(format.iter()) {
                *dst = *src;
            }
            out.buf.push(b'=');
            out.buf
                .extend_from_slice(itoa::Buffer::new().format(text.len() + 4).as_bytes());
            out.buf.extend_from_slice(b"\r\n");
            out.buf.extend_from_slice(&format3);
            out.buf.push(b':');
            out.buf.extend_from_slice(&text);
            out.buf.extend_from_slice(b"\r\n");
        } else {
            out.bulk(&text);
        }
        return Ok(());
    }
    if let Value::Table(map) = table.raw_get::<Value>("map")? {
        let pairs: Vec<(Value, Value)> =
            map.pairs::<Value, Value>().collect::<mlua::Result<_>>()?;
        out.map(pairs.len());
        for (key, value) in &pairs {
            write_value(out, key, script_resp3, depth + 1)?;
            write_value(out, value, script_resp3, depth + 1)?;
        }
        return Ok(());
    }
    if let Value::Table(set) = table.raw_get::<Value>("set")? {
        let members: Vec<Value> = set
            .pairs::<Value, Value>()
            .map(|pair| pair.map(|(key, _)| key))
            .collect::<mlua::Result<_>>()?;
        out.set(members.len());
        for member in &members {
            write_value(out, member, script_resp3, depth + 1)?;
        }
        return Ok(());
    }
    // An array: elements 1, 2, ... up to the first nil.
    let mut items = Vec::new();
    loop {
        let item: Value = table.raw_get(items.len() + 1)?;
        if item.is_nil() {
            break;
        }
        items.push(item);
    }
    out.array(items.len());
    for item in &items {
        write_value(out, item, script_resp3, depth + 1)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_as_c_does_on_x86() {
        assert_eq!(truncate_like_c(3.99), 3);
        assert_eq!(truncate_like_c(-0.5), 0);
        assert_eq!(truncate_like_c(1e20), i64::MIN);
        assert_eq!(truncate_like_c(f64::NAN), i64::MIN);
    }

    #[test]
    fn error_tables_as_redis_builds_them() {
        let lua = Lua::new();
        let err = |text: &[u8]| -> String {
            error_table(&lua, text)
                .unwrap()
                .raw_get::<String>("err")
                .unwrap()
        };
        assert_eq!(err(b"-WRONGTYPE Operation"), "WRONGTYPE Operation");
        assert_eq!(err(b"-bad"), "ERR bad");
        assert_eq!(err(b"plain words"), "ERR plain words");
    }

    #[test]
    fn replies_parse_into_lua() {
        let lua = Lua::new();
        let (value, is_error) = to_lua(&lua, b"*3\r\n:1\r\n$-1\r\n+OK\r\n")
            .unwrap()
            .unwrap();
        assert!(!is_error);
        let table = value.as_table().unwrap();
        assert_eq!(table.raw_get::<f64>(1).unwrap(), 1.0);
        assert!(!table.raw_get::<bool>(2).unwrap());
        let ok: Table = table.raw_get(3).unwrap();
        assert_eq!(ok.raw_get::<String>("ok").unwrap(), "OK");
        assert!(to_lua(&lua, b"$5\r\nab").unwrap().is_err());
        assert!(to_lua(&lua, b"").unwrap().is_err());
    }

    #[test]
    fn resp3_replies_and_errors_parse_into_tagged_tables() {
        let lua = Lua::new();
        let parse = |bytes: &[u8]| to_lua(&lua, bytes).unwrap().unwrap();
        let (value, is_error) = parse(b"-WRONGTYPE Operation\r\n");
        assert!(is_error);
        let error = value.as_table().unwrap();
        assert_eq!(
            error.raw_get::<String>("err").unwrap(),
            "WRONGTYPE Operation"
        );
        assert!(error.raw_get::<bool>("ignore_error_stats_update").unwrap());
        let (value, _) = parse(b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n_\r\n");
        let map: Table = value.as_table().unwrap().raw_get("map").unwrap();
        assert_eq!(map.raw_get::<f64>("a").unwrap(), 1.0);
        assert_eq!(map.raw_get::<Value>("b").unwrap(), Value::Nil);
        let (value, _) = parse(b"~2\r\n$1\r\nx\r\n$1\r\ny\r\n");
        let set: Table = value.as_table().unwrap().raw_get("set").unwrap();
        assert!(set.raw_get::<bool>("x").unwrap() && set.raw_get::<bool>("y").unwrap());
        let (value, _) = parse(b",1.5\r\n");
        assert_eq!(
            value.as_table().unwrap().raw_get::<f64>("double").unwrap(),
            1.5
        );
        let (value, _) = parse(b"=8\r\ntxt:some\r\n");
        let verbatim: Table = value
            .as_table()
            .unwrap()
            .raw_get("verbatim_string")
            .unwrap();
        assert_eq!(verbatim.raw_get::<String>("format").unwrap(), "txt");
        assert_eq!(verbatim.raw_get::<String>("string").unwrap(), "some");
        let (value, _) = parse(b"|1\r\n+k\r\n+v\r\n#t\r\n");
        assert_eq!(value, Value::Boolean(true));
        let (value, _) = parse(b"*2\r\n*1\r\n$0\r\n\r\n(123\r\n");
        let outer = value.as_table().unwrap();
        assert_eq!(
            outer
                .raw_get::<Table>(1)
                .unwrap()
                .raw_get::<String>(1)
                .unwrap(),
            ""
        );
        let big: Table = outer.raw_get(2).unwrap();
        assert_eq!(big.raw_get::<String>("big_number").unwrap(), "123");
        // A truncated element leaves nothing behind.
        assert!(to_lua(&lua, b"*2\r\n:1\r\n").unwrap().is_err());
    }
}
