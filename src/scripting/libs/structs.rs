//! `struct`: Roberto Ierusalimschy's struct library 0.2 as Redis bundles it
//! (`lua_struct.c`): `pack`, `unpack` and `size` of binary records, on x86-64's sizes
//! (long and size_t 8 bytes, int 4, alignment up to 8), little-endian by default.

use super::{bad_argument, check_number, check_string, opt_number, results};
use crate::scripting::reply::truncate_like_c;
use crate::scripting::sandbox::Checked;
use mlua::{Lua, MultiValue, Value};

pub const FUNCTIONS: &[(&str, Checked)] = &[("pack", pack), ("unpack", unpack), ("size", size)];

/// The largest integer size an `i<n>` / `I<n>` may name.
const INT_SIZE_MAX: usize = 32;
/// The strictest alignment `!` may default to (a double's, on x86-64).
const ALIGN_MAX: usize = 8;
/// Results `unpack` may return before Lua's stack limit (`luaL_checkstack`).
const RESULTS_MAX: usize = 7_900;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Endian {
    Big,
    Little,
}

struct Header {
    endian: Endian,
    align: usize,
}

impl Default for Header {
    fn default() -> Self {
        Header {
            endian: Endian::Little,
            align: 1,
        }
    }
}

/// A format string being read.
struct Format<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Format<'_> {
    fn next_option(&mut self) -> Option<u8> {
        let option = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(option)
    }

    /// `getnum`: digits after an option, or `default`.
    fn number(&mut self, default: usize) -> Result<usize, String> {
        if !self.bytes.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut value: usize = 0;
        while let Some(&digit) = self.bytes.get(self.at).filter(|b| b.is_ascii_digit()) {
            let digit = (digit - b'0') as usize;
            if value > (i32::MAX as usize) / 10 || value * 10 > i32::MAX as usize - digit {
                return Err("integral size overflow".into());
            }
            value = value * 10 + digit;
            self.at += 1;
        }
        Ok(value)
    }

    /// `optsize`: the size of an option's item (0 for options that are not items).
    fn size_of(&mut self, option: u8) -> Result<usize, String> {
        Ok(match option {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let size = self.number(4)?;
                if size > INT_SIZE_MAX {
                    return Err(format!(
                        "integral size {size} is larger than limit of {INT_SIZE_MAX}"
                    ));
                }
                size
            }
            _ => 0,
        })
    }
}

/// `gettoalign`: padding before an item of `size` at `len`.
fn padding(len: usize, header: &Header, option: u8, size: usize) -> usize {
    if size == 0 || option == b'c' {
        return 0;
    }
    let size = size.min(header.align);
    (size - (len & (size - 1))) & (size - 1)
}

/// `controloptions`: endianness, alignment, spaces; anything else is an error.
fn control(
    option: u8,
    format: &mut Format,
    header: &mut Header,
    function: &str,
) -> Result<(), String> {
    match option {
        b' ' => Ok(()),
        b'>' => {
            header.endian = Endian::Big;
            Ok(())
        }
        b'<' => {
            header.endian = Endian::Little;
            Ok(())
        }
        b'!' => {
            let align = format.number(ALIGN_MAX)?;
            if !align.is_power_of_two() {
                return Err(format!("alignment {align} is not a power of 2"));
            }
            header.align = align;
            Ok(())
        }
        other => Err(bad_argument(
            0,
            function,
            &format!("invalid format option '{}'", other as char),
        )),
    }
}

fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let format_bytes = check_string(lua, &args, 0, "pack")?;
    let mut format = Format {
        bytes: &format_bytes,
        at: 0,
    };
    let mut header = Header::default();
    let mut out: Vec<u8> = Vec::new();
    let mut arg = 1;
    while let Some(option) = format.next_option() {
        let mut size = format.size_of(option)?;
        let pad = padding(out.len(), &header, option, size);
        out.resize(out.len() + pad, 0);
        match option {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                let mut value: u64 = if n < 0.0 {
                    truncate_like_c(n) as u64
                } else {
                    n as u64
                };
                let mut bytes = vec![0u8; size];
                for byte in bytes.iter_mut() {
                    *byte = (value & 0xff) as u8;
                    value = value.checked_shr(8).unwrap_or(0);
                }
                if header.endian == Endian::Big {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let f = check_number(lua, &args, arg, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&match header.endian {
                    Endian::Little => f.to_le_bytes(),
                    Endian::Big => f.to_be_bytes(),
                });
            }
            b'd' => {
                let d = check_number(lua, &args, arg, "pack")?;
                arg += 1;
                out.extend_from_slice(&match header.endian {
                    Endian::Little => d.to_le_bytes(),
                    Endian::Big => d.to_be_bytes(),
                });
            }
            b'c' | b's' => {
                let s = check_string(lua, &args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    // Redis's source names the argument after the string (`arg` was
                    // already advanced).
                    return Err(bad_argument(arg, "pack", "string too short"));
                }
                out.extend_from_slice(&s[..size]);
                if option == b's' {
                    out.push(0);
                }
            }
            other => control(other, &mut format, &mut header, "pack")?,
        }
    }
    let packed = lua.create_string(&out).map_err(super::lua_error)?;
    results(lua, vec![Value::String(packed)])
}

/// `getinteger`: an integer of `size` bytes.
fn read_integer(bytes: &[u8], endian: Endian, signed: bool) -> f64 {
    let mut value: u64 = 0;
    let mut push = |byte: u8| value = (value << 8) | byte as u64;
    match endian {
        Endian::Big => bytes.iter().for_each(|&b| push(b)),
        Endian::Little => bytes.iter().rev().for_each(|&b| push(b)),
    }
    if !signed {
        return value as f64;
    }
    let bits = bytes.len() * 8;
    if bits == 0 || bits > 64 {
        return value as i64 as f64;
    }
    let mask = u64::MAX << (bits - 1);
    if value & mask != 0 {
        value |= mask;
    }
    value as i64 as f64
}

fn unpack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let format_bytes = check_string(lua, &args, 0, "unpack")?;
    let data = check_string(lua, &args, 1, "unpack")?;
    let start = opt_number(lua, &args, 2, "unpack", 1.0)? as i64;
    // Redis's struct reads the offset into a size_t: only 0 is refused here; a negative
    // one wraps to a position past any string and is "data string too short" below.
    if start == 0 {
        return Err(bad_argument(2, "unpack", "offset must be 1 or greater"));
    }
    let mut format = Format {
        bytes: &format_bytes,
        at: 0,
    };
    let mut header = Header::default();
    let mut position = (start as u64).wrapping_sub(1) as usize;
    let mut out: Vec<Value> = Vec::new();
    let too_short = || bad_argument(1, "unpack", "data string too short");
    while let Some(option) = format.next_option() {
        let mut size = format.size_of(option)?;
        position = position.wrapping_add(padding(position, &header, option, size));
        if size > data.len() || position > data.len() - size {
            return Err(too_short());
        }
        if out.len() >= RESULTS_MAX {
            return Err("stack overflow (too many results)".into());
        }
        match option {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let signed = option.is_ascii_lowercase();
                let bytes = &data[position..position + size];
                out.push(Value::Number(read_integer(bytes, header.endian, signed)));
            }
            b'x' => {}
            b'f' => {
                let mut bytes = [0u8; 4];
                bytes.copy_from_slice(&data[position..position + 4]);
                let f = match header.endian {
                    Endian::Little => f32::from_le_bytes(bytes),
                    Endian::Big => f32::from_be_bytes(bytes),
                };
                out.push(Value::Number(f as f64));
            }
            b'd' => {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&data[position..position + 8]);
                let d = match header.endian {
                    Endian::Little => f64::from_le_bytes(bytes),
                    Endian::Big => f64::from_be_bytes(bytes),
                };
                out.push(Value::Number(d));
            }
            b'c' => {
                if size == 0 {
                    let previous = match out.last() {
                        Some(Value::Number(n)) => Some(*n),
                        Some(Value::Integer(n)) => Some(*n as f64),
                        Some(Value::String(s)) => {
                            lua.coerce_number(Value::String(s.clone())).ok().flatten()
                        }
                        _ => None,
                    };
                    let Some(previous) = previous else {
                        return Err("format 'c0' needs a previous size".into());
                    };
                    out.pop();
                    size = previous as usize;
                    if size > data.len() || position > data.len() - size {
                        return Err(too_short());
                    }
                }
                let text = lua
                    .create_string(&data[position..position + size])
                    .map_err(super::lua_error)?;
                out.push(Value::String(text));
            }
            b's' => {
                let Some(end) = data[position..].iter().position(|&b| b == 0) else {
                    return Err("unfinished string in data".into());
                };
                size = end + 1;
                let text = lua
                    .create_string(&data[position..position + end])
                    .map_err(super::lua_error)?;
                out.push(Value::String(text));
            }
            other => control(other, &mut format, &mut header, "unpack")?,
        }
        position += size;
    }
    out.push(Value::Number((position + 1) as f64));
    results(lua, out)
}

fn size(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let format_bytes = check_string(lua, &args, 0, "size")?;
    let mut format = Format {
        bytes: &format_bytes,
        at: 0,
    };
    let mut header = Header::default();
    let mut position = 0usize;
    while let Some(option) = format.next_option() {
        let size = format.size_of(option)?;
        position = position.wrapping_add(padding(position, &header, option, size));
        if option == b's' {
            return Err(bad_argument(0, "size", "option 's' has no fixed size"));
        } else if option == b'c' && size == 0 {
            return Err(bad_argument(0, "size", "option 'c0' has no fixed size"));
        }
        if !option.is_ascii_alphanumeric() {
            control(option, &mut format, &mut header, "size")?;
        }
        position += size;
    }
    results(lua, vec![Value::Number(position as f64)])
}
