//! FUNCTION and FCALL / FCALL_RO: the commands of `scripting::functions`.
//!
//! FUNCTION LOAD, DELETE and FLUSH change data: they are logged as given (replaying them
//! in order rebuilds the same libraries) and their replies wait for the log like any
//! write's. FCALL runs in the engine like EVAL (`Action::RunScript`).

use super::{
    Action, Args, Ctx, ReplyShows, eq_ignore_case, flags, lossy, unknown_subcommand, wrong_arity,
};
use crate::command;
use crate::scripting::run::Target;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "function",
            -2,
            NO_SCRIPT,
            (0, 0, 0),
            "scripting",
            "A container for function commands",
            function
        ),
        command!(
            "fcall",
            -3,
            NO_SCRIPT | STALE | MOVABLEKEYS,
            (0, 0, 0),
            "scripting",
            "Invoke a function",
            fcall
        ),
        command!(
            "fcall_ro",
            -3,
            NO_SCRIPT | STALE | READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "scripting",
            "Invoke a read-only function",
            fcall_ro
        ),
    ]
}

fn fcall(ctx: &mut Ctx, args: &Args) -> Action {
    fcall_generic(ctx, args, false)
}

fn fcall_ro(ctx: &mut Ctx, args: &Args) -> Action {
    fcall_generic(ctx, args, true)
}

/// Redis's `fcallCommandGeneric`: the function, the key count, the flags' checks.
fn fcall_generic(ctx: &mut Ctx, args: &Args, read_only_command: bool) -> Action {
    let name = lossy(args[1]);
    let Some(function) = ctx.server.scripting.function(&name) else {
        ctx.out.error("ERR Function not found");
        return Action::None;
    };
    let function_flags = function.flags;
    let numkeys = match crate::resp::parse_i64(args[2]) {
        Some(n) => n,
        None => {
            ctx.out.error("ERR Bad number of keys provided");
            return Action::None;
        }
    };
    if numkeys > (args.len() - 3) as i64 {
        ctx.out
            .error("ERR Number of keys can't be greater than number of args");
        return Action::None;
    } else if numkeys < 0 {
        ctx.out.error("ERR Number of keys can't be negative");
        return Action::None;
    }
    super::scripting::prepare_run(
        ctx,
        args,
        numkeys as usize,
        Target::Function(name),
        function_flags,
        read_only_command,
    )
}

const FUNCTION_HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "HELP",
    "    Prints this help.",
];

fn function(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "help" | "kill" | "stats" | "dump" => args.len() == 2,
        "restore" => args.len() >= 3,
        "delete" => args.len() == 3,
        "load" => args.len() >= 3,
        "list" | "flush" => args.len() >= 2,
        _ => {
            unknown_subcommand(ctx, "function", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        wrong_arity(ctx, &format!("function|{sub}"));
        return Action::None;
    }
    let writes = matches!(sub.as_str(), "load" | "delete" | "flush" | "restore");
    if writes && let Some(error) = ctx.server.disk_error() {
        ctx.out.error(&error.to_string());
        return Action::None;
    }
    match sub.as_str() {
        "help" => {
            ctx.out.array(FUNCTION_HELP.len());
            for line in FUNCTION_HELP {
                ctx.out.simple(line);
            }
        }
        "kill" => ctx.out.error("NOTBUSY No scripts in execution right now."),
        "stats" => stats(ctx),
        "dump" => {
            let codes = ctx.server.scripting.library_codes();
            ctx.out.bulk(&crate::rdb::payload::encode_functions(&codes));
        }
        "restore" => restore(ctx, args),
        "list" => {
            list(ctx, &args[2..]);
        }
        "load" => {
            load(ctx, args);
        }
        "delete" => {
            if ctx.server.scripting.delete_library(&lossy(args[2])) {
                ctx.propagate(args);
                ctx.client.reply_shows = ReplyShows::Writes;
                ctx.out.ok();
            } else {
                ctx.out.error("ERR Library not found");
            }
        }
        _ if args.len() > 3 => super::subcommand_syntax_error(ctx, args),
        _ => {
            let mode_ok = match args.get(2) {
                None => true,
                Some(mode) => {
                    args.len() == 3
                        && (eq_ignore_case(mode, "sync") || eq_ignore_case(mode, "async"))
                }
            };
            if !mode_ok {
                ctx.out
                    .error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
                return Action::None;
            }
            ctx.server.scripting.flush_functions();
            ctx.propagate(args);
            ctx.client.reply_shows = ReplyShows::Writes;
            ctx.out.ok();
        }
    }
    Action::None
}

fn load(ctx: &mut Ctx, args: &Args) -> Action {
    // Redis's parsing: options up to the last argument, which is the code.
    let mut replace = false;
    let mut position = 2;
    while position < args.len() - 1 {
        let option = args[position];
        position += 1;
        if eq_ignore_case(option, "replace") {
            replace = true;
            continue;
        }
        ctx.out
            .error(&format!("ERR Unknown option given: {}", lossy(option)));
        return Action::None;
    }
    let code = args[position];
    // Replaying the log, a library is loaded whatever time its code takes (as Redis
    // loads its AOF).
    let timeout = !ctx.loading;
    match ctx.server.scripting.load_library(code, replace, timeout) {
        Ok(name) => {
            // Logged as given: replayed in order, it builds the same library.
            ctx.propagate(args);
            ctx.client.reply_shows = ReplyShows::Writes;
            ctx.out.bulk(name.as_bytes());
        }
        Err(error) => ctx.out.error(&format!("ERR {error}")),
    }
    Action::None
}

/// FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE].
fn restore(ctx: &mut Ctx, args: &Args) {
    use crate::scripting::functions::RestorePolicy;
    if args.len() > 4 {
        super::subcommand_syntax_error(ctx, args);
        return;
    }
    let policy = match args.get(3) {
        None => RestorePolicy::Append,
        Some(p) if eq_ignore_case(p, "append") => RestorePolicy::Append,
        Some(p) if eq_ignore_case(p, "replace") => RestorePolicy::Replace,
        Some(p) if eq_ignore_case(p, "flush") => RestorePolicy::Flush,
        Some(_) => {
            ctx.out.error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            );
            return;
        }
    };
    let codes = match crate::rdb::payload::decode_functions(args[2]) {
        Ok(codes) => codes,
        Err(error) => {
            ctx.out.error(&format!("ERR {error}"));
            return;
        }
    };
    match ctx.server.scripting.restore_libraries(&codes, policy) {
        Ok(()) => {
            // Logged as given: the payload replays to the same libraries.
            ctx.propagate(args);
            ctx.client.reply_shows = ReplyShows::Writes;
            ctx.out.ok();
        }
        Err(error) => ctx.out.error(&format!("ERR {error}")),
    }
}

fn list(ctx: &mut Ctx, options: &Args) -> Action {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 0;
    while i < options.len() {
        // Each option once: a second is an unknown argument, as in Redis.
        if !with_code && eq_ignore_case(options[i], "withcode") {
            with_code = true;
        } else if pattern.is_none() && eq_ignore_case(options[i], "libraryname") {
            let Some(p) = options.get(i + 1) else {
                ctx.out.error("ERR library name argument was not given");
                return Action::None;
            };
            pattern = Some(p);
            i += 1;
        } else {
            ctx.out
                .error(&format!("ERR Unknown argument {}", lossy(options[i])));
            return Action::None;
        }
        i += 1;
    }
    let libraries: Vec<_> = ctx
        .server
        .scripting
        .libraries()
        .filter(|l| pattern.is_none_or(|p| crate::glob::glob_match(p, l.name.as_bytes(), false)))
        .collect();
    let out = &mut ctx.out;
    out.array(libraries.len());
    for library in libraries {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(library.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(library.functions.len());
        for function in library.functions.values() {
            out.map(3);
            out.bulk(b"name");
            out.bulk(function.name.as_bytes());
            out.bulk(b"description");
            match &function.description {
                Some(text) => out.bulk(text.as_bytes()),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names = function.flags.names();
            out.set(names.len());
            for name in names {
                out.simple(name);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&library.code);
        }
    }
    Action::None
}

fn stats(ctx: &mut Ctx) {
    let (libraries, functions) = ctx.server.scripting.function_counts();
    // None is running while a client is served here; a busy function's callers are
    // answered by the event loop (`server::busy`).
    crate::scripting::busy::write_function_stats(&mut ctx.out, None, libraries, functions);
}
