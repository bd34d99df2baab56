//! `cjson`: Lua CJSON 2.1.0 as Redis bundles it (`lua_cjson.c`): `encode` and `decode`
//! with its rules (numbers as "%.14g", '/' escaped, tables that are arrays of 1..n with at
//! most half holes — or up to 10 — as arrays, others as objects, `cjson.null` for JSON
//! null, hexadecimal, `inf` and `nan` accepted when decoding), its error messages and its
//! settings (`encode_max_depth`, `decode_max_depth`, `encode_number_precision`,
//! `encode_sparse_array`, `encode_invalid_numbers`, `decode_invalid_numbers`,
//! `encode_keep_buffer`), which, as in Redis, last for the interpreter's life.

use super::{bad_argument, check_number, check_string, results};
use crate::scripting::sandbox::Checked;
use mlua::{Lua, MultiValue, Table, Value};

pub const FUNCTIONS: &[(&str, Checked)] = &[
    ("encode", encode),
    ("decode", decode),
    ("encode_sparse_array", encode_sparse_array),
    ("encode_max_depth", encode_max_depth),
    ("decode_max_depth", decode_max_depth),
    ("encode_number_precision", encode_number_precision),
    ("encode_keep_buffer", encode_keep_buffer),
    ("encode_invalid_numbers", encode_invalid_numbers),
    ("decode_invalid_numbers", decode_invalid_numbers),
];

/// How deep decoding may nest, whatever `decode_max_depth` says (its default), and
/// encoding likewise: each level is a recursive call.
const DECODE_NESTING_MAX: usize = 1000;
const ENCODE_NESTING_MAX: usize = 1000;

/// The settings, kept in the interpreter (its app data).
#[derive(Clone, Copy)]
struct Config {
    encode_max_depth: usize,
    decode_max_depth: usize,
    precision: u8,
    sparse_convert: bool,
    sparse_ratio: usize,
    sparse_safe: usize,
    /// 0: refuse NaN and Inf; 1: write them; 2: write null.
    encode_invalid_numbers: u8,
    decode_invalid_numbers: bool,
    keep_buffer: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            encode_max_depth: 1000,
            decode_max_depth: 1000,
            precision: 14,
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_invalid_numbers: 0,
            decode_invalid_numbers: true,
            keep_buffer: true,
        }
    }
}

fn config(lua: &Lua) -> Config {
    lua.app_data_ref::<Config>().map(|c| *c).unwrap_or_default()
}

fn set_config(lua: &Lua, config: Config) {
    lua.set_app_data(config);
}

// ===== Encoding =====

fn encode(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    if args.len() != 1 {
        return Err(bad_argument(0, "encode", "expected 1 argument"));
    }
    let config = config(lua);
    let mut out = Vec::new();
    append(&config, &mut out, &args[0], 0)?;
    let text = lua.create_string(&out).map_err(super::lua_error)?;
    results(lua, vec![Value::String(text)])
}

fn cannot(value: &Value, reason: &str) -> String {
    format!("Cannot serialise {}: {reason}", value.type_name())
}

fn append(config: &Config, out: &mut Vec<u8>, value: &Value, depth: usize) -> Result<(), String> {
    crate::scripting::deep(|| append_here(config, out, value, depth))
}

fn append_here(
    config: &Config,
    out: &mut Vec<u8>,
    value: &Value,
    depth: usize,
) -> Result<(), String> {
    match value {
        Value::String(s) => append_string(out, &s.as_bytes()),
        Value::Integer(n) => append_number(config, out, *n as f64, value)?,
        Value::Number(n) => append_number(config, out, *n, value)?,
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(ud) if ud.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(table) => {
            let depth = depth + 1;
            if depth > config.encode_max_depth.min(ENCODE_NESTING_MAX) {
                return Err(format!("Cannot serialise, excessive nesting ({depth})"));
            }
            match array_length(config, table, value)? {
                Some(length) if length > 0 => {
                    out.push(b'[');
                    for index in 1..=length {
                        if index > 1 {
                            out.push(b',');
                        }
                        let item: Value = table.raw_get(index).map_err(super::lua_error)?;
                        append(config, out, &item, depth)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in table.pairs::<Value, Value>() {
                        let (key, item) = pair.map_err(super::lua_error)?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match &key {
                            Value::Integer(_) | Value::Number(_) => {
                                out.push(b'"');
                                let n = match key {
                                    Value::Integer(n) => n as f64,
                                    Value::Number(n) => n,
                                    _ => unreachable!(),
                                };
                                append_number(config, out, n, &key)?;
                                out.extend_from_slice(b"\":");
                            }
                            Value::String(s) => {
                                append_string(out, &s.as_bytes());
                                out.push(b':');
                            }
                            other => {
                                return Err(cannot(other, "table key must be a number or string"));
                            }
                        }
                        append(config, out, &item, depth)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return Err(cannot(other, "type not supported")),
    }
    Ok(())
}

/// `lua_array_length`: Some(max index) when every key is an integer ≥ 1 and the array is
/// not excessively sparse, None for an object.
fn array_length(config: &Config, table: &Table, value: &Value) -> Result<Option<usize>, String> {
    let mut max = 0usize;
    let mut items = 0usize;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair.map_err(super::lua_error)?;
        let k = match key {
            Value::Integer(n) => n as f64,
            Value::Number(n) => n,
            _ => return Ok(None),
        };
        if k == 0.0 || k.floor() != k || k < 1.0 {
            return Ok(None);
        }
        max = max.max(k.min(i32::MAX as f64) as usize);
        items += 1;
    }
    if config.sparse_ratio > 0 && max > items * config.sparse_ratio && max > config.sparse_safe {
        if !config.sparse_convert {
            return Err(cannot(value, "excessively sparse array"));
        }
        return Ok(None);
    }
    Ok(Some(max))
}

fn append_number(config: &Config, out: &mut Vec<u8>, n: f64, value: &Value) -> Result<(), String> {
    if !n.is_finite() {
        match config.encode_invalid_numbers {
            0 => return Err(cannot(value, "must not be NaN or Inf")),
            1 if n.is_nan() => {
                out.extend_from_slice(b"nan");
                return Ok(());
            }
            1 => {}
            _ => {
                out.extend_from_slice(b"null");
                return Ok(());
            }
        }
    }
    out.extend_from_slice(format_g(n, config.precision).as_bytes());
    Ok(())
}

/// "%.<precision>g".
fn format_g(n: f64, precision: u8) -> String {
    let mut buf = [0u8; 64];
    let format = format!("%.{precision}g\0");
    // SAFETY: `buf` is 64 bytes and its size is passed, so snprintf writes at most that;
    // the format is NUL-terminated, precision at most 14, and takes exactly one double.
    let len = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            format.as_ptr() as *const libc::c_char,
            n,
        )
    };
    String::from_utf8_lossy(&buf[..(len.max(0) as usize).min(buf.len() - 1)]).into_owned()
}

fn append_string(out: &mut Vec<u8>, bytes: &[u8]) {
    out.push(b'"');
    for &byte in bytes {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\x08' => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\x0c' => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{:04x}", byte).as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

// ===== Decoding =====

#[derive(Debug)]
enum Token {
    ObjectBegin,
    ObjectEnd,
    ArrayBegin,
    ArrayEnd,
    String(Vec<u8>),
    Number(f64),
    Boolean(bool),
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl Token {
    fn name(&self) -> &'static str {
        match self {
            Token::ObjectBegin => "T_OBJ_BEGIN",
            Token::ObjectEnd => "T_OBJ_END",
            Token::ArrayBegin => "T_ARR_BEGIN",
            Token::ArrayEnd => "T_ARR_END",
            Token::String(_) => "T_STRING",
            Token::Number(_) => "T_NUMBER",
            Token::Boolean(_) => "T_BOOLEAN",
            Token::Null => "T_NULL",
            Token::Colon => "T_COLON",
            Token::Comma => "T_COMMA",
            Token::End => "T_END",
            Token::Error(reason) => reason,
        }
    }
}

struct Parser<'a> {
    lua: &'a Lua,
    config: Config,
    /// The text with a NUL after it (the C parser stops at a NUL, and strtod needs one).
    data: &'a [u8],
    at: usize,
    depth: usize,
}

impl Parser<'_> {
    fn byte(&self, at: usize) -> u8 {
        self.data.get(at).copied().unwrap_or(0)
    }

    /// The next token and the index where it starts.
    fn next(&mut self) -> (Token, usize) {
        while matches!(self.byte(self.at), b' ' | b'\t' | b'\r' | b'\n') {
            self.at += 1;
        }
        let start = self.at;
        let single = match self.byte(self.at) {
            b'{' => Some(Token::ObjectBegin),
            b'}' => Some(Token::ObjectEnd),
            b'[' => Some(Token::ArrayBegin),
            b']' => Some(Token::ArrayEnd),
            b':' => Some(Token::Colon),
            b',' => Some(Token::Comma),
            0 => return (Token::End, start),
            _ => None,
        };
        if let Some(token) = single {
            self.at += 1;
            return (token, start);
        }
        let rest = &self.data[self.at..];
        let ch = rest[0];
        let token = if ch == b'"' {
            self.string()
        } else if ch == b'-' || ch.is_ascii_digit() {
            if !self.config.decode_invalid_numbers && self.invalid_number() {
                Token::Error("invalid number")
            } else {
                self.number()
            }
        } else if rest.starts_with(b"true") {
            self.at += 4;
            Token::Boolean(true)
        } else if rest.starts_with(b"false") {
            self.at += 5;
            Token::Boolean(false)
        } else if rest.starts_with(b"null") {
            self.at += 4;
            Token::Null
        } else if matches!(ch, b'i' | b'I' | b'n' | b'N' | b'+')
            && self.config.decode_invalid_numbers
            && self.invalid_number()
        {
            self.number()
        } else {
            Token::Error("invalid token")
        };
        let index = if matches!(token, Token::Error(_)) {
            self.at
        } else {
            start
        };
        (token, index)
    }

    /// `json_is_invalid_number`: '+', hexadecimal, a leading zero, inf or nan.
    fn invalid_number(&self) -> bool {
        let mut p = self.at;
        if self.byte(p) == b'+' {
            return true;
        }
        if self.byte(p) == b'-' {
            p += 1;
        }
        let c = self.byte(p);
        if c == b'0' {
            let c2 = self.byte(p + 1);
            return (c2 | 0x20) == b'x' || c2.is_ascii_digit();
        } else if c <= b'9' {
            return false;
        }
        let word = &self.data[p..self.data.len().min(p + 3)];
        word.eq_ignore_ascii_case(b"inf") || word.eq_ignore_ascii_case(b"nan")
    }

    fn number(&mut self) -> Token {
        let mut end: *mut libc::c_char = std::ptr::null_mut();
        // SAFETY: `data` ends with a NUL (see `decode`), so strtod reads within it; `end`
        // is set to a position inside it.
        let (value, used) = unsafe {
            let start = self.data.as_ptr().add(self.at) as *const libc::c_char;
            let value = libc::strtod(start, &mut end);
            (value, end.offset_from(start) as usize)
        };
        if used == 0 {
            return Token::Error("invalid number");
        }
        self.at += used;
        Token::Number(value)
    }

    fn string(&mut self) -> Token {
        self.at += 1;
        let mut text = Vec::new();
        loop {
            let ch = self.byte(self.at);
            match ch {
                b'"' => break,
                0 => return Token::Error("unexpected end of string"),
                b'\\' => {
                    let escaped = match self.byte(self.at + 1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b't' => b'\t',
                        b'n' => b'\n',
                        b'f' => 12,
                        b'r' => b'\r',
                        b'u' => match self.unicode_escape(&mut text) {
                            Some(()) => continue,
                            None => return Token::Error("invalid unicode escape code"),
                        },
                        _ => return Token::Error("invalid escape code"),
                    };
                    text.push(escaped);
                    self.at += 2;
                }
                _ => {
                    text.push(ch);
                    self.at += 1;
                }
            }
        }
        self.at += 1;
        Token::String(text)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.data.get(at..at + 4)?;
        let text = std::str::from_utf8(digits).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(text, 16).ok()
    }

    /// `json_append_unicode_escape`: \uXXXX (and a surrogate pair) as UTF-8.
    fn unicode_escape(&mut self, text: &mut Vec<u8>) -> Option<()> {
        let mut codepoint = self.hex4(self.at + 2)?;
        let mut length = 6;
        if (0xDC00..=0xDFFF).contains(&codepoint) {
            return None;
        }
        if (0xD800..=0xDBFF).contains(&codepoint) {
            if self.byte(self.at + 6) != b'\\' || self.byte(self.at + 7) != b'u' {
                return None;
            }
            let low = self.hex4(self.at + 8)?;
            if !(0xDC00..=0xDFFF).contains(&low) {
                return None;
            }
            codepoint = (((codepoint & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            length = 12;
        }
        let c = char::from_u32(codepoint)?;
        let mut buf = [0u8; 4];
        text.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        self.at += length;
        Some(())
    }

    fn error(&self, expected: &str, token: &Token, index: usize) -> String {
        format!(
            "Expected {expected} but found {} at character {}",
            token.name(),
            index + 1
        )
    }

    fn descend(&mut self, index: usize) -> Result<(), String> {
        self.depth += 1;
        // Capped whatever the setting says: the parser recurses once per level.
        if self.depth > self.config.decode_max_depth.min(DECODE_NESTING_MAX) {
            return Err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth,
                index + 1
            ));
        }
        Ok(())
    }

    fn value(&mut self, token: Token, index: usize) -> Result<Value, String> {
        crate::scripting::deep(|| self.value_here(token, index))
    }

    fn value_here(&mut self, token: Token, index: usize) -> Result<Value, String> {
        let lua = self.lua;
        Ok(match token {
            Token::String(text) => {
                Value::String(lua.create_string(&text).map_err(super::lua_error)?)
            }
            Token::Number(n) => Value::Number(n),
            Token::Boolean(b) => Value::Boolean(b),
            Token::Null => Value::NULL,
            Token::ObjectBegin => self.object(index)?,
            Token::ArrayBegin => self.array(index)?,
            other => return Err(self.error("value", &other, index)),
        })
    }

    fn object(&mut self, index: usize) -> Result<Value, String> {
        self.descend(index)?;
        let table = self.lua.create_table().map_err(super::lua_error)?;
        let (mut token, mut at) = self.next();
        if matches!(token, Token::ObjectEnd) {
            self.depth -= 1;
            return Ok(Value::Table(table));
        }
        loop {
            let Token::String(key) = token else {
                return Err(self.error("object key string", &token, at));
            };
            let (colon, colon_at) = self.next();
            if !matches!(colon, Token::Colon) {
                return Err(self.error("colon", &colon, colon_at));
            }
            let (value_token, value_at) = self.next();
            let value = self.value(value_token, value_at)?;
            let key = self.lua.create_string(&key).map_err(super::lua_error)?;
            table.raw_set(key, value).map_err(super::lua_error)?;
            let (separator, separator_at) = self.next();
            match separator {
                Token::ObjectEnd => break,
                Token::Comma => {}
                other => return Err(self.error("comma or object end", &other, separator_at)),
            }
            (token, at) = self.next();
        }
        self.depth -= 1;
        Ok(Value::Table(table))
    }

    fn array(&mut self, index: usize) -> Result<Value, String> {
        self.descend(index)?;
        let table = self.lua.create_table().map_err(super::lua_error)?;
        let (mut token, mut at) = self.next();
        if matches!(token, Token::ArrayEnd) {
            self.depth -= 1;
            return Ok(Value::Table(table));
        }
        let mut i = 1;
        loop {
            let value = self.value(token, at)?;
            table.raw_set(i, value).map_err(super::lua_error)?;
            i += 1;
            let (separator, separator_at) = self.next();
            match separator {
                Token::ArrayEnd => break,
                Token::Comma => {}
                other => return Err(self.error("comma or array end", &other, separator_at)),
            }
            (token, at) = self.next();
        }
        self.depth -= 1;
        Ok(Value::Table(table))
    }
}

fn decode(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    if args.len() != 1 {
        return Err(bad_argument(0, "decode", "expected 1 argument"));
    }
    let mut text = check_string(lua, &args, 0, "decode")?;
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Err("JSON parser does not support UTF-16 or UTF-32".into());
    }
    text.push(0);
    let mut parser = Parser {
        lua,
        config: config(lua),
        data: &text,
        at: 0,
        depth: 0,
    };
    let (token, at) = parser.next();
    let value = parser.value(token, at)?;
    let (end, end_at) = parser.next();
    if !matches!(end, Token::End) {
        return Err(parser.error("the end", &end, end_at));
    }
    results(lua, vec![value])
}

// ===== Settings =====

/// An integer setting in `min..=max`, or the current value when not given.
fn integer_setting(
    lua: &Lua,
    args: &MultiValue,
    index: usize,
    function: &str,
    range: (usize, usize),
) -> Result<Option<usize>, String> {
    match args.get(index) {
        None | Some(Value::Nil) => Ok(None),
        Some(_) => {
            let n = check_number(lua, args, index, function)? as i64;
            if n < range.0 as i64 || n > range.1 as i64 {
                return Err(bad_argument(
                    index,
                    function,
                    &format!("expected integer between {} and {}", range.0, range.1),
                ));
            }
            Ok(Some(n as usize))
        }
    }
}

fn bool_setting(
    args: &MultiValue,
    index: usize,
    function: &str,
    options: &[&str],
) -> Result<Option<usize>, String> {
    match args.get(index) {
        None | Some(Value::Nil) => Ok(None),
        Some(Value::Boolean(b)) => Ok(Some(*b as usize)),
        Some(Value::String(s)) => {
            let text = s.to_string_lossy();
            match options.iter().position(|o| *o == text) {
                Some(i) => Ok(Some(i)),
                None => Err(bad_argument(
                    index,
                    function,
                    &format!("invalid option '{text}'"),
                )),
            }
        }
        Some(_) => Err(bad_argument(
            index,
            function,
            &format!("invalid option '{}'", ""),
        )),
    }
}

fn number_result(lua: &Lua, values: &[f64]) -> Result<MultiValue, String> {
    results(lua, values.iter().map(|v| Value::Number(*v)).collect())
}

fn encode_sparse_array(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let mut c = config(lua);
    if let Some(convert) = bool_setting(&args, 0, "encode_sparse_array", &["off", "on"])? {
        c.sparse_convert = convert == 1;
    }
    if let Some(ratio) =
        integer_setting(lua, &args, 1, "encode_sparse_array", (0, i32::MAX as usize))?
    {
        c.sparse_ratio = ratio;
    }
    if let Some(safe) =
        integer_setting(lua, &args, 2, "encode_sparse_array", (0, i32::MAX as usize))?
    {
        c.sparse_safe = safe;
    }
    set_config(lua, c);
    results(
        lua,
        vec![
            Value::Boolean(c.sparse_convert),
            Value::Number(c.sparse_ratio as f64),
            Value::Number(c.sparse_safe as f64),
        ],
    )
}

fn encode_max_depth(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let mut c = config(lua);
    if let Some(depth) = integer_setting(lua, &args, 0, "encode_max_depth", (1, i32::MAX as usize))?
    {
        c.encode_max_depth = depth;
    }
    set_config(lua, c);
    number_result(lua, &[c.encode_max_depth as f64])
}

fn decode_max_depth(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let mut c = config(lua);
    if let Some(depth) = integer_setting(lua, &args, 0, "decode_max_depth", (1, i32::MAX as usize))?
    {
        c.decode_max_depth = depth;
    }
    set_config(lua, c);
    number_result(lua, &[c.decode_max_depth as f64])
}

fn encode_number_precision(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let mut c = config(lua);
    if let Some(precision) = integer_setting(lua, &args, 0, "encode_number_precision", (1, 14))? {
        c.precision = precision as u8;
    }
    set_config(lua, c);
    number_result(lua, &[c.precision as f64])
}

fn encode_keep_buffer(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let mut c = config(lua);
    if let Some(keep) = bool_setting(&args, 0, "encode_keep_buffer", &["off", "on"])? {
        c.keep_buffer = keep == 1;
    }
    set_config(lua, c);
    results(lua, vec![Value::Boolean(c.keep_buffer)])
}

fn encode_invalid_numbers(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let mut c = config(lua);
    if let Some(mode) = bool_setting(&args, 0, "encode_invalid_numbers", &["off", "on", "null"])? {
        c.encode_invalid_numbers = mode as u8;
    }
    set_config(lua, c);
    let value = match c.encode_invalid_numbers {
        0 => Value::Boolean(false),
        1 => Value::Boolean(true),
        _ => Value::String(lua.create_string("null").map_err(super::lua_error)?),
    };
    results(lua, vec![value])
}

fn decode_invalid_numbers(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let mut c = config(lua);
    if let Some(mode) = bool_setting(&args, 0, "decode_invalid_numbers", &["off", "on"])? {
        c.decode_invalid_numbers = mode == 1;
    }
    set_config(lua, c);
    results(lua, vec![Value::Boolean(c.decode_invalid_numbers)])
}
