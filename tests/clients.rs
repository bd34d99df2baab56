//! The operator's client commands and MONITOR, each scenario run against Tessera and a
//! real redis-server 7.0 and compared: CLIENT KILL (every filter, its errors, the victims
//! really closed), CLIENT PAUSE (held, not refused; released by UNPAUSE), CLIENT REPLY's
//! byte streams, CLIENT UNBLOCK's two forms, CLIENT NO-EVICT's flag, MONITOR's lines, the
//! reply buffer's size through idle and busy spells.

mod common;

use common::encode_command as encode;

use common::{RedisOracle, is_closed, require_redis_or_skip, start_server, temp_dir};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Long enough for a held reply to have arrived if it were not held; a reply that is
/// due is waited for much longer (`REPLY_WAIT`).
const QUIET: Duration = Duration::from_millis(400);
const REPLY_WAIT: Duration = Duration::from_secs(20);

/// The length of the first complete RESP2 reply in `bytes`, if there is one.
fn reply_len(bytes: &[u8]) -> Option<usize> {
    let line_end = bytes.windows(2).position(|w| w == b"\r\n")?;
    let header = std::str::from_utf8(&bytes[1..line_end]).ok()?;
    let after = line_end + 2;
    match bytes[0] {
        b'+' | b'-' | b':' => Some(after),
        b'$' => {
            let len: i64 = header.parse().ok()?;
            if len < 0 {
                return Some(after);
            }
            let end = after + len as usize + 2;
            (bytes.len() >= end).then_some(end)
        }
        b'*' => {
            let count: i64 = header.parse().ok()?;
            let mut at = after;
            for _ in 0..count.max(0) {
                at += reply_len(&bytes[at..])?;
            }
            Some(at)
        }
        _ => None,
    }
}

/// A raw connection that reads whole replies.
struct Conn {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl Conn {
    fn open(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        Conn {
            stream,
            pending: Vec::new(),
        }
    }

    fn send(&mut self, args: &[&str]) {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.stream.write_all(&encode(&args)).unwrap();
    }

    /// The next reply, waiting at most `wait`; None if none came whole.
    fn reply_within(&mut self, wait: Duration) -> Option<Vec<u8>> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            if let Some(len) = reply_len(&self.pending) {
                return Some(self.pending.drain(..len).collect());
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut buf = [0u8; 4096];
            match self.stream.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
    }

    fn call(&mut self, args: &[&str]) -> String {
        self.send(args);
        let reply = self.reply_within(REPLY_WAIT).expect("a reply");
        String::from_utf8_lossy(&reply).into_owned()
    }

    fn id(&mut self) -> String {
        self.call(&["CLIENT", "ID"])
            .trim_start_matches(':')
            .trim()
            .to_string()
    }

    /// A field of this connection's CLIENT INFO line.
    fn info_field(&mut self, field: &str) -> String {
        field_of(&self.call(&["CLIENT", "INFO"]), field)
    }
}

/// An INFO field's value (`name:value` lines).
fn info_value(info: &str, field: &str) -> String {
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field}: in {info}"))
        .trim()
        .to_string()
}

fn field_of(line: &str, field: &str) -> String {
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(&format!("{field}=")))
        .unwrap_or_else(|| panic!("no {field}= in {line}"))
        .to_string()
}

/// Runs `scenario` on Tessera and on Redis and asserts the transcripts are equal.
fn compare(what: &str, scenario: impl Fn(u16) -> Vec<String>) {
    let Some(binary) = require_redis_or_skip(what) else {
        return;
    };
    let oracle = RedisOracle::start(&binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let expected = scenario(oracle.port);
    let actual = scenario(server.port);
    assert_eq!(
        actual, expected,
        "{what}: Tessera (left) and Redis (right) differ"
    );
}

#[test]
fn client_kill_filters_replies_and_errors_match_redis() {
    compare("CLIENT KILL", |port| {
        let mut admin = Conn::open(port);
        let mut victims: Vec<Conn> = (0..7).map(|_| Conn::open(port)).collect();
        let ids: Vec<String> = victims.iter_mut().map(Conn::id).collect();
        let addrs: Vec<String> = victims.iter_mut().map(|v| v.info_field("addr")).collect();
        let admin_id = admin.id();
        let laddr = admin.info_field("laddr");
        let mut transcript = Vec::new();
        let say = |transcript: &mut Vec<String>, conn: &mut Conn, args: &[&str]| {
            transcript.push(conn.call(args))
        };
        for bad in [
            &["CLIENT", "KILL"][..],
            &["CLIENT", "KILL", "ID", "0"],
            &["CLIENT", "KILL", "ID", "x"],
            &["CLIENT", "KILL", "TYPE", "nope"],
            &["CLIENT", "KILL", "USER", "nobody"],
            &["CLIENT", "KILL", "SKIPME", "maybe"],
            &["CLIENT", "KILL", "ID", "5", "SKIPME"],
            &["CLIENT", "KILL", "NOPE", "1"],
            &["CLIENT", "KILL", "1.2.3.4:5"],
        ] {
            say(&mut transcript, &mut admin, bad);
        }
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "ID", &ids[0]],
        );
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "ADDR", &addrs[1]],
        );
        say(&mut transcript, &mut admin, &["CLIENT", "KILL", &addrs[2]]);
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "USER", "default", "ID", &ids[3]],
        );
        say(&mut transcript, &mut victims[4], &["SUBSCRIBE", "c"]);
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "TYPE", "pubsub"],
        );
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "TYPE", "master"],
        );
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "TYPE", "replica"],
        );
        // Several filters are ANDed: the right address with the wrong id kills nobody.
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "ADDR", &addrs[5], "ID", &ids[6]],
        );
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "LADDR", &laddr, "TYPE", "normal"],
        );
        for (index, victim) in victims.iter_mut().enumerate() {
            let closed = is_closed(&mut victim.stream, REPLY_WAIT);
            transcript.push(format!("victim {index} closed: {closed}"));
        }
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "ID", &admin_id, "SKIPME", "yes"],
        );
        say(
            &mut transcript,
            &mut admin,
            &["CLIENT", "KILL", "ID", &admin_id, "SKIPME", "no"],
        );
        let closed = is_closed(&mut admin.stream, REPLY_WAIT);
        transcript.push(format!("admin closed after its reply: {closed}"));
        transcript
    });
}

fn text(reply: Option<Vec<u8>>) -> String {
    String::from_utf8_lossy(&reply.expect("a reply")).into_owned()
}

#[test]
fn client_pause_write_holds_writes_until_unpause() {
    compare("CLIENT PAUSE WRITE", |port| {
        let mut admin = Conn::open(port);
        let mut writer = Conn::open(port);
        let mut reader = Conn::open(port);
        let writer_id = writer.id();
        let mut transcript = vec![admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"])];
        writer.send(&["SET", "k", "v"]);
        writer.send(&["GET", "k"]); // behind the held SET, in its query buffer
        let early = writer.reply_within(QUIET);
        transcript.push(format!("SET replied while paused: {early:?}"));
        // Reads go on; the held client shows as blocked.
        transcript.push(reader.call(&["GET", "k"]));
        let list = admin.call(&["CLIENT", "LIST", "ID", &writer_id]);
        transcript.push(format!("writer flags={}", field_of(&list, "flags")));
        let info = admin.call(&["INFO", "clients"]);
        transcript.push(format!(
            "blocked_clients={}",
            field_of(&info.replace(':', "="), "blocked_clients")
        ));
        transcript.push(admin.call(&["CLIENT", "UNPAUSE"]));
        transcript.push(text(writer.reply_within(REPLY_WAIT)));
        transcript.push(text(writer.reply_within(REPLY_WAIT)));
        transcript
    });
}

#[test]
fn client_pause_all_holds_every_command_until_it_runs_out() {
    compare("CLIENT PAUSE ALL", |port| {
        let mut admin = Conn::open(port);
        let mut client = Conn::open(port);
        let mut transcript = vec![admin.call(&["CLIENT", "PAUSE", "1500", "ALL"])];
        client.send(&["PING"]);
        // Redis 7.0 holds every client's commands, the pausing client's UNPAUSE too.
        admin.send(&["CLIENT", "UNPAUSE"]);
        transcript.push(format!(
            "PING while paused: {:?}",
            client.reply_within(QUIET)
        ));
        transcript.push(format!(
            "UNPAUSE while paused: {:?}",
            admin.reply_within(QUIET)
        ));
        // The pause runs out by itself.
        transcript.push(text(client.reply_within(REPLY_WAIT)));
        transcript.push(text(admin.reply_within(REPLY_WAIT)));
        transcript.push(client.call(&["CLIENT", "PAUSE", "10", "SOMETIMES"]));
        transcript.push(client.call(&["CLIENT", "PAUSE", "-1"]));
        transcript.push(client.call(&["CLIENT", "PAUSE", "soon"]));
        transcript
    });
}

#[test]
fn client_reply_off_skip_on_byte_streams_match_redis() {
    compare("CLIENT REPLY", |port| {
        let mut conn = Conn::open(port);
        let pipeline: &[&[&str]] = &[
            &["CLIENT", "REPLY", "OFF"],
            &["SET", "a", "1"],
            &["GET", "a"],
            &["CLIENT", "REPLY", "SKIP"], // ignored while OFF
            &["CLIENT", "REPLY", "ON"],
            &["GET", "a"],
            &["CLIENT", "REPLY", "SKIP"],
            &["INCR", "a"],
            &["GET", "a"],
            &["CLIENT", "REPLY", "SKIP"],
            &["CLIENT", "REPLY", "ON"],
            &["CLIENT", "REPLY", "NOPE"],
            &["CLIENT", "REPLY", "SKIP"],
            &["NOSUCHCOMMAND"],
            &["ECHO", "end"],
        ];
        let mut bytes = Vec::new();
        for args in pipeline {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            bytes.extend(encode(&args));
        }
        conn.stream.write_all(&bytes).unwrap();
        let mut replies = Vec::new();
        while let Some(reply) = conn.reply_within(REPLY_WAIT) {
            let done = reply == b"$3\r\nend\r\n";
            replies.push(String::from_utf8_lossy(&reply).into_owned());
            if done {
                break;
            }
        }
        replies
    });
}

#[test]
fn client_unblock_timeout_and_error_forms_match_redis() {
    compare("CLIENT UNBLOCK", |port| {
        let mut admin = Conn::open(port);
        let mut blocked = Conn::open(port);
        let id = blocked.id();
        let mut transcript = vec![admin.call(&["CLIENT", "UNBLOCK", &id])];
        for how in [None, Some("TIMEOUT"), Some("ERROR")] {
            blocked.send(&["BLPOP", "list", "0"]);
            blocked.send(&["PING"]); // waits behind the BLPOP
            // Unblocking can only follow the block: wait until the server lists it.
            while !field_of(&admin.call(&["CLIENT", "LIST", "ID", &id]), "flags").contains('b') {
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut args = vec!["CLIENT", "UNBLOCK", id.as_str()];
            args.extend(how);
            transcript.push(admin.call(&args));
            transcript.push(text(blocked.reply_within(REPLY_WAIT)));
            transcript.push(text(blocked.reply_within(REPLY_WAIT)));
        }
        transcript.push(admin.call(&["CLIENT", "UNBLOCK", &id, "LATER"]));
        transcript.push(admin.call(&["CLIENT", "UNBLOCK", "x"]));
        transcript
    });
}

#[test]
fn client_no_evict_and_monitor_flags_match_redis() {
    compare("CLIENT NO-EVICT", |port| {
        let mut conn = Conn::open(port);
        let mut monitor = Conn::open(port);
        let monitor_id = monitor.id();
        let mut transcript = vec![conn.call(&["CLIENT", "NO-EVICT", "on"])];
        transcript.push(conn.info_field("flags"));
        transcript.push(conn.call(&["CLIENT", "NO-EVICT", "maybe"]));
        transcript.push(conn.call(&["CLIENT", "NO-EVICT", "off"]));
        transcript.push(conn.info_field("flags"));
        transcript.push(monitor.call(&["MULTI"]));
        transcript.push(monitor.call(&["MONITOR"]));
        transcript.push(monitor.call(&["EXEC"]));
        transcript.push(monitor.call(&["MONITOR"]));
        let list = conn.call(&["CLIENT", "LIST", "ID", &monitor_id]);
        transcript.push(field_of(&list, "flags"));
        // A monitor is a replica to Redis: it may not touch keys.
        transcript.push(monitor.call(&["GET", "k"]));
        transcript.push(monitor.call(&["RESET"]));
        transcript.push(monitor.call(&["GET", "k"]));
        transcript
    });
}

/// The monitor's lines with the timestamp and the client's port taken out.
fn monitor_lines(port: u16, commands: &[Vec<Vec<u8>>]) -> Vec<String> {
    let mut monitor = Conn::open(port);
    let mut client = Conn::open(port);
    let monitor_id = monitor.id();
    assert_eq!(monitor.call(&["MONITOR"]), "+OK\r\n");
    let client_port = client.stream.local_addr().unwrap().port();
    // A monitor sees its own commands; with its replies off, not even those.
    monitor.send(&["CLIENT", "REPLY", "OFF"]);
    monitor.send(&["PING"]);
    // Nor another client's, once its PING (after OFF) has run.
    while field_of(&client.call(&["CLIENT", "LIST", "ID", &monitor_id]), "cmd") != "ping" {
        std::thread::sleep(Duration::from_millis(10));
    }
    client.call(&["SET", "unseen", "1"]);
    monitor.send(&["CLIENT", "REPLY", "ON"]);
    assert_eq!(text(monitor.reply_within(REPLY_WAIT)), "+OK\r\n");
    let monitor_port = monitor.stream.local_addr().unwrap().port();
    let own = text(monitor.reply_within(REPLY_WAIT));
    let own = own
        .split_once(' ')
        .unwrap()
        .1
        .replace(&format!(":{monitor_port}]"), ":MONITOR]");
    for args in commands {
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        client.stream.write_all(&encode(&args)).unwrap();
        client.reply_within(REPLY_WAIT).expect("a reply");
    }
    client.call(&["ECHO", "end"]);
    let mut lines = vec![own];
    loop {
        let line = text(monitor.reply_within(REPLY_WAIT));
        let (stamp, rest) = line.split_once(' ').unwrap();
        assert!(stamp.starts_with('+') && stamp.contains('.'), "{line}");
        let rest = rest.replace(&format!(":{client_port}]"), ":PORT]");
        if rest.ends_with("\"ECHO\" \"end\"\r\n") {
            return lines;
        }
        lines.push(rest);
    }
}

#[test]
fn monitor_lines_match_redis() {
    let words =
        |line: &str| -> Vec<Vec<u8>> { line.split(' ').map(|w| w.as_bytes().to_vec()).collect() };
    let mut commands: Vec<Vec<Vec<u8>>> = [
        "SET k v",
        "GET k",
        "MULTI",
        "INCR n",
        "GET n",
        "EXEC",
        "SELECT 2",
        "EVAL return(redis.call('set',KEYS[1],'1')) 1 kk",
        "SELECT 0",
        "CONFIG GET maxmemory",
        "CLIENT ID",
        "CLIENT LIST",
        "AUTH user secret",
        "AUTH a b c",
        "HELLO 2 AUTH someone secret",
        "MIGRATE 127.0.0.1 1 key 9 5000",
        "MIGRATE 127.0.0.1 1 key 9 5000 AUTH user",
        "MIGRATE 127.0.0.1 1 key 9 5000 REPLACE AUTH2 user password",
        "PING",
        "MULTI",
        "NOSUCH",
        "EXEC",
        "EVALSHA 0000000000000000000000000000000000000000 0",
        "SET onlykey",
    ]
    .iter()
    .map(|line| words(line))
    .collect();
    commands.push(vec![
        b"SET".to_vec(),
        b"bin\x00\xff\"\\\n\r\t\x07\x08".to_vec(),
        b"x y".to_vec(),
    ]);
    compare("MONITOR", |port| monitor_lines(port, &commands));
}

#[test]
fn client_list_fields_and_flags_match_redis() {
    compare("CLIENT LIST fields", |port| {
        let mut conn = Conn::open(port);
        let mut other = Conn::open(port);
        let other_id = other.id();
        let names = |line: &str| -> Vec<String> {
            let body = line.split_once("\r\n").map_or(line, |(_, body)| body);
            let names = body
                .split_whitespace()
                .map(|pair| pair.split('=').next().unwrap().to_string());
            // Redis 7.2's CLIENT SETINFO fields, which Tessera adds at the end.
            names
                .filter(|name| name != "lib-name" && name != "lib-ver")
                .collect()
        };
        let mut transcript = vec![names(&conn.call(&["CLIENT", "INFO"])).join(" ")];
        let flags_of_other =
            |conn: &mut Conn| field_of(&conn.call(&["CLIENT", "LIST", "ID", &other_id]), "flags");
        transcript.push(other.call(&["MULTI"]));
        transcript.push(flags_of_other(&mut conn));
        transcript.push(other.call(&["DISCARD"]));
        transcript.push(other.call(&["SUBSCRIBE", "c"]));
        transcript.push(flags_of_other(&mut conn));
        transcript.push(other.call(&["RESET"]));
        other.send(&["BLPOP", "list", "0"]);
        while !flags_of_other(&mut conn).contains('b') {
            std::thread::sleep(Duration::from_millis(10));
        }
        transcript.push(flags_of_other(&mut conn));
        transcript.push(conn.call(&["CLIENT", "LIST", "TYPE", "pubsub"]));
        transcript.push(conn.call(&["CLIENT", "LIST", "TYPE", "replica"]));
        transcript.push(conn.call(&["CLIENT", "LIST", "TYPE", "nope"]));
        transcript.push(conn.call(&["CLIENT", "LIST", "ID", "x"]));
        transcript
    });
}

#[test]
fn client_pause_write_holds_scripts_that_may_write_and_freezes_expiry() {
    compare("CLIENT PAUSE WRITE and scripts", |port| {
        let mut admin = Conn::open(port);
        let mut client = Conn::open(port);
        let mut transcript = vec![admin.call(&["SET", "soon", "x", "PX", "200"])];
        transcript.push(admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]));
        // A script that declares no writes runs; PFCOUNT and a plain EVAL may write.
        let read_only = "#!lua flags=no-writes\nreturn 1";
        transcript.push(client.call(&["EVAL", read_only, "0"]));
        client.send(&["EVAL", "return 2", "0"]);
        transcript.push(format!("EVAL held: {:?}", client.reply_within(QUIET)));
        // The pause keeps the expired key: no active expiry meanwhile, and a lookup
        // reads it as gone without deleting it (nor counting it expired).
        std::thread::sleep(Duration::from_millis(600));
        transcript.push(admin.call(&["DBSIZE"]));
        transcript.push(admin.call(&["GET", "soon"]));
        transcript.push(admin.call(&["DBSIZE"]));
        transcript.push(info_value(&admin.call(&["INFO", "stats"]), "expired_keys"));
        transcript.push(admin.call(&["CLIENT", "UNPAUSE"]));
        transcript.push(text(client.reply_within(REPLY_WAIT)));
        transcript.push(admin.call(&["GET", "soon"]));
        transcript.push(info_value(&admin.call(&["INFO", "stats"]), "expired_keys"));
        transcript
    });
}

#[test]
fn a_monitor_that_does_not_read_is_closed_at_its_output_limit() {
    compare("MONITOR output limit", |port| {
        let mut admin = Conn::open(port);
        let limit = "normal 65536 0 0";
        let mut transcript =
            vec![admin.call(&["CONFIG", "SET", "client-output-buffer-limit", limit])];
        let mut monitor = Conn::open(port);
        transcript.push(monitor.call(&["MONITOR"]));
        // Far more than the socket buffers hold: the rest waits in the server's output.
        let value = "v".repeat(64 * 1024);
        for _ in 0..256 {
            admin.call(&["SET", "k", &value]);
        }
        // Whatever the monitor had read, it is closed once its output passed the limit.
        let closed = is_closed(&mut monitor.stream, REPLY_WAIT);
        transcript.push(format!("monitor closed: {closed}"));
        transcript.push(admin.call(&["PING"]));
        transcript
    });
}

#[test]
fn idle_timeout_spares_monitors_and_subscribers() {
    compare("timeout", |port| {
        let mut admin = Conn::open(port);
        let mut transcript = vec![admin.call(&["CONFIG", "SET", "timeout", "1"])];
        let mut monitor = Conn::open(port);
        let mut subscriber = Conn::open(port);
        let mut idle = Conn::open(port);
        transcript.push(monitor.call(&["MONITOR"]));
        transcript.push(subscriber.call(&["SUBSCRIBE", "c"]));
        transcript.push(idle.call(&["PING"]));
        transcript.push(format!(
            "idle closed: {}",
            is_closed(&mut idle.stream, REPLY_WAIT)
        ));
        // They were idle as long: had they been due, they would be closed by now.
        transcript.push(format!(
            "monitor closed: {}",
            is_closed(&mut monitor.stream, QUIET)
        ));
        let subscriber_closed = is_closed(&mut subscriber.stream, QUIET);
        transcript.push(format!("subscriber closed: {subscriber_closed}"));
        transcript
    });
}

/// Polls `rbs` of this connection until `done` holds (at most 10 s), and returns it.
fn reply_buffer_size_when(conn: &mut Conn, done: impl Fn(u64) -> bool) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let rbs: u64 = conn.info_field("rbs").parse().unwrap();
        if done(rbs) || std::time::Instant::now() > deadline {
            return rbs;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The reply buffer follows the client's replies as Redis's does: 1 KiB once idle, up to
/// 16 KiB while replies are big, back to 1 KiB when they stop; and on Tessera the memory
/// a big reply took is given back once the client is quiet.
#[test]
fn the_reply_buffer_shrinks_when_idle_and_grows_with_big_replies_as_redis_s() {
    let Some(binary) = require_redis_or_skip("reply buffer sizes") else {
        return;
    };
    let scenario = |port: u16| -> (Vec<String>, Vec<u64>) {
        let mut admin = Conn::open(port);
        let mut client = Conn::open(port);
        let mut transcript = vec![admin.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "100"])];
        transcript.push(admin.call(&["SET", "big", &"x".repeat(12 * 1024)]));
        let idle = reply_buffer_size_when(&mut client, |rbs| rbs == 1024);
        transcript.push(format!("idle: {idle}"));
        let mut busy = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while busy != 16384 && std::time::Instant::now() < deadline {
            client.call(&["GET", "big"]);
            busy = client.info_field("rbs").parse().unwrap();
        }
        transcript.push(format!("busy: {busy}"));
        let tot_mem_busy: u64 = client.info_field("tot-mem").parse().unwrap();
        let quiet = reply_buffer_size_when(&mut client, |rbs| rbs == 1024);
        transcript.push(format!("quiet again: {quiet}"));
        let tot_mem_quiet: u64 = client.info_field("tot-mem").parse().unwrap();
        let stats = admin.call(&["INFO", "stats"]);
        for field in ["reply_buffer_shrinks", "reply_buffer_expands"] {
            let count: u64 = info_value(&stats, field).parse().unwrap();
            transcript.push(format!("{field} > 0: {}", count > 0));
        }
        transcript.push(admin.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "x"]));
        transcript.push(admin.call(&["DEBUG", "REPLYBUFFER", "NOPE", "1"]));
        transcript.push(admin.call(&["DEBUG", "REPLYBUFFER", "RESIZING", "0"]));
        transcript.push(admin.call(&["DEBUG", "REPLYBUFFER", "PEAK-RESET-TIME", "RESET"]));
        (transcript, vec![tot_mem_busy, tot_mem_quiet])
    };
    let dir = temp_dir();
    let oracle = RedisOracle::start_with(
        &binary,
        dir.path(),
        &["--appendonly", "no", "--enable-debug-command", "yes"],
    );
    let (expected, _) = scenario(oracle.port);
    let tessera_dir = temp_dir();
    let server = start_server(
        tessera_dir.path(),
        &["--appendonly", "no", "--enable-debug-command", "yes"],
    );
    let (actual, tot_mem) = scenario(server.port);
    assert_eq!(actual, expected, "Tessera (left) and Redis (right) differ");
    let [busy, quiet] = tot_mem[..] else {
        unreachable!()
    };
    assert!(
        busy > 12 * 1024 && quiet < busy - 8 * 1024,
        "the memory of a big reply is given back once the client is quiet: tot-mem {busy} while busy, {quiet} once quiet"
    );
}
