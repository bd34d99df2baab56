//! ACL: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, GENPASS, LOG, DRYRUN, LOAD,
//! SAVE, HELP. The users, rules and check are `crate::acl`'s; this is their command face.
//! A change that dooms other sessions (DELUSER, LOAD, channels revoked by SETUSER) asks
//! the host to close them; the calling session, if doomed, closes after its reply.

use super::{Action, Args, CommandSpec, Ctx, flags::*, lossy, unknown_subcommand, wrong_arity};
use crate::acl::{self, Denied, Doomed, SessionUser, table};
use crate::command;
use std::path::PathBuf;

pub fn commands() -> Vec<CommandSpec> {
    vec![command!(
        "acl",
        -2,
        LOADING | STALE,
        (0, 0, 0),
        "server",
        "A container for Access List Control commands ",
        acl
    )]
}

const HELP: &[&str] = &[
    "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
    "HELP",
    "    Print this help.",
];

/// The most bits ACL GENPASS gives.
const GENPASS_BITS_MAX: i64 = 4096;

fn acl(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    // Redis checks a subcommand's existence and arity before running it.
    let Some(entry) = table::table().lookup(format!("acl|{sub}").as_bytes()) else {
        unknown_subcommand(ctx, "acl", args[1]);
        return Action::None;
    };
    let argc = args.len() as i64;
    if (entry.arity > 0 && argc != entry.arity) || argc < -entry.arity {
        wrong_arity(ctx, &entry.full_name);
        return Action::None;
    }
    match sub.as_str() {
        "setuser" => set_user(ctx, args),
        "deluser" => delete_users(ctx, &args[2..]),
        "getuser" => {
            get_user(ctx, args[2]);
            Action::None
        }
        "list" | "users" => {
            let acl = &ctx.server.acl;
            ctx.out.array(acl.user_count());
            for user in acl.users() {
                if sub == "users" {
                    ctx.out.bulk(&user.name);
                } else {
                    let mut line = b"user ".to_vec();
                    line.extend_from_slice(&user.name);
                    line.push(b' ');
                    line.extend_from_slice(&user.describe());
                    ctx.out.bulk(&line);
                }
            }
            Action::None
        }
        "whoami" => {
            ctx.out.bulk(ctx.client.user.name());
            Action::None
        }
        "load" | "save" if ctx.server.config.aclfile.is_empty() => {
            ctx.out.error("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.");
            Action::None
        }
        "load" => load(ctx),
        "save" => {
            save(ctx);
            Action::None
        }
        "cat" => {
            categories(ctx, args.get(2).copied());
            Action::None
        }
        "genpass" => {
            generate_password(ctx, args.get(2).copied());
            Action::None
        }
        "log" => {
            log(ctx, args.get(2).copied());
            Action::None
        }
        "dryrun" => {
            dry_run(ctx, args[2], &args[3..]);
            Action::None
        }
        _ => {
            ctx.out.array(HELP.len());
            for line in HELP {
                ctx.out.simple(line);
            }
            Action::None
        }
    }
}

/// Closes the sessions `doomed` names: the others through the host, this one after its
/// reply.
fn close_doomed(ctx: &mut Ctx, doomed: &Doomed) -> Action {
    ctx.host.kill_clients(&super::Victims::Acl(doomed));
    if doomed.includes(&ctx.client.user, &ctx.client.subscriptions) {
        ctx.client.user = SessionUser::default();
        ctx.client.authenticated = false;
        return Action::Close;
    }
    Action::None
}

fn set_user(ctx: &mut Ctx, args: &Args) -> Action {
    let name = args[2];
    if acl::rules::has_spaces(name) {
        ctx.out
            .error("ERR Usernames can't contain spaces or null characters");
        return Action::None;
    }
    let pubsub_all = ctx.server.config.acl_pubsub_default_all;
    match ctx.server.acl.set_user(name, &args[3..], pubsub_all) {
        Ok(doomed) => {
            ctx.out.ok();
            match doomed {
                Some(doomed) => close_doomed(ctx, &doomed),
                None => Action::None,
            }
        }
        Err(error) => {
            ctx.out.error(&format!("ERR {error}"));
            Action::None
        }
    }
}

fn delete_users(ctx: &mut Ctx, names: &Args) -> Action {
    if names.iter().any(|n| *n == b"default") {
        ctx.out.error("ERR The 'default' user cannot be removed");
        return Action::None;
    }
    let deleted = ctx.server.acl.delete_users(names);
    ctx.out.integer(deleted.len() as i64);
    close_doomed(ctx, &Doomed::UsersNamed(deleted))
}

fn get_user(ctx: &mut Ctx, name: &[u8]) {
    let Some(user) = ctx.server.acl.user(name) else {
        ctx.out.null();
        return;
    };
    let out = &mut ctx.out;
    out.map(6);
    out.bulk(b"flags");
    let flags = user.flags();
    out.set(flags.len());
    for flag in flags {
        out.bulk(flag.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(user.passwords.len());
    for password in &user.passwords {
        out.bulk(password);
    }
    let write_selector = |out: &mut crate::resp::ReplyWriter, selector: &acl::rules::Selector| {
        out.bulk(b"commands");
        out.bulk(&selector.describe_commands());
        out.bulk(b"keys");
        out.bulk(&selector.describe_keys());
        out.bulk(b"channels");
        out.bulk(&selector.describe_channels());
    };
    write_selector(out, user.root());
    out.bulk(b"selectors");
    out.array(user.selectors.len() - 1);
    for selector in &user.selectors[1..] {
        out.map(3);
        write_selector(out, selector);
    }
}

/// The aclfile's path: relative names are under `dir`, as everything Tessera writes.
fn acl_file_path(ctx: &Ctx) -> PathBuf {
    ctx.server.config.dir.join(&ctx.server.config.aclfile)
}

fn load(ctx: &mut Ctx) -> Action {
    let shown = ctx.server.config.aclfile.clone();
    let text = match ctx.server.storage.read(&acl_file_path(ctx)) {
        Ok(text) => text,
        Err(error) => {
            ctx.out.error(&format!(
                "ERR Error loading ACLs, opening file '{shown}': {}",
                crate::process::os_error_text(&error)
            ));
            return Action::None;
        }
    };
    let pubsub_all = ctx.server.config.acl_pubsub_default_all;
    match ctx.server.acl.load(&text, &shown, pubsub_all) {
        Ok(doomed) => {
            ctx.out.ok();
            close_doomed(ctx, &doomed)
        }
        Err(errors) => {
            ctx.out.error(&format!("ERR {errors}"));
            Action::None
        }
    }
}

/// ACL SAVE: a temporary file, synced, renamed over the aclfile, the directory synced.
fn save(ctx: &mut Ctx) {
    let path = acl_file_path(ctx);
    let text = ctx.server.acl.file_text();
    let storage = ctx.server.storage.clone();
    let mut temporary = path.clone().into_os_string();
    temporary.push(format!(
        ".tmp-{}-{}",
        std::process::id(),
        crate::clock::unix_ms()
    ));
    let temporary = PathBuf::from(temporary);
    let written = (|| -> std::io::Result<()> {
        let mut file = storage.create(&temporary)?;
        file.append(&text)?;
        file.sync_data()?;
        drop(file);
        storage.rename(&temporary, &path)?;
        if let Some(parent) = path.parent() {
            storage.sync_dir(parent)?;
        }
        Ok(())
    })();
    match written {
        Ok(()) => ctx.out.ok(),
        Err(error) => {
            let _ = storage.remove_file(&temporary);
            tracing::warn!("Writing ACL file for ACL SAVE: {error}");
            ctx.out.error("ERR There was an error trying to save the ACLs. Please check the server logs for more information");
        }
    }
}

fn categories(ctx: &mut Ctx, name: Option<&[u8]>) {
    let Some(name) = name else {
        ctx.out.array(table::CATEGORIES.len());
        for category in table::CATEGORIES {
            ctx.out.bulk(category.as_bytes());
        }
        return;
    };
    let Some(category) = table::category(name) else {
        let shown: String = lossy(name).chars().take(128).collect();
        ctx.out.error(&format!("ERR Unknown category '{shown}'"));
        return;
    };
    let table = table::table();
    let members: Vec<&str> = table
        .iter()
        .filter(|c| table.members[category].get(c.id))
        .map(|c| c.full_name.as_str())
        .collect();
    ctx.out.array(members.len());
    for name in members {
        ctx.out.bulk(name.as_bytes());
    }
}

fn generate_password(ctx: &mut Ctx, bits: Option<&[u8]>) {
    let bits = match bits {
        None => 256,
        Some(arg) => match super::int_arg(ctx, arg) {
            Some(bits) => bits,
            None => return,
        },
    };
    if bits <= 0 || bits > GENPASS_BITS_MAX {
        ctx.out.error(&format!("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {GENPASS_BITS_MAX}"));
        return;
    }
    ctx.out
        .bulk(acl::generate_password(bits as usize).as_bytes());
}

fn log(ctx: &mut Ctx, argument: Option<&[u8]>) {
    let mut count = 10;
    if let Some(argument) = argument {
        if argument.eq_ignore_ascii_case(b"reset") {
            ctx.server.acl.log.reset();
            ctx.out.ok();
            return;
        }
        match super::int_arg(ctx, argument) {
            Some(n) => count = n.max(0) as usize,
            None => return,
        }
    }
    let now = crate::clock::unix_ms();
    ctx.server.acl.log.write(&mut ctx.out, count, now);
}

/// ACL DRYRUN user command [args]: whether the user may run it, without running it or
/// logging anything.
fn dry_run(ctx: &mut Ctx, name: &[u8], argv: &Args) {
    if ctx.server.acl.user(name).is_none() {
        ctx.out
            .error(&format!("ERR User '{}' not found", lossy(name)));
        return;
    }
    let not_found = |ctx: &mut Ctx| {
        ctx.out
            .error(&format!("ERR Command '{}' not found", lossy(argv[0])));
    };
    let Some(spec) = super::global_registry().get(argv[0]) else {
        return not_found(ctx);
    };
    let Some(command) = table::table().for_request(spec.name, argv) else {
        return not_found(ctx);
    };
    // A container's subcommand must exist, as Redis's lookup requires.
    if !command.subcommands.is_empty() && argv.len() > 1 {
        return not_found(ctx);
    }
    let argc = argv.len() as i64;
    if (command.arity > 0 && argc != command.arity) || argc < -command.arity {
        ctx.out.error(&format!(
            "ERR wrong number of arguments for '{}' command",
            command.full_name
        ));
        return;
    }
    let user = SessionUser::named(name);
    match ctx.server.acl.check(&user, spec.name, argv) {
        Ok(()) => ctx.out.ok(),
        Err(denial) => {
            let text = match denial.denied {
                Denied::Command => format!(
                    "This user has no permissions to run the '{}' command",
                    denial.command
                ),
                Denied::Key(index) => format!(
                    "This user has no permissions to access the '{}' key",
                    lossy(argv[index])
                ),
                Denied::Channel(index) => format!(
                    "This user has no permissions to access the '{}' channel",
                    lossy(argv[index])
                ),
            };
            ctx.out.bulk(text.as_bytes());
        }
    }
}
