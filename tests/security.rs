//! Redis's security history as tests (`docs/security.md` lists every advisory and which
//! test covers it): each reproducer is sent to Tessera and to redis-server 7.0.15 (Debian's,
//! with its security fixes) side by side; Tessera must answer what Redis answers, byte for
//! byte, and still answer PING afterwards. Reproducers whose replies are random or whose
//! point is memory or time are checked apart, each for its own bound.

mod common;

use common::side_by_side::{raw_connect, raw_reply_or_closed};
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
    ), // CVE-2015-8080 / CVE-2020-14147: struct's size digits overflow.
    (
        "CVE-2020-14147",
        &["EVAL", "return struct.pack('>I2147483648', '10')", "0"],
    ),
    (
        "CVE-2020-14147",
        &["EVAL", "return struct.pack('i99999999999', 1)", "0"],
    ),
    (
        "CVE-2020-14147",
        &["EVAL", "return struct.size('c2147483648')", "0"],
    ),
    // CVE-2018-11219: struct's offsets (a size_t in Redis: only 0 is refused).
    (
        "CVE-2018-11219",
        &[
            "EVAL",
            "return struct.unpack('f', 'xxxxxxxxxxxxx', -3)",
            "0",
        ],
    ),
    (
        "CVE-2018-11219",
        &["EVAL", "return struct.unpack('f', 'xxxxxxxxxxxxx', 0)", "0"],
    ),
    (
        "CVE-2018-11219",
        &["EVAL", "return struct.unpack('i4', 'xxxx', 2)", "0"],
    ),
    // CVE-2018-11218: cmsgpack with as many arguments as the stack holds.
    (
        "CVE-2018-11218",
        &[
            "EVAL",
            "local t = {} for i = 1, 7000 do t[i] = i end return #cmsgpack.pack(unpack(t))",
            "0",
        ],
    ),
    (
        "CVE-2018-11218",
        &[
            "EVAL",
            "return #{cmsgpack.unpack(cmsgpack.pack(unpack({1, 2, 3})))}",
            "0",
        ],
    ),
    // CVE-2022-24834: cjson and cmsgpack of long strings (the buffer is 6 x the length).
    (
        "CVE-2022-24834",
        &[
            "EVAL",
            "return #cjson.encode(string.rep('\\1', 1000000))",
            "0",
        ],
    ),
    (
        "CVE-2022-24834",
        &[
            "EVAL",
            "return #cmsgpack.pack(string.rep('x', 1000000))",
            "0",
        ],
    ),
    // CVE-2022-24735: the globals and the libraries stay read-only.
    (
        "CVE-2022-24735",
        &[
            "EVAL",
            "local g = getmetatable(_G) g.__index = {} return 1",
            "0",
        ],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "redis = function() return 1 end", "0"],
    ),
    ("CVE-2022-24735", &["EVAL", "_G = {}", "0"]),
    (
        "CVE-2022-24735",
        &["EVAL", "redis.call = function() return 1 end", "0"],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "cjson.encode = function() return 1 end", "0"],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "cmsgpack.pack = function() return 1 end", "0"],
    ),
    (
        "CVE-2022-24735",
        &["EVAL", "bit.lshift = function() return 1 end", "0"],
    ),
    ("CVE-2022-24735", &["EVAL", "loadfile('/etc/passwd')", "0"]),
    ("CVE-2022-24735", &["EVAL", "dofile('/etc/passwd')", "0"]),
    ("CVE-2022-24735", &["EVAL", "print('x')", "0"]),
    // CVE-2024-46981: a script that stops the collector, then SCRIPT FLUSH.
    (
        "CVE-2024-46981",
        &[
            "EVAL",
            "collectgarbage('stop') local t = {} for i = 1, 1000 do t[i] = {i} end return 1",
            "0",
        ],
    ),
    ("CVE-2024-46981", &["SCRIPT", "FLUSH"]),
    (
        "CVE-2024-46981",
        &["EVAL", "return collectgarbage('count') > 0", "0"],
    ),
    ("CVE-2024-46981", &["SCRIPT", "FLUSH", "ASYNC"]),
    ("CVE-2024-46981", &["EVAL", "return 1", "0"]),
    // CVE-2025-46819: long brackets the lexer cannot finish.
    ("CVE-2025-46819", &["EVAL", "return [==", "0"]),
    ("CVE-2025-46819", &["EVAL", "return [=", "0"]),
    ("CVE-2025-46819", &["EVAL", "--[==", "0"]),
    ("CVE-2025-46819", &["EVAL", "return [=[abc]=]", "0"]),
    ("CVE-2025-46819", &["EVAL", "return [==[abc]=]", "0"]),
    // CVE-2018-12453: XGROUP on a key of another type.
    ("CVE-2018-12453", &["SET", "foo", "bar"]),
    ("CVE-2018-12453", &["XGROUP", "CREATE", "foo", "g", "$"]),
    ("CVE-2018-12453", &["XGROUP", "SETID", "foo", "g", "$"]),
    (
        "CVE-2018-12453",
        &["XGROUP", "CREATECONSUMER", "foo", "g", "c"],
    ),
    // CVE-2022-31144: XAUTOCLAIM over deleted entries with a count.
    ("CVE-2022-31144", &["XADD", "x", "1-0", "f", "v"]),
    ("CVE-2022-31144", &["XADD", "x", "2-0", "f", "v"]),
    ("CVE-2022-31144", &["XADD", "x", "3-0", "f", "v"]),
    ("CVE-2022-31144", &["XGROUP", "CREATE", "x", "grp", "0"]),
    (
        "CVE-2022-31144",
        &["XREADGROUP", "GROUP", "grp", "Alice", "STREAMS", "x", ">"],
    ),
    ("CVE-2022-31144", &["XDEL", "x", "1-0"]),
    ("CVE-2022-31144", &["XDEL", "x", "2-0"]),
    (
        "CVE-2022-31144",
        &["XAUTOCLAIM", "x", "grp", "Bob", "0", "0-0", "COUNT", "1"],
    ),
    (
        "CVE-2022-31144",
        &["XAUTOCLAIM", "x", "grp", "Bob", "0", "2-0", "COUNT", "1"],
    ),
    (
        "CVE-2022-31144",
        &["XAUTOCLAIM", "x", "grp", "Bob", "0", "3-0", "COUNT", "1"],
    ),
    // CVE-2022-35951: XAUTOCLAIM's COUNT times its attempts factor.
    (
        "CVE-2022-35951",
        &[
            "XAUTOCLAIM",
            "x",
            "grp",
            "Bob",
            "0",
            "3-0",
            "COUNT",
            "8070450532247928833",
        ],
    ),
    (
        "CVE-2022-35951",
        &[
            "XAUTOCLAIM",
            "x",
            "grp",
            "Bob",
            "0",
            "3-0",
            "COUNT",
            "922337203685477580",
        ],
    ),
    (
        "CVE-2022-35951",
        &[
            "XAUTOCLAIM",
            "x",
            "grp",
            "Bob",
            "0",
            "3-0",
            "COUNT",
            "922337203685477581",
        ],
    ),
    // CVE-2022-35977: SETRANGE, APPEND and SORT's LIMIT overflow.
    (
        "CVE-2022-35977",
        &["SETRANGE", "K", "9223372036854775807", "A"],
    ),
    ("CVE-2022-35977", &["SETRANGE", "K", "2147483647", "A"]),
    ("CVE-2022-35977", &["SETRANGE", "K", "536870911", ""]),
    ("CVE-2022-35977", &["LPUSH", "L", "2", "1", "0"]),
    (
        "CVE-2022-35977",
        &[
            "SORT_RO",
            "L",
            "BY",
            "a",
            "LIMIT",
            "2",
            "9223372036854775807",
        ],
    ),
    (
        "CVE-2022-35977",
        &[
            "SORT",
            "L",
            "LIMIT",
            "-9223372036854775808",
            "9223372036854775807",
        ],
    ),
    (
        "CVE-2022-35977",
        &["SORT", "L", "LIMIT", "9223372036854775807", "-1"],
    ),
    // CVE-2022-36021 and CVE-2024-31228: patterns that take a recursive matcher
    // exponential time or a deep stack.
    (
        "CVE-2022-36021",
        &["SET", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "1"],
    ),
    (
        "CVE-2022-36021",
        &["KEYS", "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"],
    ),
    (
        "CVE-2022-36021",
        &[
            "SCAN",
            "0",
            "MATCH",
            "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
            "COUNT",
            "1000",
        ],
    ),
    // CVE-2023-28425: MSETNX naming a key twice.
    (
        "CVE-2023-28425",
        &["MSETNX", "x1{t}", "xxx", "x1{t}", "yyy"],
    ),
    ("CVE-2023-28425", &["GET", "x1{t}"]),
    (
        "CVE-2023-28425",
        &["MSETNX", "x1{t}", "xxx", "x1{t}", "zzz"],
    ),
    ("CVE-2023-28425", &["GET", "x1{t}"]),
    // CVE-2023-28856: HINCRBYFLOAT by an infinite increment creates nothing.
    ("CVE-2023-28856", &["HINCRBYFLOAT", "hfoo", "field", "+inf"]),
    ("CVE-2023-28856", &["HINCRBYFLOAT", "hfoo", "field", "nan"]),
    ("CVE-2023-28856", &["EXISTS", "hfoo"]),
    ("CVE-2023-28856", &["HSET", "hfoo", "field", "1"]),
    (
        "CVE-2023-28856",
        &["HINCRBYFLOAT", "hfoo", "field", "1e308"],
    ),
    (
        "CVE-2023-28856",
        &["HINCRBYFLOAT", "hfoo", "field", "1e308"],
    ),
    ("CVE-2023-28856", &["HGETALL", "hfoo"]),
    // CVE-2023-41053: SORT_RO's key is a key (for ACL and COMMAND GETKEYS).
    ("CVE-2023-41053", &["COMMAND", "GETKEYS", "SORT_RO", "abc"]),
    ("CVE-2023-41053", &["SET", "secret", "1"]),
    (
        "CVE-2023-41053",
        &[
            "ACL",
            "SETUSER",
            "sorter",
            "on",
            "nopass",
            "~allowed*",
            "+@all",
        ],
    ),
    ("CVE-2023-41053", &["AUTH", "sorter", "x"]),
    ("CVE-2023-41053", &["SORT_RO", "secret"]),
    ("CVE-2023-41053", &["AUTH", "default", "x"]),
    // CVE-2024-31227 and CVE-2024-51741: malformed ACL selectors.
    (
        "CVE-2024-31227",
        &["ACL", "SETUSER", "u1", "on", "nopass", "%~key", "+@all"],
    ),
    (
        "CVE-2024-51741",
        &["ACL", "SETUSER", "u2", "on", "nopass", "%RW", "+@all"],
    ),
    (
        "CVE-2024-51741",
        &["ACL", "SETUSER", "u3", "on", "nopass", "(%RW +@all)"],
    ),
    (
        "CVE-2024-51741",
        &["ACL", "SETUSER", "u4", "on", "nopass", "(%R~ +get)"],
    ),
    ("CVE-2024-51741", &["ACL", "GETUSER", "u2"]),
    ("CVE-2024-51741", &["AUTH", "u2", "x"]),
    ("CVE-2024-51741", &["SET", "x", "5"]),
    ("CVE-2024-51741", &["AUTH", "default", "x"]),
    // CVE-2023-36824: key extraction with counts the arguments do not hold.
    (
        "CVE-2023-36824",
        &[
            "COMMAND",
            "GETKEYS",
            "ZUNIONSTORE",
            "target",
            "3",
            "a",
            "b",
            "c",
        ],
    ),
    (
        "CVE-2023-36824",
        &["COMMAND", "GETKEYS", "ZUNIONSTORE", "target", "5", "a", "b"],
    ),
    ("CVE-2023-36824", &["COMMAND", "GETKEYS", "EVAL", "x", "5"]),
    ("CVE-2023-36824", &["COMMAND", "GETKEYS", "EVAL", "x", "-1"]),
    (
        "CVE-2023-36824",
        &[
            "COMMAND",
            "GETKEYS",
            "LMPOP",
            "9223372036854775807",
            "a",
            "LEFT",
        ],
    ),
    // CVE-2021-32761: bit offsets past 32 bits.
    ("CVE-2021-32761", &["GETBIT", "bits", "4294967296"]),
    (
        "CVE-2021-32761",
        &["BITFIELD", "bits", "GET", "u8", "4294967296"],
    ),
    (
        "CVE-2021-32761",
        &["BITFIELD_RO", "bits", "GET", "i64", "4294967295"],
    ),
    ("CVE-2021-32761", &["SETBIT", "bits", "4294967296", "1"]),
    ("CVE-2021-32761", &["BITPOS", "bits", "1", "4294967296"]),
    // CVE-2021-29478 / CVE-2021-32687: set-max-intset-entries past what an intset holds.
    (
        "CVE-2021-32687",
        &[
            "CONFIG",
            "SET",
            "set-max-intset-entries",
            "9223372036854775807",
        ],
    ),
    ("CVE-2021-32687", &["SADD", "ints", "1", "2", "3"]),
    ("CVE-2021-32687", &["OBJECT", "ENCODING", "ints"]),
    ("CVE-2021-32687", &["COPY", "ints", "ints2"]),
    ("CVE-2021-32687", &["SCARD", "ints2"]),
    (
        "CVE-2021-32687",
        &["CONFIG", "SET", "set-max-intset-entries", "512"],
    ),
    // CVE-2021-29477 / CVE-2021-32625: the LCS table's size, checked against
    // proto-max-bulk-len before anything is allocated (strings made with SETRANGE: a
    // table of 6.4 GB for two 40,000-byte strings is refused at once).
    (
        "CVE-2021-29477",
        &["CONFIG", "SET", "proto-max-bulk-len", "1mb"],
    ),
    ("CVE-2021-29477", &["SETRANGE", "lcs-a", "510", "x"]),
    ("CVE-2021-29477", &["SETRANGE", "lcs-b", "510", "y"]),
    ("CVE-2021-29477", &["SETRANGE", "lcs-c", "511", "y"]),
    // 512 x 512 cells of 4 bytes: exactly 1 MB, allowed.
    ("CVE-2021-29477", &["LCS", "lcs-a", "lcs-b", "LEN"]),
    // 512 x 513: over.
    ("CVE-2021-29477", &["LCS", "lcs-a", "lcs-c", "LEN"]),
    ("CVE-2021-29477", &["LCS", "lcs-c", "lcs-a", "IDX"]),
    (
        "CVE-2021-29477",
        &["CONFIG", "SET", "proto-max-bulk-len", "512mb"],
    ),
    ("CVE-2021-29477", &["SETRANGE", "lcs-big-a", "39999", "x"]),
    ("CVE-2021-29477", &["SETRANGE", "lcs-big-b", "39999", "y"]),
    ("CVE-2021-29477", &["LCS", "lcs-big-a", "lcs-big-b"]),
    // Redis's release of February 2026 (no CVE): a script's error cannot inject a reply.
    (
        "2026-02 reply injection",
        &["EVAL", "return redis.error_reply('x\\r\\n+OK')", "0"],
    ),
    (
        "2026-02 reply injection",
        &["EVAL", "return {err = 'x\\r\\n+OK'}", "0"],
    ),
    (
        "2026-02 reply injection",
        &["EVAL", "error('x\\r\\n+OK')", "0"],
    ),
    // CVE-2025-67733: CR and LF in error and status replies built from a client's bytes.
    (
        "CVE-2025-67733",
        &["EVAL", "error(redis.error_reply('X\r\n+INJECTED'))", "0"],
    ),
    (
        "CVE-2025-67733",
        &["EVAL", "return redis.status_reply('a\r\n+INJECTED')", "0"],
    ),
    (
        "CVE-2025-67733",
        &["EVAL", "return {ok = 'a\r\n+INJECTED\r\n'}", "0"],
    ),
    ("CVE-2025-67733", &["FUNCTION", "LIST", "X\r\n+INJECTED"]),
    ("CVE-2025-67733", &["FUNCTION", "LIST", "LIBRARYNAME"]),
    ("CVE-2025-67733", &["PING"]),
];

/// The reply's bytes, as they came, or what came before the server closed the connection
/// with a marker after it.
fn exchange(stream: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    raw_reply_or_closed(stream, args).unwrap_or_else(|mut before| {
        before.extend_from_slice(b"<closed>");
        before
    })
}

/// Sends every case to both servers; returns the differences.
fn differences(ours: &mut TcpStream, theirs: &mut TcpStream, cases: &[Case]) -> Vec<String> {
    let mut found = Vec::new();
    for (advisory, args) in cases {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mine = exchange(ours, &args);
        let redis = exchange(theirs, &args);
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

/// CVE-2021-32626: a reply nested past Lua's stack (a table that contains itself) ends in
/// Redis's error, not a crash (7,995 arrays deep in Redis, 1,001 here: documented in
/// docs/security.md), and the connection goes on.
#[test]
fn a_reply_nested_past_the_stack_ends_in_an_error() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = raw_connect(server.port);
    let script = "local a = {} local b = {a} a[1] = b return a";
    let reply = exchange(&mut conn, &[b"EVAL", script.as_bytes(), b"0"]);
    assert!(
        reply.ends_with(b"-ERR reached lua stack limit\r\n"),
        "{:?}",
        String::from_utf8_lossy(&reply[reply.len().saturating_sub(100)..])
    );
    let depth = reply.windows(4).filter(|w| w == b"*1\r\n").count();
    assert!((1000..=7995).contains(&depth), "nested {depth} deep");
    assert_eq!(exchange(&mut conn, &[b"PING"]), b"+PONG\r\n");
}

/// A DUMP payload of `body` (an RDB type byte and value) for RDB version 9, with its
/// footer: what an attacker can send RESTORE with a checksum that passes.
fn crafted_payload(body: &[u8]) -> Vec<u8> {
    let mut payload = body.to_vec();
    payload.extend_from_slice(&9u16.to_le_bytes());
    let checksum = tessera::rdb::crc64(&payload);
    payload.extend_from_slice(&checksum.to_le_bytes());
    payload
}

/// A zipmap hash (RDB type 9) holding `blob`.
fn zipmap_payload(blob: &[u8]) -> Vec<u8> {
    let mut body = vec![9, blob.len() as u8];
    body.extend_from_slice(blob);
    crafted_payload(&body)
}

/// CVE-2026-25243 and its stream sibling: RESTORE payloads whose checksums pass but whose
/// structure lies — a zipmap length in an overlong form (Redis read the pairs back
/// misaligned), a consumer owning one entry twice (Redis freed the entry twice) — are
/// refused with Redis's reply, side by side, and both servers go on.
#[test]
fn crafted_restore_payloads_get_redis_replies() {
    let Some(redis_path) = common::require_redis_or_skip(common::WHOLE_TEST) else {
        return;
    };
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let oracle = common::RedisOracle::start(&redis_path);
    let mut ours = raw_connect(server.port);
    let mut theirs = raw_connect(oracle.port);

    // Zipmap "field" → "value": a count, each length, a free byte before the value.
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "zipmap as written",
            zipmap_payload(b"\x01\x05field\x05\x00value\xff"),
        ),
        (
            "zipmap field length 5 in the 5-byte form",
            zipmap_payload(b"\x01\xfe\x05\x00\x00\x00field\x05\x00value\xff"),
        ),
        (
            "zipmap value length 5 in the 5-byte form",
            zipmap_payload(b"\x01\x05field\xfe\x05\x00\x00\x00\x00value\xff"),
        ),
    ];

    // A stream whose entries are deleted, one group, alice owning 1-1 and bob 2-2 (the
    // payload is Tessera's DUMP; Redis writes the same bytes, tests/stream_groups.rs).
    let mut setup = common::raw_client::Conn::new(server.port);
    for line in common::stream_dump::TWO_CONSUMERS {
        setup.cmd(&line.split(' ').collect::<Vec<_>>());
    }
    let common::raw_client::V::Bulk(Some(stream)) = setup.cmd(&["DUMP", "s"]) else {
        panic!("no payload");
    };
    let body = &stream[..stream.len() - 10];
    // After alice's name: her seen time (8 bytes), her count of IDs (1), the ID (16).
    let count_at = body
        .windows(6)
        .position(|w| w == b"\x05alice")
        .expect("alice")
        + 6
        + 8;
    assert_eq!(body[count_at], 1, "alice owns one entry");
    let id = &body[count_at + 1..count_at + 17];
    let mut twice = body[..count_at].to_vec();
    twice.push(2);
    twice.extend_from_slice(id);
    twice.extend_from_slice(id);
    twice.extend_from_slice(&body[count_at + 17..]);
    cases.push(("stream as written", crafted_payload(body)));
    cases.push(("stream consumer owning 1-1 twice", crafted_payload(&twice)));

    let mut found = Vec::new();
    for (name, payload) in &cases {
        let args: [&[u8]; 5] = [b"RESTORE", b"k", b"0", payload, b"REPLACE"];
        let mine = exchange(&mut ours, &args);
        let redis = exchange(&mut theirs, &args);
        if mine != redis {
            found.push(format!(
                "{name}\n  tessera: {:?}\n  redis:   {:?}",
                String::from_utf8_lossy(&mine),
                String::from_utf8_lossy(&redis)
            ));
        }
        let expected: &[u8] = if name.ends_with("as written") {
            b"+OK\r\n"
        } else {
            b"-ERR Bad data format\r\n"
        };
        assert_eq!(mine, expected, "{name}");
        assert_eq!(exchange(&mut ours, &[b"PING"]), b"+PONG\r\n", "{name}");
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert_eq!(exchange(&mut theirs, &[b"PING"]), b"+PONG\r\n");
}

/// CVE-2025-46819: Lua 5.1's lexer keeps a long bracket's level in a C int and doubles it
/// to cut the brackets off, so a string whose brackets carry 2^30 - 1 `=` each comes out
/// 4 GB long, read past the lexer's buffer. Such a chunk is 2 GB; the interpreter's heap
/// is bounded at 1 GB (`LUA_MEMORY_BYTES_MAX`), so a script cannot build it and EVAL's body
/// cannot hold it. With the bound raised to 16 GB, this script returned 4,294,967,297
/// for the length of `[x]`.
#[test]
fn a_long_bracket_past_the_lexer_s_int_cannot_be_built() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut conn = raw_connect(server.port);
    let script = |doublings: u32| {
        format!(
            "local eq = string.rep('=', 1048576) \
             for _ = 1, {doublings} do eq = eq .. eq end \
             eq = eq:sub(2) \
             local chunk = 'return [' .. eq .. '[x]' .. eq .. ']' \
             eq = nil \
             return #assert(loadstring(chunk))()"
        )
    };
    // A level of 2^20 - 1 `=` reads back as it should.
    assert_eq!(
        exchange(&mut conn, &[b"EVAL", script(0).as_bytes(), b"0"]),
        b":1\r\n"
    );
    let past = exchange(&mut conn, &[b"EVAL", script(10).as_bytes(), b"0"]);
    let past = String::from_utf8_lossy(&past);
    assert!(
        past.starts_with("-ERR Error running script") && past.ends_with("not enough memory\r\n"),
        "{past}"
    );
    assert_eq!(exchange(&mut conn, &[b"PING"]), b"+PONG\r\n");
}
