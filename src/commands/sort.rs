//! SORT and SORT_RO on lists, sets and sorted sets, with Redis 7.0's options, order and
//! errors: BY (a pattern with `*`, `->field` for a hash field; a pattern without `*`
//! keeps the collection's own order), LIMIT, GET (repeatable; `#` is the element
//! itself), ASC / DESC, ALPHA, and STORE (SORT only) into a list.
//!
//! The order is Redis's `sortCompare`: numbers (C `strtod` of the element or of its BY
//! weight; a missing weight is 0) with ties broken by the elements' bytes; ALPHA compares
//! the elements, or their weights (a missing one first), as C strings — up to a NUL, as
//! `strcoll` does in the C locale — except with STORE, where whole bytes are compared;
//! ALPHA ties keep the elements' order (glibc's `qsort` is a merge sort), DESC included.
//! With a pattern without `*`, a list or a sorted set keeps its order (reversed by DESC,
//! LIMIT taken from it), a set its table's order, but a set being stored or read by a
//! script is sorted as ALPHA, so that the result is the same on every server. A sorted
//! set is converted to its tree form first, as Redis's SORT converts it to a skiplist.
//!
//! BY and GET patterns name keys that come from the data: Redis allows them only to a
//! user that may read every key (`Acl::reads_every_key`). Each key a pattern names is a
//! read lookup of its own (`Ctx::lookup_read_built`: hits, misses, `keymiss`, expiry).
//!
//! Logged form: SORT ... STORE as its effect, `DEL dest` then `RPUSH dest` of the stored
//! elements (in chunks), in one MULTI block unless an EXEC or a script already wraps the
//! command's records; an empty result that deleted the destination as `DEL dest`. The
//! command itself is never logged: its result depends on other keys and, for ties, on the
//! order of a set's table, which a restart does not keep. SORT without STORE and SORT_RO
//! log nothing.
//!
//! Keyspace events, as Redis 7.0 raises them: `sortstore` on the destination (after
//! `new` when it is created), or `del` when an empty result deletes it.

use super::{
    Action, AlreadyReplied, Args, Ctx, EventClass, NOT_INTEGER, SYNTAX_ERROR, eq_ignore_case, flags,
};
use crate::command;
use crate::keyspace::{Access, Entry, Key, NO_EXPIRY, Value};
use crate::types::list::End;
use crate::types::{List, ZSet};
use std::cmp::Ordering;
use std::sync::Arc;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "sort",
            -2,
            WRITE | DENYOOM | MOVABLEKEYS,
            (1, 1, 1),
            "generic",
            "Sort the elements in a list, set or sorted set",
            sort
        ),
        command!(
            "sort_ro",
            -2,
            READONLY | MOVABLEKEYS,
            (1, 1, 1),
            "generic",
            "Sort the elements in a list, set or sorted set. Read-only variant of SORT.",
            sort_ro
        ),
    ]
}

/// Elements per logged RPUSH record of a stored result.
const LOGGED_ELEMENTS_PER_RECORD: usize = 1024;

const BY_DENIED: &str = "ERR BY option of SORT denied due to insufficient ACL permissions.";
const GET_DENIED: &str = "ERR GET option of SORT denied due to insufficient ACL permissions.";
const NOT_A_NUMBER: &str = "ERR One or more scores can't be converted into double";

/// What the options ask for, once parsed.
struct Request<'a> {
    descending: bool,
    alpha: bool,
    /// LIMIT's offset and count as given; (0, -1) without LIMIT.
    offset: i64,
    count: i64,
    /// The last BY pattern given.
    by: Option<&'a [u8]>,
    /// A BY pattern without `*` was given (Redis's `dontsort`): no sorting at all, even
    /// if a later BY has a `*`.
    keep_order: bool,
    gets: Vec<&'a [u8]>,
    /// The last STORE destination given (SORT only).
    store: Option<&'a [u8]>,
}

fn sort(ctx: &mut Ctx, args: &Args) -> Action {
    run(ctx, args, false);
    Action::None
}

fn sort_ro(ctx: &mut Ctx, args: &Args) -> Action {
    run(ctx, args, true);
    Action::None
}

/// The text of a C string: the bytes before the first NUL (Redis reads patterns with
/// `strchr`, `strstr` and `strcmp`, which stop there).
fn c_text(bytes: &[u8]) -> &[u8] {
    bytes.split(|&b| b == 0).next().unwrap_or_default()
}

/// Parses the options in Redis's order, replying the first error (a syntax error, a
/// LIMIT that is not an integer, a BY or GET pattern the user may not use).
fn parse<'a>(ctx: &mut Ctx, args: &Args<'a>, read_only: bool) -> Option<Request<'a>> {
    let mut request = Request {
        descending: false,
        alpha: false,
        offset: 0,
        count: -1,
        by: None,
        keep_order: false,
        gets: Vec::new(),
        store: None,
    };
    // Asked once, when a pattern first needs it.
    let mut reads_every_key: Option<bool> = None;
    let mut may_read_every_key = |ctx: &mut Ctx| {
        *reads_every_key.get_or_insert_with(|| {
            let name = if read_only { "sort_ro" } else { "sort" };
            ctx.server.acl.reads_every_key(&ctx.client.user, name, args)
        })
    };
    let mut j = 2;
    while j < args.len() {
        let word = args[j];
        let left = args.len() - j - 1;
        if eq_ignore_case(word, "asc") {
            request.descending = false;
        } else if eq_ignore_case(word, "desc") {
            request.descending = true;
        } else if eq_ignore_case(word, "alpha") {
            request.alpha = true;
        } else if eq_ignore_case(word, "limit") && left >= 2 {
            let (Some(offset), Some(count)) = (
                crate::resp::parse_i64(args[j + 1]),
                crate::resp::parse_i64(args[j + 2]),
            ) else {
                ctx.out.error(NOT_INTEGER);
                return None;
            };
            request.offset = offset;
            request.count = count;
            j += 2;
        } else if !read_only && eq_ignore_case(word, "store") && left >= 1 {
            request.store = Some(args[j + 1]);
            j += 1;
        } else if eq_ignore_case(word, "by") && left >= 1 {
            let pattern = args[j + 1];
            request.by = Some(pattern);
            if !c_text(pattern).contains(&b'*') {
                request.keep_order = true;
            } else if !may_read_every_key(ctx) {
                ctx.out.error(BY_DENIED);
                return None;
            }
            j += 1;
        } else if eq_ignore_case(word, "get") && left >= 1 {
            if !may_read_every_key(ctx) {
                ctx.out.error(GET_DENIED);
                return None;
            }
            request.gets.push(args[j + 1]);
            j += 1;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        j += 1;
    }
    Some(request)
}

/// The type of the collection sorted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// Redis's LIMIT arithmetic: the inclusive range of positions of the sorted elements to
/// output, None when it is empty. Computed wide, so that no offset and count overflow.
fn output_range(len: usize, offset: i64, count: i64) -> Option<(usize, usize)> {
    let len = len as i128;
    let mut start = offset.max(0) as i128;
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count as i128 - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);
    if end < start {
        return None;
    }
    // Both are positions in the collection now: 0 <= start <= end < len.
    Some((start as usize, end as usize))
}

/// The type and length of the collection at `key` (a read lookup); (List, 0) when there
/// is none, as Redis sorts an empty list then. Err after replying WRONGTYPE.
fn source_kind(ctx: &mut Ctx, key: &[u8]) -> Result<(Kind, usize), AlreadyReplied> {
    let found = match ctx.lookup_read(key).map(|entry| &entry.value) {
        None => (Kind::List, 0),
        Some(Value::List(list, _)) => (Kind::List, list.len()),
        Some(Value::Set(set, _)) => (Kind::Set, set.len()),
        Some(Value::ZSet(zset, _)) => (Kind::ZSet, zset.len()),
        Some(_) => {
            ctx.wrong_type();
            return Err(AlreadyReplied);
        }
    };
    Ok(found)
}

/// The elements of the collection at `key`, copied out: all of them in the collection's
/// order, or, for a list or a sorted set kept in its order, only the positions in
/// `range` of that order (reversed when `descending`).
fn load(ctx: &mut Ctx, key: &[u8], native: Option<(usize, usize, bool)>) -> Vec<Vec<u8>> {
    let db = ctx.client.db;
    let Some(entry) = ctx.keyspace.dbs[db].get(key) else {
        return Vec::new();
    };
    let take = |iter: &mut dyn Iterator<Item = Vec<u8>>| -> Vec<Vec<u8>> {
        match native {
            Some((start, end, _)) => iter.skip(start).take(end - start + 1).collect(),
            None => iter.collect(),
        }
    };
    let descending = native.is_some_and(|(_, _, descending)| descending);
    match &entry.value {
        Value::List(list, _) if descending => {
            take(&mut list.iter().rev().map(|value| value.to_bytes()))
        }
        Value::List(list, _) => take(&mut list.iter().map(|value| value.to_bytes())),
        Value::ZSet(zset, _) if descending => {
            take(&mut zset.iter().rev().map(|(member, _)| member.into_owned()))
        }
        Value::ZSet(zset, _) => take(&mut zset.iter().map(|(member, _)| member.into_owned())),
        Value::Set(set, _) => set.iter().map(|member| member.into_owned()).collect(),
        Value::String(..) | Value::Hash(..) | Value::Stream(..) => Vec::new(),
    }
}

/// What an element is ordered by.
enum Weight {
    /// Numeric sorting: the element's or its BY key's number (0 when the key is missing).
    Number(f64),
    /// ALPHA with BY: the BY key's value, None when missing (first in the order).
    Text(Option<Vec<u8>>),
    /// ALPHA without BY: the element itself.
    Element,
}

struct Item {
    element: Vec<u8>,
    weight: Weight,
}

/// Redis's `sortCompare` (before DESC reverses it).
fn compare(a: &Item, b: &Item, whole_bytes: bool) -> Ordering {
    let text_order = |x: &[u8], y: &[u8]| {
        if whole_bytes {
            x.cmp(y)
        } else {
            c_text(x).cmp(c_text(y))
        }
    };
    match (&a.weight, &b.weight) {
        (Weight::Number(x), Weight::Number(y)) => match x.partial_cmp(y) {
            Some(Ordering::Equal) | None => a.element.cmp(&b.element),
            Some(order) => order,
        },
        (Weight::Text(x), Weight::Text(y)) => match (x, y) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(x), Some(y)) => text_order(x, y),
        },
        _ => text_order(&a.element, &b.element),
    }
}

/// The value a BY or GET pattern names for `element` (Redis's `lookupKeyByPattern`):
/// `#` is the element; otherwise the first `*` is replaced by the element, and a `->`
/// after it (with something after it) names a field of a hash. None when the pattern has
/// no `*`, the key is missing, or it holds another type (or the hash lacks the field).
fn lookup_pattern(ctx: &mut Ctx, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    let text = c_text(pattern);
    if text == b"#" {
        return Some(element.to_vec());
    }
    let star = text.iter().position(|&b| b == b'*')?;
    let field = text[star + 1..]
        .windows(2)
        .position(|pair| pair == b"->")
        .map(|at| star + 1 + at + 2)
        .filter(|&field_at| pattern.get(field_at).is_some_and(|&b| b != 0))
        .map(|field_at| &pattern[field_at..]);
    let key_end = match field {
        Some(field) => pattern.len() - field.len() - 2,
        None => pattern.len(),
    };
    let mut key = Vec::with_capacity(key_end - 1 + element.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(element);
    key.extend_from_slice(&pattern[star + 1..key_end]);
    match (&ctx.lookup_read_built(&key)?.value, field) {
        (Value::String(value, _), None) => Some(value.to_vec()),
        (Value::Hash(hash, _), Some(field)) => hash.get(field).map(|value| value.to_bytes()),
        _ => None,
    }
}

fn run(ctx: &mut Ctx, args: &Args, read_only: bool) {
    let Some(mut request) = parse(ctx, args, read_only) else {
        return;
    };
    // Every lookup is a read lookup, SORT ... STORE's too (Redis's `lookupKeyRead`).
    ctx.reading(|ctx| {
        let Ok(sorted) = sorted_output(ctx, args[1], &mut request) else {
            return;
        };
        match request.store {
            None => reply(ctx, &sorted),
            Some(destination) => store(ctx, destination, sorted),
        }
    });
}

/// The output: the elements in range (each with its GET values if any), or None when a
/// weight is not a number. Err after replying WRONGTYPE.
type Output = Option<Vec<Option<Vec<u8>>>>;

fn sorted_output(
    ctx: &mut Ctx,
    source: &[u8],
    request: &mut Request,
) -> Result<Output, AlreadyReplied> {
    let (kind, len) = source_kind(ctx, source)?;
    // A set has no order of its own that every server shares: stored, or read by a
    // script, it is sorted as ALPHA so that the result replays and replicates the same.
    if request.keep_order && kind == Kind::Set && (request.store.is_some() || ctx.in_script) {
        request.keep_order = false;
        request.alpha = true;
        request.by = None;
    }
    if kind == Kind::ZSet {
        let small = ctx.keyspace.dbs[ctx.client.db].get(source).is_some_and(
            |entry| matches!(&entry.value, Value::ZSet(zset, _) if zset.encoding() == "listpack"),
        );
        // Only a small one changes (no write, and no copy from a snapshot, for nothing).
        if small && let Ok(Some(zset)) = ctx.write::<ZSet>(source) {
            zset.convert();
        }
    }
    let range = output_range(len, request.offset, request.count);
    let native = request.keep_order && kind != Kind::Set;
    let (elements, range) = match (native, range) {
        // The elements kept in order are loaded for the range only: it is all the output.
        (true, Some((start, end))) => {
            let elements = load(ctx, source, Some((start, end, request.descending)));
            let count = elements.len();
            (elements, (count > 0).then(|| (0, count - 1)))
        }
        (true, None) => (Vec::new(), None),
        (false, _) => (load(ctx, source, None), range),
    };
    let elements = if request.keep_order {
        elements
    } else {
        match order(ctx, elements, request) {
            Some(sorted) => sorted,
            None => return Ok(None),
        }
    };
    let Some((start, end)) = range else {
        return Ok(Some(Vec::new()));
    };
    let mut output =
        Vec::with_capacity((end - start + 1).saturating_mul(request.gets.len().max(1)));
    for element in elements.into_iter().skip(start).take(end - start + 1) {
        if request.gets.is_empty() {
            output.push(Some(element));
            continue;
        }
        for pattern in &request.gets {
            output.push(lookup_pattern(ctx, pattern, &element));
        }
    }
    Ok(Some(output))
}

/// Sorts `elements` by the request's rules; None when a weight is not a number (every
/// weight is still looked up first, as in Redis).
fn order(ctx: &mut Ctx, elements: Vec<Vec<u8>>, request: &Request) -> Option<Vec<Vec<u8>>> {
    let mut not_a_number = false;
    let mut items = Vec::with_capacity(elements.len());
    for element in elements {
        let by_value = match request.by {
            Some(pattern) => lookup_pattern(ctx, pattern, &element),
            None => None,
        };
        let weight = if request.alpha {
            match request.by {
                Some(_) => Weight::Text(by_value),
                None => Weight::Element,
            }
        } else {
            let text = match (&by_value, request.by) {
                (Some(value), _) => Some(value.as_slice()),
                (None, Some(_)) => None,
                (None, None) => Some(element.as_slice()),
            };
            let number = match text {
                None => 0.0,
                Some(text) => crate::types::score::parse_sort_weight(text).unwrap_or_else(|| {
                    not_a_number = true;
                    0.0
                }),
            };
            Weight::Number(number)
        };
        items.push(Item { element, weight });
    }
    if not_a_number {
        return None;
    }
    let whole_bytes = request.store.is_some();
    // A stable sort: ALPHA ties keep the elements' order, in DESC too.
    items.sort_by(|a, b| {
        let order = compare(a, b, whole_bytes);
        if request.descending {
            order.reverse()
        } else {
            order
        }
    });
    Some(items.into_iter().map(|item| item.element).collect())
}

fn reply(ctx: &mut Ctx, output: &Output) {
    let Some(values) = output else {
        ctx.out.error(NOT_A_NUMBER);
        return;
    };
    ctx.out.array(values.len());
    for value in values {
        match value {
            Some(value) => ctx.out.bulk(value),
            None => ctx.out.null(),
        }
    }
}

/// Replaces `destination` with a list of the output (a missing GET value stored as an
/// empty string), or deletes it when the output is empty; replies the output's length.
fn store(ctx: &mut Ctx, destination: &[u8], output: Output) {
    let Some(values) = output else {
        ctx.out.error(NOT_A_NUMBER);
        return;
    };
    let count = values.len();
    if count == 0 {
        // Redis deletes without looking the key up: one whose time is up goes as `del`.
        if ctx.db().remove(destination).is_some() {
            ctx.notify(EventClass::Generic, "del", destination);
            ctx.propagate(&[b"DEL", destination]);
        }
        ctx.out.integer(0);
        return;
    }
    ctx.expire_if_needed(destination);
    let mut list = List::default();
    for value in &values {
        list.push(End::Right, value.as_deref().unwrap_or_default());
    }
    let previous = ctx.db().insert(Entry {
        key: Key::from(destination),
        value: Value::List(Arc::new(list), Access::new()),
        expire_at_ms: NO_EXPIRY,
    });
    if previous.is_none() {
        ctx.notify(EventClass::New, "new", destination);
    }
    ctx.notify(EventClass::List, "sortstore", destination);
    log_stored(ctx, destination, &values);
    ctx.out.integer(count as i64);
}

/// Logs the stored list as `DEL` and `RPUSH`es, all or none on replay: in a MULTI block
/// of their own, unless an EXEC or a script wraps this command's records already.
fn log_stored(ctx: &mut Ctx, destination: &[u8], values: &[Option<Vec<u8>>]) {
    let mark = ctx.effects.mark();
    let dirty_before = ctx.server.dirty;
    ctx.propagate(&[b"DEL", destination]);
    for chunk in values.chunks(LOGGED_ELEMENTS_PER_RECORD) {
        let mut record: Vec<&[u8]> = Vec::with_capacity(chunk.len() + 2);
        record.push(b"RPUSH");
        record.push(destination);
        record.extend(
            chunk
                .iter()
                .map(|value| value.as_deref().unwrap_or_default()),
        );
        ctx.propagate(&record);
    }
    if !ctx.in_exec() {
        ctx.effects.wrap_since(mark);
    }
    // Redis counts each stored element as a change (save points), not each record.
    ctx.server.dirty = dirty_before + values.len() as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_arithmetic_is_redis_s() {
        assert_eq!(output_range(3, 0, -1), Some((0, 2)));
        assert_eq!(output_range(3, -5, 2), Some((0, 1)));
        assert_eq!(output_range(3, 1, 0), None);
        assert_eq!(output_range(3, 3, 1), None);
        assert_eq!(output_range(3, 2, i64::MAX), Some((2, 2)));
        assert_eq!(output_range(3, i64::MAX, i64::MAX), None);
        assert_eq!(output_range(3, i64::MIN, i64::MAX), Some((0, 2)));
        assert_eq!(output_range(0, 0, -1), None);
    }

    #[test]
    fn numeric_ties_order_by_bytes_and_alpha_stops_at_a_nul() {
        let item = |element: &[u8], weight| Item {
            element: element.to_vec(),
            weight,
        };
        let a = item(b"b", Weight::Number(0.0));
        let b = item(b"a", Weight::Number(-0.0));
        assert_eq!(compare(&a, &b, false), Ordering::Greater);
        let a = item(b"a\0x", Weight::Element);
        let b = item(b"a\0y", Weight::Element);
        assert_eq!(compare(&a, &b, false), Ordering::Equal);
        assert_eq!(compare(&a, &b, true), Ordering::Less);
        let a = item(b"z", Weight::Text(None));
        let b = item(b"a", Weight::Text(Some(Vec::new())));
        assert_eq!(compare(&a, &b, true), Ordering::Less);
    }
}
