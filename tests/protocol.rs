//! The wire protocol and bad input, against the real `tessera-server` binary with real
//! sockets: pipelining, inline commands, RESP3, QUIT, protocol errors (exact Redis text and
//! where the connection is closed), hostile length claims, query-buffer limits, random
//! garbage, partial and abandoned commands, AUTH and maxclients.
//!
//! Where a reply is Redis's, the expected bytes are written out here and, when Debian's
//! redis-server is installed, the same bytes are also checked against a real Redis 7.0.

mod common;

use common::encode_command as resp;

use common::*;
use rand::rngs::StdRng;
use rand::{Rng, RngExt, SeedableRng};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// Writes without caring whether the server already closed the connection.
fn send(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    stream.write_all(bytes).is_ok()
}

/// Reads until the peer closes (true) or `wait` passes (false), keeping what arrives.
fn wait_closed(stream: &mut TcpStream, wait: Duration, extra: &mut Vec<u8>) -> bool {
    let deadline = Instant::now() + wait;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(n) => extra.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// Sends `request` on a fresh connection; returns what came back and whether the server
/// closed the connection. `expected_len` bounds the read; `closes` says how long to wait
/// for the close (a connection expected to stay open is watched for 300 ms).
fn exchange(port: u16, request: &[u8], expected_len: usize, closes: bool) -> (Vec<u8>, bool) {
    let mut stream = connect(port);
    send(&mut stream, request);
    let (mut reply, closed) = read_bytes(&mut stream, expected_len, Duration::from_secs(10));
    if closed {
        return (reply, true);
    }
    let wait = if closes {
        Duration::from_secs(10)
    } else {
        Duration::from_millis(300)
    };
    let closed = wait_closed(&mut stream, wait, &mut reply);
    (reply, closed)
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .replace('\r', "\\r")
        .replace('\n', "\\n")
}

/// Sends `request` followed by `ECHO <sentinel>` and returns the replies to `request`,
/// however long or however split: the sentinel's reply marks their end.
fn request_with_sentinel(stream: &mut TcpStream, request: &[u8]) -> Vec<u8> {
    const SENTINEL: &[u8] = b"$18\r\n-- end of reply --\r\n";
    let mut bytes = request.to_vec();
    bytes.extend_from_slice(b"ECHO \"-- end of reply --\"\r\n");
    send(stream, &bytes);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reply = Vec::new();
    while !reply.ends_with(SENTINEL) {
        assert!(
            Instant::now() < deadline,
            "no complete reply: {}",
            show(&reply)
        );
        let (more, closed) = read_bytes(stream, 1, Duration::from_secs(1));
        reply.extend(more);
        assert!(!closed, "connection closed: {}", show(&reply));
    }
    reply.truncate(reply.len() - SENTINEL.len());
    reply
}

fn ping_fresh(port: u16) -> Vec<u8> {
    let mut stream = connect(port);
    send(&mut stream, b"PING\r\n");
    read_bytes(&mut stream, 7, Duration::from_secs(10)).0
}

fn assert_alive(server: &mut TestServer) {
    if let Some(child) = server.child.as_mut() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "server exited; log:\n{}",
            server.log()
        );
    }
    assert_eq!(
        ping_fresh(server.port),
        b"+PONG\r\n",
        "server does not answer PING"
    );
}

fn info_field(conn: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let text: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    let prefix = format!("{field}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}:\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

fn oracle() -> Option<RedisOracle> {
    require_redis_or_skip("the comparison with Redis").map(|path| RedisOracle::start(&path))
}

// ---------------------------------------------------------------------------------------
// Pipelining, inline, RESP3, QUIT
// ---------------------------------------------------------------------------------------

#[test]
fn pipelined_commands_in_one_write_reply_in_order() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut request = Vec::new();
    let mut expected = Vec::new();
    for i in 0..2000 {
        let key = format!("key:{i}");
        let value = format!("value-{i}-{}", "x".repeat(i % 50));
        request.extend(resp(&[b"SET", key.as_bytes(), value.as_bytes()]));
        expected.extend_from_slice(b"+OK\r\n");
        request.extend(resp(&[b"ECHO", format!("e{i}").as_bytes()]));
        expected.extend(format!("${}\r\ne{i}\r\n", format!("e{i}").len()).into_bytes());
        request.extend(resp(&[b"INCR", b"counter"]));
        expected.extend(format!(":{}\r\n", i + 1).into_bytes());
        // Inline and multibulk mixed in the same stream.
        request.extend(format!("GET {key}\r\n").into_bytes());
        expected.extend(format!("${}\r\n{value}\r\n", value.len()).into_bytes());
    }
    request.extend_from_slice(b"PING\r\n");
    expected.extend_from_slice(b"+PONG\r\n");
    let mut stream = connect(server.port);
    // Write everything while a reader thread drains replies, so neither side blocks.
    let mut reader = stream.try_clone().unwrap();
    let want = expected.len();
    let handle = std::thread::spawn(move || read_bytes(&mut reader, want, Duration::from_secs(30)));
    stream.write_all(&request).unwrap();
    let (reply, closed) = handle.join().unwrap();
    assert!(!closed);
    assert_eq!(reply.len(), expected.len(), "reply length");
    assert!(reply == expected, "replies out of order or wrong");

    // The same through a real client's pipeline.
    let mut conn = server.connection();
    let mut pipe = redis::pipe();
    for i in 0..500 {
        pipe.cmd("SET").arg(format!("p{i}")).arg(i);
        pipe.cmd("GET").arg(format!("p{i}"));
    }
    let results: Vec<redis::Value> = pipe.query(&mut conn).unwrap();
    assert_eq!(results.len(), 1000);
    for i in 0..500 {
        assert_eq!(results[2 * i], redis::Value::Okay);
        let got: String = redis::from_redis_value(results[2 * i + 1].clone()).unwrap();
        assert_eq!(got, i.to_string());
    }
}

#[test]
fn inline_commands_with_quotes_and_escapes() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut stream = connect(server.port);
    let request: &[u8] = b"SET \"a b\" 'c'\r\n\
        GET \"a b\"\r\n\
        ECHO \"\\x41\\x42\\n\\t\"\r\n\
        ECHO 'it\\'s'\r\n\
        ECHO \"say \\\"hi\\\"\"\r\n\
        \r\n\
        \n\
        ping\n\
        echo   spaced     out\r\n\
        ECHO \"\"\r\n";
    let expected: &[u8] =
        b"+OK\r\n$1\r\nc\r\n$4\r\nAB\n\t\r\n$4\r\nit's\r\n$8\r\nsay \"hi\"\r\n+PONG\r\n\
        -ERR wrong number of arguments for 'echo' command\r\n$0\r\n\r\n";
    send(&mut stream, request);
    let (reply, closed) = read_bytes(&mut stream, expected.len(), Duration::from_secs(10));
    assert!(!closed);
    assert_eq!(show(&reply), show(expected));
    // The key set inline is an ordinary key for a RESP client.
    let mut conn = server.connection();
    let value: String = redis::cmd("GET").arg("a b").query(&mut conn).unwrap();
    assert_eq!(value, "c");
    // Unbalanced quotes: Redis's error, and the connection is closed.
    send(&mut stream, b"SET \"a b\r\n");
    let mut rest = Vec::new();
    assert!(wait_closed(&mut stream, Duration::from_secs(10), &mut rest));
    assert_eq!(
        show(&rest),
        show(b"-ERR Protocol error: unbalanced quotes in request\r\n")
    );
}

#[test]
fn resp3_with_hello_3_and_back_to_resp2() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut stream = connect(server.port);
    let hello = request_with_sentinel(&mut stream, b"HELLO 3\r\n");
    let text = show(&hello);
    assert!(
        text.starts_with("%7\\r\\n"),
        "HELLO 3 must reply a RESP3 map: {text}"
    );
    for part in [
        "$6\\r\\nserver\\r\\n$5\\r\\nredis\\r\\n",
        "$7\\r\\nversion\\r\\n$6\\r\\n7.0.15\\r\\n",
        "$5\\r\\nproto\\r\\n:3\\r\\n",
        "$4\\r\\nmode\\r\\n$10\\r\\nstandalone\\r\\n",
        "$4\\r\\nrole\\r\\n$6\\r\\nmaster\\r\\n",
        "$7\\r\\nmodules\\r\\n*0\\r\\n",
    ] {
        assert!(text.contains(part), "HELLO 3 reply lacks {part}: {text}");
    }
    // Nulls are `_`, maps are `%`, INFO is a verbatim string.
    let expected = b"_\r\n%1\r\n$2\r\nhz\r\n$2\r\n10\r\n+PONG\r\n";
    send(&mut stream, b"GET missing\r\nCONFIG GET hz\r\nPING\r\n");
    let (reply, _) = read_bytes(&mut stream, expected.len(), Duration::from_secs(10));
    assert_eq!(show(&reply), show(expected));
    let info = request_with_sentinel(&mut stream, b"INFO server\r\n");
    assert!(
        info.starts_with(b"="),
        "INFO in RESP3 is verbatim: {}",
        show(&info)
    );
    assert!(
        show(&info).contains("txt:# Server\\r\\n"),
        "{}",
        show(&info)
    );

    // Back to RESP2: the map is a flat array of 14, nulls are `$-1`.
    let hello2 = request_with_sentinel(&mut stream, b"HELLO 2\r\n");
    let text = show(&hello2);
    assert!(text.starts_with("*14\\r\\n"), "{text}");
    assert!(text.contains("$5\\r\\nproto\\r\\n:2\\r\\n"), "{text}");
    let expected = b"$-1\r\n*2\r\n$2\r\nhz\r\n$2\r\n10\r\n";
    send(&mut stream, b"GET missing\r\nCONFIG GET hz\r\n");
    let (reply, _) = read_bytes(&mut stream, expected.len(), Duration::from_secs(10));
    assert_eq!(show(&reply), show(expected));

    // Bad versions are refused and change nothing.
    let expected = b"-NOPROTO unsupported protocol version\r\n-ERR Protocol version is not an integer or out of range\r\n$-1\r\n";
    send(&mut stream, b"HELLO 4\r\nHELLO three\r\nGET missing\r\n");
    let (reply, _) = read_bytes(&mut stream, expected.len(), Duration::from_secs(10));
    assert_eq!(show(&reply), show(expected));
}

#[test]
fn quit_replies_ok_then_closes_and_ignores_the_rest() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let (reply, closed) = exchange(
        server.port,
        b"PING\r\nQUIT\r\nSET after-quit 1\r\n",
        12,
        true,
    );
    assert_eq!(show(&reply), show(b"+PONG\r\n+OK\r\n"));
    assert!(closed, "QUIT must close the connection");
    let mut conn = server.connection();
    let exists: i64 = redis::cmd("EXISTS")
        .arg("after-quit")
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, 0, "commands pipelined after QUIT must not run");
    // Through a real client as well.
    let mut conn2 = server.connection();
    let ok: String = redis::cmd("QUIT").query(&mut conn2).unwrap();
    assert_eq!(ok, "OK");
}

// ---------------------------------------------------------------------------------------
// Protocol errors
// ---------------------------------------------------------------------------------------

struct Case {
    name: &'static str,
    request: Vec<u8>,
    reply: Vec<u8>,
    closes: bool,
}

fn case(name: &'static str, request: &[u8], reply: &[u8], closes: bool) -> Case {
    Case {
        name,
        request: request.to_vec(),
        reply: reply.to_vec(),
        closes,
    }
}

fn protocol_cases() -> Vec<Case> {
    let mut cases = vec![
        case(
            "bad multibulk count",
            b"*abc\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
            true,
        ),
        case(
            "count with plus sign",
            b"*+1\r\n$4\r\nPING\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
            true,
        ),
        case(
            "count with leading zero",
            b"*01\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
            true,
        ),
        case(
            "empty count",
            b"*\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
            true,
        ),
        case(
            "count above INT_MAX",
            b"*2147483648\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
            true,
        ),
        case(
            "plus instead of dollar",
            b"*1\r\n+x\r\n",
            b"-ERR Protocol error: expected '$', got '+'\r\n",
            true,
        ),
        case(
            "colon instead of dollar",
            b"*2\r\n$4\r\nECHO\r\n:1\r\n",
            b"-ERR Protocol error: expected '$', got ':'\r\n",
            true,
        ),
        case(
            "negative bulk length",
            b"*1\r\n$-5\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        case(
            "null bulk in a request",
            b"*1\r\n$-1\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        case(
            "bulk length with plus",
            b"*1\r\n$+4\r\nPING\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        case(
            "bulk length with leading zero",
            b"*1\r\n$04\r\nPING\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        case(
            "empty bulk length",
            b"*1\r\n$\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        case(
            "bulk above default proto-max-bulk-len (512mb)",
            b"*1\r\n$536870913\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        case(
            "bulk at proto-max-bulk-len waits for data",
            b"*1\r\n$536870912\r\n",
            b"",
            false,
        ),
        case("huge count waits for data", b"*2147483647\r\n", b"", false),
        case(
            "unbalanced double quote",
            b"SET \"a b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
            true,
        ),
        case(
            "unbalanced single quote",
            b"SET 'a b\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
            true,
        ),
        case(
            "closing quote glued to text",
            b"SET \"a\"b c\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
            true,
        ),
        case(
            "earlier commands run, later ones do not",
            b"PING\r\n*abc\r\nPING\r\n",
            b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
            true,
        ),
        case(
            "negative count is skipped",
            b"*-1\r\nPING\r\n",
            b"+PONG\r\n",
            false,
        ),
        case(
            "zero count is skipped",
            b"*0\r\nPING\r\n",
            b"+PONG\r\n",
            false,
        ),
        case(
            "empty inline lines are skipped",
            b"\r\n\n\r\nPING\r\n",
            b"+PONG\r\n",
            false,
        ),
        case(
            "empty command name",
            b"*1\r\n$0\r\n\r\n",
            b"-ERR unknown command '', with args beginning with: \r\n",
            false,
        ),
        case(
            "bulk terminator is not checked, as in Redis",
            b"*1\r\n$4\r\nPINGxxPING\r\n",
            b"+PONG\r\n+PONG\r\n",
            false,
        ),
        case(
            "half a command waits",
            b"*2\r\n$4\r\nECHO\r\n$5\r\nhel",
            b"",
            false,
        ),
    ];
    cases.push(Case {
        name: "inline request over 64 KB without newline",
        request: vec![b'a'; 70 * 1024],
        reply: b"-ERR Protocol error: too big inline request\r\n".to_vec(),
        closes: true,
    });
    let mut long_count = b"*".to_vec();
    long_count.extend(vec![b'1'; 70 * 1024]);
    cases.push(Case {
        name: "multibulk count line over 64 KB",
        request: long_count,
        reply: b"-ERR Protocol error: too big mbulk count string\r\n".to_vec(),
        closes: true,
    });
    let mut long_bulk_count = b"*1\r\n$".to_vec();
    long_bulk_count.extend(vec![b'1'; 70 * 1024]);
    cases.push(Case {
        name: "bulk count line over 64 KB",
        request: long_bulk_count,
        reply: b"-ERR Protocol error: too big bulk count string\r\n".to_vec(),
        closes: true,
    });
    cases
}

fn check_cases(port: u16, cases: &[Case], who: &str) -> Vec<String> {
    let mut failures = Vec::new();
    for case in cases {
        let (reply, closed) = exchange(port, &case.request, case.reply.len(), case.closes);
        if reply != case.reply || closed != case.closes {
            failures.push(format!(
                "{who}: {}: expected {:?} (closes: {}), got {:?} (closed: {closed})",
                case.name,
                show(&case.reply),
                case.closes,
                show(&reply)
            ));
        }
    }
    failures
}

#[test]
fn protocol_errors_have_redis_text_and_close_where_redis_closes() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    let cases = protocol_cases();
    let mut failures = check_cases(server.port, &cases, "tessera");
    // The expectations are Redis's own: check them against Redis when it is installed.
    if let Some(redis) = oracle() {
        failures.extend(check_cases(redis.port, &cases, "redis 7.0"));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert_alive(&mut server);
}

#[test]
fn bulk_length_above_a_lowered_proto_max_bulk_len_is_refused() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--proto-max-bulk-len", "2mb"]);
    let cases = vec![
        case(
            "bulk one byte over 1mb",
            b"*1\r\n$1048577\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
            true,
        ),
        case("bulk at 1mb waits", b"*1\r\n$1048576\r\n", b"", false),
    ];
    let mut conn = server.connection();
    let ok: String = redis::cmd("CONFIG")
        .arg("SET")
        .arg("proto-max-bulk-len")
        .arg("1mb")
        .query(&mut conn)
        .unwrap();
    assert_eq!(ok, "OK");
    let mut failures = check_cases(server.port, &cases, "tessera");
    if let Some(redis) = oracle() {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("proto-max-bulk-len")
            .arg("1mb")
            .query(&mut redis.connection())
            .unwrap();
        failures.extend(check_cases(redis.port, &cases, "redis 7.0"));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    // A value within the limit still works.
    let big = vec![b'v'; 1024 * 1024];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut conn)
        .unwrap();
    let len: i64 = redis::cmd("STRLEN").arg("big").query(&mut conn).unwrap();
    assert_eq!(len, big.len() as i64);
    assert_alive(&mut server);
}

// ---------------------------------------------------------------------------------------
// Hostile sizes
// ---------------------------------------------------------------------------------------

#[test]
fn oversized_claims_do_not_allocate_and_server_stays_responsive() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let used_before = info_field(&mut conn, "memory", "used_memory");
    let rss_before = info_field(&mut conn, "memory", "used_memory_rss");

    let mut hostile = Vec::new();
    // A billion arguments announced, two sent.
    let mut s = connect(server.port);
    send(&mut s, b"*1000000000\r\n$3\r\nSET\r\n$1\r\nk\r\n");
    hostile.push(s);
    // Ten connections each announcing a 500 MB bulk and sending 100 KB of it.
    for _ in 0..10 {
        let mut s = connect(server.port);
        send(&mut s, b"*1\r\n$500000000\r\n");
        send(&mut s, &vec![b'x'; 100 * 1024]);
        hostile.push(s);
    }
    // A SET whose value claims 400 MB.
    let mut s = connect(server.port);
    send(&mut s, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000000\r\nabc");
    hostile.push(s);

    // The server answers others at once.
    for _ in 0..20 {
        let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
        assert_eq!(pong, "PONG");
    }
    std::thread::sleep(Duration::from_millis(300));
    let used_after = info_field(&mut conn, "memory", "used_memory");
    let rss_after = info_field(&mut conn, "memory", "used_memory_rss");
    const LIMIT: u64 = 50 * 1024 * 1024;
    assert!(
        used_after < used_before + LIMIT,
        "used_memory jumped from {used_before} to {used_after}"
    );
    assert!(
        rss_after < rss_before + LIMIT,
        "used_memory_rss jumped from {rss_before} to {rss_after}"
    );
    // The claimants are still waiting for their data, as with Redis (not closed).
    for s in hostile.iter_mut() {
        assert!(
            !is_closed(s, Duration::from_millis(50)),
            "a pending request was dropped"
        );
    }
    let clients = info_field(&mut conn, "clients", "connected_clients");
    assert_eq!(clients, 1 + hostile.len() as u64);
    drop(hostile);
    assert_alive(&mut server);
    let exists: i64 = redis::cmd("EXISTS").arg("k").query(&mut conn).unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn client_query_buffer_limit_closes_the_client_and_spares_the_server() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--client-query-buffer-limit", "1mb"]);
    let mut conn = server.connection();
    // Under the limit: fine.
    let value = vec![b'a'; 512 * 1024];
    let _: () = redis::cmd("SET")
        .arg("small")
        .arg(&value)
        .query(&mut conn)
        .unwrap();

    // A 2 MB bulk, sent partially: the query buffer passes 1 MB and the client is closed
    // without a reply, as Redis does.
    let mut s = connect(server.port);
    send(&mut s, b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$2097152\r\n");
    let chunk = vec![b'b'; 64 * 1024];
    for _ in 0..24 {
        if !send(&mut s, &chunk) {
            break;
        }
    }
    let mut extra = Vec::new();
    assert!(
        wait_closed(&mut s, Duration::from_secs(10), &mut extra),
        "client over client-query-buffer-limit was not closed"
    );
    assert!(extra.is_empty(), "unexpected reply: {}", show(&extra));
    assert_alive(&mut server);
    let exists: i64 = redis::cmd("EXISTS").arg("big").query(&mut conn).unwrap();
    assert_eq!(exists, 0);
    let len: i64 = redis::cmd("STRLEN").arg("small").query(&mut conn).unwrap();
    assert_eq!(len, value.len() as i64);
}

// ---------------------------------------------------------------------------------------
// Garbage, partial commands, abandoned commands
// ---------------------------------------------------------------------------------------

/// Bytes from one of three generators: uniform noise, noise over the protocol's
/// alphabet, and well-framed commands with random names and arguments.
fn garbage(rng: &mut StdRng, kind: u64, names: &[String], target: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(target + 1024);
    while out.len() < target {
        match kind {
            0 => {
                let mut chunk = vec![0u8; rng.random_range(1..2048usize)];
                rng.fill_bytes(&mut chunk);
                out.extend(chunk);
            }
            3 => {
                // Inline lines: words, quotes, escapes and control bytes (NUL included).
                const WORDS: &[&[u8]] = &[
                    b"SET",
                    b"GET",
                    b"ECHO",
                    b"PING",
                    b"DEL",
                    b"INCR",
                    b"k",
                    b"v",
                    b"\"",
                    b"'",
                    b"\"a b\"",
                    b"'c\\'d'",
                    b"\"\\x41\"",
                    b"\\",
                    b"\0",
                    b"\x0b",
                    b"\x0c",
                    b"\t",
                    b"\r",
                    b"\xff",
                    b"",
                ];
                for _ in 0..rng.random_range(0..8usize) {
                    out.extend_from_slice(WORDS[rng.random_range(0..WORDS.len())]);
                    if rng.random_bool(0.7) {
                        out.push(b' ');
                    }
                }
                out.extend_from_slice(if rng.random_bool(0.5) { b"\r\n" } else { b"\n" });
            }
            1 => {
                const ALPHABET: &[u8] =
                    b"*$+-:_%~=#,(!>|\r\n\r\n\r\n0123456789-1  \"'\\x\0ABCabcSETGET";
                for _ in 0..rng.random_range(1..512usize) {
                    out.push(ALPHABET[rng.random_range(0..ALPHABET.len())]);
                }
            }
            _ => {
                let mut args: Vec<Vec<u8>> = Vec::new();
                let name = if rng.random_bool(0.8) {
                    names[rng.random_range(0..names.len())].clone().into_bytes()
                } else {
                    let mut n = vec![0u8; rng.random_range(0..12usize)];
                    rng.fill_bytes(&mut n);
                    n
                };
                args.push(name);
                for _ in 0..rng.random_range(0..7usize) {
                    let arg = match rng.random_range(0..5u32) {
                        0 => rng.random_range(-1000i64..1000).to_string().into_bytes(),
                        1 => [
                            "ex", "px", "nx", "xx", "get", "keepttl", "count", "match", "0", "-1",
                        ][rng.random_range(0..10usize)]
                        .as_bytes()
                        .to_vec(),
                        2 => i64::MAX.to_string().into_bytes(),
                        3 => format!("key{}", rng.random_range(0..20u32)).into_bytes(),
                        _ => {
                            let mut a = vec![0u8; rng.random_range(0..40usize)];
                            rng.fill_bytes(&mut a);
                            a
                        }
                    };
                    args.push(arg);
                }
                let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                if rng.random_bool(0.85) {
                    out.extend(resp(&refs));
                } else {
                    // A damaged frame: cut or with a flipped byte.
                    let mut frame = resp(&refs);
                    let at = rng.random_range(0..frame.len());
                    if rng.random_bool(0.5) {
                        frame.truncate(at);
                    } else {
                        frame[at] = rng.random();
                    }
                    out.extend(frame);
                }
            }
        }
    }
    out
}

#[test]
fn random_garbage_never_crashes_the_server() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    // Every command the server knows, minus those that would end the experiment, and
    // PFSELFTEST, which holds the server for seconds by design (as Redis's does: a debug
    // build took over the ping's 10 s).
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut conn).unwrap();
    let names: Vec<String> = redis::cmd("COMMAND")
        .arg("LIST")
        .query::<Vec<String>>(&mut conn)
        .unwrap()
        .into_iter()
        .filter(|n| {
            ![
                "shutdown",
                "config",
                "debug",
                "quit",
                "auth",
                "hello",
                "pfselftest",
            ]
            .contains(&n.as_str())
        })
        .collect();
    assert!(names.len() as i64 > count / 2);
    for seed in 0..12u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let bytes = garbage(&mut rng, seed % 4, &names, 48 * 1024);
        let mut stream = connect(server.port);
        let mut at = 0;
        while at < bytes.len() {
            let n = rng.random_range(1..4096usize).min(bytes.len() - at);
            if !send(&mut stream, &bytes[at..at + n]) {
                // The server hung up (a protocol error): go on with the rest on a new
                // connection, so every seed explores its whole stream.
                stream = connect(server.port);
                continue;
            }
            at += n;
            if rng.random_bool(0.1) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // Let the server chew on it, then it must still answer a fresh client.
        let _ = read_bytes(&mut stream, usize::MAX, Duration::from_millis(100));
        assert_eq!(
            ping_fresh(server.port),
            b"+PONG\r\n",
            "no PONG after garbage stream seed={seed}; log:\n{}",
            server.log()
        );
        drop(stream);
    }
    // The first connection was never disturbed.
    let _: () = redis::cmd("SELECT").arg(0).query(&mut conn).unwrap();
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
    assert_alive(&mut server);
}

#[test]
fn commands_sent_one_byte_at_a_time_work() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut stream = connect(server.port);
    let binary_value: &[u8] = b"a\r\nb\0c*$";
    let mut request = resp(&[b"SET", b"bin", binary_value]);
    request.extend(resp(&[b"GET", b"bin"]));
    request.extend_from_slice(b"ECHO \"x y\"\r\n");
    request.extend(resp(&[b"INCRBY", b"n", b"41"]));
    request.extend_from_slice(b"INCR n\n");
    let mut expected = b"+OK\r\n".to_vec();
    expected.extend(format!("${}\r\n", binary_value.len()).into_bytes());
    expected.extend_from_slice(binary_value);
    expected.extend_from_slice(b"\r\n$3\r\nx y\r\n:41\r\n:42\r\n");
    for byte in &request {
        stream.write_all(std::slice::from_ref(byte)).unwrap();
        std::thread::sleep(Duration::from_micros(300));
    }
    let (reply, closed) = read_bytes(&mut stream, expected.len(), Duration::from_secs(10));
    assert!(!closed);
    assert_eq!(show(&reply), show(&expected));

    // A half-sent command gets no reply until its last byte arrives.
    let command = resp(&[b"ECHO", b"patience"]);
    let (first, second) = command.split_at(command.len() - 3);
    stream.write_all(first).unwrap();
    let (early, _) = read_bytes(&mut stream, 1, Duration::from_millis(300));
    assert!(
        early.is_empty(),
        "reply before the command was complete: {}",
        show(&early)
    );
    for byte in second {
        stream.write_all(std::slice::from_ref(byte)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let (reply, _) = read_bytes(&mut stream, 14, Duration::from_secs(10));
    assert_eq!(show(&reply), show(b"$8\r\npatience\r\n"));
}

#[test]
fn a_client_vanishing_mid_command_does_not_disturb_others() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &[]);
    let mut conn = server.connection();
    let big = vec![b'z'; 1024 * 1024];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut conn)
        .unwrap();

    // Y starts a command and pauses.
    let mut y = connect(server.port);
    send(&mut y, b"*3\r\n$3\r\nSET\r\n$1\r\ny\r\n$5\r\nhel");
    // X half-sends a SET and vanishes.
    let mut x = connect(server.port);
    send(&mut x, b"*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$10\r\nabc");
    drop(x);
    // W asks for 64 MB of replies and vanishes without reading them.
    let mut w = connect(server.port);
    let mut request = Vec::new();
    for _ in 0..64 {
        request.extend(resp(&[b"GET", b"big"]));
    }
    send(&mut w, &request);
    drop(w);
    // V resets its connection (SO_LINGER 0) mid-command.
    let v = connect(server.port);
    {
        let mut v2 = v.try_clone().unwrap();
        send(&mut v2, b"*2\r\n$4\r\nECHO\r\n$100\r\nabc");
    }
    set_linger_zero(&v);
    drop(v);
    // The server has let the three go: only this connection and Y are left.
    wait_until(
        "the vanished clients to go",
        Duration::from_secs(10),
        || info_field(&mut conn, "clients", "connected_clients") == 2,
    );

    // Y finishes its command and is answered.
    send(&mut y, b"lo\r\n");
    let (reply, closed) = read_bytes(&mut y, 5, Duration::from_secs(10));
    assert!(!closed);
    assert_eq!(show(&reply), show(b"+OK\r\n"));
    let x_value: Option<String> = redis::cmd("GET").arg("x").query(&mut conn).unwrap();
    assert_eq!(x_value, None, "an abandoned command must not run");
    let y_value: String = redis::cmd("GET").arg("y").query(&mut conn).unwrap();
    assert_eq!(y_value, "hello");
    // The dead clients are gone from the client count.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clients = info_field(&mut conn, "clients", "connected_clients");
        if clients == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "connected_clients stuck at {clients}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_alive(&mut server);
}

fn set_linger_zero(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0);
}

/// The argument-range scratch vector the server reuses across requests keeps the capacity
/// of the largest request ever parsed: one request of 4 million tiny arguments (28 MB on
/// the wire) leaves ~64 MB allocated for good. Redis frees a request's argv after it runs.
#[test]
fn memory_returns_after_a_request_with_millions_of_arguments() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let mut conn = server.connection();
    let before = info_field(&mut conn, "memory", "used_memory");
    let args = 4_000_000;
    let mut request = format!("*{}\r\n$4\r\nECHO\r\n", args + 1).into_bytes();
    for _ in 0..args {
        request.extend_from_slice(b"$1\r\na\r\n");
    }
    let mut stream = connect(server.port);
    let mut reader = stream.try_clone().unwrap();
    let expected = b"-ERR wrong number of arguments for 'echo' command\r\n";
    let handle = std::thread::spawn(move || {
        read_bytes(&mut reader, expected.len(), Duration::from_secs(60))
    });
    stream.write_all(&request).unwrap();
    assert_eq!(show(&handle.join().unwrap().0), show(expected));
    drop(stream);
    wait_until("the client to go", Duration::from_secs(10), || {
        info_field(&mut conn, "clients", "connected_clients") == 1
    });
    let after = info_field(&mut conn, "memory", "used_memory");
    assert!(
        after < before + 20 * 1024 * 1024,
        "used_memory {before} -> {after} after the request completed"
    );
}

/// A client that sends its commands and then shuts down its sending side (as
/// `printf 'PING\r\n' | nc -q0 host port` does) still gets its replies from Redis.
/// Tessera reads the data and the EOF in one go, runs the commands, and closes the
/// connection before sending their replies.
#[test]
fn a_half_closed_client_still_gets_its_replies() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let check = |port: u16, who: &str| {
        let mut stream = connect(port);
        send(&mut stream, b"SET half closed\r\nPING\r\n");
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let mut reply = Vec::new();
        let closed = wait_closed(&mut stream, Duration::from_secs(10), &mut reply);
        assert!(
            closed,
            "{who}: connection not closed after the client's EOF"
        );
        assert_eq!(show(&reply), show(b"+OK\r\n+PONG\r\n"), "{who}");
    };
    if let Some(redis) = oracle() {
        check(redis.port, "redis 7.0");
    }
    check(server.port, "tessera");
}

// ---------------------------------------------------------------------------------------
// AUTH and maxclients
// ---------------------------------------------------------------------------------------

#[test]
fn requirepass_noauth_wrongpass_and_unauthenticated_limits() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--requirepass", "s3cret"]);
    let noauth = b"-NOAUTH Authentication required.\r\n".to_vec();
    let wrongpass = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n".to_vec();
    let noauth_hello = b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n".to_vec();
    let mut big_auth = b"*2\r\n$4\r\nAUTH\r\n$20000\r\n".to_vec();
    big_auth.extend(vec![b'p'; 20000]);
    big_auth.extend_from_slice(b"\r\n");
    let cases = vec![
        case(
            "command before AUTH",
            b"PING\r\nGET k\r\n",
            &[noauth.clone(), noauth.clone()].concat(),
            false,
        ),
        case(
            "unknown command before AUTH",
            b"NOSUCH\r\n",
            b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
            false,
        ),
        case("wrong password", b"AUTH nope\r\n", &wrongpass, false),
        case(
            "wrong password for default",
            b"AUTH default nope\r\n",
            &wrongpass,
            false,
        ),
        case("unknown user", b"AUTH alice s3cret\r\n", &wrongpass, false),
        case("HELLO before AUTH", b"HELLO 3\r\n", &noauth_hello, false),
        case(
            "HELLO with a wrong password",
            b"HELLO 3 AUTH default nope\r\n",
            &wrongpass,
            false,
        ),
        case(
            "right password",
            b"AUTH s3cret\r\nPING\r\n",
            b"+OK\r\n+PONG\r\n",
            false,
        ),
        case(
            "right user and password",
            b"AUTH default s3cret\r\nPING\r\n",
            b"+OK\r\n+PONG\r\n",
            false,
        ),
        case(
            "more than 10 arguments before AUTH",
            b"*11\r\n",
            b"-ERR Protocol error: unauthenticated multibulk length\r\n",
            true,
        ),
        case("10 arguments before AUTH are fine", b"*10\r\n", b"", false),
        case(
            "bulk over 16 KB before AUTH",
            &big_auth,
            b"-ERR Protocol error: unauthenticated bulk length\r\n",
            true,
        ),
        case(
            "bulk of 16 KB before AUTH is fine",
            b"*1\r\n$16384\r\n",
            b"",
            false,
        ),
        case("QUIT before AUTH", b"QUIT\r\n", b"+OK\r\n", true),
    ];
    let mut failures = check_cases(server.port, &cases, "tessera");
    if let Some(path) = require_redis_or_skip("the comparison with Redis") {
        let redis = RedisOracle::start(&path);
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("s3cret")
            .query(&mut redis.connection())
            .unwrap();
        failures.extend(check_cases(redis.port, &cases, "redis 7.0"));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));

    // Once authenticated, the limits are gone.
    let mut stream = connect(server.port);
    send(&mut stream, b"AUTH s3cret\r\n");
    assert_eq!(
        read_bytes(&mut stream, 5, Duration::from_secs(10)).0,
        b"+OK\r\n"
    );
    let mut request = Vec::new();
    let keys: Vec<Vec<u8>> = (0..11).map(|i| format!("k{i}").into_bytes()).collect();
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(keys.iter().map(|k| k.as_slice()));
    request.extend(resp(&del));
    request.extend(resp(&[b"ECHO", &vec![b'e'; 20000]]));
    send(&mut stream, &request);
    let expected_len = 4 + 8 + 20000 + 2;
    let (reply, closed) = read_bytes(&mut stream, expected_len, Duration::from_secs(10));
    assert!(!closed);
    assert!(
        reply.starts_with(b":0\r\n$20000\r\neee"),
        "{}",
        show(&reply[..40.min(reply.len())])
    );

    // HELLO with AUTH authenticates and switches protocol in one step; real clients too.
    let mut stream = connect(server.port);
    let reply = request_with_sentinel(&mut stream, b"HELLO 3 AUTH default s3cret\r\nGET nokey\r\n");
    assert!(
        reply.starts_with(b"%7\r\n") && reply.ends_with(b"_\r\n"),
        "{}",
        show(&reply)
    );
    let client =
        redis::Client::open(format!("redis://:s3cret@127.0.0.1:{}/", server.port)).unwrap();
    let mut conn = client.get_connection().unwrap();
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
    let bad = redis::Client::open(format!("redis://:wrong@127.0.0.1:{}/", server.port)).unwrap();
    let err = bad
        .get_connection()
        .err()
        .expect("a wrong password must fail");
    let text = err.to_string();
    assert!(
        text.contains("WRONGPASS") || text.contains("AuthenticationFailed"),
        "{text}"
    );
    // The server is fine after all this.
    let mut stream = connect(server.port);
    send(&mut stream, b"AUTH s3cret\r\nPING\r\n");
    let (reply, _) = read_bytes(&mut stream, 12, Duration::from_secs(10));
    assert_eq!(reply, b"+OK\r\n+PONG\r\n");
    if let Some(child) = server.child.as_mut() {
        assert!(child.try_wait().unwrap().is_none());
    }
}

/// Redis checks "is this client authenticated?" for each request as it parses it, so a
/// request pipelined right behind a successful AUTH is parsed without the unauthenticated
/// limits. Tessera decides the limits once per batch of input, before running the AUTH.
#[test]
fn a_large_request_pipelined_behind_auth_is_accepted() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--requirepass", "s3cret"]);
    let keys: Vec<Vec<u8>> = (0..11).map(|i| format!("k{i}").into_bytes()).collect();
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(keys.iter().map(|k| k.as_slice()));
    let mut request = b"AUTH s3cret\r\n".to_vec();
    request.extend(resp(&del));
    let cases = vec![Case {
        name: "11 arguments right behind AUTH",
        request,
        reply: b"+OK\r\n:0\r\n".to_vec(),
        closes: false,
    }];
    let mut failures = Vec::new();
    if let Some(path) = require_redis_or_skip("the comparison with Redis") {
        let redis = RedisOracle::start(&path);
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("requirepass")
            .arg("s3cret")
            .query(&mut redis.connection())
            .unwrap();
        failures.extend(check_cases(redis.port, &cases, "redis 7.0"));
    }
    failures.extend(check_cases(server.port, &cases, "tessera"));
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn requirepass_set_at_run_time_applies_to_new_connections() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut before = connect(server.port);
    send(&mut before, b"PING\r\n");
    assert_eq!(
        read_bytes(&mut before, 7, Duration::from_secs(10)).0,
        b"+PONG\r\n"
    );
    let mut admin = connect(server.port);
    send(&mut admin, b"CONFIG SET requirepass s3cret\r\n");
    assert_eq!(
        read_bytes(&mut admin, 5, Duration::from_secs(10)).0,
        b"+OK\r\n"
    );
    // Connections made before keep working (they were authenticated as "default").
    send(&mut before, b"PING\r\n");
    assert_eq!(
        read_bytes(&mut before, 7, Duration::from_secs(10)).0,
        b"+PONG\r\n"
    );
    // New ones must authenticate.
    let (reply, _) = exchange(server.port, b"PING\r\nAUTH s3cret\r\nPING\r\n", 46, false);
    assert_eq!(
        show(&reply),
        show(b"-NOAUTH Authentication required.\r\n+OK\r\n+PONG\r\n")
    );
}

/// In Redis, "authentication required" is a property of the default user *now*: once
/// `CONFIG SET requirepass ""` removes the password, clients that never authenticated
/// may run commands (and send large requests). Tessera keeps refusing them.
#[test]
fn clearing_requirepass_releases_unauthenticated_clients() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--requirepass", "s3cret"]);
    let mut waiting = connect(server.port);
    send(&mut waiting, b"PING\r\n");
    let noauth = b"-NOAUTH Authentication required.\r\n";
    assert_eq!(
        read_bytes(&mut waiting, noauth.len(), Duration::from_secs(10)).0,
        noauth
    );
    let mut admin = connect(server.port);
    send(
        &mut admin,
        b"AUTH s3cret\r\nCONFIG SET requirepass \"\"\r\n",
    );
    assert_eq!(
        read_bytes(&mut admin, 10, Duration::from_secs(10)).0,
        b"+OK\r\n+OK\r\n"
    );
    let mut request = b"PING\r\n".to_vec();
    let keys: Vec<Vec<u8>> = (0..11).map(|i| format!("k{i}").into_bytes()).collect();
    let mut del: Vec<&[u8]> = vec![b"DEL"];
    del.extend(keys.iter().map(|k| k.as_slice()));
    request.extend(resp(&del));
    send(&mut waiting, &request);
    let (reply, closed) = read_bytes(&mut waiting, 11, Duration::from_secs(10));
    assert_eq!(show(&reply), show(b"+PONG\r\n:0\r\n"));
    assert!(!closed);
}

#[test]
fn maxclients_refuses_the_extra_client_with_redis_error() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--maxclients", "2"]);
    let mut a = connect(server.port);
    let mut b = connect(server.port);
    for s in [&mut a, &mut b] {
        send(s, b"PING\r\n");
        assert_eq!(read_bytes(s, 7, Duration::from_secs(10)).0, b"+PONG\r\n");
    }
    let mut c = connect(server.port);
    let mut reply = Vec::new();
    assert!(
        wait_closed(&mut c, Duration::from_secs(10), &mut reply),
        "the third client must be closed"
    );
    assert_eq!(
        show(&reply),
        show(b"-ERR max number of clients reached\r\n")
    );
    // Existing clients are unaffected and see the rejection counted.
    send(&mut a, b"INFO stats\r\n");
    let (info, _) = read_bytes(&mut a, usize::MAX, Duration::from_millis(500));
    assert!(
        show(&info).contains("rejected_connections:1"),
        "{}",
        show(&info)
    );
    // When one leaves, a newcomer gets in.
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut d = connect(server.port);
        send(&mut d, b"PING\r\n");
        let (reply, _) = read_bytes(&mut d, 7, Duration::from_secs(5));
        if reply == b"+PONG\r\n" {
            break;
        }
        assert_eq!(
            show(&reply),
            show(b"-ERR max number of clients reached\r\n")
        );
        assert!(Instant::now() < deadline, "a slot never freed up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A pending request announcing many small arguments is re-parsed from its first byte on
/// every read, so a client that first sends a few MB of tiny arguments and then trickles
/// a byte at a time makes every read cost a full re-parse: other clients starve. Redis
/// keeps its parse position (multibulklen/bulklen) and does constant work per read.
#[test]
fn trickling_a_huge_pending_multibulk_does_not_starve_other_clients() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let args = 6_000_000;
    // The request never completes: far more arguments are announced than will be sent.
    let mut request = format!("*{}\r\n$4\r\nECHO\r\n", 2 * args).into_bytes();
    for _ in 0..args {
        request.extend_from_slice(b"$1\r\na\r\n");
    }
    let mut conn = server.connection();
    let received =
        |conn: &mut redis::Connection| info_field(conn, "stats", "total_net_input_bytes");
    let before = received(&mut conn);
    let mut slow = connect(server.port);
    slow.write_all(&request).unwrap();
    // Once the server has read it all (what this connection sends counts too: a few
    // bytes of 42 MB).
    wait_until("the request to be read", Duration::from_secs(60), || {
        received(&mut conn) >= before + request.len() as u64
    });
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let trickler = std::thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            if slow.write_all(b"$1\r\na\r\n").is_err() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    // 50 PINGs, 10 ms apart; Redis answers each in well under a millisecond here.
    let began = Instant::now();
    let mut waiting = Duration::ZERO;
    let mut answered = 0;
    while answered < 50 && began.elapsed() < Duration::from_secs(30) {
        let started = Instant::now();
        let _: String = redis::cmd("PING").query(&mut conn).unwrap();
        waiting += started.elapsed();
        answered += 1;
        std::thread::sleep(Duration::from_millis(10));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    trickler.join().unwrap();
    assert!(
        answered == 50 && waiting < Duration::from_secs(5),
        "{answered} PINGs answered, waiting {waiting:?} in total, while a client trickled"
    );
}
