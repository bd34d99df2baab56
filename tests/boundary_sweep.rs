//! The boundary sweep of the whole command table, side by side with redis-server 7.0.15.
//!
//! Generated from the table itself: Tessera's COMMAND DOCS gives every command's (and
//! subcommand's) arguments and their kinds. For each command a plain invocation is built
//! (required arguments filled by kind and name, keys of the command's type present); then
//! each integer and double argument (and the strings that carry numbers: idle times,
//! trimming thresholds), reached through the optional and one-of branches that hold it, is
//! set in turn to each boundary value. Each invocation runs on both servers after the same
//! fixture; Tessera must answer, must not die, and must answer an error where Redis
//! answers an error and a value where Redis answers a value (values themselves may be
//! random, so only their kind is compared; error texts that differ are reported).
//!
//! Seeded: the seed picks each invocation's collection sizes (compact or big encodings).
//! The default run is one seed; `TESSERA_SWEEP_SEEDS=n` runs n seeds, each also setting a
//! second numeric argument of the command to a random boundary value (the long mode), from
//! `TESSERA_SWEEP_FIRST_SEED` (0) on.

mod common;

use common::raw_client::{Conn, V};
use common::{env_number, start_server, temp_dir};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::time::Duration;

/// The values each numeric argument takes in turn.
const BOUNDARIES: &[&str] = &[
    "0",
    "1",
    "-1",
    "-9223372036854775808",
    "-9223372036854775807",
    "9223372036854775807",
    "2147483648",
    "-2147483648",
    "2147483647",
    "4294967296",
    "4294967295",
    "9007199254740992",
    "9007199254740993",
    "99999999999999999999",
    "-99999999999999999999",
    "18446744073709551616",
    "inf",
    "-inf",
    "+inf",
    "nan",
    "1e400",
    "-1e400",
    "-0",
    "0.5",
    "abc",
    "",
    " 1",
    "0x10",
];

/// Commands left out, each with its reason: they end or change the connection or the
/// server in ways the next invocation cannot undo, or wait for what is not there.
const EXCLUDED: &[(&str, &str)] = &[
    ("shutdown", "stops the server"),
    ("debug", "crashes, sleeps or reloads the server on purpose"),
    ("monitor", "turns the connection into a monitor"),
    (
        "subscribe",
        "turns the connection into a subscriber (RESP2)",
    ),
    (
        "psubscribe",
        "turns the connection into a subscriber (RESP2)",
    ),
    (
        "ssubscribe",
        "turns the connection into a subscriber (RESP2)",
    ),
    ("sync", "starts a full sync on the connection"),
    ("psync", "starts a sync on the connection"),
    ("replicaof", "makes the server a replica"),
    ("slaveof", "makes the server a replica"),
    ("failover", "needs a replica; holds writes"),
    ("replconf", "a replica's; ACK gets no reply"),
    ("wait", "waits for replicas that are not there"),
    ("waitaof", "waits for replicas that are not there"),
    ("quit", "closes the connection"),
    ("client|kill", "may close the sweep's own connection"),
    ("client|pause", "pauses the server for as long as asked"),
    ("client|reply", "turns the connection's replies off"),
    (
        "script|debug",
        "turns the next EVAL into a debugging session",
    ),
    ("pfselftest", "holds the server for seconds by design"),
    ("bgsave", "refusals depend on the timing of the job before"),
    (
        "bgrewriteaof",
        "refusals depend on the timing of the job before",
    ),
    ("save", "refusals depend on the timing of the job before"),
    ("multi", "opens a transaction"),
    ("watch", "state of the connection"),
    ("hello", "changes the protocol of the connection"),
    ("reset", "state of the connection"),
    ("migrate", "connects to the address given"),
    (
        "client|setinfo",
        "Redis 7.2's, kept on purpose (docs/compatibility.md)",
    ),
];

/// String arguments that carry numbers, swept as integers.
const NUMERIC_STRINGS: &[&str] = &["min-idle-time", "threshold"];

/// An argument as COMMAND DOCS describes it.
#[derive(Debug)]
struct Arg {
    name: String,
    kind: String,
    token: Option<String>,
    optional: bool,
    children: Vec<Arg>,
}

impl Arg {
    fn numeric(&self) -> bool {
        matches!(self.kind.as_str(), "integer" | "double" | "unix-time")
            || (self.kind == "string" && NUMERIC_STRINGS.contains(&self.name.as_str()))
    }

    /// How many numeric leaves this argument's subtree holds.
    fn numeric_leaves(&self) -> usize {
        self.numeric() as usize + self.children.iter().map(Arg::numeric_leaves).sum::<usize>()
    }
}

/// A command: its words (`CLIENT LIST` is two), its group and its arguments.
struct Command {
    words: Vec<String>,
    group: String,
    args: Vec<Arg>,
}

fn text(v: &V) -> String {
    match v {
        V::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        V::Simple(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn field<'a>(pairs: &'a [(V, V)], name: &str) -> Option<&'a V> {
    pairs.iter().find(|(k, _)| text(k) == name).map(|(_, v)| v)
}

fn parse_args(list: &V) -> Vec<Arg> {
    let V::Array(items) = list else {
        return Vec::new();
    };
    items
        .iter()
        .map(|item| {
            let V::Map(pairs) = item else {
                panic!("an argument is a map: {item:?}")
            };
            let flags: Vec<String> = match field(pairs, "flags") {
                Some(V::Array(f)) | Some(V::Set(f)) => f.iter().map(text).collect(),
                _ => Vec::new(),
            };
            Arg {
                name: field(pairs, "name").map(text).unwrap_or_default(),
                kind: field(pairs, "type").map(text).unwrap_or_default(),
                token: field(pairs, "token").map(text),
                optional: flags.iter().any(|f| f == "optional"),
                children: field(pairs, "arguments")
                    .map(parse_args)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Every command and subcommand of the server's COMMAND DOCS.
fn commands(conn: &mut Conn) -> Vec<Command> {
    let V::Map(docs) = conn.cmd(&["COMMAND", "DOCS"]) else {
        panic!("COMMAND DOCS in RESP3 is a map")
    };
    let mut out = Vec::new();
    fn add(out: &mut Vec<Command>, words: Vec<String>, doc: &V) {
        let V::Map(pairs) = doc else { return };
        let group = field(pairs, "group").map(text).unwrap_or_default();
        let args = field(pairs, "arguments")
            .map(parse_args)
            .unwrap_or_default();
        match field(pairs, "subcommands") {
            Some(V::Map(subs)) => {
                for (name, sub) in subs {
                    // "client|list" names CLIENT LIST.
                    let words: Vec<String> = text(name).split('|').map(str::to_string).collect();
                    add(out, words, sub);
                }
            }
            _ => out.push(Command { words, group, args }),
        }
    }
    for (name, doc) in &docs {
        add(&mut out, vec![text(name)], doc);
    }
    out.sort_by(|a, b| a.words.cmp(&b.words));
    out
}

/// The value a non-numeric argument gets.
fn filler(arg: &Arg, group: &str, keys: &mut usize) -> String {
    let stream = group == "stream";
    match arg.kind.as_str() {
        "key" => {
            *keys += 1;
            format!("k{}", (*keys - 1) % 3 + 1)
        }
        "integer" | "unix-time" | "double" => "1".into(),
        "pattern" => "*".into(),
        "pure-token" => String::new(),
        _ => match arg.name.as_str() {
            "id" | "last-id" if stream => "5-1".into(),
            "start" if stream => "-".into(),
            "end" if stream => "+".into(),
            "start" => "0".into(),
            "stop" => "-1".into(),
            "min" => "-".into(),
            "max" => "+".into(),
            "min-idle-time" => "0".into(),
            "threshold" => "1".into(),
            "max_deleted_entry_id" => "0-0".into(),
            "group" | "groupname" => "g".into(),
            "consumer" | "consumername" => "c".into(),
            "script" => "return 1".into(),
            "sha1" => "e0e1f9fabfc9d4800c877a703b823ac0578ff8db".into(),
            "function-code" => {
                "#!lua name=lib\nredis.register_function('f', function() return 1 end)".into()
            }
            "function" => "f".into(),
            "library-name" => "lib".into(),
            "host" | "ip" => "127.0.0.1".into(),
            "ip:port" => "127.0.0.1:1".into(),
            "username" => "u1".into(),
            "encoding" => "u8".into(),
            "operation" => "AND".into(),
            "type" => "string".into(),
            "category" | "categoryname" => "read".into(),
            "command" | "command-name" | "subcommand" => "get".into(),
            "event" => "command".into(),
            "rule" => "on".into(),
            "path" => "/nonexistent".into(),
            "key" => "k1".into(),
            _ => "a".into(),
        },
    }
}

/// Appends `arg` rendered: the numeric leaf numbered `target` (counting from `*seen`) gets
/// `value`, and so does `second` with `second_value`; optional and one-of branches are
/// taken only to reach them.
struct Render<'a> {
    target: Option<usize>,
    value: &'a str,
    second: Option<(usize, &'a str)>,
    seen: usize,
    keys: usize,
    group: &'a str,
    out: Vec<String>,
}

impl Render<'_> {
    fn holds(&self, arg: &Arg) -> bool {
        let range = self.seen..self.seen + arg.numeric_leaves();
        self.target.is_some_and(|t| range.contains(&t))
            || self.second.is_some_and(|(s, _)| range.contains(&s))
    }

    fn skip(&mut self, arg: &Arg) {
        self.seen += arg.numeric_leaves();
    }

    fn arg(&mut self, arg: &Arg) {
        self.arg_as(arg, arg.optional);
    }

    /// Renders `arg`; an optional one only when it holds a target (a one-of's chosen
    /// branch is given as required, whatever its flag).
    fn arg_as(&mut self, arg: &Arg, optional: bool) {
        if optional && !self.holds(arg) {
            self.skip(arg);
            return;
        }
        if let Some(token) = &arg.token {
            self.out.push(token.clone());
        }
        match arg.kind.as_str() {
            "oneof" => {
                let chosen = arg.children.iter().position(|c| self.holds(c)).unwrap_or(0);
                for (i, child) in arg.children.iter().enumerate() {
                    if i == chosen {
                        self.arg_as(child, false);
                    } else {
                        self.skip(child);
                    }
                }
            }
            "block" => {
                for child in &arg.children {
                    self.arg(child);
                }
            }
            "pure-token" => {}
            _ if arg.numeric() => {
                let me = self.seen;
                self.seen += 1;
                let value = match self.second {
                    _ if self.target == Some(me) => self.value,
                    Some((second, value)) if second == me => value,
                    _ if arg.name == "client-id" => "999999", // no such client
                    _ => "1",
                };
                self.out.push(value.to_string());
            }
            _ => {
                let value = filler(arg, self.group, &mut self.keys);
                self.out.push(value);
            }
        }
    }
}

fn invocation(
    command: &Command,
    target: Option<usize>,
    value: &str,
    second: Option<(usize, &str)>,
) -> Vec<String> {
    let mut render = Render {
        target,
        value,
        second,
        seen: 0,
        keys: 0,
        group: &command.group,
        out: command.words.clone(),
    };
    for arg in &command.args {
        render.arg(arg);
    }
    render.out
}

/// The commands that make keys k1..k3 of the command's type, compact or big.
fn fixture(group: &str, big: bool) -> Vec<Vec<String>> {
    let n = if big { 300 } else { 3 };
    let mut out = vec![vec!["SELECT".into(), "0".into()], vec!["FLUSHALL".into()]];
    if group == "scripting" {
        out.push(vec!["SCRIPT".into(), "FLUSH".into()]);
        out.push(vec!["FUNCTION".into(), "FLUSH".into()]);
    }
    for k in ["k1", "k2", "k3"] {
        let mut command: Vec<String> = match group {
            "list" => vec!["RPUSH".into(), k.into()],
            "hash" => vec!["HSET".into(), k.into()],
            "set" => vec!["SADD".into(), k.into()],
            "sorted-set" => vec!["ZADD".into(), k.into()],
            "geo" => vec!["GEOADD".into(), k.into()],
            "hyperloglog" => vec!["PFADD".into(), k.into()],
            "stream" => {
                out.push(vec![
                    "XADD".into(),
                    k.into(),
                    "1-1".into(),
                    "f".into(),
                    "v".into(),
                ]);
                for i in 2..=n.min(50) {
                    out.push(vec![
                        "XADD".into(),
                        k.into(),
                        format!("{i}-1"),
                        "f".into(),
                        "v".into(),
                    ]);
                }
                out.push(vec![
                    "XGROUP".into(),
                    "CREATE".into(),
                    k.into(),
                    "g".into(),
                    "0".into(),
                ]);
                out.push(vec![
                    "XREADGROUP".into(),
                    "GROUP".into(),
                    "g".into(),
                    "c".into(),
                    "COUNT".into(),
                    "2".into(),
                    "STREAMS".into(),
                    k.into(),
                    ">".into(),
                ]);
                continue;
            }
            _ => {
                out.push(vec!["SET".into(), k.into(), "10".into()]);
                continue;
            }
        };
        for i in 0..n {
            match group {
                "hash" => command.extend([format!("f{i}"), i.to_string()]),
                "sorted-set" => command.extend([i.to_string(), format!("m{i}")]),
                "geo" => command.extend([
                    format!("{}", 13.0 + i as f64 * 0.01),
                    "38.1".into(),
                    format!("m{i}"),
                ]),
                _ => command.push(i.to_string()),
            }
        }
        out.push(command);
    }
    out
}

/// What a reply was, as far as the sweep compares.
#[derive(Debug, PartialEq)]
enum Outcome {
    Error(String),
    Value,
    /// The connection closed (an output limit, or the server died) or no reply came in
    /// time (a block).
    NoReply,
}

fn send(conn: &mut Conn, args: &[String]) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    conn.send(&args);
}

fn connect(port: u16) -> Conn {
    let conn = Conn::new(port);
    conn.reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    conn
}

/// Sends the fixture and then `args` (pipelined), on a connection opened anew when the
/// last invocation left it closed.
fn send_all(conn: &mut Option<Conn>, port: u16, fixture: &[Vec<String>], args: &[String]) {
    let c = conn.get_or_insert_with(|| connect(port));
    for command in fixture.iter().chain(std::iter::once(&args.to_vec())) {
        send(c, command);
    }
}

/// Reads the fixture's replies and then the invocation's.
fn outcome(conn: &mut Option<Conn>, fixture: &[Vec<String>]) -> Outcome {
    let c = conn.as_mut().expect("sent on it");
    let mut reply = V::Null;
    for _ in 0..=fixture.len() {
        reply = c.read();
        if reply == V::Closed {
            break;
        }
    }
    match reply {
        V::Error(e) => Outcome::Error(e),
        V::Closed => {
            *conn = None;
            Outcome::NoReply
        }
        _ => Outcome::Value,
    }
}

fn alive(port: u16) -> bool {
    let mut conn = connect(port);
    conn.cmd(&["PING"]) == V::Simple("PONG".into())
}

#[test]
fn boundary_values_of_every_command_answer_as_redis() {
    let Some(redis_path) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    let seeds: u64 = env_number("TESSERA_SWEEP_SEEDS", 1, 1);
    let first_seed: u64 = env_number("TESSERA_SWEEP_FIRST_SEED", 0, 0);
    // Both servers close a client whose reply passes 8 MB (random picks with a huge
    // negative count stream until then), rather than grow it without bound.
    let limit = "normal 8mb 8mb 0";
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--client-output-buffer-limit", limit]);
    let oracle = common::RedisOracle::start(&redis_path);
    {
        let mut admin = connect(oracle.port);
        admin.cmd(&["CONFIG", "SET", "client-output-buffer-limit", limit]);
    }
    let table = {
        // Closed before the sweep: a client ID the sweep names (REDIRECT 1) is then no
        // open client's on either server.
        let mut docs = connect(server.port);
        docs.cmd(&["HELLO", "3"]);
        commands(&mut docs)
    };
    assert!(
        table.len() > 300,
        "COMMAND DOCS gave {} commands",
        table.len()
    );

    let mut ours: Option<Conn> = None;
    let mut theirs: Option<Conn> = None;
    let mut calls = 0usize;
    let mut differences = Vec::new();
    let mut texts = Vec::new();
    for seed in first_seed..first_seed + seeds {
        let mut rng = StdRng::seed_from_u64(seed);
        for command in &table {
            let name = command.words.join("|").to_lowercase();
            if EXCLUDED.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let leaves: usize = command.args.iter().map(Arg::numeric_leaves).sum();
            let mut plans: Vec<(Option<usize>, &str)> = vec![(None, "")];
            for leaf in 0..leaves {
                plans.extend(BOUNDARIES.iter().map(|v| (Some(leaf), *v)));
            }
            for (target, value) in plans {
                // The long mode sets a second numeric argument too.
                let second = (seed > 0 && leaves > 1).then(|| {
                    let other = rng.random_range(0..leaves);
                    (other, BOUNDARIES[rng.random_range(0..BOUNDARIES.len())])
                });
                let second = second.filter(|(s, _)| Some(*s) != target);
                let args = invocation(command, target, value, second);
                let setup = fixture(&command.group, rng.random_bool(0.3));
                // Both servers work at once; each reply is read in turn.
                send_all(&mut ours, server.port, &setup, &args);
                send_all(&mut theirs, oracle.port, &setup, &args);
                let mine = outcome(&mut ours, &setup);
                let redis = outcome(&mut theirs, &setup);
                calls += 1;
                if mine == Outcome::NoReply && !alive(server.port) {
                    panic!("tessera stopped answering after {args:?} (seed {seed})");
                }
                let same_kind = matches!(
                    (&mine, &redis),
                    (Outcome::Error(_), Outcome::Error(_))
                        | (Outcome::Value, Outcome::Value)
                        | (Outcome::NoReply, Outcome::NoReply)
                );
                if !same_kind {
                    differences.push(format!(
                        "seed {seed}: {args:?}\n  tessera: {mine:?}\n  redis:   {redis:?}"
                    ));
                } else if let (Outcome::Error(a), Outcome::Error(b)) = (&mine, &redis)
                    && a != b
                {
                    texts.push(format!(
                        "seed {seed}: {args:?}\n  tessera: {a}\n  redis:   {b}"
                    ));
                }
            }
        }
    }
    eprintln!(
        "boundary sweep: {calls} invocations of {} commands over {seeds} seed(s) from {first_seed}; \
         {} of a different kind, {} errors worded differently",
        table.len(),
        differences.len(),
        texts.len()
    );
    for text in &texts {
        eprintln!("{text}");
    }
    assert!(
        differences.is_empty(),
        "{} invocations answered a different kind of reply from Redis's:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
