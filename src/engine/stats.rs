//! What the engine records once a command has run: its statistics
//! (`crate::command_stats`), the latency monitor's `command` / `fast-command` events
//! (`crate::latency`) and the slow log (`crate::slowlog`), as Redis's `call()` does after
//! the command's proc returns.

use super::{Engine, Host};
use crate::commands::{CommandSpec, SessionState, flags};
use std::time::Duration;

/// A command that ran, as `Engine::dispatch` timed it.
pub(super) struct Ran<'a> {
    pub spec: &'static CommandSpec,
    /// Its entry in Redis's table (the subcommand for a container).
    pub id: Option<usize>,
    pub argv: &'a [&'a [u8]],
    /// The handler and what the engine did for it (an EXEC's queue, a script).
    pub duration: Duration,
    /// It blocked: its wait is not its cost, and Redis logs it when it is served.
    pub blocked: bool,
    /// A blocked command served again: its time counts, not a second call.
    pub served: bool,
}

impl Engine {
    pub(super) fn record_call(&mut self, session: &SessionState, ran: Ran<'_>, host: &dyn Host) {
        let nanos = u64::try_from(ran.duration.as_nanos()).unwrap_or(u64::MAX);
        let config = &self.state.config;
        self.state.commands.end(
            ran.id,
            nanos,
            !ran.served,
            !ran.blocked,
            config.latency_tracking,
        );
        // Blocked: its wait is not its cost. No id: a subcommand Redis 7.0 lacks, which
        // Redis refuses before running anything (an unknown subcommand): no call to log.
        if ran.blocked || ran.id.is_none() {
            return;
        }
        let micros = nanos / 1000;
        let event = if ran.spec.has(flags::FAST) {
            "fast-command"
        } else {
            "command"
        };
        self.state
            .latency
            .add_if_needed(config.latency_monitor_threshold_ms, event, micros / 1000);
        // EXEC is Redis's one command kept out of the slow log: its commands are logged.
        if ran.spec.name == "exec"
            || !crate::slowlog::SlowLog::wants(config.slowlog_slower_than_us, micros)
        {
            return;
        }
        let description = host.describe_client(session, ran.spec.name, &self.state.tracking);
        let peer = description
            .split(' ')
            .find_map(|field| field.strip_prefix("addr="))
            .unwrap_or("")
            .to_string();
        let command = crate::slowlog::Command {
            argv: ran.argv,
            name: ran.spec.name,
            duration_us: micros,
            peer,
            client_name: session.name.clone().unwrap_or_default(),
        };
        let max_len = usize::try_from(config.slowlog_max_len).unwrap_or(usize::MAX);
        self.state.slowlog.push(command, max_len);
    }

    /// Records a latency monitor event that lasted since `started`.
    pub(super) fn latency_event(&mut self, event: &'static str, started: std::time::Instant) {
        let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let threshold = self.state.config.latency_monitor_threshold_ms;
        self.state.latency.add_if_needed(threshold, event, millis);
    }
}
