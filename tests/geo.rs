//! Geo commands against redis-server 7.0 side by side: errors and replies compared
//! reply type by reply type in RESP2 and RESP3 (positions are doubles in RESP3, distances
//! stay bulk strings), searches over a geo set large enough to be a tree (the
//! differential stream's sets stay listpacks), and stores that survive kill -9.

mod common;

use common::raw_client::{Conn, V};
use common::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// Sends `commands` to both servers over one connection each (RESP3 after HELLO 3 when
/// asked) and requires identical replies.
fn compare(tessera: &mut Conn, redis: &mut Conn, commands: &[Vec<String>]) {
    for command in commands {
        let args: Vec<&[u8]> = command.iter().map(|a| a.as_bytes()).collect();
        let ours = tessera.call(&args);
        let theirs = redis.call(&args);
        assert_eq!(ours, theirs, "{command:?}");
    }
}

fn words(line: &str) -> Vec<String> {
    line.split(' ').map(str::to_string).collect()
}

const FIXED: &[&str] = &[
    "FLUSHALL",
    "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOADD g 180 85.05112878 ne -180 -85.05112878 sw -0 0 origin",
    "GEOADD g CH XX 13.361389 38.115556 Palermo 1 1 nobody",
    "GEOADD g NX CH 2 2 Palermo 3 3 fresh",
    "GEOADD g 180.0000001 0 m",
    "GEOADD g 0 -85.05112879 m",
    "GEOADD g 1e400 0 m",
    "GEOADD g abc 0 m",
    "GEOADD g NX XX 1 1 m",
    "GEOADD g 1 1",
    "GEOADD g NX",
    "GEOADD g NX CH CH",
    "GEOPOS g Palermo nope ne sw origin",
    "GEOPOS nokey a",
    "GEOPOS g",
    "GEOHASH g Palermo ne sw origin nope",
    "GEOHASH nokey a",
    "GEODIST g Palermo Catania",
    "GEODIST g Palermo Catania KM",
    "GEODIST g Palermo sw mi",
    "GEODIST g ne sw ft",
    "GEODIST g Palermo Palermo",
    "GEODIST g Palermo nope",
    "GEODIST nokey a b",
    "GEODIST g Palermo Catania parsec",
    "GEODIST g Palermo Catania km extra",
    "GEOSEARCH g FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST WITHCOORD WITHHASH ASC",
    "GEOSEARCH g FROMMEMBER Palermo BYBOX 400 400 km DESC COUNT 1",
    "GEOSEARCH g FROMMEMBER Palermo BYRADIUS 20000 km WITHDIST COUNT 3 ANY",
    "GEOSEARCH g FROMLONLAT 179.9 85 BYBOX 100 100 mi WITHCOORD",
    "GEOSEARCH g FROMLONLAT -180 -85.05112878 BYRADIUS 10 km WITHDIST WITHCOORD",
    "GEOSEARCH g FROMMEMBER nope BYRADIUS 1 km",
    "GEOSEARCH nokey FROMMEMBER nope BYRADIUS 1 km",
    "GEOSEARCH g FROMLONLAT 1 2 FROMMEMBER Palermo BYRADIUS 1 m",
    "GEOSEARCH g BYRADIUS 1 m WITHDIST",
    "GEOSEARCH g FROMLONLAT 1 2 WITHDIST",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 m BYBOX 1 1 m",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS -1 m",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS x m",
    "GEOSEARCH g FROMLONLAT 1 2 BYBOX 1 x m",
    "GEOSEARCH g FROMLONLAT 1 2 BYBOX -1 1 m",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 lightyear",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 m ANY",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 m COUNT 0",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 m COUNT x",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 m COUNT",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 m STOREDIST",
    "GEOSEARCH g FROMLONLAT 1 2 BYRADIUS 1 m STORE d",
    "geosearch g frommember Palermo byradius 1 m",
    "GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST",
    "GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST",
    "ZRANGE d 0 -1 WITHSCORES",
    "GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 DESC",
    "ZRANGE d 0 -1 WITHSCORES",
    "GEOSEARCHSTORE d g FROMLONLAT 15 37 BYRADIUS 1 m",
    "EXISTS d",
    "GEORADIUS g 15 37 200 km WITHDIST WITHHASH WITHCOORD",
    "GEORADIUS g 15 37 200 km STORE d WITHDIST",
    "GEORADIUS g 15 37 200 km STOREDIST d COUNT 2",
    "ZRANGE d 0 -1 WITHSCORES",
    "GEORADIUS_RO g 15 37 200 km STORE d",
    "GEORADIUS g 200 37 200 km",
    "GEORADIUS g 15 37 200",
    "GEORADIUS g 15 37 200 km FROMMEMBER Palermo",
    "GEORADIUSBYMEMBER g Palermo 200 km WITHDIST ASC",
    "GEORADIUSBYMEMBER g nope 200 km",
    "GEORADIUSBYMEMBER nokey nope abc xyz",
    "GEORADIUSBYMEMBER nokey nope abc xyz STORE d",
    "GEORADIUSBYMEMBER_RO g Palermo 200 km STOREDIST d",
    "GEORADIUSBYMEMBER_RO g Palermo 200 km WITHCOORD",
    "SET s x",
    "GEOADD s 1 1 m",
    "GEOPOS s m",
    "GEODIST s a b",
    "GEOHASH s a",
    "GEOSEARCH s FROMLONLAT 1 1 BYRADIUS 1 m",
    "GEOSEARCHSTORE d s FROMLONLAT 1 1 BYRADIUS 1 m",
    "GEOSEARCHSTORE s g FROMLONLAT 15 37 BYRADIUS 200 km",
    "TYPE s",
    "ZADD plain -1 neg 3.5 frac 4503599627370496 big inf infinite",
    "GEOPOS plain neg frac big infinite",
    "GEOHASH plain neg frac big infinite",
];

#[test]
fn replies_and_errors_match_redis_in_resp2_and_resp3() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let oracle = RedisOracle::start(&redis_binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let commands: Vec<Vec<String>> = FIXED.iter().map(|line| words(line)).collect();
    for resp3 in [false, true] {
        let mut tessera = Conn::new(server.port);
        let mut redis = Conn::new(oracle.port);
        if resp3 {
            tessera.cmd(&["HELLO", "3"]);
            redis.cmd(&["HELLO", "3"]);
        }
        compare(&mut tessera, &mut redis, &commands);
        // The reply types themselves: RESP3 positions are doubles, distances bulks.
        let position = tessera.cmd(&["GEOPOS", "g", "Palermo"]).items()[0].items();
        let distance = tessera.cmd(&["GEODIST", "g", "Palermo", "Catania"]);
        assert!(matches!(distance, V::Bulk(Some(_))), "{distance:?}");
        if resp3 {
            assert!(matches!(position[0], V::Double(_)), "{position:?}");
        } else {
            assert!(matches!(position[0], V::Bulk(Some(_))), "{position:?}");
        }
    }
}

/// A random position string within the limits, often near one of them.
fn position(rng: &mut StdRng) -> (String, String) {
    let longitude = match rng.random_range(0..6) {
        0 => format!("{}", 180.0 - rng.random_range(0.0..0.5)),
        1 => format!("{}", -180.0 + rng.random_range(0.0..0.5)),
        _ => format!("{}", rng.random_range(-180.0..180.0)),
    };
    let latitude = match rng.random_range(0..6) {
        0 => format!("{}", 85.05112878 - rng.random_range(0.0..0.5)),
        1 => format!("{}", -85.05112878 + rng.random_range(0.0..0.5)),
        _ => format!("{}", rng.random_range(-85.05112878..85.05112878)),
    };
    (longitude, latitude)
}

#[test]
fn searches_over_a_large_geo_set_match_redis() {
    let Some(redis_binary) = require_redis_or_skip(WHOLE_TEST) else {
        return;
    };
    let oracle = RedisOracle::start(&redis_binary);
    let dir = temp_dir();
    let server = start_server(dir.path(), &[]);
    let mut tessera = Conn::new(server.port);
    let mut redis = Conn::new(oracle.port);
    let mut rng = StdRng::seed_from_u64(7);
    let mut commands = Vec::new();
    for i in 0..600 {
        let (x, y) = position(&mut rng);
        commands.push(vec!["GEOADD".into(), "big".into(), x, y, format!("m{i}")]);
    }
    commands.push(words("OBJECT ENCODING big"));
    for _ in 0..400 {
        let (x, y) = position(&mut rng);
        let unit = ["m", "km", "ft", "mi"][rng.random_range(0..4)].to_string();
        let mut command: Vec<String> = vec!["GEOSEARCH".into(), "big".into()];
        if rng.random_bool(0.3) {
            command.extend([
                "FROMMEMBER".into(),
                format!("m{}", rng.random_range(0..600)),
            ]);
        } else {
            command.extend(["FROMLONLAT".into(), x, y]);
        }
        let scale = [1.0, 1e3, 1e5, 1e6, 1e7][rng.random_range(0..5)];
        if rng.random_bool(0.5) {
            let radius = rng.random_range(0.0..scale);
            command.extend(["BYRADIUS".into(), format!("{radius}"), unit]);
        } else {
            let width = rng.random_range(0.0..scale);
            let height = rng.random_range(0.0..scale);
            command.extend([
                "BYBOX".into(),
                format!("{width}"),
                format!("{height}"),
                unit,
            ]);
        }
        command.extend(["WITHDIST".into(), "WITHHASH".into(), "WITHCOORD".into()]);
        match rng.random_range(0..4) {
            0 => command.push("ASC".into()),
            1 => command.push("DESC".into()),
            _ => {}
        }
        if rng.random_bool(0.3) {
            command.extend(["COUNT".into(), rng.random_range(1..20).to_string()]);
            if rng.random_bool(0.5) {
                command.push("ANY".into());
            }
        }
        commands.push(command);
    }
    compare(&mut tessera, &mut redis, &commands);
    assert_eq!(
        tessera.cmd(&["OBJECT", "ENCODING", "big"]).text(),
        "skiplist"
    );
}

#[test]
fn stores_survive_kill9_and_replay() {
    let dir = temp_dir();
    let mut server = start_server(dir.path(), &["--appendfsync", "always"]);
    let mut conn = Conn::new(server.port);
    let setup = [
        "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 12.5 41.9 Rome",
        "GEOADD g 179.99 0 east -179.99 0 west",
        "GEOSEARCHSTORE a g FROMMEMBER Palermo BYRADIUS 300 km STOREDIST",
        "GEORADIUS g 15 37 500 km STORE b COUNT 2 DESC",
        "GEORADIUSBYMEMBER g east 10 km STOREDIST c",
        "SET gone x",
        "GEOSEARCHSTORE gone g FROMLONLAT 0 0 BYRADIUS 1 m",
        "GEOADD g XX CH 12.6 41.8 Rome",
    ];
    for line in setup {
        let args = words(line);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply = conn.cmd(&args);
        assert!(!matches!(reply, V::Error(_)), "{line}: {reply:?}");
    }
    let read = |conn: &mut Conn| {
        let mut replies: Vec<V> = ["a", "b", "c", "g"]
            .iter()
            .map(|key| conn.cmd(&["ZRANGE", key, "0", "-1", "WITHSCORES"]))
            .collect();
        replies.push(conn.cmd(&["EXISTS", "gone"]));
        replies
    };
    let before = read(&mut conn);
    assert_eq!(before[0].items().len(), 4, "{:?}", before[0]);
    assert_eq!(before[2].items().len(), 4, "{:?}", before[2]);
    assert_eq!(before[4], V::Int(0));
    server.kill9();

    let server = start_server(dir.path(), &[]);
    let mut conn = Conn::new(server.port);
    assert_eq!(read(&mut conn), before);
}
