//! CLIENT PAUSE: whether clients' commands are held now, and which (Redis 7.0's
//! `pauseClients` for its purposes in a standalone server: the CLIENT command, a
//! shutdown waiting for lagging replicas and a FAILOVER waiting for its target, each of
//! the last two holding writes until it ends or is aborted). Each purpose is lifted on
//! its own (CLIENT UNPAUSE leaves a shutdown's or a failover's hold); the pause in force
//! is the strictest, as Redis's.
//!
//! A held command is not refused: the engine answers `Outcome::Postpone` and the event
//! loop keeps the request (and everything the client sends after it, in its query buffer
//! under the usual limit) until the pause ends or becomes less strict, then runs it again
//! (Redis's `BLOCKED_POSTPONE`). While any pause is in force keys neither expire nor are
//! evicted, so that the dataset stays as it was (Redis's `checkClientPauseTimeoutAndReturnIfPaused`
//! in `expireIfNeeded`, `activeExpireCycle` and `performEvictions`).

/// How strict the pause is; ordered as Redis's `pause_type` (more restrictive is larger).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseKind {
    #[default]
    Off,
    /// Only commands that may write or replicate are held.
    Write,
    /// Every command of every ordinary client is held.
    All,
}

/// The pause in force.
#[derive(Debug, Default)]
pub struct Pause {
    kind: PauseKind,
    /// Unix ms after which the pause is over.
    end_ms: i64,
    /// Set when the pause ended or became less strict: held clients are to be run again.
    released: bool,
    /// Clients held now (INFO's `blocked_clients` counts them, as Redis does).
    pub held_clients: usize,
    /// A shutdown waiting for replicas holds writes (`Hold::Shutdown`).
    shutdown: bool,
    /// A FAILOVER waiting for its target holds writes (`Hold::Failover`).
    failover: bool,
}

/// What holds clients' writes besides CLIENT PAUSE, each with no end of its own and
/// lifted on its own (CLIENT UNPAUSE leaves it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hold {
    /// A shutdown waiting for lagging replicas (Redis's `PAUSE_DURING_SHUTDOWN`).
    Shutdown,
    /// A FAILOVER waiting for its target (Redis's `PAUSE_DURING_FAILOVER`).
    Failover,
}

impl Pause {
    /// CLIENT PAUSE: a pause already in force keeps the stricter kind and the later end.
    pub fn pause(&mut self, kind: PauseKind, end_ms: i64) {
        if self.kind == PauseKind::Off {
            self.end_ms = end_ms;
        } else {
            self.end_ms = self.end_ms.max(end_ms);
        }
        self.kind = self.kind.max(kind);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&mut self) {
        if self.kind != PauseKind::Off {
            self.kind = PauseKind::Off;
            self.released = true;
        }
    }

    /// Writes are held for `hold` until `release(hold)`.
    pub fn hold(&mut self, hold: Hold) {
        *self.flag(hold) = true;
    }

    /// `hold` is over (a shutdown's wait cancelled, a failover done or aborted).
    pub fn release(&mut self, hold: Hold) {
        if std::mem::take(self.flag(hold)) {
            self.released = true;
        }
    }

    fn flag(&mut self, hold: Hold) -> &mut bool {
        match hold {
            Hold::Shutdown => &mut self.shutdown,
            Hold::Failover => &mut self.failover,
        }
    }

    /// A shutdown's or a failover's hold on writes is in force.
    fn writes_held(&self) -> bool {
        self.shutdown || self.failover
    }

    /// The pause in force at `now_ms` (a CLIENT PAUSE that has run out is ended here).
    pub fn kind(&mut self, now_ms: i64) -> PauseKind {
        if self.kind != PauseKind::Off && self.end_ms < now_ms {
            self.unpause();
        }
        if self.writes_held() {
            self.kind.max(PauseKind::Write)
        } else {
            self.kind
        }
    }

    /// Whether a pause is in force (without the clock: the engine's hot path asks this
    /// first, and only then reads the time).
    pub fn maybe_active(&self) -> bool {
        self.kind != PauseKind::Off || self.writes_held()
    }

    /// When CLIENT PAUSE runs out (for the event loop's poll timeout), if one is in force
    /// (a shutdown's or a failover's hold has no end of its own).
    pub fn end_ms(&self) -> Option<i64> {
        (self.kind != PauseKind::Off).then_some(self.end_ms)
    }

    /// Whether held clients should be run again; clears the mark.
    pub fn take_released(&mut self) -> bool {
        std::mem::take(&mut self.released)
    }

    /// Whether expiry and eviction must leave the dataset alone at `now_ms`.
    pub fn freezes_dataset(&mut self, now_ms: i64) -> bool {
        self.maybe_active() && self.kind(now_ms) != PauseKind::Off
    }
}

/// Whether a command with these traits is held under `kind` (Redis's
/// `is_may_replicate_command`: write commands, PUBLISH, SPUBLISH, PFCOUNT, and EVAL,
/// EVALSHA and FCALL unless their script declares `no-writes`; for EXEC, what it queued).
pub fn holds(kind: PauseKind, may_replicate: bool) -> bool {
    match kind {
        PauseKind::Off => false,
        PauseKind::Write => may_replicate,
        PauseKind::All => true,
    }
}

/// Commands Redis 7.0 flags `may_replicate` (besides every `write` command).
pub fn may_replicate_by_name(name: &str) -> bool {
    matches!(
        name,
        "pfcount" | "publish" | "spublish" | "eval" | "evalsha" | "fcall"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_pause_keeps_the_stricter_kind_and_the_later_end() {
        let mut pause = Pause::default();
        pause.pause(PauseKind::All, 1_000);
        pause.pause(PauseKind::Write, 2_000);
        assert_eq!(pause.kind(1_500), PauseKind::All);
        assert_eq!(pause.end_ms(), Some(2_000));
        assert!(!pause.take_released());
        assert_eq!(pause.kind(2_001), PauseKind::Off);
        assert!(pause.take_released());
        assert!(!pause.take_released());
    }

    #[test]
    fn a_hold_outlasts_client_unpause_and_is_lifted_on_its_own() {
        for hold in [Hold::Shutdown, Hold::Failover] {
            let mut pause = Pause::default();
            pause.hold(hold);
            assert!(pause.maybe_active());
            assert_eq!(pause.kind(0), PauseKind::Write);
            assert_eq!(pause.end_ms(), None);
            pause.pause(PauseKind::All, 1_000);
            assert_eq!(pause.kind(500), PauseKind::All);
            pause.unpause();
            assert!(pause.take_released());
            assert_eq!(pause.kind(600), PauseKind::Write);
            pause.release(hold);
            assert!(pause.take_released());
            assert_eq!(pause.kind(700), PauseKind::Off);
            assert!(!pause.maybe_active());
            pause.release(hold);
            assert!(!pause.take_released());
        }
    }

    #[test]
    fn both_holds_hold_until_both_are_lifted() {
        let mut pause = Pause::default();
        pause.hold(Hold::Shutdown);
        pause.hold(Hold::Failover);
        pause.release(Hold::Failover);
        assert_eq!(pause.kind(0), PauseKind::Write);
        pause.release(Hold::Shutdown);
        assert_eq!(pause.kind(0), PauseKind::Off);
    }

    #[test]
    fn write_pauses_hold_only_commands_that_may_replicate() {
        assert!(holds(PauseKind::Write, true));
        assert!(!holds(PauseKind::Write, false));
        assert!(holds(PauseKind::All, false));
        assert!(!holds(PauseKind::Off, true));
    }
}
