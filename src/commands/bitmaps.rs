//! Bitmap commands over strings: SETBIT, GETBIT, BITCOUNT, BITPOS and BITOP, and what
//! BITFIELD (`bitfield`) shares with them: bit offsets and the string a write grows.
//! The bit arithmetic itself is `crate::types::bits`.
//!
//! As Redis 7.0: a bit offset addresses at most `proto-max-bulk-len` bytes (not while
//! the log is replayed: a record was accepted once, as Redis's `mustObeyClient` lets its
//! AOF client through); SETBIT and BITFIELD grow the string with zeros to the byte they
//! address, so SETBIT at offset 2^32-1 allocates 512 MB, as in Redis, and nothing larger
//! is ever allocated. The string is changed in place while the keyspace holds its only
//! handle (`Str::make_mut`), so a SETBIT costs the same on a bitmap of any size; a
//! snapshot's capture that still shares it keeps the old bytes (the change copies).
//!
//! Keyspace events: `setbit` when SETBIT created the string, grew it or changed the bit;
//! BITOP `set` on its destination, or `del` when its result is empty and the
//! destination existed (with `new` when a key is created, as everywhere). Logged: SETBIT
//! as it came, when it changed something; BITOP as it came (deterministic: it replays
//! over the same sources, their deletions being logged before it), or DEL for an empty
//! result. Keywords (BIT, BYTE, AND…) are compared as C strings, up to a NUL, as Redis's
//! `strcasecmp` compares them.

use super::{
    Action, AlreadyReplied, Args, CommandSpec, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR,
    eq_ignore_case, flags::*,
};
use crate::command;
use crate::keyspace::{Entry, Key, NO_EXPIRY, Value, key_slot};
use crate::resp::parse_i64;
use crate::types::bits::{first_bit, get_bit, popcount, set_bit};
use crate::types::string::{MAX_LEN, Str, StrBuilder};

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "setbit",
            4,
            WRITE | DENYOOM,
            (1, 1, 1),
            "bitmap",
            "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.",
            setbit
        ),
        command!(
            "getbit",
            3,
            READONLY | FAST,
            (1, 1, 1),
            "bitmap",
            "Returns a bit value by offset.",
            getbit
        ),
        command!(
            "bitcount",
            -2,
            READONLY,
            (1, 1, 1),
            "bitmap",
            "Counts the number of set bits (population counting) in a string.",
            bitcount
        ),
        command!(
            "bitpos",
            -3,
            READONLY,
            (1, 1, 1),
            "bitmap",
            "Finds the first set (1) or clear (0) bit in a string.",
            bitpos
        ),
        command!(
            "bitop",
            -4,
            WRITE | DENYOOM,
            (2, -1, 1),
            "bitmap",
            "Performs bitwise operations on multiple strings, and stores the result.",
            bitop
        ),
    ]
}

pub(super) const BIT_OFFSET_ERROR: &str = "ERR bit offset is not an integer or out of range";
const BIT_VALUE_ERROR: &str = "ERR bit is not an integer or out of range";

/// `arg` as a C string sees it: up to its first NUL.
pub(super) fn until_nul(arg: &[u8]) -> &[u8] {
    arg.iter()
        .position(|&b| b == 0)
        .map_or(arg, |nul| &arg[..nul])
}

/// Whether `arg` is the keyword `word`, compared as Redis's `strcasecmp` does.
pub(super) fn keyword(arg: &[u8], word: &str) -> bool {
    eq_ignore_case(until_nul(arg), word)
}

/// The bytes a bit offset may address: `proto-max-bulk-len`, but no limit of the
/// configuration while the log is replayed, and never past what a `Str` holds (less the
/// 8 bytes a BITFIELD field may reach beyond its offset).
fn offset_bytes_max(ctx: &Ctx) -> u64 {
    let most = (MAX_LEN - 8) as u64;
    if ctx.loading {
        most
    } else {
        (ctx.server.config.bulk_bytes_max as u64).min(most)
    }
}

/// A bit offset argument, or None after Redis's error. `field_bits`: BITFIELD's width,
/// which allows the `#n` form (the n-th field of that width); the product wraps as
/// Redis's does (so `#2^60` of an i16 is offset 0 there too).
pub(super) fn bit_offset(ctx: &mut Ctx, arg: &[u8], field_bits: Option<u32>) -> Option<u64> {
    let (digits, multiplier) = match field_bits {
        Some(bits) if arg.first() == Some(&b'#') => (&arg[1..], bits as i64),
        _ => (arg, 1),
    };
    match parse_i64(digits).map(|n| n.wrapping_mul(multiplier)) {
        Some(offset) if offset >= 0 && (offset as u64 >> 3) < offset_bytes_max(ctx) => {
            Some(offset as u64)
        }
        _ => {
            ctx.out.error(BIT_OFFSET_ERROR);
            None
        }
    }
}

/// The string at `key` for changing its bits in place, at least `len` bytes long (zeros
/// added), created when absent (raising `new`): Redis's `lookupStringForBitCommand`, a
/// write lookup. Returns the bytes and whether the string was created or grew (Redis's
/// `dirty`), or Err after WRONGTYPE.
pub(super) fn string_for_bits<'c>(
    ctx: &'c mut Ctx,
    key: &[u8],
    len: usize,
) -> Result<(&'c mut [u8], bool), AlreadyReplied> {
    let exists = match ctx.lookup(key).map(|entry| &entry.value) {
        None => false,
        Some(Value::String(..)) => true,
        Some(_) => {
            ctx.wrong_type();
            return Err(AlreadyReplied);
        }
    };
    let db = ctx.client.db;
    if exists {
        // `get_mut` captures the slot if a snapshot still needs it; a string the capture
        // (or anything else) shares is let go of here, and `make_mut` below copies it.
        let shared = ctx.keyspace.dbs[db]
            .get_mut(key)
            .and_then(|entry| entry.value.is_shared().then(|| entry.value.clone()));
        if let Some(value) = shared {
            ctx.keyspace.dbs[db].let_go(key_slot(key), &value);
        }
    } else {
        ctx.keyspace.dbs[db].insert(Entry {
            key: Key::from(key),
            value: Value::string(Str::zeroed(len)),
            expire_at_ms: NO_EXPIRY,
        });
        ctx.notify(EventClass::New, "new", key);
    }
    let entry = ctx.keyspace.dbs[db]
        .get_mut(key)
        .expect("found or created above");
    let Value::String(string, _) = &mut entry.value else {
        unreachable!("checked to be a string above");
    };
    let old_len = string.len();
    let bytes = string.make_mut(len);
    let grew = !exists || bytes.len() != old_len;
    Ok((bytes, grew))
}

fn setbit(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(offset) = bit_offset(ctx, args[2], None) else {
        return Action::None;
    };
    let on = match parse_i64(args[3]) {
        Some(0) => false,
        Some(1) => true,
        _ => {
            ctx.out.error(BIT_VALUE_ERROR);
            return Action::None;
        }
    };
    let Ok((bytes, grew)) = string_for_bits(ctx, args[1], (offset >> 3) as usize + 1) else {
        return Action::None;
    };
    let was = get_bit(bytes, offset);
    // As Redis 7.0: nothing is signalled or logged when the bit already had the value
    // and the string neither appeared nor grew.
    let changed = grew || was != on;
    if changed {
        set_bit(bytes, offset, on);
        ctx.notify(EventClass::String, "setbit", args[1]);
        ctx.propagate(args);
    }
    ctx.out.integer(was as i64);
    Action::None
}

fn getbit(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(offset) = bit_offset(ctx, args[2], None) else {
        return Action::None;
    };
    if let Ok(value) = ctx.get_string(args[1]) {
        let on = value.is_some_and(|bytes| get_bit(&bytes, offset));
        ctx.out.integer(on as i64);
    }
    Action::None
}

/// BITCOUNT's and BITPOS's range, resolved as Redis does: negative indexes count from
/// the end, then both are clamped into the string. In BIT mode the range becomes the
/// bytes holding it, with a mask of the bits of the first and of the last byte that lie
/// outside it.
#[derive(Clone, Copy)]
struct Range {
    /// Byte indexes, inclusive; empty when `start > end`.
    start: i64,
    end: i64,
    /// Bits of byte `start` before the range (set bits of the mask).
    first_outside: u8,
    /// Bits of byte `end` after the range.
    last_outside: u8,
}

impl Range {
    fn whole(len: i64) -> Range {
        Range {
            start: 0,
            end: len - 1,
            first_outside: 0,
            last_outside: 0,
        }
    }

    /// `start` and `end` in bytes, or in bits when `in_bits`, of a string of `len` bytes.
    fn resolve(start: i64, end: i64, len: i64, in_bits: bool) -> Range {
        let total = if in_bits { len << 3 } else { len };
        let mut start = if start < 0 { total + start } else { start };
        let mut end = if end < 0 { total + end } else { end };
        start = start.max(0);
        end = end.max(0).min(total - 1);
        if in_bits && start <= end {
            Range {
                start: start >> 3,
                end: end >> 3,
                first_outside: !((1u32 << (8 - (start & 7))) - 1) as u8,
                last_outside: ((1u32 << (7 - (end & 7))) - 1) as u8,
            }
        } else {
            Range {
                start,
                end,
                first_outside: 0,
                last_outside: 0,
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.start > self.end
    }
}

/// BIT or BYTE (true for BIT), or None after a syntax error.
fn unit(ctx: &mut Ctx, arg: &[u8]) -> Option<bool> {
    if keyword(arg, "bit") {
        Some(true)
    } else if keyword(arg, "byte") {
        Some(false)
    } else {
        ctx.out.error(SYNTAX_ERROR);
        None
    }
}

fn integer_arg(ctx: &mut Ctx, arg: &[u8]) -> Option<i64> {
    let parsed = parse_i64(arg);
    if parsed.is_none() {
        ctx.out.error(NOT_INTEGER);
    }
    parsed
}

fn bitcount(ctx: &mut Ctx, args: &Args) -> Action {
    // Redis looks the key up before it reads the range: a missing key counts 0 whatever
    // follows it.
    let value = match ctx.get_string(args[1]) {
        Err(AlreadyReplied) => return Action::None,
        Ok(None) => {
            ctx.out.integer(0);
            return Action::None;
        }
        Ok(Some(value)) => value,
    };
    let len = value.len() as i64;
    let range = match args.len() {
        2 => Range::whole(len),
        4 | 5 => {
            let Some(start) = integer_arg(ctx, args[2]) else {
                return Action::None;
            };
            let Some(end) = integer_arg(ctx, args[3]) else {
                return Action::None;
            };
            if start < 0 && end < 0 && start > end {
                ctx.out.integer(0);
                return Action::None;
            }
            let in_bits = match args.get(4) {
                None => false,
                Some(arg) => match unit(ctx, arg) {
                    Some(in_bits) => in_bits,
                    None => return Action::None,
                },
            };
            Range::resolve(start, end, len, in_bits)
        }
        _ => {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    };
    if range.is_empty() {
        ctx.out.integer(0);
        return Action::None;
    }
    let (start, end) = (range.start as usize, range.end as usize);
    let outside = (value[start] & range.first_outside).count_ones()
        + (value[end] & range.last_outside).count_ones();
    let count = popcount(&value[start..=end]) - outside as u64;
    ctx.out.integer(count as i64);
    Action::None
}

/// Redis's `redisBitpos`: the first `bit` in `bytes`, else -1 when looking for a one
/// and, when looking for a zero, the first bit after them (the string is read as if
/// zeros followed it).
fn search(bytes: &[u8], bit: bool) -> i64 {
    match first_bit(bytes, bit) {
        Some(position) => position as i64,
        None if bit => -1,
        None => bytes.len() as i64 * 8,
    }
}

/// A byte with the bits `outside` a range made unable to match `bit`.
fn masked(byte: u8, outside: u8, bit: bool) -> u8 {
    if bit { byte & !outside } else { byte | outside }
}

fn bitpos(ctx: &mut Ctx, args: &Args) -> Action {
    let bit = match parse_i64(args[2]) {
        None => {
            ctx.out.error(NOT_INTEGER);
            return Action::None;
        }
        Some(0) => false,
        Some(1) => true,
        Some(_) => {
            ctx.out.error("ERR The bit argument must be 1 or 0.");
            return Action::None;
        }
    };
    // A missing key is an endless run of zeros.
    let value = match ctx.get_string(args[1]) {
        Err(AlreadyReplied) => return Action::None,
        Ok(None) => {
            ctx.out.integer(if bit { -1 } else { 0 });
            return Action::None;
        }
        Ok(Some(value)) => value,
    };
    let len = value.len() as i64;
    let mut end_given = false;
    let range = match args.len() {
        3 => Range::whole(len),
        4..=6 => {
            let Some(start) = integer_arg(ctx, args[3]) else {
                return Action::None;
            };
            let in_bits = match args.get(5) {
                None => false,
                Some(arg) => match unit(ctx, arg) {
                    Some(in_bits) => in_bits,
                    None => return Action::None,
                },
            };
            let end = match args.get(4) {
                Some(arg) => {
                    let Some(end) = integer_arg(ctx, arg) else {
                        return Action::None;
                    };
                    end_given = true;
                    end
                }
                None if in_bits => (len << 3) + 7,
                None => len - 1,
            };
            Range::resolve(start, end, len, in_bits)
        }
        _ => {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    };
    // An empty range holds neither a 0 nor a 1.
    if range.is_empty() {
        ctx.out.integer(-1);
        return Action::None;
    }
    let position = find_in_range(&value, range, bit, end_given);
    ctx.out.integer(position);
    Action::None
}

/// BITPOS over a non-empty range, as Redis 7.0 walks it: the first byte (masked in BIT
/// mode), the bytes in between, the last byte (masked). Looking for a zero without an
/// explicit end, the bits after the range count as zeros (the answer may be the first
/// bit after it); with an explicit end, finding none answers -1.
fn find_in_range(value: &[u8], range: Range, bit: bool, end_given: bool) -> i64 {
    let mut start = range.start as usize;
    let end = range.end as usize;
    let mut bytes = end - start + 1;
    let position = 'found: {
        if range.first_outside != 0 {
            let mut first = masked(value[start], range.first_outside, bit);
            if range.last_outside != 0 && bytes == 1 {
                first = masked(first, range.last_outside, bit);
            }
            let position = search(&[first], bit);
            if bytes == 1 || (position != -1 && position != 8) {
                break 'found position;
            }
            start += 1;
            bytes -= 1;
        }
        // The last byte is searched on its own when part of it lies outside the range.
        let middle = bytes - (range.last_outside != 0) as usize;
        if middle > 0 {
            let position = search(&value[start..start + middle], bit);
            if bytes == middle || (position != -1 && position != middle as i64 * 8) {
                break 'found position;
            }
            start += middle;
            bytes -= middle;
        }
        search(&[masked(value[end], range.last_outside, bit)], bit)
    };
    if end_given && !bit && position == bytes as i64 * 8 {
        return -1;
    }
    if position == -1 {
        -1
    } else {
        position + start as i64 * 8
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BitOperation {
    And,
    Or,
    Xor,
    Not,
}

fn bitop(ctx: &mut Ctx, args: &Args) -> Action {
    let operation = if keyword(args[1], "and") {
        BitOperation::And
    } else if keyword(args[1], "or") {
        BitOperation::Or
    } else if keyword(args[1], "xor") {
        BitOperation::Xor
    } else if keyword(args[1], "not") {
        BitOperation::Not
    } else {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    };
    if operation == BitOperation::Not && args.len() != 4 {
        ctx.out
            .error("ERR BITOP NOT must be called with a single source key.");
        return Action::None;
    }
    // Redis's read lookups, one source after another (a missing one is empty; the first
    // of another type ends the command).
    let mut sources: Vec<Option<Str>> = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        match ctx.reading(|ctx| ctx.get_string(key)) {
            Ok(value) => sources.push(value),
            Err(AlreadyReplied) => return Action::None,
        }
    }
    let longest = sources.iter().flatten().map(|s| s.len()).max().unwrap_or(0);
    let destination = args[2];
    if longest == 0 {
        // Redis's `dbDelete`: no expiry check first.
        if ctx.db().remove(destination).is_some() {
            ctx.notify(EventClass::Generic, "del", destination);
            ctx.propagate(&[b"DEL", destination]);
        }
        ctx.out.integer(0);
        return Action::None;
    }
    let result = combine(operation, &sources, longest);
    // Redis's `setKey`: a write lookup of the destination (an expired one is deleted
    // first), the TTL dropped.
    ctx.expire_if_needed(destination);
    let previous = ctx.db().insert(Entry {
        key: Key::from(destination),
        value: Value::string(result),
        expire_at_ms: NO_EXPIRY,
    });
    if previous.is_none() {
        ctx.notify(EventClass::New, "new", destination);
    }
    ctx.notify(EventClass::String, "set", destination);
    ctx.propagate(args);
    ctx.out.integer(longest as i64);
    Action::None
}

/// The result of `operation` over `sources`, `len` bytes (the longest source's), the
/// shorter ones read as if zeros followed them; built where it will be stored.
fn combine(operation: BitOperation, sources: &[Option<Str>], len: usize) -> Str {
    let source = |index: usize| -> &[u8] { sources[index].as_deref().unwrap_or(&[]) };
    let mut builder = StrBuilder::new(len, len);
    let result = builder.as_mut_slice();
    let first = source(0);
    result[..first.len()].copy_from_slice(first);
    if operation == BitOperation::Not {
        result.iter_mut().for_each(|byte| *byte = !*byte);
        return builder.finish();
    }
    for index in 1..sources.len() {
        let other = source(index);
        let (covered, beyond) = result.split_at_mut(other.len());
        let pairs = covered.iter_mut().zip(other);
        match operation {
            BitOperation::And => {
                pairs.for_each(|(byte, other)| *byte &= other);
                beyond.fill(0);
            }
            BitOperation::Or => pairs.for_each(|(byte, other)| *byte |= other),
            BitOperation::Xor => pairs.for_each(|(byte, other)| *byte ^= other),
            BitOperation::Not => unreachable!("NOT has one source"),
        }
    }
    builder.finish()
}
