//! Redis 7.0's command table as ACL sees it: every command and subcommand Redis has (not
//! only Tessera's), each with its ACL id, categories and key specs, from
//! `src/acl/commands.json` (written by `tools/gen_command_docs.py` from a real
//! redis-server's COMMAND reply).
//!
//! The whole table is kept because rules name commands Tessera lacks (`+@all -xadd`, an
//! aclfile Redis wrote must load) and because ACL GETUSER describes a user by counting,
//! category by category, the commands it may run: with only Tessera's commands the counts,
//! and so the description, would differ from Redis's. A command's id indexes the bitmaps
//! of `CommandBits`; ids follow the table's name order (containers before their
//! subcommands), and the last bit is never an id: `+@all` sets it, so that a description
//! knows to start from `+@all` (Redis's "future commands" bit).

use std::sync::OnceLock;

/// Bits in a selector's command bitmap (Redis's USER_COMMAND_BITS_COUNT).
pub const COMMAND_BITS: usize = 1024;
/// Set only by `+@all` / `allcommands`: the selector was built by subtraction.
pub const FUTURE_COMMANDS_BIT: usize = COMMAND_BITS - 1;

/// The categories, in Redis's order (ACL CAT, COMMAND INFO, the order descriptions try
/// them in).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The category named `name` (case-insensitive), as an index into `CATEGORIES`.
pub fn category(name: &[u8]) -> Option<usize> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// A set of command ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandBits([u64; COMMAND_BITS / 64]);

impl CommandBits {
    pub fn none() -> CommandBits {
        CommandBits([0; COMMAND_BITS / 64])
    }

    pub fn all() -> CommandBits {
        CommandBits([u64::MAX; COMMAND_BITS / 64])
    }

    pub fn get(&self, id: usize) -> bool {
        id < COMMAND_BITS && self.0[id / 64] & (1 << (id % 64)) != 0
    }

    pub fn set(&mut self, id: usize, value: bool) {
        if id >= COMMAND_BITS {
            return;
        }
        if value {
            self.0[id / 64] |= 1 << (id % 64);
        } else {
            self.0[id / 64] &= !(1 << (id % 64));
        }
    }

    pub fn insert_all(&mut self, other: &CommandBits) {
        for (word, add) in self.0.iter_mut().zip(&other.0) {
            *word |= add;
        }
    }

    pub fn remove_all(&mut self, other: &CommandBits) {
        for (word, remove) in self.0.iter_mut().zip(&other.0) {
            *word &= !remove;
        }
    }

    /// How many of `members` are set here, and how many are not.
    pub fn count_in(&self, members: &CommandBits) -> (u32, u32) {
        let mut on = 0;
        let mut off = 0;
        for (word, member) in self.0.iter().zip(&members.0) {
            on += (word & member).count_ones();
            off += (!word & member).count_ones();
        }
        (on, off)
    }
}

/// Key spec flags ACL reads (Redis's CMD_KEY_*).
pub mod key_flags {
    pub const ACCESS: u32 = 1 << 0;
    pub const UPDATE: u32 = 1 << 1;
    pub const INSERT: u32 = 1 << 2;
    pub const DELETE: u32 = 1 << 3;
    pub const NOT_KEY: u32 = 1 << 4;
    pub const INCOMPLETE: u32 = 1 << 5;
    pub const VARIABLE_FLAGS: u32 = 1 << 6;
    /// How a command uses a key's value (COMMAND GETKEYSANDFLAGS shows them; ACL reads
    /// the four access flags above).
    pub const RO: u32 = 1 << 7;
    pub const RW: u32 = 1 << 8;
    pub const OW: u32 = 1 << 9;
    pub const RM: u32 = 1 << 10;

    /// Every flag with its name, in Redis's order (`addReplyFlagsForKeyArgs`).
    pub const NAMES: [(u32, &str); 11] = [
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];

    pub fn parse(name: &str) -> u32 {
        match name {
            "RO" => RO,
            "RW" => RW,
            "OW" => OW,
            "RM" => RM,
            "access" => ACCESS,
            "update" => UPDATE,
            "insert" => INSERT,
            "delete" => DELETE,
            "not_key" => NOT_KEY,
            "incomplete" => INCOMPLETE,
            "variable_flags" => VARIABLE_FLAGS,
            other => panic!("unknown key spec flag {other}"),
        }
    }
}

/// Where a key spec's keys start.
#[derive(Clone, Debug)]
pub enum BeginSearch {
    Index(i64),
    /// After this word, searched from `start_from` (backwards when negative).
    Keyword {
        keyword: String,
        start_from: i64,
    },
    /// Redis asks the command's own key function (SORT's BY and STORE).
    Unknown,
}

/// Which arguments from there are keys.
#[derive(Clone, Debug)]
pub enum FindKeys {
    Range {
        last_key: i64,
        key_step: i64,
        limit: i64,
    },
    KeyNum {
        key_num_index: i64,
        first_key: i64,
        key_step: i64,
    },
    Unknown,
}

#[derive(Clone, Debug)]
pub struct KeySpec {
    /// Redis's explanation of an odd spec (SORT's `unknown` ones), shown by COMMAND INFO.
    pub notes: Option<String>,
    pub flags: u32,
    pub begin: BeginSearch,
    pub find: FindKeys,
}

/// One command or subcommand of Redis's table.
#[derive(Debug)]
pub struct AclCommand {
    /// `get`, `config|get`.
    pub full_name: String,
    pub id: usize,
    /// Bits over `CATEGORIES`.
    pub categories: u32,
    pub parent: Option<usize>,
    pub subcommands: Vec<usize>,
    pub arity: i64,
    /// Redis's command flags by name, in its order (COMMAND INFO's third element).
    pub flags: Vec<String>,
    /// The legacy first key, last key and step (COMMAND INFO's 4th to 6th elements).
    pub key_positions: [i64; 3],
    /// Redis's hints for clients and proxies (`nondeterministic_output`, …).
    pub tips: Vec<String>,
    /// AUTH, HELLO, QUIT, RESET: every user may run them (Redis's CMD_NO_AUTH).
    pub no_auth: bool,
    /// EVAL, FCALL…: a request may name no key (Redis's CMD_NO_MANDATORY_KEYS).
    pub no_mandatory_keys: bool,
    pub key_specs: Vec<KeySpec>,
}

pub struct CommandTable {
    /// Indexed by id.
    pub commands: Vec<AclCommand>,
    /// Top-level commands in name order (each container's subcommands follow it in
    /// `commands`).
    pub top_level: Vec<usize>,
    by_name: hashbrown::HashMap<String, usize>,
    /// Per category: the commands that have it (what descriptions count).
    pub members: Vec<CommandBits>,
    /// Per category: what `+@category` sets — its members and every subcommand of a member
    /// container (Redis's `ACLChangeSelectorPerm` on each member).
    pub reach: Vec<CommandBits>,
}

const COMMANDS_JSON: &str = include_str!("commands.json");

/// Commands of later Redis versions, not in this 7.0 table, checked as the 7.0 command
/// closest to them (same categories): whoever may run WAIT may run WAITAOF (Redis 7.2).
const CHECKED_AS: &[(&str, &str)] = &[("waitaof", "wait")];

/// The 7.0 command a later one (`CHECKED_AS`) is checked as.
pub fn checked_as(name: &str) -> Option<&'static str> {
    CHECKED_AS
        .iter()
        .find(|(later, _)| *later == name)
        .map(|(_, as_command)| *as_command)
}

/// The table, parsed once per process.
pub fn table() -> &'static CommandTable {
    static TABLE: OnceLock<CommandTable> = OnceLock::new();
    TABLE.get_or_init(|| CommandTable::parse(COMMANDS_JSON))
}

impl CommandTable {
    fn parse(text: &str) -> CommandTable {
        let json: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).expect("commands.json is a JSON object");
        let mut table = CommandTable {
            commands: Vec::new(),
            top_level: Vec::new(),
            by_name: hashbrown::HashMap::new(),
            members: vec![CommandBits::none(); CATEGORIES.len()],
            reach: vec![CommandBits::none(); CATEGORIES.len()],
        };
        let mut names: Vec<&String> = json.keys().collect();
        names.sort();
        for name in names {
            let id = table.add(name, &json[name], None);
            table.top_level.push(id);
            if let Some(subs) = json[name].get("subcommands").and_then(|s| s.as_object()) {
                let mut sub_names: Vec<&String> = subs.keys().collect();
                sub_names.sort();
                for sub in sub_names {
                    let sub_id = table.add(sub, &subs[sub], Some(id));
                    table.commands[id].subcommands.push(sub_id);
                }
            }
        }
        assert!(
            table.commands.len() < FUTURE_COMMANDS_BIT,
            "more commands than command bits"
        );
        for command in &table.commands {
            for (index, category) in table.reach.iter_mut().enumerate() {
                if command.categories & (1 << index) != 0 {
                    table.members[index].set(command.id, true);
                    category.set(command.id, true);
                    for &sub in &command.subcommands {
                        category.set(sub, true);
                    }
                }
            }
        }
        table
    }

    fn add(&mut self, name: &str, entry: &serde_json::Value, parent: Option<usize>) -> usize {
        let id = self.commands.len();
        let strings = |key: &str| -> Vec<String> {
            entry
                .get(key)
                .and_then(|v| v.as_array())
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut categories = 0;
        for name in strings("acl_categories") {
            let index = category(name.trim_start_matches('@').as_bytes())
                .unwrap_or_else(|| panic!("unknown ACL category {name}"));
            categories |= 1 << index;
        }
        let flags = strings("flags");
        let mut key_positions = [0; 3];
        if let Some(positions) = entry.get("key_positions").and_then(|p| p.as_array()) {
            assert_eq!(positions.len(), 3, "key_positions of {name}");
            for (slot, value) in key_positions.iter_mut().zip(positions) {
                *slot = value.as_i64().expect("key positions are integers");
            }
        }
        let key_specs = entry
            .get("key_specs")
            .and_then(|v| v.as_array())
            .map(|specs| specs.iter().map(parse_key_spec).collect())
            .unwrap_or_default();
        self.commands.push(AclCommand {
            full_name: name.to_string(),
            id,
            categories,
            parent,
            subcommands: Vec::new(),
            arity: entry.get("arity").and_then(|a| a.as_i64()).unwrap_or(0),
            no_auth: flags.iter().any(|f| f == "no_auth"),
            no_mandatory_keys: flags.iter().any(|f| f == "no_mandatory_keys"),
            flags,
            key_positions,
            tips: strings("tips"),
            key_specs,
        });
        self.by_name.insert(name.to_string(), id);
        id
    }

    /// Redis's `ACLLookupCommand`: `name` or `container|sub`, case-insensitive; a
    /// container's name alone is the container.
    pub fn lookup(&self, name: &[u8]) -> Option<&AclCommand> {
        let text = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        let mut parts = text.split('|');
        let base = parts.next()?;
        let sub = parts.next();
        if parts.next().is_some() {
            return None;
        }
        let base = &self.commands[*self.by_name.get(base)?];
        match sub {
            None if base.parent.is_none() => Some(base),
            Some(_) if base.subcommands.is_empty() => None,
            Some(_) => self.by_name.get(&text).map(|&id| &self.commands[id]),
            None => None,
        }
    }

    /// The entry ACL checks for a command Tessera is about to run: the subcommand named by
    /// `argv[1]` for a container, else the command. A subcommand Redis does not have
    /// falls back to its container (Tessera's handler then refuses it).
    pub fn for_request(&self, name: &str, argv: &[&[u8]]) -> Option<&AclCommand> {
        let name = checked_as(name).unwrap_or(name);
        let command = &self.commands[*self.by_name.get(name)?];
        if !command.subcommands.is_empty()
            && let Some(sub) = argv.get(1)
            && let Ok(sub) = std::str::from_utf8(sub)
        {
            let full = format!("{name}|{}", sub.to_ascii_lowercase());
            if let Some(&id) = self.by_name.get(&full) {
                return Some(&self.commands[id]);
            }
        }
        Some(command)
    }

    /// Whether the command a request runs (its subcommand, for a container) has Redis's
    /// command flag `flag` (`no_async_loading`, …).
    pub fn request_has_flag(&self, name: &str, argv: &[&[u8]], flag: &str) -> bool {
        self.for_request(name, argv)
            .is_some_and(|command| command.flags.iter().any(|f| f == flag))
    }

    /// Every command and subcommand in table order.
    pub fn iter(&self) -> impl Iterator<Item = &AclCommand> {
        self.commands.iter()
    }

    /// The categories of `full_name`, as `@name` strings in Redis's order (COMMAND INFO).
    pub fn categories_of(&self, full_name: &str) -> Vec<String> {
        let Some(&id) = self.by_name.get(full_name) else {
            return Vec::new();
        };
        let bits = self.commands[id].categories;
        CATEGORIES
            .iter()
            .enumerate()
            .filter(|(index, _)| bits & (1 << index) != 0)
            .map(|(_, name)| format!("@{name}"))
            .collect()
    }
}

fn parse_key_spec(spec: &serde_json::Value) -> KeySpec {
    let flags = spec
        .get("flags")
        .and_then(|f| f.as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str())
                .fold(0, |acc, f| acc | key_flags::parse(f))
        })
        .unwrap_or(0);
    let int = |value: &serde_json::Value, index: usize| {
        value
            .get(index)
            .and_then(|v| v.as_i64())
            .expect("key spec numbers")
    };
    let begin = match spec.get("begin_search") {
        Some(serde_json::Value::Object(map)) if map.contains_key("index") => {
            BeginSearch::Index(map["index"].as_i64().expect("index"))
        }
        Some(serde_json::Value::Object(map)) if map.contains_key("keyword") => {
            BeginSearch::Keyword {
                keyword: map["keyword"].as_str().expect("keyword").to_string(),
                start_from: map["startfrom"].as_i64().expect("startfrom"),
            }
        }
        _ => BeginSearch::Unknown,
    };
    let find = match spec.get("find_keys") {
        Some(serde_json::Value::Object(map)) if map.contains_key("range") => FindKeys::Range {
            last_key: int(&map["range"], 0),
            key_step: int(&map["range"], 1),
            limit: int(&map["range"], 2),
        },
        Some(serde_json::Value::Object(map)) if map.contains_key("keynum") => FindKeys::KeyNum {
            key_num_index: int(&map["keynum"], 0),
            first_key: int(&map["keynum"], 1),
            key_step: int(&map["keynum"], 2),
        },
        _ => FindKeys::Unknown,
    };
    let notes = spec
        .get("notes")
        .and_then(|n| n.as_str())
        .map(str::to_string);
    KeySpec {
        notes,
        flags,
        begin,
        find,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_loads_with_redis_categories() {
        let table = table();
        let get = table.lookup(b"GET").unwrap();
        assert_eq!(table.categories_of("get"), ["@read", "@string", "@fast"]);
        assert_eq!(get.key_specs.len(), 1);
        let config_get = table.lookup(b"config|GET").unwrap();
        assert_eq!(config_get.full_name, "config|get");
        assert!(table.lookup(b"get|x").is_none());
        assert!(table.lookup(b"config|get|x").is_none());
        assert!(table.lookup(b"").is_none());
        assert!(table.lookup(b"auth").unwrap().no_auth);
        // A category's reach covers the subcommands of its member containers.
        let slow = category(b"SLOW").unwrap();
        let client = table.lookup(b"client").unwrap();
        let client_id = table.lookup(b"client|id").unwrap();
        assert!(table.members[slow].get(client.id));
        assert!(table.reach[slow].get(client_id.id));
    }
}
