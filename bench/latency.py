#!/usr/bin/env python3
"""Latency under a fixed offered load, before and during a compaction: Tessera vs Redis.

This is a benchmark, not a test: it only measures and reports, it never fails on a slow
number.

Why open loop. A closed-loop client such as redis-benchmark sends a connection's next
request only when the previous reply has come back. When the server stalls (a fork, an
fsync, a compaction's hand-over), such a client stops offering load, the requests it
would have sent during the stall are never sent, and the few that were waiting show one
long latency each: the tail is hidden ("coordinated omission"). Here the load is
**open loop**: `tessera-loadgen` (the workspace member bench/loadgen) gives each of its
connections a fixed schedule -- one request every connections/rate seconds, from a
random phase -- and sends each request when it is due whether or not earlier ones have
been answered (a slow server gets several requests pipelined on a connection). Latency
is measured from each request's **intended** send time to the arrival of its reply, so
time spent waiting behind a stall counts in full. If the generator itself falls behind
its schedule, the delay is inside the latencies too and is reported separately (late
sends: more than 1 ms after their due time; maximum lateness), so a run in which the
generator was the bottleneck shows as such.

What one run does, for each repeat (--repeat, default 1) and each server (--servers,
Tessera built at target/release/tessera-server, and redis-server from PATH, Debian's
7.0.15), alternating which server goes first:

 1. start a fresh server in a fresh temporary directory on a free loopback port (never
    6379), append-only log on, fsync policy --fsync (default everysec), no RDB save
    points, automatic rewrites off so that the only compaction is the measured one:

        tessera-server --port P --bind 127.0.0.1 --dir D --appendonly yes \\
            --appendfsync everysec --save "" --auto-aof-rewrite-percentage 0
        redis-server   --port P --bind 127.0.0.1 --dir D --appendonly yes \\
            --appendfsync everysec --save "" --aof-use-rdb-preamble yes \\
            --auto-aof-rewrite-percentage 0

 2. preload: `tessera-loadgen --preload --duration 0` SETs every key of the key space
    (default 500,000 keys `key:<n>`, 1 KB values, each fresh random printable bytes)
    once, pipelined as fast as the server takes them; DBSIZE is checked; then `sync`, so
    that the preload's dirty pages are not flushed during the measurement;
 3. the load: `tessera-loadgen` at a fixed rate (default 20,000 requests/s over 50
    connections, 50 % SET / 50 % GET, keys uniform over the key space, every SET a fresh
    random value) for a warm-up (5 s) and a steady window (20 s); then BGREWRITEAOF on a
    separate connection, INFO persistence polled every 50 ms until
    aof_rewrite_in_progress:0 with aof_rewrites incremented; then a tail (5 s); then the
    driver closes the generator's standard input, which ends its schedule; it waits up
    to 10 s for the replies still due and writes its files;
 4. windows: the generator writes one raw HDR histogram (3 significant digits) per
    100 ms of the schedule, by the requests' due time, and its start time; the driver
    places BGREWRITEAOF and the end of the rewrite on that time base and merges the
    intervals of each window **exactly**, by adding bucket counts (percentiles of
    windows are never averaged). Steady = from the end of the warm-up to BGREWRITEAOF;
    compaction = from BGREWRITEAOF to the poll that saw the rewrite done (an interval
    belongs to the window that holds its midpoint: the edges are good to 50 ms, the
    end of the rewrite to one poll).

Reported per server: p50 / p99 / p99.9 / max for the steady and the compaction window,
how long the compaction took, completed / offered, error replies, GETs that found no
key, the generator's lateness and CPU share; side by side the ratios Tessera / Redis of
steady p99.9 (the target: <= 1.1) and compaction-window p99.9 (target: <= 1.0); a PNG of
the per-second p99 and p99.9 (log scale) and replies/s over time, both servers, the
compaction shaded, t = 0 at BGREWRITEAOF; per-run per-second CSVs next to the report; a
Markdown report on stdout and in --report (default bench/results/latency.md, with
--quick bench/results/latency-quick.md), with the command line, the commit (and whether
the tree had uncommitted changes outside bench/results), the versions and the CPU count.

The generator shares the machine with the server: at 20,000 requests/s it takes about
40 % of one core (some 20 µs of CPU a request, nearly all of it the kernel's loopback TCP
path, about what redis-benchmark spends per request; BENCHMARKS.md has the measurement),
and each run reports its share.

Usage (from the repository root; the driver builds the generator itself with
`cargo build --release -p tessera-loadgen` unless --no-build or --loadgen is given):
    cargo build --release
    python3 bench/latency.py                 # full run: about a minute per server and repeat
    python3 bench/latency.py --quick         # smoke run, under a minute (numbers not meaningful)
    python3 bench/latency.py --repeat 3 --fsync always
    python3 bench/latency.py --rate 40000 --steady 60 --servers tessera

The generator alone:
    cargo build --release -p tessera-loadgen
    target/release/tessera-loadgen --port 6379 --preload --duration 0
    target/release/tessera-loadgen --port 6379 --rate 20000 --duration 30 \\
        --output per-second.csv --json histograms.json

Python 3.11 stdlib, plus matplotlib for the chart (python3 -m pip install matplotlib;
without it the chart is skipped). Linux only. Servers, the RESP client and the report
helpers are compaction.py's.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compaction as cp  # noqa: E402  (servers, RESP client, report helpers)

REPO = cp.REPO
HOST = cp.HOST
SERVERS = cp.SERVERS

TARGET_STEADY = 1.1  # Tessera p99.9 / Redis p99.9, steady window
TARGET_COMPACTION = 1.0  # the same during the compaction
QUANTILES = (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999))


# --------------------------------------------------------------------------
# Servers: compaction.py's, with the fsync policy as an option
# --------------------------------------------------------------------------


class LatencyServers(cp.Servers):
    tmp_prefix = "bench-latency-"

    def command(self, name: str, port, d, threads=None) -> list[str]:
        fsync = self.args.fsync
        if name == "tessera":
            return [
                str(self.args.tessera), "--port", str(port), "--bind", HOST, "--dir", str(d),
                "--appendonly", "yes", "--appendfsync", fsync, "--save", "",
                "--auto-aof-rewrite-percentage", "0",
            ] + self.args.tessera_arg
        return [
            self.args.redis, "--port", str(port), "--bind", HOST, "--dir", str(d),
            "--appendonly", "yes", "--appendfsync", fsync, "--save", "",
            "--aof-use-rdb-preamble", "yes", "--auto-aof-rewrite-percentage", "0",
        ] + self.args.redis_arg


# --------------------------------------------------------------------------
# Histograms: the generator's sparse HDR buckets, merged by adding counts
# --------------------------------------------------------------------------


@dataclass
class Window:
    """A stretch of the schedule: its intervals merged."""
    start: float  # seconds on the generator's time base
    end: float
    buckets: dict[int, int] = field(default_factory=dict)  # bucket's highest value (µs) -> count
    sent: int = 0
    completed: int = 0
    errors: int = 0
    late: int = 0
    max_late_us: int = 0
    max_us: int | None = None

    @property
    def count(self) -> int:
        return sum(self.buckets.values())

    def quantile(self, q: float) -> int | None:
        """The HDR histogram's value_at_quantile: the first bucket whose running count
        reaches ceil(q * total)."""
        total = self.count
        if total == 0:
            return None
        rank = max(1, math.ceil(q * total))
        running = 0
        for v in sorted(self.buckets):
            running += self.buckets[v]
            if running >= rank:
                return v
        return max(self.buckets)


def window(doc: dict, start: float, end: float) -> Window:
    """Merges the intervals whose midpoint lies in [start, end)."""
    w = Window(start, end)
    width = doc["interval_s"]
    for iv in doc["intervals"]:
        mid = (iv["i"] + 0.5) * width
        if not (start <= mid < end):
            continue
        for v, n in iv["hist"]:
            w.buckets[v] = w.buckets.get(v, 0) + n
        w.sent += iv["sent"]
        w.completed += iv["completed"]
        w.errors += iv["errors"]
        w.late += iv["late"]
        w.max_late_us = max(w.max_late_us, iv["max_late_us"])
        if iv["max_us"] is not None:
            w.max_us = iv["max_us"] if w.max_us is None else max(w.max_us, iv["max_us"])
    return w


def window_metrics(w: Window, prefix: str) -> dict:
    m = {f"{prefix}_{name}": w.quantile(q) for name, q in QUANTILES}
    m[f"{prefix}_max"] = w.max_us
    m[f"{prefix}_count"] = w.count
    m[f"{prefix}_sent"] = w.sent
    m[f"{prefix}_completed"] = w.completed
    m[f"{prefix}_errors"] = w.errors
    m[f"{prefix}_late"] = w.late
    m[f"{prefix}_max_late_us"] = w.max_late_us
    m[f"{prefix}_s"] = w.end - w.start
    return m


def merge_check(doc: dict) -> bool:
    """The generator's own whole-run percentiles against the merge of all its intervals:
    a check of the merging (they must be equal)."""
    w = window(doc, -1e18, 1e18)
    own = doc["latency_us"]
    return all(w.quantile(q) == own[name] for name, q in QUANTILES) and w.count == own["count"]


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------


@dataclass
class Run:
    server: str
    rep: int
    label: str
    m: dict = field(default_factory=dict)
    seconds: list[dict] = field(default_factory=list)  # the generator's per-second rows
    t_bg: float | None = None  # BGREWRITEAOF, seconds on the generator's time base
    t_done: float | None = None  # the poll that saw the rewrite done
    error: str | None = None
    csv_path: Path | None = None
    json_path: Path | None = None


def loadgen_common(args, srv: cp.Server) -> list[str]:
    return [str(args.loadgen), "--host", HOST, "--port", str(srv.port),
            "--keyspace", str(args.keyspace), "--value-size", str(args.value_size),
            "--seed", str(args.seed)]


def wait_until(deadline: float, gen: subprocess.Popen, srv: cp.Server, errf: Path) -> None:
    """Sleeps until the Unix time `deadline`, checking that both processes live."""
    while True:
        check_alive(gen, srv, errf)
        left = deadline - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.2))


def check_alive(gen: subprocess.Popen, srv: cp.Server, errf: Path) -> None:
    if gen.poll() is not None:
        raise RuntimeError(f"tessera-loadgen exited ({gen.returncode}): {tail_text(errf)}")
    if not srv.alive():
        raise RuntimeError(f"{srv.name} exited during the run:\n{srv.log_tail()}")


def tail_text(path: Path, chars: int = 400) -> str:
    try:
        return path.read_text(errors="replace").strip()[-chars:]
    except OSError:
        return ""


def cpu_seconds(pid: int) -> float | None:
    """CPU time of a process: all its threads, and its children it has waited for."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def tree_cpu_seconds(pid: int) -> float | None:
    """The server's CPU time, with its live children's (Redis's rewrite child)."""
    own = cpu_seconds(pid)
    if own is None:
        return None
    return own + sum(cpu_seconds(k) or 0.0 for k in cp.descendants(pid))


def run_once(args, servers: LatencyServers, name: str, rep: int, label: str) -> Run:
    run = Run(name, rep, label)
    srv = gen = ctrl = None
    try:
        srv = servers.start(name, None)
        # ---- preload
        t = time.monotonic()
        pre = subprocess.run(
            loadgen_common(args, srv) + ["--preload", "--duration", "0"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=args.run_timeout,
        )
        run.m["preload_s"] = time.monotonic() - t
        if pre.returncode != 0:
            raise RuntimeError(f"preload failed ({pre.returncode}): {pre.stderr.strip()[-400:]}")
        run.m["keys"] = cp.resp(srv.port, "DBSIZE", timeout=30.0)
        if run.m["keys"] != args.keyspace:
            raise RuntimeError(f"preload left {run.m['keys']} keys, not {args.keyspace}")
        t = time.monotonic()
        os.sync()
        run.m["sync_s"] = time.monotonic() - t

        # ---- the load
        json_path, gen_csv, errf = srv.dir / "loadgen.json", srv.dir / "loadgen.csv", srv.dir / "loadgen.err"
        upper = args.warmup + args.steady + args.compaction_timeout + args.tail + 60
        argv = loadgen_common(args, srv) + [
            "--connections", str(args.connections), "--rate", f"{args.rate:g}",
            "--set-ratio", f"{args.set_ratio:g}", "--threads", str(args.gen_threads),
            "--duration", f"{min(upper, 3600):g}", "--until-stdin-eof",
            "--output", str(gen_csv), "--json", str(json_path),
        ]
        with open(errf, "wb") as ef:
            gen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=ef,
                                   start_new_session=True)
        line = gen.stdout.readline().decode(errors="replace")
        found = re.search(r"started unix_us=(\d+)", line)
        if not found:
            gen.wait(timeout=30)
            raise RuntimeError(f"tessera-loadgen did not start ({gen.returncode}): {tail_text(errf)}")
        start = int(found.group(1)) / 1e6
        ctrl = cp.Conn(srv.port, timeout=30.0)
        pid = srv.proc.pid
        wait_until(start + args.warmup, gen, srv, errf)
        cpu_steady, t_steady = tree_cpu_seconds(pid), time.time()
        wait_until(start + args.warmup + args.steady, gen, srv, errf)
        pers = cp.parse_info(ctrl.call("INFO", "persistence"))
        rewrites_before = cp.num(pers, "aof_rewrites", 0)
        t_bg = time.time()
        cpu_bg = tree_cpu_seconds(pid)
        reply = ctrl.call("BGREWRITEAOF")
        if "started" not in str(reply).lower():
            raise RuntimeError(f"BGREWRITEAOF replied {reply!r}")
        run.t_bg = t_bg - start
        while True:
            time.sleep(args.poll_interval)
            check_alive(gen, srv, errf)
            t_poll = time.time()
            pers = cp.parse_info(ctrl.call("INFO", "persistence"))
            if cp.num(pers, "aof_rewrite_in_progress", 0) == 0 and cp.num(pers, "aof_rewrites", 0) > rewrites_before:
                run.t_done = t_poll - start
                cpu_done = tree_cpu_seconds(pid)
                break
            if t_poll - t_bg > args.compaction_timeout:
                raise RuntimeError(f"compaction still running after {args.compaction_timeout:.0f} s")
        run.m["rewrite_status"] = pers.get("aof_last_bgrewrite_status", "?")
        if None not in (cpu_steady, cpu_bg, cpu_done):
            run.m["server_cpu_steady"] = 100 * (cpu_bg - cpu_steady) / max(t_bg - t_steady, 1e-9)
            run.m["server_cpu_comp"] = 100 * (cpu_done - cpu_bg) / max(t_poll - t_bg, 1e-9)
        wait_until(time.time() + args.tail, gen, srv, errf)
        gen.stdin.close()  # ends the schedule; the generator drains and writes its files
        try:
            gen.wait(timeout=120)
        except subprocess.TimeoutExpired:
            raise RuntimeError("tessera-loadgen did not finish within 120 s of being stopped")
        run.m["loadgen_exit"] = gen.returncode
        run.m["loadgen_stderr"] = tail_text(errf, 2000)
        if not json_path.exists():
            raise RuntimeError(f"tessera-loadgen wrote no results ({gen.returncode}): {tail_text(errf)}")
        doc = json.loads(json_path.read_text())
        if args.keep_json:
            run.json_path = Path(args.results_dir) / f"{args.prefix}-{name}-r{rep + 1}.json"
            shutil.copyfile(json_path, run.json_path)
        with open(gen_csv, newline="") as f:
            run.seconds = [{k: (int(v) if v not in ("", None) else None) for k, v in row.items()}
                           for row in csv.DictReader(f)]
        compute_metrics(args, run, doc)
        ctrl.close()
        ctrl = None
        if gen.returncode != 0:
            raise RuntimeError(f"tessera-loadgen exited {gen.returncode}: {tail_text(errf)}")
    except KeyboardInterrupt:
        raise
    except Exception as e:
        run.error = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"  FAILED: {e}", file=sys.stderr)
    finally:
        if gen is not None and gen.stdin is not None and not gen.stdin.closed:
            try:
                gen.stdin.close()
            except OSError:
                pass
        cp.stop_loader(gen)  # terminate, then kill after 5 s
        if ctrl is not None:
            ctrl.close()
        if srv is not None:
            servers.stop(srv)
    return run


def compute_metrics(args, run: Run, doc: dict) -> None:
    m = run.m
    steady = window(doc, args.warmup, run.t_bg)
    comp = window(doc, run.t_bg, run.t_done)
    m.update(window_metrics(steady, "steady"))
    m.update(window_metrics(comp, "comp"))
    totals = doc["totals"]
    m["scheduled"] = totals["scheduled"]
    m["completed"] = totals["completed"]
    m["completed_ratio"] = totals["completed"] / totals["scheduled"] if totals["scheduled"] else None
    m["errors"] = totals["errors"]
    m["nil"] = totals["nil"]
    m["incomplete"] = totals["incomplete"]
    m["lost"] = totals["lost"]
    m["unsent"] = totals["unsent"]
    m["late_sends"] = totals["late_sends"]
    m["late_threshold_us"] = doc["params"]["late_threshold_us"]
    m["lateness_p99"] = doc["lateness_us"]["p99"]
    m["lateness_max"] = doc["lateness_us"]["max"]
    m["offered_rate"] = totals["scheduled"] / doc["end_s"] if doc["end_s"] else None
    m["gen_cpu_pct"] = (doc.get("cpu") or {}).get("percent_of_one_core")
    m["timer_slack_ns"] = doc["params"]["timer_slack_ns"]
    m["error_replies"] = doc["error_replies"]
    m["connection_errors"] = doc["connection_errors"]
    m["merge_ok"] = merge_check(doc)
    m["end_s"] = doc["end_s"]


def write_csv(args, run: Run, path: Path) -> None:
    """The generator's per-second rows with the time since BGREWRITEAOF and the phase."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fields = ["second", "t_since_bgrewriteaof_s", "phase", "sent", "completed", "errors", "p50_us",
              "p99_us", "p999_us", "max_us", "late", "max_late_us", "received"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(fields)
        for row in run.seconds:
            mid = row["second"] + 0.5
            w.writerow([row["second"], f"{mid - run.t_bg:.2f}", phase_of(args, run, mid)]
                       + ["" if row.get(k) is None else row[k] for k in fields[3:]])
    run.csv_path = path


def phase_of(args, run: Run, t: float) -> str:
    if t < args.warmup:
        return "warmup"
    if t < run.t_bg:
        return "steady"
    if t < run.t_done:
        return "compaction"
    return "tail"


# --------------------------------------------------------------------------
# Chart
# --------------------------------------------------------------------------


def plot(plt, args, runs: dict[str, Run], path: Path) -> None:
    fig, (ax, axr) = plt.subplots(2, 1, figsize=(10, 7), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1.3]})
    for name, run in runs.items():
        color = cp.COLORS[name]
        # Whole seconds only: the last one, cut short when the load was stopped, would
        # show a drop in replies/s that is not the server's.
        rows = [r for r in run.seconds if r["second"] + 1 <= run.m.get("end_s", float("inf"))]
        xs = [r["second"] + 0.5 - run.t_bg for r in rows]
        for key, style, label in (("p999_us", "-", "p99.9"), ("p99_us", "--", "p99")):
            pts = [(x, r[key] / 1000) for x, r in zip(xs, rows) if r.get(key)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, color=color, lw=1.3,
                        marker="." if style == "-" else None, ms=3, label=f"{name} {label}")
        axr.plot(xs, [r["received"] / 1000 for r in rows], color=color, lw=1.2, label=name)
        comp_s = run.t_done - run.t_bg
        for a in (ax, axr):
            a.axvspan(0, comp_s, color=color, alpha=0.12)
        ax.plot([], [], color=color, alpha=0.3, lw=8, label=f"{name} compaction ({comp_s:.1f} s)")
    from matplotlib.ticker import FuncFormatter, LogLocator
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_locator(LogLocator(subs=(2, 5)))
    ax.yaxis.set_minor_formatter(plain)
    ax.set_ylabel("latency from intended send, ms (log)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, ncol=2, loc="upper left")
    ax.set_title(f"Open loop: {args.rate:,.0f} req/s, {args.connections} connections, "
                 f"{args.set_ratio:.0%} SET of {args.value_size} B, {args.keyspace:,} keys, "
                 f"appendfsync {args.fsync}: BGREWRITEAOF at t = 0", fontsize=10)
    for a in (ax, axr):
        a.axvline(0, color="k", lw=0.8, ls="--")
    axr.set_ylabel("replies/s (thousands)")
    axr.set_xlabel("seconds since BGREWRITEAOF (per second of intended send time; shaded: compaction)")
    axr.set_ylim(bottom=0)
    axr.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def med(runs: list[Run], key: str):
    values = [r.m.get(key) for r in runs if r.error is None and r.m.get(key) is not None]
    return statistics.median(values) if values else None


def f_us(v) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def ratio_rows(runs: list[Run], key: str) -> tuple[float | None, list[float]]:
    """Per repeat, Tessera / Redis of `key`; the median of those."""
    ratios = []
    for rep in sorted({r.rep for r in runs}):
        t = [r for r in runs if r.rep == rep and r.server == "tessera" and r.error is None]
        x = [r for r in runs if r.rep == rep and r.server == "redis" and r.error is None]
        if t and x and t[0].m.get(key) and x[0].m.get(key):
            ratios.append(t[0].m[key] / x[0].m[key])
    return (statistics.median(ratios) if ratios else None), ratios


def render(args, ctx: dict, runs: list[Run], chart: dict, status: str, wall: float) -> str:
    argv = ["python3"] + [cp.shown_path(a) for a in sys.argv]
    report_dir = Path(args.report).resolve().parent
    where = "the repository root" if Path.cwd().resolve() == REPO else "elsewhere"
    L = [
        "# Latency under a fixed offered load: Tessera vs Redis",
        "",
        f"Command: `{shlex.join(argv)}` (run from {where}; paths outside the repository are shown by file name)",
        "",
        f"- Machine: {os.cpu_count()} CPUs (os.cpu_count()); the server, the load generator and "
        "this driver share them.",
        f"- Date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}; status: {status}; "
        f"wall time {wall / 60:.1f} min; load average (1 min) at start {ctx['load_start']:.2f}, "
        f"at end {os.getloadavg()[0]:.2f}",
        f"- Versions: `{ctx['redis_version']}`; `{ctx['tessera_version']}` (git {ctx['tessera_git']}); "
        f"`{ctx['loadgen_version']}` (git {ctx['loadgen_git']})",
        f"- Mode: {'QUICK smoke run (numbers are not meaningful)' if args.quick else 'full'}; "
        f"repeat {args.repeat}" + (", medians of the runs (ratios: median of the per-repeat ratios)"
                                   if args.repeat > 1 else ""),
        f"- Load (open loop, `tessera-loadgen`): {args.rate:,.0f} requests/s over {args.connections} "
        f"connections ({args.gen_threads} sender + receiver thread pair{'s' if args.gen_threads > 1 else ''}), "
        f"{args.set_ratio:.0%} SET / {1 - args.set_ratio:.0%} GET, keys `key:<n>` uniform over "
        f"{args.keyspace:,}, SET values {args.value_size} bytes of fresh random printable characters each; "
        f"seed {args.seed}. Preload: every key SET once (distinct values), then `sync`.",
        f"- Phases: warm-up {args.warmup:g} s, steady {args.steady:g} s, BGREWRITEAOF, polled every "
        f"{args.poll_interval * 1000:.0f} ms until done, tail {args.tail:g} s.",
        "- Servers (fresh per run, own temporary directory; automatic rewrites off so the only "
        "compaction is the measured BGREWRITEAOF):",
    ]
    for name in args.servers:
        words = LatencyServers(args).command(name, "$PORT", "$DIR")
        text = re.sub(r"'(\$[A-Z]+)'", r"\1", shlex.join(cp.shown_path(w) for w in words))
        L.append(f"  - `{text}`")
    L += [
        "- Latency = reply arrival − the request's intended send time, in µs (HDR histograms, 3 "
        "significant digits). Windows are merged from the generator's 100 ms interval histograms "
        "by adding bucket counts (an interval belongs to the window holding its midpoint); "
        "max is exact.",
        "",
    ]

    def group(name):
        return [r for r in runs if r.server == name]

    L += ["## Latency (µs, from the intended send time)", "",
          "Steady = after the warm-up until BGREWRITEAOF; compaction = requests due from "
          "BGREWRITEAOF until the rewrite was seen done.", "",
          "| Server | Window | Requests | p50 | p99 | p99.9 | max | Window s | Late sends | Generator's max lateness |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in args.servers:
        g = group(name)
        for prefix, title in (("steady", "steady"), ("comp", "compaction")):
            L.append(f"| {name} | {title} | {f_us(med(g, prefix + '_count'))} | {f_us(med(g, prefix + '_p50'))} "
                     f"| {f_us(med(g, prefix + '_p99'))} | {f_us(med(g, prefix + '_p99.9'))} "
                     f"| {f_us(med(g, prefix + '_max'))} | {cp.f_num(med(g, prefix + '_s'))} "
                     f"| {f_us(med(g, prefix + '_late'))} | {f_us(med(g, prefix + '_max_late_us'))} |")
    L += ["", "A window whose generator lateness approaches its tail latencies measured the "
          "generator (or the machine) as much as the server: see the section below."]

    if "tessera" in args.servers and "redis" in args.servers:
        L += ["", "## Tessera ÷ Redis", "",
              "Per repeat, Tessera's figure over Redis's from the same repeat (lower is better for "
              "Tessera)" + ("; the median over the repeats, each repeat's in brackets." if args.repeat > 1 else "."),
              "", "| Figure | Tessera ÷ Redis | Target |", "|---|---:|---|"]
        for key, title, target in (
            ("steady_p99.9", "steady p99.9", TARGET_STEADY),
            ("comp_p99.9", "compaction-window p99.9", TARGET_COMPACTION),
            ("steady_p50", "steady p50", None), ("steady_p99", "steady p99", None),
            ("comp_p50", "compaction-window p50", None), ("comp_p99", "compaction-window p99", None),
            ("comp_max", "compaction-window max", None), ("comp_s", "compaction duration", None),
        ):
            ratio, each = ratio_rows(runs, key)
            shown = cp.f_num(ratio) + (f" ({', '.join(f'{x:.2f}' for x in each)})" if len(each) > 1 else "")
            if target is None:
                verdict = "-"
            elif ratio is None:
                verdict = f"≤ {target} (n/a)"
            else:
                verdict = f"≤ {target}: " + ("**met**" if ratio <= target else "**not met**")
            L.append(f"| {title} | {shown} | {verdict} |")

    L += ["", "## Load delivered and the generator", "",
          f"Late = sends more than {runs[0].m.get('late_threshold_us', 1000) if runs else 1000} µs "
          "after their due time (the generator behind its schedule: that delay is inside the "
          "latencies above). Completed = replies to the requests due, over those due; "
          "incomplete = no reply 10 s after the load ended; lost = on a failed connection. "
          "Server CPU = utime + stime of the server (all threads, and Redis's rewrite child) over "
          "the window, in % of one core.", "",
          "| Server | Offered req/s | Completed / due | Error replies | GET nil | Incomplete | Lost | Late sends | Lateness p99 µs | Lateness max µs | Generator CPU % of a core | Server CPU %, steady / compaction |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in args.servers:
        g = group(name)
        L.append(f"| {name} | {f_us(med(g, 'offered_rate'))} | {cp.f_num(med(g, 'completed_ratio'), 5)} "
                 f"| {f_us(med(g, 'errors'))} | {f_us(med(g, 'nil'))} | {f_us(med(g, 'incomplete'))} "
                 f"| {f_us(med(g, 'lost'))} | {f_us(med(g, 'late_sends'))} | {f_us(med(g, 'lateness_p99'))} "
                 f"| {f_us(med(g, 'lateness_max'))} | {cp.f_num(med(g, 'gen_cpu_pct'), 1)} "
                 f"| {cp.f_num(med(g, 'server_cpu_steady'), 0)} / {cp.f_num(med(g, 'server_cpu_comp'), 0)} |")

    L += ["", "## Chart", ""]
    if chart.get("skipped"):
        L.append(f"Chart skipped: {chart['skipped']}")
    else:
        for title, path in chart.get("files", []):
            L.append("First repetition of each server; t = 0 is BGREWRITEAOF; shaded = compaction in progress.")
            L.append("")
            L.append(f"![{title}]({os.path.relpath(path, report_dir)})")
    L += ["", "## Runs", "", "In run order. Per-second series: the CSV files next to this report.", "",
          "| # | Run | Steady p99.9 µs | Compaction p99.9 µs | Compaction max µs | Compaction s | Preload s | Keys | Errors | Late sends | Merge check | Status | Files |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for i, r in enumerate(ctx["order"], 1):
        csv_name = os.path.relpath(r.csv_path, report_dir) if r.csv_path else "-"
        if r.json_path:
            csv_name += ", " + os.path.relpath(r.json_path, report_dir)
        status_text = r.error or r.m.get("rewrite_status", "?")
        merge = {True: "ok", False: "MISMATCH", None: "-"}[r.m.get("merge_ok")]
        L.append(f"| {i} | {r.label} | {f_us(r.m.get('steady_p99.9'))} | {f_us(r.m.get('comp_p99.9'))} "
                 f"| {f_us(r.m.get('comp_max'))} | {cp.f_num(r.m.get('comp_s'))} | {cp.f_num(r.m.get('preload_s'), 1)} "
                 f"| {f_us(r.m.get('keys'))} | {f_us(r.m.get('errors'))} | {f_us(r.m.get('late_sends'))} "
                 f"| {merge} | {status_text} | {csv_name} |")
    problems = []
    for r in ctx["order"]:
        for text, n in r.m.get("error_replies") or []:
            problems.append(f"- {r.label}: error reply {n}×: `{text}`")
        for text in r.m.get("connection_errors") or []:
            problems.append(f"- {r.label}: {text}")
    if problems:
        L += ["", "Errors seen:", ""] + problems[:40]
    L += ["", "Notes:", "",
          "- Merge check: the generator's own whole-run percentiles equal those of its merged "
          "interval histograms (a check of the merging).",
          "- The compaction window's end is the first INFO poll that saw the rewrite done: it is "
          f"late by up to {args.poll_interval * 1000:.0f} ms plus the poll's own wait (a stalled "
          "server answers the poll late, and that stall is inside the window).",
          "- GET nil = GETs that found no key; after the preload there should be none.",
          ]
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def server_list(text: str) -> list[str]:
    names = [x for x in text.replace(" ", "").split(",") if x]
    for n in names:
        if n not in SERVERS:
            raise argparse.ArgumentTypeError(f"unknown server {n!r} (tessera, redis)")
    if not names:
        raise argparse.ArgumentTypeError("no server")
    return names


def parse_args():
    p = argparse.ArgumentParser(description="Open-loop latency at a fixed offered load, steady and during "
                                "a BGREWRITEAOF, Tessera vs Redis (see the module docstring).")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 50k keys, short phases, under a minute (numbers not meaningful)")
    p.add_argument("--rate", type=float, default=20_000, help="requests/s offered (default 20000)")
    p.add_argument("--connections", type=int, default=50, help="connections (default 50)")
    p.add_argument("--keyspace", type=int, default=None, help="keys (default 500000; quick 50000)")
    p.add_argument("--value-size", type=int, default=1024, help="bytes per value (default 1024)")
    p.add_argument("--set-ratio", type=float, default=0.5, help="share of SETs (default 0.5)")
    p.add_argument("--warmup", type=float, default=None, help="seconds of load before the steady window (default 5; quick 2)")
    p.add_argument("--steady", type=float, default=None, help="seconds of the steady window (default 20; quick 5)")
    p.add_argument("--tail", type=float, default=None, help="seconds after the compaction (default 5; quick 2)")
    p.add_argument("--repeat", type=int, default=1, help="runs per server, alternating which goes first (default 1)")
    p.add_argument("--fsync", choices=("everysec", "always", "no"), default="everysec",
                   help="appendfsync of both servers (default everysec)")
    p.add_argument("--servers", type=server_list, default=list(SERVERS), metavar="LIST",
                   help="tessera,redis (default both)")
    p.add_argument("--seed", type=int, default=1, help="the generator's seed (default 1; the same for both servers)")
    p.add_argument("--gen-threads", type=int, default=1,
                   help="the generator's --threads: sender + receiver thread pairs (default 1)")
    p.add_argument("--poll-interval", type=float, default=0.05,
                   help="seconds between INFO polls during the compaction (default 0.05)")
    p.add_argument("--tessera", default=str(REPO / "target" / "release" / "tessera-server"),
                   help="tessera-server binary (default target/release/tessera-server)")
    p.add_argument("--redis", default="redis-server", help="redis-server binary (default from PATH)")
    p.add_argument("--loadgen", default=None,
                   help="tessera-loadgen binary (default target/release/tessera-loadgen, built if needed)")
    p.add_argument("--no-build", action="store_true", help="do not run cargo build for the generator")
    p.add_argument("--tessera-arg", action="append", default=[], metavar="ARG",
                   help="extra tessera-server argument (repeatable; --tessera-arg=--hz --tessera-arg=100)")
    p.add_argument("--redis-arg", action="append", default=[], metavar="ARG",
                   help="extra redis-server argument (repeatable)")
    p.add_argument("--report", default=None,
                   help="Markdown report (default bench/results/latency.md; quick: latency-quick.md)")
    p.add_argument("--results-dir", default=None, help="directory for the CSV and PNG files (default: the report's)")
    p.add_argument("--tmp-base", default=None, help="where the servers' temporary directories go")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG chart")
    p.add_argument("--keep-json", action="store_true",
                   help="also keep each run's generator JSON (every 100 ms histogram, a few MB) "
                        "next to the report")
    p.add_argument("--compaction-timeout", type=float, default=600)
    p.add_argument("--run-timeout", type=float, default=1800, help="seconds before a preload is abandoned")
    args = p.parse_args()
    q = args.quick
    if args.keyspace is None:
        args.keyspace = 50_000 if q else 500_000
    if args.warmup is None:
        args.warmup = 2.0 if q else 5.0
    if args.steady is None:
        args.steady = 5.0 if q else 20.0
    if args.tail is None:
        args.tail = 2.0 if q else 5.0
    if args.report is None:
        args.report = str(REPO / "bench" / "results" / ("latency-quick.md" if q else "latency.md"))
    if args.results_dir is None:
        args.results_dir = str(Path(args.report).resolve().parent)
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    if args.rate <= 0 or args.connections < 1 or args.keyspace < 1:
        p.error("--rate, --connections and --keyspace must be positive")
    if args.warmup < 0 or args.steady <= 0 or args.tail < 0:
        p.error("--steady must be positive, --warmup and --tail not negative")
    return args


def build_loadgen(args) -> str | None:
    """Returns an error message, or None when the generator is there."""
    if args.loadgen is not None:
        return None if shutil.which(args.loadgen) else f"{args.loadgen} not found"
    args.loadgen = str(REPO / "target" / "release" / "tessera-loadgen")
    if not args.no_build:
        if shutil.which("cargo") is None:
            if not Path(args.loadgen).exists():
                return "cargo not found, and no target/release/tessera-loadgen"
        else:
            print("building the generator: cargo build --release -p tessera-loadgen", file=sys.stderr)
            done = subprocess.run(["cargo", "build", "--release", "-p", "tessera-loadgen"], cwd=REPO,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True)
            if done.returncode != 0:
                return f"cargo build -p tessera-loadgen failed:\n{done.stderr.strip()[-2000:]}"
    return None if Path(args.loadgen).exists() else f"{args.loadgen} not found"


def main() -> int:
    args = parse_args()
    problem = build_loadgen(args)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    needed = [args.tessera] if "tessera" in args.servers else []
    needed += [args.redis] if "redis" in args.servers else []
    for tool in needed:
        if shutil.which(tool) is None:
            print(f"error: {tool} not found (build Tessera with `cargo build --release`)", file=sys.stderr)
            return 2
    signal.signal(signal.SIGINT, cp.raise_interrupt)
    signal.signal(signal.SIGTERM, cp.raise_interrupt)
    signal.signal(signal.SIGHUP, cp.raise_interrupt)

    started = time.monotonic()
    results = Path(args.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    Path(args.report).resolve().parent.mkdir(parents=True, exist_ok=True)
    prefix = args.prefix = "latency-quick" if args.quick else "latency"
    args.tmp_base = str(Path(args.tmp_base or tempfile.gettempdir()))
    ctx = {
        "redis_version": cp.command_output([args.redis, "--version"]) if "redis" in args.servers else "redis not run",
        "tessera_version": cp.command_output([args.tessera, "--version"]) if "tessera" in args.servers else "tessera not run",
        "tessera_git": cp.binary_git(Path(shutil.which(args.tessera))) if "tessera" in args.servers else "-",
        "loadgen_version": cp.command_output([args.loadgen, "--version"]),
        "loadgen_git": cp.binary_git(Path(args.loadgen)),
        "order": [],
        "load_start": os.getloadavg()[0],
    }
    servers = LatencyServers(args)
    runs: list[Run] = []
    plan = []
    for rep in range(args.repeat):
        order = list(args.servers) if rep % 2 == 0 else list(reversed(args.servers))
        plan += [(name, rep) for name in order]
    status = "complete"
    try:
        for k, (name, rep) in enumerate(plan, 1):
            label = name + (f" rep {rep + 1}" if args.repeat > 1 else "")
            print(f"[{k}/{len(plan)}] {label} ({(time.monotonic() - started) / 60:.1f} min)", file=sys.stderr)
            run = run_once(args, servers, name, rep, label)
            runs.append(run)
            ctx["order"].append(run)
            if run.seconds and run.t_bg is not None and run.t_done is not None:
                write_csv(args, run, results / f"{prefix}-{name}-r{rep + 1}.csv")
            if run.error is None:
                m = run.m
                print(f"  steady p50/p99/p99.9 {f_us(m.get('steady_p50'))}/{f_us(m.get('steady_p99'))}/"
                      f"{f_us(m.get('steady_p99.9'))} µs; compaction {cp.f_num(m.get('comp_s'))} s, "
                      f"p50/p99/p99.9 {f_us(m.get('comp_p50'))}/{f_us(m.get('comp_p99'))}/"
                      f"{f_us(m.get('comp_p99.9'))} µs, max {f_us(m.get('comp_max'))} µs; "
                      f"late sends {f_us(m.get('late_sends'))}, generator CPU {cp.f_num(m.get('gen_cpu_pct'), 1)} %",
                      file=sys.stderr)
    except KeyboardInterrupt:
        status = "INTERRUPTED (partial results)"
        print("\ninterrupted; stopping servers and removing temp dirs", file=sys.stderr)
    finally:
        servers.stop_all()

    chart: dict = {"files": []}
    plt = None if args.no_plots else cp.load_pyplot()
    if args.no_plots:
        chart["skipped"] = "--no-plots."
    elif plt is None:
        chart["skipped"] = "matplotlib is not installed (`python3 -m pip install matplotlib`)."
    else:
        first = {}
        for name in args.servers:
            ok = [r for r in runs if r.server == name and r.error is None and r.seconds]
            if ok:
                first[name] = ok[0]
        if first:
            path = results / f"{prefix}.png"
            plot(plt, args, first, path)
            chart["files"].append(("latency over time", path))

    report = render(args, ctx, runs, chart, status, time.monotonic() - started)
    sys.stdout.write(report)
    Path(args.report).write_text(report)
    print(f"wrote {cp.shown_path(str(Path(args.report).resolve()))} "
          f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    if status != "complete":
        return 130
    return 1 if any(r.error for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
