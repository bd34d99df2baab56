//! The random stream of `tests/acl.rs`: ACL SETUSER rules and commands run as several
//! users on both servers, every reply compared.

use super::*;

pub(crate) const USERS: usize = 3;
pub(crate) const KEYS: &[&str] = &["k1", "k2", "ka", "s1", "x", "{t}a"];

pub(crate) const RULES: &[&str] = &[
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
pub(crate) fn random_command(rng: &mut StdRng) -> Vec<String> {
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

pub(crate) struct Stream {
    pub(crate) admin: (Conn, Conn),
    pub(crate) users: Vec<(Conn, Conn)>,
    pub(crate) tessera_port: u16,
    pub(crate) redis_port: u16,
}

impl Stream {
    pub(crate) fn op(&mut self, rng: &mut StdRng, context: &str) {
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
