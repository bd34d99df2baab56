//! A FAILOVER's turns on the master (Redis's `updateFailoverStatus`, which runs before
//! each sleep): while it waits, each turn asks whether the target has acknowledged the
//! whole stream (acknowledgements read this turn count) or the timeout passed, and
//! switches this instance to the target's replica, or aborts. The rest of the protocol
//! is `replication::failover`; the handshake's `PSYNC … FAILOVER` and its answer are the
//! master link's (`server::master_link`).

use super::Server;
use crate::replication::failover::{FailoverState, Step};

impl Server {
    /// Each turn, before the role change is acted on: the next step of a waiting failover.
    pub(super) fn failover_work(&mut self) {
        if self.engine.state.replication.failover.state != FailoverState::WaitingForSync {
            return;
        }
        // Every record so far counts in the offset the target must have acknowledged.
        self.take_effects();
        let pending_effects = self.engine.effects.buffer.len();
        let state = &mut self.engine.state;
        let replication = &mut state.replication;
        let offset = replication.offset as i64;
        let step =
            replication
                .failover
                .step(crate::clock::unix_ms(), &replication.replicas, offset);
        match step {
            Step::Wait => {}
            Step::Abort(reason) => crate::commands::failover::abort(state, reason, pending_effects),
            Step::SwitchTo { target, forced } => {
                crate::commands::failover::switch_to(state, &target, forced, pending_effects);
            }
        }
    }

    /// The handshake with the target ended: a PSYNC answered `+CONTINUE` or
    /// `+FULLRESYNC` ends the failover (writes go on, and are refused as a replica's); any
    /// other outcome after the PSYNC was sent aborts it (a master again). A sync that
    /// failed before its PSYNC is tried again, the failover still in progress, as Redis.
    pub(super) fn failover_handshake_ended(&mut self, psync_answered: bool, psync_sent: bool) {
        let pending_effects = self.engine.effects.buffer.len();
        let state = &mut self.engine.state;
        if state.replication.failover.state != FailoverState::InProgress {
            return;
        }
        if psync_answered {
            crate::commands::failover::clear(state);
        } else if psync_sent {
            crate::commands::failover::abort(
                state,
                "Failover target rejected psync request",
                pending_effects,
            );
        }
    }
}
