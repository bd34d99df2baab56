//! Pub/sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and PUBSUB's introspection.
//!
//! The subscriptions and the publishing are `crate::pubsub`'s; these handlers parse the
//! arguments and write the replies. PUBLISH changes no data, so nothing is logged (Redis
//! only sends it to replicas).

use super::{
    Action, Args, CommandSpec, Ctx, eq_ignore_case, lossy, unknown_subcommand, wrong_arity,
};
use crate::command;
use crate::pubsub::{Kind, PubSub, Subscriptions};

pub fn commands() -> Vec<CommandSpec> {
    use super::flags::*;
    vec![
        command!(
            "subscribe",
            -2,
            PUBSUB | NO_SCRIPT | LOADING | STALE,
            (0, 0, 0),
            "pubsub",
            "Listen for messages published to the given channels",
            subscribe
        ),
        command!(
            "unsubscribe",
            -1,
            PUBSUB | NO_SCRIPT | LOADING | STALE,
            (0, 0, 0),
            "pubsub",
            "Stop listening for messages posted to the given channels",
            unsubscribe
        ),
        command!(
            "psubscribe",
            -2,
            PUBSUB | NO_SCRIPT | LOADING | STALE,
            (0, 0, 0),
            "pubsub",
            "Listen for messages published to channels matching the given patterns",
            psubscribe
        ),
        command!(
            "punsubscribe",
            -1,
            PUBSUB | NO_SCRIPT | LOADING | STALE,
            (0, 0, 0),
            "pubsub",
            "Stop listening for messages posted to channels matching the given patterns",
            punsubscribe
        ),
        command!(
            "ssubscribe",
            -2,
            PUBSUB | NO_SCRIPT | LOADING | STALE,
            (1, -1, 1),
            "pubsub",
            "Listen for messages published to the given shard channels",
            ssubscribe
        ),
        command!(
            "sunsubscribe",
            -1,
            PUBSUB | NO_SCRIPT | LOADING | STALE,
            (1, -1, 1),
            "pubsub",
            "Stop listening for messages posted to the given shard channels",
            sunsubscribe
        ),
        command!(
            "publish",
            3,
            PUBSUB | LOADING | STALE | FAST,
            (0, 0, 0),
            "pubsub",
            "Post a message to a channel",
            publish
        ),
        command!(
            "spublish",
            3,
            PUBSUB | LOADING | STALE | FAST,
            (1, 1, 1),
            "pubsub",
            "Post a message to a shard channel",
            spublish
        ),
        command!(
            "pubsub",
            -2,
            0,
            (0, 0, 0),
            "pubsub",
            "A container for Pub/Sub commands",
            pubsub
        ),
    ]
}

/// SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE: one confirmation per name.
fn subscribe_each(ctx: &mut Ctx, kind: Kind, names: &Args) -> Action {
    let id = ctx.client.id;
    pushing(ctx, |pubsub, session, out| {
        for name in names {
            pubsub.subscribe(session, id, kind, name, out);
        }
    });
    Action::None
}

/// UNSUBSCRIBE / PUNSUBSCRIBE / SUNSUBSCRIBE: the names given, or every one of `kind`.
fn unsubscribe_each(ctx: &mut Ctx, kind: Kind, names: &Args) -> Action {
    let id = ctx.client.id;
    pushing(ctx, |pubsub, session, out| {
        if names.is_empty() {
            pubsub.unsubscribe_all(session, id, kind, out);
        }
        for name in names {
            pubsub.unsubscribe(session, id, kind, name, out);
        }
    });
    Action::None
}

/// Writes confirmations with `write`: into the reply, or, while CLIENT REPLY OFF or SKIP
/// silences it, aside (`SessionState::silenced_pushes`), since Redis sends pub/sub's
/// replies whatever CLIENT REPLY says, in RESP2 as in RESP3.
fn pushing(
    ctx: &mut Ctx,
    write: impl FnOnce(&mut PubSub, &mut Subscriptions, &mut crate::resp::ReplyWriter<'_>),
) {
    use crate::commands::ReplyMode;
    let session = &mut ctx.client.subscriptions;
    if matches!(ctx.client.modes.reply, ReplyMode::Off | ReplyMode::Skip) {
        let mut aside = std::mem::take(&mut ctx.client.silenced_pushes);
        let mut out = crate::resp::ReplyWriter::new(&mut aside, ctx.out.resp3);
        write(&mut ctx.server.pubsub, session, &mut out);
        ctx.client.silenced_pushes = aside;
    } else {
        write(&mut ctx.server.pubsub, session, &mut ctx.out);
    }
}

fn subscribe(ctx: &mut Ctx, args: &Args) -> Action {
    subscribe_each(ctx, Kind::Channel, &args[1..])
}

fn psubscribe(ctx: &mut Ctx, args: &Args) -> Action {
    subscribe_each(ctx, Kind::Pattern, &args[1..])
}

fn ssubscribe(ctx: &mut Ctx, args: &Args) -> Action {
    subscribe_each(ctx, Kind::Shard, &args[1..])
}

fn unsubscribe(ctx: &mut Ctx, args: &Args) -> Action {
    unsubscribe_each(ctx, Kind::Channel, &args[1..])
}

fn punsubscribe(ctx: &mut Ctx, args: &Args) -> Action {
    unsubscribe_each(ctx, Kind::Pattern, &args[1..])
}

fn sunsubscribe(ctx: &mut Ctx, args: &Args) -> Action {
    unsubscribe_each(ctx, Kind::Shard, &args[1..])
}

/// PUBLISH and SPUBLISH: the replicas get them too (Redis's `forceCommandPropagation`
/// to replicas only, without cluster support), never the log.
fn publish(ctx: &mut Ctx, args: &Args) -> Action {
    let receivers = ctx.publish(args[1], args[2], false);
    ctx.propagate_to_replicas(&[b"PUBLISH", args[1], args[2]]);
    ctx.out.integer(receivers as i64);
    Action::None
}

fn spublish(ctx: &mut Ctx, args: &Args) -> Action {
    let receivers = ctx.publish(args[1], args[2], true);
    ctx.propagate_to_replicas(&[b"SPUBLISH", args[1], args[2]]);
    ctx.out.integer(receivers as i64);
    Action::None
}

const PUBSUB_HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

/// PUBSUB CHANNELS / NUMSUB / NUMPAT / SHARDCHANNELS / SHARDNUMSUB / HELP, with the
/// arity errors Redis's subcommand table gives.
fn pubsub(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity_ok = match sub.as_str() {
        "numpat" | "help" => args.len() == 2,
        "channels" | "shardchannels" | "numsub" | "shardnumsub" => true,
        _ => {
            unknown_subcommand(ctx, "pubsub", args[1]);
            return Action::None;
        }
    };
    if !arity_ok {
        wrong_arity(ctx, &format!("pubsub|{sub}"));
        return Action::None;
    }
    match sub.as_str() {
        "channels" | "shardchannels" => {
            if args.len() > 3 {
                // Redis's handler takes at most a pattern.
                super::subcommand_syntax_error(ctx, args);
                return Action::None;
            }
            let shard = eq_ignore_case(args[1], "shardchannels");
            let pattern = args.get(2).copied();
            let names: Vec<_> = ctx
                .server
                .pubsub
                .active_channels(shard, pattern)
                .cloned()
                .collect();
            ctx.out.bulk_strings(names.iter());
        }
        "numsub" | "shardnumsub" => {
            let shard = sub == "shardnumsub";
            // A flat array in RESP3 too, as Redis 7.0 replies.
            ctx.out.array(2 * (args.len() - 2));
            for channel in &args[2..] {
                ctx.out.bulk(channel);
                let count = ctx.server.pubsub.subscriber_count(shard, channel);
                ctx.out.integer(count as i64);
            }
        }
        "numpat" => ctx.out.integer(ctx.server.pubsub.pattern_count() as i64),
        _ => {
            ctx.out.array(PUBSUB_HELP.len());
            for line in PUBSUB_HELP {
                ctx.out.simple(line);
            }
        }
    }
    Action::None
}
