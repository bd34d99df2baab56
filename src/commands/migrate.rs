//! MIGRATE: moves keys to another server (Redis, or Tessera) by sending it RESTORE
//! commands with each key's DUMP payload, as Redis 7.0's `migrateCommand` does, then
//! deletes the keys the target acknowledged (unless COPY) and logs that as one DEL.
//!
//! The exchange is synchronous, bounded by the command's timeout, and holds the event
//! loop meanwhile, as in Redis (MIGRATE is an operator's tool, run per key or per batch).
//! Unlike Redis, no connection is kept for the next call: each MIGRATE connects afresh
//! and SELECTs the target database, which is what Redis does on its first call to a
//! target.

use super::{Action, Args, Ctx, EventClass, SYNTAX_ERROR, eq_ignore_case, flags};
use crate::command;
use crate::keyspace::NO_EXPIRY;
use crate::rdb::payload;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![command!(
        "migrate",
        -6,
        WRITE | MOVABLEKEYS,
        (3, 3, 1),
        "generic",
        "Atomically transfer a key from a Redis instance to another one.",
        migrate
    )]
}

/// A reply line from the target longer than this is cut (Redis reads 1 KB).
const REPLY_LINE_MAX: u64 = 64 * 1024;

/// What the target is asked to do, after the keys.
struct Request<'a> {
    copy: bool,
    replace: bool,
    /// AUTH's arguments: (username, password).
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: &'a [&'a [u8]],
}

/// Why an exchange with the target failed.
enum Failure {
    Connect,
    Write,
    Read,
}

fn parse_request<'a>(ctx: &mut Ctx, args: &'a Args<'a>) -> Option<Request<'a>> {
    let mut request = Request {
        copy: false,
        replace: false,
        auth: None,
        keys: &args[3..4],
    };
    let mut i = 6;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if eq_ignore_case(args[i], "copy") {
            request.copy = true;
        } else if eq_ignore_case(args[i], "replace") {
            request.replace = true;
        } else if eq_ignore_case(args[i], "auth") && more >= 1 {
            request.auth = Some((None, args[i + 1]));
            i += 1;
        } else if eq_ignore_case(args[i], "auth2") && more >= 2 {
            request.auth = Some((Some(args[i + 1]), args[i + 2]));
            i += 2;
        } else if eq_ignore_case(args[i], "keys") {
            if !args[3].is_empty() {
                ctx.out.error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                );
                return None;
            }
            request.keys = &args[i + 1..];
            break;
        } else {
            ctx.out.error(SYNTAX_ERROR);
            return None;
        }
        i += 1;
    }
    Some(request)
}

fn migrate(ctx: &mut Ctx, args: &Args) -> Action {
    let Some(request) = parse_request(ctx, args) else {
        return Action::None;
    };
    let Some(timeout_ms) = super::int_arg(ctx, args[5]) else {
        return Action::None;
    };
    let Some(db) = super::int_arg(ctx, args[4]) else {
        return Action::None;
    };
    let timeout = Duration::from_millis(if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    });
    // The keys here, each with its remaining time to live (0: none) and payload.
    let compression = ctx.server.config.rdbcompression;
    let now = ctx.now_ms;
    let mut found: Vec<(&[u8], i64, Vec<u8>)> = Vec::new();
    for key in request.keys {
        let Some(entry) = ctx.lookup_read(key) else {
            continue;
        };
        let ttl = match entry.expire_at_ms {
            NO_EXPIRY => 0,
            at if at < now => continue,
            at => (at - now).max(1),
        };
        found.push((key, ttl, payload::encode_value(&entry.value, compression)));
    }
    if found.is_empty() {
        ctx.out.simple("NOKEY");
        return Action::None;
    }
    let exchange = send_restores(args[1], args[2], db, &request, &found, timeout);
    let acknowledged = match exchange {
        Err(failure) => {
            let doing = match failure {
                Failure::Connect => {
                    ctx.out
                        .error("IOERR error or timeout connecting to the client");
                    return Action::None;
                }
                Failure::Write => "writing",
                Failure::Read => "reading",
            };
            ctx.out.error(&format!(
                "IOERR error or timeout {doing} to target instance"
            ));
            return Action::None;
        }
        Ok(replies) => replies,
    };
    // Redis reports the first error: AUTH's, then SELECT's, then a RESTORE's; a key
    // whose RESTORE succeeded is deleted even so.
    let mut first_error = None;
    let mut deleted: Vec<&[u8]> = vec![b"DEL"];
    for (index, reply) in acknowledged.restores.iter().enumerate() {
        let setup_error = acknowledged
            .auth
            .as_ref()
            .filter(|r| is_error(r))
            .or(acknowledged.select.as_ref().filter(|r| is_error(r)));
        if let Some(error) = setup_error.or(Some(reply).filter(|r| is_error(r))) {
            first_error.get_or_insert_with(|| error.clone());
            continue;
        }
        if !request.copy {
            let key = found[index].0;
            ctx.db().remove(key);
            ctx.notify(EventClass::Generic, "del", key);
            deleted.push(key);
        }
    }
    if deleted.len() > 1 {
        ctx.propagate(&deleted);
    }
    match (first_error, acknowledged.cut_short) {
        (Some(error), _) => ctx.out.error(&format!(
            "ERR Target instance replied with error: {}",
            String::from_utf8_lossy(&error[1..])
        )),
        (None, true) => ctx
            .out
            .error("IOERR error or timeout reading to target instance"),
        (None, false) => ctx.out.ok(),
    }
    Action::None
}

fn is_error(line: &[u8]) -> bool {
    line.first() == Some(&b'-')
}

/// The target's reply lines (without CRLF).
struct Replies {
    auth: Option<Vec<u8>>,
    select: Option<Vec<u8>>,
    /// One per key, in order, as far as they came.
    restores: Vec<Vec<u8>>,
    /// The connection failed before every RESTORE was answered.
    cut_short: bool,
}

/// Connects, sends AUTH (if asked), SELECT and a RESTORE per key in one write, and reads
/// the replies.
fn send_restores(
    host: &[u8],
    port: &[u8],
    db: i64,
    request: &Request,
    keys: &[(&[u8], i64, Vec<u8>)],
    timeout: Duration,
) -> Result<Replies, Failure> {
    let stream = connect(host, port, timeout)?;
    let mut commands = Vec::new();
    if let Some((user, password)) = request.auth {
        let mut auth: Vec<&[u8]> = vec![b"AUTH"];
        auth.extend(user);
        auth.push(password);
        crate::resp::encode_command(&mut commands, &auth);
    }
    let db = db.to_string();
    crate::resp::encode_command(&mut commands, &[b"SELECT", db.as_bytes()]);
    for (key, ttl, payload) in keys {
        let ttl = ttl.to_string();
        let mut restore: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if request.replace {
            restore.push(b"REPLACE");
        }
        crate::resp::encode_command(&mut commands, &restore);
    }
    (&stream).write_all(&commands).map_err(|_| Failure::Write)?;
    let mut reader = BufReader::new(&stream);
    let mut read_line = || read_reply_line(&mut reader).ok_or(Failure::Read);
    let auth = request.auth.map(|_| read_line()).transpose()?;
    let select = Some(read_line()?);
    let mut restores = Vec::with_capacity(keys.len());
    let mut cut_short = false;
    for _ in keys {
        match read_line() {
            Ok(line) => restores.push(line),
            // Nothing acknowledged: the whole MIGRATE failed.
            Err(failure) if restores.is_empty() => return Err(failure),
            Err(_) => {
                cut_short = true;
                break;
            }
        }
    }
    Ok(Replies {
        auth,
        select,
        restores,
        cut_short,
    })
}

/// Redis connects without blocking and learns of a refused connection when it writes:
/// only a name that does not resolve, or no answer within the timeout, is a failure to
/// connect. The port is read as C's `atoi` reads it (`notaport` is port 0).
fn connect(host: &[u8], port: &[u8], timeout: Duration) -> Result<TcpStream, Failure> {
    let host = std::str::from_utf8(host).map_err(|_| Failure::Connect)?;
    let digits = port.iter().take_while(|b| b.is_ascii_digit()).count();
    let port = std::str::from_utf8(&port[..digits])
        .ok()
        .and_then(|p| p.parse::<u64>().ok())
        .unwrap_or(0) as u16;
    let address = (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or(Failure::Connect)?;
    let stream =
        TcpStream::connect_timeout(&address, timeout).map_err(|error| match error.kind() {
            std::io::ErrorKind::TimedOut => Failure::Connect,
            _ => Failure::Write,
        })?;
    let configured = stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .and_then(|()| stream.set_nodelay(true));
    configured.map_err(|_| Failure::Write)?;
    Ok(stream)
}

/// One line of the target's reply, without its CRLF; None on a closed connection, an
/// error or a timeout. A line longer than `REPLY_LINE_MAX` is cut there.
fn read_reply_line(reader: &mut BufReader<&TcpStream>) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    let read = reader
        .by_ref()
        .take(REPLY_LINE_MAX)
        .read_until(b'\n', &mut line)
        .ok()?;
    if read == 0 {
        return None;
    }
    while matches!(line.last(), Some(b'\n' | b'\r')) {
        line.pop();
    }
    Some(line)
}
