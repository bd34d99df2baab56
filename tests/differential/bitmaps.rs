//! Bitmaps and LCS in the differential stream: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
//! BITFIELD, BITFIELD_RO and LCS, mostly over keys of their own (so that most commands
//! meet bitmaps), else over the shared keys, so that other types answer WRONGTYPE (or
//! LCS's own error) and the strings other families write are read as bitmaps. Offsets are mostly small (commands meet each other's bits), sometimes far
//! (strings of a few KB, now and then 128 KB, which LCS refuses as Redis does), or out
//! of range; never near the 512 MB limit in a write (each server would allocate it).
//! Ranges are negative, reversed, huge, in BYTE or BIT units; BITFIELD mixes every type
//! width, `#n` offsets (one that wraps to 0 as Redis's multiplication does), extreme
//! values and each OVERFLOW policy; runs of 0xff bytes make BITPOS look for a clear bit
//! where there is none.

use super::{Check, Gen, Step};
use rand::RngExt;

/// Offsets no server accepts, or only some commands do.
const ODD_OFFSETS: &[&str] = &[
    "-1",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "1e3",
    "",
    "+1",
    "01",
];

/// BITFIELD types, valid and not.
const BAD_TYPES: &[&str] = &[
    "u64", "i65", "i0", "u0", "x8", "I8", "U8", "i", "u-1", "i+8", "i08", "8", "",
];

/// Range ends beyond any string, for BITCOUNT and BITPOS.
const FAR_INDEXES: &[&str] = &[
    "9223372036854775807",
    "-9223372036854775808",
    "4294967296",
    "-4294967296",
    "1000000",
];

/// Keys mostly left to this family (and the string commands' SET), so that most of its
/// commands meet bitmaps rather than other types.
const BITMAP_KEYS: &[&str] = &["bm0", "bm1", "bm2", "{t}bm"];

impl Gen {
    /// A key: often one of the family's own, else any of the stream's.
    fn bitmap_key(&mut self) -> Vec<u8> {
        if self.chance(0.6) {
            self.pick(BITMAP_KEYS).as_bytes().to_vec()
        } else {
            self.key()
        }
    }

    /// A bit offset; `write`: for SETBIT or a BITFIELD write, which allocate up to it.
    fn bit_offset(&mut self, write: bool) -> Vec<u8> {
        match self.rng.random_range(0..100) {
            0..70 => {
                let n = self.range(0, 200);
                self.num(n)
            }
            70..85 => {
                let n = self.range(0, 1 << 15);
                self.num(n)
            }
            85..87 => {
                let n = self.range(0, 1 << 20);
                self.num(n)
            }
            87..93 => self.pick(ODD_OFFSETS).as_bytes().to_vec(),
            93..96 if !write => self.pick(&["4294967295", "4294967288"]).as_bytes().to_vec(),
            _ => self.bad_int(),
        }
    }

    /// A BITCOUNT / BITPOS index.
    fn bit_index(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0..16 => {
                let n = self.range(-40, 40);
                self.num(n)
            }
            16..18 => self.pick(FAR_INDEXES).as_bytes().to_vec(),
            _ => self.bad_int(),
        }
    }

    /// BYTE or BIT, sometimes a word that is neither.
    fn bit_unit(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..10) {
            0..4 => self.word("bit"),
            4..8 => self.word("byte"),
            8 => b"bits".to_vec(),
            _ => b"".to_vec(),
        }
    }

    /// A BITFIELD type: mostly valid, across every width.
    fn field_type(&mut self) -> (Vec<u8>, u32) {
        if self.chance(0.08) {
            return (self.pick(BAD_TYPES).as_bytes().to_vec(), 8);
        }
        let signed = self.chance(0.5);
        let bits = match self.rng.random_range(0..4) {
            0 => self.range(1, 9) as u32,
            1 => self.pick(&["8", "16", "32"]).parse().unwrap(),
            2 => {
                if signed {
                    64
                } else {
                    63
                }
            }
            _ => self.range(1, if signed { 65 } else { 64 }) as u32,
        };
        let sign = if signed { "i" } else { "u" };
        (format!("{sign}{bits}").into_bytes(), bits)
    }

    /// A BITFIELD offset for a field of `bits`: plain or `#n`.
    fn field_offset(&mut self, write: bool) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0..5 => {
                let n = self.range(0, 40);
                format!("#{n}").into_bytes()
            }
            5 => self
                .pick(&["#", "#-1", "#abc", "##1", "#1152921504606846976"])
                .as_bytes()
                .to_vec(),
            _ => self.bit_offset(write),
        }
    }

    /// A SET value or INCRBY increment.
    fn field_value(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0..8 => {
                let n = self.range(-300, 300);
                self.num(n)
            }
            8..12 => {
                let n = self.rng.random::<i64>();
                self.num(n)
            }
            12..17 => self
                .pick(&[
                    "9223372036854775807",
                    "-9223372036854775808",
                    "-9223372036854775807",
                    "4611686018427387904",
                    "-4611686018427387905",
                    "2147483647",
                    "-2147483648",
                    "4294967295",
                    "65535",
                    "-32768",
                    "127",
                    "-128",
                    "255",
                ])
                .as_bytes()
                .to_vec(),
            _ => self.bad_int(),
        }
    }

    /// BITFIELD's operations, valid and invalid; `only_gets` for BITFIELD_RO mostly.
    fn field_operations(&mut self, only_gets: bool) -> Vec<Vec<u8>> {
        let mut args = Vec::new();
        for _ in 0..self.rng.random_range(0..=4) {
            let which = if only_gets && self.chance(0.85) {
                0
            } else {
                self.rng.random_range(0..12)
            };
            match which {
                0..3 => {
                    args.push(self.word("get"));
                    args.push(self.field_type().0);
                    args.push(self.field_offset(false));
                }
                3..6 => {
                    args.push(self.word("set"));
                    args.push(self.field_type().0);
                    args.push(self.field_offset(true));
                    args.push(self.field_value());
                }
                6..9 => {
                    args.push(self.word("incrby"));
                    args.push(self.field_type().0);
                    args.push(self.field_offset(true));
                    args.push(self.field_value());
                }
                9..11 => {
                    args.push(self.word("overflow"));
                    let policy = match self.rng.random_range(0..10) {
                        0..3 => self.word("wrap"),
                        3..6 => self.word("sat"),
                        6..9 => self.word("fail"),
                        _ => b"saturate".to_vec(),
                    };
                    args.push(policy);
                }
                _ => {
                    // A subcommand cut short, or unknown.
                    let name = self.pick(&["get", "set", "incrby", "overflow", "del"]);
                    args.push(self.word(name));
                    if self.chance(0.5) {
                        args.push(self.field_type().0);
                    }
                }
            }
        }
        args
    }

    /// A string of 0xff bytes, sometimes with one other byte in it.
    fn ones(&mut self) -> Vec<u8> {
        let len = self.rng.random_range(1..24);
        let mut bytes = vec![0xff; len];
        if self.chance(0.4) {
            let at = self.rng.random_range(0..len);
            bytes[at] = self.rng.random();
        }
        bytes
    }

    pub(super) fn bitmap_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        match self.rng.random_range(0..100) {
            0..20 => {
                args.push(self.word("setbit"));
                args.push(self.bitmap_key());
                args.push(self.bit_offset(true));
                let value = match self.rng.random_range(0..12) {
                    0..5 => "0",
                    5..10 => "1",
                    _ => self.pick(&["2", "-1", "x", "", "01", "1.0"]),
                };
                args.push(value.as_bytes().to_vec());
            }
            20..28 => {
                args.push(self.word("getbit"));
                args.push(self.bitmap_key());
                args.push(self.bit_offset(false));
            }
            28..40 => {
                args.push(self.word("bitcount"));
                args.push(self.bitmap_key());
                match self.rng.random_range(0..10) {
                    0..2 => {}
                    2..5 => {
                        args.push(self.bit_index());
                        args.push(self.bit_index());
                    }
                    5..9 => {
                        args.push(self.bit_index());
                        args.push(self.bit_index());
                        args.push(self.bit_unit());
                    }
                    _ => {
                        // A count of arguments BITCOUNT does not take.
                        for _ in 0..self.rng.random_range(1..5) {
                            if self.rng.random_range(0..4) > 0 {
                                args.push(self.bit_index());
                            }
                        }
                    }
                }
            }
            40..54 => {
                args.push(self.word("bitpos"));
                args.push(self.bitmap_key());
                let bit = match self.rng.random_range(0..12) {
                    0..5 => "0",
                    5..10 => "1",
                    _ => self.pick(&["2", "-1", "x"]),
                };
                args.push(bit.as_bytes().to_vec());
                let given = self.rng.random_range(0..5);
                if given >= 1 {
                    args.push(self.bit_index());
                }
                if given >= 2 {
                    args.push(self.bit_index());
                }
                if given >= 3 {
                    args.push(self.bit_unit());
                }
                if given >= 4 && self.chance(0.3) {
                    args.push(self.bit_unit());
                }
            }
            54..64 => {
                args.push(self.word("bitop"));
                let operation = match self.rng.random_range(0..20) {
                    0..5 => "and",
                    5..10 => "or",
                    10..14 => "xor",
                    14..19 => "not",
                    _ => "nand",
                };
                args.push(self.word(operation));
                args.push(self.bitmap_key());
                let sources = if operation == "not" && self.chance(0.8) {
                    1
                } else {
                    self.rng.random_range(1..=4)
                };
                for _ in 0..sources {
                    args.push(self.bitmap_key());
                }
            }
            64..76 => {
                args.push(self.word("bitfield"));
                args.push(self.bitmap_key());
                args.extend(self.field_operations(false));
            }
            76..82 => {
                args.push(self.word("bitfield_ro"));
                args.push(self.bitmap_key());
                args.extend(self.field_operations(true));
            }
            82..92 => {
                args.push(self.word("lcs"));
                args.push(self.bitmap_key());
                args.push(self.bitmap_key());
                for _ in 0..self.rng.random_range(0..4) {
                    match self.rng.random_range(0..12) {
                        0..3 => args.push(self.word("idx")),
                        3..5 => args.push(self.word("len")),
                        5..8 => args.push(self.word("withmatchlen")),
                        8..11 => {
                            args.push(self.word("minmatchlen"));
                            if self.chance(0.9) {
                                let value = match self.rng.random_range(0..6) {
                                    0 => self.bad_int(),
                                    1 => b"-3".to_vec(),
                                    _ => {
                                        let n = self.range(0, 5);
                                        self.num(n)
                                    }
                                };
                                args.push(value);
                            }
                        }
                        _ => args.push(b"idxx".to_vec()),
                    }
                }
            }
            _ => {
                // Strings for the bit commands to meet: runs of ones, or text.
                args.push(self.word("set"));
                args.push(self.bitmap_key());
                let value = if self.chance(0.6) {
                    self.ones()
                } else {
                    self.value()
                };
                args.push(value);
            }
        }
        vec![Step {
            args,
            check: Check::Exact,
        }]
    }
}
