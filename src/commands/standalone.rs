//! What a Redis 7.0 with cluster support disabled and no module loaded answers — Tessera
//! is one: CLUSTER (every subcommand), READONLY, READWRITE, ASKING, and MODULE (LIST
//! empty; LOAD, LOADEX, UNLOAD refused, behind `enable-module-command` as in Redis, and
//! refused even when allowed, since Tessera cannot load Redis modules). Cluster clients
//! probe these to tell a standalone server from a cluster node.

use super::flags::*;
use super::{Action, Args, CommandSpec, Ctx, lossy, unknown_subcommand};
use crate::command;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "cluster",
            -2,
            0,
            (0, 0, 0),
            "cluster",
            "A container for cluster commands",
            cluster
        ),
        command!(
            "readonly",
            1,
            LOADING | STALE | FAST,
            (0, 0, 0),
            "cluster",
            "Enables read queries for a connection to a cluster replica node",
            cluster_disabled
        ),
        command!(
            "readwrite",
            1,
            LOADING | STALE | FAST,
            (0, 0, 0),
            "cluster",
            "Disables read queries for a connection to a cluster replica node",
            cluster_disabled
        ),
        command!(
            "asking",
            1,
            FAST,
            (0, 0, 0),
            "cluster",
            "Sent by cluster clients after an -ASK redirect",
            cluster_disabled
        ),
        command!(
            "module",
            -2,
            0,
            (0, 0, 0),
            "server",
            "A container for module commands",
            module
        ),
    ]
}

const CLUSTER_DISABLED: &str = "ERR This instance has cluster support disabled";

/// Redis 7.0's CLUSTER subcommands: each answers that cluster support is disabled; any
/// other name is an unknown subcommand.
const CLUSTER_SUBCOMMANDS: &[&str] = &[
    "addslots",
    "addslotsrange",
    "bumpepoch",
    "count-failure-reports",
    "countkeysinslot",
    "delslots",
    "delslotsrange",
    "failover",
    "flushslots",
    "forget",
    "getkeysinslot",
    "help",
    "info",
    "keyslot",
    "links",
    "meet",
    "myid",
    "nodes",
    "replicas",
    "replicate",
    "reset",
    "saveconfig",
    "set-config-epoch",
    "setslot",
    "shards",
    "slaves",
    "slots",
];

fn cluster(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    if CLUSTER_SUBCOMMANDS.contains(&sub.as_str()) {
        ctx.out.error(CLUSTER_DISABLED);
    } else {
        unknown_subcommand(ctx, "cluster", args[1]);
    }
    Action::None
}

fn cluster_disabled(ctx: &mut Ctx, _args: &Args) -> Action {
    ctx.out.error(CLUSTER_DISABLED);
    Action::None
}

const MODULE_HELP: &[&str] = &[
    "MODULE <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST",
    "    Return a list of loaded modules.",
    "LOAD <path> [<arg> ...]",
    "    Load a module library from <path>, passing to it any optional arguments.",
    "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
    "    Load a module library from <path>, while passing it module configurations and optional arguments.",
    "UNLOAD <name>",
    "    Unload a module.",
    "HELP",
    "    Prints this help.",
];

const MODULE_NOT_ALLOWED: &str = "ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

fn module(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    // Redis's arities: LOAD -3, LOADEX -3, UNLOAD 3, LIST 2, HELP 2.
    let arity_ok = match sub.as_str() {
        "load" | "loadex" => args.len() >= 3,
        "unload" => args.len() == 3,
        "list" | "help" => args.len() == 2,
        _ => {
            unknown_subcommand(ctx, "module", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        super::wrong_arity(ctx, &format!("module|{sub}"));
        return Action::None;
    }
    match sub.as_str() {
        "list" => ctx.out.array(0),
        "help" => {
            ctx.out.array(MODULE_HELP.len());
            for line in MODULE_HELP {
                ctx.out.simple(line);
            }
        }
        _ if !ctx
            .server
            .config
            .enable_module_command
            .allows(ctx.client.local) =>
        {
            ctx.out.error(MODULE_NOT_ALLOWED)
        }
        "unload" => ctx
            .out
            .error("ERR Error unloading module: no such module with that name"),
        _ => {
            tracing::warn!("MODULE {sub}: Tessera does not load Redis modules");
            ctx.out
                .error("ERR Error loading the extension. Please check the server logs.");
        }
    }
    Action::None
}
