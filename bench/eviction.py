#!/usr/bin/env python3
"""Eviction under a skewed cache workload: tessera-server and redis-server in one run.

This is a benchmark, not a test: it only measures and reports, it never fails on a
slow or lossy result.

The workload is a cache in front of a keyspace five times larger than `maxmemory`
(values of --value-size bytes, keys `key:<n>`): each client draws key ranks from a Zipf
distribution (exponent --zipf; rank r drawn with probability proportional to 1/r^s;
ranks are scattered over the key names), GETs the key and, on a miss, SETs it
(cache-aside); a fraction --set-ratio of the operations SET without reading first. Every
value written is distinct (its key and a counter, padded to the size). --clients
connections run it, each pipelining --pipeline operations (the fills of a batch's misses
go in one more round trip). A warm-up of the same workload (not timed) fills the server
to its limit first; then the timed phase runs --ops operations in all (fills count).

The generator is compiled: `tessera-loadgen cache` (the workspace member bench/loadgen),
one thread per connection, each Zipf draw a short search of a precomputed CDF. This
script used to run the workload in Python client processes, which took about two thirds
of the machine's CPU (the servers about an eighth each): on two cores the throughput then
measured the generator and the scheduler more than the server, and the Tessera/Redis
ratio moved by ±15 % between runs. The generator prints its result lines (operations,
seconds, hits, misses, error replies, its own CPU time) and waits between the warm-up and
the timed phase until this script has taken its first readings.

For each policy (--policies, default the four LRU and LFU ones; under volatile-* every
key is SET with a long expiry), each server starts
fresh in its own temporary directory on a free loopback port, with the append-only log
on (everysec) and the same maxmemory:

    tessera-server --port P --bind 127.0.0.1 --dir D --maxmemory M --maxmemory-policy X
    redis-server   --port P --bind 127.0.0.1 --dir D --appendonly yes --save "" \\
                   --maxmemory M --maxmemory-policy X

Each case runs --repeat times per server; runs go round-robin over the policies and
alternate which server goes first, so drift on a noisy machine spreads over both. The
report gives, per policy and server, the medians of: the hit ratio of the timed phase,
the peak of INFO used_memory (sampled every 50 ms) relative to maxmemory and what
eviction left out of it then (`mem_not_counted_for_evict`: log buffers, a compaction's
capture), the peak of used_memory less what a snapshot's capture holds alone
(`tessera_capture_own_bytes`: it is in Tessera's used_memory, where a fork's
copy-on-write is not in Redis's), the peak proportional set size of the server and its
children (a fork's copy-on-write shows there), the operations per second and the
server's CPU time per operation (all threads and children: Redis's log rewrites are
forked children, Tessera's compactions threads); and the Tessera/Redis ratios of the medians. Each run's line on
stderr also says how many cores the server and the generator kept busy. On two shared
cores the generator still takes some CPU from the server (less than the server itself):
CPU per operation remains the steadier figure.

Usage:
    cargo build --release && cargo build --release -p tessera-loadgen
    python3 bench/eviction.py                        # full run, roughly 5 min
    python3 bench/eviction.py --quick --repeat 1     # smoke run, under a minute
    python3 bench/eviction.py --output bench/results/eviction.md

Stdlib only (Python 3.11).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"


# --------------------------------------------------------------------------
# RESP
# --------------------------------------------------------------------------


def encode(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


class Connection:
    """A blocking RESP connection that pipelines and reads simple replies."""

    def __init__(self, port: int):
        self.sock = socket.create_connection((HOST, port), timeout=60)
        self.file = self.sock.makefile("rb")

    def read(self):
        line = self.file.readline()
        if not line:
            raise ConnectionError("connection closed")
        kind, rest = line[:1], line[1:-2]
        if kind in (b"+", b"-"):
            return (kind, rest)
        if kind == b":":
            return int(rest)
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            return self.file.read(size + 2)[:-2]
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise ValueError(f"unexpected reply {line!r}")

    def pipeline(self, commands: list[bytes]) -> list:
        self.sock.sendall(b"".join(commands))
        return [self.read() for _ in commands]

    def call(self, *args: str):
        return self.pipeline([encode(*(a.encode() for a in args))])[0]


def info(port: int) -> dict[str, str]:
    reply = Connection(port).call("INFO", "everything")
    fields = {}
    for line in reply.decode().splitlines():
        if ":" in line and not line.startswith("#"):
            name, value = line.split(":", 1)
            fields[name] = value.strip()
    return fields


def live_children(pid: int) -> list[int]:
    """The process's children now (of every thread), however deep."""
    found = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in map(int, children):
            found.append(child)
            found.extend(live_children(child))
    return found


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far, user and system: all its threads, its children
    already reaped and those alive now (Redis's log rewrite is a forked child, whose work
    is the server's as much as Tessera's compaction threads are)."""
    def own_and_reaped(process: int, reaped: bool) -> int:
        try:
            text = Path(f"/proc/{process}/stat").read_text()
        except OSError:
            return 0  # gone since it was listed: its time is in the parent's reaped total
        fields = text.rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12])
        if reaped:
            ticks += int(fields[13]) + int(fields[14])
        return ticks

    ticks = own_and_reaped(pid, True)
    ticks += sum(own_and_reaped(child, False) for child in live_children(pid))
    return ticks / os.sysconf("SC_CLK_TCK")


def pss_bytes(pid: int) -> int:
    """The proportional set size of the process and its children (a fork's copy-on-write
    shows here, and pages the child shares with its parent are counted once)."""
    total = 0
    pids = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(c) for c in (task / "children").read_text().split()]
    except OSError:
        pass
    for one in pids:
        try:
            for line in Path(f"/proc/{one}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def loadgen_argv(args, port: int, settings: dict, seed: int) -> list[str]:
    argv = [str(args.loadgen), "cache", "--host", HOST, "--port", str(port),
            "--connections", str(settings["clients"]), "--pipeline", str(settings["pipeline"]),
            "--keys", str(settings["keys"]), "--zipf", repr(settings["zipf"]),
            "--value-size", str(settings["value_size"]),
            "--set-ratio", repr(settings["set_ratio"]),
            "--warmup-ops", str(settings["warmup_ops"]), "--ops", str(settings["ops"]),
            "--seed", str(seed), "--go-on-stdin"]
    if settings["volatile"]:
        # Under a volatile-* policy every key has a (long) expiry, or nothing could be
        # evicted.
        argv += ["--expire-seconds", "100000"]
    return argv


def parse_phase(stdout: str, name: str) -> dict[str, str]:
    """The generator's result line of one phase: `<name> ops=.. seconds=.. hits=..`."""
    for line in stdout.splitlines():
        words = line.split()
        if words and words[0] == name:
            return dict(word.split("=", 1) for word in words[1:])
    raise RuntimeError(f"tessera-loadgen printed no {name} line: {stdout!r}")


def run_load(args, port: int, pid: int, settings: dict, seed: int) -> dict:
    """Runs the warm-up, then the timed phase; returns the timed phase's hits, misses,
    ops/s, the server's CPU time per operation, and the peaks seen meanwhile: INFO
    used_memory (with what eviction did not count of it then) and the PSS of the server
    and its children."""
    gen = subprocess.Popen(loadgen_argv(args, port, settings, seed), bufsize=0,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
    # The generator says `warmed` once the warm-up is done, and waits for a line: the
    # readings below start with the timed phase.
    if gen.stdout.readline().strip() != b"warmed":
        _, err = gen.communicate()
        raise RuntimeError(f"tessera-loadgen failed in the warm-up ({gen.returncode}): "
                           f"{err.decode(errors='replace').strip()}")
    peak = {"used": 0, "not_counted": 0, "pss": 0, "used_but_capture": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                fields = info(port)
                used = int(fields["used_memory"])
                if used > peak["used"]:
                    peak["used"] = used
                    peak["not_counted"] = int(fields["mem_not_counted_for_evict"])
                # Tessera's snapshot capture is in used_memory, a fork's copy-on-write is
                # not: without it, the two servers' used_memory compare.
                capture = int(fields.get("tessera_capture_own_bytes", 0))
                peak["used_but_capture"] = max(peak["used_but_capture"], used - capture)
                peak["pss"] = max(peak["pss"], pss_bytes(pid))
            except (OSError, KeyError, ValueError):
                pass
            stop.wait(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    cpu_before = cpu_seconds(pid)
    began = time.perf_counter()
    try:
        out, err = gen.communicate(b"go\n")
    finally:
        elapsed = time.perf_counter() - began
        cpu = cpu_seconds(pid) - cpu_before
        stop.set()
        sampler.join()
    if gen.returncode != 0:
        raise RuntimeError(f"tessera-loadgen exited {gen.returncode}: "
                           f"{err.decode(errors='replace').strip()}")
    timed = parse_phase(out.decode(), "timed")
    done, seconds = int(timed["ops"]), float(timed["seconds"])
    hits, misses = int(timed["hits"]), int(timed["misses"])
    gen_cpu = float(timed["cpu_seconds"]) if timed["cpu_seconds"] != "-" else float("nan")
    return {
        "hit_ratio": hits / max(1, hits + misses),
        # The generator's own clock: from the timed phase's start to its last reply.
        "ops_per_sec": done / seconds,
        "cpu_us_per_op": cpu * 1e6 / max(1, done),
        "peak_used": peak["used"],
        "peak_not_counted": peak["not_counted"],
        "peak_pss": peak["pss"],
        "peak_used_but_capture": peak["used_but_capture"],
        "errors": int(timed["errors"]),
        # Cores busy on average during the timed phase (1.0 = one core all the time).
        "server_cores": cpu / elapsed,
        "generator_cores": gen_cpu / seconds,
    }


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------


def free_port() -> int:
    for _ in range(100):
        with socket.socket() as s:
            s.bind((HOST, 0))
            port = s.getsockname()[1]
        if port != 6379:
            return port
    raise RuntimeError("no free port")


def start_server(args, name: str, policy: str) -> tuple[subprocess.Popen, int, Path]:
    directory = Path(tempfile.mkdtemp(prefix=f"bench-evict-{name}-"))
    port = free_port()
    common = ["--port", str(port), "--bind", HOST, "--dir", str(directory),
              "--maxmemory", str(args.maxmemory_mb * 1024 * 1024),
              "--maxmemory-policy", policy]
    if name == "tessera":
        argv = [str(args.tessera_bin)] + common
    else:
        argv = [args.redis_server] + common + ["--appendonly", "yes", "--save", ""]
    log = open(directory / "server.log", "wb")
    proc = subprocess.Popen(argv, cwd=directory, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if Connection(port).call("PING") == (b"+", b"PONG"):
                return proc, port, directory
        except OSError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{name} did not start")


def stop_server(proc: subprocess.Popen, port: int, directory: Path) -> None:
    try:
        Connection(port).call("SHUTDOWN", "NOSAVE")
    except (OSError, ConnectionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    shutil.rmtree(directory, ignore_errors=True)


def one_run(args, name: str, policy: str, settings: dict, seed: int) -> dict:
    proc, port, directory = start_server(args, name, policy)
    settings = dict(settings, volatile=policy.startswith("volatile"))
    try:
        outcome = run_load(args, port, proc.pid, settings, seed)
        fields = info(port)
        outcome["evicted_keys"] = int(fields.get("evicted_keys", 0))
        return outcome
    finally:
        stop_server(proc, port, directory)


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tessera-bin", type=Path, default=REPO / "target/release/tessera-server")
    parser.add_argument("--loadgen", type=Path, default=REPO / "target/release/tessera-loadgen",
                        help="the generator (cargo build --release -p tessera-loadgen)")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--policies",
                        default="allkeys-lru,allkeys-lfu,volatile-lru,volatile-lfu")
    parser.add_argument("--maxmemory-mb", type=int, default=32)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--keyspace-factor", type=float, default=5.0,
                        help="keys x value size / maxmemory")
    parser.add_argument("--zipf", type=float, default=0.99)
    parser.add_argument("--set-ratio", type=float, default=0.1)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--pipeline", type=int, default=32)
    parser.add_argument("--ops", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: few operations")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    if not args.tessera_bin.exists():
        print(f"{args.tessera_bin} not found: cargo build --release", file=sys.stderr)
        return 2
    if not args.loadgen.exists():
        print(f"{args.loadgen} not found: cargo build --release -p tessera-loadgen",
              file=sys.stderr)
        return 2
    keys = int(args.keyspace_factor * args.maxmemory_mb * 1024 * 1024 / args.value_size)
    ops = 100_000 if args.quick else args.ops
    settings = {
        "keys": keys, "zipf": args.zipf, "value_size": args.value_size,
        "set_ratio": args.set_ratio, "clients": args.clients, "pipeline": args.pipeline,
        "ops": ops, "warmup_ops": ops // 2,
    }
    policies = args.policies.split(",")
    runs: dict[tuple[str, str], list[dict]] = {}
    for repetition in range(args.repeat):
        for policy in policies:
            order = ["tessera", "redis"] if repetition % 2 == 0 else ["redis", "tessera"]
            for name in order:
                outcome = one_run(args, name, policy, settings, seed=repetition * 10)
                runs.setdefault((policy, name), []).append(outcome)
                print(f"{policy} {name} run {repetition + 1}: hit ratio "
                      f"{outcome['hit_ratio']:.3f}, peak {outcome['peak_used'] / 1048576:.1f} MB, "
                      f"({outcome['peak_not_counted'] / 1048576:.1f} not counted), PSS "
                      f"{outcome['peak_pss'] / 1048576:.1f} MB, {outcome['ops_per_sec']:.0f} ops/s, "
                      f"{outcome['cpu_us_per_op']:.2f} CPU us/op; cores busy: server "
                      f"{outcome['server_cores']:.2f}, generator {outcome['generator_cores']:.2f}"
                      + (f"; {outcome['errors']} error replies" if outcome["errors"] else ""),
                      file=sys.stderr)
    limit = args.maxmemory_mb * 1024 * 1024
    lines = [
        f"# Eviction: Zipf({args.zipf}) cache workload, Tessera vs Redis",
        "",
        f"{dt.date.today()}, {platform.machine()}, {os.cpu_count()} CPUs; maxmemory "
        f"{args.maxmemory_mb} MB, {keys} keys of {args.value_size} bytes "
        f"({args.keyspace_factor}x), {args.clients} clients x pipeline {args.pipeline} "
        f"(tessera-loadgen cache), "
        f"{ops} timed operations after {ops // 2} of warm-up, {args.set_ratio:.0%} blind SETs; "
        f"medians of {args.repeat} runs.",
        "",
        "| policy | server | hit ratio | peak used_memory / maxmemory | not counted then, MB "
        "| peak used_memory without a capture / maxmemory | peak PSS, MB | ops/s | CPU µs/op "
        "| evicted keys |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    medians = {}
    for (policy, name), outcomes in sorted(runs.items()):
        median = {k: statistics.median(o[k] for o in outcomes) for k in outcomes[0]}
        medians[(policy, name)] = median
        lines.append(f"| {policy} | {name} | {median['hit_ratio']:.3f} | "
                     f"{median['peak_used'] / limit:.3f} | "
                     f"{median['peak_not_counted'] / 1048576:.1f} | "
                     f"{median['peak_used_but_capture'] / limit:.3f} | {median['peak_pss'] / 1048576:.1f} | "
                     f"{median['ops_per_sec']:.0f} | {median['cpu_us_per_op']:.2f} | "
                     f"{median['evicted_keys']:.0f} |")
    lines += ["", "| policy | hit ratio T/R | peak used_memory T/R | without a capture T/R "
              "| peak PSS T/R | throughput T/R | CPU per op T/R |", "|---|---|---|---|---|---|---|"]
    for policy in policies:
        t, r = medians[(policy, "tessera")], medians[(policy, "redis")]
        lines.append(f"| {policy} | {t['hit_ratio'] / r['hit_ratio']:.2f} | "
                     f"{t['peak_used'] / r['peak_used']:.2f} | "
                     f"{t['peak_used_but_capture'] / r['peak_used_but_capture']:.2f} | "
                     f"{t['peak_pss'] / r['peak_pss']:.2f} | "
                     f"{t['ops_per_sec'] / r['ops_per_sec']:.2f} | "
                     f"{t['cpu_us_per_op'] / r['cpu_us_per_op']:.2f} |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.output:
        args.output.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
