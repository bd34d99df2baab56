//! MULTI/EXEC in the engine: queueing a session's commands and running the queue.
//!
//! The commands themselves (MULTI, EXEC's checks, WATCH, DISCARD) are handlers in
//! `commands::transactions`; what needs the engine is here: a command inside MULTI is
//! checked and queued instead of run, and EXEC's queue runs in one go, nothing else in
//! between, its effects wrapped in `MULTI … EXEC` so that replay applies all or none.

use super::{Engine, Host, Mode, Outcome, Refusal, Request};
use crate::commands::{CommandSpec, SessionState, flags};
use crate::resp::ReplyWriter;
use smallvec::SmallVec;

/// The commands that run, rather than queue, inside MULTI (as in Redis).
const TRANSACTION_CONTROL: &[&str] = &["exec", "discard", "multi", "watch", "quit", "reset"];

/// Bytes a queued argument is counted for beyond its own (its share of the queue's
/// bookkeeping), against `client-query-buffer-limit`.
const QUEUED_ARGUMENT_OVERHEAD_BYTES: usize = 16;

pub(super) fn runs_inside_multi(spec: &CommandSpec) -> bool {
    TRANSACTION_CONTROL.contains(&spec.name)
}

/// Queues a command inside MULTI. The queue is bounded by `limit_bytes` (a client's:
/// `client-query-buffer-limit`): past that it is dropped at once and the transaction
/// fails.
pub(super) fn queue(
    session: &mut SessionState,
    spec: &CommandSpec,
    argv: &[&[u8]],
    limit_bytes: usize,
) -> Result<(), Refusal> {
    let multi = session.multi.as_mut().expect("queueing inside MULTI");
    let bytes: usize = argv
        .iter()
        .map(|a| a.len() + QUEUED_ARGUMENT_OVERHEAD_BYTES)
        .sum();
    if multi.bytes.saturating_add(bytes) > limit_bytes {
        multi.queued = Vec::new();
        multi.failed = true;
        return Err(Refusal::TransactionTooLarge);
    }
    multi.bytes += bytes;
    multi.has_write |= spec.has(flags::WRITE);
    multi.queued.push(argv.iter().map(|a| a.to_vec()).collect());
    Ok(())
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
