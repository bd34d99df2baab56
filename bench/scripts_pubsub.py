#!/usr/bin/env python3
"""EVALSHA of a small script and PUBLISH fan-out: Tessera vs Redis 7.0, side by side.

This is a benchmark, not a test: it only measures and reports, it never fails on a slow
result. It uses bench/compare.py's servers, redis-benchmark runner and report header:
every run starts a fresh server in its own temporary directory on a free loopback port
(never 6379), with the append-only log on, `appendfsync everysec`:

    tessera-server --port P --bind 127.0.0.1 --dir D --appendfsync everysec
    redis-server   --port P --bind 127.0.0.1 --dir D --appendonly yes \\
                   --appendfsync everysec --save ""

Runs go round-robin over the cases (repetition is the outer loop) and alternate which
server goes first; the tables report medians, the Tessera/Redis ratio of the medians, the
median of the ratios of each pair of runs made back to back (robust to a machine that gets
busier or quieter between repetitions), and the server's CPU time per request (from
/proc; on a shared machine steadier than the throughput).

Scripts. Each run SCRIPT LOADs two scripts (their SHA1s are fixed by their text):

    INCR script  return redis.call('INCR', KEYS[1])
    GET script   return redis.call('GET', KEYS[1])

and times one redis-benchmark custom command, at -P 1 and at -P 16:

    redis-benchmark -c 50 -n N -P P -r 100000 EVALSHA <sha> 1 key:__rand_int__
    redis-benchmark -c 50 -n N -P P -r 100000 INCR key:__rand_int__      (and GET)

so the plain commands, same keys, show what the script costs. GET cases (plain and
script) are preloaded first, untimed: `SET key:__rand_int__ __rand_int__` -P 16 -r 100000
(12-byte values, 95 % of the 100,000 keys). After an INCR case the values of all keys
must add up to -n (checked with MGET; a mismatch is reported as a failure), and INFO
`total_error_replies` must be 0 after every run.

Pub/sub. bench/subscribers.py (one Python process, the same for both servers) opens S
connections (1, 10, 100), each SUBSCRIBEs to `bench:chan` (or PSUBSCRIBEs `bench:*`), and
reads as fast as it can, counting the messages and checking their bytes. Then

    redis-benchmark -c 10 -n N -P 1 PUBLISH bench:chan <payload>

publishes N messages of --payload-size bytes. Reported: published msgs/s (redis-
benchmark's rate), delivered msgs/s (messages all subscribers received ÷ the time from
the first byte to the last one received), and the delivered share (received ÷ N × S;
below 1 when a server dropped messages or subscribers). The readers use CPU on the same
2 cores as the server and the publisher (their CPU seconds are in the details).

Usage (from the repository root, after `cargo build --release`):
    python3 bench/scripts_pubsub.py --output bench/results/scripts_pubsub.md   # ~5-8 min
    python3 bench/scripts_pubsub.py --quick --repeat 1                         # ~1 min
    python3 bench/scripts_pubsub.py --only evalsha-incr-P16,incr-P16 --repeat 5
    python3 bench/scripts_pubsub.py --list

Stdlib only (Python 3.11), Linux (reads /proc).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import selectors
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare as cmp  # noqa: E402  (servers, redis-benchmark runner, report header)
import compaction as cp  # noqa: E402  (persistent RESP connection)
from latency import cpu_seconds  # noqa: E402

HOST = cmp.HOST
FSYNC = "everysec"
KEYSPACE = 100_000  # -r of the script cases
SCRIPTS = {
    "incr": "return redis.call('INCR', KEYS[1])",
    "get": "return redis.call('GET', KEYS[1])",
}
SHA = {name: hashlib.sha1(body.encode()).hexdigest() for name, body in SCRIPTS.items()}
CHANNEL = "bench:chan"
PATTERN = "bench:*"
SUBSCRIBERS = Path(__file__).resolve().parent / "subscribers.py"


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    label: str
    kind: str  # "script" or "pubsub"
    clients: int
    pipeline: int
    n_full: int
    n_quick: int
    command: tuple[str, ...] = ()  # script cases: the redis-benchmark custom command
    preload: bool = False  # script cases: fill the key space first
    incr: bool = False  # script cases: check that the values add up to -n
    subscribers: int = 0  # pubsub cases
    pattern: bool = False  # pubsub cases: PSUBSCRIBE instead of SUBSCRIBE

    def requests(self, args) -> int:
        if args.quick:
            return self.n_quick
        return max(1, int(round(self.n_full * args.n_scale)))

    def bench_flags(self, n: int, payload: str = "") -> list[str]:
        flags = ["-c", str(self.clients), "-n", str(n), "-P", str(self.pipeline)]
        if self.kind == "script":
            return flags + ["-r", str(KEYSPACE)] + list(self.command)
        return flags + ["PUBLISH", CHANNEL, payload]

    def shown_flags(self, n: int, payload: str = "") -> str:
        text = shlex.join(self.bench_flags(n, payload))
        if payload:
            text = text.replace(payload, f"<{len(payload)} bytes>")
        return text


def build_cases() -> list[Case]:
    # -n aiming at 1-3 s per run on an idle 2-core machine (the whole run in about 5
    # minutes): at -P 1 both servers serve 40-80k requests/s; at -P 16 plain commands
    # run at 300-700k/s, scripts at 60-300k/s.
    cases = []
    for pipeline, n_script, n_plain, n_quick in ((1, 100_000, 100_000, 10_000),
                                                 (16, 200_000, 600_000, 30_000)):
        for what in ("incr", "get"):
            cases.append(Case(
                f"evalsha-{what}-P{pipeline}", f"EVALSHA {what.upper()} script", "script",
                50, pipeline, n_script, n_quick,
                ("EVALSHA", SHA[what], "1", "key:__rand_int__"),
                preload=what == "get", incr=what == "incr"))
            cases.append(Case(
                f"{what}-P{pipeline}", what.upper(), "script", 50, pipeline, n_plain, n_quick,
                (what.upper(), "key:__rand_int__"),
                preload=what == "get", incr=what == "incr"))
    # Messages: delivered = published x S. 100 subscribers take 12k messages (1.2M
    # deliveries, 1-3 s).
    for pattern in (False, True):
        for subs, n_full, n_quick in ((1, 100_000, 10_000), (10, 60_000, 5_000),
                                      (100, 12_000, 1_000)):
            kind = "pattern" if pattern else "channel"
            cases.append(Case(
                f"publish-{kind}-s{subs}",
                f"PUBLISH to {subs} subscriber{'s' if subs > 1 else ''}, {kind}",
                "pubsub", 10, 1, n_full, n_quick, subscribers=subs, pattern=pattern))
    return cases


# --------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------


@dataclass
class Sample:
    rps: float  # redis-benchmark's requests/s (published msgs/s for PUBLISH)
    p50: float | None
    server_cpu: float | None  # seconds of the server's CPU during the timed run
    delivered: float | None = None  # msgs/s received by all subscribers
    share: float | None = None  # received / (published x subscribers)
    reader_cpu: float | None = None  # cores the subscribers process used while receiving
    rep: int = 0  # which repetition: Tessera's and Redis's runs of a repetition are a pair


@dataclass
class Result:
    case: Case
    n: int
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {"tessera": [], "redis": []})
    failures: dict[str, list[str]] = field(
        default_factory=lambda: {"tessera": [], "redis": []})

    def median(self, name: str, attr: str = "rps") -> float | None:
        return cmp.median_or_none([getattr(s, attr) for s in self.samples[name]])

    def pair_ratios(self, attr: str = "rps") -> list[float]:
        """Tessera ÷ Redis for each repetition both completed: the two runs of a pair ran
        back to back, so a machine that got busier or quieter between repetitions moves
        both."""
        redis = {s.rep: getattr(s, attr) for s in self.samples["redis"]}
        return [getattr(t, attr) / redis[t.rep] for t in self.samples["tessera"]
                if getattr(t, attr) and redis.get(t.rep)]

    def cpu_per(self, name: str) -> float | None:
        """The server's CPU µs per request (PUBLISH: per delivered message), median."""
        per = self.n * (self.case.subscribers if self.case.kind == "pubsub" else 1)
        cpu = self.median(name, "server_cpu")
        return None if cpu is None else cpu * 1e6 / per


def load_scripts(port: int) -> None:
    for name, body in SCRIPTS.items():
        sha = cp.resp(port, "SCRIPT", "LOAD", body)
        if sha != SHA[name]:
            raise RuntimeError(f"SCRIPT LOAD answered {sha!r}, expected {SHA[name]}")


def incr_total(port: int) -> int:
    """The sum of the values of key:000000000000 .. key:<KEYSPACE-1> (missing keys: 0)."""
    conn = cp.Conn(port, timeout=60)
    try:
        total = 0
        batch = 1000
        for start in range(0, KEYSPACE, batch):
            keys = [f"key:{i:012}" for i in range(start, min(KEYSPACE, start + batch))]
            total += sum(int(v) for v in conn.call("MGET", *keys) if v is not None)
        return total
    finally:
        conn.close()


def run_script_case(args, srv, case: Case, n: int) -> tuple[Sample, str]:
    load_scripts(srv.port)
    if case.preload:
        pre_n = 3 * n if args.quick else 3 * KEYSPACE
        cmp.run_benchmark(args, srv.port, ["-c", "50", "-n", str(pre_n), "-P", "16",
                                           "-r", str(KEYSPACE), "SET", "key:__rand_int__",
                                           "__rand_int__"])
        cmp.wait_for_background_work(srv.port)
        time.sleep(args.settle)
    errors_before = int(cmp.info_fields(srv.port, "stats").get("total_error_replies", 0))
    cpu0 = cpu_seconds(srv.proc.pid)
    rps, p50, err = cmp.run_benchmark(args, srv.port, case.bench_flags(n))
    cpu1 = cpu_seconds(srv.proc.pid)
    if srv.proc.poll() is not None:
        raise RuntimeError(f"{srv.name} exited during the run:\n{srv.log_tail()}")
    errors = int(cmp.info_fields(srv.port, "stats").get("total_error_replies", 0)) - errors_before
    if errors:
        raise RuntimeError(f"{errors} error replies during the run")
    if case.incr:
        total = incr_total(srv.port)
        if total != n:
            raise RuntimeError(f"after {n} INCRs the values add up to {total}")
    cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    return Sample(rps, p50, cpu), err


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout):
            raise RuntimeError(f"the subscribers did not answer within {timeout:.0f} s")
    finally:
        sel.close()
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the subscribers exited (code {proc.wait()}): "
                           f"{proc.stderr.read().strip()[-300:]}")
    return line.strip()


def run_pubsub_case(args, srv, case: Case, n: int) -> tuple[Sample, str]:
    payload = "x" * args.payload_size
    argv = [sys.executable, str(SUBSCRIBERS), "--host", HOST, "--port", str(srv.port),
            "--subscribers", str(case.subscribers), "--channel", CHANNEL,
            "--payload", payload, "--expect", str(n)]
    if case.pattern:
        argv += ["--pattern", PATTERN]
    reader = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        ready = read_line(reader, 30)
        if ready != "READY":
            raise RuntimeError(f"the subscribers said {ready!r}")
        reader_cpu0 = cpu_seconds(reader.pid)
        cpu0 = cpu_seconds(srv.proc.pid)
        rps, p50, err = cmp.run_benchmark(args, srv.port, case.bench_flags(n, payload))
        reader.stdin.write("done\n")
        reader.stdin.flush()
        report = json.loads(read_line(reader, args.run_timeout))
        cpu1 = cpu_seconds(srv.proc.pid)
        reader_cpu1 = cpu_seconds(reader.pid)
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{srv.name} exited during the run:\n{srv.log_tail()}")
    finally:
        if reader.poll() is None:
            try:
                reader.stdin.close()
                reader.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                reader.kill()
                reader.wait(timeout=10)
    problems = [f"{report[k]} {k}" for k in ("closed", "mismatches", "partial") if report[k]]
    if problems:
        err += f"subscribers: {', '.join(problems)}\n"
    messages = report["messages"]
    span = (report["last"] or 0) - (report["first"] or 0)
    sample = Sample(
        rps, p50,
        cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None,
        delivered=messages / span if span > 0 else None,
        share=messages / (n * case.subscribers),
        reader_cpu=((reader_cpu1 - reader_cpu0) / span
                    if reader_cpu0 is not None and reader_cpu1 is not None and span > 0
                    else None),
    )
    return sample, err


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def fmt_share(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}".rstrip("0").rstrip(".")


def fmt_us(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def fmt_pairs(ratios: list[float]) -> str:
    if not ratios:
        return "n/a"
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def render(args, info, results: list[Result], started: float, status: str,
           warnings: dict[str, set[str]], stale: str | None) -> str:
    payload = "x" * args.payload_size
    lines = cmp.report_header("Tessera vs Redis: EVALSHA and PUBLISH fan-out", info, started,
                              status, stale)
    lines.append(
        f"- Mode: {'QUICK smoke run (small -n, numbers are not meaningful)' if args.quick else 'full'}; "
        f"repeat {args.repeat} per server per case, median reported"
        + ("" if args.quick or args.n_scale == 1.0 else f"; -n scaled by {args.n_scale}"))
    lines += [line.replace("$FSYNC", FSYNC) for line in cmp.server_lines(args)]
    lines += [
        f"- Client: `{args.redis_benchmark} -h {HOST} -p $PORT --csv <flags>`, one "
        "redis-benchmark process (single-threaded) on the same machine as the server",
        "- Method: runs go round-robin over the cases, alternating which server goes first.",
        "- Scripts, loaded by SCRIPT LOAD in every run: "
        + "; ".join(f"`{body}` = `{SHA[name]}`" for name, body in SCRIPTS.items())
        + f". GET cases (script and plain) are preloaded by an untimed "
        f"`SET key:__rand_int__ __rand_int__` (-c 50 -P 16 -r {KEYSPACE}, "
        f"-n {'3 x the case -n' if args.quick else 3 * KEYSPACE}). After INCR cases the values "
        "of all keys add up to -n (checked); every run ended with no error reply.",
        f"- PUBLISH: bench/subscribers.py, one Python process, reads S connections "
        f"subscribed to `{CHANNEL}` (channel) or to the pattern `{PATTERN}` (pattern) as fast "
        "as it can (epoll, 256 KB reads), counts the messages and checks their bytes; "
        f"payload {len(payload)} bytes. Published = redis-benchmark's rate; delivered = "
        "messages received by all subscribers / (last byte - first byte received); share = "
        "received / (published x S). The reader is the same for both servers and shares the "
        "2 cores with the server and the publisher.",
        "",
        "## EVALSHA vs plain commands (median requests/s)",
        "",
        "Tessera/Redis: the ratio of the medians; per pair: the median (and range) of the "
        "ratios of the runs made back to back. CPU: the server's CPU time per request, µs "
        "(median).",
        "",
        "| Case | redis-benchmark flags | Tessera | Redis | Tessera/Redis | per pair "
        "| CPU µs Tessera | CPU µs Redis |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if r.case.kind != "script":
            continue
        t, rd = r.median("tessera"), r.median("redis")
        lines.append(f"| {r.case.label}, -P {r.case.pipeline} | `{r.case.shown_flags(r.n)}` "
                     f"| {cmp.fmt_ops(t)} | {cmp.fmt_ops(rd)} | {cmp.fmt_ratio(t, rd)} "
                     f"| {fmt_pairs(r.pair_ratios())} | {fmt_us(r.cpu_per('tessera'))} "
                     f"| {fmt_us(r.cpu_per('redis'))} |")
    by_id = {r.case.id: r for r in results}
    overhead = []
    for what in ("incr", "get"):
        for pipeline in (1, 16):
            s, p = by_id.get(f"evalsha-{what}-P{pipeline}"), by_id.get(f"{what}-P{pipeline}")
            if s and p:
                overhead.append(
                    f"| {what.upper()}, -P {pipeline} | "
                    f"{cmp.fmt_ratio(s.median('tessera'), p.median('tessera'))} | "
                    f"{cmp.fmt_ratio(s.median('redis'), p.median('redis'))} |")
    if overhead:
        lines += ["", "Script ÷ plain command (same server, same run):", "",
                  "| Command | Tessera | Redis |", "|---|---:|---:|"] + overhead
    lines += [
        "",
        "## PUBLISH fan-out (median msgs/s)",
        "",
        "Per pair: the median (and range) of the delivered ratios of the runs made back to "
        "back. CPU: the server's CPU time per delivered message, µs (median). Share: "
        "messages received ÷ (published x subscribers), Tessera / Redis.",
        "",
        "| Case | redis-benchmark flags | Tessera published | Redis published | Tessera/Redis "
        "| Tessera delivered | Redis delivered | Tessera/Redis | per pair "
        "| CPU µs Tessera | CPU µs Redis | share |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if r.case.kind != "pubsub":
            continue
        t, rd = r.median("tessera"), r.median("redis")
        td, rdd = r.median("tessera", "delivered"), r.median("redis", "delivered")
        lines.append(
            f"| {r.case.label} | `{r.case.shown_flags(r.n, payload)}` "
            f"| {cmp.fmt_ops(t)} | {cmp.fmt_ops(rd)} | {cmp.fmt_ratio(t, rd)} "
            f"| {cmp.fmt_ops(td)} | {cmp.fmt_ops(rdd)} | {cmp.fmt_ratio(td, rdd)} "
            f"| {fmt_pairs(r.pair_ratios('delivered'))} | {fmt_us(r.cpu_per('tessera'))} "
            f"| {fmt_us(r.cpu_per('redis'))} "
            f"| {fmt_share(r.median('tessera', 'share'))} / "
            f"{fmt_share(r.median('redis', 'share'))} |")
    lines += [
        "",
        "## Details",
        "",
        "Per-run figures in run order; spread = (max - min) / median of the requests/s; "
        "server CPU = the server's user + system CPU time during the timed run (all its "
        "threads, /proc, 10 ms ticks) per request (PUBLISH: per delivered message), median; "
        "p50 = median of redis-benchmark's p50 latency; reader CPU = the subscribers "
        "process's CPU time ÷ the time it was receiving, in cores, median.",
        "",
        "| Case id | Server | Requests/s (runs) | Spread | Delivered msgs/s (runs) | p50 ms "
        "| Server CPU µs per request | Reader CPU cores | Failures |",
        "|---|---|---|---:|---|---:|---:|---:|---|",
    ]
    for r in results:
        for name in ("tessera", "redis"):
            ss = r.samples[name]
            runs = ", ".join(f"{s.rps:,.0f}" for s in ss) or "-"
            med = r.median(name)
            spread = (f"{(max(s.rps for s in ss) - min(s.rps for s in ss)) / med:.0%}"
                      if ss and med else "-")
            delivered = (", ".join(f"{s.delivered:,.0f}" for s in ss if s.delivered is not None)
                         if r.case.kind == "pubsub" else "") or "-"
            p50 = cmp.median_or_none([s.p50 for s in ss])
            cpu = r.cpu_per(name)
            reader = cmp.median_or_none([s.reader_cpu for s in ss])
            lines.append(
                f"| {r.case.id} | {name} | {runs} | {spread} | {delivered} | "
                f"{'-' if p50 is None else f'{p50:.3f}'} | "
                f"{'-' if cpu is None else f'{cpu:.2f}'} | "
                f"{'-' if reader is None else f'{reader:.2f}'} | "
                f"{'; '.join(r.failures[name])} |")
    if any(warnings.values()):
        lines += ["", "Warnings (redis-benchmark's stderr, subscriber problems):", ""]
        for name, ws in warnings.items():
            for w in sorted(ws):
                lines.append(f"- {name}: `{w}`")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def parse_args(cases: list[Case]):
    p = argparse.ArgumentParser(
        description="EVALSHA and PUBLISH fan-out: tessera-server vs redis-server.",
        epilog="Cases: " + ", ".join(c.id for c in cases))
    p.add_argument("--repeat", type=int, default=3,
                   help="runs per server per case (default 3); the median is reported")
    p.add_argument("--quick", action="store_true",
                   help="smoke run with small -n (numbers not meaningful)")
    p.add_argument("--output", metavar="FILE", help="also write the markdown report to FILE")
    p.add_argument("--only", metavar="IDS", help="comma-separated case ids to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--n-scale", type=float, default=1.0,
                   help="multiply every full-run -n by this (default 1.0)")
    p.add_argument("--payload-size", type=int, default=64,
                   help="bytes of each published message (default 64)")
    cmp.add_common_args(p)
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    args.selected = cases
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [w for w in wanted if w not in {c.id for c in cases}]
        if unknown:
            p.error(f"unknown case id(s): {', '.join(unknown)}")
        args.selected = [c for c in cases if c.id in wanted]
    return args


def main() -> int:
    cases = build_cases()
    args = parse_args(cases)
    payload = "x" * args.payload_size
    if args.list:
        for c in args.selected:
            subs = f" ({c.subscribers} x {'PSUBSCRIBE ' + PATTERN if c.pattern else 'SUBSCRIBE ' + CHANNEL})" \
                if c.kind == "pubsub" else ""
            print(f"{c.id:22} {c.shown_flags(c.requests(args), payload)}{subs}")
        return 0
    if not cmp.prepare(args):
        return 2

    started = time.monotonic()
    info = cmp.machine_info(args)
    stale = cmp.binary_staleness(Path(args.tessera_bin))
    if stale:
        print(stale, file=sys.stderr)
    results = [Result(c, c.requests(args)) for c in args.selected]
    warnings: dict[str, set[str]] = {"tessera": set(), "redis": set()}

    def measure(srv, r: Result):
        rep = len(r.samples[srv.name]) + len(r.failures[srv.name])
        run = run_script_case if r.case.kind == "script" else run_pubsub_case
        sample, err = run(args, srv, r.case, r.n)
        sample.rep = rep
        summary = f"{sample.rps:,.0f} requests/s"
        if sample.delivered is not None:
            summary += (f", delivered {sample.delivered:,.0f} msgs/s, share "
                        f"{fmt_share(sample.share)}")
        return sample, err, summary

    status = cmp.run_round_robin(args, results, cmp.Servers(args), lambda case: FSYNC,
                                 measure, warnings)
    report = render(args, info, results, started, status, warnings, stale)
    return cmp.finish(args, report, status, results)

if __name__ == "__main__":
    sys.exit(main())
