//! Replication's commands in the differential stream, on two masters without replicas:
//! WAIT (its argument errors, and the count it answers — none acknowledged — right away
//! or after a short timeout; never a positive count with no timeout, which would wait
//! forever on both), ROLE, and REPLCONF's options and their errors (not ACK or GETACK,
//! which a master does not answer at all). PSYNC and SYNC would make the connection a
//! replica: they are `tests/replication.rs`'s.

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

impl Gen {
    pub(super) fn replication_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        match self.rng.random_range(0..6) {
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
