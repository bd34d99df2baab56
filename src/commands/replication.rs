//! The replication commands, as a Redis 7.0 master answers them: PSYNC and SYNC (a
//! session asks for the stream and becomes a replica), REPLCONF (what a replica says of
//! itself, and its acknowledgements), WAIT, WAITAOF (Redis 7.2's), ROLE.
//!
//! The protocol's state is `crate::replication`; the handlers decide (`+CONTINUE` from
//! the backlog, or a full sync) and record, and the event loop attaches the socket
//! (`Action::Replicate`) and parks WAIT's clients (`Action::Block`).

use super::blocking::Blocked;
use super::flags::*;
use super::{Action, Args, Ctx, NOT_INTEGER, SYNTAX_ERROR, ServerState, eq_ignore_case, lossy};
use crate::command;
use crate::replication::failover::FailoverState;
use crate::replication::full_sync;
use crate::replication::master::{
    Announced, Attach, FullSyncReason, Replica, ReplicaState, replica_name,
};
use crate::replication::wait::{self, LocalFsync, WaitFor};

pub fn commands() -> Vec<super::CommandSpec> {
    vec![
        command!(
            "psync",
            -3,
            ADMIN | NO_SCRIPT | NO_MULTI,
            (0, 0, 0),
            "server",
            "Internal command used for replication",
            psync
        ),
        command!(
            "sync",
            1,
            ADMIN | NO_SCRIPT | NO_MULTI,
            (0, 0, 0),
            "server",
            "Internal command used for replication",
            sync
        ),
        command!(
            "replconf",
            -1,
            ADMIN | NO_SCRIPT | LOADING | STALE,
            (0, 0, 0),
            "server",
            "An internal command for configuring the replication stream",
            replconf
        ),
        command!(
            "wait",
            3,
            NO_SCRIPT,
            (0, 0, 0),
            "generic",
            "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
            wait
        ),
        command!(
            "waitaof",
            4,
            NO_SCRIPT,
            (0, 0, 0),
            "generic",
            "Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.",
            waitaof
        ),
        command!(
            "replicaof",
            3,
            ADMIN | NO_SCRIPT | STALE,
            (0, 0, 0),
            "server",
            "Make the server a replica of another instance, or promote it as master.",
            replicaof
        ),
        command!(
            "slaveof",
            3,
            ADMIN | NO_SCRIPT | STALE,
            (0, 0, 0),
            "server",
            "Make the server a replica of another instance, or promote it as master.",
            replicaof
        ),
        command!(
            "role",
            1,
            NO_SCRIPT | LOADING | STALE | FAST,
            (0, 0, 0),
            "server",
            "Return the role of the instance in the context of replication",
            role
        ),
    ]
}

/// Redis's `NET_HOST_STR_LEN`: an announced address must be shorter.
const ANNOUNCED_ADDRESS_BYTES_MAX: usize = 256;

fn psync(ctx: &mut Ctx, args: &Args) -> Action {
    synchronise(ctx, args, true)
}

fn sync(ctx: &mut Ctx, args: &Args) -> Action {
    synchronise(ctx, args, false)
}

/// The address a replica is listed under and named by in the log.
fn peer_ip(ctx: &Ctx) -> String {
    ctx.host
        .client_addresses()
        .and_then(|(peer, _)| peer.ip())
        .map_or_else(String::new, |ip| ip.to_string())
}

/// PSYNC replid offset / SYNC (Redis's `syncCommand`).
fn synchronise(ctx: &mut Ctx, args: &Args, psync: bool) -> Action {
    // A replica or a monitor asking again is ignored, without a reply.
    if ctx.client.replica || ctx.client.modes.monitor {
        return Action::None;
    }
    if psync
        && args.len() > 3
        && eq_ignore_case(args[3], "failover")
        && !promote_on_failover(ctx, args)
    {
        return Action::None;
    }
    // A master failing over serves no replica (it is about to be one).
    if ctx.server.replication.failover.state != FailoverState::None {
        ctx.out.error("NOMASTERLINK Can't SYNC while failing over");
        return Action::None;
    }
    // A replica serves replicas of its own (chains) while its link is up: its history,
    // offsets and backlog are its master's.
    if let Some(link) = &ctx.server.replication.master
        && link.state != crate::replication::replica::LinkState::Connected
    {
        ctx.out
            .error("NOMASTERLINK Can't SYNC while not connected with my master");
        return Action::None;
    }
    // The stream goes into the session's output: replies still unsent would precede it.
    if !ctx.out.buf.is_empty() {
        ctx.out
            .error("ERR SYNC and PSYNC are invalid with pending output");
        return Action::None;
    }
    let announced = ctx.client.replconf.as_deref().cloned().unwrap_or_default();
    if announced.rdb_filter.is_some() && !announced.capa_eof {
        ctx.out
            .error("ERR Filtered replica requires EOF capability");
        return Action::None;
    }
    let ip = match &announced.ip_address {
        Some(address) => address.clone(),
        None => peer_ip(ctx),
    };
    let id = ctx.client.id;
    let name = replica_name(&ip, &announced, id);
    tracing::info!("Replica {name} asks for synchronization");
    if psync {
        let Some(offset) = crate::resp::parse_i64(args[2]) else {
            tracing::warn!("Replica {name} asks for synchronization but with a wrong offset");
            ctx.out.error(NOT_INTEGER);
            return Action::None;
        };
        let replication = &ctx.server.replication;
        let decision = crate::replication::master::try_partial(
            &replication.ids,
            replication.backlog.as_ref(),
            replication.offset,
            args[1],
            offset,
        );
        match decision {
            Ok(()) => return continue_from_backlog(ctx, ip, announced, offset, &name),
            Err(reason) => {
                log_full_sync_reason(&reason, &name, &replication.ids);
                if reason != FullSyncReason::Requested {
                    ctx.server.replication.stats.sync_partial_err += 1;
                }
            }
        }
    }
    let backlog_bytes = ctx.server.config.replication.backlog_bytes;
    become_replica(ctx);
    let replication = &mut ctx.server.replication;
    replication.stats.sync_full += 1;
    replication
        .replicas
        .add(Replica::new(id, ip, announced, !psync));
    replication.ensure_backlog(backlog_bytes);
    Action::Replicate(Attach::FullSync)
}

/// `PSYNC <replid> <offset> FAILOVER`: the master this replica follows hands it its role
/// (its FAILOVER). It becomes a master, as with REPLICAOF NO ONE, and the PSYNC goes on
/// as one asked of a master. Returns false when refused (the error is the reply).
fn promote_on_failover(ctx: &mut Ctx, args: &Args) -> bool {
    tracing::warn!("Failover request received for replid {}.", lossy(args[1]));
    if !ctx.server.replication.is_replica() {
        ctx.out
            .error("ERR PSYNC FAILOVER can't be sent to a master.");
        return false;
    }
    if !args[1].eq_ignore_ascii_case(ctx.server.replication.ids.replid.as_bytes()) {
        ctx.out
            .error("ERR PSYNC FAILOVER replid must match my replid.");
        return false;
    }
    let who = ctx
        .host
        .describe_client(ctx.client, "psync", &ctx.server.tracking);
    unset_master(ctx.server, ctx.effects.buffer.len());
    tracing::info!("MASTER MODE enabled (failover request from '{who}')");
    true
}

/// The session's output is the stream from now on: CLIENT REPLY no longer applies (Redis
/// writes `+CONTINUE` and `+FULLRESYNC` past it, straight to the socket).
fn become_replica(ctx: &mut Ctx) {
    ctx.client.replica = true;
    ctx.client.modes.reply = super::ReplyMode::On;
}

fn log_full_sync_reason(
    reason: &FullSyncReason,
    name: &str,
    ids: &crate::replication::ids::ReplicationIds,
) {
    match reason {
        FullSyncReason::Requested => tracing::info!("Full resync requested by replica {name}"),
        FullSyncReason::OtherHistory { asked } => tracing::info!(
            "Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{asked}', my replication IDs are '{}' and '{}')",
            ids.replid,
            ids.replid2
        ),
        FullSyncReason::PastSecondId { asked_offset } => tracing::info!(
            "Partial resynchronization not accepted: Requested offset for second ID was {asked_offset}, but I can reply up to {}",
            ids.second_offset
        ),
        FullSyncReason::NoBacklog {
            asked_offset,
            ahead,
        } => {
            tracing::info!(
                "Unable to partial resync with replica {name} for lack of backlog (Replica request was: {asked_offset})."
            );
            if *ahead {
                tracing::warn!(
                    "Warning: replica {name} tried to PSYNC with an offset that is greater than the master replication offset."
                );
            }
        }
    }
}

/// `+CONTINUE`, then the backlog from `offset` on, in the reply; the session is an
/// online replica from now on.
fn continue_from_backlog(
    ctx: &mut Ctx,
    ip: String,
    announced: Announced,
    offset: i64,
    name: &str,
) -> Action {
    let id = ctx.client.id;
    let now = crate::clock::unix_seconds();
    let quorum = ctx.server.config.replication.write_quorum();
    let replication = &mut ctx.server.replication;
    let psync2 = announced.capa_psync2;
    let mut replica = Replica::new(id, ip, announced, false);
    replica.state = ReplicaState::Online;
    replica.ack_time = now;
    replication.replicas.add(replica);
    replication.stats.sync_partial_ok += 1;
    let out = &mut *ctx.out.buf;
    out.extend_from_slice(&full_sync::continue_line(&replication.ids.replid, psync2));
    // The missed bytes go from the shared buffer, after the line.
    let backlog = replication.backlog.as_mut().expect("try_partial found one");
    let added = backlog.add_reader(id, offset as u64);
    assert!(added, "try_partial checked the offset");
    tracing::info!(
        "Partial resynchronization request from {name} accepted. Sending {} bytes of backlog starting from offset {offset}.",
        backlog.pending_bytes(id)
    );
    replication.replicas.refresh_good(quorum, now);
    become_replica(ctx);
    Action::Replicate(Attach::Continued)
}

/// REPLCONF <option> <value> ... (Redis's `replconfCommand`, a master's side).
fn replconf(ctx: &mut Ctx, args: &Args) -> Action {
    if args.len().is_multiple_of(2) {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let mut announced = ctx.client.replconf.as_deref().cloned().unwrap_or_default();
    for (index, pair) in args[1..].chunks(2).enumerate() {
        let (option, value) = (pair[0], pair[1]);
        if eq_ignore_case(option, "listening-port") {
            let Some(port) = crate::resp::parse_i64(value) else {
                ctx.out.error(NOT_INTEGER);
                return Action::None;
            };
            announced.listening_port = port;
        } else if eq_ignore_case(option, "ip-address") {
            if value.len() >= ANNOUNCED_ADDRESS_BYTES_MAX {
                ctx.out.error(&format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                ));
                return Action::None;
            }
            announced.ip_address = Some(lossy(value));
        } else if eq_ignore_case(option, "capa") {
            // Capabilities this master does not know are ignored.
            if eq_ignore_case(value, "eof") {
                announced.capa_eof = true;
            } else if eq_ignore_case(value, "psync2") {
                announced.capa_psync2 = true;
            }
        } else if eq_ignore_case(option, "ack") {
            // A replica's acknowledgement: no reply, whatever it says.
            if ctx.client.replica
                && let Some(offset) = crate::resp::parse_i64(value)
            {
                let now = crate::clock::unix_seconds();
                let replicas = &mut ctx.server.replication.replicas;
                // The offset counts even if a FACK after it is malformed (Redis 7.2
                // records it before reading the FACK).
                replicas.acknowledge(ctx.client.id, offset, now);
                // Redis 7.2's `ACK <offset> FACK <offset>`: what the replica's log fsynced.
                let fack = args.get(1 + 2 * index + 2..1 + 2 * index + 4);
                if let Some(&[word, fsynced]) = fack
                    && eq_ignore_case(word, "fack")
                    && let Some(fsynced) = crate::resp::parse_i64(fsynced)
                {
                    replicas.acknowledge_fsynced(ctx.client.id, fsynced);
                }
            }
            return Action::None;
        } else if eq_ignore_case(option, "getack") {
            // Asked of a replica by its master: the acknowledgement goes out after this
            // command (`server::master_link`); anyone else gets nothing.
            if ctx.client.master_link
                && let Some(link) = &mut ctx.server.replication.master
            {
                link.ack_requested = true;
            }
            return Action::None;
        } else if eq_ignore_case(option, "rdb-only") {
            match crate::resp::parse_i64(value) {
                Some(flag @ (0 | 1)) => announced.rdb_only = flag == 1,
                Some(_) => {
                    ctx.out
                        .error("ERR value is out of range, value must between 0 and 1");
                    return Action::None;
                }
                None => {
                    ctx.out.error(NOT_INTEGER);
                    return Action::None;
                }
            }
        } else if eq_ignore_case(option, "rdb-filter-only") {
            let Some(filters) = crate::resp::split_args(value) else {
                ctx.out.error("ERR Missing rdb-filter-only values");
                return Action::None;
            };
            if let Some(unknown) = filters.iter().find(|f| !eq_ignore_case(f, "functions")) {
                ctx.out.error(&format!(
                    "ERR Unsupported rdb-filter-only option: {}",
                    lossy(unknown)
                ));
                return Action::None;
            }
            // No filter at all is an empty snapshot (`redis-cli --replica`).
            announced.rdb_filter = Some(!filters.is_empty());
        } else {
            ctx.out.error(&format!(
                "ERR Unrecognized REPLCONF option: {}",
                lossy(option)
            ));
            return Action::None;
        }
    }
    if let Some(replica) = ctx.server.replication.replicas.get_mut(ctx.client.id) {
        if let Some(address) = &announced.ip_address {
            replica.ip = address.clone();
        }
        replica.announced = announced.clone();
    }
    ctx.client.replconf = Some(Box::new(announced));
    ctx.out.ok();
    Action::None
}

/// WAIT numreplicas timeout (Redis's `waitCommand`).
fn wait(ctx: &mut Ctx, args: &Args) -> Action {
    if ctx.server.replication.is_replica() {
        ctx.out.error(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated.",
        );
        return Action::None;
    }
    let (replicas, timeout_ms) = match wait::parse_arguments(args[1], args[2]) {
        Ok(parsed) => parsed,
        Err(message) => {
            ctx.out.error(message);
            return Action::None;
        }
    };
    let wait_for = WaitFor {
        offset: ctx.client.write_offset,
        replicas,
        aof: None,
    };
    park_until_acknowledged(ctx, args, wait_for, timeout_ms)
}

/// WAITAOF numlocal numreplicas timeout (Redis 7.2's `waitaofCommand`): the client's
/// last write fsynced by this instance's log (numlocal 1) and by the logs of that many
/// replicas; answered with the two counts.
fn waitaof(ctx: &mut Ctx, args: &Args) -> Action {
    let (local, replicas, timeout_ms) = match wait::parse_aof_arguments(args[1], args[2], args[3]) {
        Ok(parsed) => parsed,
        Err(message) => {
            ctx.out.error(message);
            return Action::None;
        }
    };
    if ctx.server.replication.is_replica() {
        ctx.out.error(
            "ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.",
        );
        return Action::None;
    }
    if local && !ctx.server.config.appendonly {
        ctx.out
            .error("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
        return Action::None;
    }
    let wait_for = WaitFor {
        offset: ctx.client.write_offset,
        replicas,
        aof: Some(LocalFsync {
            required: local,
            records: ctx.client.write_record,
        }),
    };
    park_until_acknowledged(ctx, args, wait_for, timeout_ms)
}

/// Answers at once when the wait is already over, or inside EXEC (nothing blocks there);
/// otherwise parks the client and asks the replicas for their offsets at the end of the
/// turn.
fn park_until_acknowledged(
    ctx: &mut Ctx,
    args: &Args,
    wait_for: WaitFor,
    timeout_ms: i64,
) -> Action {
    let in_exec = ctx.in_exec();
    let replication = &mut ctx.server.replication;
    let now = wait_for.reply_now(replication);
    if in_exec || wait_for.is_done(now) {
        now.write(&mut ctx.out);
        return Action::None;
    }
    replication.waiting.add(ctx.client.id, wait_for);
    replication.ack_requested = true;
    Action::Block(Blocked {
        db: ctx.client.db,
        keys: Vec::new(),
        deadline_ms: (timeout_ms > 0).then(|| ctx.now_ms.saturating_add(timeout_ms)),
        command: args.iter().map(|a| a.to_vec()).collect(),
        replicas: Some(wait_for),
    })
}

/// ROLE: a master's form — `master`, the offset, each online replica's address,
/// listening port and acknowledged offset — or a replica's — `slave`, its master's host
/// and port, the link's state, the offset processed (-1 while not connected).
fn role(ctx: &mut Ctx, _args: &Args) -> Action {
    let replication = &ctx.server.replication;
    if let Some(link) = &replication.master {
        ctx.out.array(5);
        ctx.out.bulk(b"slave");
        ctx.out.bulk(link.host.as_bytes());
        ctx.out.integer(i64::from(link.port));
        ctx.out.bulk(link.state.role_name().as_bytes());
        ctx.out.integer(
            if link.state == crate::replication::replica::LinkState::Connected {
                link.processed_offset()
            } else {
                -1
            },
        );
        return Action::None;
    }
    let online: Vec<&Replica> = replication
        .replicas
        .iter()
        .filter(|r| r.state == ReplicaState::Online)
        .collect();
    ctx.out.array(3);
    ctx.out.bulk(b"master");
    ctx.out.integer(replication.offset as i64);
    ctx.out.array(online.len());
    for replica in online {
        ctx.out.array(3);
        ctx.out.bulk(replica.ip.as_bytes());
        ctx.out
            .bulk(replica.announced.listening_port.to_string().as_bytes());
        ctx.out.bulk(replica.ack_offset.to_string().as_bytes());
    }
    Action::None
}

/// REPLICAOF host port / REPLICAOF NO ONE (and SLAVEOF; Redis's `replicaofCommand`).
fn replicaof(ctx: &mut Ctx, args: &Args) -> Action {
    if ctx.client.replica {
        ctx.out
            .error("ERR Command is not valid when client is a replica.");
        return Action::None;
    }
    if ctx.server.replication.failover.state != FailoverState::None {
        ctx.out
            .error("ERR REPLICAOF not allowed while failing over.");
        return Action::None;
    }
    // One role change per turn of the event loop: the turn's records are split once, at
    // the change (`Replication::role_changed_at`), between the stream and the log alone;
    // a second change in the same turn (pipelined, or in one MULTI) would misplace the
    // records made between the two.
    let no_one = eq_ignore_case(args[1], "no") && eq_ignore_case(args[2], "one");
    let changes_role = no_one == ctx.server.replication.is_replica();
    if changes_role && ctx.server.replication.role_changed_at.is_some() {
        ctx.out.error(
            "ERR REPLICAOF: the role already changed in this turn of the event loop; send it again",
        );
        return Action::None;
    }
    let who = ctx
        .host
        .describe_client(ctx.client, "replicaof", &ctx.server.tracking);
    if no_one {
        if unset_master(ctx.server, ctx.effects.buffer.len()) {
            tracing::warn!("MASTER MODE enabled (user request from '{who}')");
        }
        ctx.out.ok();
        return Action::None;
    }
    let replication = &mut ctx.server.replication;
    let Some(port) = crate::resp::parse_i64(args[2]).and_then(|p| u16::try_from(p).ok()) else {
        ctx.out.error("ERR Invalid master port");
        return Action::None;
    };
    let host = lossy(args[1]);
    if let Some(link) = &replication.master
        && link.host.eq_ignore_ascii_case(&host)
        && link.port == port
    {
        tracing::info!(
            "REPLICAOF would result into synchronization with the master we are already connected with. No operation performed."
        );
        ctx.out.simple("OK Already connected to specified master");
        return Action::None;
    }
    set_master(ctx.server, &host, port, ctx.effects.buffer.len());
    tracing::info!("REPLICAOF {host}:{port} enabled (user request from '{who}')");
    ctx.out.ok();
    Action::None
}

/// Makes this instance a replica of `host:port` (Redis's `replicationSetMaster`, for
/// REPLICAOF and FAILOVER); the loop connects at the end of the turn. `pending_effects`:
/// the length of the turn's effects so far (the records made in the old role).
pub(super) fn set_master(server: &mut ServerState, host: &str, port: u16, pending_effects: usize) {
    let replication = &mut server.replication;
    // Another master's stream goes on in the database the old one's was in, as Redis's
    // cached master keeps its database (a master turning replica starts at 0, as Redis's
    // cached master made from itself does).
    let stream_db = replication.master.as_ref().map_or(0, |link| link.stream_db);
    let history = match &replication.master {
        // Another master: the history followed so far may go on with it (PSYNC2).
        Some(link) => link.history.clone(),
        // Redis's `replicationCacheMasterUsingMyself`: this master's own history — with
        // this turn's records still to go to its stream, as a master's.
        None => {
            // Measured before the split: every record so far is a master's.
            let offset = replication.offset_after(pending_effects);
            replication.role_changed_at = Some(pending_effects);
            Some((replication.ids.replid.clone(), offset))
        }
    };
    // INFO's `master_link_down_since_seconds` (Sentinel skips a replica whose link is down
    // too long): from when a connected link is dropped for the new master, kept from a
    // link that was already down, and none (-1) for a master turning replica, as Redis.
    let down_since = replication
        .master
        .as_ref()
        .and_then(|link| match link.state {
            crate::replication::replica::LinkState::Connected => Some(crate::clock::unix_seconds()),
            _ => link.down_since,
        });
    let mut link = crate::replication::replica::MasterLink::new(host.to_string(), port, history);
    link.down_since = down_since;
    link.stream_db = stream_db;
    replication.master = Some(link);
    server.config.set_replicaof(Some((host, port)));
    replication.link_changed = true;
}

/// Makes this replica a master (Redis's `replicationUnsetMaster`, for REPLICAOF NO ONE,
/// an aborted FAILOVER and PSYNC FAILOVER). Returns false if it was one already.
/// `pending_effects`: the length of the turn's effects so far (the records made as a
/// replica, which its stream does not carry).
pub(super) fn unset_master(server: &mut ServerState, pending_effects: usize) -> bool {
    let replication = &mut server.replication;
    let Some(link) = replication.master.take() else {
        return false;
    };
    // The history goes on under a new ID, the old one valid up to here (PSYNC2), so that
    // its siblings can continue.
    let offset = link.processed_offset();
    replication.ids.shift(offset);
    replication.offset = offset.max(0) as u64;
    replication.role_changed_at = Some(pending_effects);
    replication.replicas_at_promotion = replication.replicas.iter().map(|r| r.client_id).collect();
    server.config.set_replicaof(None);
    replication.link_changed = true;
    true
}
