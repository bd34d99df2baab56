//! The size a client's reply buffer keeps between replies, resized by the cron as Redis 7
//! resizes its clients' static reply buffers (`clientsCronResizeOutputBuffer`).
//!
//! A client's output is one `Vec` that grows as a turn's replies need it. What this
//! module decides is the allocation it keeps once they are sent: `size`, between 1 KiB
//! and 16 KiB, Redis's bounds. Each cron visit compares `size` with the most bytes the
//! output held since the peak was last reset:
//!
//! - **shrink** when that peak is under half of `size`: to the peak plus one, at least
//!   1 KiB (an idle client ends at 1 KiB);
//! - **expand** when the peak reached `size`: twice `size`, at most 16 KiB (a client with
//!   big replies climbs to 16 KiB in four visits).
//!
//! The peak is reset every `peak_reset` (5 s, DEBUG REPLYBUFFER PEAK-RESET-TIME), so a
//! client that was busy shrinks once it has been quiet that long.
//!
//! One deliberate difference: Redis allocates 16 KiB for every new client and shrinks it
//! after its first peak reset; Tessera starts at the 1 KiB floor and lets the cron grow it,
//! so ten thousand idle connections hold 10 MB rather than up to 160 MB. Bytes beyond
//! `size` while replies are queued are what Redis holds in its reply list: CLIENT LIST
//! shows them in `omem`, not in `rbs`.

use std::time::Duration;

/// The least a reply buffer keeps (Redis's `PROTO_REPLY_MIN_BYTES`).
pub const MIN_BYTES: usize = 1024;
/// The most a reply buffer keeps (Redis's `PROTO_REPLY_CHUNK_BYTES`).
pub const MAX_BYTES: usize = 16 * 1024;
/// How often the peak is reset by default (Redis's `REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME`).
const DEFAULT_PEAK_RESET: Duration = Duration::from_secs(5);

/// When a client's peak is reset (DEBUG REPLYBUFFER PEAK-RESET-TIME).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeakReset {
    /// Never: the peak only grows, so a buffer never shrinks after it has held more.
    Never,
    Every(Duration),
}

/// The server-wide settings, changed only by DEBUG REPLYBUFFER (test aids of Redis's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub peak_reset: PeakReset,
    /// DEBUG REPLYBUFFER RESIZING 0 stops the resizing (the peak is still tracked).
    pub resizing: bool,
}

impl Default for PeakReset {
    fn default() -> PeakReset {
        PeakReset::Every(DEFAULT_PEAK_RESET)
    }
}

impl PeakReset {
    /// DEBUG REPLYBUFFER PEAK-RESET-TIME in milliseconds: a negative number means never,
    /// as Redis reads its -1.
    pub fn from_millis(milliseconds: i64) -> PeakReset {
        match u64::try_from(milliseconds) {
            Ok(ms) => PeakReset::Every(Duration::from_millis(ms)),
            Err(_) => PeakReset::Never,
        }
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            peak_reset: PeakReset::default(),
            resizing: true,
        }
    }
}

/// What the cron did to one client's size (INFO's `reply_buffer_shrinks` and
/// `reply_buffer_expands` count them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resize {
    Shrunk,
    Expanded,
}

/// One client's reply-buffer size and the peak it is judged by.
#[derive(Clone, Debug)]
pub struct Sizing {
    size: usize,
    peak: usize,
    /// Milliseconds of the clock when the peak was last reset.
    peak_reset_ms: i64,
}

impl Sizing {
    pub fn new(now_ms: i64) -> Sizing {
        Sizing {
            size: MIN_BYTES,
            peak: 0,
            peak_reset_ms: now_ms,
        }
    }

    /// The allocation kept between replies (`rbs`).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The most bytes the output held since the last reset (`rbp`).
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Notes that the output holds `pending` bytes. Called before each send, when the
    /// output is at its largest: it only grows between sends.
    pub fn observe(&mut self, pending: usize) {
        self.peak = self.peak.max(pending);
    }

    /// The cron's visit: resizes by the peak, then resets the peak to what is pending now
    /// if its time has come. Returns what changed.
    pub fn visit(&mut self, pending: usize, now_ms: i64, settings: &Settings) -> Option<Resize> {
        self.observe(pending);
        let resize = if !settings.resizing {
            None
        } else if self.size / 2 >= MIN_BYTES && self.peak < self.size / 2 {
            self.size = MIN_BYTES.max(self.peak + 1);
            Some(Resize::Shrunk)
        } else if self.size * 2 < MAX_BYTES * 2 && self.peak >= self.size {
            self.size = MAX_BYTES.min(self.size * 2);
            Some(Resize::Expanded)
        } else {
            None
        };
        if let PeakReset::Every(every) = settings.peak_reset
            && now_ms.saturating_sub(self.peak_reset_ms) >= every.as_millis() as i64
        {
            self.peak = pending;
            self.peak_reset_ms = now_ms;
        }
        debug_assert!((MIN_BYTES..=MAX_BYTES).contains(&self.size));
        resize
    }

    /// Brings an output with nothing pending to the size it should keep: a fresh
    /// allocation when it holds much more (a big reply's) or less (a new client's).
    /// Returns whether it reallocated. Between `size` and twice `size` it is left alone,
    /// so a client whose turns fill just over `size` is not reallocated at every visit.
    pub fn fit(&self, output: &mut Vec<u8>) -> bool {
        assert!(
            output.is_empty(),
            "only an output with nothing pending is refitted"
        );
        let capacity = output.capacity();
        if capacity < self.size || capacity > 2 * self.size {
            *output = Vec::with_capacity(self.size);
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every(ms: u64) -> Settings {
        Settings {
            peak_reset: PeakReset::Every(Duration::from_millis(ms)),
            resizing: true,
        }
    }

    #[test]
    fn an_idle_client_stays_at_the_floor_and_a_busy_one_climbs_to_16_kib() {
        let settings = every(100);
        let mut sizing = Sizing::new(0);
        assert_eq!(sizing.visit(5, 100, &settings), None);
        assert_eq!(sizing.size(), MIN_BYTES);
        let mut now = 100;
        let mut sizes = Vec::new();
        for _ in 0..6 {
            now += 100;
            sizing.observe(32 * 1024 + 8);
            sizing.visit(0, now, &settings);
            sizes.push(sizing.size());
        }
        assert_eq!(sizes, [2048, 4096, 8192, 16384, 16384, 16384]);
    }

    #[test]
    fn a_quiet_client_shrinks_after_its_peak_is_reset_and_never_without_a_reset() {
        let mut sizing = Sizing::new(0);
        let mut settings = every(1000);
        for now in 1..=4 {
            sizing.observe(20_000);
            sizing.visit(0, now, &settings);
        }
        assert_eq!(sizing.size(), MAX_BYTES);
        // The peak is still the old one: no shrink until it is reset.
        assert_eq!(sizing.visit(0, 500, &settings), None);
        assert_eq!(sizing.visit(0, 1000, &settings), None); // resets the peak to 0
        assert_eq!(sizing.peak(), 0);
        assert_eq!(sizing.visit(0, 1100, &settings), Some(Resize::Shrunk));
        assert_eq!(sizing.size(), MIN_BYTES);

        settings.peak_reset = PeakReset::from_millis(-1);
        assert_eq!(settings.peak_reset, PeakReset::Never);
        for now in 2000..2004 {
            sizing.observe(20_000);
            sizing.visit(0, now, &settings);
        }
        assert_eq!(sizing.visit(0, 1_000_000, &settings), None);
        assert_eq!(sizing.size(), MAX_BYTES);
        settings.peak_reset = PeakReset::default();
        assert_eq!(settings, Settings::default());
    }

    #[test]
    fn a_moderate_peak_shrinks_to_just_above_it_and_resizing_off_changes_nothing() {
        let mut sizing = Sizing::new(0);
        for now in 1..=4 {
            sizing.observe(MAX_BYTES);
            sizing.visit(0, now, &every(1_000_000));
        }
        sizing.peak = 3000;
        assert_eq!(sizing.visit(0, 5, &every(1_000_000)), Some(Resize::Shrunk));
        assert_eq!(sizing.size(), 3001);
        let off = Settings {
            resizing: false,
            ..every(0)
        };
        sizing.observe(MAX_BYTES);
        assert_eq!(sizing.visit(0, 6, &off), None);
        assert_eq!(sizing.size(), 3001);
    }

    #[test]
    fn fitting_reallocates_only_far_from_the_size() {
        let sizing = Sizing::new(0);
        let mut output = Vec::new();
        assert!(sizing.fit(&mut output));
        assert!(output.capacity() >= MIN_BYTES);
        let mut within = Vec::with_capacity(1500);
        assert!(!sizing.fit(&mut within));
        assert_eq!(within.capacity(), 1500);
        let mut big = Vec::with_capacity(64 * 1024);
        assert!(sizing.fit(&mut big));
        assert!(big.capacity() < 2 * MIN_BYTES);
    }
}
