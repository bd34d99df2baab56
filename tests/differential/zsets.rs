//! The sorted-set family of the differential stream: every sorted-set command, valid and
//! invalid, over the shared keys, a small pool of members and scores chosen to make ties
//! (so member order decides), signed zeros, infinities and unparsable text.
//!
//! Sorted-set replies are ordered by definition and compared exactly; ZRANDMEMBER is
//! checked against the sorted set as it was (`picks`), ZSCAN compared as a whole
//! iteration.

use super::{Check, Gen, Reply, Step, full_scan_pairs, picks, query};
use rand::RngExt;
use redis::Value;

const MEMBERS: &[&str] = &["a", "b", "c", "d", "e", "m1", "m2", "10", "-1", "", "x y"];
const SCORES: &[&str] = &[
    "0", "1", "1", "2", "2.5", "-3", "1e3", "0.1", "-0", "inf", "-inf", "+inf", "3.0", "007",
];
const BAD_SCORES: &[&str] = &["abc", "nan", "", " 1", "1e400", "(1"];
const SCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "1", "(1", "2", "(2.5", "1e3", "(0", "-3", "abc", "((1", "inf",
];
const LEX_BOUNDS: &[&str] = &[
    "-", "+", "[a", "(a", "[c", "(c", "[m", "[", "(", "a", "[x y",
];

impl Gen {
    fn zmember(&mut self) -> Vec<u8> {
        self.pick(MEMBERS).as_bytes().to_vec()
    }

    fn zscore(&mut self) -> Vec<u8> {
        if self.chance(0.05) {
            self.pick(BAD_SCORES).as_bytes().to_vec()
        } else {
            self.pick(SCORES).as_bytes().to_vec()
        }
    }

    fn rank(&mut self) -> Vec<u8> {
        if self.chance(0.05) {
            self.bad_int()
        } else {
            let n = self.range(-8, 8);
            self.num(n)
        }
    }

    fn limit(&mut self, args: &mut Vec<Vec<u8>>) {
        if self.chance(0.3) {
            args.push(self.word("limit"));
            let offset = self.range(-1, 4);
            args.push(self.num(offset));
            let count = self.range(-1, 4);
            args.push(self.num(count));
        }
    }

    /// numkeys and keys for the multi-key commands, sometimes wrong.
    fn numkeys_and_keys(&mut self, args: &mut Vec<Vec<u8>>) -> usize {
        let keys = self.keys(1, 3);
        let numkeys = match self.rng.random_range(0..12) {
            0 => b"0".to_vec(),
            1 => self.bad_int(),
            2 => self.num(keys.len() as i64 + 2),
            _ => self.num(keys.len() as i64),
        };
        args.push(numkeys);
        let n = keys.len();
        args.extend(keys);
        n
    }

    pub(super) fn zset_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        let mut check = Check::Exact;
        match self.rng.random_range(0..100) {
            0..22 => {
                args.push(self.word("zadd"));
                args.push(self.key());
                for flag in ["nx", "xx", "gt", "lt", "ch", "incr"] {
                    if self.chance(0.08) {
                        args.push(self.word(flag));
                    }
                }
                for _ in 0..self.rng.random_range(1..=3) {
                    args.push(self.zscore());
                    args.push(self.zmember());
                }
            }
            22..27 => {
                args.push(self.word("zincrby"));
                args.push(self.key());
                args.push(self.zscore());
                args.push(self.zmember());
            }
            27..32 => {
                args.push(self.word("zrem"));
                args.push(self.key());
                for _ in 0..self.rng.random_range(1..=3) {
                    args.push(self.zmember());
                }
            }
            32..40 => {
                let name = self.pick(&["zcard", "zscore", "zmscore", "zrank", "zrevrank"]);
                args.push(self.word(name));
                args.push(self.key());
                if name != "zcard" {
                    args.push(self.zmember());
                }
                if name == "zmscore" {
                    args.push(self.zmember());
                }
            }
            40..45 => {
                let (name, bounds) = if self.chance(0.5) {
                    ("zcount", SCORE_BOUNDS)
                } else {
                    check = Check::Run(lex_range);
                    ("zlexcount", LEX_BOUNDS)
                };
                args.push(self.word(name));
                args.push(self.key());
                args.push(self.pick(bounds).as_bytes().to_vec());
                args.push(self.pick(bounds).as_bytes().to_vec());
            }
            45..60 => {
                let store = self.chance(0.15);
                args.push(self.word(if store { "zrangestore" } else { "zrange" }));
                if store {
                    args.push(self.key());
                }
                args.push(self.key());
                let by = self.rng.random_range(0..3);
                let bounds = match by {
                    0 => vec![self.rank(), self.rank()],
                    1 => vec![
                        self.pick(SCORE_BOUNDS).as_bytes().to_vec(),
                        self.pick(SCORE_BOUNDS).as_bytes().to_vec(),
                    ],
                    _ => vec![
                        self.pick(LEX_BOUNDS).as_bytes().to_vec(),
                        self.pick(LEX_BOUNDS).as_bytes().to_vec(),
                    ],
                };
                args.extend(bounds);
                if by == 1 || (by == 0 && self.chance(0.05)) {
                    args.push(self.word("byscore"));
                }
                if by == 2 {
                    args.push(self.word("bylex"));
                    check = Check::Run(lex_range);
                }
                if self.chance(0.3) {
                    args.push(self.word("rev"));
                }
                if by > 0 || self.chance(0.05) {
                    self.limit(&mut args);
                }
                if !store && self.chance(0.4) {
                    args.push(self.word("withscores"));
                }
            }
            60..68 => {
                let name = self.pick(&[
                    "zrevrange",
                    "zrangebyscore",
                    "zrevrangebyscore",
                    "zrangebylex",
                    "zrevrangebylex",
                ]);
                args.push(self.word(name));
                args.push(self.key());
                let bounds = if name == "zrevrange" {
                    vec![self.rank(), self.rank()]
                } else if name.contains("score") {
                    vec![
                        self.pick(SCORE_BOUNDS).as_bytes().to_vec(),
                        self.pick(SCORE_BOUNDS).as_bytes().to_vec(),
                    ]
                } else {
                    check = Check::Run(lex_range);
                    vec![
                        self.pick(LEX_BOUNDS).as_bytes().to_vec(),
                        self.pick(LEX_BOUNDS).as_bytes().to_vec(),
                    ]
                };
                args.extend(bounds);
                if !name.contains("lex") && self.chance(0.4) {
                    args.push(self.word("withscores"));
                }
                if name != "zrevrange" {
                    self.limit(&mut args);
                }
            }
            68..73 => {
                let name = self.pick(&["zremrangebyrank", "zremrangebyscore", "zremrangebylex"]);
                args.push(self.word(name));
                args.push(self.key());
                let bounds = match name {
                    "zremrangebyrank" => vec![self.rank(), self.rank()],
                    "zremrangebyscore" => vec![
                        self.pick(SCORE_BOUNDS).as_bytes().to_vec(),
                        self.pick(SCORE_BOUNDS).as_bytes().to_vec(),
                    ],
                    _ => {
                        check = Check::Run(lex_range);
                        vec![
                            self.pick(LEX_BOUNDS).as_bytes().to_vec(),
                            self.pick(LEX_BOUNDS).as_bytes().to_vec(),
                        ]
                    }
                };
                args.extend(bounds);
            }
            73..79 => {
                let name = self.pick(&["zpopmin", "zpopmax"]);
                args.push(self.word(name));
                args.push(self.key());
                if self.chance(0.5) {
                    let count = self.pick(&["0", "1", "2", "5", "-1", "abc"]);
                    args.push(count.as_bytes().to_vec());
                }
            }
            79..83 => {
                args.push(self.word("zmpop"));
                self.numkeys_and_keys(&mut args);
                let side = self.pick(&["min", "max", "MIN", "foo"]);
                args.push(side.as_bytes().to_vec());
                if self.chance(0.5) {
                    args.push(self.word("count"));
                    let count = self.pick(&["1", "2", "10", "0", "-1", "abc"]);
                    args.push(count.as_bytes().to_vec());
                }
            }
            83..87 => {
                check = Check::Run(picks::zrandmember);
                args.push(self.word("zrandmember"));
                args.push(self.key());
                if self.chance(0.7) {
                    let n = self.range(-5, 15);
                    args.push(self.num(n));
                    if self.chance(0.4) {
                        args.push(self.word("withscores"));
                    }
                }
                let pick = Step { args, check };
                let score = |g: &mut Gen| g.pick(SCORES).as_bytes().to_vec();
                return self.pick_steps(pick, "zadd", |g| vec![score(g), g.zmember()]);
            }
            87..96 => {
                let name = self.pick(&[
                    "zunion",
                    "zinter",
                    "zdiff",
                    "zunionstore",
                    "zinterstore",
                    "zdiffstore",
                    "zintercard",
                ]);
                args.push(self.word(name));
                if name.ends_with("store") {
                    args.push(self.key());
                }
                let n = self.numkeys_and_keys(&mut args);
                if name == "zintercard" {
                    if self.chance(0.3) {
                        args.push(self.word("limit"));
                        let limit = self.pick(&["0", "1", "-1", "abc"]);
                        args.push(limit.as_bytes().to_vec());
                    }
                } else {
                    if self.chance(0.3) {
                        args.push(self.word("weights"));
                        for _ in 0..n {
                            let w = self.pick(&["1", "2", "-1", "0", "0.5", "inf", "abc"]);
                            args.push(w.as_bytes().to_vec());
                        }
                    }
                    if self.chance(0.3) {
                        args.push(self.word("aggregate"));
                        let how = self.pick(&["sum", "min", "max", "foo"]);
                        args.push(how.as_bytes().to_vec());
                    }
                    if !name.ends_with("store") && self.chance(0.5) {
                        args.push(self.word("withscores"));
                    }
                }
            }
            _ => {
                check = Check::Run(full_scan_pairs);
                args = self.collection_scan("zscan", &["*", "m*", "?", "[ab]"]);
            }
        }
        vec![Step { args, check }]
    }
}

/// A lex-range step (ZLEXCOUNT, ZRANGE/ZRANGESTORE … BYLEX, Z[REV]RANGEBYLEX,
/// ZREMRANGEBYLEX). Redis defines lex ranges only over members of one score. Over a
/// listpack it scans in order whatever the scores (Tessera answers the same); over a skip
/// list whose scores differ, its answer depends on the random levels of its nodes, so
/// the same step may answer differently on two Redis servers. Such a step is replaced on
/// both servers (their keys are equal up to here) by a marker, and changes nothing.
fn lex_range(conn: &mut redis::Connection, step: &Step) -> Reply {
    let source = if step.args[0].eq_ignore_ascii_case(b"zrangestore") {
        &step.args[2]
    } else {
        &step.args[1]
    };
    if lex_order_undefined(conn, source)? {
        return Ok(Value::SimpleString(
            "<lex range over a skip list of several scores: undefined in Redis>".into(),
        ));
    }
    query(conn, &step.args)
}

/// Whether `key` is a sorted set in a skip list whose lowest and highest scores differ.
fn lex_order_undefined(conn: &mut redis::Connection, key: &[u8]) -> Result<bool, String> {
    let encoding = query(
        conn,
        &[b"OBJECT".to_vec(), b"ENCODING".to_vec(), key.to_vec()],
    );
    if !matches!(&encoding, Ok(Value::BulkString(e)) if e.as_slice() == b"skiplist") {
        return Ok(false);
    }
    // The score is the last leaf of a one-member WITHSCORES reply (RESP2: a flat pair;
    // RESP3: a pair in an array).
    let mut score_at = |rank: &[u8]| -> Result<String, String> {
        let reply = query(
            conn,
            &[
                b"ZRANGE".to_vec(),
                key.to_vec(),
                rank.to_vec(),
                rank.to_vec(),
                b"WITHSCORES".to_vec(),
            ],
        )?;
        let mut leaf = &reply;
        while let Value::Array(items) = leaf {
            leaf = items
                .last()
                .ok_or_else(|| format!("<an empty WITHSCORES reply for a skip list: {reply:?}>"))?;
        }
        Ok(format!("{leaf:?}"))
    };
    Ok(score_at(b"0")? != score_at(b"-1")?)
}
