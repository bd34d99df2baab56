//! COMMAND GETKEYS and GETKEYSANDFLAGS: which arguments of a request would be keys, as
//! Redis 7.0's `getKeysSubcommandImpl` finds them — from Redis's own key specs (the ACL
//! table, `acl::table`), or the command's key function where the specs cannot say — so
//! that a proxy or a cluster client that asks gets Redis's answer. Only the commands
//! Tessera has are looked up; the others are "Invalid command specified".

use super::{Args, Ctx};
use crate::acl::{check, table};

/// Replies the keys of the request `request` (a command name and its arguments), with
/// their flags if `with_flags`.
pub fn getkeys(ctx: &mut Ctx, request: &Args, with_flags: bool) {
    let Some(command) = lookup(request) else {
        ctx.out.error("ERR Invalid command specified");
        return;
    };
    if !check::has_keys(command) {
        ctx.out.error("ERR The command has no key arguments");
        return;
    }
    let argc = request.len() as i64;
    if (command.arity > 0 && command.arity != argc) || argc < -command.arity {
        ctx.out
            .error("ERR Invalid number of arguments specified for command");
        return;
    }
    let keys = check::keys_of(command, request);
    if keys.is_empty() && !command.no_mandatory_keys {
        ctx.out.error("ERR Invalid arguments specified for command");
        return;
    }
    ctx.out.array(keys.len());
    for (position, flags) in keys {
        if !with_flags {
            ctx.out.bulk(request[position]);
            continue;
        }
        ctx.out.array(2);
        ctx.out.bulk(request[position]);
        let names = table::key_flags::NAMES
            .iter()
            .filter(|(bit, _)| flags & bit != 0);
        ctx.out.set(names.clone().count());
        for (_, name) in names {
            ctx.out.simple(name);
        }
    }
}

/// Redis's `lookupCommand` over the request: the command, or for a container given a
/// subcommand, that subcommand (None if Redis has no such one).
fn lookup(request: &Args) -> Option<&'static table::AclCommand> {
    let name = request.first()?;
    if name.contains(&b'|') || super::global_registry().get(name).is_none() {
        return None;
    }
    let table = table::table();
    let command = table.lookup(name)?;
    match request.get(1) {
        Some(sub) if !command.subcommands.is_empty() => {
            let full = [&name[..], b"|", sub].concat();
            table.lookup(&full)
        }
        _ => Some(command),
    }
}
