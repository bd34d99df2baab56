//! ACL end to end against the real `tessera-server`, compared with a real redis-server 7.0:
//! a seeded random stream of ACL SETUSER rules and commands run as several users (every
//! reply must match: allowed or denied, and the denial's text), ACL GETUSER / LIST for a
//! corpus of rule sets (byte for byte but for the order of single-command rules, which
//! Redis takes from its hash table), AUTH and HELLO AUTH, the aclfile (ACL SAVE / LOAD and
//! a file Redis wrote), scripts, MULTI/EXEC and pub/sub denials, ACL LOG, requirepass,
//! protected configs, clients closed when their user goes, and hostile input.
//!
//! Seeds come from `TESSERA_ACL_SEEDS`, operations per seed from `TESSERA_ACL_OPS`; a
//! failure names the seed and the operation.

mod common;

use common::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

// --- a raw RESP client -------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq)]
enum V {
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
    fn text(&self) -> String {
        match self {
            V::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            V::Simple(s) | V::Error(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }
    fn items(&self) -> Vec<V> {
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

struct Conn {
    reader: BufReader<TcpStream>,
}

impl Conn {
    fn new(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(stream),
        }
    }

    fn send(&mut self, args: &[&[u8]]) {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        // A closed peer shows up on the read.
        let _ = self.reader.get_mut().write_all(&out);
    }

    fn call(&mut self, args: &[&[u8]]) -> V {
        self.send(args);
        self.read()
    }

    fn cmd(&mut self, words: &[&str]) -> V {
        let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
        self.call(&args)
    }

    fn read(&mut self) -> V {
        read_value(&mut self.reader).unwrap_or(V::Closed)
    }

    fn is_closed(&mut self) -> bool {
        self.reader
            .get_mut()
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut byte = [0u8; 1];
        matches!(self.reader.read(&mut byte), Ok(0) | Err(_))
    }
}

fn read_value(reader: &mut BufReader<TcpStream>) -> Option<V> {
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

// --- the two servers -----------------------------------------------------------------------

struct Pair {
    tessera: TestServer,
    redis: RedisOracle,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Pair {
    fn start(args: &[&str]) -> Option<Pair> {
        let binary = require_redis_or_skip(WHOLE_TEST)?;
        let tessera_dir = temp_dir();
        let redis_dir = temp_dir();
        let tessera = start_server(tessera_dir.path(), args);
        let mut redis_args = vec!["--appendonly", "no"];
        redis_args.extend_from_slice(args);
        let redis = RedisOracle::start_with(&binary, redis_dir.path(), &redis_args);
        Some(Pair {
            tessera,
            redis,
            _dirs: (tessera_dir, redis_dir),
        })
    }

    fn connect(&self) -> (Conn, Conn) {
        (Conn::new(self.tessera.port), Conn::new(self.redis.port))
    }
}

/// Sorts each run of single-command rules (`+get -set +config|get +select|0`) in a rule
/// description: Redis lists them in its hash table's order, Tessera in name order.
fn normalize_rules(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let single = |w: &str| {
        let w = w.trim_end_matches(')');
        (w.starts_with('+') || w.starts_with('-')) && !w[1..].starts_with('@')
    };
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if !single(words[i]) {
            out.push(words[i].to_string());
            i += 1;
            continue;
        }
        let mut run = Vec::new();
        let mut closing = false;
        while i < words.len() && single(words[i]) && !closing {
            closing = words[i].ends_with(')');
            run.push(words[i].trim_end_matches(')').to_string());
            i += 1;
        }
        run.sort();
        if closing {
            let last = run.pop().unwrap();
            run.push(format!("{last})"));
        }
        out.extend(run);
    }
    out.join(" ")
}

/// Makes replies comparable: rule descriptions normalised, ACL LOG's age and client
/// info blanked, the connection id of HELLO blanked, ACL CAT's lists sorted (Redis lists
/// them in its hash table's order).
fn normalize(command: &[&[u8]], reply: V) -> V {
    let name = String::from_utf8_lossy(command[0]).to_ascii_lowercase();
    let sub = command
        .get(1)
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .unwrap_or_default();
    match (name.as_str(), sub.as_str(), reply) {
        ("acl", "list", V::Array(lines)) => V::Array(
            lines
                .into_iter()
                .map(|l| V::Bulk(Some(normalize_rules(&l.text()).into_bytes())))
                .collect(),
        ),
        ("acl", "getuser", reply @ (V::Map(_) | V::Array(_))) => normalize_getuser(reply),
        ("acl", "log", V::Array(entries)) => V::Array(
            entries
                .into_iter()
                .map(|entry| {
                    let items = entry.items();
                    let mut out = Vec::new();
                    for pair in items.chunks(2) {
                        let key = pair[0].text();
                        let value = match key.as_str() {
                            "age-seconds" => V::Null,
                            "client-info" => V::Null,
                            _ => pair[1].clone(),
                        };
                        out.push(pair[0].clone());
                        out.push(value);
                    }
                    V::Array(out)
                })
                .collect(),
        ),
        ("acl", "cat", V::Array(items)) if command.len() == 3 => {
            let mut names: Vec<String> = items.iter().map(V::text).collect();
            names.sort();
            V::Array(
                names
                    .into_iter()
                    .map(|n| V::Bulk(Some(n.into_bytes())))
                    .collect(),
            )
        }
        ("hello", _, reply @ (V::Map(_) | V::Array(_))) => {
            let items = reply.items();
            V::Array(
                items
                    .chunks(2)
                    .flat_map(|p| {
                        let value = if p[0].text() == "id" {
                            V::Null
                        } else {
                            p[1].clone()
                        };
                        [p[0].clone(), value]
                    })
                    .collect(),
            )
        }
        (_, _, reply) => reply,
    }
}

fn normalize_getuser(reply: V) -> V {
    let items = reply.items();
    let mut out = Vec::new();
    for pair in items.chunks(2) {
        let key = pair[0].text();
        let value = match key.as_str() {
            "commands" => V::Bulk(Some(normalize_rules(&pair[1].text()).into_bytes())),
            "selectors" => V::Array(pair[1].items().into_iter().map(normalize_getuser).collect()),
            "flags" => V::Array(pair[1].items()),
            _ => pair[1].clone(),
        };
        out.push(pair[0].clone());
        out.push(value);
    }
    V::Array(out)
}

/// A reply as readable text.
fn show(value: &V) -> String {
    match value {
        V::Bulk(Some(b)) => format!("{:?}", String::from_utf8_lossy(b)),
        V::Array(items) | V::Set(items) | V::Push(items) => {
            format!(
                "[{}]",
                items.iter().map(show).collect::<Vec<_>>().join(", ")
            )
        }
        V::Map(pairs) => format!(
            "{{{}}}",
            pairs
                .iter()
                .map(|(k, v)| format!("{}: {}", show(k), show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// Runs `words` on both and asserts the (normalised) replies are equal.
fn same(tessera: &mut Conn, redis: &mut Conn, words: &[&str], context: &str) -> V {
    let args: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
    let ours = normalize(&args, tessera.call(&args));
    let theirs = normalize(&args, redis.call(&args));
    assert!(
        ours == theirs,
        "{context}: {words:?}\ntessera: {}\nredis:   {}",
        show(&ours),
        show(&theirs)
    );
    ours
}

// --- the random stream ----------------------------------------------------------------------

const USERS: usize = 3;
const KEYS: &[&str] = &["k1", "k2", "ka", "s1", "x", "{t}a"];

const RULES: &[&str] = &[
    "on",
    "off",
    "+@all",
    "-@all",
    "allcommands",
    "nocommands",
    "+@read",
    "-@read",
    "+@write",
    "-@write",
    "+@string",
    "-@string",
    "+@list",
    "+@hash",
    "+@set",
    "+@sortedset",
    "+@keyspace",
    "-@keyspace",
    "+@scripting",
    "-@scripting",
    "+@pubsub",
    "-@pubsub",
    "+@fast",
    "-@slow",
    "-@dangerous",
    "+@admin",
    "+@transaction",
    "+@connection",
    "+get",
    "-get",
    "+set",
    "-set",
    "+mget",
    "+eval",
    "-eval",
    "+evalsha",
    "+publish",
    "+subscribe",
    "+psubscribe",
    "+multi",
    "+exec",
    "-exec",
    "+config|get",
    "-config",
    "+select|0",
    "+select|1",
    "+client|id",
    "+acl|whoami",
    "+acl|dryrun",
    "-acl",
    "+zunionstore",
    "+lmpop",
    "+rename",
    "+copy",
    "~k*",
    "%R~k*",
    "%W~k*",
    "%RW~ka",
    "~x",
    "%R~s*",
    "%W~s*",
    "~{t}*",
    "allkeys",
    "resetkeys",
    "&ch*",
    "&news",
    "&ch?",
    "allchannels",
    "resetchannels",
    "(+get ~x)",
    "(+@read %R~s*)",
    "(+set %W~k* &news)",
    "clearselectors",
    "reset",
    "nopass",
    "resetpass",
    ">secret",
    "<secret",
    "sanitize-payload",
    "skip-sanitize-payload",
    // Refused rules: both servers must refuse them the same way.
    "+nosuch",
    "-nosuch|x",
    "+get|",
    "%X~k",
    "%",
    "+config|get|x",
    "+@nosuch",
    "bogus",
    "&*",
    "~*",
    "(",
    "(+get",
    "~x)",
];

/// One random command for a user's connection.
fn random_command(rng: &mut StdRng) -> Vec<String> {
    let key = |rng: &mut StdRng| KEYS[rng.random_range(0..KEYS.len())].to_string();
    let v = |s: &str| s.to_string();
    match rng.random_range(0..34) {
        0 => vec![v("GET"), key(rng)],
        1 => vec![v("SET"), key(rng), v("1")],
        2 => vec![v("SET"), key(rng), v("2"), v("GET")],
        3 => vec![v("MGET"), key(rng), key(rng)],
        4 => vec![v("MSET"), key(rng), v("a"), key(rng), v("b")],
        5 => vec![v("DEL"), key(rng)],
        6 => vec![v("EXISTS"), key(rng), key(rng)],
        7 => vec![v("INCR"), key(rng)],
        8 => vec![v("LPUSH"), key(rng), v("e")],
        9 => vec![v("LRANGE"), key(rng), v("0"), v("-1")],
        10 => vec![v("HSET"), key(rng), v("f"), v("1")],
        11 => vec![v("SADD"), key(rng), v("1"), v("2")],
        12 => vec![v("ZUNIONSTORE"), key(rng), v("2"), key(rng), key(rng)],
        13 => vec![v("ZUNIONSTORE"), key(rng), v("1x"), key(rng)],
        14 => vec![v("COPY"), key(rng), key(rng)],
        15 => vec![v("RENAME"), key(rng), key(rng)],
        16 => vec![v("LMPOP"), v("2"), key(rng), key(rng), v("LEFT")],
        17 => vec![
            v("EVAL"),
            v("return redis.call('get', KEYS[1])"),
            v("1"),
            key(rng),
        ],
        18 => vec![
            v("EVAL"),
            v("return redis.pcall('set', KEYS[1], 'lua')"),
            v("1"),
            key(rng),
        ],
        19 => vec![v("EVAL"), v("return redis.call('ping')"), v("0")],
        20 => vec![
            v("PUBLISH"),
            ["ch1", "news", "other"][rng.random_range(0..3)].into(),
            v("m"),
        ],
        21 => vec![v("CONFIG"), v("GET"), v("hz")],
        22 => vec![v("SELECT"), ["0", "1", "2"][rng.random_range(0..3)].into()],
        23 => vec![v("PING")],
        24 => vec![v("ACL"), v("WHOAMI")],
        25 => vec![v("STRLEN"), key(rng)],
        26 => vec![v("DBSIZE")],
        27 => vec![v("ECHO"), v("hi")],
        28 => vec![v("SET"), key(rng), v("3"), v("EX"), v("1000")],
        29 => vec![v("GETDEL"), key(rng)],
        30 => vec![
            v("EVAL"),
            v("return redis.acl_check_cmd('set', KEYS[1], 'v')"),
            v("1"),
            key(rng),
        ],
        31 => vec![v("SINTERCARD"), v("2"), key(rng), key(rng)],
        32 => vec![v("CLIENT"), v("GETNAME")],
        _ => vec![v("TYPE"), key(rng)],
    }
}

struct Stream {
    admin: (Conn, Conn),
    users: Vec<(Conn, Conn)>,
    tessera_port: u16,
    redis_port: u16,
}

impl Stream {
    fn op(&mut self, rng: &mut StdRng, context: &str) {
        let user = rng.random_range(0..USERS);
        let name = format!("u{user}");
        match rng.random_range(0..100) {
            0..=14 => {
                let mut words = vec!["ACL".to_string(), "SETUSER".into(), name];
                for _ in 0..rng.random_range(1..5) {
                    words.push(RULES[rng.random_range(0..RULES.len())].into());
                }
                self.admin_both(&words, context);
            }
            15..=17 => self.admin_both(&["ACL".into(), "GETUSER".into(), name], context),
            18 => self.admin_both(&["ACL".into(), "LIST".into()], context),
            19..=20 => self.admin_both(&["ACL".into(), "LOG".into(), "6".into()], context),
            21 => {
                let mut words = vec!["ACL".to_string(), "DRYRUN".into(), name];
                words.extend(random_command(rng));
                self.admin_both(&words, context);
            }
            22..=24 => {
                // A transaction, sometimes with the rules changed before EXEC.
                let (t, r) = &mut self.users[user];
                let multi = same(t, r, &["MULTI"], context);
                for _ in 0..rng.random_range(1..4) {
                    let words = random_command(rng);
                    let words: Vec<&str> = words.iter().map(String::as_str).collect();
                    same(t, r, &words, context);
                }
                if rng.random_bool(0.3) {
                    let rule = RULES[rng.random_range(0..RULES.len())];
                    let words = vec![
                        "ACL".into(),
                        "SETUSER".into(),
                        format!("u{user}"),
                        rule.into(),
                    ];
                    self.admin_both(&words, context);
                }
                let (t, r) = &mut self.users[user];
                if multi == V::Simple("OK".into()) {
                    same(t, r, &["EXEC"], context);
                }
            }
            25..=26 => {
                // Subscribing on a connection of its own (it stays subscribed).
                let password = "p".to_string() + &user.to_string();
                let mut t = Conn::new(self.tessera_port);
                let mut r = Conn::new(self.redis_port);
                same(&mut t, &mut r, &["AUTH", &name, &password], context);
                let command = ["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"][rng.random_range(0..3)];
                let channel = ["ch1", "news", "ch*", "other"][rng.random_range(0..4)];
                same(&mut t, &mut r, &[command, channel], context);
            }
            27 => {
                let (t, r) = &mut self.users[user];
                let password = if rng.random_bool(0.5) { "p" } else { "wrong" };
                let password = format!("{password}{user}");
                same(t, r, &["AUTH", &name, &password], context);
            }
            _ => {
                let (t, r) = &mut self.users[user];
                let words = random_command(rng);
                let words: Vec<&str> = words.iter().map(String::as_str).collect();
                same(t, r, &words, context);
            }
        }
    }

    fn admin_both(&mut self, words: &[String], context: &str) {
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let (t, r) = &mut self.admin;
        same(t, r, &words, context);
    }
}

#[test]
fn a_random_stream_of_rules_and_commands_matches_redis() {
    let Some(pair) = Pair::start(&[]) else {
        return;
    };
    let seeds = env_numbers("TESSERA_ACL_SEEDS", &[1u64, 2, 3, 4], 0);
    let ops = env_number("TESSERA_ACL_OPS", 1500usize, 1);
    for seed in seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut admin = pair.connect();
        same(&mut admin.0, &mut admin.1, &["FLUSHALL"], "setup");
        same(
            &mut admin.0,
            &mut admin.1,
            &["ACL", "LOG", "RESET"],
            "setup",
        );
        let mut users = Vec::new();
        for user in 0..USERS {
            let name = format!("u{user}");
            let password = format!(">p{user}");
            same(
                &mut admin.0,
                &mut admin.1,
                &[
                    "ACL", "SETUSER", &name, "reset", "on", &password, "+@all", "~*",
                ],
                "setup",
            );
            let mut conn = pair.connect();
            same(
                &mut conn.0,
                &mut conn.1,
                &["AUTH", &name, &password[1..]],
                "setup",
            );
            users.push(conn);
        }
        let mut stream = Stream {
            admin,
            users,
            tessera_port: pair.tessera.port,
            redis_port: pair.redis.port,
        };
        for op in 0..ops {
            stream.op(&mut rng, &format!("seed {seed} op {op}"));
        }
        let (t, r) = &mut stream.admin;
        same(t, r, &["ACL", "LOG", "128"], &format!("seed {seed} end"));
        same(t, r, &["ACL", "LIST"], &format!("seed {seed} end"));
        same(
            t,
            r,
            &["ACL", "DELUSER", "u0", "u1", "u2"],
            &format!("seed {seed} end"),
        );
    }
}

// --- fixed scenarios ----------------------------------------------------------------------

/// Rule sets whose ACL GETUSER and ACL LIST must be Redis's (single-command order aside).
const CORPUS: &[&[&str]] = &[
    &[],
    &["on", ">a", ">b", "<a", "~*", "&*", "+@all"],
    &["reset"],
    &["+@all", "-@string"],
    &["+@all", "-@dangerous", "-@admin", "+config|get"],
    &["-@all", "+@read", "+@write", "-keys", "-@blocking"],
    &["+@fast", "-@slow", "+client|id", "+select|0", "+select|9"],
    &["+@hash", "+@list", "+@set", "+@sortedset", "-hgetall"],
    &["allcommands", "-@keyspace", "+del", "+exists"],
    &["nocommands", "+@scripting", "+@transaction", "-discard"],
    &["%R~r*", "%W~w*", "%RW~rw*", "~both*", "%R~both*", "%W~r*"],
    &["&a*", "&b?", "&a*", "resetchannels", "&c"],
    &["(+get ~x)", "(+@read %R~s* &ch)", "+set"],
    &["(+get", "~x)", "clearselectors", "(+@write ~k*)"],
    &["nopass", "sanitize-payload"],
    &[
        "skip-sanitize-payload",
        "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
    ],
    &["+@all", "-config", "+config|get", "-@pubsub", "+subscribe"],
    &["-@all", "+acl", "-acl|setuser", "+acl|getuser"],
];

#[test]
fn getuser_and_list_describe_a_corpus_of_rules_as_redis() {
    let Some(pair) = Pair::start(&[]) else {
        return;
    };
    let (mut t, mut r) = pair.connect();
    for (index, rules) in CORPUS.iter().enumerate() {
        let name = format!("c{index}");
        let mut words = vec!["ACL", "SETUSER", name.as_str()];
        words.extend_from_slice(rules);
        same(&mut t, &mut r, &words, "corpus");
        same(&mut t, &mut r, &["ACL", "GETUSER", &name], "corpus");
    }
    same(&mut t, &mut r, &["ACL", "LIST"], "corpus");
    same(&mut t, &mut r, &["ACL", "USERS"], "corpus");
    for category in ["", "read", "string", "connection", "scripting", "nosuch"] {
        let mut words = vec!["ACL", "CAT"];
        if !category.is_empty() {
            words.push(category);
        }
        same(&mut t, &mut r, &words, "cat");
    }
    for words in [
        &["ACL", "GETUSER", "nosuch"][..],
        &["ACL", "DELUSER", "default"],
        &["ACL", "DELUSER", "c0", "c0", "nosuch"],
        &["ACL", "SETUSER", "bad name"],
        &["ACL", "GENPASS", "0"],
        &["ACL", "GENPASS", "x"],
        &["ACL", "LOG", "x"],
        &["ACL", "LOAD"],
        &["ACL", "SAVE"],
        &["ACL", "NOSUCH"],
        &["ACL", "GETUSER"],
        &["ACL", "DRYRUN", "nosuch", "get", "k"],
        &["ACL", "DRYRUN", "c1", "nosuchcommand"],
        &["ACL", "DRYRUN", "c1", "get"],
        &["ACL", "DRYRUN", "c3", "set", "k", "v"],
        &["ACL", "DRYRUN", "c10", "get", "w1"],
        &["ACL", "DRYRUN", "c11", "publish", "zz", "m"],
    ] {
        same(&mut t, &mut r, words, "errors");
    }
    // COMMAND INFO's ACL categories (its 7th element) are Redis's.
    for name in [
        "get",
        "config",
        "acl",
        "set",
        "eval",
        "subscribe",
        "zunionstore",
        "client",
    ] {
        let category = |reply: V| reply.items()[0].items()[6].clone();
        assert_eq!(
            category(t.cmd(&["COMMAND", "INFO", name])),
            category(r.cmd(&["COMMAND", "INFO", name])),
            "{name}"
        );
    }
    // GENPASS: hex digits, as many as the bits ask (rounded up), and never the same.
    let V::Bulk(Some(a)) = t.cmd(&["ACL", "GENPASS"]) else {
        panic!()
    };
    let V::Bulk(Some(b)) = t.cmd(&["ACL", "GENPASS", "5"]) else {
        panic!()
    };
    assert_eq!((a.len(), b.len()), (64, 2));
    assert!(a.iter().all(u8::is_ascii_hexdigit));
    assert_ne!(t.cmd(&["ACL", "GENPASS"]), V::Bulk(Some(a)));
}

#[test]
fn auth_hello_reset_and_requirepass_as_redis() {
    let Some(pair) = Pair::start(&["--requirepass", "pw"]) else {
        return;
    };
    let (mut t, mut r) = pair.connect();
    for words in [
        &["GET", "k"][..],
        &["AUTH", "wrong"],
        &["AUTH", "default", "wrong"],
        &["HELLO", "3", "AUTH", "default", "wrong"],
        &["HELLO", "3"],
        &["AUTH", "pw"],
        &["ACL", "WHOAMI"],
        &["ACL", "SETUSER", "alice", "on", ">secret", "+@all", "~*"],
        &["ACL", "SETUSER", "bob", "off", ">secret", "+@all", "~*"],
        &["AUTH", "bob", "secret"],
        &["HELLO", "2", "AUTH", "alice", "secret", "SETNAME", "me"],
        &["ACL", "WHOAMI"],
        &["CLIENT", "GETNAME"],
        &["HELLO", "2", "AUTH", "alice", "secret", "BADOPT"],
        &["RESET"],
        &["ACL", "WHOAMI"],
        &["GET", "k"],
        &["AUTH", "alice", "secret"],
        &["CONFIG", "SET", "requirepass", ""],
        &["AUTH", "x"],
        &["CONFIG", "GET", "requirepass"],
        &["CONFIG", "SET", "requirepass", "new"],
        &["ACL", "GETUSER", "default"],
        &["ACL", "LOG"],
    ] {
        same(&mut t, &mut r, words, "auth");
    }
    // The user name in CLIENT LIST / CLIENT INFO.
    let V::Bulk(Some(info)) = t.cmd(&["CLIENT", "INFO"]) else {
        panic!()
    };
    assert!(String::from_utf8_lossy(&info).contains(" user=alice "));
    // A new connection needs the new password; the old ones stay authenticated.
    let (mut t2, mut r2) = pair.connect();
    same(&mut t2, &mut r2, &["PING"], "new connection");
    same(&mut t2, &mut r2, &["AUTH", "new"], "new connection");
    same(&mut t2, &mut r2, &["PING"], "new connection");
}

#[test]
fn scripts_transactions_and_channels_are_denied_as_redis() {
    let Some(pair) = Pair::start(&[]) else {
        return;
    };
    let (mut admin_t, mut admin_r) = pair.connect();
    let (mut t, mut r) = pair.connect();
    let rules = [
        "ACL",
        "SETUSER",
        "s",
        "on",
        "nopass",
        "+@scripting",
        "+@pubsub",
        "+get",
        "+multi",
        "+exec",
        "%R~r*",
        "&ch*",
    ];
    same(&mut admin_t, &mut admin_r, &rules, "setup");
    same(&mut t, &mut r, &["AUTH", "s", "x"], "setup");
    for words in [
        &["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "r1"][..],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "w1"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "r1"],
        &["EVAL", "return redis.pcall('publish', 'x', 'y')", "0"],
        &["EVAL", "return redis.acl_check_cmd('get', 'r1')", "0"],
        &["EVAL", "return redis.acl_check_cmd('get', 'w1')", "0"],
        &["EVAL", "return redis.acl_check_cmd('nosuch')", "0"],
        &["PUBLISH", "ch1", "m"],
        &["MULTI"],
        &["GET", "r1"],
        &["GET", "w1"],
        &["SET", "r1", "v"],
        &["EXEC"],
        &["MULTI"],
        &["GET", "r1"],
    ] {
        same(&mut t, &mut r, words, "denials");
    }
    // The rules change between the queueing and EXEC.
    same(
        &mut admin_t,
        &mut admin_r,
        &["ACL", "SETUSER", "s", "resetkeys"],
        "change",
    );
    same(&mut t, &mut r, &["EXEC"], "exec");
    for words in [
        &["SUBSCRIBE", "ch1", "other"][..],
        &["PSUBSCRIBE", "ch*"],
        &["PSUBSCRIBE", "c*"],
    ] {
        let (mut st, mut sr) = pair.connect();
        same(&mut st, &mut sr, &["AUTH", "s", "x"], "subscribe");
        same(&mut st, &mut sr, words, "subscribe");
    }
    same(&mut admin_t, &mut admin_r, &["ACL", "LOG", "20"], "log");
}

#[test]
fn clients_of_a_deleted_user_or_revoked_channels_are_closed() {
    let Some(pair) = Pair::start(&[]) else {
        return;
    };
    for server in [pair.tessera.port, pair.redis.port] {
        let mut admin = Conn::new(server);
        admin.cmd(&["ACL", "SETUSER", "v", "on", "nopass", "+@all", "~*", "&*"]);
        let mut plain = Conn::new(server);
        assert_eq!(plain.cmd(&["AUTH", "v", "x"]), V::Simple("OK".into()));
        let mut subscriber = Conn::new(server);
        subscriber.cmd(&["AUTH", "v", "x"]);
        subscriber.cmd(&["SUBSCRIBE", "news"]);
        // Revoking the channel closes the subscriber only.
        admin.cmd(&["ACL", "SETUSER", "v", "resetchannels", "&other"]);
        assert!(
            subscriber.is_closed(),
            "port {server}: subscriber still open"
        );
        assert_eq!(plain.cmd(&["PING"]), V::Simple("PONG".into()));
        // SETUSER off keeps them authenticated; DELUSER closes them.
        admin.cmd(&["ACL", "SETUSER", "v", "off"]);
        assert_eq!(plain.cmd(&["ACL", "WHOAMI"]), V::Bulk(Some(b"v".to_vec())));
        assert_eq!(admin.cmd(&["ACL", "DELUSER", "v"]), V::Int(1));
        assert!(
            plain.is_closed(),
            "port {server}: client of a deleted user open"
        );
        // A client deleting its own user gets the reply, then is closed.
        admin.cmd(&["ACL", "SETUSER", "w", "on", "nopass", "+@all"]);
        let mut own = Conn::new(server);
        own.cmd(&["AUTH", "w", "x"]);
        assert_eq!(own.cmd(&["ACL", "DELUSER", "w"]), V::Int(1));
        assert!(own.is_closed());
        assert_eq!(admin.cmd(&["PING"]), V::Simple("PONG".into()));
    }
}

fn write_file(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn aclfile_save_and_load_round_trip_and_a_redis_written_file_loads() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    // Redis writes a file.
    let redis_dir = temp_dir();
    let redis_file = redis_dir.path().join("users.acl");
    write_file(&redis_file, "");
    let redis_file_text = redis_file.to_str().unwrap().to_string();
    let redis = RedisOracle::start_with(
        &binary,
        redis_dir.path(),
        &["--appendonly", "no", "--aclfile", &redis_file_text],
    );
    let mut r = Conn::new(redis.port);
    for rules in CORPUS.iter().skip(1) {
        let mut words = vec!["ACL", "SETUSER", "someone"];
        words.extend_from_slice(rules);
        r.cmd(&words);
        let name = format!("u{}", rules.len());
        let mut words = vec!["ACL", "SETUSER", name.as_str()];
        words.extend_from_slice(rules);
        r.cmd(&words);
    }
    assert_eq!(r.cmd(&["ACL", "SAVE"]), V::Simple("OK".into()));
    let redis_list = normalize(&[b"acl", b"list"], r.cmd(&["ACL", "LIST"]));
    // Tessera starts from it, lists the same users, saves, and loads what it saved.
    let dir = temp_dir();
    std::fs::copy(&redis_file, dir.path().join("users.acl")).unwrap();
    let server = start_server(dir.path(), &["--aclfile", "users.acl"]);
    let mut t = Conn::new(server.port);
    let list = normalize(&[b"acl", b"list"], t.cmd(&["ACL", "LIST"]));
    assert_eq!(show(&list), show(&redis_list));
    assert_eq!(t.cmd(&["ACL", "SAVE"]), V::Simple("OK".into()));
    t.cmd(&["ACL", "SETUSER", "temporary", "on"]);
    assert_eq!(t.cmd(&["ACL", "LOAD"]), V::Simple("OK".into()));
    let reloaded = normalize(&[b"acl", b"list"], t.cmd(&["ACL", "LIST"]));
    assert_eq!(show(&reloaded), show(&redis_list));
    // And Redis loads what Tessera saved.
    std::fs::copy(dir.path().join("users.acl"), &redis_file).unwrap();
    assert_eq!(r.cmd(&["ACL", "LOAD"]), V::Simple("OK".into()));
    // A bad file changes nothing, with Redis's message.
    write_file(&dir.path().join("users.acl"), "user a on\nbad line\n");
    write_file(&redis_file, "user a on\nbad line\n");
    let ours = t.cmd(&["ACL", "LOAD"]).text();
    let theirs = r.cmd(&["ACL", "LOAD"]).text();
    assert_eq!(
        ours.replace("users.acl", "F"),
        theirs.replace(&redis_file_text, "F")
    );
    assert_eq!(
        show(&normalize(&[b"acl", b"list"], t.cmd(&["ACL", "LIST"]))),
        show(&redis_list)
    );
}

#[test]
fn startup_users_and_their_errors() {
    let dir = temp_dir();
    let config = dir.path().join("tessera.conf");
    // `user` lines in the config file.
    write_file(
        &config,
        "user alice on >pw ~a* +get\nuser default on nopass +@all ~* &*\n",
    );
    let server = start_config(dir.path(), &config);
    let mut t = Conn::new(server.port);
    assert_eq!(t.cmd(&["AUTH", "alice", "pw"]), V::Simple("OK".into()));
    assert_eq!(
        t.cmd(&["SET", "a1", "v"]).text(),
        "NOPERM this user has no permissions to run the 'set' command"
    );
    drop(server);
    // A bad rule, users and an aclfile together, a missing aclfile: refused at start-up.
    for (text, expected) in [
        (
            "user alice on badop\n",
            "Error in user declaration 'alice': Syntax error",
        ),
        (
            "user alice on\naclfile users.acl\n",
            "please define either an ACL file or declare users directly in your redis.conf, but not both",
        ),
        (
            "aclfile missing.acl\n",
            "Error loading ACLs, opening file 'missing.acl'",
        ),
    ] {
        write_file(&config, text);
        let failed = start_config_failing(dir.path(), &config);
        assert!(failed.contains(expected), "{text:?}: {failed}");
    }
}

fn start_config(dir: &Path, config: &Path) -> TestServer {
    start_config_result(dir, config).unwrap_or_else(|log| panic!("did not start: {log}"))
}

fn start_config_failing(dir: &Path, config: &Path) -> String {
    match start_config_result(dir, config) {
        Ok(_) => panic!("started with {}", std::fs::read_to_string(config).unwrap()),
        Err(log) => log,
    }
}

/// Starts Tessera with a config file (it must be the first argument).
fn start_config_result(dir: &Path, config: &Path) -> Result<TestServer, String> {
    let text = std::fs::read_to_string(config).unwrap();
    let with_dir = format!("dir {}\nport 0\n{text}", dir.display());
    let full = dir.join("full.conf");
    std::fs::write(&full, with_dir).unwrap();
    try_start_server_with(dir, &[], |command| {
        // Replace the arguments: the config file first, then nothing else.
        let program = command.get_program().to_owned();
        *command = std::process::Command::new(program);
        command
            .arg(&full)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
    })
}

#[test]
fn protected_configs_as_redis() {
    let Some(pair) = Pair::start(&[]) else {
        return;
    };
    let (mut t, mut r) = pair.connect();
    for words in [
        &["CONFIG", "SET", "dir", "/tmp"][..],
        &["CONFIG", "SET", "dbfilename", "x.rdb"],
        &["CONFIG", "GET", "enable-protected-configs"],
        &["CONFIG", "GET", "enable-debug-command"],
        &["CONFIG", "GET", "enable-module-command"],
        &["CONFIG", "SET", "enable-protected-configs", "yes"],
        &["CONFIG", "GET", "acl-pubsub-default"],
        &["CONFIG", "SET", "acl-pubsub-default", "bad"],
        &["CONFIG", "SET", "acllog-max-len", "2"],
        &["CONFIG", "GET", "acllog-max-len"],
    ] {
        same(&mut t, &mut r, words, "protected");
    }
    // With protected configs enabled, Tessera still keeps `dir` fixed (immutable).
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--enable-protected-configs", "local"]);
    let mut t = Conn::new(server.port);
    assert!(
        t.cmd(&["CONFIG", "SET", "dir", "/tmp"])
            .text()
            .ends_with("can't set immutable config")
    );
}

#[test]
fn hostile_input_completes_and_the_server_stays_up() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut t = Conn::new(server.port);
    // 10,000 users, then ACL LIST and a save/load of them all.
    for i in 0..10_000 {
        let name = format!("user{i}");
        t.send(&[
            b"ACL",
            b"SETUSER",
            name.as_bytes(),
            b"on",
            b">p",
            b"+@read",
            b"~k*",
            b"(+set ~s*)",
        ]);
    }
    for _ in 0..10_000 {
        assert_eq!(t.read(), V::Simple("OK".into()));
    }
    assert_eq!(t.cmd(&["ACL", "LIST"]).items().len(), 10_001);
    // Pathological globs: long, star-heavy, against long keys.
    let glob = "*a".repeat(20_000) + "b";
    let rule = format!("~{glob}");
    assert_eq!(
        t.cmd(&["ACL", "SETUSER", "g", "on", "nopass", "+@all", &rule]),
        V::Simple("OK".into())
    );
    t.cmd(&["AUTH", "g", "x"]);
    let key = "a".repeat(50_000);
    assert_eq!(
        t.cmd(&["GET", &key]).text(),
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    );
    t.cmd(&["AUTH", "default", "x"]);
    // Deeply nested and unbalanced selectors are refused.
    let nested = "(".repeat(10_000) + &")".repeat(10_000);
    assert!(
        t.cmd(&["ACL", "SETUSER", "n", &nested])
            .text()
            .contains("Syntax error")
    );
    let unbalanced = "(".repeat(10_000);
    assert!(
        t.cmd(&["ACL", "SETUSER", "n", &unbalanced, "+get"])
            .text()
            .contains("Unmatched")
    );
    // A huge ACL LOAD file.
    let file = dir.path().join("huge.acl");
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!(
            "user h{i} on >p ~k{i}* +@all -@dangerous (+get ~x)\n"
        ));
    }
    std::fs::write(&file, text).unwrap();
    drop(t);
    drop(server);
    let server = start_server(dir.path(), &["--aclfile", "huge.acl"]);
    let mut t = Conn::new(server.port);
    assert_eq!(t.cmd(&["ACL", "LOAD"]), V::Simple("OK".into()));
    assert_eq!(t.cmd(&["ACL", "USERS"]).items().len(), 20_001);
    assert_eq!(t.cmd(&["PING"]), V::Simple("PONG".into()));
}
