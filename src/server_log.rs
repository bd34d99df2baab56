//! The server's own log lines (not the append-only log): the level in force, which
//! `loglevel` sets at start and CONFIG SET changes at run time, as Redis's. The
//! subscriber that `tessera-server` installs asks `enabled` for every line.

use std::sync::atomic::{AtomicU8, Ordering};

/// The most verbose level shown: 0 error … 4 trace (`tracing::Level`'s order).
static MAX_LEVEL: AtomicU8 = AtomicU8::new(2);

fn rank(level: &tracing::Level) -> u8 {
    match *level {
        tracing::Level::ERROR => 0,
        tracing::Level::WARN => 1,
        tracing::Level::INFO => 2,
        tracing::Level::DEBUG => 3,
        tracing::Level::TRACE => 4,
    }
}

/// Redis's `loglevel` names: `debug` and `verbose` show debug lines, `notice` info,
/// `warning` warnings, `nothing` errors only (a fatal line is still worth keeping).
pub fn level_of(name: &str) -> tracing::Level {
    match name {
        "debug" | "verbose" => tracing::Level::DEBUG,
        "warning" => tracing::Level::WARN,
        "nothing" => tracing::Level::ERROR,
        _ => tracing::Level::INFO,
    }
}

/// Sets the level from `loglevel`'s value.
pub fn apply(loglevel: &str) {
    MAX_LEVEL.store(rank(&level_of(loglevel)), Ordering::Relaxed);
}

/// Whether a line at `level` is shown now.
pub fn enabled(level: &tracing::Level) -> bool {
    rank(level) <= MAX_LEVEL.load(Ordering::Relaxed)
}
