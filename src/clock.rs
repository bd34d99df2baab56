//! Wall-clock time in the units Redis uses.

/// Milliseconds since the Unix epoch.
pub fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub fn unix_seconds() -> i64 {
    unix_ms() / 1000
}
