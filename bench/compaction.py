#!/usr/bin/env python3
"""Compaction under load: BGREWRITEAOF while redis-benchmark writes, Tessera vs Redis.

The experiment of the PAOF / LEAST papers. This is a benchmark, not a test: it
only measures and reports, it never fails on a slow result.

For every value size (--sizes, default 100, 1024 and 5120 bytes) and each
server (Tessera with its default number of rewrite threads, Redis), in one run,
alternating which server goes first:

 1. start a fresh server in a fresh temporary directory on a free loopback port
    (never 6379), append-only log on, automatic rewrites off so that the only
    compaction is the one measured:

        tessera-server --port P --bind 127.0.0.1 --dir D --appendonly yes \
            --appendfsync everysec --save "" --auto-aof-rewrite-percentage 0
        redis-server   --port P --bind 127.0.0.1 --dir D --appendonly yes \
            --appendfsync everysec --save "" --aof-use-rdb-preamble yes \
            --auto-aof-rewrite-percentage 0

 2. preload: redis-benchmark -t set -r 1000000 -d SIZE -c 50 -P 16 -n PRELOAD -q
    (with --values distinct: a custom SET whose value is made of __rand_int__
    placeholders, so each request writes its own value)
    (keys `key:__rand_int__`, 16 bytes; the default 2,000,000 requests leave
    about 86 % of the 1M key space set), then wait for the disk (sync);
 3. start the same command with a huge -n in the background and sample every
    100 ms (--interval):
      - ops/s: delta of INFO total_commands_processed / elapsed time (one
        persistent connection, INFO stats + INFO persistence + DBSIZE pipelined);
      - memory: PSS (/proc/PID/smaps_rollup) summed over the server process and
        all its descendants (/proc/PID/task/*/children, recursively), so
        Redis's fork child counts;
      - the size of D/appendonlydir;
      - cumulative disk write bytes (/proc/PID/io write_bytes) of the server
        and its descendants. Linux adds a reaped child's counters to its
        parent's; the script checks that at start-up and only adds the last
        value of a vanished child when the kernel does not;
 4. after a warm-up (1 s) and a steady period (4 s, --steady), send BGREWRITEAOF,
    keep sampling until INFO shows aof_rewrite_in_progress:0 with aof_rewrites
    incremented, then 3 s more (--tail), then stop redis-benchmark;
 5. recovery: kill -9 the server, restart it on the same directory and time
    process start -> PING answers PONG and INFO loading:0; DBSIZE gives the keys.

Then a thread sweep: Tessera only, 1024-byte values, --aof-rewrite-threads 1, 2,
4, 8 (--threads), same measurement with shorter phases.

Per run it writes a CSV time series into --results-dir (default bench/results),
PNG charts (ops/s and PSS over time per value size, both servers, compaction
shaded, t = 0 at BGREWRITEAOF; one thread-sweep chart), and a Markdown report
to stdout and to --report (default bench/results/compaction.md).

Targets shown as pass/fail columns:
  - Tessera's mean throughput during the compaction >= 0.95 x its steady state;
  - peak memory during the compaction <= 1.15 x the sample just before (1 KB values);
  - Tessera's recovery >= 2x faster than Redis's.

Usage (from the repository root, after `cargo build --release`):
    python3 bench/compaction.py                    # full run, about 6-10 min on 2 cores
    python3 bench/compaction.py --quick            # smoke run, about 2-3 min
    python3 bench/compaction.py --sizes 1024 --threads '' --repeat 3
    python3 bench/compaction.py --tessera path/to/tessera-server --redis path/to/redis-server

Python 3.11 stdlib, plus matplotlib for the charts:
    python3 -m pip install matplotlib
    (on a distribution-managed Python: python3 -m pip install --user --break-system-packages
     matplotlib, or use a virtualenv). Without matplotlib the charts are skipped
    and everything else still runs.

Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import re
import resource
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
HOST = "127.0.0.1"
KEYSPACE = 1_000_000
CLIENTS = 50
PIPELINE = 16
HUGE_N = 1_000_000_000  # redis-benchmark -n for the background load (it is stopped)
SERVERS = ("tessera", "redis")

TARGET_THROUGHPUT = 0.95  # mean ops/s during compaction / steady ops/s (Tessera)
TARGET_MEMORY = 1.15  # peak PSS during compaction / PSS just before (1 KB values)
TARGET_MEMORY_SIZE = 1024
TARGET_RECOVERY = 2.0  # Redis recovery seconds / Tessera recovery seconds

MB = 1e6


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


# --------------------------------------------------------------------------
# Minimal RESP client
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
        return RespError(rest.decode())  # returned, so a pipeline can read on
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


def _encode(args) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = str(arg).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


class Conn:
    """One persistent connection; pipeline() sends several commands in one write."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb")

    def pipeline(self, *commands):
        self.sock.sendall(b"".join(_encode(c) for c in commands))
        return [_read_reply(self.f) for _ in commands]

    def call(self, *args):
        reply = self.pipeline(args)[0]
        if isinstance(reply, RespError):
            raise reply
        return reply

    def close(self):
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass


def resp(port: int, *args, timeout: float = 5.0):
    conn = Conn(port, timeout)
    try:
        return conn.call(*args)
    finally:
        conn.close()


def parse_info(text) -> dict[str, str]:
    fields = {}
    for line in (text or "").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            fields[k.strip()] = v.strip()
    return fields


def info_fields(port: int, section: str) -> dict[str, str]:
    return parse_info(resp(port, "INFO", section, timeout=10.0))


def num(fields: dict, key: str, default=None):
    try:
        v = fields[key]
    except KeyError:
        return default
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return default


# --------------------------------------------------------------------------
# /proc readers (cheap: a handful of small files per sample)
# --------------------------------------------------------------------------


def descendants(pid: int) -> list[int]:
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children", "rb") as f:
                    text = f.read()
            except OSError:
                continue
            for c in text.split():
                out.append(int(c))
                stack.append(int(c))
    return out


def pss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            data = f.read()
    except OSError:
        return None
    for line in data.split(b"\n"):
        if line.startswith(b"Pss:"):
            return int(line.split()[1]) * 1024
    return None


def write_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/io", "rb") as f:
            data = f.read()
    except OSError:
        return None
    for line in data.split(b"\n"):
        if line.startswith(b"write_bytes:"):
            return int(line.split()[1])
    return None


def dir_bytes(d: Path) -> int:
    total = 0
    try:
        with os.scandir(d) as it:
            for e in it:
                try:
                    total += e.stat(follow_symlinks=False).st_size
                except OSError:
                    pass
    except OSError:
        pass
    return total


def aof_files_bytes(d: Path) -> tuple[int, int]:
    """(base files, incremental files) in an appendonlydir, by the multi-part AOF names
    (`*.base.rdb`, `*.base.N.rdb`, `*.incr.aof`)."""
    base = incr = 0
    try:
        with os.scandir(d) as it:
            for e in it:
                try:
                    size = e.stat(follow_symlinks=False).st_size
                except OSError:
                    continue
                if ".base." in e.name or e.name.endswith(".base.rdb"):
                    base += size
                elif ".incr." in e.name:
                    incr += size
    except OSError:
        pass
    return base, incr


def kernel_folds_child_io(base: Path) -> bool | None:
    """Does the kernel add a reaped child's /proc/PID/io write_bytes to its parent's?
    (Linux does, in wait_task_zombie.) None when write accounting is unavailable."""
    me = os.getpid()
    if write_bytes(me) is None:
        return None
    path = base / f"iocheck-{me}.tmp"
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # write 4 MB, fsync, then wait for the parent to have looked
        try:
            os.close(w)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.write(fd, b"x" * (4 << 20))
            os.fsync(fd)
            os.close(fd)
            os.read(r, 1)
        finally:
            os._exit(0)
    os.close(r)
    child_bytes = 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        child_bytes = write_bytes(child) or 0
        if child_bytes >= (4 << 20):
            break
        time.sleep(0.01)
    before = write_bytes(me) or 0
    os.close(w)
    os.waitpid(child, 0)
    after = write_bytes(me) or 0
    try:
        path.unlink()
    except OSError:
        pass
    if child_bytes < (4 << 20):
        return None
    return after - before >= 0.9 * child_bytes


class DiskWrites:
    """Cumulative write_bytes of a process tree, monotonic."""

    def __init__(self, pid: int, folds: bool | None):
        self.pid = pid
        self.folds = folds
        self.kids: dict[int, int] = {}
        self.dead = 0
        self.parent = 0
        self.best = 0

    def read(self, kids: list[int], parent_value: int | None) -> int | None:
        if self.folds is None:
            return None
        if parent_value is not None:
            self.parent = parent_value
        current = {}
        for k in kids:
            v = write_bytes(k)
            if v is not None:
                current[k] = v
        if not self.folds:
            self.dead += sum(v for k, v in self.kids.items() if k not in current)
        self.kids = current
        self.best = max(self.best, self.parent + sum(current.values()) + self.dead)
        return self.best


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
    name: str
    argv: list[str]
    port: int
    dir: Path
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def aof_dir(self) -> Path:
        return self.dir / "appendonlydir"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Servers:
    """Owns every server process and temp dir; stop_all() cleans up everything."""

    tmp_prefix = "bench-compaction-"  # of the servers' temporary directories

    def __init__(self, args):
        self.args = args
        self.live: list[Server] = []
        self.dirs: list[Path] = []

    def command(self, name: str, port, d, threads) -> list[str]:
        if name == "tessera":
            argv = [
                str(self.args.tessera), "--port", str(port), "--bind", HOST, "--dir", str(d),
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                "--auto-aof-rewrite-percentage", "0",
            ]
            if threads:
                argv += ["--aof-rewrite-threads", str(threads)]
            return argv + self.args.tessera_arg
        return [
            self.args.redis, "--port", str(port), "--bind", HOST, "--dir", str(d),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--aof-use-rdb-preamble", "yes", "--auto-aof-rewrite-percentage", "0",
        ] + self.args.redis_arg

    def spawn(self, srv: Server) -> None:
        with open(srv.log, "ab") as logf:
            srv.proc = subprocess.Popen(
                srv.argv, cwd=srv.dir, stdin=subprocess.DEVNULL, stdout=logf,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        if srv not in self.live:
            self.live.append(srv)

    def start(self, name: str, threads: int | None) -> Server:
        last_error = ""
        for _attempt in range(3):
            d = Path(tempfile.mkdtemp(prefix=f"{self.tmp_prefix}{name}-", dir=self.args.tmp_base))
            self.dirs.append(d)
            port = free_port()
            srv = Server(name, self.command(name, port, d, threads), port, d, d / "server.log")
            self.spawn(srv)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and srv.alive():
                try:
                    if resp(srv.port, "PING", timeout=1.0) == "PONG":
                        return srv
                except (OSError, RespError):
                    pass
                time.sleep(0.05)
            last_error = (f"{name} did not start on port {port} (exit code "
                          f"{srv.proc.poll()}):\n{srv.log_tail()}")
            self.stop(srv)
        raise RuntimeError(last_error)

    def kill9(self, srv: Server) -> None:
        if srv.alive():
            srv.proc.kill()
        if srv.proc is not None:
            srv.proc.wait(timeout=30)

    def stop(self, srv: Server, remove: bool = True) -> None:
        if srv.alive():
            try:
                resp(srv.port, "SHUTDOWN", "NOSAVE", timeout=5.0)
            except (OSError, RespError):
                pass  # the connection closes on a successful shutdown
            try:
                srv.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                srv.proc.terminate()
                try:
                    srv.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    srv.proc.kill()
                    srv.proc.wait(timeout=10)
        if srv in self.live:
            self.live.remove(srv)
        if remove:
            shutil.rmtree(srv.dir, ignore_errors=True)
            if srv.dir in self.dirs and not srv.dir.exists():
                self.dirs.remove(srv.dir)

    def stop_all(self) -> None:
        for srv in list(self.live):
            try:
                self.stop(srv)
            except Exception as e:  # keep cleaning up the rest
                print(f"warning: stopping {srv.name}: {e}", file=sys.stderr)
                if srv.alive():
                    srv.proc.kill()
        for d in list(self.dirs):
            shutil.rmtree(d, ignore_errors=True)
            self.dirs.remove(d)


def distinct_value(size: int) -> str:
    """A value template of exactly `size` bytes made of `__rand_int__` placeholders:
    redis-benchmark fills each one independently per request (12 digits, zero-padded,
    < -r), so every SET writes its own value. Bytes that do not fill a whole placeholder
    are a fixed `v` padding."""
    if size < 16:
        raise ValueError("distinct values need at least 16 bytes")
    head = "val:"
    count = (size - len(head)) // 12
    return head + "__rand_int__" * count + "v" * (size - len(head) - 12 * count)


def load_text(values: str) -> str:
    """The load's redis-benchmark flags as the report shows them."""
    common = f"-r {KEYSPACE} -c {CLIENTS} -P {PIPELINE} -q"
    if values == "fixed":
        return f"-t set -d SIZE {common}"
    return f"{common} SET key:__rand_int__ val:__rand_int__... (SIZE bytes)"


def bench_flags(size: int, n: int, values: str) -> list[str]:
    """redis-benchmark flags of the load. `fixed`: `-t set`, which writes one value to
    every key (a pseudo-random printable string generated once at start-up: LZF cannot
    shrink it much, but every key holds the same bytes). `distinct`: a custom SET whose
    value differs per request."""
    common = ["-r", str(KEYSPACE), "-c", str(CLIENTS), "-P", str(PIPELINE), "-n", str(n), "-q"]
    if values == "fixed":
        return ["-t", "set", "-d", str(size)] + common
    return common + ["SET", "key:__rand_int__", distinct_value(size)]


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------


@dataclass
class Phases:
    warmup: float
    steady: float
    tail: float


@dataclass
class Sample:
    t: float  # monotonic
    phase: str
    cmds: int
    ops: float | None  # since the previous sample
    pss: int | None
    pss_server: int | None
    pss_children: int | None
    children: int
    aof_dir: int
    written: int | None  # cumulative since the start of sampling
    in_progress: int
    rewrites: int
    keys: int | None
    held: int | None  # tessera_capture_held_bytes


@dataclass
class Run:
    server: str
    size: int
    threads: int | None  # None = server default
    rep: int
    label: str
    samples: list[Sample] = field(default_factory=list)
    t0: float | None = None
    i_before: int | None = None
    i_done: int | None = None
    m: dict = field(default_factory=dict)  # metrics
    error: str | None = None
    csv_path: Path | None = None

    def rel(self, s: Sample) -> float:
        return s.t - self.t0


class Monitor:
    """Samples one server. PSS needs a walk of every page table (smaps_rollup costs about
    12 ms of kernel time per GB here), so PSS is read at most as often as keeps that walk
    under `pss_budget` of one CPU; the other readings are taken at every sample."""

    def __init__(self, srv: Server, folds: bool | None, pss_budget: float):
        self.srv = srv
        self.pid = srv.proc.pid
        self.conn = Conn(srv.port, timeout=30.0)
        self.io = DiskWrites(self.pid, folds)
        self.io_base: int | None = None
        self.prev: Sample | None = None
        self.pss_budget = pss_budget
        self.pss_next = 0.0

    def sample(self, phase: str, force_pss: bool = False) -> Sample:
        parent_wb = write_bytes(self.pid)
        kids = descendants(self.pid)
        pss_server = pss_kids = None
        now = time.monotonic()
        if force_pss or now >= self.pss_next:
            c0 = time.thread_time()
            pss_server = pss_bytes(self.pid)
            pss_kids = sum(pss_bytes(k) or 0 for k in kids)
            cost = time.thread_time() - c0
            self.pss_next = now + cost / self.pss_budget
        written = self.io.read(kids, parent_wb)
        stats, pers, keys = self.conn.pipeline(
            ("INFO", "stats"), ("INFO", "persistence"), ("DBSIZE",))
        t = time.monotonic()
        stats, pers = parse_info(stats), parse_info(pers)
        cmds = num(stats, "total_commands_processed", 0)
        ops = None
        if self.prev is not None and t > self.prev.t:
            ops = (cmds - self.prev.cmds) / (t - self.prev.t)
        if written is not None:
            if self.io_base is None:
                self.io_base = written
            written -= self.io_base
        s = Sample(
            t=t, phase=phase, cmds=cmds, ops=ops,
            pss=None if pss_server is None else pss_server + (pss_kids or 0),
            pss_server=pss_server, pss_children=pss_kids, children=len(kids),
            aof_dir=dir_bytes(self.srv.aof_dir), written=written,
            in_progress=num(pers, "aof_rewrite_in_progress", 0),
            rewrites=num(pers, "aof_rewrites", 0),
            keys=keys if isinstance(keys, int) else None,
            held=num(pers, "tessera_capture_held_bytes"),
        )
        self.prev = s
        return s


def start_loader(args, srv: Server, size: int, n: int) -> subprocess.Popen:
    errf = open(srv.dir / "loader.err", "wb")
    try:
        return subprocess.Popen(
            [args.redis_benchmark, "-h", HOST, "-p", str(srv.port)] + bench_flags(size, n, args.values),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf,
            start_new_session=True,
        )
    finally:
        errf.close()


def stop_loader(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def measure_recovery(servers: Servers, srv: Server, timeout: float) -> dict:
    servers.kill9(srv)
    m = {"recovery_dir_mb": dir_bytes(srv.aof_dir) / MB}
    start = time.monotonic()
    servers.spawn(srv)
    deadline = start + timeout
    done = None
    while time.monotonic() < deadline:
        if not srv.alive():
            raise RuntimeError(f"{srv.name} exited while loading:\n{srv.log_tail()}")
        try:
            conn = Conn(srv.port, timeout=5.0)
        except OSError:
            time.sleep(0.005)
            continue
        try:
            while time.monotonic() < deadline:
                pong, pers = conn.pipeline(("PING",), ("INFO", "persistence"))
                if pong == "PONG" and parse_info(pers).get("loading") == "0":
                    done = time.monotonic()
                    break
                time.sleep(0.01)  # -LOADING
            if done is not None:
                keys = conn.call("DBSIZE")
                pers = parse_info(conn.call("INFO", "persistence"))
                break
        except (OSError, ConnectionError):
            time.sleep(0.005)
        finally:
            conn.close()
    if done is None:
        raise RuntimeError(f"{srv.name} did not finish loading within {timeout:.0f} s")
    m["recovery_s"] = done - start
    m["recovery_keys"] = keys
    m["recovery_kps"] = keys / m["recovery_s"] if m["recovery_s"] > 0 else None
    # What the server itself says about its load time (Tessera: INFO; Redis: log line).
    load = num(pers, "tessera_last_load_seconds")
    if load is None:
        found = re.findall(r"DB loaded from append only file: ([0-9.]+) seconds", srv.log_tail(200))
        load = float(found[-1]) if found else None
    m["server_load_s"] = load
    return m


def run_once(args, servers: Servers, folds, name: str, size: int, threads, phases: Phases,
             rep: int, label: str) -> Run:
    run = Run(name, size, threads, rep, label)
    srv = loader = mon = None
    try:
        srv = servers.start(name, threads)
        pers = info_fields(srv.port, "persistence")
        run.m["threads"] = num(pers, "tessera_aof_rewrite_threads")
        t = time.monotonic()
        subprocess.run(
            [args.redis_benchmark, "-h", HOST, "-p", str(srv.port)] + bench_flags(size, args.preload, args.values),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            check=True, timeout=args.run_timeout,
        )
        run.m["preload_s"] = time.monotonic() - t
        run.m["preload_keys"] = resp(srv.port, "DBSIZE")
        t = time.monotonic()
        os.sync()  # the preload's dirty pages would otherwise be flushed during the steady period
        run.m["sync_s"] = time.monotonic() - t
        if not srv.alive():
            raise RuntimeError(f"{name} exited during the preload:\n{srv.log_tail()}")

        mon = Monitor(srv, folds, args.pss_budget)
        loader = start_loader(args, srv, size, HUGE_N)
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        wall0 = time.monotonic()
        phase = "warmup"
        s = mon.sample(phase)
        run.samples.append(s)
        i_steady = None
        phase_end = s.t + phases.warmup
        next_tick = s.t
        rewrites_before = 0
        while True:
            next_tick += args.interval
            delay = next_tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_tick = time.monotonic()  # fell behind; do not burst
            s = mon.sample(phase)
            run.samples.append(s)
            if loader.poll() is not None:
                err = (srv.dir / "loader.err").read_text(errors="replace").strip()[-300:]
                raise RuntimeError(f"redis-benchmark exited ({loader.returncode}): {err}")
            if not srv.alive():
                raise RuntimeError(f"{name} exited during the run:\n{srv.log_tail()}")
            if phase == "warmup" and s.t >= phase_end:
                i_steady = len(run.samples) - 1
                phase, phase_end = "steady", s.t + phases.steady
            elif phase == "steady" and s.t >= phase_end:
                # the reference sample just before BGREWRITEAOF, always with PSS
                s = mon.sample(phase, force_pss=True)
                run.samples.append(s)
                run.i_before = len(run.samples) - 1
                rewrites_before = s.rewrites
                run.t0 = time.monotonic()
                reply = mon.conn.call("BGREWRITEAOF")
                if "started" not in str(reply).lower():
                    raise RuntimeError(f"BGREWRITEAOF replied {reply!r}")
                phase = "compaction"
            elif phase == "compaction":
                if s.in_progress == 0 and s.rewrites > rewrites_before:
                    run.i_done = len(run.samples) - 1
                    phase, phase_end = "tail", s.t + phases.tail
                elif s.t - run.t0 > args.compaction_timeout:
                    raise RuntimeError(f"compaction still running after {args.compaction_timeout:.0f} s")
            elif phase == "tail" and s.t >= phase_end:
                break
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        wall = time.monotonic() - wall0
        run.m["sampler_cpu_pct"] = 100 * ((ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)) / wall
        stop_loader(loader)
        loader = None
        pers = parse_info(mon.conn.call("INFO", "persistence"))
        run.m["rewrite_status"] = pers.get("aof_last_bgrewrite_status", "?")
        base, incr = aof_files_bytes(srv.aof_dir)
        run.m["base_mb"], run.m["incr_mb"] = base / MB, incr / MB
        run.m["base_parts"] = num(pers, "tessera_aof_base_parts")
        run.m["rewrite_bytes_mb"] = (num(pers, "tessera_last_rewrite_bytes") or 0) / MB if name == "tessera" else None
        run.m["final_dir_mb"] = dir_bytes(srv.aof_dir) / MB
        run.m["keys_end"] = mon.conn.call("DBSIZE")
        mon.conn.close()
        mon = None
        compute_metrics(run, i_steady)
        run.m.update(measure_recovery(servers, srv, args.recovery_timeout))
    except KeyboardInterrupt:
        raise
    except Exception as e:
        run.error = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"  FAILED: {e}", file=sys.stderr)
    finally:
        stop_loader(loader)
        if mon is not None:
            mon.conn.close()
        if srv is not None:
            servers.stop(srv)
    return run


def window_rate(a: Sample, b: Sample) -> float | None:
    return (b.cmds - a.cmds) / (b.t - a.t) if b.t > a.t else None


def compute_metrics(run: Run, i_steady: int) -> None:
    ss, m = run.samples, run.m
    before, done = ss[run.i_before], ss[run.i_done]
    during = ss[run.i_before + 1: run.i_done + 1]
    m["steady_ops"] = window_rate(ss[i_steady], before)
    m["comp_mean_ops"] = window_rate(before, done)
    m["comp_min_ops"] = min((s.ops for s in during if s.ops is not None), default=None)
    m["comp_ratio"] = m["comp_mean_ops"] / m["steady_ops"] if m["steady_ops"] else None
    m["comp_s"] = done.t - run.t0
    pss = [s.pss for s in during if s.pss is not None]
    if before.pss and pss:
        m["mem_before_mb"] = before.pss / MB
        m["mem_peak_mb"] = max(pss) / MB
        m["mem_mean_mb"] = statistics.mean(pss) / MB
        m["mem_peak_ratio"] = max(pss) / before.pss
        m["mem_mean_ratio"] = statistics.mean(pss) / before.pss
        after = [s.pss for s in ss[run.i_before + 1:] if s.pss is not None]
        m["mem_peak_all_ratio"] = max(after) / before.pss if after else None
    steady_start = ss[i_steady]
    first_pss = next((s for s in ss[i_steady:run.i_before] if s.pss), None)
    if first_pss and before.pss:
        m["steady_mem_growth_pct"] = 100 * (before.pss - first_pss.pss) / first_pss.pss
    pss_times = [s.t for s in ss[run.i_before:] if s.pss is not None]
    if len(pss_times) > 1:
        m["pss_every_s"] = (pss_times[-1] - pss_times[0]) / (len(pss_times) - 1)
    held = [s.held for s in during if s.held is not None]
    m["held_peak_mb"] = max(held) / MB if held else None
    m["children_peak"] = max((s.children for s in during), default=0)
    if before.written is not None and done.written is not None:
        m["comp_written_mb"] = (done.written - before.written) / MB
        if before.t > steady_start.t:
            m["steady_write_mbps"] = (before.written - steady_start.written) / MB / (before.t - steady_start.t)
    m["keys_before"] = before.keys
    m["aof_dir_before_mb"] = before.aof_dir / MB


def write_csv(run: Run, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "phase", "ops_per_s", "pss_mb", "pss_server_mb", "pss_children_mb",
                    "children", "aof_dir_mb", "written_mb", "aof_rewrite_in_progress",
                    "aof_rewrites", "keys", "capture_held_mb", "total_commands_processed"])
        for s in run.samples:
            w.writerow([
                f"{run.rel(s):.3f}" if run.t0 is not None else f"{s.t - run.samples[0].t:.3f}",
                s.phase, "" if s.ops is None else f"{s.ops:.0f}",
                "" if s.pss is None else f"{s.pss / MB:.1f}",
                "" if s.pss_server is None else f"{s.pss_server / MB:.1f}",
                "" if s.pss_children is None else f"{s.pss_children / MB:.1f}", s.children, f"{s.aof_dir / MB:.1f}",
                "" if s.written is None else f"{s.written / MB:.1f}",
                s.in_progress, s.rewrites, "" if s.keys is None else s.keys,
                "" if s.held is None else f"{s.held / MB:.1f}", s.cmds,
            ])
    run.csv_path = path


# --------------------------------------------------------------------------
# Charts
# --------------------------------------------------------------------------

COLORS = {"tessera": "tab:blue", "redis": "tab:red"}


def load_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def run_series(run: Run, attr: str, scale: float):
    xs, ys = [], []
    for s in run.samples:
        v = getattr(s, attr)
        if v is not None:
            xs.append(run.rel(s))
            ys.append(v / scale)
    return xs, ys


def plot_size(plt, size: int, runs: dict[str, Run], path_ops: Path, path_mem: Path) -> None:
    for path, attr, scale, ylabel, title in (
        (path_ops, "ops", 1e3, "ops/s (thousands)", "throughput"),
        (path_mem, "pss", MB, "PSS, server + children (MB)", "memory"),
    ):
        fig, ax = plt.subplots(figsize=(9, 4.5))
        for name, run in runs.items():
            xs, ys = run_series(run, attr, scale)
            ax.plot(xs, ys, color=COLORS[name], lw=1.3,
                    label=f"{name} (compaction {run.m.get('comp_s', 0):.1f} s)")
            ax.axvspan(0, run.m.get("comp_s", 0), color=COLORS[name], alpha=0.12)
        ax.axvline(0, color="k", lw=0.8, ls="--")
        ax.set_xlabel("seconds since BGREWRITEAOF (shaded: compaction in progress)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"SET -d {size} -c {CLIENTS} -P {PIPELINE}, BGREWRITEAOF under load: {title}")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left" if attr == "ops" else "upper left")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)


def plot_sweep(plt, runs: list[Run], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    cmap = plt.get_cmap("viridis")
    for i, run in enumerate(runs):
        color = cmap(i / max(1, len(runs) - 1) * 0.9)
        for ax, attr, scale in ((axes[0], "ops", 1e3), (axes[1], "pss", MB)):
            xs, ys = run_series(run, attr, scale)
            ax.plot(xs, ys, color=color, lw=1.2, label=f"{run.threads} thread{'s' if run.threads != 1 else ''}")
            ax.axvspan(0, run.m.get("comp_s", 0), color=color, alpha=0.08)
    axes[0].set_ylabel("ops/s (thousands)")
    axes[1].set_ylabel("PSS (MB)")
    for ax in axes[:2]:
        ax.axvline(0, color="k", lw=0.8, ls="--")
        ax.set_xlabel("seconds since BGREWRITEAOF")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    labels = [str(r.threads) for r in runs]
    x = list(range(len(runs)))
    comp = [r.m.get("comp_s") or 0 for r in runs]
    rec = [r.m.get("recovery_s") or 0 for r in runs]
    axes[2].bar([i - 0.2 for i in x], comp, width=0.4, label="compaction (s)", color="tab:blue")
    axes[2].bar([i + 0.2 for i in x], rec, width=0.4, label="recovery (s)", color="tab:orange")
    axes[2].set_xticks(x, labels)
    axes[2].set_xlabel("--aof-rewrite-threads")
    axes[2].set_ylabel("seconds")
    axes[2].grid(alpha=0.3, axis="y")
    axes[2].legend(fontsize=8)
    size = runs[0].size if runs else 0
    fig.suptitle(f"Tessera thread sweep: SET -d {size} -c {CLIENTS} -P {PIPELINE}, BGREWRITEAOF under load")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------


def med(runs: list[Run], key: str):
    values = [r.m.get(key) for r in runs if r.error is None and r.m.get(key) is not None]
    if not values:
        return None
    if all(isinstance(v, str) for v in values):
        return ",".join(sorted(set(values)))
    return statistics.median(values)


def f_ops(v) -> str:
    return "n/a" if v is None else f"{v:,.0f}"


def f_num(v, digits=2, suffix="") -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}{suffix}"


def verdict(ok) -> str:
    return "n/a" if ok is None else ("**pass**" if ok else "**FAIL**")


def ref_verdict(ok) -> str:
    """For reference rows (Redis): no target, but say which side of it the number falls."""
    return "n/a" if ok is None else ("(meets)" if ok else "(below)")


def command_output(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError) as e:
        return f"unavailable ({type(e).__name__})"


def binary_git(binary: Path) -> str:
    """git revision of the checkout the binary was built in (read-only git commands)."""
    d = binary.resolve().parent
    for parent in [d] + list(d.parents):
        if (parent / ".git").exists():
            rev = command_output(["git", "-C", str(parent), "rev-parse", "--short", "HEAD"])
            try:
                dirty = subprocess.run(
                    # The benchmarks' own output files do not count: a run writes them.
                    ["git", "-C", str(parent), "status", "--porcelain", "--untracked-files=no",
                     "--", ".", ":(exclude)bench/results"],
                    capture_output=True, text=True, timeout=30).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                dirty = ""
            return rev + (" + uncommitted changes" if dirty else "")
    return "unknown"


def render(args, ctx: dict, main_runs: list[Run], sweep_runs: list[Run], charts: dict,
           status: str, wall: float) -> str:
    argv = ["python3"] + [shown_path(a) for a in sys.argv]
    report_dir = Path(args.report).resolve().parent
    where = "the repository root" if Path.cwd().resolve() == REPO else "elsewhere"
    L = [
        "# Compaction under load: Tessera vs Redis",
        "",
        f"Command: `{shlex.join(argv)}` (run from {where}; paths outside the repository are shown by file name)",
        "",
        f"- Machine: {os.cpu_count()} CPUs (os.cpu_count()); the server, redis-benchmark and "
        "the sampler share them, so absolute numbers swing from run to run.",
        f"- Date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}; status: {status}; "
        f"wall time {wall / 60:.1f} min; load average (1 min) at start {ctx['load_start']:.2f}, "
        f"at end {os.getloadavg()[0]:.2f}",
        f"- Versions: `{ctx['redis_version']}`; `{ctx['redis_benchmark_version']}`; "
        f"`{ctx['tessera_version']}` (git {ctx['tessera_git']})",
        f"- Mode: {'QUICK smoke run (numbers are not meaningful)' if args.quick else 'full'}; "
        f"repeat {args.repeat}" + (", medians of the runs (ratios: median of the per-run ratios)" if args.repeat > 1 else ""),
        f"- Load: `redis-benchmark {load_text(args.values)}`; "
        f"preload -n {args.preload:,}, then the same with -n {HUGE_N:,} in the background; "
        f"phases: warm-up {ctx['main'].warmup:g} s, steady {ctx['main'].steady:g} s, BGREWRITEAOF, "
        f"until done + {ctx['main'].tail:g} s (thread sweep: {ctx['sweep'].warmup:g} / "
        f"{ctx['sweep'].steady:g} / + {ctx['sweep'].tail:g} s); sample every {args.interval * 1000:.0f} ms.",
        "- Servers (fresh per run, own temporary directory; automatic rewrites off so the only "
        "compaction is the measured BGREWRITEAOF):",
    ]
    for name in SERVERS:
        words = Servers(args).command(name, "$PORT", "$DIR", "$THREADS" if name == "tessera" else None)
        text = re.sub(r"'(\$[A-Z]+)'", r"\1", shlex.join(shown_path(w) for w in words))
        L.append(f"  - `{text}`" + (" (`--aof-rewrite-threads` only in the thread sweep; default "
                                      "= available parallelism)" if name == "tessera" else ""))
    disk_note = {True: "parent + live descendants (this kernel adds a reaped child's I/O to its parent)",
                 False: "parent + live descendants + last value of vanished descendants",
                 None: "unavailable on this system (n/a)"}[ctx["folds"]]
    L += [
        f"- Memory = PSS from /proc/PID/smaps_rollup of the server and all its descendants "
        f"(Redis's fork child included). Reading it walks every page table (roughly 10 ms of kernel "
        f"time per GB), so it is read at most as often as keeps that under {args.pss_budget:.0%} of "
        "one CPU (always on the sample just before BGREWRITEAOF); the `PSS every s` column of the "
        "run table gives the resulting interval. Other readings: every sample. "
        f"Disk writes = /proc/PID/io write_bytes, {disk_note}.",
        "",
    ]

    def group(name, size):
        return [r for r in main_runs if r.server == name and r.size == size]

    # ---- throughput
    L += ["## Throughput during the compaction", "",
          f"Steady = mean ops/s over the steady period; during = from the sample just before "
          f"BGREWRITEAOF to the first sample that sees it done (min: worst {args.interval * 1000:.0f} ms "
          f"sample). Target: Tessera's mean during >= {TARGET_THROUGHPUT} x its steady state "
          "(Redis shown for reference).", "",
          "| Value | Server | Steady ops/s | Min ops/s during | Mean ops/s during | During / steady | Target ≥ 0.95 |",
          "|---:|---|---:|---:|---:|---:|---|"]
    for size in args.sizes:
        for name in SERVERS:
            g = group(name, size)
            ratio = med(g, "comp_ratio")
            ok = None if ratio is None else ratio >= TARGET_THROUGHPUT
            L.append(f"| {size} B | {name} | {f_ops(med(g, 'steady_ops'))} | {f_ops(med(g, 'comp_min_ops'))} "
                     f"| {f_ops(med(g, 'comp_mean_ops'))} | {f_num(ratio)} | "
                     f"{verdict(ok) if name == 'tessera' else ref_verdict(ok)} |")

    # ---- memory
    L += ["", "## Memory during the compaction", "",
          "Before = PSS of the sample just before BGREWRITEAOF; peak / mean over the compaction. "
          f"Target: peak <= {TARGET_MEMORY} x before with {TARGET_MEMORY_SIZE}-byte values (other "
          "sizes shown in parentheses for information). Peak incl. tail = highest PSS from "
          "BGREWRITEAOF to the end of the run (compaction + tail). Steady growth = PSS change over "
          "the steady period (new keys keep arriving: the preload does not fill the whole key space).", "",
          "| Value | Server | Before MB | Peak MB | Mean MB | Peak / before | Mean / before | Target ≤ 1.15 | Peak incl. tail / before | Steady growth | Tessera capture held, peak MB |",
          "|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for size in args.sizes:
        for name in SERVERS:
            g = group(name, size)
            pr = med(g, "mem_peak_ratio")
            ok = None if pr is None else pr <= TARGET_MEMORY
            v = verdict(ok)
            if size != TARGET_MEMORY_SIZE and ok is not None:
                v = "(pass)" if ok else "(fail)"
            L.append(f"| {size} B | {name} | {f_num(med(g, 'mem_before_mb'), 0)} | {f_num(med(g, 'mem_peak_mb'), 0)} "
                     f"| {f_num(med(g, 'mem_mean_mb'), 0)} | {f_num(pr)} | {f_num(med(g, 'mem_mean_ratio'))} | {v} "
                     f"| {f_num(med(g, 'mem_peak_all_ratio'))} "
                     f"| {f_num(med(g, 'steady_mem_growth_pct'), 1, ' %')} "
                     f"| {f_num(med(g, 'held_peak_mb'), 0) if name == 'tessera' else '-'} |")

    # ---- compaction cost
    L += ["", "## Compaction: duration and disk", "",
          "Duration = BGREWRITEAOF sent -> first sample with aof_rewrite_in_progress:0 "
          f"(resolution {args.interval * 1000:.0f} ms). Written = disk write bytes of the server "
          "(and children) during the compaction, including the log appends of the ongoing load "
          "(steady log rate given for comparison). New base = the `*.base.*` files in appendonlydir "
          "at the end of the run (INFO aof_base_size is not comparable: Redis counts its incremental "
          "file in it); log = the `*.incr.*` files (everything written since BGREWRITEAOF); final "
          "dir = all of appendonlydir at the end of the run.", "",
          "| Value | Server | Duration s | Written MB | Steady log MB/s | New base MB | Base parts | Log MB | Dir before MB | Final dir MB |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for size in args.sizes:
        for name in SERVERS:
            g = group(name, size)
            parts = med(g, "base_parts")
            L.append(f"| {size} B | {name} | {f_num(med(g, 'comp_s'))} | {f_num(med(g, 'comp_written_mb'), 0)} "
                     f"| {f_num(med(g, 'steady_write_mbps'), 0)} | {f_num(med(g, 'base_mb'), 0)} "
                     f"| {'1' if name == 'redis' else f_num(parts, 0)} | {f_num(med(g, 'incr_mb'), 0)} "
                     f"| {f_num(med(g, 'aof_dir_before_mb'), 0)} "
                     f"| {f_num(med(g, 'final_dir_mb'), 0)} |")

    # ---- recovery
    L += ["", "## Recovery after kill -9", "",
          "Time from process start to PING -> PONG with INFO loading:0, on the directory the run "
          "left (new base + the log written since BGREWRITEAOF; files in the page cache). "
          "Server-reported = Tessera's INFO tessera_last_load_seconds / Redis's log line. "
          f"Target: Redis / Tessera >= {TARGET_RECOVERY}.", "",
          "| Value | Tessera s | Tessera keys | Tessera keys/s | Redis s | Redis keys | Redis keys/s | Redis / Tessera | Target ≥ 2 | Dir MB (T / R) | Server-reported s (T / R) |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for size in args.sizes:
        t, r = group("tessera", size), group("redis", size)
        ts, rs = med(t, "recovery_s"), med(r, "recovery_s")
        ratio = rs / ts if ts and rs else None
        ok = None if ratio is None else ratio >= TARGET_RECOVERY
        L.append(f"| {size} B | {f_num(ts)} | {f_ops(med(t, 'recovery_keys'))} | {f_ops(med(t, 'recovery_kps'))} "
                 f"| {f_num(rs)} | {f_ops(med(r, 'recovery_keys'))} | {f_ops(med(r, 'recovery_kps'))} "
                 f"| {f_num(ratio)} | {verdict(ok)} | {f_num(med(t, 'recovery_dir_mb'), 0)} / "
                 f"{f_num(med(r, 'recovery_dir_mb'), 0)} | {f_num(med(t, 'server_load_s'))} / "
                 f"{f_num(med(r, 'server_load_s'))} |")

    # ---- thread sweep
    if sweep_runs:
        L += ["", f"## Tessera thread sweep ({args.sweep_size}-byte values)", "",
              "Same measurement with shorter phases; `--aof-rewrite-threads N`.", "",
              "| Threads | Steady ops/s | Min during | Mean during | During / steady | Target ≥ 0.95 | Duration s | Peak mem / before | Written MB | Base parts | Recovery s | Recovery keys/s |",
              "|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
        for threads in args.threads:
            g = [r for r in sweep_runs if r.threads == threads]
            ratio = med(g, "comp_ratio")
            L.append(f"| {threads} | {f_ops(med(g, 'steady_ops'))} | {f_ops(med(g, 'comp_min_ops'))} "
                     f"| {f_ops(med(g, 'comp_mean_ops'))} | {f_num(ratio)} "
                     f"| {verdict(None if ratio is None else ratio >= TARGET_THROUGHPUT)} "
                     f"| {f_num(med(g, 'comp_s'))} | {f_num(med(g, 'mem_peak_ratio'))} "
                     f"| {f_num(med(g, 'comp_written_mb'), 0)} | {f_num(med(g, 'base_parts'), 0)} "
                     f"| {f_num(med(g, 'recovery_s'))} | {f_ops(med(g, 'recovery_kps'))} |")

    # ---- charts
    L += ["", "## Charts", ""]
    if charts.get("skipped"):
        L.append(f"Charts skipped: {charts['skipped']}")
    else:
        L.append("First repetition of each run; t = 0 is BGREWRITEAOF; shaded = compaction in progress.")
        L.append("")
        for title, path in charts.get("files", []):
            rel = os.path.relpath(path, report_dir)
            L.append(f"![{title}]({rel})")
            L.append("")

    # ---- per run
    L += ["## Runs", "",
          "In run order. Time series: the CSV files next to this report.", "",
          "| # | Run | Steady ops/s | During / steady | Compaction s | Peak mem / before | Recovery s | Keys at BGREWRITEAOF | Preload s | Sampler CPU % | PSS every s | Status | CSV |",
          "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for i, r in enumerate(ctx["order"], 1):
        csv_name = os.path.relpath(r.csv_path, report_dir) if r.csv_path else "-"
        status_text = r.error or r.m.get("rewrite_status", "?")
        L.append(f"| {i} | {r.label} | {f_ops(r.m.get('steady_ops'))} | {f_num(r.m.get('comp_ratio'))} "
                 f"| {f_num(r.m.get('comp_s'))} | {f_num(r.m.get('mem_peak_ratio'))} | {f_num(r.m.get('recovery_s'))} "
                 f"| {f_ops(r.m.get('keys_before'))} | {f_num(r.m.get('preload_s'), 1)} "
                 f"| {f_num(r.m.get('sampler_cpu_pct'), 1)} | {f_num(r.m.get('pss_every_s'))} "
                 f"| {status_text} | {csv_name} |")
    L += ["", "Notes:", "",
          "- Values: " + ("redis-benchmark `-t set` writes one value to every key: a pseudo-random string of "
                         "printable characters generated once at start-up (so LZF cannot shrink it much, "
                         "but every key holds the same bytes); only the key is random."
                         if args.values == "fixed" else
                         "a custom `SET key:__rand_int__ val:__rand_int__...` whose value is made of "
                         "`__rand_int__` placeholders; redis-benchmark fills each with its own 12-digit "
                         "zero-padded random number below 1,000,000 per request, so every value is "
                         "distinct (digit strings, half of them zeros, which LZF shrinks somewhat in both "
                         "servers' snapshots)."),
          "- The sampler reads a few /proc files and pipelines INFO stats, INFO persistence and DBSIZE "
          "on one connection per sample; its CPU share is in the table above (it competes with the "
          "server and redis-benchmark for the CPUs). Its INFO/DBSIZE calls count in "
          "total_commands_processed (3 per sample, negligible).",
          "- The compaction's end is seen with the sampling resolution, so short compactions "
          "(100-byte values) carry a relative error of up to one interval.",
          ]
    return "\n".join(L) + "\n"


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.replace(" ", "").split(",") if x]


def parse_args():
    p = argparse.ArgumentParser(description="BGREWRITEAOF under a redis-benchmark SET load: "
                                "throughput, memory, disk writes and recovery, Tessera vs Redis.")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: preload 300k, short phases (numbers not meaningful)")
    p.add_argument("--sizes", type=int_list, default=None, metavar="LIST",
                   help="value sizes in bytes, comma-separated (default 100,1024,5120)")
    p.add_argument("--threads", type=int_list, default=None, metavar="LIST",
                   help="Tessera --aof-rewrite-threads values for the thread sweep "
                        "(default 1,2,4,8; '' skips the sweep)")
    p.add_argument("--sweep-size", type=int, default=1024, help="value size of the thread sweep (default 1024)")
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration; medians are reported (default 1)")
    p.add_argument("--values", choices=("fixed", "distinct"), default="fixed",
                   help="fixed: redis-benchmark -t set (one value for every key, the default); "
                        "distinct: a custom SET with a value of __rand_int__ placeholders, distinct per request")
    p.add_argument("--preload", type=int, default=None,
                   help="redis-benchmark -n of the preload (default 2000000; --quick: 300000)")
    p.add_argument("--steady", type=float, default=None, help="steady seconds before BGREWRITEAOF (default 4; quick 2)")
    p.add_argument("--tail", type=float, default=None, help="seconds sampled after the compaction (default 3; quick 1.5)")
    p.add_argument("--warmup", type=float, default=None, help="seconds of load before the steady period (default 1; quick 0.5)")
    p.add_argument("--interval", type=float, default=0.1, help="sampling interval in seconds (default 0.1)")
    p.add_argument("--pss-budget", type=float, default=0.15,
                   help="max share of one CPU spent reading smaps_rollup; PSS is read less often "
                        "than every sample when it costs more (default 0.15)")
    p.add_argument("--tessera", default=str(REPO / "target" / "release" / "tessera-server"),
                   help="tessera-server binary (default target/release/tessera-server in the repository)")
    p.add_argument("--redis", default="redis-server", help="redis-server binary (default: redis-server from PATH)")
    p.add_argument("--redis-benchmark", default="redis-benchmark", help="redis-benchmark binary (default from PATH)")
    p.add_argument("--tessera-arg", action="append", default=[], metavar="ARG",
                   help="extra tessera-server argument (repeatable; --tessera-arg=--hz --tessera-arg=100)")
    p.add_argument("--redis-arg", action="append", default=[], metavar="ARG",
                   help="extra redis-server argument (repeatable)")
    p.add_argument("--report", default=None,
                   help="Markdown report file (default bench/results/compaction.md; quick: compaction-quick.md)")
    p.add_argument("--results-dir", default=None,
                   help="directory for the CSV and PNG files (default: the report's directory)")
    p.add_argument("--tmp-base", default=None,
                   help="where the servers' temporary directories go (default: the system temp dir)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG charts")
    p.add_argument("--compaction-timeout", type=float, default=900)
    p.add_argument("--recovery-timeout", type=float, default=600)
    p.add_argument("--run-timeout", type=float, default=1800, help="seconds before a preload is abandoned")
    args = p.parse_args()
    q = args.quick
    if args.sizes is None:
        args.sizes = [100, 1024, 5120]
    if args.threads is None:
        args.threads = [1, 2, 4, 8]
    if args.preload is None:
        args.preload = 300_000 if q else 2_000_000
    if args.warmup is None:
        args.warmup = 0.5 if q else 1.0
    if args.steady is None:
        args.steady = 2.0 if q else 4.0
    if args.tail is None:
        args.tail = 1.5 if q else 3.0
    if args.report is None:
        stem = ("compaction-quick" if q else "compaction") + ("-distinct" if args.values == "distinct" else "")
        args.report = str(REPO / "bench" / "results" / f"{stem}.md")
    if args.results_dir is None:
        args.results_dir = str(Path(args.report).resolve().parent)
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    if not args.sizes and not args.threads:
        p.error("nothing to run")
    return args


def raise_interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> int:
    args = parse_args()
    for tool in (args.tessera, args.redis, args.redis_benchmark):
        if shutil.which(tool) is None:
            print(f"error: {tool} not found (build Tessera with `cargo build --release`)", file=sys.stderr)
            return 2
    if not Path("/proc/self/smaps_rollup").exists():
        print("error: needs Linux /proc (smaps_rollup)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGINT, raise_interrupt)
    signal.signal(signal.SIGTERM, raise_interrupt)
    signal.signal(signal.SIGHUP, raise_interrupt)

    started = time.monotonic()
    results = Path(args.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    Path(args.report).resolve().parent.mkdir(parents=True, exist_ok=True)
    prefix = ("compaction-quick" if args.quick else "compaction") + ("-distinct" if args.values == "distinct" else "")
    tmp_base = Path(args.tmp_base or tempfile.gettempdir())
    args.tmp_base = str(tmp_base)
    main_phases = Phases(args.warmup, args.steady, args.tail)
    sweep_phases = Phases(args.warmup, min(args.steady, 3.0), min(args.tail, 2.0))
    ctx = {
        "main": main_phases,
        "sweep": sweep_phases,
        "folds": kernel_folds_child_io(tmp_base),
        "redis_version": command_output([args.redis, "--version"]),
        "redis_benchmark_version": command_output([args.redis_benchmark, "--version"]),
        "tessera_version": command_output([args.tessera, "--version"]),
        "tessera_git": binary_git(Path(shutil.which(args.tessera))),
        "order": [],
        "load_start": os.getloadavg()[0],
    }
    servers = Servers(args)
    main_runs: list[Run] = []
    sweep_runs: list[Run] = []
    plan = []
    for rep in range(args.repeat):
        for i, size in enumerate(args.sizes):
            order = list(SERVERS) if (rep + i) % 2 == 0 else list(reversed(SERVERS))
            for name in order:
                plan.append(("main", name, size, None, rep))
        threads = args.threads if rep % 2 == 0 else list(reversed(args.threads))
        for n in threads:
            plan.append(("sweep", "tessera", args.sweep_size, n, rep))
    status = "complete"
    try:
        for k, (kind, name, size, threads, rep) in enumerate(plan, 1):
            label = f"{name} -d {size}" + (f" threads {threads}" if threads else "") + \
                    (f" rep {rep + 1}" if args.repeat > 1 else "")
            print(f"[{k}/{len(plan)}] {label} ({(time.monotonic() - started) / 60:.1f} min)", file=sys.stderr)
            run = run_once(args, servers, ctx["folds"], name, size, threads,
                           main_phases if kind == "main" else sweep_phases, rep, label)
            ctx["order"].append(run)
            (main_runs if kind == "main" else sweep_runs).append(run)
            if run.samples and run.t0 is not None:
                stem = f"{prefix}-d{size}-{name}" + (f"-t{threads}" if threads else "") + f"-r{rep + 1}"
                write_csv(run, results / f"{stem}.csv")
            if run.error is None:
                m = run.m
                print(f"  steady {f_ops(m.get('steady_ops'))} ops/s, during {f_num(m.get('comp_ratio'))}x, "
                      f"compaction {f_num(m.get('comp_s'))} s, peak mem {f_num(m.get('mem_peak_ratio'))}x, "
                      f"recovery {f_num(m.get('recovery_s'))} s ({f_ops(m.get('recovery_keys'))} keys)",
                      file=sys.stderr)
            os.sync()
    except KeyboardInterrupt:
        status = "INTERRUPTED (partial results)"
        print("\ninterrupted; stopping servers and removing temp dirs", file=sys.stderr)
    finally:
        servers.stop_all()

    charts: dict = {"files": []}
    plt = None if args.no_plots else load_pyplot()
    if args.no_plots:
        charts["skipped"] = "--no-plots."
    elif plt is None:
        charts["skipped"] = "matplotlib is not installed (`python3 -m pip install matplotlib`)."
    else:
        for size in args.sizes:
            first = {}
            for name in SERVERS:
                ok = [r for r in main_runs if r.server == name and r.size == size
                      and r.error is None and r.t0 is not None]
                if ok:
                    first[name] = ok[0]
            if first:
                po, pm = results / f"{prefix}-ops-d{size}.png", results / f"{prefix}-mem-d{size}.png"
                plot_size(plt, size, first, po, pm)
                charts["files"] += [(f"ops/s, {size}-byte values", po), (f"PSS, {size}-byte values", pm)]
        sweep_ok = []
        for n in args.threads:
            ok = [r for r in sweep_runs if r.threads == n and r.error is None and r.t0 is not None]
            if ok:
                sweep_ok.append(ok[0])
        if sweep_ok:
            ps = results / f"{prefix}-threads.png"
            plot_sweep(plt, sweep_ok, ps)
            charts["files"].append(("thread sweep", ps))

    report = render(args, ctx, main_runs, sweep_runs, charts, status, time.monotonic() - started)
    sys.stdout.write(report)
    Path(args.report).write_text(report)
    print(f"wrote {shown_path(str(Path(args.report).resolve()))} "
          f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    if status != "complete":
        return 130
    return 1 if any(r.error for r in ctx["order"]) else 0


if __name__ == "__main__":
    sys.exit(main())
