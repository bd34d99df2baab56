//! Blocking commands in the differential stream. With one connection nothing else can
//! wake a blocked client, so every blocking command gets a short timeout: it takes at
//! once when something is there, or waits the few milliseconds and answers a null array
//! (both servers alike). Bad timeouts exercise the parser; inside a transaction (the
//! transaction step picks these too) nothing blocks.

use super::{Check, Gen, Step};
use rand::RngExt;

const TIMEOUTS: &[&str] = &["0.01", "0.01", "0.02", "-1", "abc", "1e400", "inf", ""];

impl Gen {
    fn timeout(&mut self) -> Vec<u8> {
        self.pick(TIMEOUTS).as_bytes().to_vec()
    }

    pub(super) fn blocking_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        match self.rng.random_range(0..6) {
            0 => {
                let name = self.pick(&["blpop", "brpop", "bzpopmin", "bzpopmax"]);
                args.push(self.word(name));
                args.extend(self.keys(1, 3));
                args.push(self.timeout());
            }
            1 => {
                args.push(self.word("blmove"));
                args.push(self.key());
                args.push(self.key());
                args.push(self.pick(&["LEFT", "right", "up"]).as_bytes().to_vec());
                args.push(self.pick(&["LEFT", "RIGHT"]).as_bytes().to_vec());
                args.push(self.timeout());
            }
            2 => {
                args.push(self.word("brpoplpush"));
                args.push(self.key());
                args.push(self.key());
                args.push(self.timeout());
            }
            _ => {
                let list = self.chance(0.5);
                args.push(self.word(if list { "blmpop" } else { "bzmpop" }));
                args.push(self.timeout());
                let keys = self.keys(1, 3);
                let numkeys = if self.chance(0.9) {
                    self.num(keys.len() as i64)
                } else {
                    self.pick(&["0", "abc", "9"]).as_bytes().to_vec()
                };
                args.push(numkeys);
                args.extend(keys);
                let side = if list {
                    self.pick(&["LEFT", "RIGHT", "foo"])
                } else {
                    self.pick(&["MIN", "MAX", "foo"])
                };
                args.push(side.as_bytes().to_vec());
                if self.chance(0.4) {
                    args.push(self.word("count"));
                    let count = self.pick(&["1", "3", "0", "abc"]);
                    args.push(count.as_bytes().to_vec());
                }
            }
        }
        vec![Step {
            args,
            check: Check::Exact,
        }]
    }
}
