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
use mlua::{Lua, Table, Value};

/// How deep a script's return value may nest before its elements are replaced by an
/// error (Redis stops at its Lua stack limit; a table that contains itself would never end).
const NESTING_MAX: usize = 1000;

/// A reply that could not be parsed (never from Tessera's own writers; kept as an error
/// rather than a panic because the bytes are a reply buffer, not a promise).
#[derive(Debug)]
pub struct Malformed;

/// Parses the one reply at the front of `reply` into a Lua value. `Ok((value, is_error))`.
pub fn to_lua(lua: &Lua, reply: &[u8]) -> mlua::Result<Result<(Value, bool), Malformed>> {
    let mut parser = Parser {
        lua,
        bytes: reply,
        at: 0,
    };
    let is_error = reply.first() == Some(&b'-');
    match parser.value()? {
        Some(value) => Ok(Ok((value, is_error))),
        None => Ok(Err(Malformed)),
    }
}

struct Parser<'a> {
    lua: &'a Lua,
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
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

    fn tagged(&self, tag: &str, value: Value) -> mlua::Result<Value> {
        let table = self.lua.create_table()?;
        table.raw_set(tag, value)?;
        Ok(Value::Table(table))
    }

    /// The next value; `Ok(None)` if the bytes are not a reply.
    fn value(&mut self) -> mlua::Result<Option<Value>> {
        let Some(&kind) = self.bytes.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        let lua = self.lua;
        let value = match kind {
            b'+' => {
                let Some(text) = self.line() else {
                    return Ok(None);
                };
                let text = lua.create_string(text)?;
                self.tagged("ok", Value::String(text))?
            }
            b'-' => {
                let Some(text) = self.line() else {
                    return Ok(None);
                };
                // Redis's luaPushErrorBuff of "-<text>": the code is the reply's own.
                let mut with_dash = Vec::with_capacity(text.len() + 1);
                with_dash.push(b'-');
                with_dash.extend_from_slice(text);
                let table = error_table(lua, &with_dash)?;
                // Counted when the command failed: the script's error must not count again.
                table.raw_set("ignore_error_stats_update", true)?;
                Value::Table(table)
            }
            b':' => match self.length() {
                Some(n) => Value::Number(n as f64),
                None => return Ok(None),
            },
            b'$' | b'=' => match self.length() {
                Some(-1) => Value::Boolean(false),
                Some(n) if n >= 0 => {
                    let Some(data) = self.bulk(n as usize) else {
                        return Ok(None);
                    };
                    if kind == b'$' {
                        Value::String(lua.create_string(data)?)
                    } else {
                        // Verbatim: "txt:" then the text.
                        let (format, text) = data.split_at(data.len().min(4));
                        let inner = lua.create_table()?;
                        inner.raw_set("string", lua.create_string(text)?)?;
                        let format = &format[..format.len().min(3)];
                        inner.raw_set("format", lua.create_string(format)?)?;
                        self.tagged("verbatim_string", Value::Table(inner))?
                    }
                }
                _ => return Ok(None),
            },
            b'*' | b'~' | b'%' | b'>' => {
                let Some(n) = self.length() else {
                    return Ok(None);
                };
                if n < 0 {
                    return Ok(Some(Value::Boolean(false)));
                }
                let table = lua.create_table()?;
                for i in 0..n {
                    let Some(item) = self.value()? else {
                        return Ok(None);
                    };
                    match kind {
                        b'~' => table.raw_set(item, true)?,
                        b'%' => {
                            let Some(value) = self.value()? else {
                                return Ok(None);
                            };
                            table.raw_set(item, value)?
                        }
                        _ => table.raw_set(i + 1, item)?,
                    }
                }
                match kind {
                    b'~' => self.tagged("set", Value::Table(table))?,
                    b'%' => self.tagged("map", Value::Table(table))?,
                    _ => Value::Table(table),
                }
            }
            b'_' => {
                self.line();
                Value::Nil
            }
            b'#' => match self.line() {
                Some(b"t") => Value::Boolean(true),
                Some(b"f") => Value::Boolean(false),
                _ => return Ok(None),
            },
            b',' => {
                let Some(text) = self.line() else {
                    return Ok(None);
                };
                let number = match text {
                    b"inf" => f64::INFINITY,
                    b"-inf" => f64::NEG_INFINITY,
                    other => crate::types::score::parse(other).unwrap_or(f64::NAN),
                };
                self.tagged("double", Value::Number(number))?
            }
            b'(' => {
                let Some(text) = self.line() else {
                    return Ok(None);
                };
                let text = lua.create_string(text)?;
                self.tagged("big_number", Value::String(text))?
            }
            b'|' => {
                // Attributes are not shown to scripts: skip them, keep the reply.
                let Some(n) = self.length() else {
                    return Ok(None);
                };
                for _ in 0..n.max(0) * 2 {
                    if self.value()?.is_none() {
                        return Ok(None);
                    }
                }
                return self.value();
            }
            _ => return Ok(None),
        };
        Ok(Some(value))
    }
}

/// Redis's `luaPushErrorBuff`: `{err = "<CODE> <message>"}` from an error text with or
/// without its leading '-' ("-CODE message" keeps its code; a bare message gets "ERR").
pub fn error_table(lua: &Lua, text: &[u8]) -> mlua::Result<Table> {
    let (code, message): (&[u8], &[u8]) = match text.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&b| b == b' ') {
            Some(space) => (&rest[..space], &rest[space + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", text),
    };
    let message = trim_line_ends(message);
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

fn write_table(
    out: &mut ReplyWriter,
    table: &Table,
    script_resp3: bool,
    depth: usize,
) -> mlua::Result<()> {
    if let Value::String(message) = table.raw_get::<Value>("err")? {
        // Redis reads `err` again with lua_getfield: a number would do too, but a table
        // only gets here with a string.
        out.error(&message.to_string_lossy());
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
}
