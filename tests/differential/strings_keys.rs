//! Strings, expiry and keyspace commands in the differential stream (the family that
//! takes the steps no other family takes).

use super::{Check, Gen, KEYS, PATTERNS, Step, shuffle};
use rand::RngExt;

impl Gen {
    /// Strings, expiry and keyspace commands.
    pub(super) fn base_step(&mut self) -> Vec<Step> {
        let mut follow_up_exists: Option<Vec<u8>> = None;
        let mut check = Check::Exact;
        let mut args: Vec<Vec<u8>> = Vec::new();
        let which = self.rng.random_range(0..100);
        match which {
            0..10 => {
                // SET with options, valid and invalid combinations.
                let key = self.key();
                args.push(self.word("set"));
                args.push(key.clone());
                args.push(self.value());
                let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
                match self.rng.random_range(0..4) {
                    0 => groups.push(vec![self.word("nx")]),
                    1 => groups.push(vec![self.word("xx")]),
                    _ => {}
                }
                if self.chance(0.3) {
                    groups.push(vec![self.word("get")]);
                }
                let mut past = false;
                match self.rng.random_range(0..8) {
                    0 => {
                        let n = self.rel_s();
                        groups.push(vec![self.word("ex"), self.num(n)])
                    }
                    1 => {
                        let n = self.rel_ms();
                        groups.push(vec![self.word("px"), self.num(n)])
                    }
                    2 => {
                        let (n, p) = self.abs_s();
                        past |= p;
                        groups.push(vec![self.word("exat"), self.num(n)])
                    }
                    3 => {
                        let (n, p) = self.abs_ms();
                        past |= p;
                        groups.push(vec![self.word("pxat"), self.num(n)])
                    }
                    4 => groups.push(vec![self.word("keepttl")]),
                    _ => {}
                }
                if self.chance(0.2) {
                    // Something odd: invalid combinations, bad numbers, repeats.
                    let n = self.rel_s();
                    let m = self.rel_ms();
                    let odd: Vec<Vec<u8>> = match self.rng.random_range(0..16) {
                        0 => vec![self.word("nx"), self.word("xx")],
                        1 => vec![self.word("ex"), self.num(n), self.word("px"), self.num(m)],
                        2 => vec![self.word("ex"), self.bad_int()],
                        3 => vec![self.word("px"), b"0".to_vec()],
                        4 => vec![self.word("ex"), b"-5".to_vec()],
                        5 => vec![self.word("px")],
                        6 => vec![b"FOO".to_vec()],
                        7 => vec![self.word("keepttl"), self.word("ex"), self.num(n)],
                        8 => vec![
                            self.word("ex"),
                            self.num(n),
                            self.word("ex"),
                            self.num(n + 1000),
                        ],
                        9 => vec![self.word("keepttl"), self.word("keepttl")],
                        10 => vec![self.word("get"), self.word("get")],
                        11 => vec![self.word("nx"), self.word("nx")],
                        12 => vec![self.word("ex"), b"9223372036854775".to_vec()],
                        13 => vec![self.word("pxat"), b"9223372036854775807".to_vec()],
                        14 => vec![self.word("persist")],
                        _ => vec![self.word("ex"), self.bad_int(), b"FOO".to_vec()],
                    };
                    let at = self.rng.random_range(0..=groups.len());
                    groups.insert(at, odd);
                }
                shuffle(&mut self.rng, &mut groups);
                args.extend(groups.into_iter().flatten());
                if past {
                    follow_up_exists = Some(key);
                }
            }
            10..15 => {
                args.push(self.word("get"));
                args.push(self.key());
            }
            15..17 => {
                args.push(self.word("mget"));
                args.extend(self.keys(1, 5));
            }
            17..20 => {
                let name = if self.chance(0.5) { "mset" } else { "msetnx" };
                args.push(self.word(name));
                let pairs = self.rng.random_range(1..=4);
                for _ in 0..pairs {
                    args.push(self.key());
                    args.push(self.value());
                }
                if self.chance(0.1) {
                    args.push(self.key());
                }
            }
            20..22 => {
                args.push(self.word("setnx"));
                args.push(self.key());
                args.push(self.value());
            }
            22..24 => {
                let seconds = self.chance(0.5);
                args.push(self.word(if seconds { "setex" } else { "psetex" }));
                args.push(self.key());
                let ttl = match self.rng.random_range(0..10) {
                    0 => b"0".to_vec(),
                    1 => b"-100".to_vec(),
                    2 => self.bad_int(),
                    3 => b"9223372036854775807".to_vec(),
                    _ if seconds => {
                        let n = self.rel_s();
                        self.num(n)
                    }
                    _ => {
                        let n = self.rel_ms();
                        self.num(n)
                    }
                };
                args.push(ttl);
                args.push(self.value());
            }
            24..26 => {
                let name = if self.chance(0.5) { "getset" } else { "getdel" };
                args.push(self.word(name));
                args.push(self.key());
                if name == "getset" {
                    args.push(self.value());
                }
            }
            26..30 => {
                args.push(self.word("getex"));
                args.push(self.key());
                match self.rng.random_range(0..12) {
                    0 => {
                        let n = self.rel_s();
                        args.extend([self.word("ex"), self.num(n)]);
                    }
                    1 => {
                        let n = self.rel_ms();
                        args.extend([self.word("px"), self.num(n)]);
                    }
                    2 | 3 => {
                        let (n, _) = self.abs_s();
                        args.extend([self.word("exat"), self.num(n)]);
                    }
                    4 | 5 => {
                        let (n, _) = self.abs_ms();
                        args.extend([self.word("pxat"), self.num(n)]);
                    }
                    6 | 7 => args.push(self.word("persist")),
                    8 => {
                        let n = self.rel_s();
                        let bad: Vec<Vec<u8>> = match self.rng.random_range(0..9) {
                            0 => vec![self.word("ex"), self.num(n), self.word("persist")],
                            1 => vec![self.word("keepttl")],
                            2 => vec![self.word("nx")],
                            3 => vec![self.word("ex"), self.bad_int()],
                            4 => vec![self.word("ex"), b"0".to_vec()],
                            5 => vec![self.word("px")],
                            6 => vec![self.word("persist"), self.word("persist")],
                            7 => vec![
                                self.word("ex"),
                                self.num(n),
                                self.word("ex"),
                                self.num(n + 7),
                            ],
                            _ => vec![self.word("exat"), b"-1".to_vec()],
                        };
                        args.extend(bad);
                    }
                    _ => {}
                }
            }
            30..33 => {
                args.push(self.word("append"));
                args.push(self.key());
                args.push(self.value());
            }
            33..35 => {
                args.push(self.word("strlen"));
                args.push(self.key());
            }
            35..38 => {
                let name = if self.chance(0.8) {
                    "getrange"
                } else {
                    "substr"
                };
                args.push(self.word(name));
                args.push(self.key());
                for _ in 0..2 {
                    let index = match self.rng.random_range(0..12) {
                        0 => self.bad_int(),
                        1 => b"9223372036854775807".to_vec(),
                        2 => b"-9223372036854775808".to_vec(),
                        _ => {
                            let n = self.range(-25, 25);
                            self.num(n)
                        }
                    };
                    args.push(index);
                }
            }
            38..41 => {
                args.push(self.word("setrange"));
                args.push(self.key());
                let offset = match self.rng.random_range(0..14) {
                    0 => self.bad_int(),
                    1 => b"-1".to_vec(),
                    2 => b"536870912".to_vec(),
                    3 => b"9223372036854775807".to_vec(),
                    _ => {
                        let n = self.range(0, 30);
                        self.num(n)
                    }
                };
                args.push(offset);
                args.push(if self.chance(0.1) {
                    Vec::new()
                } else {
                    self.value()
                });
            }
            41..47 => {
                let name = self.pick(&["incr", "decr", "incrby", "decrby"]);
                args.push(self.word(name));
                args.push(self.key());
                if name.ends_with("by") {
                    let by = match self.rng.random_range(0..14) {
                        0 => self.bad_int(),
                        1 => b"9223372036854775807".to_vec(),
                        2 => b"-9223372036854775808".to_vec(),
                        3 => b"-9223372036854775807".to_vec(),
                        _ => {
                            let n = self.range(-1000, 1000);
                            self.num(n)
                        }
                    };
                    args.push(by);
                }
            }
            47..50 => {
                args.push(self.word("incrbyfloat"));
                args.push(self.key());
                // Mostly simple binary fractions; a few inexact decimals, hex and extreme
                // exponents check the long-double rounding and formatting too.
                let by = self.pick(&[
                    "1.5", "-0.25", "3", "0.5", "-2", "10.75", "1e2", "-1.5", "0", "2.5e-1", "1.5",
                    "-0.25", "3", "0.1", "-3.7", "0x10", "1e-3", "1e30", "1e4932", "abc", "",
                    "1.5x", " 1", "nan", "inf", "-inf", "1..2", "1e5000",
                ]);
                args.push(by.as_bytes().to_vec());
            }
            50..53 => {
                let name = if self.chance(0.6) { "del" } else { "unlink" };
                args.push(self.word(name));
                args.extend(self.keys(1, 4));
            }
            53..55 => {
                args.push(self.word("exists"));
                args.extend(self.keys(1, 4));
            }
            55 => {
                args.push(self.word("type"));
                args.push(self.key());
            }
            56..64 => {
                let name = self.pick(&["expire", "pexpire", "expireat", "pexpireat"]);
                args.push(self.word(name));
                args.push(self.key());
                let seconds = !name.starts_with('p');
                let absolute = name.ends_with("at");
                let when = match self.rng.random_range(0..20) {
                    0 => self.bad_int(),
                    1 => b"0".to_vec(),
                    2 => b"-10".to_vec(),
                    3 => b"9223372036854775807".to_vec(),
                    4 => b"-9223372036854775808".to_vec(),
                    5 => b"9223372036854775".to_vec(),
                    6 => b"-9223372036854775".to_vec(),
                    _ => {
                        let n = match (seconds, absolute) {
                            (true, false) => self.rel_s(),
                            (false, false) => self.rel_ms(),
                            (true, true) => self.abs_s().0,
                            (false, true) => self.abs_ms().0,
                        };
                        self.num(n)
                    }
                };
                args.push(when);
                let options = self.rng.random_range(0..3);
                for _ in 0..options {
                    let option =
                        self.pick(&["nx", "xx", "gt", "lt", "nx", "xx", "gt", "lt", "foo"]);
                    args.push(self.word(option));
                }
            }
            64..69 => {
                let (name, tolerance) = match self.rng.random_range(0..4) {
                    0 => ("ttl", 2),
                    1 => ("pttl", 2000),
                    2 => ("expiretime", 2),
                    _ => ("pexpiretime", 2000),
                };
                check = Check::Near(tolerance);
                args.push(self.word(name));
                args.push(self.key());
            }
            69..71 => {
                args.push(self.word("persist"));
                args.push(self.key());
            }
            71..74 => {
                let name = if self.chance(0.5) {
                    "rename"
                } else {
                    "renamenx"
                };
                args.push(self.word(name));
                args.push(self.key());
                args.push(self.key());
            }
            74..77 => {
                args.push(self.word("copy"));
                args.push(self.key());
                args.push(self.key());
                let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
                for _ in 0..self.rng.random_range(0..=3) {
                    if self.chance(0.6) {
                        groups.push(vec![self.word("db"), self.db()]);
                    } else {
                        groups.push(vec![self.word("replace")]);
                    }
                }
                if self.chance(0.08) {
                    groups.push(vec![
                        self.pick(&["db", "foo", "replace"]).as_bytes().to_vec(),
                    ]);
                }
                shuffle(&mut self.rng, &mut groups);
                args.extend(groups.into_iter().flatten());
            }
            77..79 => {
                args.push(self.word("move"));
                args.push(self.key());
                args.push(self.db());
            }
            79..81 => {
                check = Check::Unordered;
                args.push(self.word("keys"));
                args.push(self.pick(PATTERNS).as_bytes().to_vec());
            }
            81..84 => {
                check = Check::ScanAll;
                args.push(self.word("scan"));
                let cursor = if self.chance(0.85) {
                    "0"
                } else {
                    self.pick(&["00", "+0", "", "abc", " 0", "0 ", "1.5", "-", "+"])
                };
                args.push(cursor.as_bytes().to_vec());
                // Options in any order, repeats included (the last one wins in Redis).
                let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
                for _ in 0..self.rng.random_range(0..=3) {
                    match self.rng.random_range(0..5) {
                        0 | 1 => {
                            let pattern = self.pick(PATTERNS).as_bytes().to_vec();
                            groups.push(vec![self.word("match"), pattern]);
                        }
                        2 | 3 => {
                            let count = if self.chance(0.85) {
                                let n = self.range(1, 30);
                                self.num(n)
                            } else {
                                self.pick(&["0", "-1", "abc", "", "1000"])
                                    .as_bytes()
                                    .to_vec()
                            };
                            groups.push(vec![self.word("count"), count]);
                        }
                        _ => {
                            let t = self.pick(&[
                                "string", "STRING", "hash", "list", "set", "none", "zset", "foo",
                            ]);
                            groups.push(vec![self.word("type"), t.as_bytes().to_vec()]);
                        }
                    }
                }
                if self.chance(0.05) {
                    groups.push(vec![
                        self.pick(&["match", "count", "type", "foo"])
                            .as_bytes()
                            .to_vec(),
                    ]);
                }
                shuffle(&mut self.rng, &mut groups);
                args.extend(groups.into_iter().flatten());
            }
            84 => {
                check = Check::RandomKey;
                args.push(self.word("randomkey"));
            }
            85..87 => args.push(self.word("dbsize")),
            87 => {
                // FLUSHDB (rarely, or the stream would keep emptying its databases).
                if self.chance(0.15) {
                    args.push(self.word("flushdb"));
                    if self.chance(0.3) {
                        let mode = self.pick(&["async", "sync", "foo"]);
                        args.push(self.word(mode));
                    }
                } else {
                    args.push(self.word("dbsize"));
                }
            }
            88 => {
                args.push(self.word("swapdb"));
                args.push(self.db());
                args.push(self.db());
            }
            89..93 => {
                args.push(self.word("select"));
                args.push(self.db());
            }
            93..95 => {
                args.push(self.word("ping"));
                if self.chance(0.4) {
                    args.push(self.value());
                }
            }
            95..97 => {
                args.push(self.word("echo"));
                args.push(self.value());
            }
            _ => {
                let name = self.pick(&["foo", "NOTACOMMAND", "gett", "x", "set_", "expir"]);
                args.push(name.as_bytes().to_vec());
                let n = self.rng.random_range(0..4);
                for _ in 0..n {
                    args.push(self.pick(KEYS).as_bytes().to_vec());
                }
            }
        }
        // Now and then mangle the arity: drop trailing words or add a stray one.
        if self.chance(0.04) {
            if args.len() > 1 && self.chance(0.6) {
                let keep = self.rng.random_range(1..args.len());
                args.truncate(keep);
            } else {
                // Never a number right after a bare EX / PX / EXAT / PXAT: that would be
                // a valid expiry of a few milliseconds or seconds, which each server's
                // active expiry would meet at its own moment.
                let after_time_option = args.last().is_some_and(|last| {
                    ["ex", "px", "exat", "pxat"]
                        .iter()
                        .any(|option| last.eq_ignore_ascii_case(option.as_bytes()))
                });
                let stray = if after_time_option {
                    b"FOO".to_vec()
                } else {
                    self.text_value()
                };
                args.push(stray);
            }
        }
        let mut steps = vec![Step { args, check }];
        if let Some(key) = follow_up_exists {
            steps.push(Step {
                args: vec![b"EXISTS".to_vec(), key],
                check: Check::Exact,
            });
        }
        steps
    }
}
