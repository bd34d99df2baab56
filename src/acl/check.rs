//! The permission check (Redis 7.0's `ACLCheckAllUserCommandPerm`): may this user run this
//! command with these arguments? A selector allows a command when it allows the command
//! (or its first argument), every key the command names with the access the key spec
//! says (read for `access`; write for `insert`, `delete`, `update`), and every channel it
//! publishes or subscribes to; the user may run it when one selector allows it.
//!
//! Keys come from Redis's key specs (`table::KeySpec`, Redis's `getKeysUsingKeySpecs`),
//! with Redis's fallbacks where a spec cannot say (a bad `numkeys`: the command's own key
//! function; SET's GET option: `VARIABLE_FLAGS`). Channels come from Redis's small table
//! of pub/sub commands.

use super::rules::{Selector, User};
use super::table::{self, AclCommand, BeginSearch, FindKeys, key_flags};

/// Why a command is denied, with the argument that was refused (Redis's ACL_DENIED_*;
/// the order is Redis's too: a channel outranks a key, which outranks the command).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denied {
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(index) => (2, index),
            Denied::Channel(index) => (4, index),
        }
    }
}

/// The keys of one request and the access each needs: found once, shared by the selectors.
type Keys = Vec<(usize, u32)>;

/// Whether `user` may run `command` with `argv` (`argv[0]` the command's name).
pub fn check(user: &User, command: &AclCommand, argv: &[&[u8]]) -> Result<(), Denied> {
    let mut keys: Option<Keys> = None;
    let mut relevant = Denied::Command;
    for selector in &user.selectors {
        match check_selector(selector, command, argv, &mut keys) {
            Ok(()) => return Ok(()),
            Err(denied) => {
                if denied.rank() > relevant.rank() {
                    relevant = denied;
                }
            }
        }
    }
    Err(relevant)
}

/// Whether every selector grants everything: no check is needed at all.
pub fn unrestricted(user: &User) -> bool {
    let root = user.root();
    root.all_commands && root.all_keys && root.all_channels
}

fn check_selector(
    selector: &Selector,
    command: &AclCommand,
    argv: &[&[u8]],
    keys: &mut Option<Keys>,
) -> Result<(), Denied> {
    if !selector.all_commands && !command.no_auth && !selector.commands.get(command.id) {
        // Allowed with a first argument only? (A subcommand never has first args.)
        let index = if command.parent.is_some() { 2 } else { 1 };
        let allowed = argv
            .get(index)
            .is_some_and(|arg| selector.allows_first_arg(command.id, arg));
        if !allowed {
            return Err(Denied::Command);
        }
    }
    if !selector.all_keys && has_keys(command) {
        let keys = keys.get_or_insert_with(|| keys_of(command, argv));
        for &(index, flags) in keys.iter() {
            if !key_allowed(selector, argv[index], flags) {
                return Err(Denied::Key(index));
            }
        }
    }
    if !selector.all_channels {
        for (index, pattern) in channels_of(command, argv) {
            if !channel_allowed(&selector.channels, argv[index], pattern) {
                return Err(Denied::Channel(index));
            }
        }
    }
    Ok(())
}

fn key_allowed(selector: &Selector, key: &[u8], flags: u32) -> bool {
    let read = flags & key_flags::ACCESS != 0;
    let write = flags & (key_flags::INSERT | key_flags::DELETE | key_flags::UPDATE) != 0;
    selector.keys.iter().any(|pattern| {
        (pattern.read || !read)
            && (pattern.write || !write)
            && crate::glob::glob_match(&pattern.pattern, key, false)
    })
}

/// A channel is matched against the user's patterns; a pattern a client subscribes to
/// (PSUBSCRIBE) only matches a user's pattern that is literally the same.
pub fn channel_allowed(patterns: &[Vec<u8>], channel: &[u8], is_pattern: bool) -> bool {
    patterns.iter().any(|pattern| {
        if is_pattern {
            pattern == channel
        } else {
            crate::glob::glob_match(pattern, channel, false)
        }
    })
}

/// The channel arguments a command publishes or subscribes to, each with whether it is a
/// pattern (Redis's `commands_with_channels`; unsubscribing is never checked).
fn channels_of(command: &AclCommand, argv: &[&[u8]]) -> Vec<(usize, bool)> {
    match command.full_name.as_str() {
        "subscribe" | "ssubscribe" => (1..argv.len()).map(|i| (i, false)).collect(),
        "psubscribe" => (1..argv.len()).map(|i| (i, true)).collect(),
        "publish" | "spublish" if argv.len() > 1 => vec![(1, false)],
        _ => Vec::new(),
    }
}

/// Redis's key functions for commands whose key specs may not say (a `numkeys` that is
/// not a number, SET's GET): (store key, count, first key), as `genericGetKeys`.
enum KeyFunction {
    Generic {
        store: usize,
        count: usize,
        first: usize,
    },
    Set,
    /// SORT: the source, and the key after the last STORE (Redis's `sortGetKeys`).
    Sort,
    /// SORT_RO: the source only (Redis's `sortROGetKeys`).
    SortReadOnly,
    /// A command Tessera does not have (MIGRATE…): nothing to find.
    Unsupported,
}

fn key_function(name: &str) -> Option<KeyFunction> {
    let generic = |store, count, first| {
        Some(KeyFunction::Generic {
            store,
            count,
            first,
        })
    };
    match name {
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" | "lmpop" | "zmpop" => {
            generic(0, 1, 2)
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => generic(1, 2, 3),
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" | "blmpop"
        | "bzmpop" => generic(0, 2, 3),
        "set" => Some(KeyFunction::Set),
        "sort" => Some(KeyFunction::Sort),
        "sort_ro" => Some(KeyFunction::SortReadOnly),
        "bitfield" | "georadius" | "georadiusbymember" | "migrate" | "xread" | "xreadgroup" => {
            Some(KeyFunction::Unsupported)
        }
        _ => None,
    }
}

/// Redis's `doesCommandHaveKeys`.
pub fn has_keys(command: &AclCommand) -> bool {
    key_function(&command.full_name).is_some()
        || command
            .key_specs
            .iter()
            .any(|s| s.flags & key_flags::NOT_KEY == 0)
}

/// The key arguments of a request and their access flags (Redis's
/// `getKeysFromCommandWithSpecs`): the key specs when they are reliable, else the
/// command's key function.
pub fn keys_of(command: &AclCommand, argv: &[&[u8]]) -> Keys {
    let specs = &command.key_specs;
    let has_spec = specs.iter().any(|s| s.flags & key_flags::NOT_KEY == 0);
    let variable = specs
        .iter()
        .any(|s| s.flags & key_flags::VARIABLE_FLAGS != 0);
    if has_spec
        && !variable
        && let Some(keys) = keys_by_specs(command, argv)
    {
        return keys;
    }
    match key_function(&command.full_name) {
        Some(KeyFunction::Generic {
            store,
            count,
            first,
        }) => generic_keys(store, count, first, argv),
        Some(KeyFunction::Set) => {
            let get = argv.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"get"));
            let flags = if get {
                key_flags::RW | key_flags::ACCESS | key_flags::UPDATE
            } else {
                key_flags::OW | key_flags::UPDATE
            };
            vec![(1, flags)]
        }
        Some(KeyFunction::Sort) => sort_keys(argv),
        Some(KeyFunction::SortReadOnly) => vec![(1, key_flags::RO | key_flags::ACCESS)],
        Some(KeyFunction::Unsupported) | None => Vec::new(),
    }
}

/// Redis's `sortGetKeys`: the source, then the key after the last STORE. Only enough of
/// the options is parsed to skip their arguments (LIMIT's two, GET's and BY's one); any
/// other word, STORE's key included, is looked at as an option in turn, as Redis does.
fn sort_keys(argv: &[&[u8]]) -> Keys {
    let mut keys: Keys = vec![(1, key_flags::RO | key_flags::ACCESS)];
    let mut store = None;
    let mut i = 2;
    while i < argv.len() {
        let word = argv[i];
        if word.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if word.eq_ignore_ascii_case(b"get") || word.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if word.eq_ignore_ascii_case(b"store") && i + 1 < argv.len() {
            store = Some(i + 1);
        }
        i += 1;
    }
    if let Some(index) = store {
        keys.push((index, key_flags::OW | key_flags::UPDATE));
    }
    keys
}

/// Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess` for reads: whether one of `user`'s
/// selectors allows this request and may read every key (all keys, or a read pattern that
/// is exactly `*`: a pattern that happens to match the name `*` is not enough). SORT
/// allows its BY and GET patterns, whose keys come from the data, only to such a user.
pub fn reads_every_key(user: &User, command: &AclCommand, argv: &[&[u8]]) -> bool {
    let mut keys: Option<Keys> = None;
    user.selectors.iter().any(|selector| {
        check_selector(selector, command, argv, &mut keys).is_ok()
            && (selector.all_keys
                || selector
                    .keys
                    .iter()
                    .any(|pattern| pattern.read && pattern.pattern == b"*"))
    })
}

/// Redis's `genericGetKeys`: `atoi` of the count, no keys when it is out of range; its
/// keys carry no flags (any pattern that matches grants them).
fn generic_keys(store: usize, count: usize, first: usize, argv: &[&[u8]]) -> Keys {
    let Some(count_arg) = argv.get(count) else {
        return Vec::new();
    };
    let number = atoi(count_arg);
    let available = argv.len().saturating_sub(first) as i64;
    if number < 1 || number > available {
        return Vec::new();
    }
    let mut keys: Keys = (0..number as usize).map(|i| (first + i, 0)).collect();
    if store > 0 {
        keys.push((store, 0));
    }
    keys
}

/// C's `atoi`: leading whitespace, a sign, digits; 0 when there are none.
fn atoi(text: &[u8]) -> i64 {
    let mut rest = text;
    while let Some((&b, tail)) = rest.split_first() {
        if b == b' ' || (b'\t'..=b'\r').contains(&b) {
            rest = tail;
        } else {
            break;
        }
    }
    let negative = rest.first() == Some(&b'-');
    if matches!(rest.first(), Some(b'-' | b'+')) {
        rest = &rest[1..];
    }
    let mut value: i64 = 0;
    for &b in rest {
        if !b.is_ascii_digit() {
            break;
        }
        value = value.saturating_mul(10).saturating_add((b - b'0') as i64);
    }
    if negative { -value } else { value }
}

/// Redis's `getKeysUsingKeySpecs`; None where a spec cannot be followed (the caller then
/// asks the key function).
fn keys_by_specs(command: &AclCommand, argv: &[&[u8]]) -> Option<Keys> {
    let argc = argv.len() as i64;
    let mut keys = Vec::new();
    for spec in &command.key_specs {
        if spec.flags & key_flags::NOT_KEY != 0 {
            continue;
        }
        let mut first = match &spec.begin {
            BeginSearch::Index(index) => *index,
            BeginSearch::Keyword {
                keyword,
                start_from,
            } => {
                // Redis's loop: towards the end (never the last word, which could
                // start no key) or, from the end, backwards (never the command's name).
                let (start, end) = if *start_from > 0 {
                    (*start_from, argc - 1)
                } else {
                    (argc + start_from, 1)
                };
                let mut found = None;
                let mut i = start;
                while i != end && i < argc && i >= 1 {
                    if argv[i as usize].eq_ignore_ascii_case(keyword.as_bytes()) {
                        found = Some(i);
                        break;
                    }
                    i += if start <= end { 1 } else { -1 };
                }
                match found {
                    Some(i) => i + 1,
                    None => continue,
                }
            }
            BeginSearch::Unknown => return None,
        };
        let (last, step) = match &spec.find {
            FindKeys::Range {
                last_key,
                key_step,
                limit,
            } => {
                let last = if *last_key >= 0 {
                    first + last_key
                } else if *limit == 0 {
                    argc + last_key
                } else {
                    first + ((argc - first) / limit + last_key)
                };
                (last, *key_step)
            }
            FindKeys::KeyNum {
                key_num_index,
                first_key,
                key_step,
            } => {
                if *key_num_index >= argc {
                    return None;
                }
                let count_at = first + key_num_index;
                let count = argv
                    .get(usize::try_from(count_at).ok()?)
                    .and_then(|a| crate::resp::parse_i64(a))
                    .filter(|&n| n >= 0)?;
                first += first_key;
                // The count is the client's: a huge one names keys past the arguments
                // (an error below), never an overflow.
                (first.checked_add(count - 1)?, *key_step)
            }
            FindKeys::Unknown => return None,
        };
        if last >= argc || last < first || first >= argc {
            return None;
        }
        let step = step.max(1);
        let mut index = first;
        while index <= last {
            keys.push((index as usize, spec.flags));
            index += step;
        }
        if spec.flags & key_flags::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

/// Whether `name` (as the table has it) exists: ACL DRYRUN and `redis.acl_check_cmd`
/// look commands up the same way.
pub fn command_for<'t>(name: &str, argv: &[&[u8]]) -> Option<&'t AclCommand> {
    table::table().for_request(name, argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(words: &[&str]) -> Keys {
        let argv: Vec<&[u8]> = words.iter().map(|a| a.as_bytes()).collect();
        let command = command_for(words[0].to_ascii_lowercase().as_str(), &argv).unwrap();
        keys_of(command, &argv)
    }

    #[test]
    fn keys_follow_redis_key_specs() {
        use key_flags::*;
        assert_eq!(keys(&["get", "k"]), [(1, RO | ACCESS)]);
        assert_eq!(keys(&["set", "k", "v"]), [(1, OW | UPDATE)]);
        assert_eq!(keys(&["set", "k", "v", "GET"]), [(1, RW | ACCESS | UPDATE)]);
        assert_eq!(
            keys(&["mset", "a", "1", "b", "2"]),
            [(1, OW | UPDATE), (3, OW | UPDATE)]
        );
        assert_eq!(
            keys(&["zunionstore", "d", "2", "a", "b"]),
            [(1, OW | UPDATE), (3, RO | ACCESS), (4, RO | ACCESS)]
        );
        // A count that is no number: Redis's key function, keys without flags.
        assert_eq!(keys(&["zunionstore", "d", "1x", "a"]), [(3, 0), (1, 0)]);
        assert_eq!(keys(&["zunionstore", "d", "0", "a"]), []);
        assert_eq!(keys(&["eval", "s", "1", "k", "a"]).len(), 1);
        assert_eq!(keys(&["lmpop", "2", "a", "b", "LEFT"]).len(), 2);
        assert_eq!(keys(&["rename", "a", "b"]).len(), 2);
        // SORT: the key after the last STORE; the words LIMIT, GET and BY skip theirs.
        assert_eq!(
            keys(&["sort", "l", "store", "d", "get", "x", "STORE", "e"]),
            [(1, RO | ACCESS), (7, OW | UPDATE)]
        );
        assert_eq!(
            keys(&["sort", "l", "store", "limit", "1", "2"]),
            [(1, RO | ACCESS), (3, OW | UPDATE)]
        );
        assert_eq!(keys(&["sort", "l", "by", "store", "x"]), [(1, RO | ACCESS)]);
        assert_eq!(keys(&["sort", "l", "store"]), [(1, RO | ACCESS)]);
        assert_eq!(keys(&["sort_ro", "l", "store", "d"]), [(1, RO | ACCESS)]);
        assert_eq!(atoi(b"  12x"), 12);
        assert_eq!(atoi(b"-3"), -3);
    }
}
