//! Scripts and commands whose replies must be byte for byte Redis 7.0's (the corpus of
//! `script_corpus_matches_redis`): the sandbox, errors and their `script:` suffixes, the
//! reply conversions both ways, RESP3, the libraries (cjson, cmsgpack, struct, bit) and
//! math.random's sequence. Run in order on fresh servers: some build on earlier ones.

pub const CORPUS: &[&[&str]] = &[
    &[r#"eval"#, r#"x = 5"#, r#"0"#],
    &[r#"eval"#, r#"return y"#, r#"0"#],
    &[r#"eval"#, r#"redis.call = 1"#, r#"0"#],
    &[r#"eval"#, r#"string.x = 1"#, r#"0"#],
    &[r#"eval"#, r#"local t = {} ; t.a = 1 return t.a"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('nosuch')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('get')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('incr', 'k', 'x')"#, r#"0"#],
    &[r#"set"#, r#"s"#, r#"abc"#],
    &[r#"eval"#, r#"return redis.call('incr', 's')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.pcall('incr', 's')"#, r#"0"#],
    &[r#"eval"#, r#"error('boom')"#, r#"0"#],
    &[r#"eval"#, r#"error({err='MY boom'})"#, r#"0"#],
    &[r#"eval"#, r#"return {1,2,nil,3}"#, r#"0"#],
    &[r#"eval"#, r#"return 3.99"#, r#"0"#],
    &[r#"eval"#, r#"return {ok='fine'}"#, r#"0"#],
    &[r#"eval"#, r#"return redis.error_reply('bad')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.error_reply('-X bad')"#, r#"0"#],
    &[r#"eval"#, r#"return true"#, r#"0"#],
    &[r#"eval"#, r#"return false"#, r#"0"#],
    &[r#"eval"#, r#"syntax error here"#, r#"0"#],
    &[r#"eval"#, r#"return loadfile"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('multi')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return redis.REDIS_VERSION .. ' ' .. redis.REDIS_VERSION_NUM"#,
        r#"0"#,
    ],
    &[r#"evalsha"#, r#"1234"#, r#"0"#],
    &[r#"eval_ro"#, r#"return redis.call('set','a','b')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"#!lua flags=no-writes
return redis.call('set','a','b')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"#!lua flags=bad
return 1"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"#!lua name=x
return 1"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"#!luax
return 1"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"error({err=5})"#, r#"0"#],
    &[r#"eval"#, r#"return print"#, r#"0"#],
    &[r#"eval"#, r#"return pcall(redis.call, 'nosuch')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"local ok, e = pcall(redis.call, 'nosuch') return e"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"local ok, e = pcall(error, {err='X y'}) return e"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"local ok, e = pcall(error, 'str') return e"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"rawset(_G, 'x', 1) return x"#, r#"0"#],
    &[r#"eval"#, r#"return getmetatable(string)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.sha1hex()"#, r#"0"#],
    &[r#"eval"#, r#"return redis.status_reply(1)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.error_reply()"#, r#"0"#],
    &[r#"eval"#, r#"return redis.log(1)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.setresp(4)"#, r#"0"#],
    &[r#"eval"#, r#"return {err='x'}"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return {1,{2,{3}},'a',true,false,{ok='st'}}"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return {double=1.5}"#, r#"0"#],
    &[r#"eval"#, r#"redis.setresp(3) return {double=1.5}"#, r#"0"#],
    &[r#"eval"#, r#"return nil"#, r#"0"#],
    &[
        r#"eval"#,
        r#"local t = setmetatable({}, {__index=function() return 1 end}) return t"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return tostring(1e20)"#, r#"0"#],
    &[r#"eval"#, r#"return 1e20"#, r#"0"#],
    &[r#"eval"#, r#"return -0.5"#, r#"0"#],
    &[r#"eval"#, r#"return 0/0"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return {KEYS[1], KEYS[2], ARGV[1], #ARGV}"#,
        r#"2"#,
        r#"k1"#,
        r#"k2"#,
        r#"a1"#,
        r#"a2"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.call('set', KEYS[1], ARGV[1])"#,
        r#"1"#,
        r#"key"#,
        r#"val"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.call('get', KEYS[1])"#,
        r#"1"#,
        r#"key"#,
    ],
    &[r#"eval"#, r#"return redis.call('get', 'nokey')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return redis.call('lrange', 'nokey', 0, -1)"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return redis.call('set', 'n', 1.5)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('get', 'n')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('set', 'n', 0.1)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('get', 'n')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('set', 'n', {})"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call()"#, r#"0"#],
    &[
        r#"eval"#,
        r#"redis.setresp(3) return redis.call('hgetall', 'nokey')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"redis.setresp(3) return redis.call('get', 'nokey')"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return redis.sha1hex('abc')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.sha1hex(12)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.replicate_commands()"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return redis.set_repl(redis.REPL_ALL)"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return redis.set_repl(8)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.set_repl()"#, r#"0"#],
    &[r#"eval"#, r#"return math.random(1000000)"#, r#"0"#],
    &[r#"eval"#, r#"return math.random(0)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('select', 3)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('blpop', 'x', 0)"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return redis.call('blmpop', 0, 1, 'x', 'left')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.call('config', 'get', 'x')"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return redis.call('client', 'id')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('ping')"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('type', 'key')"#, r#"0"#],
    &[r#"eval"#, r#"return table.concat({1,2,3}, ',')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return string.format('%5.2f', 3.14159)"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return coroutine.wrap(function() coroutine.yield(5) end)()"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return _G == _G"#, r#"0"#],
    &[r#"eval"#, r#"return type(_G)"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return redis.call('lpush', 'l', 1, 2, 3)"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.call('lrange', 'l', 0, -1)"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.call('hset', 'h', 'a', 1)"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.call('zadd', 'z', 1.5, 'a')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.call('zscore', 'z', 'a')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"redis.setresp(3) return redis.call('zscore', 'z', 'a')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"redis.setresp(3) return redis.call('hgetall', 'h')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"redis.setresp(3) return redis.call('smembers', 'nokey')"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return redis.call('hgetall', 'h')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"local function f() error('inner') end f()"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"local t = nil; return t.x"#, r#"0"#],
    &[r#"eval"#, r#"return #KEYS"#, r#"0"#],
    &[r#"eval"#, r#"return string.rep('x', -1)"#, r#"0"#],
    &[r#"eval"#, r#"return tonumber('0x10')"#, r#"0"#],
    &[r#"eval"#, r#"return unpack({1,2,3})"#, r#"0"#],
    &[r#"eval"#, r#"return select('#', 1, 2)"#, r#"0"#],
    &[r#"eval"#, r#"return loadstring('return 1')()"#, r#"0"#],
    &[r#"eval"#, r#"return newproxy ~= nil"#, r#"0"#],
    &[r#"eval"#, r#"return gcinfo() > 0"#, r#"0"#],
    &[r#"eval"#, r#"return math.huge"#, r#"0"#],
    &[r#"eval"#, r#"return -math.huge"#, r#"0"#],
    &[r#"eval"#, r#"return setfenv ~= nil"#, r#"0"#],
    &[r#"eval"#, r#"return string.format('%d', 3)"#, r#"0"#],
    &[r#"eval"#, r#"return redis.breakpoint()"#, r#"0"#],
    &[r#"eval"#, r#"return type(redis.debug)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.band(0xff, 0x0f)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.tohex(65535)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.tohex(-1, -4)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.bnot(0)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.lshift(1, 40)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.tobit(2^32 + 5)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.band()"#, r#"0"#],
    &[r#"eval"#, r#"return bit.band('x')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return cjson.encode({1,2,{a='x/y'}, 1.5, 0.1})"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return cjson.encode({})"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode({a=1})"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return cjson.encode('a"b\\c
\1')"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return cjson.encode(1/3)"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode(1e300)"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode(0/0)"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode({[1]=1,[20]=2})"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode({[1]=1,[3]=2})"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode(function() end)"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode({[true]=1})"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode(cjson.null)"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode()"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.encode({1, nil, 3})"#, r#"0"#],
    &[
        r#"eval"#,
        r#"local t = {} t[1] = t return cjson.encode(t)"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return cjson.decode('[1,2,3]')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return cjson.decode('{"a":[1,{"b":2}]}').a[2].b"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return cjson.decode('"\\u00e9\\ud83d\\ude00"')"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return cjson.decode('[1,2')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('{1:2}')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('nul')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('[1] x')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('0x10')"#, r#"0"#],
    &[r#"eval"#, r#"return tostring(cjson.decode('inf'))"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return cjson.decode('null') == cjson.null"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return cjson.decode('"abc')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('"a\\qb"')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('{"a":1,}')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('1.5e3')"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.decode('-0.5')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return cjson.decode(string.rep('[', 1001))"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return cjson.encode_number_precision()"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return cjson.decode('[true,false,null]')[1]"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return cmsgpack.pack(1, -1, 200, -200, 70000, 1.5, 0.1, 'abc', true, false, {1,2,3}, {a=1})"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return cmsgpack.pack(string.rep('x', 40))"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return cmsgpack.pack(2^40, -2^40, 2^63)"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return {cmsgpack.unpack(cmsgpack.pack(1, 'two', {3, 4}, {x=5}))}"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return cmsgpack.unpack(cmsgpack.pack({1,2,3}))[3]"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return cmsgpack.unpack('\xc1')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return cmsgpack.unpack('\xdc\x00\x05')"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3))}"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return {cmsgpack.unpack_one(cmsgpack.pack(1, 2, 3), 1)}"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return {cmsgpack.unpack_one(cmsgpack.pack(1), -1)}"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return cmsgpack.pack()"#, r#"0"#],
    // As many arguments to redis.call as Lua's stack holds (Redis's own scripting unit).
    &[
        r#"eval"#,
        r#"local a = {} for i = 1, 7999 do a[i] = 1 end
           return {redis.call('lpush', 'massive', unpack(a)), redis.pcall('del', 'massive')}"#,
        r#"0"#,
    ],
    // Maps and arrays of 100,000 entries, as Redis's own smoke test packs them (the pack
    // held every pair at once and overflowed Lua's stack).
    &[
        r#"eval"#,
        r#"local m, a = {}, {} for i = 1, 100000 do m[tostring(i)] = i a[i] = i end
           local e = cmsgpack.pack({m = m, a = a}) local d = cmsgpack.unpack(e)
           local n = 0 for _ in pairs(d.m) do n = n + 1 end
           local j = cjson.encode(m) local c = 0 for _ in pairs(cjson.decode(j)) do c = c + 1 end
           return {#e, n, #d.a, d.m['77777'], #j, c}"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"local t = {} t[1] = t return cmsgpack.pack(t)"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return struct.pack('>I2', 258)"#, r#"0"#],
    &[r#"eval"#, r#"return struct.pack('<i4', -2)"#, r#"0"#],
    &[r#"eval"#, r#"return {struct.unpack('>I2', 'ab')}"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return {struct.unpack('<i4 s c3', struct.pack('<i4 s c3', -7, 'hi', 'xyz'))}"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return struct.size('!4 b i d')"#, r#"0"#],
    &[r#"eval"#, r#"return struct.pack('!4 b i', 1, 2)"#, r#"0"#],
    &[r#"eval"#, r#"return struct.pack('z', 1)"#, r#"0"#],
    &[r#"eval"#, r#"return struct.pack('c5', 'ab')"#, r#"0"#],
    &[r#"eval"#, r#"return struct.unpack('>I4', 'ab')"#, r#"0"#],
    &[r#"eval"#, r#"return struct.size('s')"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return {struct.unpack('b c0', struct.pack('b c0', 3, 'xyz'))}"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return struct.pack('d f', 1.5, 2.5)"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return {struct.unpack('>d >f', struct.pack('>d >f', 1.5, 2.5))}"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return struct.unpack('b', 'a', 0)"#, r#"0"#],
    &[r#"eval"#, r#"return struct.pack('i33', 1)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.rol(1, 33)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.arshift(-256, 4)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.bswap(0x12345678)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.tohex(0x1234, 2)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.bxor(1, 3, 7)"#, r#"0"#],
    &[r#"eval"#, r#"return bit.tobit('0x10')"#, r#"0"#],
    &[r#"eval"#, r#"return math.random()"#, r#"0"#],
    &[r#"eval"#, r#"return math.random(5, 3)"#, r#"0"#],
    &[r#"eval"#, r#"return math.randomseed('x')"#, r#"0"#],
    &[r#"eval"#, r#"return tostring(math.random(10, 20))"#, r#"0"#],
    &[r#"eval"#, r#"cjson.x = 1"#, r#"0"#],
    &[r#"eval"#, r#"return cjson.x"#, r#"0"#],
    &[
        r#"eval"#,
        r#"for k, v in pairs(redis) do end return 1"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"local n = 0 for k in pairs(_G) do n = n + 1 end return n > 10"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return rawget(_G, 'redis') ~= nil"#, r#"0"#],
    &[
        r#"eval"#,
        r#"return {redis.call('ping'), redis.pcall('nosuchcmd')}"#,
        r#"0"#,
    ],
    &[
        r#"eval"#,
        r#"return redis.status_reply('A\r
B')"#,
        r#"0"#,
    ],
    &[r#"eval"#, r#"return {err='-CODE x'}"#, r#"0"#],
    &[r#"eval"#, r#"return redis.call('echo', '\0bin')"#, r#"0"#],
    // Functions (FUNCTION LIST only where the order is defined: Redis lists from a hash
    // table).
    &[r#"function"#, r#"flush"#],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=mylib
redis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)
redis.register_function{function_name='f2', callback=function(keys, args) return #keys end, flags={'no-writes'}, description='desc'}"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=mylib
return 1"#,
    ],
    &[r#"function"#, r#"load"#, r#"return 1"#],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=x
return 1"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=x
redis.register_function('f1', function() return 1 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=y
redis.call('set','a','b')"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=y
redis.register_function('bad-name', function() return 1 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=y flags=x
redis.register_function('g', function() return 1 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=bad-lib
redis.register_function('g', function() return 1 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
redis.register_function('g', function() return 1 end)
redis.register_function('g', function() return 1 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
redis.register_function('g')"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
redis.register_function({function_name='g'})"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
redis.register_function({function_name='g', callback=function() end, flags={'bogus'}})"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
redis.register_function({function_name='g', callback=function() end, other=1})"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
return string.len('x')"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
local x = (
"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
redis.log(redis.LOG_NOTICE, 'hi') redis.register_function('g', function() return redis.REDIS_VERSION end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=z
redis.register_function('g2', function() return 2 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"replace"#,
        r#"#!lua name=z
redis.register_function('g2', function() return 2 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"replace"#,
        r#"#!lua name=z
redis.register_function('f1', function() return 2 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"bogus"#,
        r#"#!lua name=z
redis.register_function('g2', function() return 2 end)"#,
    ],
    &[r#"function"#, r#"load"#, r#"replace"#],
    &[r#"fcall"#, r#"f1"#, r#"1"#, r#"k"#, r#"v"#],
    &[r#"fcall"#, r#"f2"#, r#"2"#, r#"a"#, r#"b"#],
    &[r#"fcall_ro"#, r#"f1"#, r#"1"#, r#"k"#, r#"v"#],
    &[r#"fcall_ro"#, r#"f2"#, r#"0"#],
    &[r#"fcall"#, r#"nosuch"#, r#"0"#],
    &[r#"fcall"#, r#"f1"#, r#"5"#, r#"k"#],
    &[r#"fcall"#, r#"f1"#, r#"x"#, r#"k"#],
    &[r#"fcall"#, r#"f1"#, r#"-1"#, r#"k"#],
    &[r#"fcall"#, r#"g2"#, r#"0"#],
    &[r#"fcall"#, r#"g"#, r#"0"#],
    // Functions are found, and clash between libraries, ignoring case.
    &[r#"fcall"#, r#"G2"#, r#"0"#],
    &[r#"fcall_ro"#, r#"F2"#, r#"0"#],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=other_case
redis.register_function('F1', function() return 3 end)"#,
    ],
    &[
        r#"function"#,
        r#"load"#,
        r#"#!lua name=e
redis.register_function('err1', function(keys, args) error('boom') end)
redis.register_function('err2', function(keys, args) return redis.call('incr', 'k') end)
redis.register_function('err3', function(keys, args) return KEYS end)
redis.register_function('err4', function(keys, args) return {keys[1], args[1], #args} end)"#,
    ],
    &[r#"fcall"#, r#"err1"#, r#"0"#],
    &[r#"fcall"#, r#"err2"#, r#"0"#],
    &[r#"fcall"#, r#"err3"#, r#"0"#],
    &[r#"fcall"#, r#"err4"#, r#"1"#, r#"kk"#, r#"aa"#, r#"bb"#],
    &[r#"function"#, r#"list"#, r#"libraryname"#, r#"nomatch*"#],
    &[
        r#"function"#,
        r#"list"#,
        r#"withcode"#,
        r#"libraryname"#,
        r#"y"#,
    ],
    &[r#"function"#, r#"list"#, r#"libraryname"#],
    // Each option once; too many arguments; an engine named '' by `#! name=`.
    &[r#"function"#, r#"list"#, r#"withcode"#, r#"withcode"#],
    &[
        r#"function"#,
        r#"list"#,
        r#"withcode"#,
        r#"libraryname"#,
        r#"foo"#,
        r#"libraryname"#,
        r#"foo"#,
    ],
    &[
        r#"function"#,
        r#"restore"#,
        r#"arg1"#,
        r#"args2"#,
        r#"arg3"#,
    ],
    &[r#"function"#, r#"flush"#, r#"sync"#, r#"extra_arg"#],
    &[
        r#"function"#,
        r#"load"#,
        r#"#! name=test
redis.register_function('foo', function() return 1 end)"#,
    ],
    &[r#"function"#, r#"list"#, r#"bogus"#],
    &[r#"function"#, r#"stats"#],
    &[r#"function"#, r#"delete"#, r#"nosuch"#],
    &[r#"function"#, r#"delete"#, r#"e"#],
    &[r#"function"#, r#"kill"#],
    &[r#"function"#, r#"bogus"#],
    &[r#"function"#, r#"delete"#],
    &[r#"fcall"#, r#"err1"#, r#"0"#],
    &[r#"function"#, r#"flush"#],
    &[r#"function"#, r#"dump"#],
    &[r#"function"#, r#"restore"#, r#"abc"#],
    &[r#"function"#, r#"restore"#, r#"abc"#, r#"bogus"#],
    &[r#"function"#, r#"restore"#],
    &[r#"function"#, r#"dump"#, r#"x"#],
];
