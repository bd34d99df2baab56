//! Scripts in the differential stream: EVAL / EVALSHA / EVAL_RO of a small corpus over
//! the stream's keys and values (reads, writes, errors, pcall, RESP3 conversions, cjson,
//! math.random — whose sequence both servers continue identically), SCRIPT LOAD /
//! EXISTS, and FCALL / FCALL_RO of a library loaded (again) just before. Only replies whose order is defined: no SMEMBERS or whole hashes (a set of
//! strings is a hash table in Redis 7.0, in no particular order).

use super::{Check, Gen, Step};
use rand::RngExt;

const SCRIPTS: &[&str] = &[
    "return redis.call('get', KEYS[1])",
    "return redis.call('set', KEYS[1], ARGV[1])",
    "return redis.call('incr', KEYS[1])",
    "return redis.pcall('incr', KEYS[1])",
    "return redis.call('incrbyfloat', KEYS[1], ARGV[1])",
    "return redis.pcall('append', KEYS[1], ARGV[1])",
    "redis.call('del', KEYS[1]) return redis.call('rpush', KEYS[1], ARGV[1], ARGV[1])",
    "return redis.call('lrange', KEYS[1], 0, -1)",
    "return {redis.call('type', KEYS[1]), redis.call('exists', KEYS[1], KEYS[2])}",
    "return redis.pcall('hset', KEYS[1], ARGV[1], ARGV[2])",
    "return redis.pcall('hlen', KEYS[1])",
    "return redis.pcall('scard', KEYS[1])",
    "return redis.pcall('zadd', KEYS[1], ARGV[1], 'm')",
    "return redis.pcall('zrange', KEYS[1], 0, -1, 'withscores')",
    "redis.setresp(3) return redis.pcall('zrange', KEYS[1], 0, -1, 'withscores')",
    "redis.setresp(3) return redis.pcall('zscore', KEYS[1], 'm')",
    "redis.setresp(3) return {redis.call('get', KEYS[1]), redis.call('exists', KEYS[1])}",
    "return tonumber(ARGV[1])",
    "return cjson.encode({KEYS[1], ARGV[1], tonumber(ARGV[2])})",
    "return cjson.decode(ARGV[1])",
    "return math.random(1000)",
    "local t = {} for i = 1, #ARGV do t[i] = redis.call('getset', KEYS[1], ARGV[i]) end return t",
    "return redis.call('nosuchcommand')",
    "error(ARGV[1])",
    "return redis.error_reply(ARGV[1])",
    "return {ok = ARGV[1]}",
    "return redis.call('del', unpack(KEYS))",
    "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'x')",
    "#!lua flags=no-writes\nreturn redis.pcall('strlen', KEYS[1])",
];

/// The functions FCALL runs: reads, writes, a `no-writes` one, errors raised by a
/// command and by the function itself.
const LIBRARY: &str = "#!lua name=difflib
redis.register_function('get', function(keys, args) return redis.call('get', keys[1]) end)
redis.register_function('incr', function(keys, args) return redis.call('incr', keys[1]) end)
redis.register_function('push', function(keys, args)
  return redis.call('rpush', keys[1], unpack(args))
end)
redis.register_function{function_name = 'strlen', flags = {'no-writes'},
  callback = function(keys, args) return redis.pcall('strlen', keys[1]) end}
redis.register_function('fail', function(keys, args) return error(args[1]) end)
";

const FUNCTIONS: &[&str] = &["get", "incr", "push", "strlen", "fail", "missing"];

impl Gen {
    pub(super) fn scripting_step(&mut self) -> Vec<Step> {
        let exact = |args: Vec<Vec<u8>>| Step {
            args,
            check: Check::Exact,
        };
        let script = self.pick(SCRIPTS).as_bytes().to_vec();
        let keys = self.keys(1, 3);
        let mut args = vec![
            self.word("eval"),
            script.clone(),
            self.num(keys.len() as i64),
        ];
        args.extend(keys);
        for _ in 0..self.rng.random_range(0..3) {
            args.push(self.text_value());
        }
        match self.rng.random_range(0..10) {
            0 => {
                // Loaded first, then run by its SHA1 (also in another letter case).
                let mut steps = vec![exact(vec![self.word("script"), self.word("load"), script])];
                let sha = sha1_hex(&args[1]);
                let sha = if self.chance(0.2) {
                    sha.to_uppercase()
                } else {
                    sha
                };
                args[0] = self.word("evalsha");
                args[1] = sha.clone().into_bytes();
                steps.push(exact(args));
                steps.push(exact(vec![
                    self.word("script"),
                    self.word("exists"),
                    sha.into_bytes(),
                    b"0000000000000000000000000000000000000000".to_vec(),
                ]));
                steps
            }
            1 => {
                args[0] = self.word("eval_ro");
                vec![exact(args)]
            }
            3 => {
                let mut steps = vec![exact(vec![
                    self.word("function"),
                    self.word("load"),
                    self.word("replace"),
                    LIBRARY.as_bytes().to_vec(),
                ])];
                let command = self.pick(&["fcall", "fcall", "fcall_ro"]);
                args[0] = self.word(command);
                args[1] = self.pick(FUNCTIONS).as_bytes().to_vec();
                steps.push(exact(args));
                steps
            }
            2 => {
                // A key count that is not right.
                args[2] = self.pick(&["-1", "99", "x"]).as_bytes().to_vec();
                vec![exact(args)]
            }
            _ => vec![exact(args)],
        }
    }
}

/// The script's name, as the servers compute it.
fn sha1_hex(body: &[u8]) -> String {
    tessera::scripting::sha1_hex(body)
        .iter()
        .map(|&b| b as char)
        .collect()
}
