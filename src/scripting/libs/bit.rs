//! `bit`: LuaBitOp 1.0.2 (Redis's `lua_bit.c`). Operands are taken modulo 2^32 with
//! round-to-nearest (the C source's 2^52 + 2^51 addition) and results are signed 32-bit.

use super::{check_number, opt_number, results};
use crate::scripting::sandbox::Checked;
use mlua::{Lua, MultiValue, Value};

pub const FUNCTIONS: &[(&str, Checked)] = &[
    ("tobit", tobit),
    ("bnot", bnot),
    ("band", band),
    ("bor", bor),
    ("bxor", bxor),
    ("lshift", lshift),
    ("rshift", rshift),
    ("arshift", arshift),
    ("rol", rol),
    ("ror", ror),
    ("bswap", bswap),
    ("tohex", tohex),
];

/// LuaBitOp's `barg`: the low 32 bits of the number rounded to an integer.
fn to_bits(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn arg(lua: &Lua, args: &MultiValue, index: usize, function: &str) -> Result<u32, String> {
    check_number(lua, args, index, function).map(to_bits)
}

fn number(lua: &Lua, bits: u32) -> Result<MultiValue, String> {
    results(lua, vec![Value::Number(bits as i32 as f64)])
}

fn tobit(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    number(lua, arg(lua, &args, 0, "tobit")?)
}

fn bnot(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    number(lua, !arg(lua, &args, 0, "bnot")?)
}

fn fold(
    lua: &Lua,
    args: &MultiValue,
    function: &str,
    op: fn(u32, u32) -> u32,
) -> Result<MultiValue, String> {
    let mut value = arg(lua, args, 0, function)?;
    for index in 1..args.len() {
        value = op(value, arg(lua, args, index, function)?);
    }
    number(lua, value)
}

fn band(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    fold(lua, &args, "band", |a, b| a & b)
}

fn bor(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    fold(lua, &args, "bor", |a, b| a | b)
}

fn bxor(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    fold(lua, &args, "bxor", |a, b| a ^ b)
}

fn shift(
    lua: &Lua,
    args: &MultiValue,
    function: &str,
    op: fn(u32, u32) -> u32,
) -> Result<MultiValue, String> {
    let value = arg(lua, args, 0, function)?;
    let count = arg(lua, args, 1, function)? & 31;
    number(lua, op(value, count))
}

fn lshift(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    shift(lua, &args, "lshift", |v, n| v << n)
}

fn rshift(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    shift(lua, &args, "rshift", |v, n| v >> n)
}

fn arshift(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    shift(lua, &args, "arshift", |v, n| ((v as i32) >> n) as u32)
}

fn rol(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    shift(lua, &args, "rol", |v, n| v.rotate_left(n))
}

fn ror(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    shift(lua, &args, "ror", |v, n| v.rotate_right(n))
}

fn bswap(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    number(lua, arg(lua, &args, 0, "bswap")?.swap_bytes())
}

fn tohex(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let value = arg(lua, &args, 0, "tohex")?;
    let mut digits = to_bits(opt_number(lua, &args, 1, "tohex", 8.0)?) as i32;
    // Redis's fix of CVE-2024-31449: INT_MIN, whose negation overflows, counts as
    // INT_MIN + 1 (eight upper-case digits).
    if digits == i32::MIN {
        digits += 1;
    }
    let upper = digits < 0;
    if upper {
        digits = -digits;
    }
    let digits = digits.clamp(0, 8) as usize;
    let alphabet: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    let mut text = vec![0u8; digits];
    let mut rest = value;
    for slot in text.iter_mut().rev() {
        *slot = alphabet[(rest & 15) as usize];
        rest >>= 4;
    }
    let text = lua.create_string(&text).map_err(super::lua_error)?;
    results(lua, vec![Value::String(text)])
}
