//! A stream's state as either server holds it: its entries (XRANGE) and the metadata no
//! entry command shows (length, last ID, recorded first ID, max deleted ID, entries
//! added), read out of its DUMP payload: RDB type 19 — the nodes, then those numbers.

use super::run;
use redis::Value;

/// Reads RDB lengths and strings (plain, integer, LZF) from a DUMP payload.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> u8 {
        let byte = self.bytes[self.at];
        self.at += 1;
        byte
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        slice
    }

    /// A length, or (`Err`) a special string encoding's number.
    fn length_or_encoding(&mut self) -> Result<u64, u8> {
        let first = self.byte();
        match first >> 6 {
            0 => Ok((first & 0x3f) as u64),
            1 => Ok((((first & 0x3f) as u64) << 8) | self.byte() as u64),
            2 if first == 0x80 => Ok(u32::from_be_bytes(self.take(4).try_into().unwrap()) as u64),
            2 if first == 0x81 => Ok(u64::from_be_bytes(self.take(8).try_into().unwrap())),
            2 => panic!("bad length byte {first:#x}"),
            _ => Err(first & 0x3f),
        }
    }

    fn length(&mut self) -> u64 {
        self.length_or_encoding().expect("a length")
    }

    fn string(&mut self) -> Vec<u8> {
        match self.length_or_encoding() {
            Ok(n) => self.take(n as usize).to_vec(),
            Err(0) => (self.byte() as i8).to_string().into_bytes(),
            Err(1) => i16::from_le_bytes(self.take(2).try_into().unwrap())
                .to_string()
                .into_bytes(),
            Err(2) => i32::from_le_bytes(self.take(4).try_into().unwrap())
                .to_string()
                .into_bytes(),
            Err(3) => {
                let compressed = self.length() as usize;
                let length = self.length() as usize;
                let data = self.take(compressed).to_vec();
                lzf_decompress(&data, length)
            }
            Err(other) => panic!("string encoding {other}"),
        }
    }
}

fn lzf_decompress(input: &[u8], length: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(length);
    let mut at = 0;
    while at < input.len() {
        let control = input[at] as usize;
        at += 1;
        if control < 32 {
            out.extend_from_slice(&input[at..at + control + 1]);
            at += control + 1;
        } else {
            let mut run = control >> 5;
            if run == 7 {
                run += input[at] as usize;
                at += 1;
            }
            let back = ((control & 0x1f) << 8) + input[at] as usize + 1;
            at += 1;
            let from = out.len() - back;
            for i in 0..run + 2 {
                out.push(out[from + i]);
            }
        }
    }
    assert_eq!(out.len(), length, "LZF length");
    out
}

/// The metadata of a stream's DUMP payload: (nodes, length, last ID, recorded first ID,
/// max deleted ID, entries added).
pub fn metadata(payload: &[u8]) -> (u64, u64, String, String, String, u64) {
    let mut reader = Reader {
        bytes: payload,
        at: 0,
    };
    assert_eq!(reader.byte(), 19, "a stream's DUMP is of type 19");
    let nodes = reader.length();
    for _ in 0..nodes {
        assert_eq!(reader.string().len(), 16, "a node's key is an ID");
        reader.string();
    }
    let length = reader.length();
    let mut id = || format!("{}-{}", reader.length(), reader.length());
    let (last, first, max_deleted) = (id(), id(), id());
    let entries_added = reader.length();
    (nodes, length, last, first, max_deleted, entries_added)
}

/// A stream's entries and metadata as one line of text (node count left out: it depends
/// on the node limits in force when the entries came).
pub fn state(conn: &mut redis::Connection, key: &str) -> String {
    let entries = match run(conn, &["XRANGE", key, "-", "+"]) {
        Value::Array(entries) => entries,
        other => panic!("XRANGE {key}: {other:?}"),
    };
    let mut text: Vec<String> = entries.iter().map(|entry| format!("{entry:?}")).collect();
    let payload: Vec<u8> = redis::cmd("DUMP").arg(key).query(conn).unwrap();
    let (_, length, last, first, max_deleted, added) = metadata(&payload);
    text.push(format!(
        "length {length} last {last} first {first} max-deleted {max_deleted} added {added}"
    ));
    text.join(",")
}

/// A stream whose entries are all deleted (its payload is metadata and groups only): group
/// g1, alice owning 1-1 and bob 2-2 in its pending list.
pub const TWO_CONSUMERS: [&str; 6] = [
    "XADD s 1-1 a b",
    "XADD s 2-2 c d",
    "XGROUP CREATE s g1 0",
    "XREADGROUP GROUP g1 alice COUNT 1 STREAMS s >",
    "XREADGROUP GROUP g1 bob STREAMS s >",
    "XDEL s 1-1 2-2",
];
