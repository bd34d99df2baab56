//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms], as a Redis 7.0 master answers it
//! (`failoverCommand`): the arguments and preconditions checked in Redis's order, then the
//! writes held and the failover waiting for its target (`replication::failover`). The
//! loop takes it from there (`server::failover`); ABORT and the ends of a failover are
//! here, shared with it.

use super::flags::*;
use super::replication::{set_master, unset_master};
use super::{Action, Args, Ctx, ServerState};
use crate::command;
use crate::replication::failover::{self, Failover, FailoverState, Target};

pub fn commands() -> Vec<super::CommandSpec> {
    vec![command!(
        "failover",
        -1,
        ADMIN | NO_SCRIPT | STALE,
        (0, 0, 0),
        "server",
        "Start a coordinated failover between this server and one of its replicas.",
        failover_command
    )]
}

fn failover_command(ctx: &mut Ctx, args: &Args) -> Action {
    if args.len() == 2 && args[1].eq_ignore_ascii_case(b"abort") {
        if ctx.server.replication.failover.state == FailoverState::None {
            ctx.out.error(failover::NONE_IN_PROGRESS);
        } else {
            abort(
                ctx.server,
                "Failover manually aborted",
                ctx.effects.buffer.len(),
            );
            ctx.out.ok();
        }
        return Action::None;
    }
    let request = match failover::parse(&args[1..]) {
        Ok(request) => request,
        Err(message) => {
            ctx.out.error(message);
            return Action::None;
        }
    };
    let replication = &ctx.server.replication;
    if let Err(message) = failover::check_start(
        &replication.failover,
        replication.is_replica(),
        &replication.replicas,
        &request,
    ) {
        ctx.out.error(message);
        return Action::None;
    }
    match &request.target {
        Some(target) => tracing::info!("FAILOVER requested to {}:{}.", target.host, target.port),
        None => tracing::info!("FAILOVER requested to any replica."),
    }
    ctx.server.replication.failover = Failover {
        state: FailoverState::WaitingForSync,
        target: request.target,
        end_ms: request
            .timeout_ms
            .map(|timeout| crate::clock::unix_ms().saturating_add(timeout)),
        force: request.force,
    };
    ctx.server.pause.hold(crate::pause::Hold::Failover);
    ctx.out.ok();
    Action::None
}

/// The failover is over (done or aborted): writes go on (Redis's `clearFailoverState`).
pub fn clear(server: &mut ServerState) {
    server.replication.failover = Failover::default();
    server.pause.release(crate::pause::Hold::Failover);
}

/// Redis's `abortFailover`: a failover that already made this instance a replica makes
/// it a master again. `pending_effects`: the length of the turn's effects so far.
pub fn abort(server: &mut ServerState, reason: &str, pending_effects: usize) {
    let failover = &server.replication.failover;
    if failover.state == FailoverState::None {
        return;
    }
    tracing::info!("FAILOVER to {} aborted: {reason}", failover.target_name());
    if failover.state == FailoverState::InProgress {
        unset_master(server, pending_effects);
    }
    clear(server);
}

/// The target caught up (or FORCE at the timeout): this instance becomes its replica, and
/// its handshake will say `PSYNC … FAILOVER`. `pending_effects`: the length of the turn's
/// effects so far.
pub fn switch_to(server: &mut ServerState, target: &Target, forced: bool, pending_effects: usize) {
    let name = format!("{}:{}", target.host, target.port);
    if forced {
        tracing::info!("FAILOVER to {name} time out exceeded, failing over.");
    } else {
        tracing::info!("Failover target {name} is synced, failing over.");
    }
    let Ok(port) = u16::try_from(target.port) else {
        abort(
            server,
            "the target's port is not a TCP port",
            pending_effects,
        );
        return;
    };
    server.replication.failover.state = FailoverState::InProgress;
    set_master(server, &target.host, port, pending_effects);
}
