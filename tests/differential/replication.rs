//! Replication's commands in the differential stream, on two masters without replicas:
//! WAIT (its argument errors, and the count it answers — none acknowledged — right away
//! or after a short timeout; never a positive count with no timeout, which would wait
//! forever on both), ROLE, and REPLCONF's options and their errors (not ACK or GETACK,
//! which a master does not answer at all), FAILOVER's argument errors and refusals (with
//! no replica none starts: every form is refused, by its arguments or for want of
//! replicas; ABORT finds none in progress). PSYNC and SYNC would make the connection a
//! replica: they are `tests/replication.rs`'s, FAILOVER's effects `tests/failover.rs`'s.

use super::{Check, Gen, Step};
use rand::RngExt;

const REPLCONF_OPTIONS: &[&str] = &[
    "listening-port",
    "ip-address",
    "capa",
    "rdb-only",
    "rdb-filter-only",
    "nosuchoption",
];

const REPLCONF_VALUES: &[&str] = &[
    "6380",
    "-1",
    "abc",
    "eof",
    "psync2",
    "nosuchcapa",
    "0",
    "1",
    "2",
    "functions",
    "",
    "127.0.0.1",
];

/// FAILOVER's words, well-formed and not.
const FAILOVER_WORDS: &[&str] = &["to", "force", "abort", "timeout", "bogus"];

impl Gen {
    pub(super) fn replication_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        match self.rng.random_range(0..7) {
            0..3 => {
                args.push(self.word("wait"));
                match self.rng.random_range(0..4) {
                    0 => {
                        let (replicas, timeout) = (self.range(-2, 1), self.range(0, 3));
                        args.push(self.num(replicas));
                        args.push(self.num(timeout));
                    }
                    1 => {
                        let (replicas, timeout) = (self.range(1, 4), self.range(1, 6));
                        args.push(self.num(replicas));
                        args.push(self.num(timeout));
                    }
                    2 => {
                        args.push(self.bad_int());
                        args.push(self.num(1));
                    }
                    _ => {
                        args.push(self.num(1));
                        let timeout = if self.chance(0.5) {
                            self.bad_int()
                        } else {
                            let negative = -self.range(1, 100);
                            self.num(negative)
                        };
                        args.push(timeout);
                    }
                }
            }
            3 => args.push(self.word("role")),
            4 => {
                args.push(self.word("failover"));
                for _ in 0..self.rng.random_range(0..4) {
                    let word = self.pick(FAILOVER_WORDS);
                    args.push(self.word(word));
                    match word {
                        "to" if self.chance(0.8) => {
                            args.push(b"127.0.0.1".to_vec());
                            if self.chance(0.8) {
                                let port = self.range(-1, 70000);
                                args.push(self.num(port));
                            } else {
                                args.push(self.bad_int());
                            }
                        }
                        "timeout" if self.chance(0.8) => {
                            if self.chance(0.8) {
                                let timeout = self.range(-2, 1000);
                                args.push(self.num(timeout));
                            } else {
                                args.push(self.bad_int());
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {
                args.push(self.word("replconf"));
                for _ in 0..self.rng.random_range(0..3) {
                    let option = self.pick(REPLCONF_OPTIONS);
                    args.push(self.word(option));
                    args.push(self.pick(REPLCONF_VALUES).as_bytes().to_vec());
                }
                if self.chance(0.1) {
                    args.push(self.word("capa")); // an option without its value
                }
            }
        }
        vec![Step {
            args,
            check: Check::Exact,
        }]
    }
}
