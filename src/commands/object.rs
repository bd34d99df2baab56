//! OBJECT: how a key's value is stored.
//!
//! ENCODING names Redis's encodings (int/embstr/raw, listpack, quicklist, intset,
//! hashtable, skiplist), chosen by the same thresholds, so scripts and tests that check
//! them read the same answers. REFCOUNT follows Redis's shared integers (0..9999 answer
//! INT_MAX). IDLETIME and FREQ read the key's access field (`crate::access`) as Redis's
//! `objectCommand` does: IDLETIME is refused under an LFU policy, FREQ under any other;
//! OBJECT's own lookup is no access.

use super::{Action, Args, Ctx, flags, lossy, unknown_subcommand, wrong_arity};
use crate::command;
use crate::keyspace::Value;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![command!(
        "object",
        -2,
        READONLY,
        (2, 2, 1),
        "generic",
        "A container for object introspection commands",
        object
    )]
}

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// Redis's OBJ_SHARED_INTEGERS: these string values are one shared object in Redis.
const SHARED_INTEGERS: i64 = 10_000;

fn object(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "help" => args.len() == 2,
        "encoding" | "freq" | "idletime" | "refcount" => args.len() == 3,
        _ => {
            unknown_subcommand(ctx, "object", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        wrong_arity(ctx, &format!("object|{sub}"));
        return Action::None;
    }
    if sub == "help" {
        ctx.out.array(OBJECT_HELP.len());
        for line in OBJECT_HELP {
            ctx.out.simple(line);
        }
        return Action::None;
    }
    // Like Redis's objectCommandLookup: no keyspace hit or miss is counted.
    ctx.expire_if_needed(args[2]);
    let Some(entry) = ctx.keyspace.dbs[ctx.client.db].get(args[2]) else {
        ctx.out.null();
        return Action::None;
    };
    match sub.as_str() {
        "encoding" => {
            let encoding = entry.value.encoding();
            ctx.out.bulk(encoding.as_bytes());
        }
        "refcount" => {
            let refcount = refcount(&ctx.server.config, &entry.value);
            ctx.out.integer(refcount);
        }
        "freq" => {
            if crate::access::is_lfu() {
                let frequency = entry.value.access().frequency();
                ctx.out.integer(frequency as i64);
            } else {
                ctx.out.error(
                    "ERR An LFU maxmemory policy is not selected, access frequency not \
                     tracked. Please note that when switching between policies at runtime \
                     LRU and LFU data will take some time to adjust.",
                );
            }
        }
        _ => {
            if crate::access::is_lfu() {
                ctx.out.error(
                    "ERR An LFU maxmemory policy is selected, idle time not tracked. Please \
                     note that when switching between policies at runtime LRU and LFU data \
                     will take some time to adjust.",
                );
            } else {
                let idle_seconds = entry.value.access().idle_ms() / 1000;
                ctx.out.integer(idle_seconds as i64);
            }
        }
    }
    Action::None
}

/// OBJECT REFCOUNT's answer (and DEBUG OBJECT's `refcount`): Redis's shared integers
/// answer INT_MAX, every other value 1. Redis shares no integers while an LRU or LFU
/// policy needs each key's own access field (MAXMEMORY_FLAG_NO_SHARED_INTEGERS).
pub(super) fn refcount(config: &crate::config::Config, value: &Value) -> i64 {
    let per_key_access = config.memory_bytes_max != 0
        && (config.eviction_policy.is_lfu()
            || matches!(
                config.eviction_policy,
                crate::config::EvictionPolicy::AllKeysLru
                    | crate::config::EvictionPolicy::VolatileLru
            ));
    let shared = match value {
        Value::String(s, _) if value.encoding() == "int" && !per_key_access => {
            crate::resp::parse_i64(s).is_some_and(|n| (0..SHARED_INTEGERS).contains(&n))
        }
        _ => false,
    };
    if shared { i32::MAX as i64 } else { 1 }
}
