//! The hash family of the differential stream: every hash command, valid and invalid,
//! over the shared keys (so other types give WRONGTYPE) and a small set of fields (so
//! commands meet each other's fields).
//!
//! Replies whose order Redis leaves to its table (HKEYS, HVALS, HGETALL once a hash is
//! a table; HSCAN) are compared as multisets of pairs; HRANDFIELD is checked against the
//! hash as it was (`picks`).

use super::{Check, Gen, Reply, Step, full_scan_pairs, picks};
use rand::RngExt;
use redis::Value;

const FIELDS: &[&str] = &["f0", "f1", "f2", "f3", "a", "b", "1", "-1", "10", "x y", ""];

impl Gen {
    fn field(&mut self) -> Vec<u8> {
        self.pick(FIELDS).as_bytes().to_vec()
    }

    pub(super) fn hash_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        let mut check = Check::Exact;
        match self.rng.random_range(0..100) {
            0..20 => {
                let name = if self.chance(0.8) { "hset" } else { "hmset" };
                args.push(self.word(name));
                args.push(self.key());
                for _ in 0..self.rng.random_range(1..=4) {
                    args.push(self.field());
                    args.push(self.value());
                }
            }
            20..25 => {
                args.push(self.word("hsetnx"));
                args.push(self.key());
                args.push(self.field());
                args.push(self.value());
            }
            25..35 => {
                args.push(self.word("hget"));
                args.push(self.key());
                args.push(self.field());
            }
            35..40 => {
                args.push(self.word("hmget"));
                args.push(self.key());
                for _ in 0..self.rng.random_range(1..=4) {
                    args.push(self.field());
                }
            }
            40..48 => {
                args.push(self.word("hdel"));
                args.push(self.key());
                for _ in 0..self.rng.random_range(1..=3) {
                    args.push(self.field());
                }
            }
            48..52 => {
                let name = self.pick(&["hlen", "hkeys", "hvals", "hgetall"]);
                if name != "hlen" {
                    check = Check::Compare(same_pairs_unordered);
                }
                args.push(self.word(name));
                args.push(self.key());
            }
            52..58 => {
                let name = self.pick(&["hexists", "hstrlen"]);
                args.push(self.word(name));
                args.push(self.key());
                args.push(self.field());
            }
            58..68 => {
                args.push(self.word("hincrby"));
                args.push(self.key());
                args.push(self.field());
                let increment = match self.rng.random_range(0..8) {
                    0 => self.bad_int(),
                    1 => b"9223372036854775807".to_vec(),
                    2 => b"-9223372036854775808".to_vec(),
                    _ => {
                        let n = self.range(-100, 100);
                        self.num(n)
                    }
                };
                args.push(increment);
            }
            68..76 => {
                args.push(self.word("hincrbyfloat"));
                args.push(self.key());
                args.push(self.field());
                let increment = if self.chance(0.7) {
                    format!("{}", self.range(-1000, 1000) as f64 / 8.0).into_bytes()
                } else {
                    self.pick(&[
                        "abc", "1e3", "inf", "-inf", "nan", "", " 1", "0x10", "1.5.5",
                    ])
                    .as_bytes()
                    .to_vec()
                };
                args.push(increment);
            }
            76..86 => {
                check = Check::Run(picks::hrandfield);
                args.push(self.word("hrandfield"));
                args.push(self.key());
                match self.rng.random_range(0..6) {
                    0 => {}
                    1 => args.push(self.bad_int()),
                    2 => {
                        let n = self.range(-5, 20);
                        args.push(self.num(n));
                        args.push(self.word("withvalues"));
                    }
                    3 => {
                        let n = self.range(-5, 20);
                        args.push(self.num(n));
                        args.push(self.pick(&["withvalue", "foo"]).as_bytes().to_vec());
                    }
                    _ => {
                        let n = self.range(-5, 20);
                        args.push(self.num(n));
                    }
                }
                let pick = Step { args, check };
                return self.pick_steps(pick, "hset", |g| vec![g.field(), g.value()]);
            }
            _ => {
                check = Check::Run(full_scan_pairs);
                args = self.collection_scan("hscan", &["*", "f*", "?", "[ab]", "x*"]);
                if self.chance(0.05) {
                    args.push(self.word("type"));
                    args.push(b"hash".to_vec());
                }
            }
        }
        vec![Step { args, check }]
    }
}

fn flat_pairs_sorted(items: &[Value], pair: bool) -> Vec<String> {
    let chunk = if pair { 2 } else { 1 };
    let mut out: Vec<String> = items.chunks(chunk).map(|c| format!("{c:?}")).collect();
    out.sort();
    out
}

/// HKEYS / HVALS / HGETALL: the same elements (pairs kept together), any order.
fn same_pairs_unordered(ours: &Reply, theirs: &Reply) -> bool {
    match (ours, theirs) {
        (Ok(Value::Array(a)), Ok(Value::Array(b))) => {
            a.len() == b.len() && {
                let pair = a.len() % 2 == 0;
                flat_pairs_sorted(a, pair) == flat_pairs_sorted(b, pair)
                    || flat_pairs_sorted(a, false) == flat_pairs_sorted(b, false)
            }
        }
        (Ok(Value::Map(a)), Ok(Value::Map(b))) => {
            let sorted = |m: &Vec<(Value, Value)>| {
                let mut v: Vec<String> = m.iter().map(|p| format!("{p:?}")).collect();
                v.sort();
                v
            };
            sorted(a) == sorted(b)
        }
        _ => ours == theirs,
    }
}
