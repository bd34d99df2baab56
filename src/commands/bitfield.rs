//! BITFIELD and BITFIELD_RO: integers of 1 to 64 bits (i1…i64, u1…u63) at any bit offset
//! of a string, read (GET), written (SET) and incremented (INCRBY) under an OVERFLOW
//! policy (WRAP, SAT, FAIL), as Redis 7.0 parses and runs them.
//!
//! Every operation is parsed before the key is looked up, so a bad argument anywhere
//! fails the whole command and changes nothing. GETs alone read the key (a read lookup,
//! a missing key reads as zeros); any SET or INCRBY makes the string at least as long as
//! the farthest field written (created, and `new` raised, if absent) — even when every
//! write then fails under OVERFLOW FAIL, as in Redis. Operations run in order, each
//! seeing the ones before it.
//!
//! The keyspace event is `setbit`, once, after the reply, when a write changed a field's
//! bits or the string appeared or grew. The command is logged as it came then: it
//! replays to the same bytes over the same string (the overflow arithmetic depends on
//! nothing else). When a string was created or grown but every write failed, Redis
//! neither signals nor propagates the command; Tessera still logs it, without
//! signalling (no WATCH, no invalidation, as Redis), so that replay has those bytes too.

use super::bitmaps::{bit_offset, keyword, string_for_bits, until_nul};
use super::{Action, Args, CommandSpec, Ctx, EventClass, SYNTAX_ERROR, flags::*, int_arg};
use crate::command;
use crate::resp::parse_i64;
use crate::types::bits::{self, Overflow};

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "bitfield",
            -2,
            WRITE | DENYOOM,
            (1, 1, 1),
            "bitmap",
            "Performs arbitrary bitfield integer operations on strings.",
            bitfield
        ),
        command!(
            "bitfield_ro",
            -2,
            READONLY | FAST,
            (1, 1, 1),
            "bitmap",
            "Performs arbitrary read-only bitfield integer operations on strings.",
            bitfield_ro
        ),
    ]
}

const TYPE_ERROR: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Operation {
    Get,
    /// SET's value.
    Set(i64),
    /// INCRBY's increment.
    IncrBy(i64),
}

/// One parsed operation.
#[derive(Clone, Copy)]
struct FieldOperation {
    operation: Operation,
    signed: bool,
    bits: u32,
    offset: u64,
    /// The OVERFLOW in force where it was given.
    overflow: Overflow,
}

impl FieldOperation {
    /// The last bit a write reaches.
    fn last_bit(&self) -> u64 {
        self.offset + self.bits as u64 - 1
    }
}

fn bitfield(ctx: &mut Ctx, args: &Args) -> Action {
    run(ctx, args, false)
}

fn bitfield_ro(ctx: &mut Ctx, args: &Args) -> Action {
    run(ctx, args, true)
}

/// A field type (`i8`, `u63`…): signedness and width, or None after Redis's error. As
/// Redis, the width is read as a C string (up to a NUL).
fn field_type(ctx: &mut Ctx, arg: &[u8]) -> Option<(bool, u32)> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => {
            ctx.out.error(TYPE_ERROR);
            return None;
        }
    };
    let widest = if signed { 64 } else { 63 };
    match parse_i64(until_nul(&arg[1..])) {
        Some(bits) if (1..=widest).contains(&bits) => Some((signed, bits as u32)),
        _ => {
            ctx.out.error(TYPE_ERROR);
            None
        }
    }
}

/// Every operation, or None after the first error (Redis's order: the subcommand, the
/// type, the offset, the value).
fn parse(ctx: &mut Ctx, args: &Args) -> Option<Vec<FieldOperation>> {
    let mut operations = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut index = 2;
    while index < args.len() {
        let remaining = args.len() - index - 1;
        let name = args[index];
        let kind = if keyword(name, "get") && remaining >= 2 {
            Operation::Get
        } else if keyword(name, "set") && remaining >= 3 {
            Operation::Set(0)
        } else if keyword(name, "incrby") && remaining >= 3 {
            Operation::IncrBy(0)
        } else if keyword(name, "overflow") && remaining >= 1 {
            let policy = args[index + 1];
            overflow = if keyword(policy, "wrap") {
                Overflow::Wrap
            } else if keyword(policy, "sat") {
                Overflow::Saturate
            } else if keyword(policy, "fail") {
                Overflow::Fail
            } else {
                ctx.out.error("ERR Invalid OVERFLOW type specified");
                return None;
            };
            index += 2;
            continue;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        };
        let (signed, bits) = field_type(ctx, args[index + 1])?;
        let offset = bit_offset(ctx, args[index + 2], Some(bits))?;
        let operation = match kind {
            Operation::Get => Operation::Get,
            Operation::Set(_) => Operation::Set(int_arg(ctx, args[index + 3])?),
            Operation::IncrBy(_) => Operation::IncrBy(int_arg(ctx, args[index + 3])?),
        };
        operations.push(FieldOperation {
            operation,
            signed,
            bits,
            offset,
            overflow,
        });
        index += if operation == Operation::Get { 3 } else { 4 };
    }
    Some(operations)
}

fn run(ctx: &mut Ctx, args: &Args, read_only: bool) -> Action {
    let key = args[1];
    let Some(operations) = parse(ctx, args) else {
        return Action::None;
    };
    let last_bit = operations
        .iter()
        .filter(|op| op.operation != Operation::Get)
        .map(FieldOperation::last_bit)
        .max();
    let Some(last_bit) = last_bit else {
        // GETs only: a read lookup, whatever the command.
        let Ok(value) = ctx.reading(|ctx| ctx.get_string(key)) else {
            return Action::None;
        };
        let bytes = value.as_deref().unwrap_or(&[]);
        ctx.out.array(operations.len());
        for op in &operations {
            ctx.out.integer(read(bytes, op));
        }
        return Action::None;
    };
    if read_only {
        ctx.out
            .error("ERR BITFIELD_RO only supports the GET subcommand");
        return Action::None;
    }
    let Ok((bytes, grew)) = string_for_bits(ctx, key, (last_bit >> 3) as usize + 1) else {
        return Action::None;
    };
    let mut replies: Vec<Option<i64>> = Vec::with_capacity(operations.len());
    let mut changes = 0usize;
    for op in &operations {
        let reply = match op.operation {
            Operation::Get => Some(read(bytes, op)),
            Operation::Set(_) | Operation::IncrBy(_) => {
                let written = write(bytes, op);
                if let Some((_, old, new)) = written
                    && (grew || old != new)
                {
                    changes += 1;
                }
                written.map(|(reply, _, _)| reply)
            }
        };
        replies.push(reply);
    }
    ctx.out.array(replies.len());
    for reply in replies {
        match reply {
            Some(value) => ctx.out.integer(value),
            None => ctx.out.null(),
        }
    }
    if changes > 0 {
        ctx.notify(EventClass::String, "setbit", key);
        ctx.propagate(args);
    } else if grew {
        // Redis signals nothing here and logs nothing; the string did appear or grow,
        // so the record is kept (replay gives these bytes) without touching watchers.
        let db = ctx.client.db;
        ctx.effects.record(db, args);
    }
    Action::None
}

/// A GET: the field's value, the string read as if zeros followed it.
fn read(bytes: &[u8], op: &FieldOperation) -> i64 {
    if op.signed {
        bits::read_signed(bytes, op.offset, op.bits)
    } else {
        bits::read_unsigned(bytes, op.offset, op.bits) as i64
    }
}

/// A SET or INCRBY on a field inside `bytes`: (the reply — SET's old value, INCRBY's new
/// one —, the old bits, the new bits), or None when it overflows under FAIL (nothing
/// written).
fn write(bytes: &mut [u8], op: &FieldOperation) -> Option<(i64, u64, u64)> {
    let old = bits::read_unsigned(bytes, op.offset, op.bits);
    let (value, increment) = match op.operation {
        Operation::Set(value) => (value, 0),
        Operation::IncrBy(increment) => (0, increment),
        Operation::Get => unreachable!("GET writes nothing"),
    };
    let is_set = matches!(op.operation, Operation::Set(_));
    let (reply, new) = if op.signed {
        let old_signed = bits::read_signed(bytes, op.offset, op.bits);
        let new = if is_set {
            bits::signed_result(value, 0, op.bits, op.overflow)?
        } else {
            bits::signed_result(old_signed, increment, op.bits, op.overflow)?
        };
        (if is_set { old_signed } else { new }, new as u64)
    } else {
        let new = if is_set {
            bits::unsigned_result(value as u64, 0, op.bits, op.overflow)?
        } else {
            bits::unsigned_result(old, increment, op.bits, op.overflow)?
        };
        (if is_set { old as i64 } else { new as i64 }, new)
    };
    bits::write_field(bytes, op.offset, op.bits, new);
    // Only the field's bits count: a signed value carries its sign beyond them.
    let new_bits = if op.bits == 64 {
        new
    } else {
        new & !(u64::MAX << op.bits)
    };
    Some((reply, old, new_bits))
}
