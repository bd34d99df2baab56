//! `cmsgpack`: lua-cmsgpack 0.4.0 as Redis bundles it (`lua_cmsgpack.c`): `pack(...)`,
//! `unpack(s)`, `unpack_one(s, [offset])`, `unpack_limit(s, limit, [offset])`. Integral
//! numbers pack as the smallest integer type, others as float when exact, else double;
//! tables whose keys are exactly 1..n as arrays, others as maps; tables nested deeper than
//! 16 as nil.

use super::check_number;
use crate::scripting::sandbox::Checked;
use mlua::{Lua, MultiValue, Table, Value};

pub const FUNCTIONS: &[(&str, Checked)] = &[
    ("pack", pack),
    ("unpack", unpack),
    ("unpack_one", unpack_one),
    ("unpack_limit", unpack_limit),
];

/// Redis's LUACMSGPACK_MAX_NESTING: deeper tables are packed as nil (a table that contains
/// itself ends).
const PACK_NESTING_MAX: usize = 16;
/// How deep unpacking may nest (Redis stops at Lua's stack limit).
const UNPACK_NESTING_MAX: usize = 1000;

fn done(values: Result<Vec<Value>, String>) -> Result<MultiValue, String> {
    values.map(MultiValue::from_vec)
}

/// The most arguments `cmsgpack.pack` takes, as redis-server 7.0.15 answers.
const PACK_ARGUMENTS_MAX: usize = 4000;

fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    if args.is_empty() {
        return Err("bad argument #0 to 'pack' (MessagePack pack needs input.)".into());
    }
    // Redis's pack asks Lua's stack (8,000 slots, the arguments already on it) for room for
    // as many values again (its fix of CVE-2018-11218): past 4,000 arguments it refuses.
    if args.len() > PACK_ARGUMENTS_MAX {
        return Err("bad argument #0 to 'pack' (Too many arguments for MessagePack pack.)".into());
    }
    let mut out = Vec::new();
    let result = args
        .iter()
        .try_for_each(|value| encode(&mut out, value, 0))
        .and_then(|()| {
            let packed = lua.create_string(&out).map_err(super::lua_error)?;
            Ok(vec![Value::String(packed)])
        });
    done(result)
}

fn encode(out: &mut Vec<u8>, value: &Value, level: usize) -> Result<(), String> {
    crate::scripting::deep(|| encode_here(out, value, level))
}

fn encode_here(out: &mut Vec<u8>, value: &Value, level: usize) -> Result<(), String> {
    match value {
        Value::String(s) => encode_bytes(out, &s.as_bytes()),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(n) => encode_number(out, *n as f64),
        Value::Number(n) => encode_number(out, *n),
        Value::Table(_) if level == PACK_NESTING_MAX => out.push(0xc0),
        Value::Table(table) => encode_table(out, table, level)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn encode_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = bytes.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(bytes);
}

fn encode_number(out: &mut Vec<u8>, n: f64) {
    // IS_INT64_EQUIVALENT: not infinite and unchanged by a round trip through int64.
    let as_int = crate::scripting::reply::truncate_like_c(n);
    if !n.is_infinite() && as_int as f64 == n {
        encode_int(out, as_int);
    } else {
        let f = n as f32;
        if f as f64 == n {
            out.push(0xca);
            out.extend_from_slice(&f.to_be_bytes());
        } else {
            out.push(0xcb);
            out.extend_from_slice(&n.to_be_bytes());
        }
    }
}

fn encode_int(out: &mut Vec<u8>, n: i64) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn header(out: &mut Vec<u8>, n: usize, fix: u8, sixteen: u8, thirty_two: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(sixteen);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(thirty_two);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_table(out: &mut Vec<u8>, table: &Table, level: usize) -> Result<(), String> {
    // `table_is_an_array`: every key an integer ≥ 1 (within int) and the largest equal to
    // their count.
    let mut count = 0usize;
    let mut max = 0f64;
    let mut is_array = true;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair.map_err(super::lua_error)?;
        let n = match key {
            Value::Integer(n) => n as f64,
            Value::Number(n) => n,
            _ => {
                is_array = false;
                break;
            }
        };
        if n <= 0.0 || n.is_infinite() || (n as i32) as f64 != n {
            is_array = false;
            break;
        }
        max = max.max(n);
        count += 1;
    }
    if is_array && max == count as f64 {
        let length = table.raw_len();
        header(out, length, 0x90, 0xdc, 0xdd);
        for index in 1..=length {
            let item: Value = table.get(index).map_err(super::lua_error)?;
            encode(out, &item, level + 1)?;
        }
    } else {
        // Counted first, then encoded pair by pair: a held key or value is a slot of Lua's
        // stack (mlua's references), and a map of 100,000 pairs held at once overflows it.
        let mut pairs = 0usize;
        for pair in table.pairs::<Value, Value>() {
            pair.map_err(super::lua_error)?;
            pairs += 1;
        }
        header(out, pairs, 0x80, 0xde, 0xdf);
        let mut written = 0usize;
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair.map_err(super::lua_error)?;
            encode(out, &key, level + 1)?;
            encode(out, &value, level + 1)?;
            written += 1;
        }
        // Nothing runs between the passes that could change the table; were it to, the
        // header would lie, so the pack fails rather than write it.
        if written != pairs {
            return Err("table changed while it was packed".into());
        }
    }
    Ok(())
}

// ===== Unpacking =====

#[derive(Debug)]
enum DecodeError {
    /// "Missing bytes in input."
    Eof,
    /// "Bad data format in input."
    BadFormat,
    Lua(String),
}

struct Cursor<'a> {
    lua: &'a Lua,
    data: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn need(&self, n: usize) -> Result<&[u8], DecodeError> {
        self.data
            .get(self.at..self.at.checked_add(n).ok_or(DecodeError::Eof)?)
            .ok_or(DecodeError::Eof)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let start = self.at;
        self.need(n)?;
        self.at += n;
        Ok(&self.data[start..start + n])
    }

    fn be(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | b as u64))
    }

    fn string(&mut self, len: usize) -> Result<Value, DecodeError> {
        let lua = self.lua;
        let bytes = self.take(len)?;
        let text = lua
            .create_string(bytes)
            .map_err(|e| DecodeError::Lua(e.to_string()))?;
        Ok(Value::String(text))
    }

    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        crate::scripting::deep(|| self.value_here(depth))
    }

    fn value_here(&mut self, depth: usize) -> Result<Value, DecodeError> {
        if depth > UNPACK_NESTING_MAX {
            return Err(DecodeError::Lua(
                "stack overflow (in function mp_decode_to_lua_array)".into(),
            ));
        }
        let first = self.need(1)?[0];
        self.at += 1;
        Ok(match first {
            0xcc => Value::Number(self.be(1)? as f64),
            0xd0 => Value::Number(self.be(1)? as u8 as i8 as f64),
            0xcd => Value::Number(self.be(2)? as f64),
            0xd1 => Value::Number(self.be(2)? as u16 as i16 as f64),
            0xce => Value::Number(self.be(4)? as f64),
            0xd2 => Value::Number(self.be(4)? as u32 as i32 as f64),
            0xcf => Value::Number(self.be(8)? as f64),
            0xd3 => Value::Number(self.be(8)? as i64 as f64),
            0xc0 => Value::Nil,
            0xc3 => Value::Boolean(true),
            0xc2 => Value::Boolean(false),
            0xca => Value::Number(f32::from_bits(self.be(4)? as u32) as f64),
            0xcb => Value::Number(f64::from_bits(self.be(8)?)),
            0xd9 => {
                let len = self.be(1)? as usize;
                self.string(len)?
            }
            0xda => {
                let len = self.be(2)? as usize;
                self.string(len)?
            }
            0xdb => {
                let len = self.be(4)? as usize;
                self.string(len)?
            }
            0xdc => {
                let len = self.be(2)? as usize;
                self.array(len, depth)?
            }
            0xdd => {
                let len = self.be(4)? as usize;
                self.array(len, depth)?
            }
            0xde => {
                let len = self.be(2)? as usize;
                self.map(len, depth)?
            }
            0xdf => {
                let len = self.be(4)? as usize;
                self.map(len, depth)?
            }
            byte if byte & 0x80 == 0 => Value::Number(byte as f64),
            byte if byte & 0xe0 == 0xe0 => Value::Number(byte as i8 as f64),
            byte if byte & 0xe0 == 0xa0 => self.string((byte & 0x1f) as usize)?,
            byte if byte & 0xf0 == 0x90 => self.array((byte & 0x0f) as usize, depth)?,
            byte if byte & 0xf0 == 0x80 => self.map((byte & 0x0f) as usize, depth)?,
            _ => return Err(DecodeError::BadFormat),
        })
    }

    fn table(&self) -> Result<Table, DecodeError> {
        self.lua
            .create_table()
            .map_err(|e| DecodeError::Lua(e.to_string()))
    }

    /// Element counts come from the input: nothing is reserved for them, and each element
    /// needs at least a byte, so a false count ends in "Missing bytes".
    fn array(&mut self, len: usize, depth: usize) -> Result<Value, DecodeError> {
        let table = self.table()?;
        for index in 1..=len {
            let value = self.value(depth + 1)?;
            table
                .raw_set(index, value)
                .map_err(|e| DecodeError::Lua(e.to_string()))?;
        }
        Ok(Value::Table(table))
    }

    fn map(&mut self, len: usize, depth: usize) -> Result<Value, DecodeError> {
        let table = self.table()?;
        for _ in 0..len {
            let key = self.value(depth + 1)?;
            let value = self.value(depth + 1)?;
            if key.is_nil() {
                return Err(DecodeError::Lua("table index is nil".into()));
            }
            table
                .raw_set(key, value)
                .map_err(|e| DecodeError::Lua(e.to_string()))?;
        }
        Ok(Value::Table(table))
    }
}

/// `mp_unpack_full`.
fn unpack_full(
    lua: &Lua,
    args: &MultiValue,
    limit: i64,
    offset: i64,
) -> Result<Vec<Value>, String> {
    let data = match args.front() {
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(v @ (Value::Integer(_) | Value::Number(_))) => lua
            .coerce_string(v.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or_default(),
        other => {
            let got = other.map_or("no value", |v| v.type_name());
            return Err(format!(
                "bad argument #1 to '?' (string expected, got {got})"
            ));
        }
    };
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Err(format!(
            "Invalid request to unpack with offset of {} and limit of {}.",
            offset as i32,
            data.len() as i32
        ));
    } else if offset as usize > data.len() {
        return Err(format!(
            "Start offset {} greater than input length {}.",
            offset as i32,
            data.len() as i32
        ));
    }
    let limit = if decode_all { i32::MAX as i64 } else { limit };
    let mut cursor = Cursor {
        lua,
        data: &data,
        at: offset as usize,
    };
    let mut values = Vec::new();
    let mut count = 0;
    while cursor.at < data.len() && count < limit {
        match cursor.value(0) {
            Ok(value) => values.push(value),
            Err(DecodeError::Eof) => return Err("Missing bytes in input.".into()),
            Err(DecodeError::BadFormat) => return Err("Bad data format in input.".into()),
            Err(DecodeError::Lua(message)) => return Err(message),
        }
        count += 1;
    }
    if !decode_all {
        let next = if cursor.at == data.len() {
            -1.0
        } else {
            cursor.at as f64
        };
        values.insert(0, Value::Number(next));
    }
    Ok(values)
}

fn unpack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    done(unpack_full(lua, &args, 0, 0))
}

fn optional_integer(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    function: &str,
) -> Result<i64, String> {
    match args.get(index) {
        None | Some(Value::Nil) => Ok(0),
        Some(_) => Ok(check_number(lua, args, index, function)? as i64),
    }
}

fn unpack_one(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let result = optional_integer(lua, &args, 1, "unpack_one")
        .and_then(|offset| unpack_full(lua, &args, 1, offset));
    done(result)
}

fn unpack_limit(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let result = check_number(lua, &args, 1, "unpack_limit").and_then(|limit| {
        let offset = optional_integer(lua, &args, 2, "unpack_limit")?;
        unpack_full(lua, &args, limit as i64, offset)
    });
    done(result)
}
