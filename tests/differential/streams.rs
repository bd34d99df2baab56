//! The stream family of the differential stream: the entry commands (XADD, XRANGE,
//! XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD), valid and invalid, over the shared keys
//! (mostly keys of its own, so that streams grow; the shared keys now and then, so that
//! other types give WRONGTYPE and streams meet the other families' commands).
//!
//! IDs come from a small range of milliseconds and sequences, mostly rising (so most
//! XADDs are accepted, some are too small), with the special forms (`-`, `+`, `(`,
//! `<ms>-*`, `$`) and broken ones. No `*`: an ID from the clock differs between the two
//! servers. Node limits change now and then (CONFIG SET `stream-node-max-entries` and
//! `-bytes`, on both), so approximate trims (`~`, LIMIT), which remove whole nodes only,
//! meet many node layouts, and the layouts must be Redis's: a stream's DUMP (its nodes'
//! bytes) is compared too. XREAD's BLOCK is short: nothing else can wake this
//! connection, so it either finds entries at once or times out on both.

use super::{Check, Gen, Reply, Step, query};
use rand::RngExt;
use redis::Value;

const FIELDS: &[&str] = &["f", "g", "name", "1", "-7", "", "field with space"];

/// Keys mostly left to this family, so that streams grow; the shared keys now and then.
const STREAM_KEYS: &[&str] = &["s0", "s1", "s2", "{t}s"];

impl Gen {
    fn stream_key(&mut self) -> Vec<u8> {
        if self.chance(0.8) {
            self.pick(STREAM_KEYS).as_bytes().to_vec()
        } else {
            self.key()
        }
    }

    /// A stream ID argument: mostly `<ms>-<seq>` in a small range, rising over the run.
    fn stream_id(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0 => self
                .pick(&["-", "+", "0", "0-0", "0-1"])
                .as_bytes()
                .to_vec(),
            1 => self
                .pick(&[
                    "abc",
                    "1-",
                    "-5",
                    "1-2-3",
                    "1.5",
                    "",
                    "18446744073709551615-18446744073709551615",
                    "18446744073709551616",
                    " 5",
                    "007-1",
                ])
                .as_bytes()
                .to_vec(),
            2..5 => {
                let ms = self.range(0, 30);
                ms.to_string().into_bytes()
            }
            _ => {
                let ms = self.range(0, 30);
                let seq = self.range(0, 4);
                format!("{ms}-{seq}").into_bytes()
            }
        }
    }

    /// An ID for XADD: explicit and ahead of most (the clock of the run), `<ms>-*`, or
    /// any ID argument.
    fn new_stream_id(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..10) {
            0..6 => {
                let ms = self.range(0, 40);
                let seq = self.range(0, 3);
                format!("{ms}-{seq}").into_bytes()
            }
            6 | 7 => format!("{}-*", self.range(0, 40)).into_bytes(),
            _ => self.stream_id(),
        }
    }

    /// An interval end for XRANGE: an ID, sometimes exclusive.
    fn interval_end(&mut self) -> Vec<u8> {
        let id = self.stream_id();
        if self.chance(0.2) {
            let mut exclusive = b"(".to_vec();
            exclusive.extend(id);
            exclusive
        } else {
            id
        }
    }

    fn stream_fields(&mut self, args: &mut Vec<Vec<u8>>) {
        let pairs = self.rng.random_range(1..=3);
        let same = self.chance(0.6);
        for &in_order in &FIELDS[..pairs] {
            let field = if same { in_order } else { self.pick(FIELDS) };
            args.push(field.as_bytes().to_vec());
            args.push(self.value());
        }
        if self.chance(0.03) {
            // A field without its value: an arity error.
            args.push(b"f".to_vec());
        }
    }

    /// `MAXLEN|MINID [=|~] threshold [LIMIT n]`, sometimes broken.
    fn stream_trim(&mut self, args: &mut Vec<Vec<u8>>) {
        let maxlen = self.chance(0.5);
        args.push(self.word(if maxlen { "maxlen" } else { "minid" }));
        match self.rng.random_range(0..10) {
            0..4 => {}
            4..7 => args.push(b"~".to_vec()),
            _ => args.push(b"=".to_vec()),
        }
        if maxlen {
            let threshold = match self.rng.random_range(0..10) {
                0 => self.pick(&["-1", "abc", "1.5"]).as_bytes().to_vec(),
                _ => {
                    let n = self.range(0, 12);
                    self.num(n)
                }
            };
            args.push(threshold);
        } else {
            args.push(self.stream_id());
        }
        if self.chance(0.2) {
            args.push(self.word("limit"));
            let limit = self.pick(&["0", "1", "2", "5", "100", "-1", "abc"]);
            args.push(limit.as_bytes().to_vec());
        }
        if self.chance(0.02) {
            // Both strategies: an error.
            args.push(self.word("maxlen"));
            args.push(b"3".to_vec());
        }
    }

    pub(super) fn stream_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        let mut check = Check::Exact;
        match self.rng.random_range(0..100) {
            0..30 => {
                args.push(self.word("xadd"));
                args.push(self.stream_key());
                if self.chance(0.1) {
                    args.push(self.word("nomkstream"));
                }
                if self.chance(0.3) {
                    self.stream_trim(&mut args);
                }
                args.push(self.new_stream_id());
                self.stream_fields(&mut args);
            }
            30..42 => {
                let reverse = self.chance(0.4);
                args.push(self.word(if reverse { "xrevrange" } else { "xrange" }));
                args.push(self.stream_key());
                args.push(self.interval_end());
                args.push(self.interval_end());
                if self.chance(0.3) {
                    args.push(self.word("count"));
                    let count = self.pick(&["0", "1", "2", "5", "-1", "abc"]);
                    args.push(count.as_bytes().to_vec());
                }
                if self.chance(0.03) {
                    args.push(self.word("limit"));
                }
            }
            42..47 => {
                args.push(self.word("xlen"));
                args.push(self.stream_key());
            }
            47..57 => {
                args.push(self.word("xdel"));
                args.push(self.stream_key());
                for _ in 0..self.rng.random_range(1..=3) {
                    args.push(self.stream_id());
                }
            }
            57..65 => {
                args.push(self.word("xtrim"));
                args.push(self.stream_key());
                if self.chance(0.95) {
                    self.stream_trim(&mut args);
                } else {
                    args.push(self.word("limit"));
                    args.push(b"1".to_vec());
                }
            }
            65..70 => {
                args.push(self.word("xsetid"));
                args.push(self.stream_key());
                args.push(self.stream_id());
                if self.chance(0.3) {
                    args.push(self.word("entriesadded"));
                    let n = self.pick(&["0", "3", "10", "100", "-1", "abc"]);
                    args.push(n.as_bytes().to_vec());
                }
                if self.chance(0.3) {
                    args.push(self.word("maxdeletedid"));
                    args.push(self.stream_id());
                }
            }
            70..85 => {
                args.push(self.word("xread"));
                if self.chance(0.3) {
                    args.push(self.word("count"));
                    let count = self.pick(&["1", "2", "0", "-3", "abc"]);
                    args.push(count.as_bytes().to_vec());
                }
                if self.chance(0.2) {
                    args.push(self.word("block"));
                    let block = self.pick(&["1", "5", "10", "-1", "abc", "1.5"]);
                    args.push(block.as_bytes().to_vec());
                }
                if self.chance(0.02) {
                    let option = self.pick(&["noack", "group", "foo"]);
                    args.push(self.word(option));
                }
                args.push(self.word("streams"));
                let keys: Vec<Vec<u8>> = (0..self.rng.random_range(1..=3))
                    .map(|_| self.stream_key())
                    .collect();
                let ids: Vec<Vec<u8>> = (0..keys.len())
                    .map(|_| {
                        if self.chance(0.2) {
                            b"$".to_vec()
                        } else if self.chance(0.03) {
                            b">".to_vec()
                        } else {
                            self.stream_id()
                        }
                    })
                    .collect();
                args.extend(keys);
                args.extend(ids);
                if self.chance(0.03) {
                    args.pop();
                }
            }
            85..92 => {
                // Any key: a stream's DUMP shows its nodes byte for byte.
                check = Check::Run(dump_if_stream);
                args.push(b"TYPE".to_vec());
                args.push(self.stream_key());
            }
            _ => {
                args.push(b"CONFIG".to_vec());
                args.push(b"SET".to_vec());
                if self.chance(0.6) {
                    args.push(b"stream-node-max-entries".to_vec());
                    let n = self.pick(&["0", "1", "2", "3", "5", "100"]);
                    args.push(n.as_bytes().to_vec());
                } else {
                    args.push(b"stream-node-max-bytes".to_vec());
                    // Not below 60: with a few bytes (1, 7) Redis 7.0.15 itself was seen
                    // to crash later (an assertion in lpFirst under streamLastValidID).
                    let n = self.pick(&["0", "60", "100", "200", "4096", "4096"]);
                    args.push(n.as_bytes().to_vec());
                }
            }
        }
        vec![Step { args, check }]
    }
}

/// TYPE of the key, and for a stream its DUMP payload, uncompressed (whose nodes and
/// metadata must be Redis's, byte for byte).
fn dump_if_stream(conn: &mut redis::Connection, step: &Step) -> Reply {
    let kind = query(conn, &step.args)?;
    let is_stream = match &kind {
        Value::SimpleString(name) => name == "stream",
        Value::BulkString(name) => name == b"stream",
        _ => false,
    };
    if !is_stream {
        return Ok(kind);
    }
    // Uncompressed: the two servers' LZF finds different matches in the same bytes.
    let no_compression: Vec<Vec<u8>> = ["CONFIG", "SET", "rdbcompression", "no"]
        .iter()
        .map(|arg| arg.as_bytes().to_vec())
        .collect();
    query(conn, &no_compression)?;
    query(conn, &[b"DUMP".to_vec(), step.args[1].clone()])
}
