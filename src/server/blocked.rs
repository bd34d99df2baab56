//! Blocked clients: parking a session whose command found nothing to take, running its
//! command again when a key it waits on becomes ready, and its timeout.
//!
//! Which keys are waited on and which became ready is the engine's record
//! (`commands::blocking::BlockedKeys`, signalled by every write to a key). The sessions
//! and their deadlines are the event loop's: here. A served command runs through the
//! engine in `Mode::ServeBlocked`; its reply goes out with the turn and the session's
//! buffered input runs next (`run_resumed`).

use super::Server;
use super::session::Client;
use crate::commands::blocking::Blocked;
use crate::engine::{Mode, Outcome, Request};
use crate::resp::ReplyWriter;
use smallvec::SmallVec;

/// Deadlines of blocked clients, soonest first: (unix ms, token, client id).
pub(super) type Deadlines = std::collections::BTreeSet<(i64, usize, u64)>;

impl Server {
    /// Parks `client` (its command found nothing to take; no reply is written).
    pub(super) fn block(&mut self, token: usize, client: &mut Client, blocked: Blocked) {
        self.engine
            .state
            .blocked
            .block(token, client.state.id, &blocked);
        if let Some(deadline) = blocked.deadline_ms {
            self.block_deadlines
                .insert((deadline, token, client.state.id));
        }
        client.conn.blocked = Some(blocked);
    }

    /// Serves clients blocked on keys that became ready, oldest first per key, until no
    /// key is ready (a served BLMOVE can make its destination ready in turn).
    pub(super) fn serve_blocked(&mut self) {
        while self.engine.state.blocked.has_ready() {
            for (db, key) in self.engine.state.blocked.take_ready() {
                for (token, id) in self.engine.state.blocked.waiters(db, &key) {
                    // The client running the current command is out of `clients`; it is
                    // not blocked (a blocked client runs nothing).
                    let Some(mut client) = self.clients.take(token) else {
                        continue;
                    };
                    let command = match &client.conn.blocked {
                        Some(blocked) if client.state.id == id => blocked.command.clone(),
                        _ => {
                            self.clients.put_back(token, client);
                            continue;
                        }
                    };
                    let argv: SmallVec<[&[u8]; 8]> = command.iter().map(Vec::as_slice).collect();
                    let limits = self.engine.state.config.output_buffer_limits;
                    let mut host = super::session::SessionsView::new(
                        &mut self.clients,
                        Some(&client.conn),
                        &mut self.touched,
                        limits,
                    );
                    let outcome = self.engine.execute(
                        &mut client.state,
                        &mut client.output,
                        Request::plain(&argv),
                        Mode::ServeBlocked(key.clone()),
                        &mut host,
                    );
                    if !matches!(outcome, Outcome::Block(_)) {
                        self.unblock(token, &mut client);
                        self.apply_outcome(token, &mut client, outcome);
                    }
                    self.clients.put_back(token, client);
                }
            }
        }
    }

    /// Takes a client out of the blocked state; its reply (written by the caller) goes
    /// out with this turn and its buffered input runs next.
    pub(super) fn unblock(&mut self, token: usize, client: &mut Client) {
        if let Some(blocked) = client.conn.blocked.take() {
            self.forget_blocked(token, client.state.id, &blocked);
            self.touched.push(token);
            self.resumed.push(token);
        }
    }

    /// Removes a blocked client from the tables (it is served, timed out, or gone).
    pub(super) fn forget_blocked(&mut self, token: usize, id: u64, blocked: &Blocked) {
        self.engine.state.blocked.unblock(id, blocked);
        if blocked.replicas.is_some() {
            self.engine.state.replication.waiting.remove(id);
        }
        if let Some(deadline) = blocked.deadline_ms {
            self.block_deadlines.remove(&(deadline, token, id));
        }
    }

    /// Answers blocked clients whose timeout has passed (a null array, as Redis 7.0 does
    /// for every blocking command).
    pub(super) fn expire_blocked(&mut self) {
        let now = crate::clock::unix_ms();
        while let Some(&(deadline, token, id)) = self.block_deadlines.first() {
            if deadline > now {
                break;
            }
            self.block_deadlines.pop_first();
            let Some(mut client) = self.clients.take(token) else {
                continue;
            };
            if client.state.id == id
                && let Some(blocked) = &client.conn.blocked
            {
                let mut out = ReplyWriter::new(&mut client.output, client.state.resp3);
                match blocked.replicas {
                    // WAIT and WAITAOF answer how many acknowledged in time.
                    Some(wait) => wait
                        .reply_now(&self.engine.state.replication)
                        .write(&mut out),
                    None => out.null_array(),
                }
                self.unblock(token, &mut client);
            }
            self.clients.put_back(token, client);
        }
    }

    /// Runs the buffered input of clients unblocked this turn.
    pub(super) fn run_resumed(&mut self) {
        while let Some(token) = self.resumed.pop() {
            self.process_input(token);
        }
    }
}
