//! Connection commands: PING, ECHO, QUIT, RESET, HELLO, AUTH, CLIENT.

use super::{
    Action, Args, CommandSpec, Ctx, client_admin, eq_ignore_case, flags::*, lossy,
    unknown_subcommand, wrong_arity,
};
use crate::command;
use crate::pubsub::Context;
use crate::tracking::{Mode, Options, TrackingError};
use bytes::Bytes;

/// The Redis version Tessera reports: clients gate features on it, and Tessera implements
/// Redis 7.0's command semantics.
pub const REDIS_COMPAT_VERSION: &str = "7.0.15";

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "ping",
            -1,
            FAST,
            (0, 0, 0),
            "connection",
            "Returns the server's liveliness response.",
            ping
        ),
        command!(
            "echo",
            2,
            LOADING | STALE | FAST,
            (0, 0, 0),
            "connection",
            "Returns the given string.",
            echo
        ),
        command!(
            "quit",
            -1,
            NO_AUTH | LOADING | STALE | FAST | NO_SCRIPT,
            (0, 0, 0),
            "connection",
            "Closes the connection.",
            quit
        ),
        command!(
            "reset",
            1,
            NO_AUTH | NO_SCRIPT | LOADING | STALE | FAST,
            (0, 0, 0),
            "connection",
            "Reset the connection",
            reset
        ),
        command!(
            "hello",
            -1,
            NO_AUTH | LOADING | STALE | FAST | NO_SCRIPT,
            (0, 0, 0),
            "connection",
            "Handshakes with the Redis server.",
            hello
        ),
        command!(
            "auth",
            -2,
            NO_AUTH | LOADING | STALE | FAST | NO_SCRIPT,
            (0, 0, 0),
            "connection",
            "Authenticates the connection.",
            auth
        ),
        command!(
            "monitor",
            1,
            ADMIN | NO_SCRIPT | LOADING | STALE,
            (0, 0, 0),
            "server",
            "Listens for all requests received by the server in real-time.",
            client_admin::monitor
        ),
        command!(
            "client",
            -2,
            LOADING | STALE,
            (0, 0, 0),
            "connection",
            "A container for client connection commands.",
            client
        ),
    ]
}

fn ping(ctx: &mut Ctx, args: &Args) -> Action {
    if args.len() > 2 {
        wrong_arity(ctx, "ping");
        return Action::None;
    }
    let context = Context::of(ctx.client.resp3, &ctx.client.subscriptions);
    match (context, args.get(1)) {
        // A RESP2 subscriber tells replies from messages by shape: PING answers an
        // array, as Redis's.
        (Context::Subscribed, message) => {
            ctx.out.array(2);
            ctx.out.bulk(b"pong");
            ctx.out.bulk(message.copied().unwrap_or(b""));
        }
        (Context::Commands, None) => ctx.out.simple("PONG"),
        (Context::Commands, Some(message)) => ctx.out.bulk(message),
    }
    Action::None
}

/// RESET: the connection as new (Redis's `clearClientConnectionState`): no transaction
/// or watched keys, no subscriptions, no tracking, no MONITOR, replies on (NO-EVICT stays), database 0, RESP2, no name, the default
/// user, and authenticated only if that user is on and needs no password.
fn reset(ctx: &mut Ctx, _args: &Args) -> Action {
    ctx.client.multi = None;
    ctx.server.watches.unwatch_all(ctx.client);
    let id = ctx.client.id;
    ctx.server.monitors.remove(id);
    ctx.client.modes = super::ClientModes {
        no_evict: ctx.client.modes.no_evict,
        ..Default::default()
    };
    ctx.server.pubsub.forget(&mut ctx.client.subscriptions, id);
    ctx.server.tracking.disable(id);
    ctx.client.db = 0;
    ctx.client.resp3 = false;
    ctx.out.resp3 = false;
    ctx.client.name = None;
    ctx.client.user = crate::acl::SessionUser::default();
    ctx.client.authenticated = ctx.server.acl.new_sessions_authenticated();
    ctx.out.simple("RESET");
    Action::None
}

fn echo(ctx: &mut Ctx, args: &Args) -> Action {
    ctx.out.bulk(args[1]);
    Action::None
}

fn quit(ctx: &mut Ctx, _args: &Args) -> Action {
    ctx.out.ok();
    Action::Close
}

/// Logs in as `user` if `password` is its password and it is on (Redis's
/// `ACLAuthenticateUser`); else replies WRONGPASS and records the failure in ACL LOG.
fn authenticate(ctx: &mut Ctx, command: &[u8], user: &[u8], password: &[u8]) -> bool {
    if ctx.server.acl.authenticate(user, password) {
        ctx.client.authenticated = true;
        ctx.client.user = crate::acl::SessionUser::named(user);
        return true;
    }
    let context = if ctx.client.multi.is_some() || ctx.in_exec() {
        crate::acl::log::Context::Multi
    } else {
        crate::acl::log::Context::TopLevel
    };
    let entry = crate::acl::log::Entry {
        count: 1,
        reason: crate::acl::log::Reason::Auth,
        context,
        object: command.to_vec(),
        username: user.to_vec(),
        time_ms: crate::clock::unix_ms(),
        client_info: ctx.host.describe_client(
            ctx.client,
            &lossy(command).to_ascii_lowercase(),
            &ctx.server.tracking,
        ),
    };
    let max_len = ctx.server.config.acllog_max_len as usize;
    ctx.server.acl.log.add(entry, max_len);
    ctx.out
        .error("WRONGPASS invalid username-password pair or user is disabled.");
    false
}

fn auth(ctx: &mut Ctx, args: &Args) -> Action {
    match args.len() {
        2 => {
            if ctx.server.acl.default_user().nopass {
                ctx.out.error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
            } else if authenticate(ctx, args[0], b"default", args[1]) {
                ctx.out.ok();
            }
        }
        3 => {
            if authenticate(ctx, args[0], args[1], args[2]) {
                ctx.out.ok();
            }
        }
        _ => ctx.out.error(super::SYNTAX_ERROR),
    }
    Action::None
}

fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn hello(ctx: &mut Ctx, args: &Args) -> Action {
    let mut protocol = if ctx.client.resp3 { 3 } else { 2 };
    if args.len() >= 2 {
        match crate::resp::parse_i64(args[1]) {
            None => {
                ctx.out
                    .error("ERR Protocol version is not an integer or out of range");
                return Action::None;
            }
            Some(v) if v != 2 && v != 3 => {
                ctx.out.error("NOPROTO unsupported protocol version");
                return Action::None;
            }
            Some(v) => protocol = v,
        }
    }
    // Redis's loop: AUTH and SETNAME take effect as they are read, so a bad option
    // after them leaves them done.
    let mut i = 2;
    while i < args.len() {
        let remaining = args.len() - i - 1;
        if eq_ignore_case(args[i], "auth") && remaining >= 2 {
            if !authenticate(ctx, args[0], args[i + 1], args[i + 2]) {
                return Action::None;
            }
            i += 3;
        } else if eq_ignore_case(args[i], "setname") && remaining >= 1 {
            let name = args[i + 1];
            if !valid_client_name(name) {
                ctx.out.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
                return Action::None;
            }
            ctx.client.name = (!name.is_empty()).then(|| lossy(name));
            i += 2;
        } else {
            ctx.out.error(&format!(
                "ERR Syntax error in HELLO option '{}'",
                lossy(args[i])
            ));
            return Action::None;
        }
    }
    if !ctx.client.authenticated {
        ctx.out.error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
        return Action::None;
    }
    ctx.client.resp3 = protocol == 3;
    ctx.out.resp3 = ctx.client.resp3;
    ctx.out.map(7);
    ctx.out.bulk(b"server");
    ctx.out.bulk(b"redis");
    ctx.out.bulk(b"version");
    ctx.out.bulk(REDIS_COMPAT_VERSION.as_bytes());
    ctx.out.bulk(b"proto");
    ctx.out.integer(protocol);
    ctx.out.bulk(b"id");
    ctx.out.integer(ctx.client.id as i64);
    ctx.out.bulk(b"mode");
    ctx.out.bulk(b"standalone");
    ctx.out.bulk(b"role");
    ctx.out.bulk(b"master");
    ctx.out.bulk(b"modules");
    ctx.out.array(0);
    Action::None
}

/// Redis 7.0's CLIENT HELP, with SETINFO (Redis 7.2) where 7.2 lists it.
const CLIENT_HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <LIB-NAME|LIB-VER> <value>",
    "    Set client library name or version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "HELP",
    "    Print this help.",
];

fn client(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "id" | "getname" | "info" | "help" | "getredir" | "trackinginfo" => args.len() == 2,
        "setname" | "caching" => args.len() == 3,
        "tracking" | "kill" => args.len() >= 3,
        "setinfo" => args.len() == 4,
        "reply" | "no-evict" => args.len() == 3,
        "unpause" => args.len() == 2,
        "pause" | "unblock" => args.len() == 3 || args.len() == 4,
        "list" => args.len() >= 2,
        _ => {
            unknown_subcommand(ctx, "client", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        wrong_arity(ctx, &format!("client|{sub}"));
        return Action::None;
    }
    match sub.as_str() {
        "id" => ctx.out.integer(ctx.client.id as i64),
        "getname" => match ctx.client.name.clone() {
            Some(name) => ctx.out.bulk(name.as_bytes()),
            None => ctx.out.null(),
        },
        "setname" => {
            if valid_client_name(args[2]) {
                ctx.client.name = (!args[2].is_empty()).then(|| lossy(args[2]));
                ctx.out.ok();
            } else {
                ctx.out.error(
                    "ERR Client names cannot contain spaces, newlines or special characters.",
                );
            }
        }
        "setinfo" => {
            let value = lossy(args[3]);
            if !valid_client_name(args[3]) {
                ctx.out.error(&format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    lossy(args[2])
                ));
            } else if eq_ignore_case(args[2], "lib-name") {
                ctx.client.lib_name = Some(value);
                ctx.out.ok();
            } else if eq_ignore_case(args[2], "lib-ver") {
                ctx.client.lib_version = Some(value);
                ctx.out.ok();
            } else {
                ctx.out
                    .error(&format!("ERR Unrecognized option '{}'", lossy(args[2])));
            }
        }
        "tracking" => client_tracking(ctx, args),
        "kill" => return client_admin::kill(ctx, args),
        "pause" => return client_admin::pause(ctx, args),
        "unpause" => return client_admin::unpause(ctx),
        "reply" => return client_admin::reply(ctx, args),
        "no-evict" => return client_admin::no_evict(ctx, args),
        "unblock" => return client_admin::unblock(ctx, args),
        "caching" => {
            let yes = if eq_ignore_case(args[2], "yes") {
                true
            } else if eq_ignore_case(args[2], "no") {
                false
            } else if ctx.server.tracking.client(ctx.client.id).is_none() {
                // Redis checks tracking before the argument.
                ctx.out
                    .error(&TrackingError::CachingWithoutTracking.to_string());
                return Action::None;
            } else {
                ctx.out.error(super::SYNTAX_ERROR);
                return Action::None;
            };
            match ctx.server.tracking.set_caching(ctx.client.id, yes) {
                Ok(()) => ctx.out.ok(),
                Err(error) => ctx.out.error(&error.to_string()),
            }
        }
        "getredir" => {
            let redirect = ctx
                .server
                .tracking
                .client(ctx.client.id)
                .map_or(-1, |t| t.redirect.map_or(0, |id| id as i64));
            ctx.out.integer(redirect);
        }
        "trackinginfo" => client_trackinginfo(ctx),
        "info" => {
            return Action::ClientList {
                only_self: true,
                ids: None,
                kind: None,
            };
        }
        "list" => {
            if args.len() == 4 && eq_ignore_case(args[2], "type") {
                match super::TypeFilter::parse(args[3]) {
                    Some(super::TypeFilter::Kind(kind)) => {
                        return Action::ClientList {
                            only_self: false,
                            ids: None,
                            kind: Some(kind),
                        };
                    }
                    None => ctx
                        .out
                        .error(&format!("ERR Unknown client type '{}'", lossy(args[3]))),
                }
                return Action::None;
            }
            if args.len() >= 4 && eq_ignore_case(args[2], "id") {
                let ids: Option<Vec<u64>> = args[3..]
                    .iter()
                    .map(|a| {
                        // Any integer, as Redis's: one no client has (0 or
                        // negative) lists nothing.
                        crate::resp::parse_i64(a).map(|n| u64::try_from(n).unwrap_or(0))
                    })
                    .collect();
                let Some(ids) = ids else {
                    ctx.out.error("ERR Invalid client ID");
                    return Action::None;
                };
                return Action::ClientList {
                    only_self: false,
                    ids: Some(ids),
                    kind: None,
                };
            }
            if args.len() != 2 {
                ctx.out.error(super::SYNTAX_ERROR);
                return Action::None;
            }
            return Action::ClientList {
                only_self: false,
                ids: None,
                kind: None,
            };
        }
        _ => {
            ctx.out.array(CLIENT_HELP.len());
            for line in CLIENT_HELP {
                ctx.out.simple(line);
            }
        }
    }
    Action::None
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX p ...] [OPTIN] [OPTOUT] [NOLOOP]:
/// the options are parsed (and their errors given) before ON or OFF is looked at, as
/// Redis does.
fn client_tracking(ctx: &mut Ctx, args: &Args) {
    let mut options = Options::default();
    let mut index = 3;
    while index < args.len() {
        let word = args[index];
        let has_value = index + 1 < args.len();
        if eq_ignore_case(word, "redirect") && has_value {
            index += 1;
            if options.redirect.is_some() {
                ctx.out.error(&TrackingError::SecondRedirect.to_string());
                return;
            }
            let Some(id) = super::int_arg(ctx, args[index]) else {
                return;
            };
            // Checked now, though the client may leave later (then the redirect breaks).
            let exists =
                id > 0 && (id as u64 == ctx.client.id || ctx.host.client_exists(id as u64));
            if !exists {
                ctx.out.error(&TrackingError::NoSuchRedirect.to_string());
                return;
            }
            options.redirect = Some(id as u64);
        } else if eq_ignore_case(word, "bcast") {
            options.broadcast = true;
        } else if eq_ignore_case(word, "optin") {
            options.opt_in = true;
        } else if eq_ignore_case(word, "optout") {
            options.opt_out = true;
        } else if eq_ignore_case(word, "noloop") {
            options.noloop = true;
        } else if eq_ignore_case(word, "prefix") && has_value {
            index += 1;
            options.prefixes.push(Bytes::copy_from_slice(args[index]));
        } else {
            ctx.out.error(super::SYNTAX_ERROR);
            return;
        }
        index += 1;
    }
    let id = ctx.client.id;
    if eq_ignore_case(args[2], "on") {
        match ctx.server.tracking.enable(id, options) {
            Ok(()) => ctx.out.ok(),
            Err(error) => ctx.out.error(&error.to_string()),
        }
    } else if eq_ignore_case(args[2], "off") {
        ctx.server.tracking.disable(id);
        ctx.out.ok();
    } else {
        ctx.out.error(super::SYNTAX_ERROR);
    }
}

/// CLIENT TRACKINGINFO: a map of `flags` (a set), `redirect` (-1 when not tracking, 0
/// without REDIRECT) and `prefixes`.
fn client_trackinginfo(ctx: &mut Ctx) {
    let tracking = ctx.server.tracking.client(ctx.client.id);
    let flags = tracking.map_or_else(|| vec!["off"], |t| t.info_flags());
    let redirect = tracking.map_or(-1, |t| t.redirect.map_or(0, |id| id as i64));
    let prefixes: Vec<Bytes> = match tracking.map(|t| &t.mode) {
        Some(Mode::Broadcast(prefixes)) => prefixes.iter().cloned().collect(),
        _ => Vec::new(),
    };
    ctx.out.map(3);
    ctx.out.bulk(b"flags");
    ctx.out.set(flags.len());
    for flag in flags {
        ctx.out.bulk(flag.as_bytes());
    }
    ctx.out.bulk(b"redirect");
    ctx.out.integer(redirect);
    ctx.out.bulk(b"prefixes");
    ctx.out.bulk_strings(prefixes.iter());
}
