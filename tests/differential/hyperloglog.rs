//! The HyperLogLog family of the differential stream: PFADD (small batches that keep a
//! sketch sparse, large ones that turn it dense), PFCOUNT of one key and of several,
//! PFMERGE, PFDEBUG, GET of the bytes, damage done with SETRANGE and APPEND, and
//! `hll-sparse-max-bytes` changed on the way. Mostly over keys of the family's own (other
//! families would turn the shared ones into other types before a sketch grows), now and
//! then over the shared ones (so sketches meet every other type, and strings that are no
//! sketch).
//!
//! One rule keeps the stream comparable: before a HyperLogLog command, a sketch whose
//! last opcode is an XZERO cut short is given its missing byte (an APPEND, sent to both
//! servers). For such a value Redis reads the byte past the end of its buffer, and after
//! Redis has split that opcode in place the byte there is one the split left, which no
//! value Tessera stores keeps (`types::hll::Sketch`). Every other damage is left as it is.

use super::{Check, Gen, Reply, Step, query};
use rand::RngExt;

/// The family's own keys, which only it and the keyspace commands touch.
const SKETCH_KEYS: &[&str] = &["pf0", "pf1", "pf2", "{t}pf"];

/// Elements: short, numeric, empty, binary.
const ELEMENTS: &[&str] = &[
    "a", "b", "c", "1", "2", "3", "", "hello", "x y", "\u{e9}", "0", "-1", "foo", "bar",
];

impl Gen {
    fn sketch_key(&mut self) -> Vec<u8> {
        if self.chance(0.8) {
            self.pick(SKETCH_KEYS).as_bytes().to_vec()
        } else {
            self.key()
        }
    }

    fn sketch_keys(&mut self, min: usize, max: usize) -> Vec<Vec<u8>> {
        let n = self.rng.random_range(min..=max);
        (0..n).map(|_| self.sketch_key()).collect()
    }

    fn hll_element(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..10) {
            0..4 => self.pick(ELEMENTS).as_bytes().to_vec(),
            4..9 => self
                .rng
                .random_range(0..200_000u32)
                .to_string()
                .into_bytes(),
            _ => (0..self.rng.random_range(1..9))
                .map(|_| self.rng.random())
                .collect(),
        }
    }

    pub(super) fn hyperloglog_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        let mut check = Check::Run(repaired);
        match self.rng.random_range(0..100) {
            0..35 => {
                args.push(self.word("pfadd"));
                args.push(self.sketch_key());
                // Mostly a few elements; now and then enough to pass the sparse limit.
                let count = match self.rng.random_range(0..20) {
                    0 => 0,
                    1 => self.rng.random_range(200..2500),
                    _ => self.rng.random_range(1..8),
                };
                for _ in 0..count {
                    args.push(self.hll_element());
                }
            }
            35..50 => {
                args.push(self.word("pfcount"));
                args.extend(self.sketch_keys(1, 3));
            }
            50..60 => {
                args.push(self.word("pfmerge"));
                args.extend(self.sketch_keys(1, 3));
            }
            60..68 => {
                let sub = self.pick(&["encoding", "decode", "todense", "getreg", "nosuch"]);
                args.push(self.word("pfdebug"));
                args.push(self.word(sub));
                args.push(self.sketch_key());
            }
            68..80 => {
                check = Check::Exact;
                args.push(self.word("get"));
                args.push(self.sketch_key());
            }
            80..88 => {
                // Damage where a sketch's bytes are: the header, the first opcodes or
                // registers, the end of a dense one, or past it.
                check = Check::Exact;
                let at = match self.rng.random_range(0..4) {
                    0 => self.rng.random_range(0..16),
                    1 => self.rng.random_range(16..64),
                    2 => self.rng.random_range(12290..12304),
                    _ => self.rng.random_range(12304..12308),
                };
                args.push(self.word("setrange"));
                args.push(self.sketch_key());
                args.push(self.num(at));
                args.push(vec![self.rng.random()]);
            }
            88..91 => {
                check = Check::Exact;
                args.push(self.word("append"));
                args.push(self.sketch_key());
                args.push(vec![self.rng.random()]);
            }
            91..97 => {
                // A fresh start for a damaged sketch.
                check = Check::Exact;
                args.push(self.word("del"));
                args.push(self.sketch_key());
            }
            _ => {
                check = Check::Exact;
                let limit = self.pick(&["3000", "3000", "200", "0", "12000", "-1", "1kb"]);
                args.push(self.word("config"));
                args.push(self.word("set"));
                args.push(b"hll-sparse-max-bytes".to_vec());
                args.push(limit.as_bytes().to_vec());
            }
        }
        vec![Step { args, check }]
    }
}

/// The keys a HyperLogLog command reads.
fn keys_of(args: &[Vec<u8>]) -> &[Vec<u8>] {
    if args[0].eq_ignore_ascii_case(b"pfdebug") {
        &args[2..]
    } else if args[0].eq_ignore_ascii_case(b"pfadd") {
        &args[1..2]
    } else {
        &args[1..]
    }
}

/// Runs a HyperLogLog command after giving any sketch it reads whose last opcode is an
/// XZERO cut short its second byte (see the header).
fn repaired(conn: &mut redis::Connection, step: &Step) -> Reply {
    for key in keys_of(&step.args) {
        if let Ok(redis::Value::BulkString(value)) = query(conn, &[b"GET".to_vec(), key.clone()])
            && ends_in_cut_xzero(&value)
        {
            query(conn, &[b"APPEND".to_vec(), key.clone(), vec![0]])?;
        }
    }
    query(conn, &step.args)
}

/// Whether a sparse sketch's last opcode is an XZERO whose first byte ends the value.
fn ends_in_cut_xzero(value: &[u8]) -> bool {
    if value.len() < 16 || &value[..4] != b"HYLL" || value[4] != 1 {
        return false;
    }
    let mut at = 16;
    while at < value.len() {
        if value[at] & 0xc0 == 0x40 {
            if at + 1 == value.len() {
                return true;
            }
            at += 2;
        } else {
            at += 1;
        }
    }
    false
}
