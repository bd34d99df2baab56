//! COMMAND DOCS serves Redis 7.0's documentation (src/commands/command_docs.json, made by
//! tools/gen_command_docs.py), which redis-cli turns into argument hints. These tests keep
//! the data in step with the command table, check the reply's exact bytes in RESP2 and
//! RESP3, and, when Debian's redis-server is installed, compare it with Redis's own.

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const DOCS_JSON: &str = include_str!("../src/commands/command_docs.json");

fn docs_data() -> serde_json::Map<String, Value> {
    serde_json::from_str(DOCS_JSON).expect("command_docs.json is a JSON object")
}

fn registered_names() -> BTreeSet<String> {
    tessera::commands::table()
        .iter()
        .map(|spec| spec.name.to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------
// A raw RESP2/RESP3 client: exact reply bytes, and a parsed form for assertions.
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Resp {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Vec<u8>),
    Null,
    Array(Vec<Resp>),
    Set(Vec<Resp>),
    Map(Vec<(Resp, Resp)>),
}

impl Resp {
    fn bulk(text: &str) -> Resp {
        Resp::Bulk(text.as_bytes().to_vec())
    }

    /// The value under `key` in a map (RESP3) or a flat key-value array (RESP2).
    fn get(&self, key: &str) -> Option<&Resp> {
        let key = Resp::bulk(key);
        match self {
            Resp::Map(pairs) => pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| v),
            Resp::Array(items) if items.len() % 2 == 0 => items
                .chunks(2)
                .find(|pair| pair[0] == key)
                .map(|pair| &pair[1]),
            _ => None,
        }
    }

    /// The keys of a map, or of a flat key-value array.
    fn keys(&self) -> Vec<String> {
        let text = |r: &Resp| match r {
            Resp::Bulk(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("map key {other:?} is not a bulk string"),
        };
        match self {
            Resp::Map(pairs) => pairs.iter().map(|(k, _)| text(k)).collect(),
            Resp::Array(items) => items.chunks(2).map(|pair| text(&pair[0])).collect(),
            other => panic!("{other:?} is not a map"),
        }
    }

    fn items(&self) -> &[Resp] {
        match self {
            Resp::Array(items) | Resp::Set(items) => items,
            other => panic!("{other:?} is not an array"),
        }
    }
}

/// Parses one reply from the front of `buf`: None while it is incomplete.
fn parse(buf: &[u8]) -> Option<(Resp, usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[1..end]).unwrap();
    let mut at = end + 2;
    let items = |n: usize, at: &mut usize| -> Option<Vec<Resp>> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let (item, used) = parse(&buf[*at..])?;
            *at += used;
            out.push(item);
        }
        Some(out)
    };
    let value = match buf[0] {
        b'+' => Resp::Simple(line.to_string()),
        b'-' => Resp::Error(line.to_string()),
        b':' => Resp::Int(line.parse().unwrap()),
        b'_' => Resp::Null,
        b'$' | b'=' => {
            let n: i64 = line.parse().unwrap();
            if n < 0 {
                Resp::Null
            } else {
                let n = n as usize;
                if buf.len() < at + n + 2 {
                    return None;
                }
                let data = buf[at..at + n].to_vec();
                at += n + 2;
                Resp::Bulk(data)
            }
        }
        b'*' | b'~' => {
            let n: i64 = line.parse().unwrap();
            if n < 0 {
                Resp::Null
            } else {
                let list = items(n as usize, &mut at)?;
                if buf[0] == b'~' {
                    Resp::Set(list)
                } else {
                    Resp::Array(list)
                }
            }
        }
        b'%' => {
            let n: usize = line.parse().unwrap();
            let flat = items(2 * n, &mut at)?;
            let mut flat = flat.into_iter();
            Resp::Map(
                (0..n)
                    .map(|_| (flat.next().unwrap(), flat.next().unwrap()))
                    .collect(),
            )
        }
        other => panic!("unexpected RESP type byte {:?}", other as char),
    };
    Some((value, at))
}

struct Client {
    stream: TcpStream,
}

impl Client {
    fn connect(port: u16, resp3: bool) -> Client {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut client = Client { stream };
        if resp3 {
            let (hello, _) = client.call(&["HELLO", "3"]);
            assert!(matches!(hello, Resp::Map(_)), "HELLO 3: {hello:?}");
        }
        client
    }

    /// Sends a command; returns the parsed reply and its exact bytes.
    fn call(&mut self, args: &[&str]) -> (Resp, Vec<u8>) {
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.stream.write_all(request.as_bytes()).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            if !buf.is_empty()
                && let Some((reply, used)) = parse(&buf)
            {
                assert_eq!(used, buf.len(), "bytes after the reply to {args:?}");
                return (reply, buf);
            }
            let n = self.stream.read(&mut chunk).expect("read a reply");
            assert!(
                n > 0,
                "connection closed while reading the reply to {args:?}"
            );
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The data
// ---------------------------------------------------------------------------------------

/// The data cannot silently fall behind the table: every registered command has an entry
/// (and nothing else does). A failure here means: run `python3 tools/gen_command_docs.py`.
#[test]
fn every_registered_command_has_a_docs_entry() {
    let docs = docs_data();
    let registered = registered_names();
    let documented: BTreeSet<String> = docs.keys().cloned().collect();
    let missing: Vec<_> = registered.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&registered).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "command_docs.json is out of step with the command table (missing {missing:?}, \
         not registered {extra:?}): run python3 tools/gen_command_docs.py"
    );
    for (name, entry) in &docs {
        for field in ["summary", "since", "group", "complexity"] {
            if field == "complexity" && WITHOUT_COMPLEXITY.contains(&name.as_str()) {
                continue;
            }
            assert!(
                entry.get(field).is_some_and(Value::is_string),
                "{name}: no {field} string"
            );
        }
    }
}

/// The writer knows objects, arrays, strings and integers; Redis's docs have nothing else.
#[test]
fn docs_data_has_only_maps_arrays_strings_and_integers() {
    fn walk(path: &str, value: &Value) {
        match value {
            Value::Object(map) => map
                .iter()
                .for_each(|(k, v)| walk(&format!("{path}.{k}"), v)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .for_each(|(i, v)| walk(&format!("{path}[{i}]"), v)),
            Value::String(_) => {}
            Value::Number(n) => assert!(n.is_i64(), "{path}: {n} is not an integer"),
            other => panic!("{path}: unsupported value {other}"),
        }
    }
    walk("$", &Value::Object(docs_data()));
}

// ---------------------------------------------------------------------------------------
// The replies
// ---------------------------------------------------------------------------------------

fn key_argument(entry: &Resp) -> &Resp {
    let arguments = entry.get("arguments").expect("an arguments entry");
    let first = &arguments.items()[0];
    assert_eq!(first.get("name"), Some(&Resp::bulk("key")));
    assert_eq!(first.get("type"), Some(&Resp::bulk("key")));
    first
}

#[test]
fn command_docs_get_in_resp2_and_resp3() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);

    // Redis 7.0's exact reply in RESP2: maps are flat arrays.
    let (reply, raw) = Client::connect(server.port, false).call(&["COMMAND", "DOCS", "get"]);
    let expected: &[u8] = b"*2\r\n$3\r\nget\r\n*10\r\n\
        $7\r\nsummary\r\n$22\r\nGet the value of a key\r\n\
        $5\r\nsince\r\n$5\r\n1.0.0\r\n\
        $5\r\ngroup\r\n$6\r\nstring\r\n\
        $10\r\ncomplexity\r\n$4\r\nO(1)\r\n\
        $9\r\narguments\r\n*1\r\n*6\r\n\
        $4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n\
        $14\r\nkey_spec_index\r\n:0\r\n";
    assert_eq!(
        String::from_utf8_lossy(&raw),
        String::from_utf8_lossy(expected)
    );
    let entry = reply.get("get").unwrap();
    assert_eq!(
        key_argument(entry).get("key_spec_index"),
        Some(&Resp::Int(0))
    );

    // And in RESP3: real maps.
    let (reply, raw) = Client::connect(server.port, true).call(&["COMMAND", "DOCS", "get"]);
    let expected: &[u8] = b"%1\r\n$3\r\nget\r\n%5\r\n\
        $7\r\nsummary\r\n$22\r\nGet the value of a key\r\n\
        $5\r\nsince\r\n$5\r\n1.0.0\r\n\
        $5\r\ngroup\r\n$6\r\nstring\r\n\
        $10\r\ncomplexity\r\n$4\r\nO(1)\r\n\
        $9\r\narguments\r\n*1\r\n%3\r\n\
        $4\r\nname\r\n$3\r\nkey\r\n$4\r\ntype\r\n$3\r\nkey\r\n\
        $14\r\nkey_spec_index\r\n:0\r\n";
    assert_eq!(
        String::from_utf8_lossy(&raw),
        String::from_utf8_lossy(expected)
    );
    assert!(matches!(reply, Resp::Map(_)));
    let entry = reply.get("get").unwrap();
    assert!(matches!(entry, Resp::Map(_)));
    assert_eq!(
        key_argument(entry).get("key_spec_index"),
        Some(&Resp::Int(0))
    );
}

/// Sets and simple strings, which JSON cannot spell, come back as Redis sends them.
#[test]
fn command_docs_set_has_history_sets_and_flag_statuses() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let (reply, _) = Client::connect(server.port, true).call(&["COMMAND", "DOCS", "SET"]);
    let entry = reply.get("set").expect("the entry is named in lower case");
    let Some(Resp::Set(history)) = entry.get("history") else {
        panic!("history is not a set: {entry:?}");
    };
    assert_eq!(
        history[0],
        Resp::Array(vec![
            Resp::bulk("2.6.12"),
            Resp::bulk("Added the `EX`, `PX`, `NX` and `XX` options.")
        ])
    );
    let condition = &entry.get("arguments").unwrap().items()[2];
    assert_eq!(condition.get("name"), Some(&Resp::bulk("condition")));
    assert_eq!(
        condition.get("flags"),
        Some(&Resp::Set(vec![Resp::Simple("optional".into())]))
    );
    key_argument(entry);

    let (reply, _) = Client::connect(server.port, false).call(&["COMMAND", "DOCS", "getset"]);
    assert_eq!(
        reply.get("getset").unwrap().get("doc_flags"),
        Some(&Resp::Array(vec![Resp::Simple("deprecated".into())]))
    );
}

/// Commands whose Redis 7.0 entry has no `complexity` (Redis's own data).
const WITHOUT_COMPLEXITY: &[&str] = &["lolwut", "monitor", "psync", "sync"];

/// With no names: every command, all from the data (the fallback has no `complexity`).
#[test]
fn command_docs_without_names_covers_every_command() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    for resp3 in [false, true] {
        let mut client = Client::connect(server.port, resp3);
        let (reply, _) = client.call(&["COMMAND", "DOCS"]);
        let (count, _) = client.call(&["COMMAND", "COUNT"]);
        let names: BTreeSet<String> = reply.keys().into_iter().collect();
        assert_eq!(Resp::Int(names.len() as i64), count);
        assert_eq!(names, registered_names());
        for name in &names {
            let entry = reply.get(name).unwrap();
            let expected = !WITHOUT_COMPLEXITY.contains(&name.as_str());
            assert_eq!(
                entry.get("complexity").is_some(),
                expected,
                "{name}: {entry:?}"
            );
        }
    }
}

/// Unknown names are skipped, as in Redis; `container|sub` names a subcommand.
#[test]
fn command_docs_skips_unknown_names_and_finds_subcommands() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut client = Client::connect(server.port, true);
    let (reply, _) = client.call(&[
        "COMMAND",
        "DOCS",
        "nosuch",
        "GET",
        "client|nosuch",
        "CLIENT|SETINFO",
        "get|x",
        "a|b|c",
    ]);
    assert_eq!(reply.keys(), ["get", "client|setinfo"]);
    let setinfo = reply.get("client|setinfo").unwrap();
    assert_eq!(setinfo.get("since"), Some(&Resp::bulk("7.2.0")));

    let (reply, raw) = client.call(&["COMMAND", "DOCS", "nosuch"]);
    assert_eq!(reply, Resp::Map(vec![]));
    assert_eq!(raw, b"%0\r\n");

    let (reply, _) = client.call(&["COMMAND", "DOCS", "client"]);
    let subcommands = reply.get("client").unwrap().get("subcommands").unwrap();
    assert!(subcommands.keys().contains(&"client|setinfo".to_string()));
}

/// The data documents only subcommands Tessera implements.
#[test]
fn documented_subcommands_are_implemented() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut client = Client::connect(server.port, false);
    let mut checked = 0;
    for (name, entry) in docs_data() {
        let Some(subcommands) = entry.get("subcommands").and_then(Value::as_object) else {
            continue;
        };
        for full in subcommands.keys() {
            let (container, sub) = full.split_once('|').unwrap();
            assert_eq!(container, name);
            let (reply, _) = client.call(&[container, sub]);
            if let Resp::Error(message) = &reply {
                assert!(
                    !message.contains("unknown subcommand"),
                    "{full} is documented but not implemented: {message}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 16, "only {checked} subcommands documented");
}

// ---------------------------------------------------------------------------------------
// Against Redis
// ---------------------------------------------------------------------------------------

/// Every entry is Redis 7.0's reply byte for byte, in RESP2 and RESP3 (containers per
/// subcommand: Tessera lists only the ones it implements, and CLIENT SETINFO and WAITAOF
/// are 7.2's).
#[test]
fn command_docs_match_redis_byte_for_byte() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let redis = RedisOracle::start(&redis_binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let docs = docs_data();

    let mut names: Vec<String> = Vec::new();
    for (name, entry) in &docs {
        match entry.get("subcommands").and_then(Value::as_object) {
            // WAITAOF is Redis 7.2's.
            None if name == "waitaof" => {}
            None => names.push(name.clone()),
            Some(subcommands) => names.extend(
                subcommands
                    .keys()
                    .filter(|full| *full != "client|setinfo")
                    .cloned(),
            ),
        }
    }
    names.push("get nosuch set GET".into());

    for resp3 in [false, true] {
        let mut ours = Client::connect(server.port, resp3);
        let mut theirs = Client::connect(redis.port, resp3);
        for name in &names {
            let mut args = vec!["COMMAND", "DOCS"];
            args.extend(name.split(' '));
            let (_, ours_raw) = ours.call(&args);
            let (_, theirs_raw) = theirs.call(&args);
            assert_eq!(
                String::from_utf8_lossy(&ours_raw),
                String::from_utf8_lossy(&theirs_raw),
                "COMMAND DOCS {name} (RESP{})",
                if resp3 { 3 } else { 2 }
            );
        }
    }
}
