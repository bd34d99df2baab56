//! Clients CLIENT PAUSE holds (Redis's `BLOCKED_POSTPONE`): the held request waits in its
//! session (`Connection::postponed`), the input after it in the query buffer (bounded as
//! ever), and nothing is read from the client's buffer meanwhile. When the pause ends (its
//! timeout, which bounds the loop's poll, or CLIENT UNPAUSE) each held request runs again
//! through the engine, which may hold it again, and the client's input resumes.

use super::Server;
use super::session::Client;
use crate::engine::{Outcome, Request};
use smallvec::SmallVec;

impl Server {
    /// Lists a client whose request the pause holds.
    pub(super) fn postpone(&mut self, token: usize) {
        self.postponed.push(token);
        self.engine.state.pause.held_clients = self.postponed.len();
    }

    /// Forgets a held client that is closing.
    pub(super) fn forget_postponed(&mut self, token: usize) {
        self.postponed.retain(|&held| held != token);
        self.engine.state.pause.held_clients = self.postponed.len();
    }

    /// How long the loop may sleep before the pause runs out (None: no client is held).
    pub(super) fn pause_wait_ms(&self) -> Option<u64> {
        if self.postponed.is_empty() {
            return None;
        }
        let end = self.engine.state.pause.end_ms()?;
        // One past the end: the pause is over once the clock is beyond it.
        // (A pause may end at the end of time: CLIENT PAUSE with a huge timeout.)
        let wait = end
            .saturating_add(1)
            .saturating_sub(crate::clock::unix_ms());
        Some(wait.max(0) as u64)
    }

    /// Runs the held requests again once the pause has ended or eased; then the clients'
    /// later input runs (`run_resumed`).
    pub(super) fn resume_postponed(&mut self) {
        if self.postponed.is_empty() {
            return;
        }
        let pause = &mut self.engine.state.pause;
        pause.kind(crate::clock::unix_ms()); // ends a pause that has run out
        if !pause.take_released() {
            return;
        }
        for token in std::mem::take(&mut self.postponed) {
            let Some(mut client) = self.clients.take(token) else {
                continue;
            };
            self.run_postponed(token, &mut client);
            self.clients.put_back(token, client);
            if self.engine.state.blocked.has_ready() {
                self.serve_blocked();
            }
        }
        self.engine.state.pause.held_clients = self.postponed.len();
    }

    /// Runs `client`'s held request; it may be held again.
    fn run_postponed(&mut self, token: usize, client: &mut Client) {
        let Some(held) = client.conn.postponed.take() else {
            return;
        };
        let argv: SmallVec<[&[u8]; 8]> = held.iter().map(Vec::as_slice).collect();
        let Client {
            conn,
            state,
            output,
        } = client;
        let (outcome, admitted) =
            self.execute_for_client(state, output, conn, Request::plain(&argv));
        drop(argv);
        self.note_admitted(admitted);
        if matches!(outcome, Outcome::Postpone) {
            client.conn.postponed = Some(held);
            self.postponed.push(token);
            return;
        }
        self.touched.push(token);
        self.resumed.push(token);
        self.apply_outcome(token, client, outcome);
    }
}
