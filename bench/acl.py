#!/usr/bin/env python3
"""The cost of ACL checks: Tessera vs Redis 7.0, side by side.

This is a benchmark, not a test: it only measures and reports, it never fails on a slow
result. It uses bench/compare.py's servers, redis-benchmark runner and report header:
every run starts a fresh server in its own temporary directory on a free loopback port
(never 6379), with the append-only log on, `appendfsync everysec`.

Each case runs the same redis-benchmark command twice over, as two users:

    default  the default user (nopass, every command, every key): the check is the
             cheapest there is;
    acl50    `ACL SETUSER bench on >benchpass +@all ~p0:* ~p1:* ... ~p48:*
             ~key:*`, 50 key patterns of which only the last matches the keys used, so
             every key of every command is tried against all 50 (the worst case for a
             user with many patterns); redis-benchmark logs in with
             `--user bench -a benchpass`.

    redis-benchmark -c 50 -n N -P P -r 100000 -t get|set [--user bench -a benchpass]

Reported: the medians of requests/s per server and user, the Tessera/Redis ratio of the
medians, and what the 50 patterns cost each server: acl50 ÷ default on the same server
(1.00 = free). Runs go round-robin over the cases and alternate which server goes first.

Usage (from the repository root, after `cargo build --release`):
    python3 bench/acl.py --output bench/results/acl.md        # ~3-5 min
    python3 bench/acl.py --quick --repeat 1                   # smoke run
    python3 bench/acl.py --only get-acl50-P16,get-default-P16 --repeat 5

Stdlib only (Python 3.11).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare as cmp  # noqa: E402  (servers, redis-benchmark runner, report header)

FSYNC = "everysec"
KEYSPACE = 100_000
PATTERNS = [f"~p{i}:*" for i in range(49)] + ["~key:*"]
USER = "bench"
PASSWORD = "benchpass"


@dataclass
class Case:
    id: str
    test: str  # redis-benchmark -t
    user: str  # "default" or "acl50"
    pipeline: int
    n_full: int
    n_quick: int

    def requests(self, args) -> int:
        return self.n_quick if args.quick else self.n_full

    def bench_flags(self, n: int) -> list[str]:
        flags = ["-c", "50", "-n", str(n), "-P", str(self.pipeline), "-r", str(KEYSPACE),
                 "-t", self.test]
        if self.user == "acl50":
            flags += ["--user", USER, "-a", PASSWORD]
        return flags


def build_cases() -> list[Case]:
    cases = []
    for pipeline, n_full, n_quick in ((1, 200_000, 20_000), (16, 1_000_000, 50_000)):
        for test in ("get", "set"):
            for user in ("default", "acl50"):
                cases.append(Case(f"{test}-{user}-P{pipeline}", test, user, pipeline,
                                  n_full, n_quick))
    return cases


@dataclass
class Sample:
    rps: float
    p50: float | None
    rep: int = 0


@dataclass
class Result:
    case: Case
    n: int
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {"tessera": [], "redis": []})
    failures: dict[str, list[str]] = field(
        default_factory=lambda: {"tessera": [], "redis": []})

    def median(self, name: str) -> float | None:
        return cmp.median_or_none([s.rps for s in self.samples[name]])


def run_case(args, srv, case: Case, n: int) -> tuple[Sample, str]:
    reply = cmp.resp(srv.port, "ACL", "SETUSER", USER, "on", f">{PASSWORD}", "+@all",
                     *PATTERNS)
    if reply != "OK":
        raise RuntimeError(f"ACL SETUSER answered {reply!r}")
    if case.test == "get":
        # Untimed: the keys exist, so GET replies carry values.
        cmp.run_benchmark(args, srv.port, ["-c", "50", "-n", str(3 * KEYSPACE), "-P", "16",
                                           "-r", str(KEYSPACE), "-t", "set"])
        cmp.wait_for_background_work(srv.port)
        time.sleep(args.settle)
    errors_before = int(cmp.info_fields(srv.port, "stats").get("total_error_replies", 0))
    rps, p50, err = cmp.run_benchmark(args, srv.port, case.bench_flags(n))
    errors = int(cmp.info_fields(srv.port, "stats").get("total_error_replies", 0)) - errors_before
    if errors:
        raise RuntimeError(f"{errors} error replies during the run (a denial?)")
    return Sample(rps, p50), err


def render(args, info, results: list[Result], started: float, status: str,
           warnings: dict[str, set[str]], stale: str | None) -> str:
    lines = cmp.report_header("Tessera vs Redis: the cost of ACL checks", info, started,
                              status, stale)
    lines.append(
        f"- Mode: {'QUICK smoke run (numbers are not meaningful)' if args.quick else 'full'}; "
        f"repeat {args.repeat} per server per case, median reported")
    lines += [line.replace("$FSYNC", FSYNC) for line in cmp.server_lines(args)]
    lines += [
        f"- User acl50: `ACL SETUSER {USER} on >{PASSWORD} +@all "
        f"{' '.join(PATTERNS[:2])} ... {' '.join(PATTERNS[-2:])}` ({len(PATTERNS)} key "
        "patterns, only the last matches the keys used); default: the default user. "
        "GET cases are preloaded (untimed `-t set -P 16`); every run ended with no error "
        "reply.",
        "",
        "| Case | redis-benchmark flags | Tessera | Redis | Tessera/Redis |",
        "|---|---|---:|---:|---:|",
    ]
    for r in results:
        t, rd = r.median("tessera"), r.median("redis")
        lines.append(f"| {r.case.id} | `{shlex.join(r.case.bench_flags(r.n))}` "
                     f"| {cmp.fmt_ops(t)} | {cmp.fmt_ops(rd)} | {cmp.fmt_ratio(t, rd)} |")
    by_id = {r.case.id: r for r in results}
    cost = []
    for test in ("get", "set"):
        for pipeline in (1, 16):
            acl = by_id.get(f"{test}-acl50-P{pipeline}")
            plain = by_id.get(f"{test}-default-P{pipeline}")
            if acl and plain:
                cost.append(
                    f"| {test.upper()}, -P {pipeline} "
                    f"| {cmp.fmt_ratio(acl.median('tessera'), plain.median('tessera'))} "
                    f"| {cmp.fmt_ratio(acl.median('redis'), plain.median('redis'))} |")
    if cost:
        lines += ["", "What the 50 patterns cost: acl50 ÷ default, same server (1.00 = free):",
                  "", "| Command | Tessera | Redis |", "|---|---:|---:|"] + cost
    lines += ["", "| Case id | Server | Requests/s (runs) | Failures |", "|---|---|---|---|"]
    for r in results:
        for name in ("tessera", "redis"):
            runs = ", ".join(f"{s.rps:,.0f}" for s in r.samples[name]) or "-"
            lines.append(f"| {r.case.id} | {name} | {runs} | {'; '.join(r.failures[name])} |")
    if any(warnings.values()):
        lines += ["", "Warnings (redis-benchmark's stderr):", ""]
        for name, ws in warnings.items():
            lines += [f"- {name}: `{w}`" for w in sorted(ws)]
    return "\n".join(lines) + "\n"


def main() -> int:
    cases = build_cases()
    p = argparse.ArgumentParser(description="The cost of ACL checks: tessera vs redis.",
                                epilog="Cases: " + ", ".join(c.id for c in cases))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--output", metavar="FILE")
    p.add_argument("--only", metavar="IDS")
    cmp.add_common_args(p)
    args = p.parse_args()
    selected = cases
    if args.only:
        wanted = set(args.only.split(","))
        selected = [c for c in cases if c.id in wanted]
    if not cmp.prepare(args):
        return 2
    started = time.monotonic()
    info = cmp.machine_info(args)
    stale = cmp.binary_staleness(Path(args.tessera_bin))
    results = [Result(c, c.requests(args)) for c in selected]
    warnings: dict[str, set[str]] = {"tessera": set(), "redis": set()}

    def measure(srv, r: Result):
        rep = len(r.samples[srv.name]) + len(r.failures[srv.name])
        sample, err = run_case(args, srv, r.case, r.n)
        sample.rep = rep
        return sample, err, f"{sample.rps:,.0f} requests/s"

    status = cmp.run_round_robin(args, results, cmp.Servers(args), lambda case: FSYNC,
                                 measure, warnings)
    report = render(args, info, results, started, status, warnings, stale)
    return cmp.finish(args, report, status, results)


if __name__ == "__main__":
    sys.exit(main())
