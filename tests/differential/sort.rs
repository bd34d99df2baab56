//! The SORT family of the differential stream: SORT and SORT_RO (and SORT from a script)
//! over a list, a set or a sorted set built for the step, with numeric, alphabetic and
//! unparsable elements, weights in string keys and hash fields (some missing, some of
//! another type), GET patterns, LIMIT, ASC / DESC, ALPHA and STORE; then the stored list.
//! Now and then SORT runs on a shared key instead (any type: WRONGTYPE, and elements
//! other families wrote).
//!
//! Redis leaves a few orders to its hash tables and its partial quicksort, which no
//! other server shares, so the steps stay where the order is defined:
//! - a set sorted BY a pattern without `*` (its table's order) is compared as a multiset
//!   of output groups, without LIMIT, and with no GET pattern that looks a key up: the
//!   lookups, and so their `keymiss` events, would come in the table's order;
//! - a set or a sorted set sorted BY a pattern has every key the pattern names present
//!   (a missing one raises `keymiss` in the order Redis loads the elements);
//! - ALPHA BY ties keep the elements' order in Redis's merge sort (glibc's `qsort`) but
//!   not in its partial quicksort (LIMIT): with LIMIT, or from a set or sorted set (whose
//!   load order is the table's), the weights are all present and distinct.
//!
//! Redis 7.0 reads SORT's numbers with `strtod` without clearing `errno` first, so a
//! range error left by an earlier command (a SORT of `1e400`, a ZADD of `1e400`) fails
//! its next numeric SORT; Tessera judges each number alone (a deliberate difference). A
//! SORT that may read numbers is therefore preceded by a ZADD of `1.5`, whose parse
//! clears `errno` in Redis.

use super::{Check, Gen, Reply, Step, query, shuffle};
use rand::RngExt;
use redis::Value;

/// Elements that C `strtod` reads whole (leading spaces, hex and "inf" included).
const NUMERIC: &[&str] = &[
    "1", "2", "3", "10", "-3", "2.5", "1e2", "0x10", " 4", "", "inf", "-inf", "007", "-0", "0",
    "+5", "1.0",
];
/// Elements that are no number (or out of range) for SORT.
const TEXT: &[&str] = &[
    "a", "b", "c", "abc", "B", "Z", "zz", "a b", "x-1", "\u{e9}", "nan", "3 ", "1e400", "1e-310",
];
/// Numeric weights, with ties.
const NUMERIC_WEIGHTS: &[&str] = &[
    "1", "2", "2", "-1", "0", "3.5", "1e3", "", " 7", "0x1f", "-inf", "inf", "-0",
];
const BAD_WEIGHTS: &[&str] = &["x", "nan", "1e400", "7 "];
const SCORES: &[&str] = &["1", "2", "2", "0", "-1", "1.5", "inf"];
/// BY patterns with a `*` (each names one key per element: `w_<e>` or a field of `h_<e>`).
const BY_PATTERNS: &[&str] = &["w_*", "h_*->f", "h_*->f->g"];
/// BY patterns without a `*`: the collection's own order.
const KEEP_ORDER: &[&str] = &["nosort", "w_", "h_->f"];
/// GET patterns that look keys up.
const LOOKUP_GETS: &[&str] = &["w_*", "h_*->f", "h_*->g", "h_*->", "w_*x"];
/// GET patterns that look nothing up.
const PLAIN_GETS: &[&str] = &["#", "nostar"];
/// Destinations of STORE besides the shared keys.
const DESTINATIONS: &[&str] = &["sort:dst", "sort:dst2"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// What the step's source holds, so that the options can be chosen safely.
struct Fixture {
    kind: Kind,
    key: Vec<u8>,
    /// Distinct elements.
    elements: Vec<Vec<u8>>,
}

impl Gen {
    pub(super) fn sort_step(&mut self) -> Vec<Step> {
        if self.chance(0.2) {
            return self.sort_shared_key();
        }
        let mut steps = Vec::new();
        let fixture = self.sort_fixture(&mut steps);
        // SORT's options, decided first: the weights depend on them.
        let by = match self.rng.random_range(0..10) {
            0..5 => None,
            5..8 => Some(self.pick(BY_PATTERNS)),
            _ => Some(self.pick(KEEP_ORDER)),
        };
        let keeps_order = by.is_some_and(|pattern| !pattern.contains('*'));
        let alpha = self.chance(0.4);
        let descending = self.chance(0.4);
        let store = self.chance(0.3);
        let in_script = !store && self.chance(0.1);
        // A set in its table's order: no LIMIT and no lookups (see the module's notes).
        let set_in_table_order = fixture.kind == Kind::Set && keeps_order && !store && !in_script;
        let limit = (!set_in_table_order && self.chance(0.4)).then(|| {
            let offset = match self.rng.random_range(0..10) {
                0 => "-1".to_string(),
                1 => "9223372036854775807".to_string(),
                _ => self.range(0, 6).to_string(),
            };
            let count = match self.rng.random_range(0..10) {
                0 => "-1".to_string(),
                1 => "9223372036854775807".to_string(),
                _ => self.range(0, 6).to_string(),
            };
            (offset, count)
        });
        let mut gets = Vec::new();
        if self.chance(0.5) {
            for _ in 0..self.rng.random_range(1..=3) {
                let lookup = !set_in_table_order && self.chance(0.7);
                gets.push(self.pick(if lookup { LOOKUP_GETS } else { PLAIN_GETS }));
            }
        }
        let sorted_by_pattern = by.is_some() && !keeps_order;
        let every_by_key = sorted_by_pattern && fixture.kind != Kind::List;
        let distinct_alpha =
            sorted_by_pattern && alpha && (fixture.kind != Kind::List || limit.is_some());
        self.sort_weights(&mut steps, &fixture, every_by_key, distinct_alpha, by);

        let mut options: Vec<Vec<Vec<u8>>> = Vec::new();
        if let Some(pattern) = by {
            options.push(vec![self.word("by"), pattern.as_bytes().to_vec()]);
        }
        if alpha {
            options.push(vec![self.word("alpha")]);
        }
        if descending {
            options.push(vec![self.word("desc")]);
        } else if self.chance(0.2) {
            options.push(vec![self.word("asc")]);
        }
        if let Some((offset, count)) = &limit {
            options.push(vec![
                self.word("limit"),
                offset.as_bytes().to_vec(),
                count.as_bytes().to_vec(),
            ]);
        }
        for pattern in &gets {
            options.push(vec![self.word("get"), pattern.as_bytes().to_vec()]);
        }
        let destination = if self.chance(0.7) {
            self.pick(DESTINATIONS).as_bytes().to_vec()
        } else {
            self.key()
        };
        if store {
            options.push(vec![self.word("store"), destination.clone()]);
        }
        // In any order: none of these options is given twice, so none overrides another.
        shuffle(&mut self.rng, &mut options[..]);
        let mut sort_args: Vec<Vec<u8>> = options.into_iter().flatten().collect();
        let read_only = !store && self.chance(0.3);
        let name = if read_only { "sort_ro" } else { "sort" };
        let check = if set_in_table_order {
            Check::Run(groups_in_any_order)
        } else {
            Check::Exact
        };
        if !alpha {
            steps.push(clear_errno());
        }
        if in_script {
            let script = format!("return redis.call('{name}', KEYS[1], unpack(ARGV))");
            let mut args = vec![
                self.word("eval"),
                script.into_bytes(),
                b"1".to_vec(),
                fixture.key.clone(),
            ];
            args.append(&mut sort_args);
            steps.push(Step { args, check });
        } else {
            let mut args = vec![self.word(name), fixture.key.clone()];
            args.append(&mut sort_args);
            steps.push(Step { args, check });
        }
        if store {
            steps.push(Step {
                args: vec![
                    b"LRANGE".to_vec(),
                    destination,
                    b"0".to_vec(),
                    b"-1".to_vec(),
                ],
                check: Check::Exact,
            });
        }
        steps
    }

    /// Builds the source: a list, a set or a sorted set of numeric, alphabetic or mixed
    /// elements (sometimes none, sometimes enough for a sorted set's tree).
    fn sort_fixture(&mut self, steps: &mut Vec<Step>) -> Fixture {
        let kind = match self.rng.random_range(0..3) {
            0 => Kind::List,
            1 => Kind::Set,
            _ => Kind::ZSet,
        };
        let key = format!("sort:{}", self.range(0, 3)).into_bytes();
        let pool: Vec<&str> = match self.rng.random_range(0..4) {
            0 | 1 => NUMERIC.to_vec(),
            2 => TEXT.to_vec(),
            _ => NUMERIC.iter().chain(TEXT).copied().collect(),
        };
        let count = match self.rng.random_range(0..20) {
            0 => 0,
            1 => self.range(100, 160) as usize,
            _ => self.range(1, 12) as usize,
        };
        let mut elements: Vec<Vec<u8>> = Vec::new();
        for i in 0..count {
            let element = if i < 20 {
                self.pick(&pool).as_bytes().to_vec()
            } else {
                // Many: numbered ones, numeric or not as the pool is.
                let number = self.range(-500, 500);
                if pool.contains(&"a") && self.chance(0.5) {
                    format!("e{number}").into_bytes()
                } else {
                    number.to_string().into_bytes()
                }
            };
            elements.push(element);
        }
        steps.push(exact(vec![b"DEL".to_vec(), key.clone()]));
        if !elements.is_empty() {
            let mut args = match kind {
                Kind::List => vec![self.word("rpush"), key.clone()],
                Kind::Set => vec![self.word("sadd"), key.clone()],
                Kind::ZSet => vec![self.word("zadd"), key.clone()],
            };
            for element in &elements {
                if kind == Kind::ZSet {
                    args.push(self.pick(SCORES).as_bytes().to_vec());
                }
                args.push(element.clone());
            }
            steps.push(exact(args));
        }
        let mut distinct = elements;
        distinct.sort();
        distinct.dedup();
        Fixture {
            kind,
            key,
            elements: distinct,
        }
    }

    /// Weights for the elements: `w_<e>` strings and `h_<e>` hashes (fields `f`, `f->g`,
    /// `g`), each maybe missing or of another type; all present when `every_by_key`, all
    /// present and distinct text when `distinct_alpha` (for the BY pattern `by`).
    fn sort_weights(
        &mut self,
        steps: &mut Vec<Step>,
        fixture: &Fixture,
        every_by_key: bool,
        distinct_alpha: bool,
        by: Option<&str>,
    ) {
        let by_field = match by {
            Some("h_*->f") => Some("f"),
            Some("h_*->f->g") => Some("f->g"),
            _ => None,
        };
        let by_string = by == Some("w_*");
        let mut order: Vec<usize> = (0..fixture.elements.len()).collect();
        shuffle(&mut self.rng, &mut order);
        let mut strings: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
        for (index, element) in fixture.elements.iter().enumerate() {
            let distinct = format!("{}{:03}", self.pick(&["a", "b", "B", "z"]), order[index]);
            let weight = |g: &mut Gen| -> Vec<u8> {
                if distinct_alpha {
                    return distinct.clone().into_bytes();
                }
                match g.rng.random_range(0..10) {
                    0 => g.pick(BAD_WEIGHTS).as_bytes().to_vec(),
                    1..3 => g.pick(TEXT).as_bytes().to_vec(),
                    _ => g.pick(NUMERIC_WEIGHTS).as_bytes().to_vec(),
                }
            };
            let string_key = [b"w_".as_slice(), element].concat();
            let hash_key = [b"h_".as_slice(), element].concat();
            // The string weight: for w_* it must exist when required, as a string when
            // the weights must be distinct text.
            let string_needed = by_string && (every_by_key || distinct_alpha);
            match self.rng.random_range(0..10) {
                _ if string_needed && distinct_alpha => {
                    strings.push(string_key);
                    strings.push(weight(self));
                }
                0 | 1 if string_needed => {
                    // Present, but not a string.
                    steps.push(exact(vec![b"DEL".to_vec(), string_key.clone()]));
                    steps.push(exact(vec![b"RPUSH".to_vec(), string_key, b"x".to_vec()]));
                }
                0 | 1 => steps.push(exact(vec![b"DEL".to_vec(), string_key])),
                _ => {
                    strings.push(string_key);
                    strings.push(weight(self));
                }
            }
            let hash_needed = by_field.is_some() && (every_by_key || distinct_alpha);
            steps.push(exact(vec![b"DEL".to_vec(), hash_key.clone()]));
            if hash_needed || self.chance(0.8) {
                let mut args = vec![b"HSET".to_vec(), hash_key, b"other".to_vec(), b"1".to_vec()];
                for field in ["f", "f->g", "g"] {
                    let must = distinct_alpha && by_field == Some(field);
                    if must || (!distinct_alpha && self.chance(0.7)) {
                        args.push(field.as_bytes().to_vec());
                        args.push(weight(self));
                    }
                }
                steps.push(exact(args));
            }
        }
        if strings.len() > 1 {
            steps.push(exact(strings));
        }
    }

    /// SORT or SORT_RO of a shared key with orders that are defined whatever it holds:
    /// numeric (ties go by bytes), or ALPHA into a STORE (whole bytes compared; one step,
    /// which transactions may take).
    fn sort_shared_key(&mut self) -> Vec<Step> {
        let alpha_store = self.chance(0.5);
        let read_only = !alpha_store && self.chance(0.3);
        let mut args = vec![
            self.word(if read_only { "sort_ro" } else { "sort" }),
            self.key(),
        ];
        if self.chance(0.4) {
            args.push(self.word("desc"));
        }
        if self.chance(0.3) {
            args.push(self.word("limit"));
            let offset = self.range(-1, 4);
            args.push(self.num(offset));
            let count = self.range(-1, 4);
            args.push(self.num(count));
        }
        if self.chance(0.3) {
            args.push(self.word("get"));
            args.push(self.pick(&["#", "k*", "nostar"]).as_bytes().to_vec());
        }
        if alpha_store {
            args.push(self.word("alpha"));
            args.push(self.word("store"));
            args.push(self.key());
        }
        match self.rng.random_range(0..25) {
            // Errors: a word SORT does not know, an option without its argument, a LIMIT
            // that is not a number, STORE in SORT_RO.
            0 => args.push(b"junk".to_vec()),
            1 => {
                let option = self.pick(&["limit", "by", "get", "store"]);
                args.push(self.word(option));
            }
            2 => {
                args.push(self.word("limit"));
                args.push(self.bad_int());
                args.push(b"1".to_vec());
            }
            3 => {
                args.push(self.word("store"));
                args.push(self.key());
            }
            _ => {}
        }
        if alpha_store {
            vec![exact(args)]
        } else {
            vec![clear_errno(), exact(args)]
        }
    }
}

fn exact(args: Vec<Vec<u8>>) -> Step {
    Step {
        args,
        check: Check::Exact,
    }
}

/// A command after which Redis's `errno` is 0 (its score parse clears it): see the
/// module's notes.
fn clear_errno() -> Step {
    exact(
        ["ZADD", "sort:errno", "1.5", "x"]
            .iter()
            .map(|word| word.as_bytes().to_vec())
            .collect(),
    )
}

/// A set in its table's order: the output's groups (an element, or its GET values) in
/// any order. The group size comes from the command's GET options.
fn groups_in_any_order(conn: &mut redis::Connection, step: &Step) -> Reply {
    let reply = query(conn, &step.args)?;
    // The options follow the key: SORT key ..., or EVAL script 1 key ...
    let mut i = if step.args[0].eq_ignore_ascii_case(b"eval") {
        4
    } else {
        2
    };
    let mut group = 0usize;
    while i < step.args.len() {
        let word = &step.args[i];
        if word.eq_ignore_ascii_case(b"get") {
            group += 1;
            i += 1;
        } else if word.eq_ignore_ascii_case(b"by") || word.eq_ignore_ascii_case(b"store") {
            i += 1;
        } else if word.eq_ignore_ascii_case(b"limit") {
            i += 2;
        }
        i += 1;
    }
    let group = group.max(1);
    let items = match reply {
        Value::Array(items) => items,
        other => return Ok(other),
    };
    let mut groups: Vec<String> = items.chunks(group).map(|g| format!("{g:?}")).collect();
    groups.sort();
    Ok(Value::Array(
        groups.into_iter().map(Value::SimpleString).collect(),
    ))
}
