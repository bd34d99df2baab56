//! What the operator's client commands change in the path of every command: CLIENT
//! PAUSE holds commands (`Engine::paused`), MONITOR is fed each command run
//! (`Engine::feed_monitors`), CLIENT REPLY drops replies (`drop_reply`), and a monitor
//! may not touch keys. Each is one branch on the hot path when unused.

use super::{Engine, Host, Mode};
use crate::commands::{CommandSpec, ReplyMode, SessionState, flags};
use crate::monitor::Source;
use crate::pause::{self, PauseKind};

impl Engine {
    /// Whether CLIENT PAUSE holds this client command now (Redis's `processCommand`: a
    /// monitor, as a replica, is never held).
    pub(super) fn paused(
        &mut self,
        session: &SessionState,
        spec: &CommandSpec,
        argv: &[&[u8]],
    ) -> bool {
        if !self.state.pause.maybe_active() || session.modes.monitor || session.replica {
            return false;
        }
        let kind = self.state.pause.kind(crate::clock::unix_ms());
        kind != PauseKind::Off && pause::holds(kind, self.may_replicate(session, spec, argv))
    }

    /// Redis's `is_may_replicate_command`: writes, PUBLISH and its kin, scripts that may
    /// write; EXEC by what it queued.
    fn may_replicate(&self, session: &SessionState, spec: &CommandSpec, argv: &[&[u8]]) -> bool {
        if spec.name == "exec"
            && let Some(multi) = &session.multi
        {
            return multi.has_write
                || multi.queued.iter().any(|queued| {
                    let argv: Vec<&[u8]> = queued.iter().map(Vec::as_slice).collect();
                    self.registry
                        .resolve(&argv)
                        .is_some_and(|(spec, _)| self.command_may_replicate(spec, &argv))
                });
        }
        self.command_may_replicate(spec, argv)
    }

    fn command_may_replicate(&self, spec: &CommandSpec, argv: &[&[u8]]) -> bool {
        if crate::monitor::feeds_itself(spec.name) {
            // EVAL, EVALSHA, FCALL: unless the script declares no-writes; the _RO forms
            // only if their script declares writes.
            return match spec.name {
                "eval" | "evalsha" | "fcall" => {
                    crate::scripting::may_write(&self.state.scripting, spec, argv)
                }
                _ => crate::scripting::declares_writes(&self.state.scripting, spec, argv),
            };
        }
        spec.has(flags::WRITE) || pause::may_replicate_by_name(spec.name)
    }

    /// A replica, and a monitor (a replica to Redis), may not run commands that read or
    /// write keys ("Replica can't interact with the keyspace").
    pub(super) fn monitor_refused(
        &self,
        session: &SessionState,
        spec: &CommandSpec,
        argv: &[&[u8]],
    ) -> bool {
        (session.modes.monitor || session.replica)
            && (spec.has(flags::READONLY) || self.command_may_replicate(spec, argv))
    }

    /// Sends `argv`, just run by `session`, to every monitor (Redis's
    /// `replicationFeedMonitors`), unless it is an admin command. `reply`: the running
    /// session's, where its own line goes if it monitors.
    pub(super) fn feed_monitors(
        &self,
        session: &SessionState,
        reply: &mut Vec<u8>,
        spec: &CommandSpec,
        argv: &[&[u8]],
        mode: &Mode,
        host: &mut dyn Host,
    ) {
        if self.state.monitors.is_empty() || matches!(mode, Mode::Replay | Mode::ServeBlocked(_)) {
            return;
        }
        let table = crate::acl::table::table();
        let admin = crate::acl::table::category(b"admin").is_some_and(|bit| {
            table
                .for_request(spec.name, argv)
                .is_some_and(|command| command.categories & (1 << bit) != 0)
        });
        if admin {
            return;
        }
        let address;
        let source = match mode {
            Mode::Script(_) => Source::Lua,
            _ => {
                address = host.client_addresses().map(|(peer, _)| peer.monitor_name());
                Source::Client(address.as_deref().unwrap_or_default())
            }
        };
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_micros() as i64);
        let argv = crate::monitor::redacted(spec.name, argv);
        let line = crate::monitor::line(now_us, session.db, &source, &argv);
        for &id in self.state.monitors.ids() {
            if id == session.id {
                reply.extend_from_slice(&line);
            } else {
                host.feed_monitor(id, &line);
            }
        }
    }
}

/// After a client's command: whether CLIENT REPLY drops what it wrote (the mode as the
/// command left it: CLIENT REPLY ON's own +OK goes out), and the mode from now on.
pub(super) fn drop_reply(session: &mut SessionState) -> bool {
    let now = session.modes.reply;
    session.modes.reply = now.after_command();
    matches!(now, ReplyMode::Off | ReplyMode::Skip)
}
