#!/usr/bin/env python3
"""Full sync of a replica under a SET load: Tessera vs Redis 7.0 as the master.

A benchmark, not a test: it measures and reports, it never fails on a slow result.

What one run does, for each repeat (--repeat, default 3) and each master (Tessera built
at target/release/tessera-server, and redis-server from PATH, Debian's 7.0.15),
alternating which master goes first:

 1. start the master fresh in a temporary directory on a free loopback port (never 6379),
    append-only log on, no RDB save points, automatic rewrites off (so that the full sync
    is the only snapshot), diskless full sync with no delay on both (the default delay,
    5 s, would only add 5 s of waiting to both):

        tessera-server --port P --bind 127.0.0.1 --dir D --appendonly yes \\
            --appendfsync everysec --save "" --auto-aof-rewrite-percentage 0 \\
            --repl-diskless-sync yes --repl-diskless-sync-delay 0
        redis-server   --port P --bind 127.0.0.1 --dir D --appendonly yes \\
            --appendfsync everysec --save "" --aof-use-rdb-preamble yes \\
            --auto-aof-rewrite-percentage 0 \\
            --repl-diskless-sync yes --repl-diskless-sync-delay 0

    Everything else is each server's default, in particular the replica output limit
    `client-output-buffer-limit replica 256mb 64mb 60`.
 2. fill: `tessera-loadgen --preload` SETs every key of --keys keys (default 1,000,000,
    `key:<n>`) once with --value-size bytes (default 1024) of fresh random printable
    characters, every value distinct (redis-benchmark writes one value to every key);
    DBSIZE is checked; then `sync`, so that the fill's dirty pages are not flushed
    during the measurement;
 3. start the replica: a fresh, empty `redis-server` 7.0.15 with no persistence
    (`--save "" --appendonly no`) that loads the snapshot straight from the socket
    (`--repl-diskless-load on-empty-db`), the same for both masters: with Redis's default
    (`disabled`: write the snapshot to a file, then load it) the replica's disk, shared
    with everything else on the machine, set the pace;
 4. the load, **open loop at a fixed offered rate**: `tessera-loadgen --set-ratio 1`
    sends --rate SETs a second (default 2,000) over --connections connections (default
    50), keys uniform over the key space (overwrites only: the key count stays), every
    value fresh and random. Open loop, because a closed loop at full speed would put
    more than 100 MB/s of writes into the replica's output during the sync and overflow
    the 256 MB output limit of either server before a 1 GB snapshot is through (the
    replica is dropped and the sync starts over). The rate is low for the same reason:
    everything written during the sync waits in the replica's output, and on the shared
    machine a 1 GB sync took 18-63 s; at 5,000 SET/s a Redis master passed its 256 MB
    limit after 55 s, dropped the replica and synced again. So the throughput ratio says
    whether the master keeps up with this load during the sync; the latencies say what
    the sync costs the clients;
 5. after a warm-up (--warmup, 3 s) and a steady window (--steady, 10 s), send
    `REPLICAOF 127.0.0.1 P` to the replica and poll its INFO replication every 50 ms
    until `master_link_status:up`; then a tail (--tail, 3 s); then the load stops.
    The master is sampled every --interval seconds (default 0.1) from the start of the
    load to its end: the proportional set size (/proc/PID/smaps_rollup) of the server
    process and all its descendants, so that Redis's fork child counts and pages it
    shares with its parent count once (children read first, the sample taken again
    when a child came or went meanwhile: across a fork the shared pages would count one
    and a half times); MEMORY STATS `clients.slaves` (the replica's
    output) and, Tessera only, INFO `tessera_capture_held_bytes` (the values its capture
    keeps alive).

Measured per run:
  - sync time: from REPLICAOF to the first poll that sees `master_link_status:up` on the
    replica (the snapshot, its transfer, the replica's loading it);
  - memory: the master's peak PSS (with children) from REPLICAOF to the end of the tail,
    divided by the last sample before REPLICAOF (target: <= 1.05);
  - throughput: replies the generator received per second (by arrival, its per-second
    CSV) during the sync, divided by the same over the steady window (target: >= 0.9);
    seconds cut by the sync's edges count in proportion of their overlap;
  - latency: p99 and p99.9 from each request's intended send time (the generator's 100 ms
    HDR histograms merged exactly, bench/latency.py's code), steady and during the sync;
  - checks: the replica's DBSIZE after the sync equals --keys, and the master's
    `sync_full` stays 1 (polled every second during the sync: more means the replica was
    dropped and synced again; the run stops and is reported as failed, with the reason
    from the master's log).

Report: per run, and the medians per master with the Tessera/Redis ratios, as Markdown
on stdout and in --output (default bench/results/full-sync.md; with --quick
bench/results/full-sync-quick.md); next to it one CSV per run (`<report name>-<master>-
r<repeat>.csv`): every memory sample with the generator's row of its second (replies
received, p99, max), on one axis of seconds since REPLICAOF.

The machine has 2 cores, shared: the replica (loading the snapshot), the
load generator (about 0.05 core at 2,000 requests/s) and the samplers run beside the
master and take CPU from it, as much for both masters; single runs swing, compare the
medians and the ratios of one run, not numbers across days.

Usage (from the repository root):
    cargo build --release -p tessera -p tessera-loadgen
    python3 bench/full_sync.py --quick --repeat 1       # smoke run: 100 k keys, ~2 min
    python3 bench/full_sync.py --repeat 3 --output bench/results/full-sync.md  # ~10 min
    python3 bench/full_sync.py --rate 10000 --keys 500000

Python 3.11 stdlib, Linux only (reads /proc). Servers, the RESP client and /proc readers
are bench/compaction.py's; the generator's handling and histogram merging
bench/latency.py's.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compaction as cp  # noqa: E402  (servers, RESP client, /proc readers)
import latency as lat  # noqa: E402  (the generator's windows)

REPO = cp.REPO
HOST = cp.HOST
SERVERS = cp.SERVERS

TARGET_MEMORY = 1.05  # peak PSS during the sync / PSS before it (Tessera)
TARGET_THROUGHPUT = 0.9  # ops/s during the sync / steady ops/s (Tessera)
LINK_POLL = 0.05  # seconds between the replica's INFO polls
MB = 1e6


class SyncServers(cp.Servers):
    """compaction.py's masters with a diskless full sync that starts at once, and a
    replica without persistence."""

    tmp_prefix = "bench-fullsync-"

    def command(self, name: str, port, d, threads=None) -> list[str]:
        if name == "replica":
            return [self.args.redis, "--port", str(port), "--bind", HOST, "--dir", str(d),
                    "--save", "", "--appendonly", "no", "--repl-diskless-load", "on-empty-db"]
        return super().command(name, port, d, threads) + [
            "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]


# --------------------------------------------------------------------------
# Sampling the master
# --------------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Running, not a zombie (whose memory is gone, or going)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def pss_tree(pid: int) -> int | None:
    """PSS of a process and all its descendants (a fork child's copy-on-write shows),
    read as one consistent picture: the children first, then the parent, and the sample
    is taken again if a child came or went meanwhile. (Read across a fork, the parent's
    PSS from before it and the child's half of the shared pages from after it would count
    the shared pages one and a half times; read across a child's exit, likewise.)"""
    for _attempt in range(5):
        kids = cp.descendants(pid)
        kid_pss = [cp.pss_bytes(k) for k in kids]
        own = cp.pss_bytes(pid)
        if own is None:
            return None
        if (cp.descendants(pid) == kids and None not in kid_pss
                and all(alive(k) for k in kids)):
            return own + sum(kid_pss)
    return None


def memory_stats(reply) -> dict:
    """MEMORY STATS' flat array (RESP2) as a dict of its integer fields."""
    out = {}
    if isinstance(reply, list):
        for k, v in zip(reply[0::2], reply[1::2]):
            if isinstance(v, int):
                out[k] = v
    return out


@dataclass
class Sample:
    t: float  # Unix time, when the sample began
    t_end: float  # and when it was read
    pss: int | None
    replica_output: int | None
    capture_held: int | None


class Sampler(threading.Thread):
    """Samples the master every `interval` seconds until stopped."""

    def __init__(self, srv: cp.Server, interval: float):
        super().__init__(daemon=True)
        self.srv = srv
        self.interval = interval
        self.samples: list[Sample] = []
        self.stop_event = threading.Event()
        self.error: str | None = None

    def run(self) -> None:
        conn = None
        try:
            conn = cp.Conn(self.srv.port, timeout=30.0)
            while not self.stop_event.is_set():
                t = time.time()
                pss = pss_tree(self.srv.proc.pid)
                stats, pers = conn.pipeline(("MEMORY", "STATS"), ("INFO", "persistence"))
                fields = cp.parse_info(pers if isinstance(pers, str) else "")
                self.samples.append(Sample(
                    t, time.time(), pss, memory_stats(stats).get("clients.slaves"),
                    cp.num(fields, "tessera_capture_held_bytes")))
                self.stop_event.wait(max(0.0, self.interval - (time.time() - t)))
        except Exception as e:  # reported with the run
            self.error = f"sampler: {e}"
        finally:
            if conn is not None:
                conn.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------


@dataclass
class Run:
    server: str
    rep: int
    m: dict = field(default_factory=dict)
    error: str | None = None


def wait_until(deadline: float, gen, srv, errf: Path) -> None:
    lat.wait_until(deadline, gen, srv, errf)


def dropped_reason(srv: cp.Server) -> str:
    for line in reversed(srv.log_tail(200).splitlines()):
        if "output buffer limits" in line:
            found = re.search(r"omem=(\d+)", line)
            return f"over its output limit (omem {int(found.group(1)) / MB:,.0f} MB)" if found else line[-200:]
        if "scheduled to be closed" in line.lower() or "output limit" in line.lower():
            return line[-200:]
    return "reason not found in the master's log"


def write_series(path: Path, samples: list[Sample], rows: list[dict], start: float, t0: float) -> None:
    """The master's samples, each with the generator's row of its second, on one time
    axis: seconds since REPLICAOF."""
    by_second = {row["second"]: row for row in rows}

    def mb(v) -> str:
        return "" if v is None else f"{v / MB:.1f}"

    with open(path, "w", newline="") as out:
        w = csv.writer(out)
        w.writerow(["t_since_replicaof_s", "pss_mb", "replica_output_mb", "capture_held_mb",
                    "load_second", "received", "p99_us", "max_us"])
        for s in samples:
            second = int(s.t - start)
            row = by_second.get(second, {})
            w.writerow([f"{s.t - t0:.2f}", mb(s.pss), mb(s.replica_output), mb(s.capture_held),
                        second, row.get("received", ""), row.get("p99_us", ""), row.get("max_us", "")])


def received_rate(rows: list[dict], start: float, end: float) -> float | None:
    """Replies received per second over [start, end) on the generator's time base, from
    its per-second rows (a second cut by an edge counts in proportion of the overlap)."""
    total = covered = 0.0
    for row in rows:
        lo, hi = row["second"], row["second"] + 1
        overlap = min(hi, end) - max(lo, start)
        if overlap > 0:
            total += (row["received"] or 0) * overlap
            covered += overlap
    return total / covered if covered > 0 else None


def run_once(args, servers: SyncServers, name: str, rep: int) -> Run:
    run = Run(name, rep)
    master = replica = gen = sampler = ctrl = None
    try:
        master = servers.start(name, None)
        # ---- fill
        t = time.monotonic()
        pre = subprocess.run(
            lat.loadgen_common(args, master) + ["--preload", "--duration", "0"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=args.run_timeout)
        run.m["fill_s"] = time.monotonic() - t
        if pre.returncode != 0:
            raise RuntimeError(f"fill failed ({pre.returncode}): {pre.stderr.strip()[-400:]}")
        keys = cp.resp(master.port, "DBSIZE", timeout=30.0)
        if keys != args.keyspace:
            raise RuntimeError(f"the fill left {keys} keys, not {args.keyspace}")
        os.sync()
        replica = servers.start("replica", None)

        # ---- the load
        errf, gen_csv, gen_json = (master.dir / "loadgen.err", master.dir / "loadgen.csv",
                                   master.dir / "loadgen.json")
        upper = args.warmup + args.steady + args.sync_timeout + args.tail + 60
        argv = lat.loadgen_common(args, master) + [
            "--connections", str(args.connections), "--rate", f"{args.rate:g}",
            "--set-ratio", "1", "--duration", f"{min(upper, 3600):g}", "--until-stdin-eof",
            "--output", str(gen_csv), "--json", str(gen_json),
        ]
        with open(errf, "wb") as ef:
            gen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=ef,
                                   start_new_session=True)
        found = re.search(r"started unix_us=(\d+)", gen.stdout.readline().decode(errors="replace"))
        if not found:
            gen.wait(timeout=30)
            raise RuntimeError(f"tessera-loadgen did not start ({gen.returncode}): "
                               f"{lat.tail_text(errf)}")
        start = int(found.group(1)) / 1e6
        sampler = Sampler(master, args.interval)
        sampler.start()
        wait_until(start + args.warmup + args.steady, gen, master, errf)

        # ---- the sync
        ctrl = cp.Conn(replica.port, timeout=30.0)
        t0 = time.time()
        ctrl.call("REPLICAOF", HOST, master.port)
        polls = 0
        while True:
            time.sleep(LINK_POLL)
            lat.check_alive(gen, master, errf)
            t_poll = time.time()
            fields = cp.parse_info(ctrl.call("INFO", "replication"))
            if fields.get("master_link_status") == "up":
                t1 = t_poll
                break
            if t_poll - t0 > args.sync_timeout:
                raise RuntimeError(f"no link after {args.sync_timeout:.0f} s")
            polls += 1
            if polls % 20 == 0 and cp.num(cp.info_fields(master.port, "stats"), "sync_full", 0) > 1:
                # The master dropped the replica (its output limit, most likely: see the
                # master's log) and syncs it again: the run measures nothing more.
                raise RuntimeError(f"the replica was dropped after {t_poll - t0:.0f} s and "
                                   f"synced again: {dropped_reason(master)}")
        wait_until(t1 + args.tail, gen, master, errf)
        sampler.stop()
        gen.stdin.close()  # ends the schedule; the generator drains and writes its files
        gen.wait(timeout=120)
        run.m["replica_keys"] = ctrl.call("DBSIZE")
        stats = cp.info_fields(master.port, "stats")
        run.m["sync_full"] = cp.num(stats, "sync_full")
        if sampler.error:
            raise RuntimeError(sampler.error)
        if gen.returncode != 0:
            raise RuntimeError(f"tessera-loadgen exited {gen.returncode}: {lat.tail_text(errf)}")

        # ---- figures
        run.m["sync_s"] = t1 - t0
        before = [s for s in sampler.samples if s.t_end < t0 and s.pss]
        during = [s for s in sampler.samples if t0 <= s.t and s.pss]
        if not before or not during:
            raise RuntimeError("no memory samples before or during the sync")
        run.m["pss_before"] = before[-1].pss
        run.m["pss_peak"] = max(s.pss for s in during)
        run.m["pss_ratio"] = run.m["pss_peak"] / run.m["pss_before"]
        run.m["pss_after"] = during[-1].pss
        run.m["replica_output_peak"] = max((s.replica_output or 0) for s in during)
        run.m["capture_held_peak"] = max((s.capture_held or 0) for s in during)
        with open(gen_csv, newline="") as f:
            rows = [{k: (int(v) if v not in ("", None) else None) for k, v in row.items()}
                    for row in csv.DictReader(f)]
        doc = json.loads(gen_json.read_text())
        series = Path(args.output).resolve().parent / f"{args.prefix}-{name}-r{rep + 1}.csv"
        write_series(series, sampler.samples, rows, start, t0)
        s0, s1 = t0 - start, t1 - start
        run.m["steady_ops"] = received_rate(rows, args.warmup, s0)
        run.m["sync_ops"] = received_rate(rows, s0, s1)
        run.m["ops_ratio"] = (run.m["sync_ops"] / run.m["steady_ops"]
                              if run.m["sync_ops"] and run.m["steady_ops"] else None)
        run.m.update(lat.window_metrics(lat.window(doc, args.warmup, s0), "steady"))
        run.m.update(lat.window_metrics(lat.window(doc, s0, s1), "sync"))
        run.m["errors"] = doc["error_replies"]
        run.m["late_sends"] = doc["totals"]["late_sends"]
        run.m["max_late_us"] = doc["lateness_us"]["max"]
        if run.m["replica_keys"] != args.keyspace:
            raise RuntimeError(f"the replica has {run.m['replica_keys']} keys, not {args.keyspace}")
    except KeyboardInterrupt:
        raise
    except Exception as e:
        run.error = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"  FAILED: {e}", file=sys.stderr)
    finally:
        if sampler is not None and sampler.is_alive():
            sampler.stop()
        if gen is not None and gen.stdin is not None and not gen.stdin.closed:
            try:
                gen.stdin.close()
            except OSError:
                pass
        cp.stop_loader(gen)
        if ctrl is not None:
            ctrl.close()
        for srv in (replica, master):
            if srv is not None:
                servers.stop(srv)
    return run


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def med(runs: list[Run], key: str):
    values = [r.m[key] for r in runs if r.error is None and r.m.get(key) is not None]
    return statistics.median(values) if values else None


def f(v, fmt: str) -> str:
    return "n/a" if v is None else format(v, fmt)


def ms(us) -> str:
    return "n/a" if us is None else f"{us / 1000:,.1f}"


def ratio(a, b) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}"


def verdict(v, target: float, at_most: bool) -> str:
    if v is None:
        return "n/a"
    return f"**{v:.2f}** ({'met' if (v <= target if at_most else v >= target) else 'not met'})"


def render(args, ctx: dict, runs: list[Run], status: str) -> str:
    by = {name: [r for r in runs if r.server == name] for name in SERVERS}
    lines = [
        f"# Full sync under a SET load: Tessera vs Redis {ctx['redis_version_short']} as the master",
        "",
        f"- Command: `{ctx['command']}`",
        f"- Date: {ctx['date']}; {platform.machine()}, {os.cpu_count()} CPUs (shared; load "
        f"average {ctx['load_start']:.2f} at the start); status: {status}",
        f"- Tessera: `{ctx['tessera_version']}` (git {ctx['tessera_git']}); Redis: "
        f"`{ctx['redis_version']}`; generator `{ctx['loadgen_version']}`",
        f"- Data: {args.keyspace:,} keys of {args.value_size} B distinct random values; load: "
        f"open loop, {args.rate:,.0f} SET/s over {args.connections} connections (uniform keys, "
        f"overwrites), {args.warmup:g} s warm-up, {args.steady:g} s steady, {args.tail:g} s "
        f"after the link is up; both masters `repl-diskless-sync yes`, "
        f"`repl-diskless-sync-delay 0`; replica: redis-server, no persistence, `repl-diskless-load on-empty-db`; "
        f"medians of {args.repeat} run(s) per master, alternating which goes first; memory "
        f"sampled every {args.interval:g} s.",
        "",
        "| master | sync s | PSS before MB | peak PSS MB | peak / before | steady ops/s "
        "| ops/s during sync | during / steady | steady p99 ms | sync p99 ms | sync p99.9 ms "
        "| sync max ms | replica output peak MB | capture held peak MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in SERVERS:
        rs = by[name]
        cap = med(rs, "capture_held_peak") if name == "tessera" else None
        lines.append(
            f"| {name} | {f(med(rs, 'sync_s'), '.2f')} | {f(med(rs, 'pss_before') and med(rs, 'pss_before') / MB, ',.0f')} "
            f"| {f(med(rs, 'pss_peak') and med(rs, 'pss_peak') / MB, ',.0f')} | {f(med(rs, 'pss_ratio'), '.2f')} "
            f"| {f(med(rs, 'steady_ops'), ',.0f')} | {f(med(rs, 'sync_ops'), ',.0f')} "
            f"| {f(med(rs, 'ops_ratio'), '.2f')} | {ms(med(rs, 'steady_p99'))} | {ms(med(rs, 'sync_p99'))} "
            f"| {ms(med(rs, 'sync_p99.9'))} | {ms(med(rs, 'sync_max'))} "
            f"| {f(med(rs, 'replica_output_peak') and med(rs, 'replica_output_peak') / MB, ',.1f')} "
            f"| {'—' if cap is None else f'{cap / MB:,.0f}'} |")
    t, r = by["tessera"], by["redis"]
    lines += [
        "",
        "| | Tessera | Redis | Tessera / Redis |",
        "|---|---:|---:|---:|",
        f"| sync time, s | {f(med(t, 'sync_s'), '.2f')} | {f(med(r, 'sync_s'), '.2f')} "
        f"| {ratio(med(t, 'sync_s'), med(r, 'sync_s'))} |",
        f"| peak PSS / before (target ≤ {TARGET_MEMORY}) | {verdict(med(t, 'pss_ratio'), TARGET_MEMORY, True)} "
        f"| {f(med(r, 'pss_ratio'), '.2f')} | {ratio(med(t, 'pss_ratio'), med(r, 'pss_ratio'))} |",
        f"| peak PSS, MB | {f(med(t, 'pss_peak') and med(t, 'pss_peak') / MB, ',.0f')} "
        f"| {f(med(r, 'pss_peak') and med(r, 'pss_peak') / MB, ',.0f')} "
        f"| {ratio(med(t, 'pss_peak'), med(r, 'pss_peak'))} |",
        f"| ops/s during / steady (target ≥ {TARGET_THROUGHPUT}) "
        f"| {verdict(med(t, 'ops_ratio'), TARGET_THROUGHPUT, False)} | {f(med(r, 'ops_ratio'), '.2f')} "
        f"| {ratio(med(t, 'ops_ratio'), med(r, 'ops_ratio'))} |",
        f"| p99 during the sync, ms | {ms(med(t, 'sync_p99'))} | {ms(med(r, 'sync_p99'))} "
        f"| {ratio(med(t, 'sync_p99'), med(r, 'sync_p99'))} |",
        "",
        "Every run:",
        "",
        "| run | master | fill s | sync s | PSS before MB | peak MB | peak / before | PSS 3 s after MB "
        "| steady ops/s | sync ops/s | during / steady | steady p99 ms | sync p99 ms | sync max ms "
        "| replica output peak MB | capture held peak MB | sync_full | late sends | error |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for k, run in enumerate(ctx["order"], 1):
        m = run.m
        mb = lambda key: f(m.get(key) and m[key] / MB, ",.0f")  # noqa: E731
        lines.append(
            f"| {k} | {run.server} | {f(m.get('fill_s'), '.1f')} | {f(m.get('sync_s'), '.2f')} "
            f"| {mb('pss_before')} | {mb('pss_peak')} | {f(m.get('pss_ratio'), '.2f')} | {mb('pss_after')} "
            f"| {f(m.get('steady_ops'), ',.0f')} | {f(m.get('sync_ops'), ',.0f')} | {f(m.get('ops_ratio'), '.2f')} "
            f"| {ms(m.get('steady_p99'))} | {ms(m.get('sync_p99'))} | {ms(m.get('sync_max'))} "
            f"| {f(m.get('replica_output_peak') and m['replica_output_peak'] / MB, ',.1f')} "
            f"| {mb('capture_held_peak') if run.server == 'tessera' else '—'} | {m.get('sync_full', 'n/a')} "
            f"| {m.get('late_sends', 'n/a')} | {run.error or ''} |")
    lines += [
        "",
        "Sync time: REPLICAOF on the replica to its first INFO poll (every 50 ms) showing "
        "`master_link_status:up`. Peak PSS: the master and its descendants from REPLICAOF to "
        f"{args.tail:g} s after the link is up; before: the last sample before REPLICAOF. "
        "ops/s: replies received per second (the generator's per-second CSV). Latencies from "
        "each SET's intended send time. Replica output: MEMORY STATS `clients.slaves` of the "
        "master (Redis 7.0 counts its shared replication buffer there); capture held: "
        "Tessera's INFO `tessera_capture_held_bytes`, the values of captured slots not yet "
        "written (an upper bound of what the capture keeps alive: most of them are shared "
        "with the live keyspace).",
    ]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def parse_args():
    p = argparse.ArgumentParser(description="Full sync of a redis-server replica under a SET load, "
                                "Tessera vs Redis as the master (see the module docstring).")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 100 k keys, short phases (numbers not meaningful)")
    p.add_argument("--keys", dest="keyspace", type=int, default=None,
                   help="keys filled (default 1000000; quick 100000)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per value (default 1024)")
    p.add_argument("--rate", type=float, default=2_000, help="SETs/s offered (default 2000)")
    p.add_argument("--connections", type=int, default=50, help="the load's connections (default 50)")
    p.add_argument("--warmup", type=float, default=None, help="seconds of load before the steady window (default 3; quick 2)")
    p.add_argument("--steady", type=float, default=None, help="seconds of the steady window (default 10; quick 5)")
    p.add_argument("--tail", type=float, default=3.0, help="seconds sampled after the link is up (default 3)")
    p.add_argument("--interval", type=float, default=0.1, help="seconds between memory samples (default 0.1)")
    p.add_argument("--repeat", type=int, default=3, help="runs per master, alternating which goes first (default 3)")
    p.add_argument("--seed", type=int, default=1, help="the generator's seed (the same for both masters)")
    p.add_argument("--tessera", default=str(REPO / "target" / "release" / "tessera-server"))
    p.add_argument("--redis", default="redis-server", help="redis-server binary, master and replica")
    p.add_argument("--loadgen", default=None, help="tessera-loadgen binary (default target/release/tessera-loadgen)")
    p.add_argument("--no-build", action="store_true", help="do not run cargo build for the generator")
    p.add_argument("--tessera-arg", action="append", default=[], metavar="ARG",
                   help="extra tessera-server argument (repeatable)")
    p.add_argument("--redis-arg", action="append", default=[], metavar="ARG",
                   help="extra argument of the Redis master (repeatable)")
    p.add_argument("--output", default=None,
                   help="Markdown report (default bench/results/full-sync.md; quick: full-sync-quick.md)")
    p.add_argument("--tmp-base", default=None, help="where the servers' temporary directories go")
    p.add_argument("--sync-timeout", type=float, default=600)
    p.add_argument("--run-timeout", type=float, default=1800, help="seconds before a fill is abandoned")
    args = p.parse_args()
    if args.keyspace is None:
        args.keyspace = 100_000 if args.quick else 1_000_000
    if args.warmup is None:
        args.warmup = 2.0 if args.quick else 3.0
    if args.steady is None:
        args.steady = 5.0 if args.quick else 10.0
    if args.output is None:
        args.output = str(REPO / "bench" / "results" / ("full-sync-quick.md" if args.quick else "full-sync.md"))
    if args.repeat < 1 or args.rate <= 0 or args.connections < 1 or args.keyspace < 1:
        p.error("--repeat, --rate, --connections and --keys must be positive")
    return args


def main() -> int:
    args = parse_args()
    problem = lat.build_loadgen(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    for tool in (args.tessera, args.redis):
        if shutil.which(tool) is None:
            print(f"error: {tool} not found (build Tessera with `cargo build --release`)", file=sys.stderr)
            return 2
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, cp.raise_interrupt)
    args.tmp_base = str(Path(args.tmp_base or tempfile.gettempdir()))
    args.prefix = Path(args.output).stem
    Path(args.output).resolve().parent.mkdir(parents=True, exist_ok=True)
    redis_version = cp.command_output([args.redis, "--version"])
    found = re.search(r"v=(\S+)", redis_version)
    ctx = {
        "command": "python3 bench/full_sync.py " + " ".join(shlex.quote(cp.shown_path(a)) for a in sys.argv[1:]),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "redis_version": redis_version,
        "redis_version_short": found.group(1) if found else "",
        "tessera_version": cp.command_output([args.tessera, "--version"]),
        "tessera_git": cp.binary_git(Path(shutil.which(args.tessera))),
        "loadgen_version": cp.command_output([args.loadgen, "--version"]),
        "load_start": os.getloadavg()[0],
        "order": [],
    }
    servers = SyncServers(args)
    runs: list[Run] = []
    status = "complete"
    try:
        for rep in range(args.repeat):
            order = list(SERVERS) if rep % 2 == 0 else list(reversed(SERVERS))
            for name in order:
                print(f"run {len(runs) + 1}: {name}, repeat {rep + 1}", file=sys.stderr, flush=True)
                run = run_once(args, servers, name, rep)
                runs.append(run)
                ctx["order"].append(run)
                m = run.m
                print(f"  sync {f(m.get('sync_s'), '.2f')} s, PSS {f(m.get('pss_before') and m['pss_before'] / MB, ',.0f')}"
                      f" -> {f(m.get('pss_peak') and m['pss_peak'] / MB, ',.0f')} MB "
                      f"({f(m.get('pss_ratio'), '.2f')}), ops/s {f(m.get('steady_ops'), ',.0f')} -> "
                      f"{f(m.get('sync_ops'), ',.0f')} ({f(m.get('ops_ratio'), '.2f')}), sync p99 "
                      f"{ms(m.get('sync_p99'))} ms, max {ms(m.get('sync_max'))} ms, replica output peak "
                      f"{f(m.get('replica_output_peak') and m['replica_output_peak'] / MB, ',.1f')} MB, "
                      f"sync_full {m.get('sync_full')}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        servers.stop_all()
    report = render(args, ctx, runs, status)
    print(report)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(report)
    return 0 if status == "complete" else 1


if __name__ == "__main__":
    sys.exit(main())
