#!/usr/bin/env python3
"""Memory after loading the same dataset into Tessera and Redis 7.0, side by side.

A benchmark, not a test: it measures and reports, it never fails on a result.

Datasets (the issue's; sizes scale with --scale):
    strings  1,000,000 keys `key:%07d`, distinct random 100-byte values (--value-size)
    hashes   1,000,000 hashes of 10 fields (f0..f9), distinct random 10-20 byte values
    lists      100,000 lists of 100 distinct random ~10-byte elements
    zsets      100,000 sorted sets of 50 members (random ~10-byte members, random scores)
    hll        100,000 HyperLogLogs of 100 distinct random elements (sparse)
    hll-dense    2,000 HyperLogLogs of 3,000 distinct random elements (dense)
    streams        100 streams of 10,000 entries (three fields, distinct values)

For each dataset and repeat, each server starts fresh in its own temporary directory
with persistence on as users run it (Tessera: its defaults, append-only log on; Redis:
`--appendonly yes --save ""`), gets the same pipelined command bytes (seeded RNG), waits
until idle, and reports INFO `used_memory` and the process RSS and PSS. Repeats alternate
which server goes first; the table shows medians and the Tessera/Redis ratios.

Usage:
    python3 bench/memory.py                           # everything, about 5-10 minutes
    python3 bench/memory.py --scale 0.05 --repeat 1   # a quick smoke run
    python3 bench/memory.py --datasets strings,hashes --repeat 3 --json out.json

Reuses bench/compaction.py's server handling (start, stop, RESP client, /proc readers).
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compaction as common  # noqa: E402

BATCH = 2000  # commands per pipelined write


def encode(args: list[bytes]) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


def rand_text(rng: random.Random, lo: int, hi: int) -> bytes:
    n = rng.randint(lo, hi)
    return rng.randbytes((n + 1) // 2).hex().encode()[:n]


def commands(dataset: str, scale: float, value_size: int, seed: int):
    """Yields the load, one command (list of bytes) at a time, deterministically."""
    rng = random.Random(seed)
    if dataset == "strings":
        for i in range(int(1_000_000 * scale)):
            yield [b"SET", b"key:%07d" % i, rand_text(rng, value_size, value_size)]
    elif dataset == "hashes":
        for i in range(int(1_000_000 * scale)):
            args = [b"HSET", b"hash:%07d" % i]
            for f in range(10):
                args += [b"f%d" % f, rand_text(rng, 10, 20)]
            yield args
    elif dataset == "lists":
        for i in range(int(100_000 * scale)):
            for _ in range(2):  # 2 x 50 elements
                yield [b"RPUSH", b"list:%06d" % i] + [rand_text(rng, 8, 12) for _ in range(50)]
    elif dataset == "zsets":
        for i in range(int(100_000 * scale)):
            args = [b"ZADD", b"zset:%06d" % i]
            for m in range(50):
                args += [b"%.6f" % rng.uniform(0, 1000), rand_text(rng, 8, 12) + b"%d" % m]
            yield args
    elif dataset == "hll":
        for i in range(int(100_000 * scale)):
            yield [b"PFADD", b"hll:%06d" % i] + [rand_text(rng, 8, 12) for _ in range(100)]
    elif dataset == "hll-dense":
        for i in range(int(2_000 * scale)):
            for _ in range(6):  # 6 x 500 elements: dense past hll-sparse-max-bytes
                yield [b"PFADD", b"hlld:%05d" % i] + [rand_text(rng, 8, 12) for _ in range(500)]
    elif dataset == "streams":
        # An event log: 100 streams of 10,000 entries with the same three fields, IDs
        # given (so both servers hold the same IDs), values distinct.
        streams = max(1, int(100 * scale))
        for n in range(10_000):
            for i in range(streams):
                yield [b"XADD", b"stream:%03d" % i, b"%d-%d" % (1_700_000_000_000 + n, i),
                       b"user", b"%d" % rng.randint(0, 10**9), b"action", rand_text(rng, 8, 16),
                       b"ts", b"%d" % (1_700_000_000_000 + n)]
    else:
        raise ValueError(dataset)


def load(port: int, dataset: str, scale: float, value_size: int, seed: int) -> int:
    """Sends the dataset pipelined; returns the number of error replies."""
    conn = common.Conn(port, timeout=120.0)
    errors = 0
    batch = []
    try:
        for cmd in commands(dataset, scale, value_size, seed):
            batch.append(cmd)
            if len(batch) == BATCH:
                conn.sock.sendall(b"".join(encode(c) for c in batch))
                errors += sum(isinstance(common._read_reply(conn.f), common.RespError)
                              for _ in batch)
                batch.clear()
        if batch:
            conn.sock.sendall(b"".join(encode(c) for c in batch))
            errors += sum(isinstance(common._read_reply(conn.f), common.RespError)
                          for _ in batch)
    finally:
        conn.close()
    return errors


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def wait_idle(port: int) -> None:
    """Until no rewrite runs and nothing waits for the log (and a moment to settle)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        p = common.info_fields(port, "persistence")
        busy = p.get("aof_rewrite_in_progress") == "1" or p.get("aof_rewrite_scheduled") == "1"
        if not busy:
            break
        time.sleep(0.2)
    time.sleep(2)


def measure(servers, name: str, args, dataset: str) -> dict:
    srv = servers.start(name, None)
    try:
        started = time.monotonic()
        errors = load(srv.port, dataset, args.scale, args.value_size, args.seed)
        seconds = time.monotonic() - started
        if errors:
            return {"supported": False, "errors": errors}
        wait_idle(srv.port)
        memory = common.info_fields(srv.port, "memory")
        keys = common.info_fields(srv.port, "keyspace")
        return {
            "supported": True,
            "used_memory": int(memory["used_memory"]),
            "rss": rss_bytes(srv.proc.pid),
            "pss": common.pss_bytes(srv.proc.pid),
            "load_seconds": round(seconds, 2),
            "keyspace": keys.get("db0", ""),
        }
    finally:
        servers.stop(srv)


def mb(v) -> str:
    return "—" if v is None else f"{v / 1e6:,.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="strings,hashes,lists,zsets,hll,hll-dense,streams")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--tessera", type=Path, default=common.REPO / "target/release/tessera-server")
    parser.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--tessera-arg", action="append", default=[])
    parser.add_argument("--redis-arg", action="append", default=[])
    parser.add_argument("--tmp-base", default=None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not args.tessera.exists():
        print(f"{args.tessera} not found: run cargo build --release first", file=sys.stderr)
        return 2
    command = "python3 bench/memory.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    meta = {
        "command": command,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "tessera_git": common.binary_git(args.tessera),
        "tessera_version": common.command_output([str(args.tessera), "--version"]),
        "redis_version": common.command_output([args.redis, "--version"]),
    }
    for key, value in meta.items():
        print(f"{key}: {value}")
    servers = common.Servers(args)
    results: dict[str, dict[str, list[dict]]] = {}
    try:
        for rep in range(args.repeat):
            order = ["tessera", "redis"] if rep % 2 == 0 else ["redis", "tessera"]
            for dataset in args.datasets.split(","):
                for name in order:
                    r = measure(servers, name, args, dataset)
                    results.setdefault(dataset, {}).setdefault(name, []).append(r)
                    print(f"  {dataset:8} {name:8} run {rep + 1}: {r}", flush=True)
    finally:
        servers.stop_all()

    def median(runs, key):
        values = [r[key] for r in runs if r.get("supported") and r.get(key) is not None]
        return statistics.median(values) if values else None

    print()
    print("| dataset | Tessera used_memory MB | Redis used_memory MB | ratio | "
          "Tessera RSS MB | Redis RSS MB | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for dataset, by_server in results.items():
        t, r = by_server.get("tessera", []), by_server.get("redis", [])
        if not all(x.get("supported") for x in t):
            print(f"| {dataset} | not supported | | | | | |")
            continue
        tu, ru = median(t, "used_memory"), median(r, "used_memory")
        tr, rr = median(t, "rss"), median(r, "rss")
        ratio_u = f"{tu / ru:.2f}" if tu and ru else "—"
        ratio_r = f"{tr / rr:.2f}" if tr and rr else "—"
        print(f"| {dataset} | {mb(tu)} | {mb(ru)} | **{ratio_u}** | {mb(tr)} | {mb(rr)} | {ratio_r} |")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
