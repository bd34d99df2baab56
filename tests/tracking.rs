//! Client-side caching (CLIENT TRACKING) end to end, against the real `tessera-server`
//! binary: raw RESP2 and RESP3 sessions compared byte for byte with a real redis-server
//! 7.0 (the default mode, OPTIN / OPTOUT with CLIENT CACHING, NOLOOP, BCAST with
//! prefixes, REDIRECT in RESP2 through `__redis__:invalidate` and in RESP3, a broken
//! redirect, FLUSHDB / FLUSHALL, expiry, MULTI / EXEC, scripts, CLIENT TRACKINGINFO and
//! GETREDIR, every error), then what cannot be compared byte for byte: INFO's figures
//! against Redis's, CLIENT LIST's flags, `tracking-table-max-keys`, the active expiry
//! cycle, and the one deliberate difference (overlapping prefixes given together).

mod common;

use common::*;
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// The last command of every raw script: its reply (`$N marker` or, for a RESP2
/// subscriber, `*2 pong marker`) ends with the marker, so everything before it is the
/// script's replies and the messages delivered meanwhile.
const MARKER: &str = "end-of-script-marker";

fn connect(port: u16) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_nodelay(true).unwrap();
    stream
}

/// A connection and what arrived on it after the last marker's reply (a BCAST
/// invalidation is sent when the server is done with everything it read, so it may
/// follow the marker; it belongs to the next script's output).
struct Connection {
    stream: TcpStream,
    early: Vec<u8>,
}

impl Connection {
    fn open(port: u16) -> Connection {
        Connection {
            stream: connect(port),
            early: Vec::new(),
        }
    }

    /// Sends `script` (inline commands, one a line) and returns what comes back before
    /// the marker's reply.
    fn run(&mut self, script: &str) -> String {
        let mut bytes = script.replace('\n', "\r\n").into_bytes();
        bytes.extend_from_slice(format!("PING {MARKER}\r\n").as_bytes());
        self.stream.write_all(&bytes).unwrap();
        let end = format!("{MARKER}\r\n");
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut reply = std::mem::take(&mut self.early);
        let found = loop {
            if let Some(at) = find(&reply, end.as_bytes()) {
                break at + end.len();
            }
            assert!(
                Instant::now() < deadline,
                "no marker after {script:?}: {}",
                String::from_utf8_lossy(&reply)
            );
            let (more, closed) = read_bytes(&mut self.stream, 1, Duration::from_secs(1));
            reply.extend(more);
            assert!(!closed, "closed: {}", String::from_utf8_lossy(&reply));
        };
        self.early = reply.split_off(found);
        let text = String::from_utf8(reply).unwrap();
        // The marker's own reply, in either shape, is cut off.
        let cut = text
            .rfind("*2\r\n$4\r\npong\r\n")
            .filter(|&at| text[at..].matches("\r\n").count() == 5)
            .unwrap_or_else(|| text.rfind(&format!("${}\r\n", MARKER.len())).unwrap());
        text[..cut].to_string()
    }
}

/// Waits until the server has let client `id` go: CLIENT LIST no longer shows it.
fn wait_gone(admin: &mut redis::Connection, id: &str) {
    let line_start = format!("id={id} ");
    wait_until(
        &format!("client {id} to go"),
        Duration::from_secs(10),
        || {
            let list: String = redis::cmd("CLIENT").arg("LIST").query(admin).unwrap();
            !list.lines().any(|line| line.starts_with(&line_start))
        },
    );
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Steps of a conversation between several connections: (connection index, script).
/// In a script, `{idN}` is connection N's client id; a line `~sleep <ms>` waits; a
/// script `~close` closes the connection and waits until the server has let it go.
type Conversation = &'static [(usize, &'static str)];

/// Runs a conversation on a server and returns every step's output, labelled, with the
/// connections' ids (which differ between servers) shown as `<idN>`.
fn converse(port: u16, connections: usize, steps: Conversation) -> Vec<String> {
    let mut streams: Vec<Option<Connection>> = (0..connections)
        .map(|_| Some(Connection::open(port)))
        .collect();
    let ids: Vec<String> = streams
        .iter_mut()
        .map(|stream| {
            let reply = stream.as_mut().unwrap().run("CLIENT ID\n");
            reply
                .trim_start_matches(':')
                .trim_end_matches("\r\n")
                .to_string()
        })
        .collect();
    let with_ids = |text: &str| {
        let mut text = text.to_string();
        for (index, id) in ids.iter().enumerate() {
            text = text.replace(&format!("{{id{index}}}"), id);
        }
        text
    };
    let mut outputs = Vec::new();
    for (index, script) in steps {
        if *script == "~close" {
            let stream = streams[*index].take().expect("closed twice");
            stream.stream.shutdown(Shutdown::Both).unwrap();
            drop(stream);
            let admin = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
            wait_gone(&mut admin.get_connection().unwrap(), &ids[*index]);
            outputs.push(format!("[{index}] closed"));
            continue;
        }
        let mut output = String::new();
        let mut pending = String::new();
        let stream = streams[*index].as_mut().expect("a closed connection");
        for line in with_ids(script).lines() {
            if let Some(ms) = line.strip_prefix("~sleep ") {
                output.push_str(&stream.run(&pending));
                pending.clear();
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
            } else {
                pending.push_str(line);
                pending.push('\n');
            }
        }
        output.push_str(&stream.run(&pending));
        let mut shown = output;
        for (n, id) in ids.iter().enumerate() {
            // Ids appear as integers (GETREDIR, TRACKINGINFO, tracking-redir-broken).
            shown = shown.replace(&format!(":{id}\r\n"), &format!(":<id{n}>\r\n"));
        }
        outputs.push(format!(
            "[{index}] {script:?} -> {}",
            shown.replace("\r\n", " ")
        ));
    }
    outputs
}

/// Connects and leaves until client ids are past 100, so that an id in a reply (CLIENT
/// GETREDIR, TRACKINGINFO's `redirect`) is never mistaken for a small count.
fn use_up_small_client_ids(port: u16) {
    loop {
        let id = Connection::open(port).run("CLIENT ID\n");
        if id
            .trim_start_matches(':')
            .trim_end()
            .parse::<u64>()
            .unwrap()
            > 100
        {
            return;
        }
    }
}

/// Sessions whose every byte must match Redis 7.0.
const CONVERSATIONS: &[(&str, usize, Conversation)] = &[
    (
        "default mode over RESP3: reads remembered, each change told once",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on\nGET a\nMGET b c\nHGET h f\nEXISTS e\n\
                 ZUNION 2 z1 z2\nINCR counter\nCLIENT TRACKINGINFO\nCLIENT GETREDIR\n",
            ),
            (
                1,
                "SET a 1\nDEL b\nHSET h f v\nSET a 2\nZADD z2 1 m\nINCR counter\nSET e 1\n",
            ),
            (0, ""),
            (0, "SET own 1\nGET own\nSET own 2\nGET own\nAPPEND own x\n"),
            (1, "SET c 1\n"),
            (
                0,
                "GET a\nCLIENT TRACKING off\nCLIENT TRACKINGINFO\nCLIENT GETREDIR\n",
            ),
            (1, "SET a 3\n"),
            (0, ""),
        ],
    ),
    (
        "keys read before TRACKING off are still told after it is on again (lazy removal)",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on\nGET k\nCLIENT TRACKING off\nCLIENT TRACKING on\n",
            ),
            (1, "SET k 1\n"),
            (0, ""),
        ],
    ),
    (
        "a RESP2 client without REDIRECT is told nothing",
        2,
        &[
            (0, "CLIENT TRACKING on\nGET k\nCLIENT TRACKINGINFO\n"),
            (1, "SET k 1\nFLUSHALL\n"),
            (0, "GET k\n"),
        ],
    ),
    (
        "NOLOOP: not told of its own changes",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on NOLOOP\nGET k\nSET k v\nGET k\nCLIENT TRACKINGINFO\n",
            ),
            (1, "SET k w\n"),
            (
                0,
                "GET k\nEVAL \"return redis.call('set', KEYS[1], 'x')\" 1 k\n",
            ),
            (1, "SET k y\n"),
            (0, ""),
        ],
    ),
    (
        "OPTIN: only reads after CLIENT CACHING yes, for one command or one transaction",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on OPTIN\nGET a\nCLIENT CACHING yes\nGET b\nGET c\n\
                 CLIENT CACHING yes\nMULTI\nGET d\nGET e\nEXEC\nGET g\n\
                 CLIENT CACHING yes\nCLIENT TRACKINGINFO\nCLIENT ID\nGET f\nCLIENT TRACKINGINFO\n",
            ),
            (1, "MSET a 1 b 1 c 1 d 1 e 1 f 1 g 1\n"),
            (0, ""),
        ],
    ),
    (
        "OPTOUT: every read but those after CLIENT CACHING no",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on OPTOUT\nGET a\nCLIENT CACHING no\nGET b\nGET c\n\
                 CLIENT CACHING no\nCLIENT TRACKINGINFO\nGET d\nCLIENT TRACKING on OPTOUT NOLOOP\n\
                 CLIENT TRACKINGINFO\n",
            ),
            (1, "MSET a 1 b 1 c 1 d 1\n"),
            (0, ""),
        ],
    ),
    (
        "BCAST: prefixes, one message per prefix and turn, NOLOOP",
        3,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on BCAST PREFIX user: PREFIX obj:\nCLIENT TRACKINGINFO\n\
                 GET user:1\n",
            ),
            (
                2,
                "HELLO 3\nCLIENT TRACKING on BCAST NOLOOP\nCLIENT TRACKINGINFO\n",
            ),
            (
                1,
                "SET user:1 a\nSET obj:2 b\nSET other c\nMSET user:3 x user:1 y\n",
            ),
            (2, "SET mine 1\n"),
            (0, ""),
            (2, ""),
            (
                0,
                "CLIENT TRACKING on BCAST PREFIX x\nCLIENT TRACKINGINFO\nSET xyz 1\n",
            ),
            (1, "DEL user:1 user:3\nSET xa 1\n"),
            (2, ""),
            (0, "CLIENT TRACKING off\nCLIENT TRACKINGINFO\n"),
            (1, "SET user:9 1\n"),
            (0, ""),
        ],
    ),
    (
        "REDIRECT to a RESP2 subscriber: messages on __redis__:invalidate",
        4,
        &[
            (0, "SUBSCRIBE __redis__:invalidate\n"),
            (
                1,
                "CLIENT TRACKING on REDIRECT {id0}\nGET k\nGET j\nCLIENT GETREDIR\n\
                 CLIENT TRACKINGINFO\n",
            ),
            (3, "CLIENT TRACKING on BCAST PREFIX b REDIRECT {id0}\n"),
            (2, "SET k 1\nSET bee 1\n"),
            (0, ""),
            (1, ""),
            (2, "FLUSHALL\n"),
            (0, ""),
            (1, "CLIENT TRACKING on REDIRECT {id2}\nGET q\n"),
            (0, "UNSUBSCRIBE\n"),
            (3, "SET q 1\n"),
            (2, ""),
        ],
    ),
    (
        "REDIRECT to a RESP3 client, and to a RESP2 one that is not subscribed",
        3,
        &[
            (0, "HELLO 3\n"),
            (1, "CLIENT TRACKING on REDIRECT {id0}\nGET k\n"),
            (2, "CLIENT TRACKING on REDIRECT {id1}\nGET j\n"),
            (1, "SET k 1\nSET j 1\n"),
            (0, ""),
            (1, ""),
        ],
    ),
    (
        "a broken redirect: tracking-redir-broken, flag broken_redirect",
        3,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on REDIRECT {id1}\nGET k\nGET j\n",
            ),
            (1, "~close"),
            (2, "SET k 1\n"),
            (0, "CLIENT TRACKINGINFO\nCLIENT GETREDIR\nSET j 2\n"),
            (0, "CLIENT TRACKING on\nCLIENT TRACKINGINFO\nGET k\n"),
            (2, "SET k 2\n"),
            (0, ""),
        ],
    ),
    (
        "FLUSHDB and FLUSHALL invalidate everything with a null; SWAPDB does not",
        3,
        &[
            (0, "HELLO 3\nCLIENT TRACKING on\nGET a\n"),
            (2, "HELLO 3\nCLIENT TRACKING on BCAST PREFIX a NOLOOP\n"),
            (
                1,
                "SET a 1\nSELECT 1\nFLUSHDB\nSWAPDB 0 1\nFLUSHALL ASYNC\n",
            ),
            (0, "FLUSHALL\nGET a\nFLUSHDB\n"),
            (2, ""),
            (2, "FLUSHALL\n"),
            (0, ""),
        ],
    ),
    (
        "a key read in any database is one key: a change in another invalidates",
        2,
        &[
            (0, "HELLO 3\nCLIENT TRACKING on\nSELECT 3\nGET k\n"),
            (1, "SELECT 5\nSET k 1\nMOVE k 6\nSELECT 6\nRENAME k k2\n"),
            (0, "GET k2\nSELECT 6\nGET k2\n"),
            (1, "COPY k2 k3\nSET k2 1\n"),
            (0, ""),
        ],
    ),
    (
        "MULTI / EXEC: its own invalidations follow EXEC's reply",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on\nGET a\nGET b\nMULTI\nSET a 1\nGET c\nSET b 2\nEXEC\n",
            ),
            (1, "MULTI\nSET c 1\nDEL a\nEXEC\n"),
            (0, ""),
            (
                0,
                "GET x\nMULTI\nSET x 1\nEXEC\nWATCH y\nGET y\nMULTI\nGET y\nEXEC\n",
            ),
            (1, "SET y 1\n"),
            (0, ""),
        ],
    ),
    (
        "scripts: declared keys remembered by their reads, their writes invalidate",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on\nEVAL \"return redis.call('get', KEYS[1])\" 1 x\n\
                 EVAL \"redis.call('get', 'y') return 1\" 0\n\
                 EVAL \"return 1\" 1 nothing-read\n\
                 EVAL_RO \"return redis.call('get', KEYS[1])\" 1 w\n\
                 EVAL_RO \"return 1\" 1 z\n",
            ),
            (1, "MSET x 1 y 1 w 1 z 1 nothing-read 1\n"),
            (0, ""),
            (
                0,
                "GET q\nEVAL \"redis.call('get', KEYS[1]) redis.call('set', KEYS[1], 'z') return 1\" 1 q\n\
                 EVAL \"redis.call('set', KEYS[1], 'v') return redis.call('get', KEYS[1])\" 1 p\n",
            ),
            (1, "SET q 2\nSET p 2\n"),
            (0, ""),
            (
                0,
                "CLIENT TRACKING on OPTIN\nEVAL \"return redis.call('get', KEYS[1])\" 1 o1\n\
                 CLIENT CACHING yes\nEVAL \"return redis.call('get', KEYS[1])\" 1 o2\n",
            ),
            (1, "MSET o1 1 o2 1\n"),
            (0, ""),
        ],
    ),
    (
        "expiry invalidates",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on\nSET e v PX 100\nGET e\nGET never-set\n",
            ),
            (1, "~sleep 400\nGET e\n"),
            (0, ""),
        ],
    ),
    (
        "RESET stops tracking",
        2,
        &[
            (
                0,
                "HELLO 3\nCLIENT TRACKING on BCAST\nRESET\nHELLO 3\nCLIENT TRACKINGINFO\n",
            ),
            (1, "SET k 1\nFLUSHALL\n"),
            (0, ""),
        ],
    ),
    (
        "errors over RESP2",
        2,
        &[(
            0,
            "CLIENT TRACKING\nCLIENT TRACKING maybe\nCLIENT TRACKING on foo\n\
             CLIENT TRACKING on REDIRECT\nCLIENT TRACKING on REDIRECT abc\n\
             CLIENT TRACKING on REDIRECT 999999\nCLIENT TRACKING on REDIRECT 0\n\
             CLIENT TRACKING on REDIRECT {id1} REDIRECT {id1}\nCLIENT TRACKING maybe REDIRECT 999999\n\
             CLIENT TRACKING maybe BCAST\nCLIENT TRACKING off REDIRECT 999999\n\
             CLIENT TRACKING on PREFIX a\nCLIENT TRACKING on BCAST OPTIN\nCLIENT TRACKING on BCAST OPTOUT\n\
             CLIENT TRACKING on OPTIN OPTOUT\nCLIENT TRACKING on BCAST PREFIX a PREFIX ab\n\
             CLIENT TRACKING on BCAST PREFIX \"\" PREFIX x\nCLIENT TRACKING on BCAST PREFIX ab PREFIX a\n\
             CLIENT TRACKINGINFO\nCLIENT TRACKINGINFO x\nCLIENT GETREDIR\nCLIENT GETREDIR x\n\
             CLIENT CACHING yes\nCLIENT CACHING maybe\nCLIENT CACHING\nCLIENT CACHING yes no\n\
             CLIENT TRACKING on\nCLIENT CACHING yes\nCLIENT CACHING no\nCLIENT CACHING maybe\n\
             CLIENT TRACKING on BCAST\nCLIENT TRACKING on OPTIN\nCLIENT TRACKING on OPTOUT\n\
             CLIENT TRACKINGINFO\nCLIENT TRACKING off\nCLIENT TRACKING on OPTOUT\nCLIENT TRACKING on OPTIN\n\
             CLIENT CACHING yes\nCLIENT TRACKING off\n\
             CLIENT TRACKING on BCAST PREFIX a\nCLIENT TRACKING on BCAST PREFIX ab\n\
             CLIENT TRACKING on BCAST PREFIX b PREFIX \"\"\nCLIENT TRACKING on BCAST PREFIX a\n\
             CLIENT TRACKING on\nCLIENT TRACKING on BCAST\nCLIENT TRACKINGINFO\n\
             CLIENT TRACKING off\nCLIENT TRACKING OFF\nCLIENT TRACKINGINFO\n",
        )],
    ),
    (
        "TRACKINGINFO over RESP3",
        1,
        &[(
            0,
            "HELLO 3\nCLIENT TRACKINGINFO\nCLIENT TRACKING on OPTIN NOLOOP\nCLIENT CACHING yes\n\
             CLIENT TRACKINGINFO\nCLIENT TRACKING off\nCLIENT TRACKING on BCAST PREFIX b PREFIX a\n\
             CLIENT TRACKINGINFO\nCLIENT TRACKING on REDIRECT {id0} BCAST\nCLIENT TRACKINGINFO\n\
             CLIENT GETREDIR\n",
        )],
    ),
];

#[test]
fn tracking_sessions_match_redis_byte_for_byte() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = RedisOracle::start(&redis_path);
    use_up_small_client_ids(server.port);
    use_up_small_client_ids(oracle.port);
    let mut differences = Vec::new();
    for (name, connections, steps) in CONVERSATIONS {
        let ours = converse(server.port, *connections, steps);
        let theirs = converse(oracle.port, *connections, steps);
        if ours != theirs {
            differences.push(format!(
                "{name}:\n  tessera: {ours:#?}\n  redis:   {theirs:#?}"
            ));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// The raw connections of one server for the tests below.
struct Clients {
    streams: Vec<Connection>,
    ids: Vec<String>,
}

impl Clients {
    fn open(port: u16, count: usize) -> Clients {
        let mut streams: Vec<Connection> = (0..count).map(|_| Connection::open(port)).collect();
        let ids = streams
            .iter_mut()
            .enumerate()
            .map(|(index, stream)| {
                stream.run(&format!("CLIENT SETNAME c{index}\n"));
                let reply = stream.run("CLIENT ID\n");
                reply
                    .trim_start_matches(':')
                    .trim_end_matches("\r\n")
                    .to_string()
            })
            .collect();
        Clients { streams, ids }
    }

    fn run(&mut self, index: usize, script: &str) -> String {
        let mut script = script.to_string();
        for (n, id) in self.ids.iter().enumerate() {
            script = script.replace(&format!("{{id{n}}}"), id);
        }
        self.streams[index].run(&script)
    }
}

/// INFO's tracking figures.
fn tracking_figures(conn: &mut redis::Connection) -> Vec<(String, Option<String>)> {
    [
        "tracking_clients",
        "tracking_total_keys",
        "tracking_total_items",
        "tracking_total_prefixes",
    ]
    .iter()
    .map(|name| (name.to_string(), info_field(conn, name)))
    .collect()
}

/// `name`, `flags` and `redir` of every line of CLIENT LIST but the asking client's,
/// redirect ids shown as the index of the connection.
fn listed_flags(admin: &mut redis::Connection, clients: &Clients) -> Vec<String> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(admin).unwrap();
    let mut lines: Vec<String> = list
        .lines()
        .filter(|line| line.contains(" name=c"))
        .map(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(&format!("{name}=")))
                    .unwrap_or("?")
                    .to_string()
            };
            let mut redir = field("redir");
            if let Some(index) = clients.ids.iter().position(|id| *id == redir) {
                redir = format!("<id{index}>");
            }
            format!("{} flags={} redir={redir}", field("name"), field("flags"))
        })
        .collect();
    lines.sort();
    lines
}

/// The same sessions on Tessera and on Redis give the same INFO figures and CLIENT LIST
/// flags (`t` tracking, `B` BCAST, `R` broken redirect) and `redir=` fields, step by step.
#[test]
fn info_figures_and_client_list_flags_match_redis() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = RedisOracle::start(&redis_path);
    let observe = |port: u16, admin: &mut redis::Connection| {
        let mut observed = Vec::new();
        let mut clients = Clients::open(port, 5);
        let mut look = |clients: &Clients, admin: &mut redis::Connection, step: &str| {
            observed.push(format!(
                "{step}: {:?} {:?}",
                tracking_figures(admin),
                listed_flags(admin, clients)
            ));
        };
        look(&clients, admin, "nobody tracks");
        clients.run(0, "HELLO 3\nCLIENT TRACKING on\nMGET a b c\n");
        clients.run(
            1,
            "CLIENT TRACKING on OPTOUT REDIRECT {id4}\nMGET a b\nGET a\n",
        );
        clients.run(2, "CLIENT TRACKING on BCAST PREFIX x PREFIX y\n");
        clients.run(3, "CLIENT TRACKING on BCAST PREFIX y PREFIX z NOLOOP\n");
        look(&clients, admin, "four tracking");
        clients.run(0, "SET a 1\n");
        look(&clients, admin, "a changed");
        let closed = clients.streams.remove(4);
        closed.stream.shutdown(Shutdown::Both).unwrap();
        drop(closed);
        wait_gone(admin, &clients.ids[4]);
        clients.run(2, "SET b 1\n");
        look(&clients, admin, "redirect broken");
        clients.run(2, "CLIENT TRACKING off\n");
        clients.run(3, "RESET\nCLIENT SETNAME c3\n");
        look(&clients, admin, "BCAST clients gone");
        // A flush tells the trackers and empties the key table (Redis 7.0: FLUSHDB too,
        // though its keys are of every database), even with nobody tracking any more.
        clients.run(0, "MGET a b c\n");
        clients.run(1, "FLUSHDB\n");
        look(&clients, admin, "one database flushed");
        clients.run(0, "MGET a b c\nCLIENT TRACKING off\n");
        clients.run(1, "CLIENT TRACKING off\n");
        look(&clients, admin, "nobody tracks, keys remembered");
        clients.run(2, "FLUSHDB\n");
        look(&clients, admin, "flushed");
        observed
    };
    let ours = observe(server.port, &mut server.connection());
    let theirs = observe(oracle.port, &mut oracle.connection());
    assert_eq!(ours, theirs);
    assert!(ours[1].contains("c2 flags=tB"), "{ours:#?}");
}

/// `tracking-table-max-keys`: past it, keys are forgotten at random before the next
/// command, their readers told as if they changed (Redis 7.0 does the same: the counts
/// are compared, the keys chosen are random); the cron applies a limit lowered while the
/// tracking client is idle.
#[test]
fn the_tracking_table_is_kept_within_its_configured_size() {
    let Some(redis_path) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = RedisOracle::start(&redis_path);
    let observe = |port: u16, admin: &mut redis::Connection| {
        let default: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("tracking-table-max-keys")
            .query(admin)
            .unwrap();
        run(admin, &["CONFIG", "SET", "tracking-table-max-keys", "3"]);
        let mut clients = Clients::open(port, 1);
        // The eviction runs before the next command (the script's closing PING): its
        // messages come before that command's reply.
        let evicted = clients.run(
            0,
            "HELLO 3\nCLIENT TRACKING on\nMGET k1 k2 k3 k4 k5 k6 k7 k8\n",
        );
        let keys_after = info_field(admin, "tracking_total_keys");
        run(admin, &["CONFIG", "SET", "tracking-table-max-keys", "1"]);
        // No command from the tracking client: the cron evicts.
        let deadline = Instant::now() + Duration::from_secs(10);
        while info_field(admin, "tracking_total_keys").as_deref() != Some("1") {
            assert!(Instant::now() < deadline, "the cron did not evict");
            std::thread::sleep(Duration::from_millis(20));
        }
        let evicted_by_cron = clients.run(0, "");
        run(admin, &["CONFIG", "SET", "tracking-table-max-keys", "0"]);
        clients.run(0, "MGET a b c d e f g h i j\n");
        let unlimited = info_field(admin, "tracking_total_keys");
        (
            default,
            evicted.matches("invalidate").count(),
            keys_after,
            evicted_by_cron.matches("invalidate").count(),
            unlimited,
        )
    };
    let ours = observe(server.port, &mut server.connection());
    let theirs = observe(oracle.port, &mut oracle.connection());
    assert_eq!(ours, theirs);
    assert_eq!(ours.1, 5, "{ours:?}");
}

/// A key that expires while nobody touches it is invalidated by the active expiry cycle.
#[test]
fn the_active_expiry_cycle_invalidates() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut clients = Clients::open(server.port, 1);
    clients.run(0, "HELLO 3\nCLIENT TRACKING on\nSET e v PX 50\nGET e\n");
    let connection = &mut clients.streams[0];
    let expected = b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ne\r\n";
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut received = std::mem::take(&mut connection.early);
    let stream = &mut connection.stream;
    while received.len() < expected.len() && Instant::now() < deadline {
        received.extend(read_bytes(stream, expected.len(), Duration::from_secs(1)).0);
    }
    assert_eq!(
        String::from_utf8_lossy(&received),
        String::from_utf8_lossy(expected)
    );
}

/// A deliberate difference: Redis 7.0 answers overlapping prefixes given together, past
/// the first one, with the error and then +OK, and tracks them all (two replies to one
/// command). Tessera answers the error alone and changes nothing.
#[test]
fn overlapping_prefixes_given_together_are_refused_whole() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut clients = Clients::open(server.port, 1);
    let reply = clients.run(
        0,
        "CLIENT TRACKING on BCAST PREFIX a PREFIX b PREFIX bc\nCLIENT TRACKINGINFO\n",
    );
    assert_eq!(
        reply.replace("\r\n", " "),
        "-ERR Prefix 'b' overlaps with another provided prefix 'bc'. Prefixes for a single \
         client must not overlap. *6 $5 flags *1 $3 off $8 redirect :-1 $8 prefixes *0 "
    );
}

/// redis-py's client-side caching (`CacheConfig` over RESP3) end to end, driven by
/// `tests/python/tracking_client.py`: cached reads answered locally, invalidated by other
/// clients' and its own writes, FLUSHALL and expiry. redis-py 5.2.1 gates the feature on
/// a server of 7.4 or later; the script lifts the gate (it passes against Redis 7.0.15
/// too). Fails, never skips, when python3 or redis-py is missing: `scripts/test`
/// installs redis-py from `tests/python/requirements.txt`.
#[test]
fn redis_py_client_side_caching_works_end_to_end() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/tracking_client.py"
    );
    let output = std::process::Command::new("python3")
        .arg(script)
        .arg(server.port.to_string())
        .output()
        .unwrap_or_else(|e| panic!("python3 could not run ({e}): install python3 and redis-py"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("tracking client: ok"),
        "tracking_client.py failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}
