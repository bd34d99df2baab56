//! When each request is due, which operation it is, and the time bins of the report.
//!
//! Each connection sends one request every `connections / rate` seconds, starting at a
//! random phase within the first period, so the connections together offer `rate`
//! requests a second, spread evenly. The k-th send of a connection is computed from k (not
//! accumulated), so the schedule does not drift however long it runs; it never waits for
//! replies (open loop).

/// The send times of one connection, in nanoseconds from the start of the load.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    phase_ns: f64,
    period_ns: f64,
}

impl Schedule {
    /// The schedule of one of `connections` connections sharing `rate` requests/s, its
    /// phase `phase` (in [0, 1)) of a period.
    pub fn new(connections: usize, rate: f64, phase: f64) -> Schedule {
        let period_ns = connections as f64 * 1e9 / rate;
        Schedule {
            phase_ns: phase.clamp(0.0, 1.0) * period_ns,
            period_ns,
        }
    }

    #[cfg(test)]
    pub fn period_ns(&self) -> f64 {
        self.period_ns
    }

    /// When the k-th request (from 0) is due.
    pub fn at(&self, k: u64) -> u64 {
        (self.phase_ns + k as f64 * self.period_ns) as u64
    }

    /// How many requests are due strictly before `t_ns`: the k of the first one due at or
    /// after it.
    pub fn count_before(&self, t_ns: u64) -> u64 {
        let estimate = ((t_ns as f64 - self.phase_ns) / self.period_ns)
            .ceil()
            .max(0.0) as u64;
        let mut k = estimate;
        while k > 0 && self.at(k - 1) >= t_ns {
            k -= 1;
        }
        while self.at(k) < t_ns {
            k += 1;
        }
        k
    }
}

/// Which requests are SETs: a hash of (connection seed, k) against `set_ratio`, so that the
/// sender and the receiver of a connection agree without telling each other.
#[derive(Clone, Copy, Debug)]
pub struct OpMix {
    seed: u64,
    threshold: u64,
    all: bool,
}

impl OpMix {
    pub fn new(seed: u64, set_ratio: f64) -> OpMix {
        let ratio = set_ratio.clamp(0.0, 1.0);
        OpMix {
            seed,
            threshold: (ratio * 2f64.powi(64)) as u64,
            all: ratio >= 1.0,
        }
    }

    pub fn is_set(&self, k: u64) -> bool {
        self.all || splitmix64(self.seed.wrapping_add(k)) < self.threshold
    }
}

/// SplitMix64's output function: a cheap, well-mixed hash of a 64-bit counter.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The index of the bin of `width` that holds `t` (both in the same unit).
pub fn bin(t: u64, width: u64) -> usize {
    (t / width) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_are_spaced_by_the_period_from_the_phase() {
        let s = Schedule::new(50, 20_000.0, 0.5);
        assert_eq!(s.period_ns(), 2_500_000.0);
        assert_eq!(s.at(0), 1_250_000);
        assert_eq!(s.at(1), 3_750_000);
        // Computed from k: no drift after a long run (an hour of sends).
        assert_eq!(s.at(1_440_000), 1_250_000 + 1_440_000 * 2_500_000);
        // A rate that does not divide a second evenly stays monotonic and within a
        // nanosecond of the exact time.
        let s = Schedule::new(7, 30_000.0, 0.3);
        let exact = |k: u64| 0.3 * 7e9 / 30_000.0 + k as f64 * 7e9 / 30_000.0;
        for k in [0, 1, 2, 999, 1_000_000, 12_345_678] {
            assert!((s.at(k) as f64 - exact(k)).abs() <= 1.0, "k {k}");
            assert!(s.at(k + 1) > s.at(k));
        }
    }

    #[test]
    fn count_before_agrees_with_at() {
        for (conns, rate, phase) in [
            (50, 20_000.0, 0.0),
            (50, 20_000.0, 0.999),
            (7, 30_000.0, 0.3),
            (1, 3.0, 0.5),
        ] {
            let s = Schedule::new(conns, rate, phase);
            assert_eq!(s.count_before(0), 0);
            for k in [0u64, 1, 2, 17, 1000, 123_456] {
                let t = s.at(k);
                assert_eq!(s.count_before(t), k, "at({k})");
                assert_eq!(s.count_before(t + 1), k + 1, "just after at({k})");
            }
        }
    }

    #[test]
    fn the_connections_together_offer_the_rate() {
        // 50 connections at 20,000/s with random-looking phases: over 10 s, 200,000 sends
        // are due, give or take one per connection (the partial period at each end).
        let (conns, rate, seconds) = (50usize, 20_000.0, 10u64);
        let total: u64 = (0..conns)
            .map(|c| {
                let phase = (splitmix64(c as u64) >> 11) as f64 / (1u64 << 53) as f64;
                Schedule::new(conns, rate, phase).count_before(seconds * 1_000_000_000)
            })
            .sum();
        let expected = rate as u64 * seconds;
        assert!(
            total.abs_diff(expected) <= conns as u64,
            "{total} vs {expected}"
        );
        // And each 100 ms bin gets its share, within one per connection.
        let width = 100_000_000u64;
        let mut bins = vec![0u64; (seconds * 10) as usize];
        for c in 0..conns {
            let phase = (splitmix64(c as u64) >> 11) as f64 / (1u64 << 53) as f64;
            let s = Schedule::new(conns, rate, phase);
            let mut k = 0;
            while s.at(k) < seconds * 1_000_000_000 {
                bins[bin(s.at(k), width)] += 1;
                k += 1;
            }
        }
        for (i, n) in bins.iter().enumerate() {
            assert!(n.abs_diff(2_000) <= conns as u64, "bin {i}: {n}");
        }
    }

    #[test]
    fn op_mix_follows_the_ratio() {
        for ratio in [0.0, 0.1, 0.5, 0.9, 1.0] {
            let mix = OpMix::new(12345, ratio);
            let sets = (0..100_000u64).filter(|&k| mix.is_set(k)).count() as f64;
            assert!(
                (sets / 100_000.0 - ratio).abs() < 0.01,
                "ratio {ratio}: {sets}"
            );
        }
        // The same seed gives the same sequence: the receiver sees what the sender sent.
        let (a, b) = (OpMix::new(9, 0.5), OpMix::new(9, 0.5));
        assert!((0..1000).all(|k| a.is_set(k) == b.is_set(k)));
    }
}
