//! CONFIG REWRITE and the whole CONFIG GET table against a real redis-server 7.0: the same
//! config file (comments, blank lines, aliases, repeated `save` lines), changed by the
//! same CONFIG SETs and rewritten by both servers, comes out the same (Redis appends in
//! an order of its own, so the generated section is compared as a set); a rewritten file
//! starts Tessera again with the same CONFIG GET *; CONFIG GET * lists Redis's names
//! (and Tessera's own directives), with Redis's defaults for those Tessera does not act
//! on; CONFIG SET checks values as Redis does; the errors of CONFIG REWRITE are Redis's.

mod common;

use common::raw_client::{Conn, V};
use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Directives Tessera has and Redis 7.0 does not.
const TESSERA_ONLY: &[&str] = &[
    "aof-rewrite-threads",
    "aof-rewrite-max-rate",
    "aof-rewrite-adaptive-rate",
];

/// The config file both servers start with; `{PORT}` and `{DIR}` are each server's.
const TEMPLATE: &str = "\
# A config file as an operator keeps it.
   # An indented comment, a blank line, then the basics.

port {PORT}
dir {DIR}
bind 127.0.0.1
appendonly no

# Snapshots: three points, of which CONFIG SET keeps one.
save 900 1
save 300 10
save 60 10000

# Memory
maxmemory 100mb
maxmemory-policy noeviction
hash-max-ziplist-value 64


# Replication and other directives under their old names.
slave-read-only no
slave-priority 90
timeout 0
hz 20
notify-keyspace-events \"\"
client-output-buffer-limit pubsub 32mb 8mb 60
tcp-keepalive 300
maxmemory-clients 0
";

/// The CONFIG SETs applied to both servers before the rewrite.
const CHANGES: &[&[&str]] = &[
    &["maxmemory", "200mb"],
    &["maxmemory-policy", "allkeys-lru"],
    &["hz", "15"],
    &["save", "3600 1"],
    &[
        "client-output-buffer-limit",
        "normal 1mb 512kb 10 pubsub 64mb 16mb 90",
    ],
    &["notify-keyspace-events", "KEA"],
    &["timeout", "30"],
    &["tcp-keepalive", "60"],
    &["slave-priority", "50"],
    &["lua-time-limit", "6000"],
    &["maxmemory-clients", "10%"],
    &["activerehashing", "no"],
    &["hash-max-listpack-value", "1024"],
    &["list-max-ziplist-size", "-3"],
    &["latency-tracking-info-percentiles", "50 99.99"],
    &["dynamic-hz", "no"],
    &["lazyfree-lazy-user-del", "yes"],
    &["proc-title-template", "{title} {port}"],
    &["oom-score-adj-values", "0 300 900"],
    &["shutdown-on-sigterm", "nosave now"],
    &["repl-backlog-size", "3mb"],
    &["slowlog-max-len", "256"],
    &["acllog-max-len", "64"],
    &["ignore-warnings", "ARM64-COW-BUG"],
];

fn redis_binary() -> Option<PathBuf> {
    require_redis_or_skip(WHOLE_TEST)
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A server of either kind, started from a config file in its own directory.
struct Started {
    conn: Conn,
    config_file: PathBuf,
    port: u16,
    dir: tempfile::TempDir,
    _tessera: Option<TestServer>,
    _redis: Option<RedisOracle>,
}

/// Writes the template for a server on `port` in a fresh directory.
fn write_config(port: u16) -> (tempfile::TempDir, PathBuf) {
    let dir = temp_dir();
    let data = std::fs::canonicalize(dir.path()).unwrap();
    let text = TEMPLATE
        .replace("{PORT}", &port.to_string())
        .replace("{DIR}", &data.display().to_string());
    // In a directory of its own, which a test may remove without touching the data.
    let config_file = data.join("conf").join("server.conf");
    std::fs::create_dir(data.join("conf")).unwrap();
    std::fs::write(&config_file, text).unwrap();
    (dir, config_file)
}

fn start_tessera_from(dir: tempfile::TempDir, config_file: PathBuf) -> Started {
    let server = try_start_server_from_file(&config_file, dir.path())
        .unwrap_or_else(|log| panic!("tessera-server did not start:\n{log}"));
    Started {
        conn: Conn::new(server.port),
        config_file,
        port: server.port,
        dir,
        _tessera: Some(server),
        _redis: None,
    }
}

fn start_tessera() -> Started {
    let port = free_port();
    let (dir, config_file) = write_config(port);
    start_tessera_from(dir, config_file)
}

fn start_redis(binary: &Path) -> Started {
    let port = free_port();
    let (dir, config_file) = write_config(port);
    let redis = RedisOracle::start_from_file(binary, &config_file, port);
    Started {
        conn: Conn::new(port),
        config_file,
        port,
        dir,
        _tessera: None,
        _redis: Some(redis),
    }
}

fn set(conn: &mut Conn, name: &str, value: &str) -> V {
    conn.cmd(&["CONFIG", "SET", name, value])
}

/// CONFIG GET's reply as name → value.
fn config_get(conn: &mut Conn, pattern: &str) -> BTreeMap<String, String> {
    let items = conn.cmd(&["CONFIG", "GET", pattern]).items();
    items
        .chunks(2)
        .map(|pair| (pair[0].text(), pair[1].text()))
        .collect()
}

/// A rewritten file with the server's own port and directory put back as the template
/// has them: the lines before the generated section in order, and the generated lines
/// sorted (Redis appends them in the order of its hash table, which varies).
fn normalised(server: &Started) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(&server.config_file).unwrap();
    let data = std::fs::canonicalize(server.dir.path()).unwrap();
    let text = text.replace(&data.display().to_string(), "{DIR}");
    let mut kept = Vec::new();
    let mut generated = Vec::new();
    let mut in_generated = false;
    for line in text.lines() {
        let line = if line == format!("port {}", server.port) {
            "port {PORT}".to_string()
        } else {
            line.to_string()
        };
        if TESSERA_ONLY
            .iter()
            .any(|d| line.starts_with(&format!("{d} ")))
        {
            continue;
        }
        if line == "# Generated by CONFIG REWRITE" {
            in_generated = true;
        }
        if in_generated {
            generated.push(line);
        } else {
            kept.push(line);
        }
    }
    generated.sort();
    (kept, generated)
}

/// Both servers from the template, the same CONFIG SETs (and an ACL user) applied.
fn both_changed(binary: &Path) -> (Started, Started) {
    let mut ours = start_tessera();
    let mut theirs = start_redis(binary);
    for change in CHANGES {
        let (name, value) = (change[0], change[1]);
        let reply = set(&mut ours.conn, name, value);
        assert_eq!(
            reply,
            set(&mut theirs.conn, name, value),
            "CONFIG SET {name}"
        );
        assert_eq!(reply, V::Simple("OK".into()), "CONFIG SET {name} {value}");
    }
    for server in [&mut ours, &mut theirs] {
        let reply = server
            .conn
            .cmd(&["ACL", "SETUSER", "alice", "on", ">secret", "~app:*", "+get"]);
        assert_eq!(reply, V::Simple("OK".into()));
    }
    (ours, theirs)
}

#[test]
fn the_same_file_and_changes_rewrite_to_the_same_file() {
    let Some(binary) = redis_binary() else { return };
    let (mut ours, mut theirs) = both_changed(&binary);
    for server in [&mut ours, &mut theirs] {
        assert_eq!(
            server.conn.cmd(&["CONFIG", "REWRITE"]),
            V::Simple("OK".into())
        );
    }
    let (our_kept, our_generated) = normalised(&ours);
    let (their_kept, their_generated) = normalised(&theirs);
    assert_eq!(our_kept, their_kept, "the lines kept from the old file");
    assert_eq!(our_generated, their_generated, "the generated section");
    // What the comparison covers, so that it cannot pass on two empty files.
    for line in [
        "   # An indented comment, a blank line, then the basics.",
        "maxmemory 200mb",
        "replica-read-only no",
        "replica-priority 50",
        "save 3600 1",
        "hash-max-listpack-value 1kb",
        "notify-keyspace-events \"AKE\"",
        "client-output-buffer-limit normal 1mb 512kb 10",
    ] {
        let line = line.trim();
        assert!(
            our_kept.iter().chain(&our_generated).any(|l| l == line),
            "{line} missing:\n{our_kept:#?}\n{our_generated:#?}"
        );
    }
    assert!(
        our_generated.contains(&"maxmemory-clients 10%".to_string())
            || our_kept.contains(&"maxmemory-clients 10%".to_string())
    );
    assert!(
        our_generated
            .iter()
            .any(|l| l.starts_with("user alice on #"))
    );

    // A second rewrite, nothing changed: the same again on both (not always the file as
    // it was: a class of client-output-buffer-limit at its default takes a line left
    // over from another class, and the class that had it is appended anew).
    for server in [&mut ours, &mut theirs] {
        assert_eq!(
            server.conn.cmd(&["CONFIG", "REWRITE"]),
            V::Simple("OK".into())
        );
    }
    assert_eq!(normalised(&ours), normalised(&theirs), "a second rewrite");
}

/// Stops a server and starts it again on its (rewritten) config file.
fn restart(server: Started, binary: &Path) -> Started {
    let Started {
        dir,
        config_file,
        port,
        _tessera,
        _redis,
        ..
    } = server;
    let tessera = _tessera.is_some();
    drop(_tessera);
    drop(_redis);
    if tessera {
        return start_tessera_from(dir, config_file);
    }
    let redis = RedisOracle::start_from_file(binary, &config_file, port);
    Started {
        conn: Conn::new(port),
        config_file,
        port,
        dir,
        _tessera: None,
        _redis: Some(redis),
    }
}

/// The redis.conf Debian's redis-server package installs beside the binary's package:
/// every directive of Redis 7.0 documented, most commented out.
const PACKAGED_REDIS_CONF: &str = "/etc/redis/redis.conf";

#[test]
fn the_packaged_redis_conf_rewrites_as_redis_does() {
    let Some(binary) = redis_binary() else { return };
    let Ok(packaged) = std::fs::read_to_string(PACKAGED_REDIS_CONF) else {
        skip(
            Capability::Redis,
            WHOLE_TEST,
            &format!("{PACKAGED_REDIS_CONF} (installed with redis-server) is missing"),
        );
        return;
    };
    // Each server in the foreground, in a directory of its own, logging to its output.
    let adapt = |port: u16, dir: &Path| -> String {
        packaged
            .lines()
            .map(|line| match line.split(' ').next().unwrap_or("") {
                "daemonize" => "daemonize no".to_string(),
                "logfile" => "logfile \"\"".to_string(),
                "pidfile" => "# pidfile".to_string(),
                "port" => format!("port {port}"),
                "dir" => format!("dir {}", dir.display()),
                _ => line.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    };
    let mut servers = Vec::new();
    for tessera in [true, false] {
        let port = free_port();
        let dir = temp_dir();
        let data = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(data.join("conf")).unwrap();
        let config_file = data.join("conf").join("redis.conf");
        std::fs::write(&config_file, adapt(port, &data)).unwrap();
        servers.push(if tessera {
            start_tessera_from(dir, config_file)
        } else {
            let redis = RedisOracle::start_from_file(&binary, &config_file, port);
            Started {
                conn: Conn::new(port),
                config_file,
                port,
                dir,
                _tessera: None,
                _redis: Some(redis),
            }
        });
    }
    for server in &mut servers {
        for change in [
            ["maxmemory", "1gb"],
            ["slowlog-max-len", "1024"],
            ["replica-read-only", "no"],
            ["save", ""],
        ] {
            assert_eq!(
                set(&mut server.conn, change[0], change[1]),
                V::Simple("OK".into())
            );
        }
        assert_eq!(
            server.conn.cmd(&["CONFIG", "REWRITE"]),
            V::Simple("OK".into())
        );
    }
    let (our_kept, our_generated) = normalised(&servers[0]);
    let (their_kept, their_generated) = normalised(&servers[1]);
    assert_eq!(our_kept, their_kept);
    assert_eq!(our_generated, their_generated);
    assert!(our_kept.len() > 1000, "{}", our_kept.len());
    for line in ["replica-read-only no", "slowlog-max-len 1024"] {
        assert!(our_kept.iter().any(|l| l == line), "{line}");
    }
    // Its `save` lines are commented out: `save ""` is appended.
    for line in ["save \"\"", "maxmemory 1gb"] {
        assert!(our_generated.iter().any(|l| l == line), "{line}");
    }
}

#[test]
fn a_rewritten_file_starts_tessera_with_the_same_configuration() {
    let Some(binary) = redis_binary() else { return };
    let (mut ours, mut theirs) = both_changed(&binary);
    for server in [&mut ours, &mut theirs] {
        assert_eq!(
            server.conn.cmd(&["CONFIG", "REWRITE"]),
            V::Simple("OK".into())
        );
    }
    let before = config_get(&mut ours.conn, "*");
    assert_eq!(before["maxmemory"], "209715200");
    let mut ours = restart(ours, &binary);
    let mut theirs = restart(theirs, &binary);
    assert_eq!(config_get(&mut ours.conn, "*"), before);
    // The users come back from the `user` lines as Redis's do (loading a `user default`
    // line turns sanitize-payload on, in Redis too).
    let users = ours.conn.cmd(&["ACL", "LIST"]);
    assert_eq!(users, theirs.conn.cmd(&["ACL", "LIST"]));
    assert_eq!(users.items().len(), 2, "{users:?}");
}

#[test]
fn config_get_lists_redis_s_names_and_defaults() {
    let Some(binary) = redis_binary() else { return };
    let redis = RedisOracle::start(&binary);
    let dir = temp_dir();
    // As the oracle runs: no save points, the log off, one address.
    let server = start_server(
        dir.path(),
        &["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"],
    );
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let our_all = config_get(&mut ours, "*");
    let their_all = config_get(&mut theirs, "*");
    let mut our_names: Vec<&String> = our_all
        .keys()
        .filter(|name| !TESSERA_ONLY.contains(&name.as_str()))
        .collect();
    let mut their_names: Vec<&String> = their_all.keys().collect();
    our_names.sort();
    their_names.sort();
    assert_eq!(our_names, their_names);
    assert!(their_names.len() > 150, "{}", their_names.len());
    // The values too, but for what differs by design or by place.
    for (name, value) in &their_all {
        if ["port", "dir"].contains(&name.as_str()) {
            continue;
        }
        assert_eq!(&our_all[name], value, "CONFIG GET {name}");
    }
    // Exact names (hidden testing aids included), aliases, names in capitals.
    for pattern in [
        "key-load-delay",
        "rdb-key-save-delay",
        "watchdog-period",
        "use-exit-on-panic",
        "loading-process-events-interval-bytes",
        "slaveof",
        "slave*",
        "SLAVE-READ-ONLY",
        "*ziplist*",
        "lua-time-limit",
    ] {
        assert_eq!(
            config_get(&mut ours, pattern),
            config_get(&mut theirs, pattern),
            "CONFIG GET {pattern}"
        );
    }
}

/// Directives whose CONFIG SET is left out of the comparison: they change what the test
/// relies on (the address, the password, the connection limit) or differ by design
/// (docs/compatibility.md: Tessera's listeners, logging and directory are set up once;
/// `appendonly` starts or stops the log, `tests/log_switch.rs`; a string's limit is 4 GB).
const NOT_PROBED: &[&str] = &[
    "proto-max-bulk-len",
    "port",
    "bind",
    "requirepass",
    "maxclients",
    "appendonly",
    "loglevel",
    "dir",
];

#[test]
fn config_set_checks_values_as_redis_does() {
    let Some(binary) = redis_binary() else { return };
    let redis = RedisOracle::start(&binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &["--appendonly", "no"]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let names: Vec<String> = config_get(&mut theirs, "*").into_keys().collect();
    let probes = [
        "yes",
        "no",
        "0",
        "1",
        "-1",
        "07",
        "+5",
        "abc",
        "1kb",
        "5gb",
        "10%",
        "101%",
        "",
        "777",
        "0 0 0",
        "save nosave",
        "now save",
        "{title}",
        "a b",
        "65536",
        "host 6380",
        "no one",
        "-2000 0 2001",
        "allkeys-lru",
        "local3",
        "KEA",
        "100 1",
    ];
    let mut differences = Vec::new();
    for name in names.iter().filter(|n| !NOT_PROBED.contains(&n.as_str())) {
        let original = config_get(&mut theirs, name)[name].clone();
        for probe in probes {
            let our_reply = set(&mut ours, name, probe);
            let their_reply = set(&mut theirs, name, probe);
            if our_reply != their_reply {
                differences.push(format!(
                    "CONFIG SET {name} {probe:?}\n  tessera: {our_reply:?}\n  redis:   {their_reply:?}"
                ));
            } else if our_reply == V::Simple("OK".into()) {
                let ours_now = config_get(&mut ours, name);
                let theirs_now = config_get(&mut theirs, name);
                if ours_now != theirs_now {
                    differences.push(format!(
                        "after CONFIG SET {name} {probe:?}\n  tessera: {ours_now:?}\n  redis:   {theirs_now:?}"
                    ));
                }
            }
            set(&mut ours, name, &original);
            set(&mut theirs, name, &original);
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// Tessera's strings stop at 4 GB - 1: a larger `proto-max-bulk-len` is refused (Redis
/// takes up to LLONG_MAX), so no bulk, APPEND or SETRANGE can ask for a longer string.
#[test]
fn proto_max_bulk_len_stops_at_the_longest_string() {
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    let set =
        |conn: &mut Conn, value: &str| conn.cmd(&["CONFIG", "SET", "proto-max-bulk-len", value]);
    assert_eq!(set(&mut ours, "4294967295"), V::Simple("OK".into()));
    assert!(matches!(set(&mut ours, "4294967296"), V::Error(_)));
    assert!(matches!(set(&mut ours, "5gb"), V::Error(_)));
    assert_eq!(
        ours.cmd(&["CONFIG", "GET", "proto-max-bulk-len"]).items()[1],
        V::Bulk(Some(b"4294967295".to_vec()))
    );
    // The limit is what SETRANGE checks against, before it allocates anything.
    assert_eq!(
        ours.cmd(&["SETRANGE", "s", "4294967295", "x"]),
        V::Error("ERR string exceeds maximum allowed size (proto-max-bulk-len)".into())
    );
}

#[test]
fn config_rewrite_errors_are_redis_s() {
    let Some(binary) = redis_binary() else { return };
    // No config file.
    let redis = RedisOracle::start(&binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    for line in ["CONFIG REWRITE", "CONFIG REWRITE now", "config rewrite"] {
        let words: Vec<&str> = line.split(' ').collect();
        let reply = ours.cmd(&words);
        assert_eq!(reply, theirs.cmd(&words), "{line}");
        assert!(matches!(reply, V::Error(_)), "{line}: {reply:?}");
    }
    assert_eq!(
        ours.cmd(&["CONFIG", "REWRITE"]),
        V::Error("ERR The server is running without a config file".into())
    );

    // The file replaced by a directory: it cannot be read.
    let mut ours = start_tessera();
    let mut theirs = start_redis(&binary);
    for server in [&ours, &theirs] {
        std::fs::remove_file(&server.config_file).unwrap();
        std::fs::create_dir(&server.config_file).unwrap();
    }
    let reply = ours.conn.cmd(&["CONFIG", "REWRITE"]);
    assert_eq!(reply, theirs.conn.cmd(&["CONFIG", "REWRITE"]));
    assert_eq!(
        reply,
        V::Error("ERR Rewriting config file: Is a directory".into())
    );

    // The file's directory gone: the file reads as empty, but nothing can be written
    // there.
    for server in [&ours, &theirs] {
        std::fs::remove_dir_all(server.config_file.parent().unwrap()).unwrap();
    }
    let reply = ours.conn.cmd(&["CONFIG", "REWRITE"]);
    assert_eq!(reply, theirs.conn.cmd(&["CONFIG", "REWRITE"]));
    assert_eq!(
        reply,
        V::Error("ERR Rewriting config file: No such file or directory".into())
    );

    // Once the directory is back, the rewrite writes a whole new file.
    for server in [&mut ours, &mut theirs] {
        std::fs::create_dir(server.config_file.parent().unwrap()).unwrap();
        assert_eq!(
            server.conn.cmd(&["CONFIG", "REWRITE"]),
            V::Simple("OK".into())
        );
    }
    let (our_kept, mut our_generated) = normalised(&ours);
    let (their_kept, their_generated) = normalised(&theirs);
    // Tessera's log is on by default, Redis's off: only Tessera writes the line.
    let at = our_generated.iter().position(|l| l == "appendonly no");
    assert!(at.is_some(), "{our_generated:?}");
    our_generated.remove(at.unwrap());
    assert_eq!((our_kept, &our_generated), (their_kept, &their_generated));
    assert!(
        our_generated.contains(&"port {PORT}".to_string()),
        "{our_generated:?}"
    );
}
