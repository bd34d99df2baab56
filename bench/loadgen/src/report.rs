//! What the load measured, as files: a CSV with one row per second and a JSON document with
//! the totals, the whole run's histograms and one raw histogram per interval (100 ms by
//! default), so that windows of the run can be merged exactly — adding bucket counts —
//! rather than by averaging percentiles.
//!
//! Every figure of a second or an interval is about the requests **due** in it (their
//! intended send time), except `received` in the CSV: replies that arrived in that second,
//! whatever they answered (the server's throughput as the client saw it).

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use hdrhistogram::Histogram;

use crate::load::{FLAG_ERROR, FLAG_NIL, FLAG_SET, LoadResult, Sample, histogram};

/// The load's parameters, as the JSON repeats them.
pub struct Params {
    pub host: String,
    pub port: u16,
    pub connections: usize,
    pub threads: usize,
    pub rate: f64,
    pub duration_s: f64,
    pub keyspace: u64,
    pub value_size: usize,
    pub set_ratio: f64,
    pub seed: u64,
    pub interval_ms: u64,
    pub late_threshold_us: u64,
    pub timer_slack_ns: Option<u64>,
}

/// The whole run, reduced.
pub struct Totals {
    pub all: Histogram<u64>,
    pub set: Histogram<u64>,
    pub get: Histogram<u64>,
    pub ok: u64,
    pub errors: u64,
    pub nil: u64,
    pub late: u64,
}

pub fn totals(result: &LoadResult) -> Totals {
    let mut t = Totals {
        all: histogram(),
        set: histogram(),
        get: histogram(),
        ok: 0,
        errors: 0,
        nil: 0,
        late: 0,
    };
    for s in &result.samples {
        if s.flags & FLAG_ERROR != 0 {
            t.errors += 1;
            continue;
        }
        t.ok += 1;
        if s.flags & FLAG_NIL != 0 {
            t.nil += 1;
        }
        let v = u64::from(s.latency_us);
        t.all.saturating_record(v);
        if s.flags & FLAG_SET != 0 {
            t.set.saturating_record(v);
        } else {
            t.get.saturating_record(v);
        }
    }
    t.late = result.send_bins.iter().map(|b| b.late).sum();
    t
}

fn quantile(h: &Histogram<u64>, q: f64) -> Option<u64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q))
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "null".to_string(), |v| v.to_string())
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `{"count":..,"p50":..,...,"max":..,"mean":..}` of a histogram, in µs.
fn summary(h: &Histogram<u64>) -> String {
    let mut s = format!("{{\"count\":{}", h.len());
    for (name, q) in [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p99", 0.99),
        ("p99.9", 0.999),
        ("p99.99", 0.9999),
    ] {
        let _ = write!(s, ",\"{name}\":{}", opt(quantile(h, q)));
    }
    let (max, mean) = if !h.is_empty() {
        (Some(h.max()), format!("{:.1}", h.mean()))
    } else {
        (None, "null".to_string())
    };
    let _ = write!(s, ",\"max\":{},\"mean\":{mean}}}", opt(max));
    s
}

/// `[[v,n],...]`: each recorded bucket's highest value and its count. Buckets of
/// histograms with the same bounds and precision line up, so windows merge by adding the
/// counts of equal v.
fn buckets(h: &Histogram<u64>) -> String {
    let mut s = String::from("[");
    for (i, v) in h.iter_recorded().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "[{},{}]", v.value_iterated_to(), v.count_at_value());
    }
    s.push(']');
    s
}

/// Writes the CSV (`csv`) and the JSON document (`json`), either may be absent. Sorts the
/// samples by due time.
pub fn write(
    result: &mut LoadResult,
    totals: &Totals,
    params: &Params,
    csv: Option<&Path>,
    json: Option<&Path>,
) -> io::Result<()> {
    let interval_us = params.interval_ms * 1000;
    let per_second = (1000 / params.interval_ms) as usize;
    result.samples.sort_unstable_by_key(|s| s.due_us);
    let nbins = result.send_bins.len();

    let mut csv = match csv {
        Some(p) => Some(BufWriter::new(File::create(p)?)),
        None => None,
    };
    let mut json = match json {
        Some(p) => Some(BufWriter::new(File::create(p)?)),
        None => None,
    };
    if let Some(w) = csv.as_mut() {
        writeln!(
            w,
            "second,sent,completed,errors,p50_us,p99_us,p999_us,max_us,late,max_late_us,received"
        )?;
    }
    // Replies by arrival second.
    let mut received: Vec<u64> = Vec::new();
    for s in &result.samples {
        let at = ((u64::from(s.due_us) + u64::from(s.latency_us)) / 1_000_000) as usize;
        if received.len() <= at {
            received.resize(at + 1, 0);
        }
        received[at] += 1;
    }

    if let Some(w) = json.as_mut() {
        let lat = &result.lateness;
        let cpu = match result.cpu_seconds {
            Some(c) => format!(
                "{{\"seconds\":{c:.2},\"wall_seconds\":{:.2},\"percent_of_one_core\":{:.1}}}",
                result.wall_seconds,
                100.0 * c / result.wall_seconds.max(1e-9)
            ),
            None => "null".to_string(),
        };
        let errors: Vec<String> = result
            .error_texts
            .iter()
            .map(|(t, n)| format!("[{},{n}]", json_str(t)))
            .collect();
        let conn_errors: Vec<String> = result
            .connection_errors
            .iter()
            .map(|t| json_str(t))
            .collect();
        write!(
            w,
            "{{\"format\":\"tessera-loadgen 1\",\"start_unix_us\":{},\"end_s\":{:.6},\
             \"params\":{{\"host\":{},\"port\":{},\"connections\":{},\"threads\":{},\"rate\":{},\"duration_s\":{},\
             \"keyspace\":{},\"value_size\":{},\"set_ratio\":{},\"seed\":{},\"interval_ms\":{},\"late_threshold_us\":{},\
             \"timer_slack_ns\":{}}},\
             \"histogram\":{{\"unit\":\"us\",\"lowest\":1,\"highest\":{},\"significant_digits\":{}}},\
             \"totals\":{{\"scheduled\":{},\"sent\":{},\"unsent\":{},\"completed\":{},\"ok\":{},\"errors\":{},\"nil\":{},\
             \"incomplete\":{},\"lost\":{},\"late_sends\":{}}},\
             \"latency_us\":{},\"set_latency_us\":{},\"get_latency_us\":{},\
             \"lateness_us\":{{\"p50\":{},\"p99\":{},\"p99.9\":{},\"max\":{}}},\"cpu\":{},\
             \"error_replies\":[{}],\"connection_errors\":[{}],\"hist\":{},\"interval_s\":{},\"intervals\":[",
            result.start_unix_us,
            result.end_ns as f64 / 1e9,
            json_str(&params.host),
            params.port,
            params.connections,
            params.threads,
            params.rate,
            params.duration_s,
            params.keyspace,
            params.value_size,
            params.set_ratio,
            params.seed,
            params.interval_ms,
            params.late_threshold_us,
            opt(params.timer_slack_ns),
            crate::load::HIGHEST_US,
            crate::load::SIGFIGS,
            result.scheduled,
            result.sent,
            result.unsent,
            result.samples.len(),
            totals.ok,
            totals.errors,
            totals.nil,
            result.incomplete,
            result.lost,
            totals.late,
            summary(&totals.all),
            summary(&totals.set),
            summary(&totals.get),
            opt(quantile(lat, 0.5)),
            opt(quantile(lat, 0.99)),
            opt(quantile(lat, 0.999)),
            opt((!lat.is_empty()).then(|| lat.max())),
            cpu,
            errors.join(","),
            conn_errors.join(","),
            buckets(&totals.all),
            params.interval_ms as f64 / 1000.0,
        )?;
    }

    let mut h = histogram();
    let mut second = histogram();
    let mut sec = SecondRow::default();
    let mut next = 0usize;
    let samples: &[Sample] = &result.samples;
    for (i, send) in result.send_bins.iter().enumerate() {
        let limit = (i as u64 + 1) * interval_us;
        h.reset();
        let (mut completed, mut errors, mut max_us) = (0u64, 0u64, None::<u64>);
        while next < samples.len() && (u64::from(samples[next].due_us) < limit || i + 1 == nbins) {
            let s = samples[next];
            next += 1;
            completed += 1;
            if s.flags & FLAG_ERROR != 0 {
                errors += 1;
            } else {
                h.saturating_record(u64::from(s.latency_us));
                max_us = Some(max_us.unwrap_or(0).max(u64::from(s.latency_us)));
            }
        }
        let max_late_us = send.max_late_ns / 1000;
        if let Some(w) = json.as_mut() {
            write!(
                w,
                "{}{{\"i\":{i},\"sent\":{},\"completed\":{completed},\"errors\":{errors},\"late\":{},\"max_late_us\":{max_late_us},\"max_us\":{},\"hist\":{}}}",
                if i > 0 { "," } else { "" },
                send.sent,
                send.late,
                opt(max_us),
                buckets(&h)
            )?;
        }
        second.add(&h).expect("same bounds");
        sec.sent += send.sent;
        sec.completed += completed;
        sec.errors += errors;
        sec.late += send.late;
        sec.max_late_us = sec.max_late_us.max(max_late_us);
        sec.max_us = match (sec.max_us, max_us) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if (i + 1) % per_second == 0 || i + 1 == nbins {
            let index = i / per_second;
            if let Some(w) = csv.as_mut() {
                writeln!(
                    w,
                    "{index},{},{},{},{},{},{},{},{},{},{}",
                    sec.sent,
                    sec.completed,
                    sec.errors,
                    opt_csv(quantile(&second, 0.5)),
                    opt_csv(quantile(&second, 0.99)),
                    opt_csv(quantile(&second, 0.999)),
                    opt_csv(sec.max_us),
                    sec.late,
                    sec.max_late_us,
                    received.get(index).copied().unwrap_or(0)
                )?;
            }
            second.reset();
            sec = SecondRow::default();
        }
    }
    if let Some(mut w) = json {
        writeln!(w, "]}}")?;
        w.flush()?;
    }
    if let Some(mut w) = csv {
        w.flush()?;
    }
    Ok(())
}

#[derive(Default)]
struct SecondRow {
    sent: u64,
    completed: u64,
    errors: u64,
    late: u64,
    max_late_us: u64,
    max_us: Option<u64>,
}

fn opt_csv(v: Option<u64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_merge_exactly() {
        // Two windows' buckets, added by value, give the histogram of both windows.
        let (mut a, mut b, mut both) = (histogram(), histogram(), histogram());
        for v in [1u64, 5, 100, 1_000, 1_234, 50_000, 3_000_000] {
            a.record(v).unwrap();
            both.record(v).unwrap();
        }
        for v in [5u64, 99, 1_235, 7_000_000] {
            b.record(v).unwrap();
            both.record(v).unwrap();
        }
        let parse = |s: String| -> Vec<(u64, u64)> {
            s.trim_matches(|c| c == '[' || c == ']')
                .split("],[")
                .map(|p| {
                    let (v, n) = p.split_once(',').unwrap();
                    (v.parse().unwrap(), n.parse().unwrap())
                })
                .collect()
        };
        let mut merged = std::collections::BTreeMap::new();
        for (v, n) in parse(buckets(&a)).into_iter().chain(parse(buckets(&b))) {
            *merged.entry(v).or_insert(0) += n;
        }
        let merged: Vec<(u64, u64)> = merged.into_iter().collect();
        assert_eq!(merged, parse(buckets(&both)));
        // And a quantile read off the merged buckets (first bucket whose running count
        // reaches ceil(q * total)) is the histogram's own.
        let total: u64 = merged.iter().map(|p| p.1).sum();
        for q in [0.5, 0.9, 0.99, 0.999] {
            let rank = ((q * total as f64).ceil() as u64).max(1);
            let mut run = 0;
            let v = merged.iter().find(|p| {
                run += p.1;
                run >= rank
            });
            assert_eq!(v.unwrap().0, both.value_at_quantile(q), "q {q}");
        }
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("ERR \"x\"\\\n"), "\"ERR \\\"x\\\"\\\\\\u000a\"");
    }
}
