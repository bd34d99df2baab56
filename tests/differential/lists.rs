//! The lists family of the differential stream: every non-blocking list command, valid
//! and invalid, over the shared keys (so other types give WRONGTYPE) and a small set of
//! elements (so LREM, LINSERT and LPOS find matches). Now and then a long push makes a
//! list span several quicklist nodes.

use super::{Gen, Step};
use rand::RngExt;

const ELEMENTS: &[&str] = &["a", "b", "c", "1", "-1", "10", "x y", ""];

impl Gen {
    fn element(&mut self) -> Vec<u8> {
        if self.chance(0.8) {
            self.pick(ELEMENTS).as_bytes().to_vec()
        } else {
            self.value()
        }
    }

    /// An index: mostly small, sometimes negative, out of range or not an integer.
    fn index(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0 => self.bad_int(),
            1 => self
                .pick(&["9223372036854775807", "-9223372036854775808"])
                .as_bytes()
                .to_vec(),
            _ => {
                let n = self.range(-12, 12);
                self.num(n)
            }
        }
    }

    fn end_word(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..12) {
            0 => self.pick(&["up", "", "lef"]).as_bytes().to_vec(),
            1..6 => self.word("left"),
            _ => self.word("right"),
        }
    }

    pub(super) fn list_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        match self.rng.random_range(0..100) {
            0..18 => {
                let name = self.pick(&["lpush", "rpush", "lpush", "rpush", "lpushx", "rpushx"]);
                args.push(self.word(name));
                args.push(self.key());
                if self.chance(0.03) {
                    // Big enough for several 8 KB nodes.
                    for i in 0..self.rng.random_range(200..400) {
                        args.push(format!("{i}-{}", "e".repeat(40)).into_bytes());
                    }
                } else {
                    for _ in 0..self.rng.random_range(1..=4) {
                        args.push(self.element());
                    }
                }
            }
            18..30 => {
                let name = if self.chance(0.5) { "lpop" } else { "rpop" };
                args.push(self.word(name));
                args.push(self.key());
                match self.rng.random_range(0..10) {
                    0..4 => {}
                    4..8 => {
                        let n = self.range(0, 6);
                        args.push(self.num(n));
                    }
                    8 => args.push(if self.chance(0.5) {
                        self.bad_int()
                    } else {
                        b"-1".to_vec()
                    }),
                    _ => {
                        args.push(b"1".to_vec());
                        args.push(b"1".to_vec());
                    }
                }
            }
            30..35 => {
                args.push(self.word("llen"));
                args.push(self.key());
            }
            35..45 => {
                args.push(self.word("lrange"));
                args.push(self.key());
                args.push(self.index());
                args.push(self.index());
            }
            45..50 => {
                args.push(self.word("lindex"));
                args.push(self.key());
                args.push(self.index());
            }
            50..55 => {
                args.push(self.word("lset"));
                args.push(self.key());
                args.push(self.index());
                args.push(self.element());
            }
            55..61 => {
                args.push(self.word("linsert"));
                args.push(self.key());
                let place = match self.rng.random_range(0..10) {
                    0 => b"middle".to_vec(),
                    1..5 => self.word("before"),
                    _ => self.word("after"),
                };
                args.push(place);
                args.push(self.element());
                args.push(self.element());
            }
            61..67 => {
                args.push(self.word("lrem"));
                args.push(self.key());
                let count = if self.chance(0.1) {
                    self.bad_int()
                } else {
                    let n = self.range(-3, 4);
                    self.num(n)
                };
                args.push(count);
                args.push(self.element());
            }
            67..72 => {
                args.push(self.word("ltrim"));
                args.push(self.key());
                args.push(self.index());
                args.push(self.index());
            }
            72..80 => {
                args.push(self.word("lpos"));
                args.push(self.key());
                args.push(self.element());
                for _ in 0..self.rng.random_range(0..3) {
                    let (option, value) = match self.rng.random_range(0..10) {
                        0..3 => ("rank", self.range(-4, 5)),
                        3..6 => ("count", self.range(-1, 4)),
                        6..9 => ("maxlen", self.range(-1, 6)),
                        _ => ("bogus", 1),
                    };
                    args.push(self.word(option));
                    if self.chance(0.05) {
                        args.push(self.bad_int());
                    } else if self.chance(0.05) {
                        // The last option may lack its value.
                        continue;
                    } else {
                        args.push(self.num(value));
                    }
                }
            }
            80..88 => {
                args.push(self.word("lmove"));
                args.push(self.key());
                args.push(self.key());
                args.push(self.end_word());
                args.push(self.end_word());
            }
            88..92 => {
                args.push(self.word("rpoplpush"));
                args.push(self.key());
                args.push(self.key());
            }
            _ => {
                args.push(self.word("lmpop"));
                let n = self.rng.random_range(1..=3);
                match self.rng.random_range(0..12) {
                    0 => args.push(b"0".to_vec()),
                    1 => args.push(self.bad_int()),
                    2 => args.push(self.num(n as i64 + 2)),
                    _ => args.push(self.num(n as i64)),
                }
                for _ in 0..n {
                    args.push(self.key());
                }
                args.push(self.end_word());
                match self.rng.random_range(0..8) {
                    0..3 => {}
                    3..6 => {
                        let c = self.range(1, 5);
                        args.push(self.word("count"));
                        args.push(self.num(c));
                    }
                    6 => {
                        args.push(self.word("count"));
                        args.push(if self.chance(0.5) {
                            b"0".to_vec()
                        } else {
                            self.bad_int()
                        });
                    }
                    _ => {
                        args.push(self.word("count"));
                        args.push(b"1".to_vec());
                        args.push(self.word("count"));
                        args.push(b"1".to_vec());
                    }
                }
            }
        }
        vec![Step {
            args,
            check: super::Check::Exact,
        }]
    }
}
