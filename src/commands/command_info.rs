//! COMMAND, COMMAND INFO: a command's description as Redis 7.0 gives it (name, arity,
//! flags, legacy key positions, ACL categories, tips, key specs, subcommands).
//!
//! For a command Redis has, the description is Redis's own, from its table
//! (`crate::acl::table`, generated from a real redis-server): clients and proxies route
//! by these key specs and flags, so they must be Redis's to the letter. Where Tessera's
//! own table acts on a flag (write, readonly, denyoom, noscript…), a unit test below holds
//! it equal to Redis's, so what COMMAND INFO says is what Tessera does. A container lists
//! the subcommands Tessera has (`command_list::NOT_BUILT` are left out). A command Redis
//! lacks is described from Tessera's table alone.

use super::command_list::NOT_BUILT;
use super::{CommandSpec, Ctx, flags, lossy};
use crate::acl::table::{self, AclCommand, BeginSearch, FindKeys, KeySpec, key_flags};
use crate::resp::ReplyWriter;

/// Writes COMMAND INFO's entry for each named command (`container|sub` names a
/// subcommand); an unknown name gets a null, as Redis 7.0 replies.
pub fn command_info(ctx: &mut Ctx, names: &super::Args) {
    let registry = super::global_registry();
    ctx.out.array(names.len());
    for name in names {
        match registry.get(name) {
            Some(spec) => write_command(&mut ctx.out, spec),
            None => match subcommand(name) {
                Some(sub) => write_entry(&mut ctx.out, sub),
                None => ctx.out.null(),
            },
        }
    }
}

/// COMMAND, COMMAND INFO with no name: every command Tessera has.
pub fn every_command(ctx: &mut Ctx) {
    let registry = super::global_registry();
    ctx.out.array(registry.len());
    for spec in registry.iter() {
        write_command(&mut ctx.out, spec);
    }
}

/// `container|sub`, when Tessera has the container and the subcommand is built.
fn subcommand(name: &[u8]) -> Option<&'static AclCommand> {
    let full = lossy(name).to_ascii_lowercase();
    let (container, _) = full.split_once('|')?;
    super::global_registry().get(container.as_bytes())?;
    let sub = table::table().lookup(full.as_bytes())?;
    (sub.parent.is_some() && !NOT_BUILT.contains(&sub.full_name.as_str())).then_some(sub)
}

fn write_command(out: &mut ReplyWriter, spec: &CommandSpec) {
    match table::table().lookup(spec.name.as_bytes()) {
        Some(command) => write_entry(out, command),
        None => write_own_entry(out, spec),
    }
}

/// Redis's `addReplyCommandInfo`.
fn write_entry(out: &mut ReplyWriter, command: &AclCommand) {
    out.array(10);
    out.bulk(command.full_name.as_bytes());
    out.integer(command.arity);
    out.set(command.flags.len());
    for flag in &command.flags {
        out.simple(flag);
    }
    for position in command.key_positions {
        out.integer(position);
    }
    write_categories(out, &command.full_name);
    out.set(command.tips.len());
    for tip in &command.tips {
        out.bulk(tip.as_bytes());
    }
    out.set(command.key_specs.len());
    for spec in &command.key_specs {
        write_key_spec(out, spec);
    }
    let table = table::table();
    let subcommands: Vec<&AclCommand> = command
        .subcommands
        .iter()
        .map(|&id| &table.commands[id])
        .filter(|sub| !NOT_BUILT.contains(&sub.full_name.as_str()))
        .collect();
    if subcommands.is_empty() {
        // Redis replies an empty set here, an array otherwise.
        out.set(0);
    } else {
        out.array(subcommands.len());
        for sub in subcommands {
            write_entry(out, sub);
        }
    }
}

fn write_categories(out: &mut ReplyWriter, full_name: &str) {
    let categories = table::table().categories_of(full_name);
    out.set(categories.len());
    for category in categories {
        out.simple(&category);
    }
}

/// Redis's `addReplyCommandKeySpecs` for one spec.
fn write_key_spec(out: &mut ReplyWriter, spec: &KeySpec) {
    out.map(3 + spec.notes.is_some() as usize);
    if let Some(notes) = &spec.notes {
        out.bulk(b"notes");
        out.bulk(notes.as_bytes());
    }
    out.bulk(b"flags");
    write_flag_names(out, spec.flags, &key_flags::NAMES);
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    match &spec.begin {
        BeginSearch::Index(index) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.integer(*index);
        }
        BeginSearch::Keyword {
            keyword,
            start_from,
        } => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(keyword.as_bytes());
            out.bulk(b"startfrom");
            out.integer(*start_from);
        }
        BeginSearch::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    let (kind, fields): (&[u8], [(&[u8], i64); 3]) = match spec.find {
        FindKeys::Range {
            last_key,
            key_step,
            limit,
        } => (
            b"range",
            [
                (b"lastkey", last_key),
                (b"keystep", key_step),
                (b"limit", limit),
            ],
        ),
        FindKeys::KeyNum {
            key_num_index,
            first_key,
            key_step,
        } => (
            b"keynum",
            [
                (b"keynumidx", key_num_index),
                (b"firstkey", first_key),
                (b"keystep", key_step),
            ],
        ),
        FindKeys::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
            return;
        }
    };
    out.bulk(kind);
    out.bulk(b"spec");
    out.map(fields.len());
    for (name, value) in fields {
        out.bulk(name);
        out.integer(value);
    }
}

/// The names of the bits set in `bits`, as a set of simple strings in `names`' order.
fn write_flag_names(out: &mut ReplyWriter, bits: u32, names: &[(u32, &str)]) {
    let set: Vec<&str> = names
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    out.set(set.len());
    for name in set {
        out.simple(name);
    }
}

/// The ACL categories and tips of the commands Redis 7.0 lacks, as the Redis version
/// that has them describes them (WAITAOF: Redis 7.2's `waitaof.json`). They are not in
/// the ACL table, which is Redis 7.0's.
const LATER_COMMANDS: &[(&str, &[&str], &[&str])] = &[(
    "waitaof",
    &["@slow", "@connection"],
    &["request_policy:all_shards", "response_policy:agg_min"],
)];

/// A command Redis 7.0 lacks: described from Tessera's table and `LATER_COMMANDS` (no
/// key specs).
fn write_own_entry(out: &mut ReplyWriter, spec: &CommandSpec) {
    out.array(10);
    out.bulk(spec.name.as_bytes());
    out.integer(spec.arity as i64);
    write_flag_names(out, spec.flags, flags::NAMES);
    out.integer(spec.first_key as i64);
    out.integer(spec.last_key as i64);
    out.integer(spec.key_step as i64);
    match LATER_COMMANDS
        .iter()
        .find(|(name, _, _)| *name == spec.name)
    {
        Some((_, categories, tips)) => {
            out.set(categories.len());
            for category in *categories {
                out.simple(category);
            }
            out.set(tips.len());
            for tip in *tips {
                out.bulk(tip.as_bytes());
            }
        }
        None => {
            write_categories(out, spec.name);
            out.set(0);
        }
    }
    out.set(0);
    out.set(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every flag of Tessera's table that changes what Tessera does is Redis's, and so is
    /// the arity and the legacy key range: COMMAND INFO shows Redis's, and must not lie.
    #[test]
    fn the_flags_tessera_acts_on_are_redis_s() {
        let table = table::table();
        let mut wrong = Vec::new();
        for spec in super::super::global_registry().iter() {
            let Some(command) = table.lookup(spec.name.as_bytes()) else {
                continue;
            };
            let ours: Vec<&str> = flags::NAMES
                .iter()
                .filter(|(bit, _)| spec.flags & bit != 0)
                .map(|(_, name)| *name)
                .collect();
            let redis: Vec<&str> = command
                .flags
                .iter()
                .map(String::as_str)
                .filter(|name| flags::NAMES.iter().any(|(_, ours)| ours == name))
                .collect();
            // A container's flags are its subcommands' business: Tessera checks them
            // per request against the subcommand's entry.
            if command.subcommands.is_empty() && ours != redis {
                wrong.push(format!("{}: {ours:?} vs Redis {redis:?}", spec.name));
            }
            if spec.arity as i64 != command.arity {
                wrong.push(format!(
                    "{}: arity {} vs Redis {}",
                    spec.name, spec.arity, command.arity
                ));
            }
            let ours = [spec.first_key, spec.last_key, spec.key_step].map(i64::from);
            if command.subcommands.is_empty() && ours != command.key_positions {
                wrong.push(format!(
                    "{}: keys {ours:?} vs Redis {:?}",
                    spec.name, command.key_positions
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "differs from Redis 7.0:\n{}",
            wrong.join("\n")
        );
    }
}
