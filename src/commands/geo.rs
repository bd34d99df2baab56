//! Geo commands, with Redis 7.0's replies and errors: a geo set is a sorted set whose
//! scores are 52-bit geohashes (`crate::types::geohash` has the arithmetic).
//!
//! Logged forms: GEOADD as the ZADD it amounts to (the computed scores as integers, as
//! Redis propagates it); a search that stores (GEOSEARCHSTORE, GEORADIUS and
//! GEORADIUSBYMEMBER with STORE / STOREDIST) as the GEOSEARCHSTORE that does the same
//! (so the record names its destination first, like every *STORE), or as DEL of the
//! destination when the result is empty; reads log nothing.
//!
//! Keyspace events, as Redis 7.0 raises them: `zadd` (GEOADD, through ZADD),
//! `geosearchstore` / `georadiusstore` on the destination (or `del` when an empty result
//! deletes it), `new` when a destination is created.

use super::zsets::{exists, peek, store_result, zadd};
use super::{Action, Args, Ctx, SYNTAX_ERROR, flags, int_arg, lossy};
use crate::command;
use crate::types::geohash::{self, Cell, Search, Shape};
use crate::types::score;
use std::ffi::CStr;

pub fn commands() -> Vec<super::CommandSpec> {
    use flags::*;
    vec![
        command!(
            "geoadd",
            -5,
            WRITE | DENYOOM,
            (1, 1, 1),
            "geo",
            "Add one or more geospatial items in the geospatial index represented using a sorted set",
            geoadd
        ),
        command!(
            "geopos",
            -2,
            READONLY,
            (1, 1, 1),
            "geo",
            "Returns longitude and latitude of members of a geospatial index",
            geopos
        ),
        command!(
            "geodist",
            -4,
            READONLY,
            (1, 1, 1),
            "geo",
            "Returns the distance between two members of a geospatial index",
            geodist
        ),
        command!(
            "geohash",
            -2,
            READONLY,
            (1, 1, 1),
            "geo",
            "Returns members of a geospatial index as standard geohash strings",
            geohash_command
        ),
        command!(
            "geosearch",
            -7,
            READONLY,
            (1, 1, 1),
            "geo",
            "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle.",
            search
        ),
        command!(
            "geosearchstore",
            -8,
            WRITE | DENYOOM,
            (1, 2, 1),
            "geo",
            "Query a sorted set representing a geospatial index to fetch members inside an area of a box or a circle, and store the result in another key.",
            search
        ),
        command!(
            "georadius",
            -6,
            WRITE | DENYOOM | MOVABLEKEYS,
            (1, 1, 1),
            "geo",
            "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a point",
            search
        ),
        command!(
            "georadius_ro",
            -6,
            READONLY,
            (1, 1, 1),
            "geo",
            "A read-only variant for GEORADIUS",
            search
        ),
        command!(
            "georadiusbymember",
            -5,
            WRITE | DENYOOM | MOVABLEKEYS,
            (1, 1, 1),
            "geo",
            "Query a sorted set representing a geospatial index to fetch members matching a given maximum distance from a member",
            search
        ),
        command!(
            "georadiusbymember_ro",
            -5,
            READONLY,
            (1, 1, 1),
            "geo",
            "A read-only variant for GEORADIUSBYMEMBER",
            search
        ),
    ]
}

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NOT_DECODED: &str = "ERR could not decode requested zset member";

/// C's `printf` of one double (Redis's texts come from it; Rust's formatting rounds
/// ties differently in places).
fn c_format(format: &CStr, value: f64) -> String {
    let mut buf = vec![0u8; 400];
    // SAFETY: `format` is NUL-terminated and takes exactly one double; snprintf never
    // writes past the size given, and returns the length it wanted.
    let len = unsafe {
        libc::snprintf(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            format.as_ptr(),
            value,
        )
    };
    let len = (len.max(0) as usize).min(buf.len() - 1);
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// A coordinate as Redis replies it (`addReplyHumanLongDouble`): "%.17Lf" of the value
/// (a double widened exactly, so "%.17f" is the same text) without trailing zeros.
fn coordinate_text(value: f64) -> String {
    let mut text = c_format(c"%.17f", value);
    if text.contains('.') {
        let kept = text.trim_end_matches('0').trim_end_matches('.').len();
        text.truncate(kept);
    }
    if text == "-0" {
        text = "0".to_string();
    }
    text
}

/// A coordinate reply: a bulk string in RESP2, a double in RESP3, with the same text.
fn reply_coordinate(ctx: &mut Ctx, value: f64) {
    let text = coordinate_text(value);
    if ctx.client.resp3 {
        ctx.out.buf.push(b',');
        ctx.out.buf.extend_from_slice(text.as_bytes());
        ctx.out.buf.extend_from_slice(b"\r\n");
    } else {
        ctx.out.bulk(text.as_bytes());
    }
}

/// A distance as Redis replies it (`fixedpoint_d2string` with 4 digits): the value
/// times 10^4 rounded to an integer (half to even, as `llrint`; what x86-64 gives for
/// NaN and out of range values), printed with four decimals.
fn distance_text(distance: f64) -> String {
    if distance == 0.0 {
        return "0.0000".to_string();
    }
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let rounded = (distance * 10000.0).round_ties_even();
    let scaled = if rounded.is_nan() || !(-TWO_63..TWO_63).contains(&rounded) {
        i64::MIN
    } else {
        rounded as i64
    };
    let sign = if scaled < 0 { "-" } else { "" };
    let magnitude = scaled.unsigned_abs();
    format!("{sign}{}.{:04}", magnitude / 10000, magnitude % 10000)
}

fn reply_distance(ctx: &mut Ctx, distance: f64) {
    ctx.out.bulk(distance_text(distance).as_bytes());
}

/// Parses a longitude, latitude pair, or replies Redis's error.
fn parse_position(ctx: &mut Ctx, longitude: &[u8], latitude: &[u8]) -> Option<(f64, f64)> {
    let (Some(x), Some(y)) = (score::parse(longitude), score::parse(latitude)) else {
        ctx.out.error(NOT_FLOAT);
        return None;
    };
    if !(geohash::LONG_MIN..=geohash::LONG_MAX).contains(&x)
        || !(geohash::LAT_MIN..=geohash::LAT_MAX).contains(&y)
    {
        let message = format!(
            "ERR invalid longitude,latitude pair {},{}",
            c_format(c"%f", x),
            c_format(c"%f", y)
        );
        ctx.out.error(&message);
        return None;
    }
    Some((x, y))
}

/// The factor from a unit to meters, or Redis's error.
fn parse_unit(ctx: &mut Ctx, unit: &[u8]) -> Option<f64> {
    let factor = match lossy(unit).to_ascii_lowercase().as_str() {
        "m" => 1.0,
        "km" => 1000.0,
        "ft" => 0.3048,
        "mi" => 1609.34,
        _ => {
            ctx.out
                .error("ERR unsupported unit provided. please use M, KM, FT, MI");
            return None;
        }
    };
    Some(factor)
}

/// A non-negative size, or Redis's error (`need` names it when it is not a number).
fn parse_size(ctx: &mut Ctx, text: &[u8], need: &str) -> Option<f64> {
    let Some(value) = score::parse(text) else {
        ctx.out.error(need);
        return None;
    };
    Some(value)
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: the ZADD of the scores.
fn geoadd(ctx: &mut Ctx, args: &Args) -> Action {
    let (mut nx, mut xx) = (false, false);
    let mut at = 2;
    while at < args.len() {
        match lossy(args[at]).to_ascii_lowercase().as_str() {
            "nx" => nx = true,
            "xx" => xx = true,
            "ch" => {}
            _ => break,
        }
        at += 1;
    }
    if !(args.len() - at).is_multiple_of(3) || (nx && xx) {
        ctx.out.error(SYNTAX_ERROR);
        return Action::None;
    }
    let mut scores = Vec::with_capacity((args.len() - at) / 3);
    for triple in args[at..].chunks(3) {
        let Some((x, y)) = parse_position(ctx, triple[0], triple[1]) else {
            return Action::None;
        };
        // Within the limits just checked, the encoding always succeeds.
        let bits = geohash::score_of(x, y).unwrap_or(0);
        scores.push(itoa::Buffer::new().format(bits).as_bytes().to_vec());
    }
    let mut zadd_args: Vec<&[u8]> = Vec::with_capacity(at + scores.len() * 2);
    zadd_args.push(b"ZADD");
    zadd_args.extend_from_slice(&args[1..at]);
    for (triple, score) in args[at..].chunks(3).zip(&scores) {
        zadd_args.push(score);
        zadd_args.push(triple[2]);
    }
    zadd(ctx, &zadd_args)
}

/// The position a member's score stands for, if the member is there.
fn member_position(ctx: &Ctx, key: &[u8], member: &[u8]) -> Option<(f64, f64)> {
    let score = peek(ctx.keyspace, ctx.client.db, key)?.score(member)?;
    Some(geohash::position_of(score))
}

fn geopos(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        let position = found
            .then(|| member_position(ctx, args[1], member))
            .flatten();
        match position {
            Some((x, y)) => {
                ctx.out.array(2);
                reply_coordinate(ctx, x);
                reply_coordinate(ctx, y);
            }
            None => ctx.out.null_array(),
        }
    }
    Action::None
}

fn geodist(ctx: &mut Ctx, args: &Args) -> Action {
    let to_meters = match args.len() {
        4 => 1.0,
        5 => match parse_unit(ctx, args[4]) {
            Some(factor) => factor,
            None => return Action::None,
        },
        _ => {
            ctx.out.error(SYNTAX_ERROR);
            return Action::None;
        }
    };
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    let positions = found
        .then(|| {
            let first = member_position(ctx, args[1], args[2])?;
            let second = member_position(ctx, args[1], args[3])?;
            Some((first, second))
        })
        .flatten();
    match positions {
        Some(((x1, y1), (x2, y2))) => {
            reply_distance(ctx, geohash::distance(x1, y1, x2, y2) / to_meters)
        }
        None => ctx.out.null(),
    }
    Action::None
}

fn geohash_command(ctx: &mut Ctx, args: &Args) -> Action {
    let Ok(found) = exists(ctx, args[1]) else {
        return Action::None;
    };
    ctx.out.array(args.len() - 2);
    for member in &args[2..] {
        let score = found
            .then(|| peek(ctx.keyspace, ctx.client.db, args[1])?.score(member))
            .flatten();
        match score {
            Some(score) => ctx.out.bulk(&geohash::text_of(score)),
            None => ctx.out.null(),
        }
    }
    Action::None
}

/// Which of the search commands runs (they share one parser, as in Redis).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Radius { read_only: bool },
    RadiusByMember { read_only: bool },
    Search,
    SearchStore,
}

impl Form {
    fn of(name: &[u8]) -> Form {
        match lossy(name).to_ascii_lowercase().as_str() {
            "georadius" => Form::Radius { read_only: false },
            "georadius_ro" => Form::Radius { read_only: true },
            "georadiusbymember" => Form::RadiusByMember { read_only: false },
            "georadiusbymember_ro" => Form::RadiusByMember { read_only: true },
            "geosearch" => Form::Search,
            _ => Form::SearchStore,
        }
    }

    fn is_search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }

    fn may_store(self) -> bool {
        matches!(
            self,
            Form::Radius { read_only: false } | Form::RadiusByMember { read_only: false }
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Order {
    Unsorted,
    Ascending,
    Descending,
}

/// Where a search is centred, as given (for the logged form).
enum Centre<'a> {
    Member(&'a [u8]),
    Position(&'a [u8], &'a [u8]),
}

/// The area as given: a radius and unit, or a width, height and unit.
enum Area<'a> {
    Radius(&'a [u8], &'a [u8]),
    Box(&'a [u8], &'a [u8], &'a [u8]),
}

/// A parsed search request.
struct Request<'a> {
    centre_text: Option<Centre<'a>>,
    area_text: Option<Area<'a>>,
    position: (f64, f64),
    shape: Shape,
    to_meters: f64,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    order: Order,
    count: i64,
    any: bool,
    store: Option<&'a [u8]>,
    store_dist: bool,
}

/// Radius and unit, or Redis's error.
fn parse_radius(ctx: &mut Ctx, radius: &[u8], unit: &[u8]) -> Option<(f64, f64)> {
    let radius = parse_size(ctx, radius, "ERR need numeric radius")?;
    if radius < 0.0 {
        ctx.out.error("ERR radius cannot be negative");
        return None;
    }
    Some((radius, parse_unit(ctx, unit)?))
}

/// Width, height and unit, or Redis's error.
fn parse_box(ctx: &mut Ctx, width: &[u8], height: &[u8], unit: &[u8]) -> Option<(f64, f64, f64)> {
    let width = parse_size(ctx, width, "ERR need numeric width")?;
    let height = parse_size(ctx, height, "ERR need numeric height")?;
    if height < 0.0 || width < 0.0 {
        ctx.out.error("ERR height or width cannot be negative");
        return None;
    }
    Some((width, height, parse_unit(ctx, unit)?))
}

/// Parses every argument after the source key in Redis's order of checks; None after an
/// error reply. `found`: the source exists (a member centre is looked up only then).
fn parse_request<'a>(
    ctx: &mut Ctx,
    args: &'a Args,
    form: Form,
    source: &[u8],
    found: bool,
) -> Option<Request<'a>> {
    let mut request = Request {
        centre_text: None,
        area_text: None,
        position: (0.0, 0.0),
        shape: Shape::Radius(0.0),
        to_meters: 1.0,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        order: Order::Unsorted,
        count: 0,
        any: false,
        store: None,
        store_dist: false,
    };
    let base = match form {
        Form::Radius { .. } => {
            request.position = parse_position(ctx, args[2], args[3])?;
            let (radius, to_meters) = parse_radius(ctx, args[4], args[5])?;
            (request.shape, request.to_meters) = (Shape::Radius(radius), to_meters);
            request.centre_text = Some(Centre::Position(args[2], args[3]));
            request.area_text = Some(Area::Radius(args[4], args[5]));
            6
        }
        Form::RadiusByMember { .. } => {
            // Without a source nothing is looked up or checked here (Redis goes on to
            // parse the options only to choose its reply).
            if found {
                let Some(position) = member_position(ctx, source, args[2]) else {
                    ctx.out.error(NOT_DECODED);
                    return None;
                };
                request.position = position;
                let (radius, to_meters) = parse_radius(ctx, args[3], args[4])?;
                (request.shape, request.to_meters) = (Shape::Radius(radius), to_meters);
            }
            request.centre_text = Some(Centre::Member(args[2]));
            request.area_text = Some(Area::Radius(args[3], args[4]));
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            request.store = Some(args[1]);
            3
        }
    };
    let (mut from_member, mut from_position, mut by_radius, mut by_box) =
        (false, false, false, false);
    let remaining = args.len() - base;
    let mut i = 0;
    while i < remaining {
        let arg = lossy(args[base + i]).to_ascii_lowercase();
        let next = |n: usize| args[base + i + n];
        match arg.as_str() {
            "withdist" => request.with_dist = true,
            "withhash" => request.with_hash = true,
            "withcoord" => request.with_coord = true,
            "any" => request.any = true,
            "asc" => request.order = Order::Ascending,
            "desc" => request.order = Order::Descending,
            "count" if i + 1 < remaining => {
                let count = int_arg(ctx, next(1))?;
                if count <= 0 {
                    ctx.out.error("ERR COUNT must be > 0");
                    return None;
                }
                request.count = count;
                i += 1;
            }
            "store" | "storedist" if i + 1 < remaining && form.may_store() => {
                request.store = Some(next(1));
                request.store_dist = arg == "storedist";
                i += 1;
            }
            "storedist" if form == Form::SearchStore => request.store_dist = true,
            "frommember" if i + 1 < remaining && form.is_search() && !from_position => {
                if found {
                    let Some(position) = member_position(ctx, source, next(1)) else {
                        ctx.out.error(NOT_DECODED);
                        return None;
                    };
                    request.position = position;
                }
                request.centre_text = Some(Centre::Member(next(1)));
                from_member = true;
                i += 1;
            }
            "fromlonlat" if i + 2 < remaining && form.is_search() && !from_member => {
                request.position = parse_position(ctx, next(1), next(2))?;
                request.centre_text = Some(Centre::Position(next(1), next(2)));
                from_position = true;
                i += 2;
            }
            "byradius" if i + 2 < remaining && form.is_search() && !by_box => {
                let (radius, to_meters) = parse_radius(ctx, next(1), next(2))?;
                (request.shape, request.to_meters) = (Shape::Radius(radius), to_meters);
                request.area_text = Some(Area::Radius(next(1), next(2)));
                by_radius = true;
                i += 2;
            }
            "bybox" if i + 3 < remaining && form.is_search() && !by_radius => {
                let (width, height, to_meters) = parse_box(ctx, next(1), next(2), next(3))?;
                (request.shape, request.to_meters) = (Shape::Box { width, height }, to_meters);
                request.area_text = Some(Area::Box(next(1), next(2), next(3)));
                by_box = true;
                i += 3;
            }
            _ => {
                ctx.out.error(SYNTAX_ERROR);
                return None;
            }
        }
        i += 1;
    }
    if request.store.is_some() && (request.with_dist || request.with_hash || request.with_coord) {
        let what = if form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        ctx.out.error(&format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        ));
        return None;
    }
    if form.is_search() && !(from_member || from_position) {
        ctx.out.error(&format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
            lossy(args[0])
        ));
        return None;
    }
    if form.is_search() && !(by_radius || by_box) {
        ctx.out.error(&format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {}",
            lossy(args[0])
        ));
        return None;
    }
    if request.any && request.count == 0 {
        ctx.out
            .error("ERR the ANY argument requires COUNT argument");
        return None;
    }
    Some(request)
}

/// One member found inside the area.
struct Point {
    member: Vec<u8>,
    score: f64,
    longitude: f64,
    latitude: f64,
    distance: f64,
}

/// Scans the cells of the search as Redis does: each cell's score range in turn, the
/// same cell twice in a row only once, stopping at `limit` points (0: no limit).
fn find_points(ctx: &Ctx, source: &[u8], search: &Search, limit: usize) -> Vec<Point> {
    let mut points = Vec::new();
    let Some(zset) = peek(ctx.keyspace, ctx.client.db, source) else {
        return points;
    };
    let cells = search.cells();
    let full = |points: &Vec<Point>| limit > 0 && points.len() >= limit;
    // Redis compares a cell with the last one scanned only once a cell after the first
    // has been scanned; kept as it is, since it decides which duplicates appear.
    let mut last_scanned = 0;
    for (i, cell) in cells.iter().enumerate() {
        if *cell == Cell::default() {
            continue;
        }
        if last_scanned != 0 && *cell == cells[last_scanned] {
            continue;
        }
        if full(&points) {
            break;
        }
        let (min, max) = geohash::score_range(*cell);
        let (min, max) = (min as f64, max as f64);
        if min < max {
            for (member, score) in zset.iter_from(min) {
                if score >= max {
                    break;
                }
                let (longitude, latitude) = geohash::position_of(score);
                if let Some(distance) = search.distance_if_inside(longitude, latitude) {
                    points.push(Point {
                        member: member.into_owned(),
                        score,
                        longitude,
                        latitude,
                        distance,
                    });
                }
                if full(&points) {
                    break;
                }
            }
        }
        last_scanned = i;
    }
    points
}

/// Redis's comparison of two distances (NaN compares as smaller).
fn compare_distance(a: f64, b: f64) -> std::cmp::Ordering {
    if a > b {
        std::cmp::Ordering::Greater
    } else if a == b {
        std::cmp::Ordering::Equal
    } else {
        std::cmp::Ordering::Less
    }
}

/// GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and their _RO forms.
fn search(ctx: &mut Ctx, args: &Args) -> Action {
    let form = Form::of(args[0]);
    let source = if form == Form::SearchStore {
        args[2]
    } else {
        args[1]
    };
    // A read lookup even in the forms that store (Redis's lookupKeyRead).
    let Ok(found) = ctx.reading(|ctx| exists(ctx, source)) else {
        return Action::None;
    };
    let Some(mut request) = parse_request(ctx, args, form, source, found) else {
        return Action::None;
    };
    let event = if form.is_search() {
        "geosearchstore"
    } else {
        "georadiusstore"
    };
    if !found {
        match request.store {
            Some(destination) => {
                store_result(ctx, destination, Vec::new(), event, &[b"DEL", destination])
            }
            None => ctx.out.array(0),
        }
        return Action::None;
    }
    // COUNT returns the nearest ones, so it sorts unless ANY asked for the first found.
    if request.count != 0 && request.order == Order::Unsorted && !request.any {
        request.order = Order::Ascending;
    }
    let search = Search {
        longitude: request.position.0,
        latitude: request.position.1,
        shape: request.shape,
        to_meters: request.to_meters,
    };
    let limit = if request.any {
        request.count as usize
    } else {
        0
    };
    let mut points = find_points(ctx, source, &search, limit);
    if points.is_empty() && request.store.is_none() {
        ctx.out.array(0);
        return Action::None;
    }
    let returned = if request.count == 0 || (points.len() as i64) < request.count {
        points.len()
    } else {
        request.count as usize
    };
    // A stable sort, as glibc's qsort (a merge sort) is: ties keep the order found.
    match request.order {
        Order::Unsorted => {}
        Order::Ascending => points.sort_by(|a, b| compare_distance(a.distance, b.distance)),
        Order::Descending => points.sort_by(|a, b| compare_distance(b.distance, a.distance)),
    }
    points.truncate(returned);
    for point in &mut points {
        point.distance /= request.to_meters;
    }
    match request.store {
        None => reply_points(ctx, &request, &points),
        Some(destination) => {
            let elements: Vec<(Vec<u8>, f64)> = points
                .into_iter()
                .map(|p| {
                    let score = if request.store_dist {
                        p.distance
                    } else {
                        p.score
                    };
                    (p.member, score)
                })
                .collect();
            if elements.is_empty() {
                store_result(ctx, destination, elements, event, &[b"DEL", destination]);
            } else {
                let logged = logged_form(&request, destination, source);
                let logged: Vec<&[u8]> = logged.iter().map(Vec::as_slice).collect();
                store_result(ctx, destination, elements, event, &logged);
            }
        }
    }
    Action::None
}

fn reply_points(ctx: &mut Ctx, request: &Request, points: &[Point]) {
    let extras = [request.with_dist, request.with_hash, request.with_coord]
        .iter()
        .filter(|&&on| on)
        .count();
    ctx.out.array(points.len());
    for point in points {
        if extras > 0 {
            ctx.out.array(extras + 1);
        }
        ctx.out.bulk(&point.member);
        if request.with_dist {
            reply_distance(ctx, point.distance);
        }
        if request.with_hash {
            ctx.out.integer(point.score as i64);
        }
        if request.with_coord {
            ctx.out.array(2);
            reply_coordinate(ctx, point.longitude);
            reply_coordinate(ctx, point.latitude);
        }
    }
}

/// The GEOSEARCHSTORE that stores what this search stored, from the arguments as given
/// (replayed on the same data, it finds the same points).
fn logged_form(request: &Request, destination: &[u8], source: &[u8]) -> Vec<Vec<u8>> {
    let mut logged: Vec<Vec<u8>> = vec![
        b"GEOSEARCHSTORE".to_vec(),
        destination.to_vec(),
        source.to_vec(),
    ];
    match request.centre_text {
        Some(Centre::Member(member)) => {
            logged.extend([b"FROMMEMBER".to_vec(), member.to_vec()]);
        }
        Some(Centre::Position(x, y)) => {
            logged.extend([b"FROMLONLAT".to_vec(), x.to_vec(), y.to_vec()]);
        }
        None => {}
    }
    match request.area_text {
        Some(Area::Radius(radius, unit)) => {
            logged.extend([b"BYRADIUS".to_vec(), radius.to_vec(), unit.to_vec()]);
        }
        Some(Area::Box(width, height, unit)) => logged.extend([
            b"BYBOX".to_vec(),
            width.to_vec(),
            height.to_vec(),
            unit.to_vec(),
        ]),
        None => {}
    }
    match request.order {
        Order::Unsorted => {}
        Order::Ascending => logged.push(b"ASC".to_vec()),
        Order::Descending => logged.push(b"DESC".to_vec()),
    }
    if request.count != 0 {
        logged.push(b"COUNT".to_vec());
        logged.push(request.count.to_string().into_bytes());
        if request.any {
            logged.push(b"ANY".to_vec());
        }
    }
    if request.store_dist {
        logged.push(b"STOREDIST".to_vec());
    }
    logged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_follow_redis() {
        assert_eq!(coordinate_text(13.361389338970184), "13.36138933897018433");
        assert_eq!(coordinate_text(180.0), "180");
        assert_eq!(coordinate_text(-0.0), "0");
        assert_eq!(distance_text(0.0), "0.0000");
        assert_eq!(distance_text(0.00006), "0.0001");
        assert_eq!(distance_text(166274.15156960033), "166274.1516");
        assert_eq!(distance_text(10.01), "10.0100");
    }
}
