//! DEBUG RELOAD and DEBUG LOADAOF against a real redis-server 7.0, side by side: the
//! dataset kept (digest before = after, and after a restart) with the log on and off,
//! BGREWRITEAOF with the log off and the base LOADAOF then loads, a running BGSAVE
//! waited for, and RELOAD refused inside MULTI.

mod common;

use common::debug_dataset::*;
use common::raw_client::{Conn, V};
use common::side_by_side::{raw_connect as connect, words};
use common::*;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// The manifest's base files.
fn base_files(server: &TestServer) -> Vec<String> {
    manifest_files(&server.aof_dir())
        .into_iter()
        .filter(|name| name.contains(".base"))
        .collect()
}

#[test]
fn reload_and_loadaof_keep_the_dataset_with_the_log_on() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    let before = digest(&mut ours);
    assert_eq!(before, digest(&mut theirs));
    let encodings = value_digests(&mut ours);
    assert!(base_files(&server).is_empty(), "a new log has no base yet");

    // RELOAD: a new base in the log (a compaction), then the log loaded again.
    assert_eq!(ours.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    let bases = base_files(&server);
    assert!(!bases.is_empty(), "RELOAD wrote no base");
    assert_eq!(digest(&mut ours), before);
    // Values and their encodings came back through RDB as Redis's own RELOAD brings them.
    assert_eq!(theirs.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    assert_eq!(value_digests(&mut ours), encodings);
    assert_eq!(value_digests(&mut theirs), encodings);

    // NOSAVE loads the log as it stands; NOFLUSH without MERGE finds every key twice.
    assert_eq!(
        ours.cmd(&["DEBUG", "RELOAD", "NOSAVE"]),
        V::Simple("OK".into())
    );
    assert_eq!(base_files(&server), bases);
    assert_eq!(digest(&mut ours), before);
    assert_eq!(
        ours.cmd(&["DEBUG", "RELOAD", "NOFLUSH"]),
        V::Error("ERR Error trying to load the RDB dump".into())
    );
    assert_eq!(digest(&mut ours), before);
    assert_eq!(
        ours.cmd(&["debug", "reload", "noflush", "merge"]),
        V::Simple("OK".into())
    );
    assert_eq!(digest(&mut ours), before);

    // LOADAOF replays what was logged up to it, this very pipeline's write included.
    ours.send(&[b"SET", b"written-before", b"1"]);
    ours.send(&[b"DEBUG", b"LOADAOF"]);
    ours.send(&[b"GET", b"written-before"]);
    assert_eq!(ours.read(), V::Simple("OK".into()));
    assert_eq!(ours.read(), V::Simple("OK".into()));
    assert_eq!(ours.read(), V::Bulk(Some(b"1".to_vec())));
    theirs.cmd(&["SET", "written-before", "1"]);
    let after = digest(&mut ours);
    assert_eq!(after, digest(&mut theirs));
    assert_ne!(after, before);

    // The log holds exactly that dataset: a crash now loses nothing of it.
    server.kill9();
    let server = tessera_with_debug(dir.path(), &[]);
    let mut ours = Conn::new(server.port);
    assert_eq!(digest(&mut ours), after);
    assert_eq!(ours.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    assert_eq!(digest(&mut ours), after);
    assert_eq!(ours.cmd(&["DEBUG", "LOADAOF"]), V::Simple("OK".into()));
    assert_eq!(digest(&mut ours), after);
}

#[test]
fn reload_with_the_log_off_saves_and_loads_dbfilename_as_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &["--appendonly", "no"]);
    let mut ours = Conn::new(server.port);
    let mut theirs = Conn::new(redis.port);
    both(&mut ours, &mut theirs, "SET a 1");
    // No dump.rdb yet: both fail. (Redis has emptied its dataset by then; Tessera keeps
    // it, a deliberate difference.)
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOSAVE"),
        V::Error("ERR Error trying to load the RDB dump".into())
    );
    assert_eq!(ours.cmd(&["GET", "a"]), V::Bulk(Some(b"1".to_vec())));
    theirs.cmd(&["SET", "a", "1"]);

    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD"),
        V::Simple("OK".into())
    );
    assert!(dir.path().join("dump.rdb").exists());
    let saved = digest(&mut ours);
    assert_eq!(saved, digest(&mut theirs));
    assert_eq!(value_digests(&mut ours), value_digests(&mut theirs));

    // NOSAVE: the file as it was saved, without what came since.
    both(&mut ours, &mut theirs, "SET b 2");
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOSAVE"),
        V::Simple("OK".into())
    );
    assert_eq!(both(&mut ours, &mut theirs, "EXISTS b"), V::Int(0));
    assert_eq!(digest(&mut ours), saved);
    // NOSAVE NOFLUSH MERGE: the file added to what is there.
    both(&mut ours, &mut theirs, "SET c 3");
    both(&mut ours, &mut theirs, "DEL str");
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOSAVE NOFLUSH MERGE"),
        V::Simple("OK".into())
    );
    assert_eq!(both(&mut ours, &mut theirs, "EXISTS c str"), V::Int(2));
    assert_eq!(digest(&mut ours), digest(&mut theirs));

    // Function libraries are part of the file: NOFLUSH without MERGE fails on them (and
    // on the keys), MERGE replaces them.
    let library = "#!lua name=lib\nredis.register_function('f', function() return 'hello' end)";
    for conn in [&mut ours, &mut theirs] {
        assert_eq!(
            conn.cmd(&["FUNCTION", "LOAD", library]),
            V::Bulk(Some(b"lib".to_vec()))
        );
    }
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD"),
        V::Simple("OK".into())
    );
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOFLUSH"),
        V::Error("ERR Error trying to load the RDB dump".into())
    );
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG RELOAD NOFLUSH MERGE"),
        V::Simple("OK".into())
    );
    assert_eq!(
        both(&mut ours, &mut theirs, "FCALL f 0"),
        V::Bulk(Some(b"hello".to_vec()))
    );
    let saved = digest(&mut ours);
    assert_eq!(saved, digest(&mut theirs));

    // LOADAOF with the log off and no log directory (Redis exits): refused, nothing made.
    assert_eq!(
        ours.cmd(&["DEBUG", "LOADAOF"]),
        V::Error("ERR Error trying to load the append only file".into())
    );
    assert_eq!(digest(&mut ours), saved);
    assert!(!dir.path().join("appendonlydir").exists());

    // A restart loads the same file.
    server.kill9();
    let server = tessera_with_debug(dir.path(), &["--appendonly", "no"]);
    let mut ours = Conn::new(server.port);
    assert_eq!(digest(&mut ours), saved);
    assert_eq!(
        ours.cmd(&["FCALL", "f", "0"]),
        V::Bulk(Some(b"hello".to_vec()))
    );
}

/// `line` sent to both servers: the replies must be equal; returns Tessera's.
fn both(ours: &mut Conn, theirs: &mut Conn, line: &str) -> V {
    let (a, b) = (ours.cmd(&words(line)), theirs.cmd(&words(line)));
    assert_eq!(a, b, "{line}");
    a
}

/// INFO persistence's `aof_rewrite_in_progress` is 0 (polled for up to 30 s).
fn wait_for_rewrite(conn: &mut Conn) {
    wait_until("the rewrite's end", Duration::from_secs(30), || match conn
        .cmd(&["INFO", "persistence"])
    {
        V::Bulk(Some(info)) => String::from_utf8_lossy(&info).contains("aof_rewrite_in_progress:0"),
        _ => false,
    });
}

/// The kinds of the files a log directory's manifest lists (`b`, `i`, `h`), in order.
fn manifest_kinds(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("appendonlydir/appendonly.aof.manifest"))
        .expect("a manifest");
    text.lines()
        .filter_map(|line| line.split_whitespace().last().map(str::to_string))
        .collect()
}

#[test]
fn bgrewriteaof_with_the_log_off_writes_a_base_that_loadaof_loads_as_on_redis() {
    let Some(binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let (redis_dir, dir) = (temp_dir(), temp_dir());
    let redis = redis_with_debug(&binary, redis_dir.path());
    let mut server = tessera_with_debug(dir.path(), &["--appendonly", "no"]);
    let mut theirs = Conn::new(redis.port);
    let mut ours = Conn::new(server.port);
    let commands = dataset();
    load(&mut ours, &commands);
    load(&mut theirs, &commands);
    let saved = digest(&mut ours);
    assert_eq!(saved, digest(&mut theirs));
    assert_eq!(
        both(&mut ours, &mut theirs, "BGREWRITEAOF"),
        V::Simple("Background append only file rewriting started".into())
    );
    wait_for_rewrite(&mut ours);
    wait_for_rewrite(&mut theirs);
    // A base alone: no incremental file, the log still off.
    for dir in [dir.path(), redis_dir.path()] {
        let kinds = manifest_kinds(dir);
        assert!(
            !kinds.is_empty() && kinds.iter().all(|k| k == "b"),
            "{kinds:?}"
        );
    }
    assert_eq!(
        both(&mut ours, &mut theirs, "CONFIG GET appendonly"),
        V::Array(vec![
            V::Bulk(Some(b"appendonly".to_vec())),
            V::Bulk(Some(b"no".to_vec()))
        ])
    );
    // LOADAOF loads what the rewrite wrote, without what came since.
    both(&mut ours, &mut theirs, "SET after 1");
    assert_eq!(
        both(&mut ours, &mut theirs, "DEBUG LOADAOF"),
        V::Simple("OK".into())
    );
    assert_eq!(both(&mut ours, &mut theirs, "EXISTS after"), V::Int(0));
    assert_eq!(digest(&mut ours), saved);
    assert_eq!(digest(&mut theirs), saved);
    // The base is a log: a server started on it with the log on loads it.
    server.kill9();
    let server = tessera_with_debug(dir.path(), &["--appendonly", "yes"]);
    assert_eq!(digest(&mut Conn::new(server.port)), saved);
}

#[test]
fn reload_waits_for_a_running_background_save() {
    let dir = temp_dir();
    // About a second of BGSAVE: 500 keys at 2 ms each.
    let server = tessera_with_debug(dir.path(), &["--rdb-key-save-delay", "2000"]);
    let mut conn = Conn::new(server.port);
    let mut keys: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
    for i in 0..500 {
        keys.push(format!("key:{i}").into_bytes());
        keys.push(format!("value:{i}").into_bytes());
    }
    load(&mut conn, &[keys]);
    let before = digest(&mut conn);
    assert_eq!(
        conn.cmd(&["BGSAVE"]),
        V::Simple("Background saving started".into())
    );
    assert_eq!(conn.cmd(&["DEBUG", "RELOAD"]), V::Simple("OK".into()));
    let mut info = server.connection();
    let fields = info_fields(
        &mut info,
        &[
            "rdb_bgsave_in_progress",
            "rdb_last_bgsave_status",
            "aof_rewrite_in_progress",
        ],
    );
    assert_eq!(
        fields,
        [Some("0".into()), Some("ok".into()), Some("0".into())]
    );
    assert!(dir.path().join("dump.rdb").exists());
    assert_eq!(digest(&mut conn), before);
}

#[test]
fn reload_is_refused_inside_multi_and_its_reply_follows_client_reply() {
    let dir = temp_dir();
    let server = tessera_with_debug(dir.path(), &[]);
    let mut conn = Conn::new(server.port);
    conn.cmd(&["SET", "a", "1"]);
    // A deliberate difference: Redis runs RELOAD inside EXEC; Tessera's loop does it
    // between commands only.
    assert_eq!(conn.cmd(&["MULTI"]), V::Simple("OK".into()));
    assert_eq!(conn.cmd(&["DEBUG", "RELOAD"]), V::Simple("QUEUED".into()));
    assert_eq!(
        conn.cmd(&["DEBUG", "DIGEST-VALUE", "a"]),
        V::Simple("QUEUED".into())
    );
    match conn.cmd(&["EXEC"]) {
        V::Array(replies) => {
            assert_eq!(
                replies[0],
                V::Error("ERR DEBUG RELOAD inside MULTI is not supported by Tessera".into())
            );
            assert!(matches!(replies[1], V::Array(_)));
        }
        other => panic!("EXEC: {other:?}"),
    }
    // CLIENT REPLY SKIP drops the reply the loop writes after the reload, as any other.
    let mut stream = connect(server.port);
    stream
        .write_all(
            &[
                encode_command(&[b"CLIENT", b"REPLY", b"SKIP"]),
                encode_command(&[b"DEBUG", b"RELOAD"]),
                encode_command(&[b"GET", b"a"]),
            ]
            .concat(),
        )
        .unwrap();
    let (reply, closed) = read_bytes(&mut stream, 7, Duration::from_secs(30));
    assert!(!closed);
    assert_eq!(reply, b"$1\r\n1\r\n");
}
