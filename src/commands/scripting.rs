//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT: the commands of `crate::scripting`.
//!
//! The handlers check the arguments, find or compile the script and check its shebang
//! flags against the server's state (Redis's `scriptPrepareForRun`); the script itself
//! runs in the engine (`Action::RunScript`), because its `redis.call` needs the engine's
//! one execute path.

use super::{Action, Args, Ctx, flags, lossy, unknown_subcommand, wrong_arity};
use crate::command;
use crate::scripting::run::{ScriptCall, Target};

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "eval",
            -3,
            NO_SCRIPT | STALE | MOVABLEKEYS,
            (0, 0, 0),
            "scripting",
            "Execute a Lua script server side",
            eval
        ),
        command!(
            "evalsha",
            -3,
            NO_SCRIPT | STALE | MOVABLEKEYS,
            (0, 0, 0),
            "scripting",
            "Execute a Lua script server side",
            evalsha
        ),
        command!(
            "eval_ro",
            -3,
            NO_SCRIPT | STALE | READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "scripting",
            "Execute a read-only Lua script server side",
            eval_ro
        ),
        command!(
            "evalsha_ro",
            -3,
            NO_SCRIPT | STALE | READONLY | MOVABLEKEYS,
            (0, 0, 0),
            "scripting",
            "Execute a read-only Lua script server side",
            evalsha_ro
        ),
        command!(
            "script",
            -2,
            NO_SCRIPT,
            (0, 0, 0),
            "scripting",
            "A container for Lua scripts management commands",
            script
        ),
    ]
}

const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

fn eval(ctx: &mut Ctx, args: &Args) -> Action {
    eval_generic(ctx, args, false, false)
}

fn evalsha(ctx: &mut Ctx, args: &Args) -> Action {
    eval_generic(ctx, args, true, false)
}

fn eval_ro(ctx: &mut Ctx, args: &Args) -> Action {
    eval_generic(ctx, args, false, true)
}

fn evalsha_ro(ctx: &mut Ctx, args: &Args) -> Action {
    eval_generic(ctx, args, true, true)
}

/// Redis's `evalGenericCommand` up to the run: the key count, the script (compiled and
/// cached on first sight for EVAL), and the checks its shebang flags call for.
fn eval_generic(ctx: &mut Ctx, args: &Args, by_sha: bool, read_only_command: bool) -> Action {
    if by_sha && args[1].len() != 40 {
        // No script has that name; Redis answers so before it reads the key count.
        ctx.out.error(NOSCRIPT);
        return Action::None;
    }
    let Some(numkeys) = super::int_arg(ctx, args[2]) else {
        return Action::None;
    };
    if numkeys > (args.len() - 3) as i64 {
        ctx.out
            .error("ERR Number of keys can't be greater than number of args");
        return Action::None;
    } else if numkeys < 0 {
        ctx.out.error("ERR Number of keys can't be negative");
        return Action::None;
    }
    let (sha, script_flags) = if by_sha {
        match ctx.server.scripting.get(args[1]) {
            Some(script) => {
                let mut sha = [0u8; 40];
                sha.copy_from_slice(args[1]);
                (sha.map(|b| b.to_ascii_lowercase()), script.flags)
            }
            None => {
                ctx.out.error(NOSCRIPT);
                return Action::None;
            }
        }
    } else {
        match ctx.server.scripting.load(args[1]) {
            Ok(sha) => {
                let script = ctx.server.scripting.get(&sha).expect("loaded");
                (sha, script.flags)
            }
            Err(error) => {
                ctx.out.error(&format!("ERR {error}"));
                return Action::None;
            }
        }
    };
    prepare_run(
        ctx,
        args,
        numkeys as usize,
        Target::Script(sha),
        script_flags,
        read_only_command,
    )
}

/// Redis's `scriptPrepareForRun`, for EVAL and FCALL alike, once the script or function
/// and the key count are known: a script that may write is refused while the log fails
/// (MISCONF) and by the *_RO commands; over `maxmemory`, one without `allow-oom` is
/// refused (`no-writes` implies it). Then the call, with what its flags allow.
pub(super) fn prepare_run(
    ctx: &mut Ctx,
    args: &Args,
    numkeys: usize,
    target: Target,
    flags: crate::scripting::ScriptFlags,
    read_only_command: bool,
) -> Action {
    if flags.declares_writes() {
        if let Some(error) = ctx.server.disk_error() {
            ctx.out.error(&error.script_message());
            return Action::None;
        }
        if read_only_command {
            ctx.out
                .error("ERR Can not execute a script with write flag using *_ro command.");
            return Action::None;
        }
    }
    if !flags.compat
        && !flags.allow_oom
        && !flags.no_writes
        && ctx.server.eviction.out_of_memory
        && ctx.server.config.memory_bytes_max != 0
    {
        ctx.out.error("OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'");
        return Action::None;
    }
    let head = match target {
        Target::Function(_) => args[..3].iter().map(|a| a.to_vec()).collect(),
        Target::Script(_) => Vec::new(),
    };
    Action::RunScript(Box::new(ScriptCall {
        target,
        head,
        keys: args[3..3 + numkeys].iter().map(|k| k.to_vec()).collect(),
        args: args[3 + numkeys..].iter().map(|a| a.to_vec()).collect(),
        read_only: read_only_command || (!flags.compat && flags.no_writes),
        allow_oom: !flags.compat && flags.allow_oom,
    }))
}

const SCRIPT_HELP: &[&str] = &[
    "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
    "HELP",
    "    Prints this help.",
];

fn script(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "help" | "kill" => args.len() == 2,
        "load" | "debug" => args.len() == 3,
        "exists" => args.len() >= 3,
        "flush" => args.len() >= 2,
        _ => {
            unknown_subcommand(ctx, "script", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        wrong_arity(ctx, &format!("script|{sub}"));
        return Action::None;
    }
    match sub.as_str() {
        "help" => {
            ctx.out.array(SCRIPT_HELP.len());
            for line in SCRIPT_HELP {
                ctx.out.simple(line);
            }
        }
        "load" => match ctx.server.scripting.load(args[2]) {
            Ok(sha) => ctx.out.bulk(&sha),
            Err(error) => ctx.out.error(&format!("ERR {error}")),
        },
        "exists" => {
            ctx.out.array(args.len() - 2);
            for sha in &args[2..] {
                let exists = ctx.server.scripting.exists(sha);
                ctx.out.integer(exists as i64);
            }
        }
        "flush" => {
            let mode_ok = match args.get(2) {
                None => true,
                Some(mode) => {
                    args.len() == 3
                        && (mode.eq_ignore_ascii_case(b"sync")
                            || mode.eq_ignore_ascii_case(b"async"))
                }
            };
            if !mode_ok {
                ctx.out
                    .error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                return Action::None;
            }
            // ASYNC frees at once too: the cache is small next to the dataset.
            ctx.server.scripting.flush();
            ctx.out.ok();
        }
        "kill" => {
            // A script runs to its end within one command: none is ever running while
            // another client is served.
            ctx.out.error("NOTBUSY No scripts in execution right now.");
        }
        _ => {
            // DEBUG: Tessera has no Lua debugger.
            ctx.out
                .error("ERR SCRIPT DEBUG is not supported: Tessera has no Lua debugger");
        }
    }
    Action::None
}
