//! The course of a shutdown, as Redis 7.0 runs it (`prepareForShutdown`,
//! `isReadyToShutdown`, `finishShutdown`, `abortShutdown`): SHUTDOWN, or a termination
//! signal, first lets lagging replicas catch up, so that a write acknowledged to a client
//! is not lost with the master.
//!
//! Unless NOW is given, `shutdown-timeout` is 0, or every replica has already
//! acknowledged the master's offset, the shutdown *waits*: clients' writes are held (a
//! pause of its own, as CLIENT PAUSE WRITE: Redis's `PAUSE_DURING_SHUTDOWN`), the replicas
//! are asked for an acknowledgement (`REPLCONF GETACK *`), and the SHUTDOWN client stays
//! blocked. The wait ends when every replica acknowledged the offset, or when
//! `shutdown-timeout` seconds have passed (the lagging replicas are logged and the
//! shutdown goes on); SHUTDOWN ABORT cancels it, and so does a shutdown that fails (a
//! final snapshot that cannot be written, without FORCE): the held writes run, and each
//! blocked SHUTDOWN client gets Redis's error.
//!
//! Here is the state and its rules; the event loop (`server::shutdown`) blocks the
//! clients, pauses the writes, and asks each turn whether the shutdown may finish.

use crate::commands::ShutdownSave;
use crate::replication::Replication;

/// SHUTDOWN's options, or a signal's (`shutdown-on-sigterm`, `shutdown-on-sigint`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShutdownFlags {
    pub save: ShutdownSave,
    /// NOW: do not wait for lagging replicas.
    pub now: bool,
    /// FORCE: errors that would stop the shutdown (the final snapshot, the log's last
    /// sync) are logged and the process exits anyway.
    pub force: bool,
}

impl ShutdownFlags {
    /// No option given (SHUTDOWN alone, a signal with `default`).
    pub const DEFAULT: ShutdownFlags = ShutdownFlags {
        save: ShutdownSave::AsConfigured,
        now: false,
        force: false,
    };

    /// A `shutdown-on-sigterm` / `shutdown-on-sigint` value as CONFIG GET prints it:
    /// `default`, or words among `save`, `nosave`, `now`, `force` (the configuration
    /// refuses `save` with `nosave`).
    pub fn from_words(text: &str) -> ShutdownFlags {
        let mut flags = ShutdownFlags::DEFAULT;
        for word in text.split_ascii_whitespace() {
            match word {
                "save" => flags.save = ShutdownSave::Save,
                "nosave" => flags.save = ShutdownSave::NoSave,
                "now" => flags.now = true,
                "force" => flags.force = true,
                _ => {}
            }
        }
        flags
    }
}

/// What a SHUTDOWN command asks of the event loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownCall {
    /// Shut down (the client stays blocked until the process exits or the shutdown fails).
    Begin(ShutdownFlags),
    /// SHUTDOWN ABORT, while a shutdown waits for replicas (the reply is written).
    Abort,
}

/// A termination signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    Term,
    Int,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
        }
    }

    /// The directive that says what the signal does.
    pub fn directive(self) -> &'static str {
        match self {
            Signal::Term => "shutdown-on-sigterm",
            Signal::Int => "shutdown-on-sigint",
        }
    }
}

/// Where a shutdown is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// Serving: no shutdown asked, or the last one was aborted or failed.
    #[default]
    Off,
    /// To finish at the end of this turn: nothing to wait for.
    Due(ShutdownFlags),
    /// Waiting for the replicas until `deadline_ms` (Unix ms; Redis's `shutdown_mstime`),
    /// clients' writes held meanwhile.
    Waiting {
        flags: ShutdownFlags,
        deadline_ms: i64,
    },
}

/// How `Shutdown::begin` went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begun {
    /// A shutdown was in progress already: its options stand (as Redis's).
    InProgress,
    /// Nothing to wait for: it finishes at the end of the turn.
    Due,
    /// It waits for the replicas: the caller holds writes and asks for acknowledgements.
    Waiting,
}

/// The shutdown in progress, if any.
#[derive(Debug, Default)]
pub struct Shutdown {
    pub phase: Phase,
    /// The SHUTDOWN clients blocked until it ends (by id): answered with an error if it
    /// is aborted or fails.
    pub clients: Vec<u64>,
    /// A termination signal came and the shutdown it asked for is not over (Redis's
    /// `shutdown_asap`): a SIGINT now means "exit at once".
    pub signalled: bool,
}

impl Shutdown {
    /// Starts a shutdown with `flags` at `now_ms` (Redis's `prepareForShutdown`);
    /// `caught_up`: every replica acknowledged the master's offset.
    pub fn begin(
        &mut self,
        flags: ShutdownFlags,
        timeout_seconds: u64,
        caught_up: bool,
        now_ms: i64,
    ) -> Begun {
        if self.phase != Phase::Off {
            return Begun::InProgress;
        }
        if flags.now || timeout_seconds == 0 || caught_up {
            self.phase = Phase::Due(flags);
            return Begun::Due;
        }
        let timeout_ms = timeout_seconds.saturating_mul(1000).min(i64::MAX as u64) as i64;
        self.phase = Phase::Waiting {
            flags,
            deadline_ms: now_ms.saturating_add(timeout_ms),
        };
        Begun::Waiting
    }

    /// Whether a shutdown waits for replicas (SHUTDOWN ABORT has something to cancel).
    pub fn is_waiting(&self) -> bool {
        matches!(self.phase, Phase::Waiting { .. })
    }

    /// INFO's `shutdown_in_milliseconds`: the time left to wait, while waiting.
    pub fn remaining_ms(&self, now_ms: i64) -> Option<i64> {
        match self.phase {
            Phase::Waiting { deadline_ms, .. } => Some(deadline_ms.saturating_sub(now_ms)),
            _ => None,
        }
    }

    /// The options to finish with now, if the shutdown may finish: it is due, or its wait
    /// is over (the time has passed, or `caught_up` says the replicas are in sync). The
    /// event loop asks each turn.
    pub fn ready(&self, now_ms: i64, caught_up: impl FnOnce() -> bool) -> Option<ShutdownFlags> {
        match self.phase {
            Phase::Off => None,
            Phase::Due(flags) => Some(flags),
            Phase::Waiting { flags, deadline_ms } => {
                (now_ms >= deadline_ms || caught_up()).then_some(flags)
            }
        }
    }

    /// Back to serving (aborted, or failed: Redis's `cancelShutdown`). Returns the
    /// blocked SHUTDOWN clients to answer.
    pub fn cancel(&mut self) -> Vec<u64> {
        self.phase = Phase::Off;
        self.signalled = false;
        std::mem::take(&mut self.clients)
    }
}

/// Redis's `isReadyToShutdown`: every replica, whatever its state, acknowledged the
/// master's offset (none is there: ready).
pub fn replicas_caught_up(replication: &Replication) -> bool {
    let offset = replication.offset as i64;
    replication.replicas.iter().all(|r| r.ack_offset == offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: ShutdownFlags = ShutdownFlags {
        save: ShutdownSave::AsConfigured,
        now: true,
        force: false,
    };

    #[test]
    fn signal_options_read_as_config_get_prints_them() {
        assert_eq!(ShutdownFlags::from_words("default"), ShutdownFlags::DEFAULT);
        let flags = ShutdownFlags::from_words("nosave now force");
        assert_eq!(flags.save, ShutdownSave::NoSave);
        assert!(flags.now && flags.force);
        assert_eq!(ShutdownFlags::from_words("save").save, ShutdownSave::Save);
    }

    #[test]
    fn nothing_to_wait_for_makes_the_shutdown_due_at_once() {
        let mut shutdown = Shutdown::default();
        assert_eq!(shutdown.begin(NOW, 10, false, 0), Begun::Due);
        assert_eq!(shutdown.ready(0, || false), Some(NOW));
        let mut shutdown = Shutdown::default();
        assert_eq!(
            shutdown.begin(ShutdownFlags::DEFAULT, 0, false, 0),
            Begun::Due
        );
        let mut shutdown = Shutdown::default();
        assert_eq!(
            shutdown.begin(ShutdownFlags::DEFAULT, 10, true, 0),
            Begun::Due
        );
        assert!(!shutdown.is_waiting());
    }

    #[test]
    fn a_wait_ends_when_the_replicas_caught_up_or_at_its_deadline() {
        let mut shutdown = Shutdown::default();
        let flags = ShutdownFlags::DEFAULT;
        assert_eq!(shutdown.begin(flags, 2, false, 1_000), Begun::Waiting);
        assert!(shutdown.is_waiting());
        assert_eq!(shutdown.remaining_ms(1_500), Some(1_500));
        assert_eq!(shutdown.ready(2_999, || false), None);
        assert_eq!(shutdown.ready(2_999, || true), Some(flags));
        assert_eq!(shutdown.ready(3_000, || false), Some(flags));
        // A second SHUTDOWN joins the first; its options do not apply.
        assert_eq!(shutdown.begin(NOW, 2, false, 1_200), Begun::InProgress);
        assert_eq!(shutdown.ready(2_000, || false), None);
    }

    #[test]
    fn cancelling_hands_back_the_blocked_clients_and_clears_the_signal() {
        let mut shutdown = Shutdown::default();
        shutdown.begin(ShutdownFlags::DEFAULT, 10, false, 0);
        shutdown.clients.extend([4, 9]);
        shutdown.signalled = true;
        assert_eq!(shutdown.cancel(), vec![4, 9]);
        assert_eq!(shutdown.phase, Phase::Off);
        assert!(!shutdown.signalled && shutdown.clients.is_empty());
        assert_eq!(shutdown.ready(i64::MAX, || true), None);
    }
}
