//! The operator's diagnostics: SLOWLOG (GET, LEN, RESET) and LATENCY (LATEST, HISTORY,
//! RESET, GRAPH, DOCTOR, HISTOGRAM), with Redis 7.0's replies and errors. What they read
//! is kept elsewhere: `crate::slowlog`, `crate::latency`, `crate::command_stats` (fed by
//! `engine::stats` after each command).

use super::{Action, Args, CommandSpec, Ctx, lossy, unknown_subcommand, wrong_arity};
use crate::command;

pub fn commands() -> Vec<CommandSpec> {
    vec![
        command!(
            "slowlog",
            -2,
            0,
            (0, 0, 0),
            "server",
            "A container for slow log commands",
            slowlog
        ),
        command!(
            "latency",
            -2,
            0,
            (0, 0, 0),
            "server",
            "A container for latency diagnostics commands",
            latency
        ),
    ]
}

const SLOWLOG_HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Prints this help.",
];

const LATENCY_HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Prints this help.",
];

fn help(ctx: &mut Ctx, lines: &[&str]) {
    ctx.out.array(lines.len());
    for line in lines {
        ctx.out.simple(line);
    }
}

/// Whether a subcommand got its arity (Redis's: `exact` arguments, or at least `-exact`).
fn arity_ok(ctx: &mut Ctx, container: &str, sub: &str, args: &Args, arity: i64) -> bool {
    let argc = args.len() as i64;
    let ok = if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    };
    if !ok {
        wrong_arity(ctx, &format!("{container}|{sub}"));
    }
    ok
}

fn slowlog(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "help" if arity_ok(ctx, "slowlog", &sub, args, 2) => help(ctx, SLOWLOG_HELP),
        "len" if arity_ok(ctx, "slowlog", &sub, args, 2) => {
            ctx.out.integer(ctx.server.slowlog.len() as i64)
        }
        "reset" if arity_ok(ctx, "slowlog", &sub, args, 2) => {
            ctx.server.slowlog.reset();
            ctx.out.ok();
        }
        // Redis's `addReplySubcommandSyntaxError`, with the subcommand as given.
        "get" if args.len() > 3 => super::subcommand_syntax_error(ctx, args),
        "get" => slowlog_get(ctx, args.get(2).copied()),
        "help" | "len" | "reset" => {}
        _ => unknown_subcommand(ctx, "slowlog", args[1]),
    }
    Action::None
}

fn slowlog_get(ctx: &mut Ctx, count: Option<&[u8]>) {
    let count = match count.map(crate::resp::parse_i64) {
        None => 10,
        Some(Some(count)) if count >= -1 => count,
        Some(_) => {
            return ctx
                .out
                .error("ERR count should be greater than or equal to -1");
        }
    };
    let log = &ctx.server.slowlog;
    let shown = if count == -1 {
        log.len()
    } else {
        log.len().min(count as usize)
    };
    ctx.out.array(shown);
    for entry in log.entries().take(shown) {
        ctx.out.array(6);
        ctx.out.integer(entry.id as i64);
        ctx.out.integer(entry.unix_seconds);
        ctx.out.integer(entry.duration_us as i64);
        ctx.out.array(entry.arguments.len());
        for argument in &entry.arguments {
            ctx.out.bulk(argument);
        }
        ctx.out.bulk(entry.peer.as_bytes());
        ctx.out.bulk(entry.client_name.as_bytes());
    }
}

fn latency(ctx: &mut Ctx, args: &Args) -> Action {
    let sub = lossy(args[1]).to_ascii_lowercase();
    let arity = match sub.as_str() {
        "help" | "latest" | "doctor" => 2,
        "history" | "graph" => 3,
        "reset" | "histogram" => -2,
        _ => {
            unknown_subcommand(ctx, "latency", args[1]);
            return Action::None;
        }
    };
    if !arity_ok(ctx, "latency", &sub, args, arity) {
        return Action::None;
    }
    let monitor = &ctx.server.latency;
    match sub.as_str() {
        "help" => help(ctx, LATENCY_HELP),
        "latest" => {
            let events: Vec<_> = monitor.events().collect();
            ctx.out.array(events.len());
            for (event, series) in events {
                let latest = series.latest();
                ctx.out.array(4);
                ctx.out.bulk(event.as_bytes());
                ctx.out.integer(latest.unix_seconds);
                ctx.out.integer(latest.latency_ms as i64);
                ctx.out.integer(series.max_ms as i64);
            }
        }
        "history" => {
            let samples: Vec<_> = monitor
                .series(args[2])
                .map(|(_, series)| series.samples().collect())
                .unwrap_or_default();
            ctx.out.array(samples.len());
            for sample in samples {
                ctx.out.array(2);
                ctx.out.integer(sample.unix_seconds);
                ctx.out.integer(sample.latency_ms as i64);
            }
        }
        "graph" => match monitor.series(args[2]) {
            Some((event, series)) => {
                let graph = monitor.graph(event, series, crate::clock::unix_seconds());
                ctx.out.verbatim(graph.as_bytes());
            }
            None => ctx.out.error(&format!(
                "ERR No samples available for event '{}'",
                lossy(args[2])
            )),
        },
        "doctor" => {
            let report = monitor.doctor(ctx.server.config.latency_monitor_threshold_ms);
            ctx.out.verbatim(report.as_bytes());
        }
        "reset" => {
            let reset = if args.len() == 2 {
                ctx.server.latency.reset(None)
            } else {
                args[2..]
                    .iter()
                    .map(|event| ctx.server.latency.reset(Some(event)))
                    .sum()
            };
            ctx.out.integer(reset as i64);
        }
        _ => latency_histogram(ctx, &args[2..]),
    }
    Action::None
}

/// LATENCY HISTOGRAM [command ...]: per command with a histogram, its calls and the
/// cumulative distribution (Redis's `latencyAllCommandsFillCDF` / `latencySpecificCommandsFillCDF`);
/// names Redis has no histogram for are left out.
fn latency_histogram(ctx: &mut Ctx, names: &Args) {
    let stats = &ctx.server.commands;
    let table = crate::acl::table::table();
    let histograms: Vec<(&str, &hdrhistogram::Histogram<u64>)> = if names.is_empty() {
        stats.histograms().collect()
    } else {
        let mut chosen = Vec::new();
        for name in names {
            let Some(command) = table.lookup(name) else {
                continue;
            };
            // A container's name stands for each of its subcommands.
            let ids = std::iter::once(command.id).chain(command.subcommands.iter().copied());
            for id in ids {
                if let Some(histogram) = stats.histogram(id)
                    && !chosen
                        .iter()
                        .any(|(n, _)| *n == table.commands[id].full_name)
                {
                    chosen.push((table.commands[id].full_name.as_str(), histogram));
                }
            }
        }
        chosen
    };
    ctx.out.map(histograms.len());
    for (name, histogram) in histograms {
        ctx.out.bulk(name.as_bytes());
        ctx.out.map(2);
        ctx.out.bulk(b"calls");
        ctx.out.integer(histogram.len() as i64);
        ctx.out.bulk(b"histogram_usec");
        let buckets = crate::command_stats::cumulative_buckets(histogram);
        ctx.out.map(buckets.len());
        for (bound, count) in buckets {
            ctx.out.integer(bound as i64);
            ctx.out.integer(count as i64);
        }
    }
}
