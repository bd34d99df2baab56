//! HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! A HyperLogLog is a string value in Redis 7.0's layout (`crate::types::hll`); these
//! handlers read it, build the changed bytes and store them as a new string (strings are
//! immutable here), keeping the key's TTL as Redis's in-place change does.
//!
//! What the log holds, so that replay gives the same bytes:
//! - PFADD on a sketch that was dense: the command itself. A dense update is a function
//!   of the bytes and the elements only.
//! - PFADD that creates or changes a sparse sketch, PFMERGE, and PFDEBUG GETREG / TODENSE
//!   when they convert: `SET key <bytes> KEEPTTL`. The sparse form depends on
//!   `hll-sparse-max-bytes` at the time of the write (when to turn dense), which a replay
//!   under another configuration would not reproduce; the bytes are small while sparse
//!   (at most that limit) and a promotion logs 12 KB once.
//! - PFCOUNT that refreshes the cached cardinality (a change of the value, which Redis
//!   propagates too): `SETRANGE key 8 <eight bytes>`.
//!
//! Keyspace events, as Redis 7.0 raises them: `new` when PFADD or PFMERGE creates the
//! key, then `pfadd` (PFMERGE raises `pfadd` too); PFCOUNT and PFDEBUG raise none.

use super::{Action, AlreadyReplied, Args, CommandSpec, Ctx, EventClass, flags::*};
use crate::command;
use crate::keyspace::{Entry, NO_EXPIRY, Value};
use crate::types::Str;
use crate::types::hll::{self, Encoding};

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "pfadd",
            -2,
            WRITE | DENYOOM | FAST,
            (1, 1, 1),
            "hyperloglog",
            "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
            pfadd
        ),
        command!(
            "pfcount",
            -2,
            READONLY,
            (1, -1, 1),
            "hyperloglog",
            "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
            pfcount
        ),
        command!(
            "pfmerge",
            -2,
            WRITE | DENYOOM,
            (1, -1, 1),
            "hyperloglog",
            "Merges one or more HyperLogLog values into a single key.",
            pfmerge
        ),
        command!(
            "pfdebug",
            3,
            WRITE | DENYOOM | ADMIN,
            (2, 2, 1),
            "hyperloglog",
            "Internal commands for debugging HyperLogLog values.",
            pfdebug
        ),
        command!(
            "pfselftest",
            1,
            ADMIN,
            (0, 0, 0),
            "hyperloglog",
            "An internal command for testing HyperLogLog values.",
            pfselftest
        ),
    ]
}

/// How a command looks its keys up (Redis's `lookupKeyWrite` or `lookupKeyRead`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lookup {
    Write,
    Read,
}

/// What a key holds, as far as a HyperLogLog command cares.
enum Found {
    Absent,
    Sketch(Str, Encoding),
    OtherType,
    NotSketch,
}

fn classify(entry: Option<&Entry>) -> Found {
    match entry.map(|entry| &entry.value) {
        None => Found::Absent,
        Some(Value::String(bytes, _)) => match hll::encoding_of(bytes) {
            Ok(encoding) => Found::Sketch(bytes.clone(), encoding),
            Err(hll::NotHll) => Found::NotSketch,
        },
        Some(_) => Found::OtherType,
    }
}

/// The sketch at `key`: Ok(None) if absent, Err after Redis's reply for a key of another
/// type or a string that is no sketch.
fn sketch_at(
    ctx: &mut Ctx,
    key: &[u8],
    lookup: Lookup,
) -> Result<Option<(Str, Encoding)>, AlreadyReplied> {
    let found = match lookup {
        Lookup::Write => classify(ctx.lookup(key)),
        Lookup::Read => classify(ctx.lookup_read(key)),
    };
    match found {
        Found::Absent => Ok(None),
        Found::Sketch(bytes, encoding) => Ok(Some((bytes, encoding))),
        Found::OtherType => {
            ctx.wrong_type();
            Err(AlreadyReplied)
        }
        Found::NotSketch => {
            ctx.out.error(hll::NOT_HLL);
            Err(AlreadyReplied)
        }
    }
}

/// Stores `bytes` at `key`, keeping its TTL; a key it creates raises `new`.
fn store(ctx: &mut Ctx, key: &[u8], bytes: &[u8]) {
    let db = ctx.db();
    let expire_at_ms = db.get(key).map_or(NO_EXPIRY, |entry| entry.expire_at_ms);
    let previous = db.insert(Entry {
        key: crate::keyspace::Key::from(key),
        value: Value::string(Str::from(bytes)),
        expire_at_ms,
    });
    if previous.is_none() {
        ctx.notify(EventClass::New, "new", key);
    }
}

/// Logs the value now at `key` as it is (see the module's header for when).
fn log_bytes(ctx: &mut Ctx, key: &[u8], bytes: &[u8]) {
    ctx.propagate(&[b"SET", key, bytes, b"KEEPTTL"]);
}

/// Logs the value now at `key` without telling anyone it changed: no WATCH abort, no
/// tracking invalidation, no `dirty` unless `counted`. Redis's PFDEBUG converts a sketch
/// without signalling the key (it only counts the change), and its PFADD leaves the
/// registers raised before finding damage without signalling or counting them; Tessera
/// does the same, and logs the bytes anyway so that replay gives the value clients see.
fn log_bytes_unsignalled(ctx: &mut Ctx, key: &[u8], bytes: &[u8], counted: bool) {
    if counted {
        ctx.server.dirty += 1;
    }
    let db = ctx.client.db;
    ctx.effects.record(db, &[b"SET", key, bytes, b"KEEPTTL"]);
}

fn sparse_bytes_max() -> usize {
    usize::try_from(crate::types::limits::hll_sparse_max_bytes()).unwrap_or(usize::MAX)
}

fn pfadd(ctx: &mut Ctx, args: &Args) -> Action {
    let key = args[1];
    let Ok(found) = sketch_at(ctx, key, Lookup::Write) else {
        return Action::None;
    };
    let (mut sketch, was_dense, created) = match found {
        None => (hll::Sketch::new(hll::new_sparse()), false, true),
        Some((bytes, encoding)) => (
            hll::Sketch::new(bytes.to_vec()),
            encoding == Encoding::Dense,
            false,
        ),
    };
    let limit = sparse_bytes_max();
    // Redis counts one change per register raised (and one for a new key).
    let mut changes = u64::from(created);
    for element in &args[2..] {
        match sketch.add(element, limit) {
            Ok(true) => changes += 1,
            Ok(false) => {}
            Err(hll::Corrupt) => {
                // Registers raised before the damage was found stay raised, as in Redis
                // (which changes the value in place): the value and the log keep them.
                if changes > 0 {
                    store(ctx, key, sketch.bytes());
                    log_bytes_unsignalled(ctx, key, sketch.bytes(), false);
                }
                ctx.out.error(hll::CORRUPT);
                return Action::None;
            }
        }
    }
    if changes > 0 {
        sketch.invalidate_cache();
        store(ctx, key, sketch.bytes());
        ctx.notify(EventClass::String, "pfadd", key);
        if was_dense {
            ctx.propagate(args);
        } else {
            log_bytes(ctx, key, sketch.bytes());
        }
        // `propagate` counted one.
        ctx.server.dirty += changes - 1;
    }
    ctx.out.integer(i64::from(changes > 0));
    Action::None
}

fn pfcount(ctx: &mut Ctx, args: &Args) -> Action {
    if args.len() > 2 {
        // The union, computed on the side: no key changes.
        let mut union = hll::MaxRegisters::default();
        for key in &args[1..] {
            let Ok(found) = sketch_at(ctx, key, Lookup::Read) else {
                return Action::None;
            };
            let Some((bytes, _)) = found else {
                continue;
            };
            if union.merge(&bytes).is_err() {
                ctx.out.error(hll::CORRUPT);
                return Action::None;
            }
        }
        ctx.out.integer(union.count() as i64);
        return Action::None;
    }
    let key = args[1];
    let Ok(found) = sketch_at(ctx, key, Lookup::Read) else {
        return Action::None;
    };
    let Some((bytes, _)) = found else {
        ctx.out.integer(0);
        return Action::None;
    };
    if let Some(cardinality) = hll::cached_cardinality(&bytes) {
        ctx.out.integer(cardinality as i64);
        return Action::None;
    }
    let Ok(cardinality) = hll::count(&bytes) else {
        ctx.out.error(hll::CORRUPT);
        return Action::None;
    };
    // The count is cached in the value: a change, logged as the eight bytes it writes.
    let mut refreshed = bytes.to_vec();
    hll::set_cached_cardinality(&mut refreshed, cardinality);
    store(ctx, key, &refreshed);
    let offset = itoa::Buffer::new().format(hll::CARDINALITY_AT).to_owned();
    let cached = hll::cardinality_bytes(cardinality);
    ctx.propagate(&[b"SETRANGE", key, offset.as_bytes(), &cached]);
    // Redis replies the unsigned count as a signed one (only a hand-made sketch tells).
    ctx.out.integer(cardinality as i64);
    Action::None
}

fn pfmerge(ctx: &mut Ctx, args: &Args) -> Action {
    let mut union = hll::MaxRegisters::default();
    let mut any_dense = false;
    // Every key is read, the target included (its registers are part of the union).
    for key in &args[1..] {
        let Ok(found) = ctx.reading(|ctx| sketch_at(ctx, key, Lookup::Read)) else {
            return Action::None;
        };
        let Some((bytes, encoding)) = found else {
            continue;
        };
        any_dense |= encoding == Encoding::Dense;
        if union.merge(&bytes).is_err() {
            ctx.out.error(hll::CORRUPT);
            return Action::None;
        }
    }
    let target = args[1];
    // Checked above: absent, or a whole sketch.
    let existing = match ctx.lookup(target).map(|entry| &entry.value) {
        Some(Value::String(bytes, _)) => Some(bytes.to_vec()),
        _ => None,
    };
    let mut sketch = hll::Sketch::new(existing.unwrap_or_else(hll::new_sparse));
    // At least one input is dense: so is the result, without going through the sparse
    // form.
    if any_dense && sketch.make_dense().is_err() {
        ctx.out.error(hll::CORRUPT);
        return Action::None;
    }
    let limit = sparse_bytes_max();
    for index in 0..hll::REGISTERS {
        let value = union.get(index);
        if value > 0 {
            // The target is a whole sketch (checked above): raising cannot fail, and
            // Redis ignores the result here anyway.
            let _ = sketch.raise(index, value, limit);
        }
    }
    sketch.invalidate_cache();
    store(ctx, target, sketch.bytes());
    // A merge is a mass-add: Redis raises `pfadd` for it.
    ctx.notify(EventClass::String, "pfadd", target);
    log_bytes(ctx, target, sketch.bytes());
    ctx.out.ok();
    Action::None
}

fn pfdebug(ctx: &mut Ctx, args: &Args) -> Action {
    let (subcommand, key) = (args[1], args[2]);
    let Ok(found) = sketch_at_or_missing(ctx, key) else {
        return Action::None;
    };
    let (bytes, encoding) = found;
    let word = String::from_utf8_lossy(subcommand).to_ascii_lowercase();
    match word.as_str() {
        "getreg" => {
            let Ok(dense) = to_dense(ctx, key, &bytes, encoding) else {
                return Action::None;
            };
            let registers = hll::dense_registers(&dense);
            ctx.out.array(registers.len());
            for register in registers {
                ctx.out.integer(i64::from(register));
            }
        }
        "decode" => {
            if encoding != Encoding::Sparse {
                ctx.out.error("ERR HLL encoding is not sparse");
            } else {
                ctx.out.bulk(hll::decode_sparse(&bytes).as_bytes());
            }
        }
        "encoding" => ctx.out.simple(encoding.name()),
        "todense" => {
            if to_dense(ctx, key, &bytes, encoding).is_ok() {
                ctx.out.integer(i64::from(encoding == Encoding::Sparse));
            }
        }
        _ => ctx.out.error(&format!(
            "ERR Unknown PFDEBUG subcommand '{}'",
            String::from_utf8_lossy(subcommand)
        )),
    }
    Action::None
}

/// PFDEBUG's key: a sketch, or Err after the reply (Redis answers a missing key with an
/// error of its own, before it looks at the subcommand).
fn sketch_at_or_missing(ctx: &mut Ctx, key: &[u8]) -> Result<(Str, Encoding), AlreadyReplied> {
    match sketch_at(ctx, key, Lookup::Write)? {
        Some(found) => Ok(found),
        None => {
            ctx.out.error("ERR The specified key does not exist");
            Err(AlreadyReplied)
        }
    }
}

/// The dense form of the sketch at `key`, converting (and storing and logging) a sparse
/// one; Err after the reply for a broken one.
fn to_dense(
    ctx: &mut Ctx,
    key: &[u8],
    bytes: &Str,
    encoding: Encoding,
) -> Result<Vec<u8>, AlreadyReplied> {
    if encoding == Encoding::Dense {
        return Ok(bytes.to_vec());
    }
    match hll::sparse_to_dense(bytes) {
        Ok(dense) => {
            store(ctx, key, &dense);
            log_bytes_unsignalled(ctx, key, &dense, true);
            Ok(dense)
        }
        Err(hll::Corrupt) => {
            ctx.out.error(hll::CORRUPT);
            Err(AlreadyReplied)
        }
    }
}

fn pfselftest(ctx: &mut Ctx, _args: &Args) -> Action {
    match hll::self_test(sparse_bytes_max(), rand::random::<u64>) {
        Ok(()) => ctx.out.ok(),
        Err(failure) => ctx.out.error(&format!("ERR {failure}")),
    }
    Action::None
}
