//! MULTI/EXEC in the engine: queueing a session's commands and running the queue.
//!
//! The commands themselves (MULTI, EXEC's checks, WATCH, DISCARD) are handlers in
//! `commands::transactions`; what needs the engine is here: a command inside MULTI is
//! checked and queued instead of run, and EXEC's queue runs in one go, nothing else in
//! between, its effects wrapped in `MULTI … EXEC` so that replay applies all or none.

use super::{Engine, Host, Mode, Outcome, Refusal, Request};
use crate::commands::{CommandSpec, SessionState};
use crate::resp::ReplyWriter;
use smallvec::SmallVec;

/// The commands that run, rather than queue, inside MULTI (as in Redis).
const TRANSACTION_CONTROL: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

pub(super) fn runs_inside_multi(spec: &CommandSpec) -> bool {
    TRANSACTION_CONTROL.contains(&spec.name)
}

/// An EXEC whose queue holds a command a stale replica refuses (Redis's
/// `is_denystale_command` for EXEC, from the queued commands' flags).
pub(super) fn exec_denies_stale(session: &SessionState, spec: &CommandSpec) -> bool {
    spec.name == "exec" && session.multi.as_ref().is_some_and(|m| m.denies_stale)
}

/// Queues a command inside MULTI (`MultiState::queue`).
pub(super) fn queue(
    session: &mut SessionState,
    spec: &CommandSpec,
    argv: &[&[u8]],
    limit_bytes: usize,
) -> Result<(), Refusal> {
    let multi = session.multi.as_mut().expect("queueing inside MULTI");
    multi
        .queue(spec, argv, limit_bytes)
        .map_err(|_| Refusal::TransactionTooLarge)
}

/// Runs EXEC's queue: the replies in one array, the effects in one `MULTI … EXEC` block
/// when there is more than one record.
pub(super) fn exec(
    engine: &mut Engine,
    session: &mut SessionState,
    reply: &mut Vec<u8>,
    queued: Vec<Vec<Vec<u8>>>,
    host: &mut dyn Host,
) {
    let mark = engine.effects.mark();
    ReplyWriter::new(reply, session.resp3).array(queued.len());
    for command in &queued {
        let argv: SmallVec<[&[u8]; 8]> = command.iter().map(Vec::as_slice).collect();
        let outcome = engine.execute(session, reply, Request::plain(&argv), Mode::Exec, host);
        // Queued commands never block (they run in `BlockMode::Never`); SHUTDOWN may not
        // be queued; QUIT runs rather than queues; jobs asked for inside EXEC are
        // scheduled by their handlers.
        debug_assert!(
            matches!(outcome, Outcome::Done | Outcome::Refused(_)),
            "{outcome:?} inside EXEC"
        );
    }
    engine.effects.wrap_since(mark);
}
