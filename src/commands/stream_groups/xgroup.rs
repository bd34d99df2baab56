//! XGROUP: CREATE [MKSTREAM] [ENTRIESREAD], SETID [ENTRIESREAD], DESTROY, CREATECONSUMER,
//! DELCONSUMER, HELP — Redis 7.0's `xgroupCommand`: options first, then the key (a write
//! lookup), then the group, then the subcommand.

use super::{c_text, entries_read_number, id_arg, id_text, subcommand_syntax_error};
use crate::commands::{
    Action, Args, Ctx, EventClass, NOT_INTEGER, ReplyShows, eq_ignore_case, lossy,
    unknown_subcommand,
};
use crate::keyspace::Value;
use crate::types::Stream;
use crate::types::stream_groups::Group;
use crate::types::stream_id::StreamId;

const HELP: &[&str] = &[
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sub {
    Create,
    SetId,
    Destroy,
    CreateConsumer,
    DelConsumer,
    Help,
}

pub(super) fn xgroup(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = match lossy(args[1]).to_ascii_lowercase().as_str() {
        "create" => Sub::Create,
        "setid" => Sub::SetId,
        "destroy" => Sub::Destroy,
        "createconsumer" => Sub::CreateConsumer,
        "delconsumer" => Sub::DelConsumer,
        "help" => Sub::Help,
        _ => {
            unknown_subcommand(ctx, "xgroup", args[1]);
            return Action::None;
        }
    };
    if sub == Sub::Help {
        ctx.out.array(HELP.len());
        for line in HELP {
            ctx.out.simple(line);
        }
        return Action::None;
    }
    if args.len() < 4 {
        // The engine checks each subcommand's arity; a replayed record is never short.
        subcommand_syntax_error(ctx, args);
        return Action::None;
    }
    // What the subcommand changes is logged: its reply waits for the log as a write's.
    ctx.client.reply_shows = ctx.client.reply_shows.max(ReplyShows::Writes);
    let (key, name) = (args[2], args[3]);

    let mut mkstream = false;
    let mut entries_read: i64 = -1;
    let mut i = 5;
    while i < args.len() {
        if sub == Sub::Create && eq_ignore_case(args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if matches!(sub, Sub::Create | Sub::SetId)
            && eq_ignore_case(args[i], "entriesread")
            && i + 1 < args.len()
        {
            let Some(value) = crate::resp::parse_i64(args[i + 1]) else {
                ctx.out.error(NOT_INTEGER);
                return Action::None;
            };
            if value < 0 && value != -1 {
                ctx.out
                    .error("ERR value for ENTRIESREAD must be positive or -1");
                return Action::None;
            }
            entries_read = value;
            i += 2;
        } else {
            subcommand_syntax_error(ctx, args);
            return Action::None;
        }
    }
    let entries_read = u64::try_from(entries_read).ok();

    // A write lookup: no keyspace hit or miss is counted.
    let exists = match ctx.lookup(key).map(|entry| &entry.value) {
        None => false,
        Some(Value::Stream(_, _)) => true,
        Some(_) => {
            ctx.wrong_type();
            return Action::None;
        }
    };
    let group_exists = exists && stream_of(ctx, key).groups.get(name).is_some();
    if !mkstream {
        if !exists {
            ctx.out.error(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE \
                 you may want to use the MKSTREAM option to create an empty stream \
                 automatically.",
            );
            return Action::None;
        }
        if !group_exists && matches!(sub, Sub::SetId | Sub::CreateConsumer | Sub::DelConsumer) {
            ctx.out.error(&format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                c_text(name),
                c_text(key)
            ));
            return Action::None;
        }
    }

    let argc = args.len();
    match sub {
        Sub::Create if (5..=8).contains(&argc) => {
            create(ctx, args, exists, entries_read);
        }
        Sub::SetId if argc == 5 || argc == 7 => {
            let id = if args[4] == b"$" {
                stream_of(ctx, key).last_id()
            } else {
                match id_arg(args[4], 0, false) {
                    Some(id) => id,
                    None => {
                        ctx.out.error(super::INVALID_ID);
                        return Action::None;
                    }
                }
            };
            let stream = write_stream(ctx, key);
            let group = stream.groups.get_mut(name).expect("checked above");
            group.set_position(id, entries_read);
            ctx.out.ok();
            super::propagate_position(ctx, key, name, id, entries_read);
            ctx.notify(EventClass::Stream, "xgroup-setid", key);
        }
        Sub::Destroy if argc == 4 => {
            if group_exists {
                write_stream(ctx, key).groups.destroy(name);
                ctx.out.integer(1);
                ctx.propagate_unsignalled(&[b"XGROUP", b"DESTROY", key, name]);
                // Clients blocked on the group are woken to be told it is gone (WATCH is
                // not touched: Redis signals the key as ready only).
                ctx.signal_ready(key);
                ctx.notify(EventClass::Stream, "xgroup-destroy", key);
            } else {
                ctx.out.integer(0);
            }
        }
        Sub::CreateConsumer if argc == 5 => {
            let now = ctx.now_ms;
            let group = write_stream(ctx, key)
                .groups
                .get_mut(name)
                .expect("checked above");
            let created = group.create_consumer(args[4], now);
            ctx.out.integer(created as i64);
            if created {
                super::propagate_consumer(ctx, key, name, args[4]);
                ctx.notify(EventClass::Stream, "xgroup-createconsumer", key);
            }
        }
        Sub::DelConsumer if argc == 5 => {
            let group = write_stream(ctx, key)
                .groups
                .get_mut(name)
                .expect("checked above");
            match group.delete_consumer(args[4]) {
                Some(pending) => {
                    ctx.out.integer(pending as i64);
                    ctx.propagate_unsignalled(&[b"XGROUP", b"DELCONSUMER", key, name, args[4]]);
                    ctx.notify(EventClass::Stream, "xgroup-delconsumer", key);
                }
                None => ctx.out.integer(0),
            }
        }
        _ => subcommand_syntax_error(ctx, args),
    }
    Action::None
}

/// XGROUP CREATE, its options parsed and the key checked.
fn create(ctx: &mut Ctx, args: &Args, exists: bool, entries_read: Option<u64>) {
    let (key, name) = (args[2], args[3]);
    let id = if args[4] == b"$" {
        if exists {
            stream_of(ctx, key).last_id()
        } else {
            StreamId::MIN
        }
    } else {
        match id_arg(args[4], 0, true) {
            Some(id) => id,
            None => {
                ctx.out.error(super::INVALID_ID);
                return;
            }
        }
    };
    // MKSTREAM: only now that the command can no longer fail.
    let created_stream = !exists;
    let stream = if created_stream {
        ctx.write_or_create::<Stream>(key)
            .expect("absent, so no type to be wrong")
    } else {
        write_stream(ctx, key)
    };
    if !stream.groups.create(name, Group::new(id, entries_read)) {
        ctx.out
            .error("BUSYGROUP Consumer Group name already exists");
        return;
    }
    ctx.out.ok();
    let id = id_text(id);
    let mut record: Vec<&[u8]> = vec![b"XGROUP", b"CREATE", key, name, &id];
    if created_stream {
        record.push(b"MKSTREAM");
    }
    let read = entries_read_number(entries_read).to_string();
    if entries_read.is_some() {
        record.extend([&b"ENTRIESREAD"[..], read.as_bytes()]);
    }
    if created_stream {
        // A new key (Redis's `dbAdd`): WATCH, tracking and blocked clients are told.
        ctx.propagate(&record);
    } else {
        ctx.propagate_unsignalled(&record);
    }
    ctx.notify(EventClass::Stream, "xgroup-create", key);
}

/// The stream at `key`, known to be there.
fn stream_of<'c>(ctx: &'c mut Ctx, key: &[u8]) -> &'c Stream {
    match &ctx.db().get(key).expect("looked up above").value {
        Value::Stream(stream, _) => stream,
        _ => unreachable!("checked to be a stream"),
    }
}

/// The stream at `key`, known to be there, for changing.
fn write_stream<'c>(ctx: &'c mut Ctx, key: &[u8]) -> &'c mut Stream {
    ctx.write::<Stream>(key)
        .ok()
        .flatten()
        .expect("checked to be a stream")
}
