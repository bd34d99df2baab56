//! Serving the other clients while a script runs past `busy-reply-threshold` (Redis's
//! `processEventsWhileBlocked` for a busy script).
//!
//! The engine belongs to the script meanwhile, so no command can run: each complete
//! request another client sent is answered here — `-BUSY`, or the errors Redis checks
//! first (unknown command, arity, NOAUTH) — except SCRIPT KILL / FUNCTION KILL (OK, or
//! UNKILLABLE once the script wrote), SHUTDOWN NOSAVE (stops the script, drops its
//! effects and shuts down) and QUIT. Sockets are read until they would block (no new
//! connection is accepted meanwhile). A reply goes out at once when nothing was waiting
//! before it; otherwise it waits behind the replies already queued or held for the log,
//! which the loop sends when the script is done.

use super::AdmissionRules;
use super::session::{Client, SessionsView};
use crate::commands::transactions::{self, WatchDesk};
use crate::commands::{SessionState, eq_ignore_case, global_registry};
use crate::resp::{Parse, ParseLimits, Progress, ReplyWriter, parse_request};
use crate::scripting::busy::{BUSY_EVAL, BUSY_FUNCTION, Busy, BusyRequest, UNKILLABLE};
use std::io::{ErrorKind, Read, Write};

/// Bytes read from one client per look (the hook looks again a moment later).
const READ_PER_LOOK_BYTES: usize = 1024 * 1024;

impl SessionsView<'_> {
    pub(super) fn serve_busy(&mut self, busy: &Busy, desk: &mut WatchDesk) -> BusyRequest {
        let mut request = BusyRequest::Continue;
        if let Some(admission) = &mut self.admission {
            let rules = AdmissionRules {
                clients_max: busy.clients_max,
                protected_mode: busy.protected_mode,
                password_set: busy.password_set,
                authenticated: !busy.auth_required,
            };
            let counts = admission.admit(self.others, &rules, None);
            self.admitted.add(counts);
        }
        for (_, client) in self.others.iter_mut() {
            let conn = &client.conn;
            // A replica's output is the stream: its acknowledgements wait for the script;
            // so does the master's stream, which the engine runs.
            if conn.blocked.is_some()
                || conn.close_after_reply
                || conn.big_arguments.is_reading()
                || conn.replica.is_some()
                || client.state.master_link
            {
                continue;
            }
            read_available(client, busy.query_buffer_bytes_max);
            let asked = answer_requests(client, busy, desk);
            if asked != BusyRequest::Continue {
                request = asked;
            }
            flush_if_nothing_waits(client);
        }
        request
    }
}

/// Reads what the socket has, up to the query buffer's limit.
fn read_available(client: &mut Client, limit: usize) {
    let mut buf = [0u8; 16 * 1024];
    let mut read = 0;
    while read < READ_PER_LOOK_BYTES && client.conn.input.len() < limit {
        match client.conn.stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                client.conn.input.extend_from_slice(&buf[..n]);
                read += n;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// Answers every complete request at the front of the client's input.
fn answer_requests(client: &mut Client, busy: &Busy, desk: &mut WatchDesk) -> BusyRequest {
    let mut request = BusyRequest::Continue;
    let limits = ParseLimits {
        bulk_bytes_max: busy.bulk_bytes_max,
        inline_bytes_max: 64 * 1024,
        unauthenticated: busy.auth_required && !client.state.authenticated,
        big_argument_bytes_min: usize::MAX,
    };
    let mut consumed = 0;
    let mut ranges = Vec::new();
    loop {
        let input = &client.conn.input[consumed..];
        let mut progress = Progress::default();
        let (argv, used): (Vec<Vec<u8>>, usize) =
            match parse_request(input, &limits, &mut ranges, &mut progress) {
                Parse::Complete(used) => (
                    ranges.iter().map(|r| input[r.clone()].to_vec()).collect(),
                    used,
                ),
                Parse::Inline(words, used) => (words, used),
                // Incomplete, a protocol error, a big argument: the loop deals with it
                // when the script is done.
                _ => break,
            };
        consumed += used;
        if argv.is_empty() {
            continue;
        }
        let mut out = ReplyWriter::new(&mut client.output, client.state.resp3);
        let asked = answer(&mut out, &argv, busy, &mut client.state, desk);
        match asked {
            Answer::Reply => {}
            Answer::Quit => {
                client.conn.close_after_reply = true;
                break;
            }
            Answer::Ask(asked) => request = asked,
        }
    }
    if consumed > 0 {
        client.conn.input.drain(..consumed);
        // The parse position the loop kept was for a request answered here.
        client.conn.progress = Progress::default();
        client.conn.arg_ranges.clear();
    }
    request
}

enum Answer {
    Reply,
    Quit,
    Ask(BusyRequest),
}

/// One request's answer while the script runs (Redis's `processCommand` order: unknown
/// command, arity, authentication, then the busy script). The commands Redis marks
/// `allow-busy` run: SCRIPT KILL / FUNCTION KILL, FUNCTION STATS, SHUTDOWN NOSAVE, QUIT,
/// and the transaction commands (MULTI, DISCARD, WATCH, UNWATCH), so that a client
/// pipelining a transaction never has half of it refused and the rest run. Any other
/// command is refused with -BUSY, which dooms the transaction it was sent in; EXEC is
/// refused by ending the transaction (EXECABORT … BUSY).
fn answer(
    out: &mut ReplyWriter,
    argv: &[Vec<u8>],
    busy: &Busy,
    client: &mut SessionState,
    desk: &mut WatchDesk,
) -> Answer {
    let args: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
    let Some(spec) = global_registry().get(args[0]) else {
        refuse(out, client, &crate::commands::unknown_command_error(&args));
        return Answer::Reply;
    };
    if !spec.arity_ok(args.len()) {
        let error = format!("ERR wrong number of arguments for '{}' command", spec.name);
        refuse(out, client, &error);
        return Answer::Reply;
    }
    if busy.auth_required && !client.authenticated && !spec.has(crate::commands::flags::NO_AUTH) {
        refuse(out, client, "NOAUTH Authentication required.");
        return Answer::Reply;
    }
    let busy_error = if busy.eval { BUSY_EVAL } else { BUSY_FUNCTION };
    let sub = args.get(1).copied().unwrap_or(b"");
    let kill_of = match spec.name {
        "script" if args.len() == 2 && eq_ignore_case(sub, "kill") => Some(true),
        "function" if args.len() == 2 && eq_ignore_case(sub, "kill") => Some(false),
        _ => None,
    };
    if let Some(eval_kill) = kill_of {
        // Redis's scriptKill: writes first, then the kind of script.
        if busy.wrote {
            out.error(UNKILLABLE);
        } else if eval_kill != busy.eval {
            out.error(busy_error);
        } else {
            out.ok();
            return Answer::Ask(BusyRequest::Kill);
        }
        return Answer::Reply;
    }
    let in_multi = client.multi.is_some();
    match spec.name {
        "quit" => {
            out.ok();
            return Answer::Quit;
        }
        "multi" => transactions::begin(client, out),
        "discard" => desk.discard(client, out),
        "watch" => desk.watch(client, &args[1..], out),
        "exec" => desk.abort_exec(client, busy_error, out),
        // Inside MULTI an allowed command is queued, as outside a busy script.
        "unwatch" if in_multi => {
            let multi = client.multi.as_mut().expect("in MULTI");
            match multi.queue(spec, &args, busy.query_buffer_bytes_max) {
                Ok(()) => out.simple("QUEUED"),
                Err(_) => out.error(transactions::TRANSACTION_TOO_LARGE),
            }
        }
        "unwatch" => {
            desk.watches.unwatch_all(client);
            out.ok();
        }
        // FUNCTION STATS is allowed while busy (Redis's allow-busy), but answers BUSY
        // during an EVAL, as Redis's does.
        "function"
            if args.len() == 2
                && eq_ignore_case(sub, "stats")
                && let Some(function) = &busy.function =>
        {
            crate::scripting::busy::write_function_stats(
                out,
                Some(function),
                busy.libraries,
                busy.functions,
            );
        }
        "shutdown"
            if busy.may_shutdown
                && args[1..].iter().any(|a| eq_ignore_case(a, "nosave"))
                && !args[1..]
                    .iter()
                    .any(|a| eq_ignore_case(a, "save") || eq_ignore_case(a, "abort")) =>
        {
            // No reply: the server stops (the connection closes as it exits).
            return Answer::Ask(BusyRequest::ShutdownNoSave);
        }
        _ => refuse(out, client, busy_error),
    }
    Answer::Reply
}

/// A refused request: its error, and the transaction it was sent in doomed (Redis's
/// `rejectCommand` and `flagTransaction`).
fn refuse(out: &mut ReplyWriter, client: &mut SessionState, error: &str) {
    out.error(error);
    if let Some(multi) = &mut client.multi {
        multi.failed = true;
    }
}

/// Sends the client's output if none of it waits for the log: no reply held from an
/// earlier turn, and none this turn that read or wrote keys (those wait for the batch
/// this turn's effects go into, after the script). The replies made here reveal nothing,
/// nor do a PING's made earlier in this turn — which the loop would only send once the
/// script is done. What a full socket leaves goes out on its writable event.
fn flush_if_nothing_waits(client: &mut Client) {
    let conn = &mut client.conn;
    if conn.in_held
        || conn.hold_seq != 0
        || conn.read_hold_seq != 0
        || client.state.reply_shows != crate::commands::ReplyShows::Nothing
    {
        return;
    }
    let mut sent = conn.output_sent;
    while sent < client.output.len() {
        match conn.stream.write(&client.output[sent..]) {
            Ok(0) => break,
            Ok(n) => sent += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if sent == client.output.len() {
        client.output.clear();
        conn.output_sent = 0;
    } else {
        conn.output_sent = sent;
    }
}
