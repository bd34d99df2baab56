//! Wall-clock time in the units Redis uses.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn unix_seconds() -> i64 {
    unix_ms() / 1000
}

/// How old an anchor may get before `unix_ms_at` reads the wall clock again.
const ANCHOR_MAX_AGE: Duration = Duration::from_millis(100);

thread_local! {
    /// A wall-clock reading and the monotonic clock's at the same moment (this thread's).
    static ANCHOR: Cell<Option<(Instant, i64)>> = const { Cell::new(None) };
}

/// Unix milliseconds at `instant` (a monotonic reading the caller took anyway: a
/// command's timer), from this thread's anchor: one clock read per command serves both
/// the command's statistics and its time. The anchor is read again when `refresh_anchor`
/// asks (the event loop, each turn) or when it is older than 100 ms, so a step of the
/// wall clock shows within a turn.
pub fn unix_ms_at(instant: Instant) -> i64 {
    let anchor = ANCHOR.get().filter(|(at, _)| {
        instant
            .checked_duration_since(*at)
            .is_some_and(|age| age <= ANCHOR_MAX_AGE)
    });
    let (at, unix) = anchor.unwrap_or_else(|| {
        let fresh = (Instant::now(), unix_ms());
        ANCHOR.set(Some(fresh));
        fresh
    });
    unix + instant.saturating_duration_since(at).as_millis() as i64
}

/// Forgets this thread's anchor: the next `unix_ms_at` reads the wall clock.
pub fn refresh_anchor() {
    ANCHOR.set(None);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_from_the_anchor_is_the_wall_clock_s() {
        refresh_anchor();
        let before = unix_ms();
        let at = unix_ms_at(Instant::now());
        let after = unix_ms();
        assert!((before..=after).contains(&at), "{before} {at} {after}");
        // An instant before the anchor (taken earlier) is read from a fresh one.
        let earlier = Instant::now();
        refresh_anchor();
        let _ = unix_ms_at(Instant::now());
        assert!(unix_ms_at(earlier) <= unix_ms());
    }
}
