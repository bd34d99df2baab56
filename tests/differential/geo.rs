//! The geo family of the differential stream: GEOADD, GEOPOS, GEODIST, GEOHASH and the
//! searches (GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and the _RO forms)
//! with every option in any order, valid and invalid.
//!
//! Positions are random, often at the limits (latitudes ±85.05112878, the date line
//! ±180) and near them; radii and boxes range from zero to the whole Earth, in every
//! unit. Geo sets live in keys of their own, sometimes the shared keys (wrong types,
//! plain sorted sets with scores that are no geohash). Only one coordinate of a point is
//! ever a fixed value, so two members share a position only by chance.
//!
//! Ties matter because a search with COUNT (without ANY) that finds more than COUNT
//! points is sorted in Redis by its partial quicksort, whose order among equal distances
//! no other server shares (a full sort is glibc's merge sort: ties keep the order found,
//! as Tessera's). STOREDIST is the one option that makes ties in bulk: it stores
//! distances as scores, and every distance within the same metre truncates to the same
//! geohash, so a set stored that way and then searched holds many members at one point.
//! Its destination is therefore a key of its own, `geo:dist`, which no search reads; the
//! step that writes it reads it back whole (ZRANGE WITHSCORES) so what it stored is still
//! compared. Ties still come from elsewhere (the fixed scores of the ZADD step, the
//! shared keys' sorted sets), so a search that reads with COUNT and without ANY is
//! compared with its tied members blurred (`search_with_count`), and a command that may
//! store (GEORADIUS, GEORADIUSBYMEMBER, GEOSEARCHSTORE) with COUNT always has ANY, which
//! cuts before sorting: no partial sort (GEORADIUS_RO and GEOSEARCH cover COUNT alone).

use super::{Check, Gen, Reply, Step, query, shuffle};
use rand::RngExt;
use redis::Value;
use std::collections::BTreeMap;

const GEO_KEYS: &[&str] = &["geo:1", "geo:2", "geo:3"];
/// Where STOREDIST writes: never the source of a search (see the module header).
const GEO_DIST_KEY: &[u8] = b"geo:dist";
const MEMBERS: &[&str] = &[
    "p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9", "p10", "p11",
];
const EDGE_LONGITUDES: &[&str] = &["180", "-180", "179.99999", "-179.999999", "0", "-0"];
const EDGE_LATITUDES: &[&str] = &[
    "85.05112878",
    "-85.05112878",
    "85.0511287",
    "-85.05",
    "84.9",
    "0",
];
const BAD_LONGITUDES: &[&str] = &["180.000001", "-181", "abc", "inf", "", "nan"];
const BAD_LATITUDES: &[&str] = &["85.05112879", "-90", "90", "x", "-inf"];
const UNITS: &[&str] = &["m", "km", "ft", "mi"];
const BAD_UNITS: &[&str] = &["parsec", "", "kms"];

impl Gen {
    fn geo_key(&mut self) -> Vec<u8> {
        if self.chance(0.1) {
            self.key()
        } else {
            self.pick(GEO_KEYS).as_bytes().to_vec()
        }
    }

    fn geo_member(&mut self) -> Vec<u8> {
        self.pick(MEMBERS).as_bytes().to_vec()
    }

    fn coordinate(&mut self, limit: f64, decimals: u32) -> String {
        let x: f64 = self.rng.random_range(-limit..=limit);
        match self.rng.random_range(0..4) {
            0 => format!("{x:.2}"),
            1 => format!("{x:.prec$}", prec = decimals as usize),
            _ => format!("{x}"),
        }
    }

    /// A longitude, latitude pair: random, one coordinate at a limit, or invalid.
    fn position(&mut self) -> (Vec<u8>, Vec<u8>) {
        let mut longitude = self.coordinate(180.0, 6);
        let mut latitude = self.coordinate(85.05112878, 6);
        match self.rng.random_range(0..20) {
            0..3 => longitude = self.pick(EDGE_LONGITUDES).to_string(),
            3..6 => latitude = self.pick(EDGE_LATITUDES).to_string(),
            6 => longitude = self.pick(BAD_LONGITUDES).to_string(),
            7 => latitude = self.pick(BAD_LATITUDES).to_string(),
            _ => {}
        }
        (longitude.into_bytes(), latitude.into_bytes())
    }

    fn unit(&mut self) -> Vec<u8> {
        if self.chance(0.03) {
            self.pick(BAD_UNITS).as_bytes().to_vec()
        } else {
            let unit = self.pick(UNITS);
            self.word(unit)
        }
    }

    /// A size in the unit that follows: zero, small, continental, beyond the Earth.
    fn geo_size(&mut self) -> Vec<u8> {
        match self.rng.random_range(0..20) {
            0 => b"0".to_vec(),
            1 => self
                .pick(&["-1", "abc", "inf", "1e400"])
                .as_bytes()
                .to_vec(),
            2..6 => format!("{:.3}", self.rng.random_range(0.0..1000.0)).into_bytes(),
            6..12 => format!("{}", self.rng.random_range(1000.0..3_000_000.0)).into_bytes(),
            12..18 => self.range(1, 5000).to_string().into_bytes(),
            _ => self.range(5000, 50_000_000).to_string().into_bytes(),
        }
    }

    /// The options of a search, each group whole, in random order.
    fn search_options(&mut self, search: bool, store: Option<&str>) -> Vec<Vec<u8>> {
        let mut groups: Vec<Vec<Vec<u8>>> = Vec::new();
        if search {
            // FROMMEMBER / FROMLONLAT and BYRADIUS / BYBOX: usually one of each.
            let centre_count = match self.rng.random_range(0..20) {
                0 => 0,
                1 => 2,
                _ => 1,
            };
            for _ in 0..centre_count {
                if self.chance(0.5) {
                    groups.push(vec![self.word("frommember"), self.geo_member()]);
                } else {
                    let (x, y) = self.position();
                    groups.push(vec![self.word("fromlonlat"), x, y]);
                }
            }
            let area_count = match self.rng.random_range(0..20) {
                0 => 0,
                1 => 2,
                _ => 1,
            };
            for _ in 0..area_count {
                if self.chance(0.5) {
                    groups.push(vec![self.word("byradius"), self.geo_size(), self.unit()]);
                } else {
                    groups.push(vec![
                        self.word("bybox"),
                        self.geo_size(),
                        self.geo_size(),
                        self.unit(),
                    ]);
                }
            }
        }
        let with_allowed = store.is_none() || self.chance(0.05);
        for option in ["withdist", "withhash", "withcoord"] {
            if with_allowed && self.chance(0.35) {
                groups.push(vec![self.word(option)]);
            }
        }
        if self.chance(0.4) {
            let order = self.pick(&["asc", "desc"]);
            groups.push(vec![self.word(order)]);
        }
        if self.chance(0.4) {
            let count = match self.rng.random_range(0..12) {
                0 => self.pick(&["0", "-1", "abc"]).to_string(),
                _ => self.range(1, 8).to_string(),
            };
            let mut group = vec![self.word("count"), count.into_bytes()];
            // A store is compared through the stored key, where blurring ties cannot
            // reach: a command that may store (GEORADIUS, GEORADIUSBYMEMBER,
            // GEOSEARCHSTORE) always cuts with ANY.
            if self.chance(0.4) || store.is_some() {
                group.push(self.word("any"));
            }
            groups.push(group);
        } else if self.chance(0.03) {
            groups.push(vec![self.word("any")]);
        }
        match store {
            Some("georadius") if self.chance(0.5) => {
                let option = self.pick(&["store", "storedist"]);
                // The key is drawn either way, so the rest of the stream stays the same.
                let mut destination = self.geo_key();
                if option == "storedist" {
                    destination = GEO_DIST_KEY.to_vec();
                }
                groups.push(vec![self.word(option), destination]);
            }
            Some("geosearchstore") if self.chance(0.5) => groups.push(vec![self.word("storedist")]),
            _ => {}
        }
        shuffle(&mut self.rng, &mut groups);
        groups.into_iter().flatten().collect()
    }

    pub(super) fn geo_step(&mut self) -> Vec<Step> {
        let mut args = Vec::new();
        match self.rng.random_range(0..100) {
            0..30 => {
                args.push(self.word("geoadd"));
                args.push(self.geo_key());
                for flag in ["nx", "xx", "ch"] {
                    if self.chance(0.1) {
                        args.push(self.word(flag));
                    }
                }
                for _ in 0..self.rng.random_range(1..5) {
                    let (x, y) = self.position();
                    args.extend([x, y, self.geo_member()]);
                }
                if self.chance(0.03) {
                    args.pop();
                }
            }
            30..33 => {
                // A score that is no geohash, in a geo set.
                args.push(self.word("zadd"));
                args.push(self.geo_key());
                let score = self.pick(&["0", "1", "-1", "3.5", "4503599627370496", "1e15"]);
                args.push(score.as_bytes().to_vec());
                args.push(self.geo_member());
            }
            33..40 => {
                args.push(self.word("geopos"));
                args.push(self.geo_key());
                for _ in 0..self.rng.random_range(0..4) {
                    args.push(self.geo_member());
                }
            }
            40..46 => {
                args.push(self.word("geohash"));
                args.push(self.geo_key());
                for _ in 0..self.rng.random_range(0..4) {
                    args.push(self.geo_member());
                }
            }
            46..54 => {
                args.push(self.word("geodist"));
                args.push(self.geo_key());
                args.push(self.geo_member());
                args.push(self.geo_member());
                if self.chance(0.7) {
                    args.push(self.unit());
                }
                if self.chance(0.03) {
                    args.push(b"extra".to_vec());
                }
            }
            54..70 => {
                args.push(self.word("geosearch"));
                args.push(self.geo_key());
                args.extend(self.search_options(true, None));
            }
            70..78 => {
                args.push(self.word("geosearchstore"));
                args.push(self.geo_key());
                args.push(self.geo_key());
                args.extend(self.search_options(true, Some("geosearchstore")));
            }
            78..89 => {
                let name = self.pick(&["georadius", "georadius_ro"]);
                args.push(self.word(name));
                args.push(self.geo_key());
                let (x, y) = self.position();
                args.extend([x, y, self.geo_size(), self.unit()]);
                let store = (name == "georadius").then_some("georadius");
                args.extend(self.search_options(false, store));
            }
            89..97 => {
                let name = self.pick(&["georadiusbymember", "georadiusbymember_ro"]);
                args.push(self.word(name));
                args.push(self.geo_key());
                args.extend([self.geo_member(), self.geo_size(), self.unit()]);
                let store = (name == "georadiusbymember").then_some("georadius");
                args.extend(self.search_options(false, store));
            }
            _ => {
                args.push(self.word("zrange"));
                args.push(self.geo_key());
                args.extend([b"0".to_vec(), b"-1".to_vec(), b"withscores".to_vec()]);
            }
        }
        let mut steps = Vec::new();
        let stores_distances = args.iter().any(|a| a.eq_ignore_ascii_case(b"storedist"));
        if stores_distances && args[0].eq_ignore_ascii_case(b"geosearchstore") {
            args[1] = GEO_DIST_KEY.to_vec();
        }
        let has = |word: &[u8]| args.iter().any(|a| a.eq_ignore_ascii_case(word));
        let stores =
            stores_distances || has(b"store") || args[0].eq_ignore_ascii_case(b"geosearchstore");
        let searches = [
            "geosearch",
            "georadius",
            "georadius_ro",
            "georadiusbymember",
            "georadiusbymember_ro",
        ]
        .iter()
        .any(|name| args[0].eq_ignore_ascii_case(name.as_bytes()));
        let check = if searches && !stores && has(b"count") && !has(b"any") {
            Check::Run(search_with_count)
        } else {
            Check::Exact
        };
        steps.push(Step { args, check });
        if stores_distances {
            let read_back = ["ZRANGE", "geo:dist", "0", "-1", "WITHSCORES"];
            steps.push(Step {
                args: read_back.iter().map(|a| a.as_bytes().to_vec()).collect(),
                check: Check::Exact,
            });
        }
        steps
    }
}

/// A search with COUNT and without ANY, reduced to what Redis defines: when it finds more
/// than COUNT points, Redis orders them with its partial quicksort, which places equal
/// distances in an order of its own (and, where the cut falls among them, keeps members
/// of its own choosing). Every returned point whose distance (as replied, with WITHDIST)
/// is shared by another point of the whole search is replaced by a placeholder naming
/// that distance and how many share it; the others are compared whole. The whole search
/// is the same command without COUNT and with WITHDIST: a read, on both servers alike.
fn search_with_count(conn: &mut redis::Connection, step: &Step) -> Reply {
    let reply = query(conn, &step.args)?;
    let Value::Array(items) = &reply else {
        return Ok(reply);
    };
    let mut whole = step.args.clone();
    let Some(at) = whole.iter().position(|a| a.eq_ignore_ascii_case(b"count")) else {
        return Ok(reply);
    };
    whole.drain(at..at + 2);
    whole.push(b"WITHDIST".to_vec());
    let Ok(Value::Array(all)) = query(conn, &whole) else {
        return Err(format!(
            "<the whole search failed: {}>",
            super::show(&whole)
        ));
    };
    let member_of = |item: &Value| match item {
        Value::Array(parts) => parts.first().cloned(),
        other => Some(other.clone()),
    };
    let mut distance_of: BTreeMap<String, String> = BTreeMap::new();
    let mut sharing: BTreeMap<String, usize> = BTreeMap::new();
    for item in &all {
        let Value::Array(parts) = item else {
            return Err(format!("<the whole search replied {item:?}>"));
        };
        let (Some(member), Some(distance)) = (parts.first(), parts.get(1)) else {
            return Err(format!("<the whole search replied {item:?}>"));
        };
        let distance = format!("{distance:?}");
        *sharing.entry(distance.clone()).or_default() += 1;
        distance_of.insert(format!("{member:?}"), distance);
    }
    let reduced = items
        .iter()
        .map(|item| {
            let member = member_of(item)
                .map(|m| format!("{m:?}"))
                .unwrap_or_default();
            match distance_of.get(&member) {
                Some(distance) if sharing[distance] > 1 => {
                    Value::SimpleString(format!("<one of {} at {distance}>", sharing[distance]))
                }
                _ => item.clone(),
            }
        })
        .collect();
    Ok(Value::Array(reduced))
}
