//! The preload: `SET key:<n> <value>` for every n of the key space, once, each value fresh
//! random bytes, pipelined as fast as the server takes them (closed loop: this part is not
//! measured). The key space is cut into one contiguous range per connection.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;

use crate::resp::{self, Kind, Parsed};
use crate::schedule::splitmix64;

pub struct PreloadResult {
    pub keys: u64,
    pub errors: u64,
    /// The first error replies (at most 5).
    pub error_texts: Vec<String>,
    pub seconds: f64,
}

pub fn run(
    addr: SocketAddr,
    keyspace: u64,
    value_size: usize,
    connections: usize,
    pipeline: usize,
    seed: u64,
) -> io::Result<PreloadResult> {
    let connections = connections.clamp(1, keyspace.max(1) as usize);
    let started = Instant::now();
    let mut streams = Vec::with_capacity(connections);
    for _ in 0..connections {
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| io::Error::new(e.kind(), format!("connecting to {addr}: {e}")))?;
        stream.set_nodelay(true)?;
        // A server that stops answering for this long is reported, not waited for.
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        streams.push(stream);
    }
    let per = keyspace.div_ceil(connections as u64);
    let outcomes: Vec<io::Result<(u64, u64, Vec<String>)>> = thread::scope(|scope| {
        let handles: Vec<_> = streams
            .into_iter()
            .enumerate()
            .map(|(i, stream)| {
                let lo = (i as u64 * per).min(keyspace);
                let hi = (lo + per).min(keyspace);
                let rng =
                    SmallRng::seed_from_u64(splitmix64(seed ^ 0x7072_656c_6f61_6400 ^ i as u64));
                scope.spawn(move || load_range(stream, lo..hi, value_size, pipeline.max(1), rng))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("preload thread"))
            .collect()
    });
    let mut result = PreloadResult {
        keys: 0,
        errors: 0,
        error_texts: Vec::new(),
        seconds: 0.0,
    };
    for outcome in outcomes {
        let (keys, errors, texts) = outcome?;
        result.keys += keys;
        result.errors += errors;
        for t in texts {
            if result.error_texts.len() < 5 {
                result.error_texts.push(t);
            }
        }
    }
    result.seconds = started.elapsed().as_secs_f64();
    Ok(result)
}

fn load_range(
    mut stream: TcpStream,
    keys: std::ops::Range<u64>,
    value_size: usize,
    pipeline: usize,
    mut rng: SmallRng,
) -> io::Result<(u64, u64, Vec<String>)> {
    let mut out = Vec::with_capacity(pipeline * (value_size + 64));
    let mut buf = vec![0u8; 64 * 1024];
    let (mut start, mut end) = (0usize, 0usize);
    let (mut done, mut errors) = (0u64, 0u64);
    let mut texts = Vec::new();
    let mut key = keys.start;
    while key < keys.end {
        let batch_end = (key + pipeline as u64).min(keys.end);
        out.clear();
        for k in key..batch_end {
            resp::push_set(&mut out, k, value_size, &mut rng);
        }
        stream.write_all(&out)?;
        let mut want = batch_end - key;
        while want > 0 {
            match resp::parse_reply(&buf[start..end]) {
                Parsed::Reply { kind, len } => {
                    match kind {
                        Kind::Status => done += 1,
                        Kind::Error => {
                            errors += 1;
                            if texts.len() < 5 {
                                texts.push(resp::error_text(&buf[start..start + len]));
                            }
                        }
                        other => {
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                format!("unexpected {other:?} reply to SET"),
                            ));
                        }
                    }
                    start += len;
                    want -= 1;
                }
                Parsed::Incomplete => {
                    if start > 0 {
                        buf.copy_within(start..end, 0);
                        end -= start;
                        start = 0;
                    }
                    if end == buf.len() {
                        buf.resize(buf.len() * 2, 0);
                    }
                    let n = stream.read(&mut buf[end..])?;
                    if n == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "the server closed the connection",
                        ));
                    }
                    end += n;
                }
                Parsed::Invalid(why) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("protocol error: {why}"),
                    ));
                }
            }
        }
        key = batch_end;
    }
    Ok((done, errors, texts))
}
