//! The set family of the differential stream: every set command, valid and invalid, over
//! the shared keys and a small pool of members (integers, so that intsets form and then
//! convert, and strings).
//!
//! Member order is each server's own once a set is a table, so member lists are compared
//! as sorted multisets; random picks (SPOP, SRANDMEMBER) are checked against the set as
//! it was, and an SPOP resets its key to the same remainder on both servers (`picks`).

use super::{Check, Gen, Reply, Step, full_scan_members, picks};
use rand::RngExt;
use redis::Value;

const MEMBERS: &[&str] = &[
    "1",
    "2",
    "3",
    "10",
    "-5",
    "007",
    "a",
    "b",
    "c",
    "hello",
    "",
    "9223372036854775807",
];

impl Gen {
    fn member(&mut self) -> Vec<u8> {
        self.pick(MEMBERS).as_bytes().to_vec()
    }

    pub(super) fn set_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        let mut check = Check::Exact;
        match self.rng.random_range(0..100) {
            0..25 => {
                args.push(self.word("sadd"));
                args.push(self.key());
                for _ in 0..self.rng.random_range(1..=5) {
                    args.push(self.member());
                }
            }
            25..33 => {
                args.push(self.word("srem"));
                args.push(self.key());
                for _ in 0..self.rng.random_range(1..=3) {
                    args.push(self.member());
                }
            }
            33..40 => {
                let name = self.pick(&["scard", "sismember", "smismember"]);
                args.push(self.word(name));
                args.push(self.key());
                if name != "scard" {
                    args.push(self.member());
                }
                if name == "smismember" {
                    args.push(self.member());
                }
            }
            40..46 => {
                check = Check::Compare(same_members);
                args.push(self.word("smembers"));
                args.push(self.key());
            }
            46..52 => {
                check = Check::Run(picks::spop);
                args.push(self.word("spop"));
                args.push(self.key());
                if self.chance(0.6) {
                    let count = match self.rng.random_range(0..5) {
                        0 => self.bad_int(),
                        1 => b"-1".to_vec(),
                        _ => {
                            let n = self.range(0, 6);
                            self.num(n)
                        }
                    };
                    args.push(count);
                }
                return self.pick_steps(Step { args, check }, "sadd", |g| vec![g.member()]);
            }
            52..58 => {
                check = Check::Run(picks::srandmember);
                args.push(self.word("srandmember"));
                args.push(self.key());
                if self.chance(0.7) {
                    let count = match self.rng.random_range(0..5) {
                        0 => self.bad_int(),
                        1 => b"-9223372036854775808".to_vec(),
                        _ => {
                            let n = self.range(-6, 15);
                            self.num(n)
                        }
                    };
                    args.push(count);
                }
                return self.pick_steps(Step { args, check }, "sadd", |g| vec![g.member()]);
            }
            58..66 => {
                args.push(self.word("smove"));
                args.push(self.key());
                args.push(self.key());
                args.push(self.member());
            }
            66..80 => {
                let name = self.pick(&["sinter", "sunion", "sdiff"]);
                check = Check::Compare(same_members);
                args.push(self.word(name));
                args.extend(self.keys(1, 3));
            }
            80..90 => {
                let name = self.pick(&["sinterstore", "sunionstore", "sdiffstore"]);
                args.push(self.word(name));
                args.push(self.key());
                args.extend(self.keys(1, 3));
            }
            90..95 => {
                args.push(self.word("sintercard"));
                let keys = self.keys(1, 3);
                let numkeys = match self.rng.random_range(0..8) {
                    0 => b"0".to_vec(),
                    1 => self.bad_int(),
                    2 => self.num(keys.len() as i64 + 1),
                    _ => self.num(keys.len() as i64),
                };
                args.push(numkeys);
                args.extend(keys);
                if self.chance(0.4) {
                    args.push(self.word("limit"));
                    let limit = self.pick(&["0", "1", "2", "-1", "abc"]);
                    args.push(limit.as_bytes().to_vec());
                }
                if self.chance(0.05) {
                    args.push(b"foo".to_vec());
                }
            }
            _ => {
                check = Check::Run(full_scan_members);
                args = self.collection_scan("sscan", &["*", "1*", "?", "[ab]", "h*"]);
            }
        }
        vec![Step { args, check }]
    }
}

fn sorted(items: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = items.iter().map(|v| format!("{v:?}")).collect();
    out.sort();
    out
}

/// Member lists: the same members in any order.
fn same_members(ours: &Reply, theirs: &Reply) -> bool {
    match (ours, theirs) {
        (Ok(Value::Array(a)), Ok(Value::Array(b))) | (Ok(Value::Set(a)), Ok(Value::Set(b))) => {
            sorted(a) == sorted(b)
        }
        _ => ours == theirs,
    }
}
