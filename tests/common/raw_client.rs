//! A raw RESP client that keeps every reply type apart (RESP2 and RESP3: simple string,
//! error, integer, bulk, array, map, set, double, null, push) and tells a closed
//! connection from a reply: for tests that compare replies with Redis's byte for byte in
//! meaning, where the `redis` crate would fold types together or hide a close.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum V {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<V>),
    Map(Vec<(V, V)>),
    Set(Vec<V>),
    Double(String),
    Null,
    Push(Vec<V>),
    /// The connection closed instead of replying.
    Closed,
}

impl V {
    pub fn text(&self) -> String {
        match self {
            V::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            V::Simple(s) | V::Error(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }
    pub fn items(&self) -> Vec<V> {
        match self {
            V::Array(items) | V::Set(items) | V::Push(items) => items.clone(),
            V::Map(pairs) => pairs
                .iter()
                .flat_map(|(k, v)| [k.clone(), v.clone()])
                .collect(),
            other => panic!("not an aggregate: {other:?}"),
        }
    }
}

pub struct Conn {
    pub reader: BufReader<TcpStream>,
}

impl Conn {
    pub fn new(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        // A closed peer shows up on the read.
        let _ = self.reader.get_mut().write_all(&out);
    }

    pub fn call(&mut self, args: &[&[u8]]) -> V {
        self.send(args);
        self.read()
    }

    pub fn cmd(&mut self, words: &[&str]) -> V {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        self.call(&args)
    }

    pub fn read(&mut self) -> V {
        read_value(&mut self.reader).unwrap_or(V::Closed)
    }

    pub fn is_closed(&mut self) -> bool {
        self.reader
            .get_mut()
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut byte = [0u8; 1];
        matches!(self.reader.read(&mut byte), Ok(0) | Err(_))
    }
}

pub fn read_value(reader: &mut BufReader<TcpStream>) -> Option<V> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).ok()?;
    if line.len() < 3 {
        return None;
    }
    let text = String::from_utf8_lossy(&line[1..line.len() - 2]).into_owned();
    let count = || text.parse::<i64>().unwrap();
    let many = |reader: &mut BufReader<TcpStream>, n: i64| -> Option<Vec<V>> {
        (0..n).map(|_| read_value(reader)).collect()
    };
    Some(match line[0] {
        b'+' => V::Simple(text),
        b'-' => V::Error(text),
        b':' => V::Int(count()),
        b',' => V::Double(text),
        b'_' => V::Null,
        b'$' | b'=' => {
            let n = count();
            if n < 0 {
                V::Bulk(None)
            } else {
                let mut data = vec![0u8; n as usize + 2];
                reader.read_exact(&mut data).ok()?;
                data.truncate(n as usize);
                V::Bulk(Some(data))
            }
        }
        b'*' if count() < 0 => V::Null,
        b'*' => V::Array(many(reader, count())?),
        b'~' => V::Set(many(reader, count())?),
        b'>' => V::Push(many(reader, count())?),
        b'%' => {
            let items = many(reader, 2 * count())?;
            V::Map(
                items
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect(),
            )
        }
        other => panic!("unexpected RESP type {}", other as char),
    })
}
