//! The directives of Redis 7.0 that Tessera accepts and does not act on: some of
//! replication's, cluster, TLS, the process's dealings with the OS, and tunings of
//! machinery Tessera does not have. A redis.conf that sets them loads; CONFIG GET lists
//! them with Redis's defaults; CONFIG SET checks a value as Redis does (its types, bounds
//! and error texts) and keeps it; CONFIG REWRITE writes them as Redis would. Nothing else
//! reads them, but for a few replication directives a replica's link reads when it
//! connects, and `shutdown-on-sigterm` / `shutdown-on-sigint`, read when the signal
//! comes (see the table).
//!
//! Where accepting a value would claim something Tessera cannot do that Redis itself
//! refuses in the same circumstances, the value is refused with Redis's words:
//! `activedefrag yes` (Redis built without its own jemalloc), and turning TLS on (a Redis
//! without certificates configured). docs/compatibility.md lists them all.

use super::directives::{Directive, one, parse_bool, parse_int_in, parse_maxmemory, yes_no};
use super::rewrite::Rewrite;
use super::{Config, ValueError};
use std::collections::BTreeMap;

/// The values set for inert directives, by primary name, as CONFIG GET prints them. A
/// directive not here has its default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InertValues(BTreeMap<&'static str, String>);

impl InertValues {
    fn get(&self, name: &str, default: &str) -> String {
        self.0.get(name).map_or(default, String::as_str).to_string()
    }

    fn set(&mut self, name: &'static str, value: String) {
        self.0.insert(name, value);
    }
}

/// One name of an enumeration and its value (two names may share one: `yes` and
/// `relative`; CONFIG GET prints the first).
pub struct Choice {
    name: &'static str,
    value: u32,
}

const fn choice(name: &'static str, value: u32) -> Choice {
    Choice { name, value }
}

/// What an inert directive's value is: how it is read, checked and printed (Redis's
/// config types).
pub enum Kind {
    /// `yes` or `no`.
    Bool,
    /// An integer as Redis's `string2ll` reads it, within the bounds.
    Int { min: i64, max: i64 },
    /// A byte count (`memtoull`: digits and a unit), within the bounds.
    Memory { min: u64, max: u64 },
    /// A byte count, or a percentage `N%` up to 100 (`maxmemory-clients`).
    MemoryOrPercent,
    /// One of the names.
    Enum(&'static [Choice]),
    /// Any of the names, several at once (their values are bit flags).
    Flags(&'static [Choice]),
    /// Any string; `nullable`: the empty string means unset (no line in a rewritten file).
    Text { nullable: bool },
    /// `<host> <port>`, or `no one` (empty: not a replica).
    ReplicaOf,
    /// Three integers in -2000..=2000 (`oom-score-adj-values`).
    OomScoreAdjValues,
}

impl Kind {
    /// How CONFIG REWRITE writes a directive of this kind.
    pub const fn rewrite(&self) -> Rewrite {
        match self {
            Kind::Memory { .. } | Kind::MemoryOrPercent => Rewrite::Memory,
            Kind::Text { nullable: true } => Rewrite::QuotedUnlessEmpty,
            Kind::Text { nullable: false } => Rewrite::Quoted,
            Kind::ReplicaOf => Rewrite::PlainUnlessEmpty,
            _ => Rewrite::Plain,
        }
    }

    /// Whether the value may be given as several words.
    const fn multiple_words(&self) -> bool {
        matches!(
            self,
            Kind::Flags(_) | Kind::ReplicaOf | Kind::OomScoreAdjValues
        )
    }

    /// Reads a value given as `args` (the config file's words, or CONFIG SET's one
    /// string, split at spaces when the kind takes several words): the value as CONFIG
    /// GET prints it, or Redis's reason for refusing it.
    pub fn read(&self, args: &[String]) -> Result<String, ValueError> {
        let split: Vec<String>;
        let args = if self.multiple_words() && args.len() == 1 && !args[0].is_empty() {
            split = args[0].split_whitespace().map(str::to_string).collect();
            &split[..]
        } else {
            args
        };
        match self {
            Kind::Bool => Ok(yes_no(parse_bool(args)?)),
            Kind::Int { min, max } => Ok(parse_int_in(args, *min, *max)?.to_string()),
            Kind::Memory { min, max } => {
                let bytes = parse_maxmemory(args)?;
                if bytes < *min || bytes > *max {
                    return Err(ValueError::OutOfRange {
                        min: (*min).into(),
                        max: (*max).into(),
                    });
                }
                Ok(bytes.to_string())
            }
            Kind::MemoryOrPercent => read_memory_or_percent(one(args)?),
            Kind::Enum(choices) => {
                let word = one(args)?;
                let value = choice_value(choices, word).ok_or_else(|| not_among(choices))?;
                Ok(choice_name(choices, value))
            }
            Kind::Flags(choices) => {
                if args.is_empty() {
                    return Err(not_among(choices));
                }
                let mut flags = 0;
                for word in args {
                    flags |= choice_value(choices, word).ok_or_else(|| not_among(choices))?;
                }
                Ok(flags_names(choices, flags))
            }
            Kind::Text { .. } => Ok(one(args)?.to_string()),
            Kind::ReplicaOf => read_replica_of(args),
            Kind::OomScoreAdjValues => read_oom_score_adj_values(args),
        }
    }
}

fn choice_value(choices: &[Choice], word: &str) -> Option<u32> {
    choices
        .iter()
        .find(|c| c.name.eq_ignore_ascii_case(word))
        .map(|c| c.value)
}

/// The first name with `value` (Redis's `configEnumGetName`).
fn choice_name(choices: &[Choice], value: u32) -> String {
    choices
        .iter()
        .find(|c| c.value == value)
        .map_or("unknown", |c| c.name)
        .to_string()
}

/// Flags as Redis prints them: the name of the exact value if one has it, else the
/// names whose bits are set, in the table's order.
fn flags_names(choices: &[Choice], flags: u32) -> String {
    if let Some(exact) = choices.iter().find(|c| c.value == flags) {
        return exact.name.to_string();
    }
    let mut names = Vec::new();
    let mut unmatched = flags;
    for c in choices {
        if c.value != 0 && c.value & unmatched == c.value {
            names.push(c.name);
            unmatched &= !c.value;
        }
    }
    if names.is_empty() || unmatched != 0 {
        return "unknown".into();
    }
    names.join(" ")
}

fn not_among(choices: &[Choice]) -> ValueError {
    let names: Vec<&str> = choices.iter().map(|c| c.name).collect();
    ValueError::NotAmong(names.join(", "))
}

/// `maxmemory-clients`: a byte count first; else `N%` (0..=100), kept negative as
/// Redis keeps it, printed back as `N%`.
fn read_memory_or_percent(text: &str) -> Result<String, ValueError> {
    let percent_too_high = ValueError::Invalid("percentage argument must be less or equal to 100");
    if let Ok(bytes) = parse_maxmemory(&[text.to_string()]) {
        // Redis holds it in a signed type: a count past i64::MAX reads as a percentage.
        let signed = bytes as i64;
        return match signed {
            0.. => Ok(bytes.to_string()),
            -100..=-1 => Ok(format!("{}%", -signed)),
            _ => Err(percent_too_high),
        };
    }
    let percent = text
        .strip_suffix('%')
        .filter(|digits| !digits.is_empty())
        .and_then(|digits| crate::resp::parse_i64(digits.as_bytes()))
        .filter(|&n| n >= 0)
        .ok_or(ValueError::Invalid(
            "argument must be a memory or percent value",
        ))?;
    if percent > 100 {
        return Err(percent_too_high);
    }
    Ok(format!("{percent}%"))
}

/// An octal number up to `max` (`unixsocketperm`), as C's `strtoll(text, &end, 8)` reads it with nothing left over:
/// leading white space, a sign, octal digits (none at all reads the empty text as 0).
pub(super) fn octal(text: &str, max: u64) -> Result<u64, ValueError> {
    let bad = ValueError::Invalid("argument couldn't be parsed as an octal number");
    let body = text.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let (negative, digits) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    let value: i64 = if digits.is_empty() {
        if !text.is_empty() {
            return Err(bad);
        }
        0
    } else {
        let magnitude = i64::from_str_radix(digits, 8).map_err(|_| bad)?;
        if negative { -magnitude } else { magnitude }
    };
    // Redis checks the bounds of an unsigned directive on the value as unsigned.
    if value < 0 || value as u64 > max {
        return Err(ValueError::OctalOutOfRange { min: 0, max });
    }
    Ok(value as u64)
}

/// `replicaof <host> <port>` / `no one`.
fn read_replica_of(args: &[String]) -> Result<String, ValueError> {
    let [host, port] = args else {
        return Err(ValueError::WrongArgumentCount);
    };
    if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
        return Ok(String::new());
    }
    let port = c_long(port)
        .filter(|p| (0..=65535).contains(p))
        .ok_or(ValueError::Invalid("Invalid master port"))?;
    Ok(format!("{host} {port}"))
}

/// `oom-score-adj-values`: three integers in -2000..=2000.
fn read_oom_score_adj_values(args: &[String]) -> Result<String, ValueError> {
    if args.len() != 3 {
        return Err(ValueError::WrongArgumentCount);
    }
    let values = args
        .iter()
        .map(|word| c_long(word).filter(|v| (-2000..=2000).contains(v)))
        .collect::<Option<Vec<i64>>>()
        .ok_or(ValueError::Invalid(
            "Invalid oom-score-adj-values, elements must be between -2000 and 2000.",
        ))?;
    Ok(values
        .iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(" "))
}

/// A number as C's `strtol(text, &end, 10)` reads it with nothing left over (leading
/// white space and a sign allowed; no digits reads as 0).
fn c_long(text: &str) -> Option<i64> {
    let body = text.trim_start_matches(|c: char| c.is_ascii_whitespace());
    let (negative, digits) = match body.as_bytes().first() {
        Some(b'-') => (true, &body[1..]),
        Some(b'+') => (false, &body[1..]),
        _ => (false, body),
    };
    if digits.is_empty() {
        return body.is_empty().then_some(0);
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let magnitude: i64 = digits.parse().ok()?;
    Some(if negative { -magnitude } else { magnitude })
}

/// `activedefrag yes`: Redis refuses it when built without its own jemalloc, as Debian's
/// build is; Tessera has no defragmentation either.
fn no_active_defrag(value: String) -> Result<String, ValueError> {
    if value == "yes" {
        return Err(ValueError::Invalid(
            "Active defragmentation cannot be enabled: it requires a Redis server compiled \
             with a modified Jemalloc like the one shipped by default with the Redis source \
             distribution",
        ));
    }
    Ok(value)
}

/// Turning TLS on (a TLS port, TLS replication or cluster bus): what Redis answers when
/// no certificate is configured; Tessera speaks no TLS.
fn no_tls(value: String) -> Result<String, ValueError> {
    if value != "0" && value != "no" {
        return Err(ValueError::Invalid(
            "Unable to update TLS configuration. Check server logs.",
        ));
    }
    Ok(value)
}

/// Redis's `isValidAnnouncedHostname`.
fn announced_hostname(value: String) -> Result<String, ValueError> {
    if value.len() >= 256 {
        return Err(ValueError::Invalid(
            "Hostnames must be less than 256 characters",
        ));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    {
        return Err(ValueError::Invalid(
            "Hostnames may only contain alphanumeric characters, hyphens or dots",
        ));
    }
    Ok(value)
}

/// Redis's `validateProcTitleTemplate`: `{name}` variables it knows, `{{` for a brace,
/// and something left once expanded with an empty title.
fn proc_title_template(value: String) -> Result<String, ValueError> {
    const VARIABLES: &[&str] = &[
        "title",
        "listen-addr",
        "server-mode",
        "config-file",
        "port",
        "tls-port",
        "unixsocket",
    ];
    let invalid =
        || ValueError::Invalid("template format is invalid or contains unknown variables");
    let mut expanded = String::new();
    let mut rest = value.as_str();
    while let Some(open) = rest.find('{') {
        expanded.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return Err(invalid());
        }
        if let Some(quoted) = after.strip_prefix('{') {
            expanded.push('{');
            rest = quoted;
            continue;
        }
        let close = after.find('}').ok_or_else(invalid)?;
        let variable = &after[..close];
        if !VARIABLES.contains(&variable) {
            return Err(invalid());
        }
        // What each variable stands for does not matter here, only whether it is empty:
        // the title is (the check expands with an empty one), so are the server mode of a
        // server outside a cluster and an unset unix socket; the others never are.
        if !matches!(variable, "title" | "server-mode" | "unixsocket") {
            expanded.push('x');
        }
        rest = &after[close + 1..];
    }
    expanded.push_str(rest);
    if expanded.trim_matches(' ').is_empty() {
        return Err(invalid());
    }
    Ok(value)
}

/// `shutdown-on-sigint` / `shutdown-on-sigterm`: not both `save` and `nosave`.
fn shutdown_flags(value: String) -> Result<String, ValueError> {
    let words: Vec<&str> = value.split(' ').collect();
    if words.contains(&"save") && words.contains(&"nosave") {
        return Err(ValueError::Invalid(
            "shutdown options SAVE and NOSAVE can't be used simultaneously",
        ));
    }
    Ok(value)
}

fn as_read(value: String) -> Result<String, ValueError> {
    Ok(value)
}

/// An inert directive: its name, kind, default (as CONFIG GET prints it) and, if any,
/// what becomes of a value once read (a further check, or Redis's adjustment). Mutable
/// unless marked `.immutable()`.
macro_rules! inert {
    ($name:literal, $kind:expr, $default:literal) => {
        inert!($name, $kind, $default, as_read)
    };
    ($name:literal, $kind:expr, $default:literal, $settle:expr) => {
        Directive {
            name: $name,
            alias: None,
            mutable: true,
            hidden: false,
            rewrite: $kind.rewrite(),
            get: |c: &Config| c.inert.get($name, $default),
            set: |c: &mut Config, args: &[String]| {
                let value = $settle($kind.read(args)?)?;
                c.inert.set($name, value);
                Ok(())
            },
        }
    };
}

impl Directive {
    /// The directive, refused by CONFIG SET as immutable.
    const fn immutable(mut self) -> Directive {
        self.mutable = false;
        self
    }
}

const INT_MAX: i64 = i32::MAX as i64;
const UINT_MAX: i64 = u32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;

const fn int(min: i64, max: i64) -> Kind {
    Kind::Int { min, max }
}

const fn memory(min: u64, max: u64) -> Kind {
    Kind::Memory { min, max }
}

const BOOL: Kind = Kind::Bool;
const TEXT: Kind = Kind::Text { nullable: false };
/// A string whose empty value means unset.
const NULLABLE: Kind = Kind::Text { nullable: true };

const SUPERVISED: &[Choice] = &[
    choice("upstart", 1),
    choice("systemd", 2),
    choice("auto", 3),
    choice("no", 0),
];
const SYSLOG_FACILITY: &[Choice] = &[
    choice("user", 8),
    choice("local0", 128),
    choice("local1", 136),
    choice("local2", 144),
    choice("local3", 152),
    choice("local4", 160),
    choice("local5", 168),
    choice("local6", 176),
    choice("local7", 184),
];
const OOM_SCORE_ADJ: &[Choice] = &[
    choice("no", 0),
    choice("yes", 1),
    choice("relative", 1),
    choice("absolute", 2),
];
const SANITIZE_DUMP_PAYLOAD: &[Choice] = &[choice("no", 0), choice("yes", 1), choice("clients", 2)];
const ENDPOINT_TYPE: &[Choice] = &[
    choice("ip", 0),
    choice("hostname", 1),
    choice("unknown-endpoint", 2),
];
const PROPAGATION_ERROR: &[Choice] = &[
    choice("ignore", 0),
    choice("panic", 1),
    choice("panic-on-replicas", 2),
];
const SHUTDOWN_ON_SIGNAL: &[Choice] = &[
    choice("default", 0),
    choice("save", 1),
    choice("nosave", 2),
    choice("now", 4),
    choice("force", 8),
];
const TLS_AUTH_CLIENTS: &[Choice] = &[choice("no", 0), choice("yes", 1), choice("optional", 2)];

/// The inert directives, by area.
pub static INERT_DIRECTIVES: &[Directive] = &[
    // Replication. A replica reads `replicaof`, `masteruser`, `masterauth`,
    // `replica-announce-ip`, `replica-announce-port`, `replica-priority` and
    // `replica-announced` through `Config::replicaof` / `directive_value` (kept here for
    // their Redis syntax, read only now and then); the others are inert (diskless loads,
    // lazy flushes). The directives acted on per command are `directives`.
    inert!("replicaof", Kind::ReplicaOf, "")
        .alias("slaveof")
        .immutable(),
    inert!("masteruser", NULLABLE, ""),
    inert!("masterauth", NULLABLE, ""),
    inert!("replica-lazy-flush", BOOL, "no").alias("slave-lazy-flush"),
    inert!("replica-ignore-maxmemory", BOOL, "yes").alias("slave-ignore-maxmemory"),
    inert!("replica-ignore-disk-write-errors", BOOL, "no"),
    inert!("replica-announced", BOOL, "yes"),
    inert!("replica-priority", int(0, INT_MAX), "100").alias("slave-priority"),
    inert!("replica-announce-ip", NULLABLE, "").alias("slave-announce-ip"),
    inert!("replica-announce-port", int(0, 65535), "0").alias("slave-announce-port"),
    inert!(
        "propagation-error-behavior",
        Kind::Enum(PROPAGATION_ERROR),
        "ignore"
    ),
    // Cluster: Tessera runs standalone (CLUSTER answers as a Redis without cluster
    // support does).
    inert!("cluster-enabled", BOOL, "no").immutable(),
    inert!("cluster-config-file", TEXT, "nodes.conf").immutable(),
    inert!("cluster-port", int(0, 65535), "0").immutable(),
    inert!("cluster-node-timeout", int(0, LONG_MAX), "15000"),
    inert!("cluster-announce-ip", NULLABLE, ""),
    inert!(
        "cluster-announce-hostname",
        NULLABLE,
        "",
        announced_hostname
    ),
    inert!("cluster-announce-port", int(0, 65535), "0"),
    inert!("cluster-announce-bus-port", int(0, 65535), "0"),
    inert!("cluster-announce-tls-port", int(0, 65535), "0"),
    inert!(
        "cluster-preferred-endpoint-type",
        Kind::Enum(ENDPOINT_TYPE),
        "ip"
    ),
    inert!("cluster-replica-validity-factor", int(0, INT_MAX), "10")
        .alias("cluster-slave-validity-factor"),
    inert!("cluster-replica-no-failover", BOOL, "no").alias("cluster-slave-no-failover"),
    inert!("cluster-migration-barrier", int(0, INT_MAX), "1"),
    inert!("cluster-allow-replica-migration", BOOL, "yes"),
    inert!("cluster-require-full-coverage", BOOL, "yes"),
    inert!("cluster-allow-reads-when-down", BOOL, "no"),
    inert!("cluster-allow-pubsubshard-when-down", BOOL, "yes"),
    inert!("cluster-link-sendbuf-limit", memory(0, u64::MAX), "0"),
    // TLS: Tessera speaks plain TCP only; turning TLS on is refused.
    inert!("tls-port", int(0, 65535), "0", no_tls),
    inert!("tls-replication", BOOL, "no", no_tls),
    inert!("tls-cluster", BOOL, "no", no_tls),
    inert!("tls-cert-file", NULLABLE, ""),
    inert!("tls-key-file", NULLABLE, ""),
    inert!("tls-key-file-pass", NULLABLE, ""),
    inert!("tls-client-cert-file", NULLABLE, ""),
    inert!("tls-client-key-file", NULLABLE, ""),
    inert!("tls-client-key-file-pass", NULLABLE, ""),
    inert!("tls-dh-params-file", NULLABLE, ""),
    inert!("tls-ca-cert-file", NULLABLE, ""),
    inert!("tls-ca-cert-dir", NULLABLE, ""),
    inert!("tls-protocols", NULLABLE, ""),
    inert!("tls-ciphers", NULLABLE, ""),
    inert!("tls-ciphersuites", NULLABLE, ""),
    inert!("tls-prefer-server-ciphers", BOOL, "no"),
    inert!("tls-session-caching", BOOL, "yes"),
    inert!("tls-session-cache-size", int(0, INT_MAX), "20480"),
    inert!("tls-session-cache-timeout", int(0, INT_MAX), "300"),
    inert!("tls-auth-clients", Kind::Enum(TLS_AUTH_CLIENTS), "yes"),
    // Connections: the system's socket options.
    inert!("tcp-keepalive", int(0, INT_MAX), "300"),
    inert!("socket-mark-id", int(0, UINT_MAX), "0").immutable(),
    inert!("bind-source-addr", NULLABLE, ""),
    inert!("io-threads", int(1, 128), "1").immutable(),
    inert!("io-threads-do-reads", BOOL, "no").immutable(),
    inert!("maxmemory-clients", Kind::MemoryOrPercent, "0"),
    // The process and the OS: supervision, logging to syslog, the process title, the
    // OOM killer's scores, CPU affinity, transparent huge pages, crash reports.
    inert!("supervised", Kind::Enum(SUPERVISED), "no").immutable(),
    inert!("syslog-enabled", BOOL, "no").immutable(),
    inert!("syslog-ident", TEXT, "redis").immutable(),
    inert!("syslog-facility", Kind::Enum(SYSLOG_FACILITY), "local0").immutable(),
    inert!("always-show-logo", BOOL, "no").immutable(),
    inert!("set-proc-title", BOOL, "yes").immutable(),
    inert!(
        "proc-title-template",
        TEXT,
        "{title} {listen-addr} {server-mode}",
        proc_title_template
    ),
    inert!("oom-score-adj", Kind::Enum(OOM_SCORE_ADJ), "no"),
    inert!("oom-score-adj-values", Kind::OomScoreAdjValues, "0 200 800"),
    inert!("server_cpulist", NULLABLE, "").immutable(),
    inert!("bio_cpulist", NULLABLE, "").immutable(),
    inert!("aof_rewrite_cpulist", NULLABLE, "").immutable(),
    inert!("bgsave_cpulist", NULLABLE, "").immutable(),
    inert!("disable-thp", BOOL, "yes").immutable(),
    inert!("jemalloc-bg-thread", BOOL, "yes"),
    inert!("crash-log-enabled", BOOL, "yes"),
    inert!("crash-memcheck-enabled", BOOL, "yes"),
    inert!("ignore-warnings", TEXT, ""),
    // Read through `directive_value` when the signal comes (`server::shutdown`).
    inert!(
        "shutdown-on-sigint",
        Kind::Flags(SHUTDOWN_ON_SIGNAL),
        "default",
        shutdown_flags
    ),
    inert!(
        "shutdown-on-sigterm",
        Kind::Flags(SHUTDOWN_ON_SIGNAL),
        "default",
        shutdown_flags
    ),
    // Persistence: Tessera's own rules (see docs/compatibility.md) stand instead.
    inert!("rdbchecksum", BOOL, "yes").immutable(),
    inert!("rdb-del-sync-files", BOOL, "no"),
    inert!("no-appendfsync-on-rewrite", BOOL, "no"),
    inert!("aof-timestamp-enabled", BOOL, "no"),
    // Memory: lazy freeing, active defragmentation, rehashing, expiry effort.
    inert!("lazyfree-lazy-eviction", BOOL, "no"),
    inert!("lazyfree-lazy-expire", BOOL, "no"),
    inert!("lazyfree-lazy-server-del", BOOL, "no"),
    inert!("activedefrag", BOOL, "no", no_active_defrag),
    inert!(
        "active-defrag-ignore-bytes",
        memory(1, LONG_MAX as u64),
        "104857600"
    ),
    inert!("active-defrag-threshold-lower", int(0, 1000), "10"),
    inert!("active-defrag-threshold-upper", int(0, 1000), "100"),
    inert!("active-defrag-cycle-min", int(1, 99), "1"),
    inert!("active-defrag-cycle-max", int(1, 99), "25"),
    inert!("active-defrag-max-scan-fields", int(1, LONG_MAX), "1000"),
    inert!("activerehashing", BOOL, "yes"),
    inert!("active-expire-effort", int(1, 10), "1"),
    inert!("dynamic-hz", BOOL, "yes"),
    // RESTORE's payload checks.
    inert!(
        "sanitize-dump-payload",
        Kind::Enum(SANITIZE_DUMP_PAYLOAD),
        "no"
    ),
    // Redis's testing aids, listed by CONFIG GET only when named exactly.
    inert!("watchdog-period", int(0, INT_MAX), "0").hidden(),
    inert!("use-exit-on-panic", BOOL, "no").hidden(),
    inert!(
        "loading-process-events-interval-bytes",
        int(1024, INT_MAX),
        "2097152"
    )
    .hidden(),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn read(kind: &Kind, words: &[&str]) -> Result<String, String> {
        let args: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        kind.read(&args).map_err(|e| e.to_string())
    }

    #[test]
    fn enumerations_print_the_first_name_of_a_value() {
        let kind = Kind::Enum(OOM_SCORE_ADJ);
        assert_eq!(read(&kind, &["RELATIVE"]).unwrap(), "yes");
        assert_eq!(
            read(&kind, &["maybe"]).unwrap_err(),
            "argument(s) must be one of the following: no, yes, relative, absolute"
        );
        let flags = Kind::Flags(SHUTDOWN_ON_SIGNAL);
        assert_eq!(read(&flags, &["now save"]).unwrap(), "save now");
        assert_eq!(read(&flags, &["default"]).unwrap(), "default");
        assert_eq!(read(&flags, &["force", "nosave"]).unwrap(), "nosave force");
    }

    #[test]
    fn numbers_as_redis_reads_them() {
        let perm = |text: &str| octal(text, 0o777).map_err(|e| e.to_string());
        assert_eq!(perm("700").unwrap(), 0o700);
        assert_eq!(perm("").unwrap(), 0);
        assert_eq!(
            perm("1000").unwrap_err(),
            "argument must be between 0 and 777 inclusive"
        );
        assert!(perm("9").is_err());
        let clients = Kind::MemoryOrPercent;
        assert_eq!(read(&clients, &["10%"]).unwrap(), "10%");
        assert_eq!(read(&clients, &["1kb"]).unwrap(), "1024");
        assert_eq!(
            read(&clients, &["101%"]).unwrap_err(),
            "percentage argument must be less or equal to 100"
        );
        assert_eq!(read(&Kind::ReplicaOf, &["no", "one"]).unwrap(), "");
        assert_eq!(
            read(&Kind::ReplicaOf, &["10.0.0.1 70000"]).unwrap_err(),
            "Invalid master port"
        );
        assert_eq!(
            read(&Kind::OomScoreAdjValues, &["0 200 800"]).unwrap(),
            "0 200 800"
        );
    }

    #[test]
    fn templates() {
        assert!(proc_title_template("{title} {listen-addr} {server-mode}".into()).is_ok());
        assert!(proc_title_template("{title}".into()).is_err());
        assert!(proc_title_template("{nosuch}".into()).is_err());
        assert!(proc_title_template("{{x".into()).is_ok());
        assert!(proc_title_template("x{".into()).is_err());
    }
}
