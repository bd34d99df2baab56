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
            let mut names: Vec<String> = items
                .iter()
                .map(V::text)
                .collect();
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
            format!("[{}]", items.iter().map(show).collect::<Vec<_>>().join(", "))
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
    "on", "off", "+@all", "-@all", "allcommands", "nocommands", "+@read", "-@read", "+@write",
    "-@write", "+@string", "-@string", "+@list", "+@hash", "+@set", "+@sortedset", "+@keyspace",
    "-@keyspace", "+@scripting", "-@scripting", "+@pubsub", "-@pubsub", "+@fast", "-@slow",
    "-@dangerous", "+@admin", "+@transaction", "+@connection", "+get", "-get", "+set", "-set",
    "+mget", "+eval", "-eval", "+evalsha", "+publish", "+subscribe", "+psubscribe", "+multi",
    "+exec", "-exec", "+config|get", "-config", "+select|0", "+select|1", "+client|id",
    "+acl|whoami", "+acl|dryrun", "-acl", "+zunionstore", "+lmpop", "+rename", "+copy",
    "~k*", "%R~k*", "%W~k*", "%RW~ka", "~x", "%R~s*", "%W~s*", "~{t}*", "allkeys", "resetkeys",
    "&ch*", "&news", "&ch?", "allchannels", "resetchannels", "(+get ~x)", "(+@read %R~s*)",
    "(+set %W~k* &news)", "clearselectors", "reset", "nopass", "resetpass", ">secret",
    "<secret", "sanitize-payload", "skip-sanitize-payload",
    // Refused rules: both servers must refuse them the same way.
    "+nosuch", "-nosuch|x", "+get|", "%X~k", "%", "+config|get|x", "+@nosuch", "bogus",
    "&*", "~*", "(", "(+get", "~x)",
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
        20 => vec![v("PUBLISH"), ["ch1", "news", "other"][rng.random_range(0..3)].into(), v("m")],
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
                    let words = vec!["ACL".into(), "SETUSER".into(), format!("u{user}"), rule.into()];
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
        same(&mut admin.0, &mut admin.1, &["ACL", "LOG", "RESET"], "setup");
        let mut users = Vec::new();
        for user in 0..USERS {
            let name = format!("u{user}");
            let password = format!(">p{user}");
            same(
                &mut admin.0,
                &mut admin.1,
                &["ACL", "SETUSER", &name, "reset", "on", &password, "+@all", "~*"],
                "setup",
            );
            let mut conn = pair.connect();
            same(&mut conn.0, &mut conn.1, &["AUTH", &name, &password[1..]], "setup");
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
        same(t, r, &["ACL", "DELUSER", "u0", "u1", "u2"], &format!("seed {seed} end"));
    }
}
