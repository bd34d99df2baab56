//! The consumer-group family of the differential stream: XGROUP (every subcommand),
//! XREADGROUP (`>` and history, COUNT, NOACK, a short BLOCK), XACK, XPENDING (summary and
//! extended, IDLE, consumer), XCLAIM (every option), XAUTOCLAIM and XINFO (STREAM, FULL,
//! GROUPS, CONSUMERS), valid and invalid, with XADD, XDEL, XTRIM and XSETID to move the
//! streams under the groups, over keys of its own (so groups live long enough to hold
//! pending entries) and now and then the shared ones (WRONGTYPE, and groups meeting the
//! other families' commands).
//!
//! Times: replies that hold a server's clock (XPENDING's idle times, XINFO CONSUMERS'
//! idle, XINFO STREAM FULL's delivery and seen times) are compared with those blanked
//! (`same_but_times`). Idle thresholds (XPENDING IDLE, min-idle-time) and the times
//! XCLAIM sets (IDLE, TIME) are 0 or far apart from each other (days, or before 2002),
//! so that the few milliseconds between the two servers' clocks never decide a claim.
//! IDs are explicit (never `*`, which reads the clock). BLOCK is a few milliseconds:
//! nothing else can wake this connection, so a read finds entries at once or times out
//! on both.

use super::{Check, Gen, Reply, Step};
use rand::RngExt;
use redis::Value;

/// Keys mostly left to this family; the shared keys now and then.
const GROUP_KEYS: &[&str] = &["gs0", "gs1", "{t}gs"];
const GROUPS: &[&str] = &["g1", "g2", "grp", ""];
const CONSUMERS: &[&str] = &["alice", "bob", "carol", "", "Alice"];

impl Gen {
    /// Mostly one key, so that its groups see most of the traffic.
    fn group_key(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0..14 => GROUP_KEYS[0].as_bytes().to_vec(),
            14..18 => self.pick(&GROUP_KEYS[1..]).as_bytes().to_vec(),
            _ => self.key(),
        }
    }

    /// Mostly one group, so that it holds pending entries.
    fn group_name(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0..15 => GROUPS[0].as_bytes().to_vec(),
            15..19 => self.pick(&GROUPS[1..]).as_bytes().to_vec(),
            _ => b"nosuch".to_vec(),
        }
    }

    fn consumer_name(&mut self) -> Vec<u8> {
        self.pick(CONSUMERS).as_bytes().to_vec()
    }

    /// An entry ID: mostly `<ms>-<seq>` in a small range; special and broken forms now
    /// and then.
    fn entry_id(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..40) {
            0 => self.pick(&["-", "+", "0", "0-0"]).as_bytes().to_vec(),
            1 => self
                .pick(&[
                    "abc",
                    "1-",
                    "-5",
                    "1-2-3",
                    "",
                    "18446744073709551615-18446744073709551615",
                    " 5",
                    "(3-0",
                ])
                .as_bytes()
                .to_vec(),
            2..5 => self.range(0, 60).to_string().into_bytes(),
            _ => format!("{}-{}", self.range(0, 60), self.range(0, 3)).into_bytes(),
        }
    }

    /// Several entry IDs (one at least).
    fn entry_ids(&mut self, max: usize) -> Vec<Vec<u8>> {
        let n = self.rng.random_range(1..=max);
        (0..n).map(|_| self.entry_id()).collect()
    }

    /// A range bound for XPENDING / XAUTOCLAIM: an ID, `-` / `+`, or exclusive.
    fn range_bound(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..6) {
            0 => b"-".to_vec(),
            1 => b"+".to_vec(),
            2 => {
                let mut bound = b"(".to_vec();
                bound.extend(self.entry_id());
                bound
            }
            _ => self.entry_id(),
        }
    }

    /// A count argument: mostly small, sometimes none at all, zero or negative.
    fn group_count(&mut self) -> Vec<u8> {
        self.pick(&["1", "2", "3", "5", "10", "0", "-1", "x", "100"])
            .as_bytes()
            .to_vec()
    }

    /// A minimum idle time: 0, or days (every entry claimed since the run began is
    /// younger; entries XCLAIM dated back are older).
    fn min_idle(&mut self) -> Vec<u8> {
        self.pick(&["0", "0", "0", "0", "864000000", "864000000", "-5", "x"])
            .as_bytes()
            .to_vec()
    }

    pub(super) fn stream_group_step(&mut self) -> Vec<Step> {
        let mut check = Check::Compare(same_but_times);
        let mut args = Vec::new();
        match self.rng.random_range(0..100) {
            // Entries under the groups.
            0..16 => {
                args.push(self.word("xadd"));
                args.push(self.group_key());
                let ms = self.range(0, 60);
                args.push(if self.chance(0.5) {
                    format!("{ms}-*").into_bytes()
                } else {
                    format!("{ms}-{}", self.range(0, 3)).into_bytes()
                });
                for _ in 0..self.rng.random_range(1..3) {
                    args.push(self.pick(&["f", "g", "name"]).as_bytes().to_vec());
                    args.push(self.value());
                }
            }
            16..19 => {
                args.push(self.word("xdel"));
                args.push(self.group_key());
                args.extend(self.entry_ids(3));
            }
            19..21 => {
                args.push(self.word("xtrim"));
                args.push(self.group_key());
                args.push(self.word("maxlen"));
                args.push(self.range(0, 10).to_string().into_bytes());
            }
            21 => {
                args.push(self.word("xsetid"));
                args.push(self.group_key());
                args.push(format!("{}-0", self.range(0, 80)).into_bytes());
            }
            22 => {
                // A fresh start now and then, so that IDs fit again.
                args.push(self.word("del"));
                args.push(self.group_key());
            }
            23..32 => args = self.xgroup_args(),
            32..50 => args = self.xreadgroup_args(),
            50..56 => {
                args.push(self.word("xack"));
                args.push(self.group_key());
                args.push(self.group_name());
                args.extend(self.entry_ids(4));
            }
            56..64 => args = self.xpending_args(),
            64..73 => args = self.xclaim_args(),
            73..80 => args = self.xautoclaim_args(),
            80..100 => {
                args.push(self.word("xinfo"));
                match self.rng.random_range(0..10) {
                    0..3 => {
                        args.push(self.word("groups"));
                        args.push(self.group_key());
                    }
                    3..5 => {
                        args.push(self.word("consumers"));
                        args.push(self.group_key());
                        args.push(self.group_name());
                    }
                    5..7 => {
                        args.push(self.word("stream"));
                        args.push(self.group_key());
                    }
                    7..9 => {
                        args.push(self.word("stream"));
                        args.push(self.group_key());
                        args.push(self.word("full"));
                        if self.chance(0.5) {
                            args.push(self.word("count"));
                            args.push(self.group_count());
                        }
                    }
                    _ => {
                        let sub = self.pick(&["help", "nosuch", "stream"]);
                        args.push(self.word(sub));
                        if self.chance(0.5) {
                            args.push(self.group_key());
                        }
                    }
                }
            }
            _ => unreachable!(),
        }
        if args.is_empty() {
            check = Check::Exact;
            args.push(b"PING".to_vec());
        }
        let mut steps = Vec::new();
        // Other families flush, swap and select databases: the main group is made again
        // often (BUSYGROUP when it is there), so that most commands find one.
        if self.chance(0.3) {
            steps.push(Step {
                args: vec![
                    self.word("xgroup"),
                    self.word("create"),
                    GROUP_KEYS[0].as_bytes().to_vec(),
                    GROUPS[0].as_bytes().to_vec(),
                    b"0".to_vec(),
                    self.word("mkstream"),
                ],
                check: Check::Exact,
            });
        }
        steps.push(Step { args, check });
        steps
    }

    fn xgroup_args(&mut self) -> Vec<Vec<u8>> {
        let mut args = vec![self.word("xgroup")];
        let key = self.group_key();
        let group = self.group_name();
        match self.rng.random_range(0..12) {
            0..4 => {
                args.extend([self.word("create"), key, group]);
                args.push(if self.chance(0.3) {
                    b"$".to_vec()
                } else {
                    self.entry_id()
                });
                if self.chance(0.8) {
                    args.push(self.word("mkstream"));
                }
                if self.chance(0.3) {
                    args.push(self.word("entriesread"));
                    args.push(
                        self.pick(&["0", "3", "-1", "-2", "100", "x"])
                            .as_bytes()
                            .to_vec(),
                    );
                }
            }
            4..6 => {
                args.extend([self.word("setid"), key, group]);
                args.push(if self.chance(0.3) {
                    b"$".to_vec()
                } else {
                    self.entry_id()
                });
                if self.chance(0.4) {
                    args.push(self.word("entriesread"));
                    args.push(self.pick(&["0", "2", "-1", "-3", "9"]).as_bytes().to_vec());
                }
            }
            6 => args.extend([self.word("destroy"), key, group]),
            7 | 8 => args.extend([
                self.word("createconsumer"),
                key,
                group,
                self.consumer_name(),
            ]),
            9 | 10 => args.extend([self.word("delconsumer"), key, group, self.consumer_name()]),
            _ => {
                let sub = self.pick(&["help", "nosuch", "create", "destroy"]);
                args.push(self.word(sub));
                if self.chance(0.5) {
                    args.push(key);
                }
            }
        }
        args
    }

    fn xreadgroup_args(&mut self) -> Vec<Vec<u8>> {
        let mut args = vec![self.word("xreadgroup")];
        if self.chance(0.97) {
            args.extend([self.word("group"), self.group_name(), self.consumer_name()]);
        }
        if self.chance(0.5) {
            args.push(self.word("count"));
            args.push(self.group_count());
        }
        if self.chance(0.2) {
            args.push(self.word("noack"));
        }
        if self.chance(0.15) {
            args.push(self.word("block"));
            args.push(self.pick(&["1", "5", "-1", "x"]).as_bytes().to_vec());
        }
        args.push(self.word("streams"));
        let n = if self.chance(0.85) { 1 } else { 2 };
        let keys: Vec<Vec<u8>> = (0..n).map(|_| self.group_key()).collect();
        args.extend(keys);
        for _ in 0..n {
            args.push(match self.rng.random_range(0..10) {
                0..6 => b">".to_vec(),
                6 => b"$".to_vec(),
                _ => self.entry_id(),
            });
        }
        if self.chance(0.03) {
            args.pop(); // Unbalanced.
        }
        args
    }

    fn xpending_args(&mut self) -> Vec<Vec<u8>> {
        let mut args = vec![self.word("xpending"), self.group_key(), self.group_name()];
        if self.chance(0.35) {
            return args;
        }
        if self.chance(0.3) {
            args.push(self.word("idle"));
            args.push(self.min_idle());
        }
        args.push(self.range_bound());
        args.push(self.range_bound());
        args.push(self.group_count());
        if self.chance(0.4) {
            args.push(self.consumer_name());
        }
        if self.chance(0.03) {
            args.pop();
        }
        args
    }

    fn xclaim_args(&mut self) -> Vec<Vec<u8>> {
        let mut args = vec![
            self.word("xclaim"),
            self.group_key(),
            self.group_name(),
            self.consumer_name(),
            self.min_idle(),
        ];
        args.extend(self.entry_ids(3));
        for _ in 0..self.rng.random_range(0..3) {
            match self.rng.random_range(0..8) {
                0 => args.push(self.word("force")),
                1 => args.push(self.word("justid")),
                2 => {
                    args.push(self.word("idle"));
                    // Days ago, or now.
                    args.push(self.pick(&["0", "8640000000", "x"]).as_bytes().to_vec());
                }
                3 => {
                    args.push(self.word("time"));
                    // 1970, 2001, or the future (taken as now).
                    args.push(
                        self.pick(&["1", "1000000000000", "99999999999999", "-5"])
                            .as_bytes()
                            .to_vec(),
                    );
                }
                4 => {
                    args.push(self.word("retrycount"));
                    args.push(self.pick(&["0", "5", "-1", "x"]).as_bytes().to_vec());
                }
                5 => {
                    args.push(self.word("lastid"));
                    args.push(self.entry_id());
                }
                6 => args.push(self.word("bogus")),
                _ => args.push(self.word("force")),
            }
        }
        args
    }

    fn xautoclaim_args(&mut self) -> Vec<Vec<u8>> {
        let mut args = vec![
            self.word("xautoclaim"),
            self.group_key(),
            self.group_name(),
            self.consumer_name(),
            self.min_idle(),
            self.range_bound(),
        ];
        if self.chance(0.5) {
            args.push(self.word("count"));
            args.push(self.group_count());
        }
        if self.chance(0.4) {
            args.push(self.word("justid"));
        }
        args
    }
}

/// Replies equal once what depends on each server's clock is blanked: Unix-millisecond
/// times (integers past 2001), the value after `idle` or `seen-time`, and the idle time
/// of XPENDING's rows (the third of `[id, consumer, idle, count]`).
fn same_but_times(ours: &Reply, theirs: &Reply) -> bool {
    match (ours, theirs) {
        (Ok(a), Ok(b)) => blank(a.clone()) == blank(b.clone()),
        _ => ours == theirs,
    }
}

fn is_timed_key(value: &Value) -> bool {
    matches!(value, Value::BulkString(k) if k == b"idle" || k == b"seen-time")
        || matches!(value, Value::SimpleString(k) if k == "idle" || k == "seen-time")
}

fn blank(value: Value) -> Value {
    let time = || Value::SimpleString("<time>".into());
    match value {
        Value::Int(n) if n > 1_000_000_000_000 => time(),
        Value::Array(items) => {
            let pending_row = items.len() == 4
                && matches!(items[0], Value::BulkString(_))
                && matches!(items[1], Value::BulkString(_))
                && matches!(items[2], Value::Int(_))
                && matches!(items[3], Value::Int(_));
            let mut items: Vec<Value> = items.into_iter().map(blank).collect();
            if pending_row {
                items[2] = time();
            }
            for i in 1..items.len() {
                if is_timed_key(&items[i - 1]) {
                    items[i] = time();
                }
            }
            Value::Array(items)
        }
        Value::Map(pairs) => Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| {
                    let v = if is_timed_key(&k) { time() } else { blank(v) };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}
