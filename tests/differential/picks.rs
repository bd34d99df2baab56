//! Random picks: SPOP, SRANDMEMBER, HRANDFIELD and ZRANDMEMBER choose at random, so the
//! two servers' replies cannot be compared item by item. Each server's reply is checked
//! instead against the key as that server held it just before the command (read with
//! SMEMBERS, HGETALL or ZRANGE WITHSCORES):
//!
//! - every member or field returned is in the key, with its value or score when asked
//!   WITHVALUES / WITHSCORES;
//! - no count: one item, or nil when the key is empty or missing;
//! - a count n >= 0: min(n, size) distinct items (0: none, more than the size: all);
//! - a count n < 0: exactly |n| items, repeats allowed (none from an empty key);
//! - SPOP: the key afterwards is what it was minus exactly the members returned.
//!
//! The reply is then reduced to what both servers must agree on (the key's content
//! before, and how many items came back), compared exactly; error replies compare
//! as they are. A broken rule makes the step fail even if both servers broke it.
//!
//! After an SPOP the two servers hold different remainders (each removed its own
//! choice), so the key is reset on each to the same content: the set before minus its
//! first members in byte order, as many as were popped (DEL, then SADD; a TTL goes,
//! on both). The content
//! depends only on the seed, not on either server's random choice, so a failing seed
//! replays the same stream.

use super::{Check, Gen, Reply, Step, query};
use rand::RngExt;
use redis::Value;
use std::collections::BTreeMap;

/// Marks a reply that broke a rule of random picks; never matches (see `replies_match`).
pub(super) const RULE_BROKEN: &str = "<random pick rule broken>";

/// The key's content: members (fields) with their scores (values), empty for sets.
type Content = BTreeMap<Vec<u8>, Vec<u8>>;

fn broken(step: &Step, what: String) -> Reply {
    Err(format!(
        "{RULE_BROKEN} {}: {what}",
        String::from_utf8_lossy(&step.args[0]).to_ascii_uppercase()
    ))
}

fn show(content: &Content) -> String {
    let items: Vec<String> = content
        .iter()
        .map(|(member, value)| {
            let member = String::from_utf8_lossy(member);
            if value.is_empty() {
                format!("{member:?}")
            } else {
                format!("{member:?}={:?}", String::from_utf8_lossy(value))
            }
        })
        .collect();
    format!("{{{}}}", items.join(", "))
}

/// A string item of a reply.
fn bytes(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::BulkString(b) => Some(b.clone()),
        Value::SimpleString(s) => Some(s.clone().into_bytes()),
        Value::Int(n) => Some(n.to_string().into_bytes()),
        Value::Double(d) => Some(d.to_string().into_bytes()),
        _ => None,
    }
}

/// Items of a reply: single strings, or (member, value) pairs given flat (RESP2) or
/// nested (RESP3). None if the reply has another shape.
fn items(reply: &Value, pairs: bool) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let list = match reply {
        Value::Array(list) | Value::Set(list) => list.clone(),
        Value::Map(map) => map
            .iter()
            .flat_map(|(k, v)| [k.clone(), v.clone()])
            .collect(),
        _ => return None,
    };
    if !pairs {
        return list.iter().map(|v| Some((bytes(v)?, Vec::new()))).collect();
    }
    if list
        .iter()
        .all(|v| matches!(v, Value::Array(pair) if pair.len() == 2))
    {
        return list
            .iter()
            .map(|v| match v {
                Value::Array(pair) => Some((bytes(&pair[0])?, bytes(&pair[1])?)),
                _ => None,
            })
            .collect();
    }
    if list.len() % 2 != 0 {
        return None;
    }
    list.chunks(2)
        .map(|pair| Some((bytes(&pair[0])?, bytes(&pair[1])?)))
        .collect()
}

/// Reads the key with `read` (SMEMBERS, HGETALL, ZRANGE … WITHSCORES); the error reply
/// if the key holds another type.
fn read(conn: &mut redis::Connection, read: &[&[u8]], pairs: bool) -> Result<Content, String> {
    let args: Vec<Vec<u8>> = read.iter().map(|a| a.to_vec()).collect();
    let reply = query(conn, &args)?;
    let items = items(&reply, pairs).ok_or_else(|| format!("<unreadable {reply:?}>"))?;
    Ok(items.into_iter().collect())
}

/// A reply's types without its values (a list's distinct item shapes, sorted): what the
/// two servers' picks must agree on beyond their count (RESP3 nests WITHVALUES pairs and
/// sends scores as doubles).
fn shape(reply: &Value) -> String {
    let list = |kind: &str, items: Vec<String>| {
        let mut items = items;
        items.sort();
        items.dedup();
        format!("{kind}<{}>", items.join("|"))
    };
    match reply {
        Value::Array(items) => list("array", items.iter().map(shape).collect()),
        Value::Set(items) => list("set", items.iter().map(shape).collect()),
        Value::Map(pairs) => list(
            "map",
            pairs
                .iter()
                .map(|(k, v)| format!("{}=>{}", shape(k), shape(v)))
                .collect(),
        ),
        Value::Nil => "nil".into(),
        Value::Int(_) => "integer".into(),
        Value::BulkString(_) => "bulk".into(),
        Value::SimpleString(_) | Value::Okay => "simple".into(),
        Value::Double(_) => "double".into(),
        other => format!("{other:?}"),
    }
}

/// Checks one pick against `before`; returns the items picked.
fn check_pick(
    step: &Step,
    before: &Content,
    reply: &Value,
    pairs: bool,
) -> Result<Vec<Vec<u8>>, String> {
    let Some(count) = step.args.get(2) else {
        return match reply {
            Value::Nil if before.is_empty() => Ok(Vec::new()),
            Value::Nil => Err(format!("nil from {}", show(before))),
            _ => match bytes(reply) {
                Some(member) if before.contains_key(&member) => Ok(vec![member]),
                _ => Err(format!("{reply:?} is not a member of {}", show(before))),
            },
        };
    };
    let count: i64 = std::str::from_utf8(count)
        .ok()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("a reply to the count {:?}", String::from_utf8_lossy(count)))?;
    let with_values = pairs && step.args.len() > 3;
    let picked =
        items(reply, with_values).ok_or_else(|| format!("{reply:?} is not a list of picks"))?;
    let expected = match (count >= 0, before.is_empty()) {
        (true, _) => (count as u64).min(before.len() as u64),
        (false, true) => 0,
        (false, false) => count.unsigned_abs(),
    };
    if picked.len() as u64 != expected {
        return Err(format!(
            "{} items for the count {count} from {}: {reply:?}",
            picked.len(),
            show(before)
        ));
    }
    let mut seen = Content::new();
    for (member, value) in &picked {
        match before.get(member) {
            None => {
                let member = String::from_utf8_lossy(member);
                return Err(format!("{member:?} is not in {}", show(before)));
            }
            Some(real) if with_values && real != value => {
                return Err(format!(
                    "{:?} came with {:?}, not its {:?}",
                    String::from_utf8_lossy(member),
                    String::from_utf8_lossy(value),
                    String::from_utf8_lossy(real)
                ));
            }
            _ => {}
        }
        if seen.insert(member.clone(), Vec::new()).is_some() && count >= 0 {
            let member = String::from_utf8_lossy(member);
            return Err(format!("{member:?} twice for the count {count}: {reply:?}"));
        }
    }
    Ok(picked.into_iter().map(|(member, _)| member).collect())
}

/// Runs a pick: `read_args` read the key before; `pairs` when the key's items have
/// values or scores. Returns the key's content before, the items picked, and the summary
/// both servers must agree on; or the reply to give as it is (an error reply, a broken
/// rule).
fn pick(
    conn: &mut redis::Connection,
    step: &Step,
    read_args: &[&[u8]],
    pairs: bool,
) -> Result<(Content, Vec<Vec<u8>>, Value), Reply> {
    let before = read(conn, read_args, pairs);
    let reply = query(conn, &step.args).map_err(Err)?;
    let before = match before {
        Ok(before) => before,
        Err(e) => return Err(broken(step, format!("{reply:?} where reading gave {e}"))),
    };
    let picked = check_pick(step, &before, &reply, pairs).map_err(|e| broken(step, e))?;
    let summary = Value::SimpleString(format!(
        "{} picked from {} as {}",
        picked.len(),
        show(&before),
        shape(&reply)
    ));
    Ok((before, picked, summary))
}

pub(super) fn srandmember(conn: &mut redis::Connection, step: &Step) -> Reply {
    let key = step.args[1].as_slice();
    pick(conn, step, &[b"SMEMBERS", key], false).map_or_else(|e| e, |(.., summary)| Ok(summary))
}

pub(super) fn hrandfield(conn: &mut redis::Connection, step: &Step) -> Reply {
    let key = step.args[1].as_slice();
    pick(conn, step, &[b"HGETALL", key], true).map_or_else(|e| e, |(.., summary)| Ok(summary))
}

pub(super) fn zrandmember(conn: &mut redis::Connection, step: &Step) -> Reply {
    let read: &[&[u8]] = &[b"ZRANGE", &step.args[1], b"0", b"-1", b"WITHSCORES"];
    pick(conn, step, read, true).map_or_else(|e| e, |(.., summary)| Ok(summary))
}

/// SPOP: also the removal, then the reset of the key to the seed's remainder.
pub(super) fn spop(conn: &mut redis::Connection, step: &Step) -> Reply {
    let key = step.args[1].clone();
    let (before, popped, summary) = match pick(conn, step, &[b"SMEMBERS", &key], false) {
        Ok(picked) => picked,
        Err(reply) => return reply,
    };
    let after = read(conn, &[b"SMEMBERS", &key], false);
    let mut expected = before.clone();
    for member in &popped {
        expected.remove(member);
    }
    if after.as_ref() != Ok(&expected) {
        let left = after.map_or_else(|e| e, |after| show(&after));
        let what = format!(
            "popped {} from {}, left {left}",
            popped.len(),
            show(&before)
        );
        return broken(step, what);
    }
    if popped.is_empty() {
        return Ok(summary);
    }
    let mut sadd = vec![b"SADD".to_vec(), key.clone()];
    sadd.extend(before.into_keys().skip(popped.len()));
    let reset = query(conn, &[b"DEL".to_vec(), key]);
    let refill = if sadd.len() > 2 {
        query(conn, &sadd)
    } else {
        Ok(Value::Int(0))
    };
    match (reset, refill) {
        (Ok(Value::Int(_)), Ok(Value::Int(n))) if n as usize == sadd.len() - 2 => Ok(summary),
        other => broken(step, format!("resetting the key after it: {other:?}")),
    }
}

impl Gen {
    /// A random pick, half the time after a command that fills its key with a few items
    /// (`add key item...`, each `item` one or more words): the stream's keys are mostly
    /// missing, of another type or small when a pick comes, and a pick from nothing
    /// proves little. The fill compares exactly (WRONGTYPE included).
    pub(super) fn pick_steps(
        &mut self,
        pick: Step,
        add: &str,
        mut item: impl FnMut(&mut Gen) -> Vec<Vec<u8>>,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.chance(0.5) {
            let mut args = vec![self.word(add), pick.args[1].clone()];
            for _ in 0..self.rng.random_range(2..=8) {
                args.extend(item(self));
            }
            steps.push(Step {
                args,
                check: Check::Exact,
            });
        }
        steps.push(pick);
        steps
    }
}
