//! Redis's security history as tests (`docs/security.md` lists every advisory and which
//! test covers it): each reproducer is sent to Tessera and to redis-server 7.0.15 (Debian's,
//! with its security fixes) side by side; Tessera must answer what Redis answers, byte for
//! byte, and still answer PING afterwards. Reproducers whose replies are random or whose
//! point is memory or time are checked apart, each for its own bound.

mod common;

use common::side_by_side::{raw_connect, raw_reply};
use common::{start_server, temp_dir};
use std::net::TcpStream;

/// A reproducer: the advisory it comes from, and the command (run in order: earlier ones
/// set up later ones).
type Case = (&'static str, &'static [&'static str]);

/// Reproducers whose replies are Redis's, byte for byte.
const CASES: &[Case] = &[
    // CVE-2023-25155: the count's negation overflows (an assertion in Redis, a capacity
    // overflow panic in Tessera before).
    ("CVE-2023-25155", &["HSET", "h", "a", "1"]),
    (
        "CVE-2023-25155",
        &["HRANDFIELD", "h", "-9223372036854775808"],
    ),
    (
        "CVE-2023-25155",
        &["HRANDFIELD", "h", "-9223372036854775808", "WITHVALUES"],
    ),
    ("CVE-2023-25155", &["ZADD", "z", "1", "a"]),
    (
        "CVE-2023-25155",
        &["ZRANDMEMBER", "z", "-9223372036854775808"],
    ),
    (
        "CVE-2023-25155",
        &["ZRANDMEMBER", "z", "-9223372036854775808", "WITHSCORES"],
    ),
    ("CVE-2023-25155", &["SADD", "s", "a"]),
    (
        "CVE-2023-25155",
        &["SRANDMEMBER", "s", "-9223372036854775808"],
    ),
    // CVE-2023-22458: the count doubled for the pairs.
    (
        "CVE-2023-22458",
        &["HRANDFIELD", "h", "-9223372036854775807", "WITHVALUES"],
    ),
    (
        "CVE-2023-22458",
        &["HRANDFIELD", "h", "9223372036854775807", "WITHVALUES"],
    ),
    (
        "CVE-2023-22458",
        &["ZRANDMEMBER", "z", "-4611686018427387904", "WITHSCORES"],
    ),
    (
        "CVE-2023-22458",
        &["ZRANDMEMBER", "z", "4611686018427387904", "WITHSCORES"],
    ),
    (
        "CVE-2023-22458",
        &["HRANDFIELD", "h", "x", "WITHVALUES", "extra"],
    ),
    (
        "CVE-2023-22458",
        &["HRANDFIELD", "h", "1", "WITHVALUES", "extra"],
    ),
    // CVE-2025-46817: Lua's unpack with a range whose size overflows (a segfault).
    (
        "CVE-2025-46817",
        &[
            "EVAL",
            "return {unpack({1,2,3}, -2147483648, 2147483647)}",
            "0",
        ],
    ),
    (
        "CVE-2025-46817",
        &[
            "EVAL",
            "return {pcall(unpack, {1,2,3}, -2147483648, 2147483647)}",
            "0",
        ],
    ),
    (
        "CVE-2025-46817",
        &["EVAL", "return {unpack({1,2,3}, 1, 8000)}", "0"],
    ),
    (
        "CVE-2025-46817",
        &["EVAL", "return #{unpack({1,2,3}, 1, 7990)}", "0"],
    ),
    (
        "CVE-2025-46817",
        &["EVAL", "return {unpack({1,2,3}, 0, 2^32)}", "0"],
    ),
    (
        "CVE-2025-46817",
        &["EVAL", "return {unpack({1,2,3}, 3, 1)}", "0"],
    ),
    ("CVE-2025-46817", &["EVAL", "return {unpack({1,2,3})}", "0"]),
    (
        "CVE-2025-46817",
        &["EVAL", "return {unpack({1,2,3}, 2)}", "0"],
    ),
    ("CVE-2025-46817", &["EVAL", "return unpack()", "0"]),
    // CVE-2015-4335: binary chunks (crafted bytecode escapes the sandbox) are read as
    // text and fail to parse.
    (
        "CVE-2015-4335",
        &[
            "EVAL",
            "return loadstring(string.dump(function() return 1 end))()",
            "0",
        ],
    ),
    (
        "CVE-2015-4335",
        &[
            "EVAL",
            "return {loadstring(string.dump(function() return 1 end))}",
            "0",
        ],
    ),
    (
        "CVE-2015-4335",
        &["EVAL", "return {loadstring('\\27Lua', 'x')}", "0"],
    ),
    (
        "CVE-2015-4335",
        &[
            "EVAL",
            "local s = string.dump(function() return 1 end) return {load(function() local r = s s = nil return r end)}",
            "0",
        ],
    ),
    ("CVE-2015-4335", &["EVAL", "\x1bLuaQ", "0"]),
    (
        "CVE-2015-4335",
        &["FUNCTION", "LOAD", "#!lua name=x\n\x1bLuaQ"],
    ),
    // loadstring and load keep their own behaviour for text.
    (
        "CVE-2015-4335",
        &["EVAL", "return loadstring('return 5')()", "0"],
    ),
    (
        "CVE-2015-4335",
        &["EVAL", "return {loadstring('retur n')}", "0"],
    ),
    ("CVE-2015-4335", &["EVAL", "return loadstring()", "0"]),
    ("CVE-2015-4335", &["EVAL", "return loadstring({})", "0"]),
    (
        "CVE-2015-4335",
        &["EVAL", "return {loadstring('return 1', {})}", "0"],
    ),
    (
        "CVE-2015-4335",
        &[
            "EVAL",
            "local n = 0 return load(function() n = n + 1 if n == 1 then return 'return 7' end end)()",
            "0",
        ],
    ),
    (
        "CVE-2015-4335",
        &["EVAL", "return {load(function() error('boom') end)}", "0"],
    ),
    (
        "CVE-2015-4335",
        &["EVAL", "return {load(function() return {} end)}", "0"],
    ),
    ("CVE-2015-4335", &["EVAL", "return load('x')", "0"]),
    // CVE-2025-46818 and CVE-2022-24735: the metatable of strings, and the string library
    // behind it, are read-only; a failed attempt leaves strings working for the next
    // script.
    (
        "CVE-2025-46818",
        &[
            "EVAL",
            "getmetatable('').__index = function() return 'x' end return 1",
            "0",
        ],
    ),
    ("CVE-2025-46818", &["EVAL", "return ('abc'):upper()", "0"]),
    (
        "CVE-2025-46818",
        &[
            "EVAL",
            "getmetatable('').__index.upper = function() return 'x' end return 1",
            "0",
        ],
    ),
    (
        "CVE-2025-46818",
        &[
            "EVAL",
            "rawset(getmetatable(''), '__index', {}) return 1",
            "0",
        ],
    ),
    (
        "CVE-2025-46818",
        &["EVAL", "getmetatable('').__metatable = 1 return 1", "0"],
    ),
    (
        "CVE-2025-46818",
        &["EVAL", "return type(getmetatable('').__index)", "0"],
    ),
    ("CVE-2025-46818", &["EVAL", "return ('abc'):upper()", "0"]),
    (
        "CVE-2022-24735",
        &["EVAL", "string.upper = nil return 1", "0"],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "setmetatable(_G, nil) return 1", "0"],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "setmetatable(string, {}) return 1", "0"],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "setmetatable(1, {}) return 1", "0"],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "setmetatable({}, 1) return 1", "0"],
    ),
    (
        "CVE-2022-24735",
        &[
            "EVAL",
            "local t = setmetatable({}, {__metatable = 1}) setmetatable(t, {}) return 1",
            "0",
        ],
    ),
    (
        "CVE-2022-24735",
        &[
            "EVAL",
            "return setmetatable({}, {__index = function() return 5 end}).x",
            "0",
        ],
    ),
    ("CVE-2022-24735", &["EVAL", "return ('abc'):upper()", "0"]),
    // CVE-2024-31449: bit.tohex with INT_MIN digits.
    (
        "CVE-2024-31449",
        &["EVAL", "return bit.tohex(65535, -2147483648)", "0"],
    ),
    (
        "CVE-2024-31449",
        &["EVAL", "return bit.tohex(65535, 2147483647)", "0"],
    ),
    (
        "CVE-2024-31449",
        &["EVAL", "return bit.tohex(65535, -8)", "0"],
    ),
];

/// Sends every case to both servers; returns the differences.
fn differences(ours: &mut TcpStream, theirs: &mut TcpStream, cases: &[Case]) -> Vec<String> {
    let mut found = Vec::new();
    for (advisory, args) in cases {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mine = raw_reply(ours, &args);
        let redis = raw_reply(theirs, &args);
        if mine != redis {
            found.push(format!(
                "{advisory} {args:?}\n  tessera: {:?}\n  redis:   {:?}",
                String::from_utf8_lossy(&mine),
                String::from_utf8_lossy(&redis)
            ));
        }
    }
    found
}

#[test]
fn advisory_reproducers_get_redis_replies() {
    let Some(redis_path) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = common::RedisOracle::start(&redis_path);
    let mut ours = raw_connect(server.port);
    let mut theirs = raw_connect(oracle.port);
    let found = differences(&mut ours, &mut theirs, CASES);
    assert!(
        found.is_empty(),
        "{} of {} replies differ from Redis:\n{}",
        found.len(),
        CASES.len(),
        found.join("\n")
    );
}

/// A negative count is the client's number, not the collection's size: the reply is
/// streamed (never allocated from the count) and stops at the client's hard output limit,
/// which closes the client as Redis's does; the server goes on serving.
#[test]
fn a_huge_negative_random_count_is_stopped_by_the_output_limit() {
    let dir = temp_dir();
    let server = start_server(
        dir.path(),
        &["--client-output-buffer-limit", "normal 4mb 4mb 0"],
    );
    let mut setup = common::raw_client::Conn::new(server.port);
    setup.cmd(&["HSET", "h", "a", "1"]);
    setup.cmd(&["ZADD", "z", "1", "a"]);
    setup.cmd(&["SADD", "s", "a"]);
    for command in [
        &["HRANDFIELD", "h", "-9223372036854775807"][..],
        &["HRANDFIELD", "h", "-4611686018427387903", "WITHVALUES"],
        &["ZRANDMEMBER", "z", "-4611686018427387903", "WITHSCORES"],
        &["SRANDMEMBER", "s", "-9223372036854775807"],
    ] {
        let mut client = common::raw_client::Conn::new(server.port);
        let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
        client.send(&args);
        assert!(client.is_closed(), "{command:?}: the client was not closed");
        assert_eq!(
            setup.cmd(&["PING"]),
            common::raw_client::V::Simple("PONG".into()),
            "{command:?}"
        );
    }
    // The server's peak resident memory: the replies stopped at the limit, not at the
    // count (4 MB each here; an unbounded one would have used gigabytes).
    let pid = server.child.as_ref().expect("running").id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    assert!(peak_kb < 256 << 10, "peak resident memory {peak_kb} kB");
}
