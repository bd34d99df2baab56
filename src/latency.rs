//! The latency monitor (LATENCY LATEST / HISTORY / RESET / GRAPH / DOCTOR), as Redis
//! 7.0's `latency.c`: per event, the last 160 samples (one per second at most, the worst
//! of that second) and the all-time maximum, recorded when an event took at least
//! `latency-monitor-threshold` milliseconds (0: the monitor is off).
//!
//! The events Tessera has the same moment for: `command` and `fast-command` (a command's
//! run on the event loop), `expire-cycle` (the cron's active expiry) and `eviction-cycle`
//! (a pass of eviction under `maxmemory`). Log writes and fsyncs happen on the log
//! writer's threads, never on the loop, so Redis's `aof-*` events have no counterpart
//! (docs/compatibility.md).

/// Samples kept per event (Redis's LATENCY_TS_LEN).
const SAMPLES: usize = 160;

#[derive(Clone, Copy, Default)]
pub struct Sample {
    pub unix_seconds: i64,
    pub latency_ms: u64,
}

/// One event's time series: a ring of samples, `next` the slot to write.
pub struct Series {
    samples: [Sample; SAMPLES],
    next: usize,
    pub max_ms: u64,
}

impl Series {
    fn new() -> Series {
        Series {
            samples: [Sample::default(); SAMPLES],
            next: 0,
            max_ms: 0,
        }
    }

    /// Oldest first, the slots never written skipped.
    pub fn samples(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..SAMPLES)
            .map(move |j| self.samples[(self.next + j) % SAMPLES])
            .filter(|s| s.unix_seconds != 0)
    }

    pub fn latest(&self) -> Sample {
        self.samples[(self.next + SAMPLES - 1) % SAMPLES]
    }
}

/// Every event seen since the last reset, in the order first seen.
#[derive(Default)]
pub struct LatencyMonitor {
    events: Vec<(&'static str, Box<Series>)>,
}

impl LatencyMonitor {
    /// Records `latency_ms` for `event` if the monitor is on and it reaches the threshold
    /// (Redis's `latencyAddSampleIfNeeded`).
    pub fn add_if_needed(&mut self, threshold_ms: u64, event: &'static str, latency_ms: u64) {
        if threshold_ms != 0 && latency_ms >= threshold_ms {
            self.add(event, latency_ms, crate::clock::unix_seconds());
        }
    }

    fn add(&mut self, event: &'static str, latency_ms: u64, now: i64) {
        let series = match self.events.iter().position(|(name, _)| *name == event) {
            Some(at) => &mut self.events[at].1,
            None => {
                self.events.push((event, Box::new(Series::new())));
                &mut self.events.last_mut().expect("just pushed").1
            }
        };
        series.max_ms = series.max_ms.max(latency_ms);
        let previous = (series.next + SAMPLES - 1) % SAMPLES;
        if series.samples[previous].unix_seconds == now {
            let sample = &mut series.samples[previous];
            sample.latency_ms = sample.latency_ms.max(latency_ms);
            return;
        }
        series.samples[series.next] = Sample {
            unix_seconds: now,
            latency_ms,
        };
        series.next = (series.next + 1) % SAMPLES;
    }

    pub fn events(&self) -> impl Iterator<Item = (&'static str, &Series)> {
        self.events.iter().map(|(name, series)| (*name, &**series))
    }

    pub fn series(&self, event: &[u8]) -> Option<(&'static str, &Series)> {
        self.events().find(|(name, _)| name.as_bytes() == event)
    }

    /// Forgets one event (Some) or all; how many were forgotten.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.events.len();
        match event {
            Some(event) => self.events.retain(|(name, _)| name.as_bytes() != event),
            None => self.events.clear(),
        }
        before - self.events.len()
    }

    /// LATENCY GRAPH: the header Redis prints, then one column per sample, the tallest
    /// the event's highest latency (a plainer chart than Redis's sparkline, same data).
    pub fn graph(&self, event: &'static str, series: &Series, now: i64) -> String {
        let samples: Vec<Sample> = series.samples().collect();
        let high = samples.iter().map(|s| s.latency_ms).max().unwrap_or(0);
        let low = samples.iter().map(|s| s.latency_ms).min().unwrap_or(0);
        let mut text = format!(
            "{event} - high {high} ms, low {low} ms (all time high {} ms)\n{}\n",
            series.max_ms,
            "-".repeat(80)
        );
        const ROWS: u64 = 4;
        for row in (1..=ROWS).rev() {
            let line: String = samples
                .iter()
                .map(|s| {
                    if high > 0 && s.latency_ms * ROWS >= row * high {
                        '#'
                    } else {
                        ' '
                    }
                })
                .collect();
            text.push_str(line.trim_end());
            text.push('\n');
        }
        let labels: Vec<String> = samples
            .iter()
            .map(|s| age_label(now - s.unix_seconds))
            .collect();
        // One label per column, written vertically as Redis does.
        let height = labels.iter().map(String::len).max().unwrap_or(0);
        for row in 0..height {
            let line: String = labels
                .iter()
                .map(|l| l.as_bytes().get(row).map_or(' ', |&b| b as char))
                .collect();
            text.push_str(line.trim_end());
            text.push('\n');
        }
        text
    }

    /// LATENCY DOCTOR: a short report, per event, of what was seen and what may cause it.
    pub fn doctor(&self, threshold_ms: u64) -> String {
        if threshold_ms == 0 && self.events.is_empty() {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this \
                    Redis instance. You may use \"CONFIG SET latency-monitor-threshold \
                    <milliseconds>.\" in order to enable it. If we weren't in a deep space \
                    mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n"
                .to_string();
        }
        if self.events.is_empty() {
            return "Dave, no latency spike was observed during the lifetime of this Redis \
                    instance, not in the slightest bit. I honestly think you ought to sit down \
                    calmly, take a stress pill, and think things over.\n"
                .to_string();
        }
        let mut text = String::from(
            "Dave, I have observed latency spikes in this Redis instance. You don't mind \
             talking about it, do you Dave?\n\n",
        );
        for (index, (event, series)) in self.events().enumerate() {
            let samples: Vec<Sample> = series.samples().collect();
            let average =
                samples.iter().map(|s| s.latency_ms).sum::<u64>() / samples.len().max(1) as u64;
            text.push_str(&format!(
                "{}. {event}: {} latency spikes (average {average}ms, worst all time {}ms).\n",
                index + 1,
                samples.len(),
                series.max_ms
            ));
        }
        text.push_str("\nI have a few advices for you:\n\n");
        for (event, _) in self.events() {
            let advice = match event {
                "command" => {
                    "- Check your slow log (SLOWLOG GET) for slow commands: O(N) commands on \
                     big values or KEYS over a large keyspace block the server while they run."
                }
                "fast-command" => {
                    "- Fast commands were slow: the machine itself may be overloaded or \
                     swapping; check its CPU and memory."
                }
                "expire-cycle" => {
                    "- Many keys expire at the same moment: spread the expiry times of keys \
                     written together."
                }
                "eviction-cycle" => {
                    "- Eviction under maxmemory took long: raise maxmemory, or lower \
                     maxmemory-eviction-tenacity."
                }
                _ => continue,
            };
            text.push_str(advice);
            text.push('\n');
        }
        text
    }
}

/// How long ago, as Redis labels graph columns: seconds, minutes, hours or days.
fn age_label(elapsed: i64) -> String {
    match elapsed {
        ..60 => format!("{elapsed}s"),
        60..3600 => format!("{}m", elapsed / 60),
        3600..86400 => format!("{}h", elapsed / 3600),
        _ => format!("{}d", elapsed / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst() {
        let mut monitor = LatencyMonitor::default();
        monitor.add("command", 5, 100);
        monitor.add("command", 9, 100);
        monitor.add("command", 3, 101);
        let (_, series) = monitor.series(b"command").unwrap();
        let samples: Vec<_> = series.samples().map(|s| s.latency_ms).collect();
        assert_eq!(samples, vec![9, 3]);
        assert_eq!(series.max_ms, 9);
        assert_eq!(series.latest().latency_ms, 3);
    }

    #[test]
    fn ring_keeps_the_last_160() {
        let mut monitor = LatencyMonitor::default();
        for second in 1..=200 {
            monitor.add("expire-cycle", second as u64, second);
        }
        let (_, series) = monitor.series(b"expire-cycle").unwrap();
        let samples: Vec<_> = series.samples().collect();
        assert_eq!(samples.len(), SAMPLES);
        assert_eq!(samples[0].unix_seconds, 41);
        assert_eq!(monitor.reset(Some(b"nope")), 0);
        assert_eq!(monitor.reset(None), 1);
    }

    #[test]
    fn below_threshold_or_off_is_not_recorded() {
        let mut monitor = LatencyMonitor::default();
        monitor.add_if_needed(0, "command", 500);
        monitor.add_if_needed(100, "command", 99);
        assert_eq!(monitor.events().count(), 0);
        monitor.add_if_needed(100, "command", 100);
        assert_eq!(monitor.events().count(), 1);
    }
}
