#!/usr/bin/env python3
"""Side-by-side redis-benchmark comparison of tessera-server and redis-server.

This is a benchmark, not a test: it only measures and reports, it never fails
on a slow result.

For every case it starts each server fresh, in its own temporary directory, on
a free loopback port (never 6379), with the append-only log on:

    tessera-server --port P --bind 127.0.0.1 --dir D --appendfsync X
    redis-server   --port P --bind 127.0.0.1 --dir D --appendonly yes \
                   --appendfsync X --save ""

then runs the same `redis-benchmark ... --csv` command against it, stops it
(SHUTDOWN NOSAVE, then SIGTERM/SIGKILL if needed) and deletes the directory.
Each case runs --repeat times per server (default 3). Runs go round-robin over
the cases (repetition is the outer loop) and alternate which server goes first,
so slow drift on a noisy machine spreads over both servers. The table reports
the median ops/s of each server and the Tessera/Redis ratio of the medians.

GET cases are measured on a preloaded keyspace: before the timed GET run, an
untimed `redis-benchmark -t set` with the same -c/-d/-r at -P 16 fills the
server (and the script waits for any AOF rewrite it triggered to finish).

Usage:
    python3 bench/compare.py                       # full run, roughly 15-25 min
    python3 bench/compare.py --quick --repeat 1    # smoke run, ~1-2 min
    python3 bench/compare.py --output bench/results.md
    python3 bench/compare.py --only set-always-c50,set-P1-d100 --repeat 5
    python3 bench/compare.py --list                # show the cases and exit

Stdlib only (Python 3.11).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def shown_path(text: str) -> str:
    """A path as the report shows it: relative inside the repository, else its name only,
    so that reports carry no machine-specific paths."""
    if not text.startswith("/"):
        return text
    path = Path(text).resolve()
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return path.name
KEYSPACE = 1_000_000  # -r for every case
HOST = "127.0.0.1"
TARGET_ALWAYS_RATIO = 0.7
TARGET_EVERYSEC_RATIO = 0.9  # everysec / no at -P 16, 1 KB (issue 13)

# Values made of `__rand_int__` placeholders (100 and 1024 bytes). redis-benchmark
# replaces every occurrence independently with a 12-digit zero-padded random
# number in [0, -r), so each SET writes a (practically) distinct value; the
# built-in `-t set` writes one value to every key (a pseudo-random printable
# string generated once at start-up).
DISTINCT_VALUE = "val:" + "__rand_int__" * 8
DISTINCT_VALUE_1K = "val:" + "__rand_int__" * 85
assert len(DISTINCT_VALUE) == 100 and len(DISTINCT_VALUE_1K) == 1024


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    id: str
    label: str
    test: str  # "set", "get" or "custom"
    clients: int
    pipeline: int
    datasize: int
    fsync: str
    n_full: int
    n_quick: int
    custom: tuple[str, ...] = ()

    def requests(self, quick: bool, scale: float) -> int:
        if quick:
            return self.n_quick
        return max(1, int(round(self.n_full * scale)))

    def bench_flags(self, n: int) -> list[str]:
        flags = ["-c", str(self.clients), "-n", str(n), "-P", str(self.pipeline)]
        if self.test != "custom":
            flags += ["-d", str(self.datasize)]
        flags += ["-r", str(KEYSPACE)]
        if self.test == "custom":
            return flags + list(self.custom)
        return ["-t", self.test] + flags

    def shown_flags(self, n: int) -> str:
        """The flags as reports show them: a run of placeholders as `__rand_int__ x N`."""
        text = shlex.join(self.bench_flags(n))
        return re.sub(r"((?:__rand_int__){2,})",
                      lambda m: f"__rand_int__ x{len(m.group(1)) // 12}", text)


def build_cases() -> list[Case]:
    # -n per case, aiming at ~5-10 s per run on an idle 2-core machine
    # (everysec: ~250-300k ops/s at -P 16, ~40k ops/s at -P 1; always:
    # a few k ops/s at -c 1, ~10-30k at -c 50, depending on the disk).
    n_table = {
        (16, 100): (2_000_000, 50_000),
        (16, 1024): (1_000_000, 50_000),
        (1, 100): (300_000, 10_000),
        (1, 1024): (250_000, 10_000),
    }
    cases = []
    for test in ("set", "get"):
        for pipeline in (1, 16):
            for datasize in (100, 1024):
                n_full, n_quick = n_table[(pipeline, datasize)]
                cases.append(
                    Case(
                        id=f"{test}-P{pipeline}-d{datasize}",
                        label=test.upper(),
                        test=test,
                        clients=50,
                        pipeline=pipeline,
                        datasize=datasize,
                        fsync="everysec",
                        n_full=n_full,
                        n_quick=n_quick,
                    )
                )
    cases.append(
        Case("set-always-c1", "SET", "set", 1, 1, 100, "always", 20_000, 300)
    )
    cases.append(
        Case("set-always-c50", "SET", "set", 50, 1, 100, "always", 100_000, 3_000)
    )
    # The fsync policies at 1 KB (issue 13): always vs everysec at -P 1, everysec vs no
    # at -P 16 (what an fsync costs a saturating load).
    cases.append(
        Case("set-always-c50-d1024", "SET", "set", 50, 1, 1024, "always", 100_000, 3_000)
    )
    cases.append(
        Case("set-P16-d1024-no", "SET", "set", 50, 16, 1024, "no", 1_000_000, 50_000)
    )
    cases.append(
        Case(
            "set-distinct-P16",
            "SET, distinct values",
            "custom",
            50,
            16,
            len(DISTINCT_VALUE),
            "everysec",
            2_000_000,
            50_000,
            ("SET", "key:__rand_int__", DISTINCT_VALUE),
        )
    )
    cases.append(
        Case(
            "set-distinct-P16-d1024",
            "SET, distinct values",
            "custom",
            50,
            16,
            len(DISTINCT_VALUE_1K),
            "everysec",
            1_000_000,
            50_000,
            ("SET", "key:__rand_int__", DISTINCT_VALUE_1K),
        )
    )
    return cases


BASELINE_ID = "set-P1-d100"  # everysec -c 50 -P 1 -d 100 SET
ALWAYS_ID = "set-always-c50"
BASELINE_1K_ID = "set-P1-d1024"
ALWAYS_1K_ID = "set-always-c50-d1024"
EVERYSEC_P16_1K_ID = "set-P16-d1024"
NO_P16_1K_ID = "set-P16-d1024-no"


# --------------------------------------------------------------------------
# Minimal RESP client (PING / INFO / DBSIZE / SHUTDOWN)
# --------------------------------------------------------------------------


class RespError(Exception):
    pass


def _read_reply(f):
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    kind, rest = line[:1], line[1:].rstrip(b"\r\n")
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RespError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        size = int(rest)
        if size < 0:
            return None
        data = f.read(size + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        count = int(rest)
        if count < 0:
            return None
        return [_read_reply(f) for _ in range(count)]
    raise RespError(f"unexpected reply {line!r}")


def resp(port: int, *args: str, timeout: float = 5.0):
    with socket.create_connection((HOST, port), timeout=timeout) as sock:
        payload = [f"*{len(args)}\r\n".encode()]
        for arg in args:
            data = arg.encode()
            payload.append(b"$%d\r\n%s\r\n" % (len(data), data))
        sock.sendall(b"".join(payload))
        with sock.makefile("rb") as f:
            return _read_reply(f)


def info_fields(port: int, section: str) -> dict[str, str]:
    text = resp(port, "INFO", section, timeout=10.0) or ""
    fields = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------


def free_port() -> int:
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port
    raise RuntimeError("could not find a free port")


@dataclass
class Server:
    name: str  # "tessera" / "redis"
    argv: list[str]
    port: int
    dir: Path
    proc: subprocess.Popen | None = None
    log: Path | None = None

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log.read_text(errors="replace") if self.log else ""
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Servers:
    """Owns every server process and temp dir; stop_all() cleans up everything."""

    def __init__(self, args):
        self.args = args
        self.live: list[Server] = []
        self.dirs: list[Path] = []

    def command(self, name: str, port, d, fsync: str) -> list[str]:
        if name == "tessera":
            return [
                str(self.args.tessera_bin),
                "--port", str(port),
                "--bind", HOST,
                "--dir", str(d),
                "--appendfsync", fsync,
            ] + self.args.tessera_arg
        return [
            self.args.redis_server,
            "--port", str(port),
            "--bind", HOST,
            "--dir", str(d),
            "--appendonly", "yes",
            "--appendfsync", fsync,
            "--save", "",
        ] + self.args.redis_arg

    def start(self, name: str, fsync: str) -> Server:
        last_error = ""
        for _attempt in range(3):
            d = Path(tempfile.mkdtemp(prefix=f"bench-{name}-"))
            self.dirs.append(d)
            port = free_port()
            srv = Server(name, self.command(name, port, d, fsync), port, d)
            srv.log = d / "server.log"
            with open(srv.log, "wb") as logf:
                srv.proc = subprocess.Popen(
                    srv.argv,
                    cwd=d,
                    stdin=subprocess.DEVNULL,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # Ctrl-C goes to us; we stop it
                )
            self.live.append(srv)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if srv.proc.poll() is not None:
                    break
                try:
                    if resp(srv.port, "PING", timeout=1.0) == "PONG":
                        return srv
                except (OSError, RespError):
                    pass
                time.sleep(0.05)
            last_error = (
                f"{name} did not start on port {port} "
                f"(exit code {srv.proc.poll()}):\n{srv.log_tail()}"
            )
            self.stop(srv)
        raise RuntimeError(last_error)

    def stop(self, srv: Server) -> None:
        proc = srv.proc
        if proc is not None and proc.poll() is None:
            try:
                resp(srv.port, "SHUTDOWN", "NOSAVE", timeout=5.0)
            except (OSError, RespError):
                pass  # the connection closes on a successful shutdown
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        if srv in self.live:
            self.live.remove(srv)
        self.remove_dir(srv.dir)

    def remove_dir(self, d: Path) -> None:
        shutil.rmtree(d, ignore_errors=True)
        if d in self.dirs and not d.exists():
            self.dirs.remove(d)

    def stop_all(self) -> None:
        for srv in list(self.live):
            try:
                self.stop(srv)
            except Exception as e:  # keep cleaning up the rest
                print(f"warning: stopping {srv.name}: {e}", file=sys.stderr)
                if srv.proc is not None and srv.proc.poll() is None:
                    srv.proc.kill()
        for d in list(self.dirs):
            self.remove_dir(d)


# --------------------------------------------------------------------------
# redis-benchmark
# --------------------------------------------------------------------------

RPS_LINE = re.compile(r"^\s*(.+?):\s*([0-9.]+)\s+requests per second")


def parse_benchmark(stdout: str) -> tuple[float, float | None]:
    """Return (ops/s, p50 ms) from `redis-benchmark --csv` (or -q) output."""
    rows = [
        r
        for r in csv.reader(line for line in stdout.splitlines() if line.startswith('"'))
        if r and r[0] != "test"
    ]
    if rows:
        row = rows[-1]
        p50 = float(row[4]) if len(row) > 4 else None
        return float(row[1]), p50
    # -q fallback: progress lines are separated by \r; keep the final line.
    for line in reversed(re.split(r"[\r\n]+", stdout)):
        m = RPS_LINE.match(line)
        if m:
            p50 = re.search(r"p50=([0-9.]+)", line)
            return float(m.group(2)), float(p50.group(1)) if p50 else None
    raise ValueError(f"no throughput in redis-benchmark output: {stdout[-300:]!r}")


def run_benchmark(args, port: int, flags: list[str]) -> tuple[float, float | None, str]:
    # --csv must precede the flags: a custom command takes every trailing argument.
    cmd = [args.redis_benchmark, "-h", HOST, "-p", str(port), "--csv"] + flags
    out = subprocess.run(
        cmd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=args.run_timeout,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"redis-benchmark exited {out.returncode}: {out.stderr.strip()[-300:]}"
        )
    rps, p50 = parse_benchmark(out.stdout)
    return rps, p50, out.stderr


def wait_for_background_work(port: int, timeout: float = 300.0) -> None:
    """Wait until an AOF rewrite / bgsave triggered by the preload is done."""
    keys = ("aof_rewrite_in_progress", "aof_rewrite_scheduled", "rdb_bgsave_in_progress")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        f = info_fields(port, "persistence")
        if all(f.get(k, "0") == "0" for k in keys):
            return
        time.sleep(0.2)


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------


@dataclass
class Sample:
    rps: float
    p50: float | None
    dbsize: int | None
    aof_rewrites: int | None
    preload_keys: int | None


@dataclass
class Result:
    case: Case
    n: int
    samples: dict[str, list[Sample]] = field(
        default_factory=lambda: {"tessera": [], "redis": []}
    )
    failures: dict[str, list[str]] = field(
        default_factory=lambda: {"tessera": [], "redis": []}
    )

    def median(self, name: str) -> float | None:
        values = [s.rps for s in self.samples[name]]
        return statistics.median(values) if values else None


def fmt_ops(v: float | None) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or not b else f"{a / b:.2f}"


def median_or_none(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


# --------------------------------------------------------------------------
# Machine info
# --------------------------------------------------------------------------


def command_output(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        return f"unavailable ({e})"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def mem_total() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                kb = int(line.split()[1])
                return f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError):
        pass
    return "unknown"


def tessera_git() -> str:
    rev = command_output(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    try:
        dirty = subprocess.run(
            # The benchmarks' own output files do not count: a run writes them.
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no",
             "--", ".", ":(exclude)bench/results"],
            capture_output=True, text=True, timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        dirty = ""
    return rev + (" (+ uncommitted changes)" if dirty else "")


def binary_staleness(binary: Path) -> str | None:
    try:
        built = binary.stat().st_mtime
    except OSError:
        return None
    newest = 0.0
    for root in (REPO / "src",):
        for p in root.rglob("*.rs"):
            newest = max(newest, p.stat().st_mtime)
    for p in (REPO / "Cargo.toml", REPO / "Cargo.lock"):
        if p.exists():
            newest = max(newest, p.stat().st_mtime)
    if newest > built:
        return "WARNING: the tessera-server binary is older than the sources; run `cargo build --release` (or pass --build)."
    return None


def machine_info(args) -> list[tuple[str, str]]:
    nproc = command_output(["nproc"]) if shutil.which("nproc") else str(os.cpu_count())
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    binary = Path(args.tessera_bin)
    built = dt.datetime.fromtimestamp(binary.stat().st_mtime).isoformat(timespec="seconds")
    return [
        ("nproc", f"{nproc} (os.cpu_count() = {os.cpu_count()})"),
        ("CPU", cpu_model()),
        ("Memory", mem_total()),
        ("Kernel", f"{platform.system()} {platform.release()}"),
        ("Load average at start (1/5/15 min)", load),
        ("redis-server --version", command_output([args.redis_server, "--version"])),
        ("redis-benchmark --version", command_output([args.redis_benchmark, "--version"])),
        ("tessera-server --version", command_output([str(binary), "--version"])),
        ("tessera-server binary", f"{shown_path(str(binary))} (built {built}, git {tessera_git()})"),
        ("Python", platform.python_version()),
    ]


# --------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------


def report_header(title: str, info, started: float, status: str,
                  stale: str | None) -> list[str]:
    """A report's first lines: the title, the exact command, date, status and machine."""
    argv = [Path(sys.executable).name] + sys.argv
    lines = [f"# {title}", ""]
    where = "the repository root" if Path.cwd().resolve() == REPO else "elsewhere"
    lines.append(f"- Command: `{shlex.join(shown_path(a) for a in argv)}` (run from {where})")
    lines.append(f"- Date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}")
    lines.append(f"- Status: {status}; wall time {time.monotonic() - started:.0f} s; "
                 f"load average at end {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k, v in info:
        lines.append(f"- {k}: `{v}`")
    if stale:
        lines.append(f"- **{stale}**")
    return lines


def server_lines(args) -> list[str]:
    """How the servers are started, as the reports show it."""
    def template(name):
        words = Servers(args).command(name, "$PORT", "$DIR", "$FSYNC")
        text = shlex.join(shown_path(w) for w in words)
        return re.sub(r"'(\$[A-Z]+)'", r"\1", text)
    return [
        "- Servers (fresh per run, own temp dir, free port, append-only log on):",
        f"  - `{template('tessera')}`",
        f"  - `{template('redis')}`"
        " (aof-use-rdb-preamble and auto-aof-rewrite at their defaults)",
    ]


def render(args, info, results: list[Result], started: float, status: str,
           warnings: dict[str, set[str]], stale: str | None) -> str:
    lines = report_header("Tessera vs Redis: redis-benchmark comparison", info, started,
                          status, stale)
    lines.append(
        f"- Mode: {'QUICK smoke run (small -n, numbers are not meaningful)' if args.quick else 'full'}; "
        f"repeat {args.repeat} per server per case, median reported"
        + ("" if args.quick or args.n_scale == 1.0 else f"; -n scaled by {args.n_scale}")
    )
    lines += server_lines(args)
    lines.append(f"- Client: `{args.redis_benchmark} -h {HOST} -p $PORT --csv <flags>`, "
                 "one redis-benchmark process (single-threaded) on the same machine as the server")
    lines += [
        "- Method: runs go round-robin over the cases, alternating which server goes first; "
        "GET cases are preloaded by an untimed `-t set` run (same -c/-d/-r, -P 16, "
        f"-n {'= the case -n' if args.quick else '2000000'}) and the script waits for any AOF rewrite to finish before the timed run.",
        "- Notes:",
        "  - redis-benchmark `-t set` writes one value to every key (`-r` only randomises the key): a "
        "pseudo-random string of printable characters generated once at start-up, so LZF cannot shrink it "
        "much, but every key holds the same bytes. "
        "The `SET, distinct values` cases use a custom command, `SET key:__rand_int__ val:__rand_int__...` "
        "(8 placeholders for 100 bytes, 85 for 1024); redis-benchmark replaces each placeholder independently "
        "with a 12-digit zero-padded random number < 1000000, so every value is distinct (digit strings, "
        "half of them zeros).",
        "  - Both servers may rewrite their AOF automatically during large SET runs (Redis by fork, Tessera "
        "by its forkless compaction; auto-aof-rewrite at its defaults on both). "
        "The `AOF rewrites` column in the details shows how often that happened.",
        "  - On a 2-core machine the client and the server compete for CPU; treat ratios as more robust than absolute numbers.",
        "",
        "## Results (median ops/s)",
        "",
        "| Case | appendfsync | redis-benchmark flags | Tessera ops/s | Redis ops/s | Tessera/Redis |",
        "|---|---|---|---:|---:|---:|",
    ]
    by_id = {r.case.id: r for r in results}
    for r in results:
        t, rd = r.median("tessera"), r.median("redis")
        lines.append(
            f"| {r.case.label} | {r.case.fsync} | `{r.case.shown_flags(r.n)}` "
            f"| {fmt_ops(t)} | {fmt_ops(rd)} | {fmt_ratio(t, rd)} |"
        )

    for title, slow_id, fast_id, target in (
        ("appendfsync always vs everysec (SET -c 50 -P 1 -d 100)",
         ALWAYS_ID, BASELINE_ID, TARGET_ALWAYS_RATIO),
        ("appendfsync always vs everysec (SET -c 50 -P 1 -d 1024)",
         ALWAYS_1K_ID, BASELINE_1K_ID, TARGET_ALWAYS_RATIO),
        ("appendfsync everysec vs no (SET -c 50 -P 16 -d 1024)",
         EVERYSEC_P16_1K_ID, NO_P16_1K_ID, TARGET_EVERYSEC_RATIO),
    ):
        lines += ["", f"## {title}", ""]
        slow, fast = by_id.get(slow_id), by_id.get(fast_id)
        if not (slow and fast):
            lines.append(f"n/a: needs both `{slow_id}` and `{fast_id}` in the run.")
            continue
        ts, tf = slow.median("tessera"), fast.median("tessera")
        rs, rf = slow.median("redis"), fast.median("redis")
        verdict = "n/a"
        if ts is not None and tf:
            verdict = "meets" if ts / tf >= target else "BELOW"
        lines += [
            "| | Tessera ops/s | Redis ops/s |",
            "|---|---:|---:|",
            f"| {fast.case.fsync} (`{fast_id}`, -n {fast.n}) | {fmt_ops(tf)} | {fmt_ops(rf)} |",
            f"| {slow.case.fsync} (`{slow_id}`, -n {slow.n}) | {fmt_ops(ts)} | {fmt_ops(rs)} |",
            f"| {slow.case.fsync} / {fast.case.fsync} | **{fmt_ratio(ts, tf)}** ({verdict} target >= {target}) "
            f"| {fmt_ratio(rs, rf)} (reference) |",
        ]

    lines += [
        "",
        "## Details",
        "",
        "Per-run ops/s in run order; spread = (max - min) / median; p50 = median of redis-benchmark's p50 latency; "
        "keys = DBSIZE after the last run (GET: keys after the preload).",
        "",
        "| Case id | Server | Runs (ops/s) | Spread | p50 ms | Keys | AOF rewrites | Failures |",
        "|---|---|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        for name in ("tessera", "redis"):
            ss = r.samples[name]
            runs = ", ".join(f"{s.rps:,.0f}" for s in ss) or "-"
            med = r.median(name)
            spread = f"{(max(s.rps for s in ss) - min(s.rps for s in ss)) / med:.0%}" if ss and med else "-"
            p50 = median_or_none([s.p50 for s in ss])
            last = ss[-1] if ss else None
            keys = "-"
            if last:
                k = last.preload_keys if r.case.test == "get" else last.dbsize
                keys = f"{k:,}" if k is not None else "?"
            rewrites = median_or_none([s.aof_rewrites for s in ss])
            fails = "; ".join(r.failures[name]) or ""
            lines.append(
                f"| {r.case.id} | {name} | {runs} | {spread} | "
                f"{'-' if p50 is None else f'{p50:.3f}'} | {keys} | "
                f"{'-' if rewrites is None else f'{rewrites:g}'} | {fails} |"
            )
    if any(warnings.values()):
        lines += ["", "redis-benchmark warnings (stderr):", ""]
        for name, ws in warnings.items():
            for w in sorted(ws):
                lines.append(f"- {name}: `{w}`")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def add_common_args(p: argparse.ArgumentParser) -> None:
    """The options every redis-benchmark comparison takes: binaries, server arguments,
    pauses and time-outs."""
    p.add_argument("--settle", type=float, default=1.0, help="seconds to pause between runs (default 1)")
    p.add_argument("--run-timeout", type=float, default=900, help="seconds before a redis-benchmark run is abandoned (default 900)")
    p.add_argument("--build", action="store_true", help="run `cargo build --release` first")
    p.add_argument("--tessera-bin", default=str(REPO / "target" / "release" / "tessera-server"))
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--redis-benchmark", default="redis-benchmark")
    p.add_argument("--tessera-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for tessera-server (repeatable, default none; "
                        "use the = form for dashed values: --tessera-arg=--hz --tessera-arg=100)")
    p.add_argument("--redis-arg", action="append", default=[], metavar="ARG",
                   help="extra argument for redis-server (repeatable, default none; e.g. "
                        "--redis-arg=--auto-aof-rewrite-percentage --redis-arg=0)")


def parse_args(cases: list[Case]):
    p = argparse.ArgumentParser(
        description="Compare tessera-server and redis-server with redis-benchmark.",
        epilog="Cases: " + ", ".join(c.id for c in cases),
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per server per case (default 3); the median is reported")
    p.add_argument("--quick", action="store_true", help="smoke run with small -n (numbers not meaningful)")
    p.add_argument("--output", metavar="FILE", help="also write the markdown table to FILE")
    p.add_argument("--only", metavar="IDS", help="comma-separated case ids to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the cases and their redis-benchmark flags, then exit")
    p.add_argument("--n-scale", type=float, default=1.0, help="multiply every full-run -n by this (default 1.0)")
    add_common_args(p)
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    if args.only:
        wanted = [s.strip() for s in args.only.split(",") if s.strip()]
        unknown = [w for w in wanted if w not in {c.id for c in cases}]
        if unknown:
            p.error(f"unknown case id(s): {', '.join(unknown)}")
        args.selected = [c for c in cases if c.id in wanted]
    else:
        args.selected = cases
    return args


def raise_interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def prepare(args) -> bool:
    """Builds if asked, checks the binaries are there, turns SIGINT/SIGTERM/SIGHUP into
    KeyboardInterrupt (so the servers are stopped). False when a binary is missing."""
    if args.build:
        subprocess.run(["cargo", "build", "--release"], cwd=REPO, check=True)
    for tool in (args.tessera_bin, args.redis_server, args.redis_benchmark):
        if shutil.which(tool) is None:
            print(f"error: {tool} not found (build Tessera with `cargo build --release`)", file=sys.stderr)
            return False
    signal.signal(signal.SIGINT, raise_interrupt)  # even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGHUP, raise_interrupt)
    return True


def main() -> int:
    cases = build_cases()
    args = parse_args(cases)
    if args.list:
        for c in args.selected:
            print(f"{c.id:22} appendfsync {c.fsync:8} {c.shown_flags(c.requests(args.quick, args.n_scale))}")
        return 0
    if not prepare(args):
        return 2

    started = time.monotonic()
    info = machine_info(args)
    stale = binary_staleness(Path(args.tessera_bin))
    if stale:
        print(stale, file=sys.stderr)
    results = [Result(c, c.requests(args.quick, args.n_scale)) for c in args.selected]
    warnings: dict[str, set[str]] = {"tessera": set(), "redis": set()}

    def measure(srv: Server, r: Result):
        preload_keys = None
        if r.case.test == "get":
            pre_n = r.n if args.quick else 2 * KEYSPACE
            pre = Case("preload", "SET", "set", r.case.clients, 16, r.case.datasize,
                       r.case.fsync, pre_n, pre_n)
            run_benchmark(args, srv.port, pre.bench_flags(pre_n))
            wait_for_background_work(srv.port)
            preload_keys = resp(srv.port, "DBSIZE")
            time.sleep(args.settle)
        rps, p50, err = run_benchmark(args, srv.port, r.case.bench_flags(r.n))
        if srv.proc.poll() is not None:
            raise RuntimeError(f"{srv.name} exited during the run:\n{srv.log_tail()}")
        dbsize = resp(srv.port, "DBSIZE")
        rewrites = info_fields(srv.port, "persistence").get("aof_rewrites")
        sample = Sample(rps, p50, dbsize, int(rewrites) if rewrites is not None else None,
                        preload_keys)
        return sample, err, f"{rps:,.0f} ops/s"

    status = run_round_robin(args, results, Servers(args), lambda case: case.fsync, measure,
                             warnings)
    report = render(args, info, results, started, status, warnings, stale)
    return finish(args, report, status, results)


def run_round_robin(args, results, servers: Servers, fsync_of, measure,
                    warnings: dict[str, set[str]]) -> str:
    """Runs every result's case args.repeat times per server: repetition is the outer
    loop, then the cases in turn, alternating which server goes first. Each run starts a
    fresh server (`servers.start(name, fsync_of(case))`), calls `measure(srv, result)`,
    which returns (sample, redis-benchmark's stderr, a summary for the progress line),
    and stops the server. A failed run is recorded in `result.failures[name]`; the
    samples go to `result.samples[name]`. Returns the run's status for the report."""
    status = "complete"
    total = len(results) * args.repeat * 2
    done = 0
    try:
        for rep in range(args.repeat):
            for i, r in enumerate(results):
                order = ["tessera", "redis"] if (rep + i) % 2 == 0 else ["redis", "tessera"]
                fsync = fsync_of(r.case)
                for name in order:
                    done += 1
                    tag = f"[{done}/{total}] {r.case.id} ({fsync}) rep {rep + 1}/{args.repeat} {name}"
                    srv = None
                    try:
                        srv = servers.start(name, fsync)
                        sample, err, summary = measure(srv, r)
                        for line in err.splitlines():
                            if line.strip():
                                warnings[name].add(line.strip())
                        r.samples[name].append(sample)
                        print(f"{tag}: {summary}", file=sys.stderr)
                    except KeyboardInterrupt:
                        raise
                    except Exception as e:
                        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                        r.failures[name].append(msg)
                        print(f"{tag}: FAILED: {e}", file=sys.stderr)
                        if srv is not None:
                            tail = srv.log_tail()
                            if tail:
                                print(f"--- {name} log tail ---\n{tail}", file=sys.stderr)
                    finally:
                        if srv is not None:
                            servers.stop(srv)
                    os.sync()
                    time.sleep(args.settle)
    except KeyboardInterrupt:
        status = "INTERRUPTED (partial results)"
        print("\ninterrupted; stopping servers and removing temp dirs", file=sys.stderr)
    finally:
        servers.stop_all()
    return status


def finish(args, report: str, status: str, results) -> int:
    """Prints the report (and writes --output); the exit code: 130 if interrupted, 1 if a
    run failed, else 0."""
    sys.stdout.write(report)
    if args.output:
        Path(args.output).write_text(report)
        print(f"wrote {args.output}", file=sys.stderr)
    if status != "complete":
        return 130
    return 1 if any(r.failures[n] for r in results for n in r.failures) else 0


if __name__ == "__main__":
    sys.exit(main())
