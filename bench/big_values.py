#!/usr/bin/env python3
"""Peak memory of a compaction over big collections being written: Tessera vs Redis.

A compaction of a dataset made of big hashes (hash tables), while clients keep adding
fields to them. Redis forks: every page a write touches is copied. Tessera captures
without fork: a big collection a capture still shares used to be copied whole by its
first write; with "serialise before write" it is serialised into the capture (RDB bytes,
smaller than the table) and changed in place. This is a benchmark, not a test: it only
measures and reports.

For each server (in one run, alternating which goes first, --repeat times):

 1. start it in a fresh temporary directory on a free loopback port, log on
   (everysec), automatic rewrites and save points off (compaction.py's settings);
 2. preload --hashes hashes `big:<i>` of --fields fields each (`f<j>` -> a distinct
   32-byte value; i and j zero-padded to 12 digits, as redis-benchmark's `__rand_int__`),
   then wait until the log is written;
 3. sample PSS (the server and its descendants: Redis's fork child counts) every
   --interval seconds; after 1 s send BGREWRITEAOF and start the writers (--spread all:
   one `redis-benchmark -c 1 -P 8 -r FIELDS HSET big:<i> f__rand_int__ <32 bytes>` per
   hash, fields overwritten all over it; --spread few: one redis-benchmark over all the
   hashes, always the same 16 fields of each) until the rewrite is done; then 1 s more;
 4. report PSS before (the last sample before BGREWRITEAOF), the peak during the
   compaction, their ratio, and the compaction's duration. Tessera's INFO
   `tessera_capture_serialised_values` / `tessera_capture_copied_values` say how its big
   values were handled.

Usage (from the repository root, after `cargo build --release`):
    python3 bench/big_values.py
    python3 bench/big_values.py --tessera-before /path/to/older/tessera-server
(--tessera-before adds a third server: another Tessera build, for before/after.)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compaction as cp  # noqa: E402  (servers, RESP client, /proc readers)


def preload(port: int, hashes: int, fields: int) -> None:
    conn = cp.Conn(port, timeout=120)
    try:
        batch = 1000
        for i in range(hashes):
            for start in range(0, fields, batch):
                # redis-benchmark's `__rand_int__` is 12 digits, zero-padded.
                args = ["HSET", f"big:{i:012}"]
                for j in range(start, min(fields, start + batch)):
                    args += [f"f{j:012}", f"{i:08}-{j:08}-{'v' * 14}"]
                conn.call(*args)
    finally:
        conn.close()


def total_pss(pid: int) -> int:
    return sum(cp.pss_bytes(p) or 0 for p in [pid, *cp.descendants(pid)])


class Sampler(threading.Thread):
    def __init__(self, pid: int, interval: float):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            self.samples.append((time.monotonic(), total_pss(self.pid)))
            time.sleep(self.interval)


def writers(args, port: int) -> list[subprocess.Popen]:
    """--spread few: one redis-benchmark whose `__rand_int__` is drawn in [0, hashes) for
    the key and the field alike: every hash written, always in the same few fields (a
    fork copies few pages). --spread all: one redis-benchmark per hash, fields drawn over
    the whole hash (a fork copies most pages)."""
    def bench(key: str, spread: int, clients: int) -> subprocess.Popen:
        return subprocess.Popen(
            [args.redis_benchmark, "-h", cp.HOST, "-p", str(port), "-c", str(clients),
             "-P", "8", "-n", "100000000", "-r", str(spread), "-q",
             "HSET", key, "f__rand_int__", "w" * 32],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if args.spread == "few":
        return [bench("big:__rand_int__", args.hashes, 8)]
    return [bench(f"big:{i:012}", args.fields, 1) for i in range(args.hashes)]


def run_once(args, servers: cp.Servers, name: str, binary: str | None) -> dict:
    if binary:
        servers.args.tessera = binary
    srv = servers.start("tessera" if name.startswith("tessera") else "redis", None)
    try:
        preload(srv.port, args.hashes, args.fields)
        time.sleep(1.5)  # everysec: the log is written and synced
        sampler = Sampler(srv.proc.pid, args.interval)
        sampler.start()
        time.sleep(1.0)
        rewrites = cp.num(cp.info_fields(srv.port, "persistence"), "aof_rewrites", 0)
        started = time.monotonic()
        cp.resp(srv.port, "BGREWRITEAOF")
        loaders = writers(args, srv.port)
        try:
            while True:
                fields = cp.info_fields(srv.port, "persistence")
                if (cp.num(fields, "aof_rewrite_in_progress") == 0
                        and cp.num(fields, "aof_rewrites", rewrites) > rewrites
                        and cp.num(fields, "aof_rewrite_scheduled", 0) == 0):
                    break
                if time.monotonic() - started > args.timeout:
                    raise RuntimeError(f"{name}: the rewrite did not finish")
                time.sleep(0.05)
            ended = time.monotonic()
        finally:
            for loader in loaders:
                cp.stop_loader(loader)
        time.sleep(1.0)
        sampler.stop.set()
        sampler.join()
        info = cp.info_fields(srv.port, "everything")
        before = [pss for t, pss in sampler.samples if t < started][-1]
        peak = max(pss for t, pss in sampler.samples if started <= t <= ended + args.interval)
        return {
            "before": before, "peak": peak, "ratio": peak / before,
            "seconds": ended - started,
            "serialised": info.get("tessera_capture_serialised_values", "-"),
            "copied": info.get("tessera_capture_copied_values", "-"),
        }
    finally:
        servers.stop(srv)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hashes", type=int, default=16)
    p.add_argument("--fields", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--spread", choices=("all", "few"), default="all",
                   help="which fields the writes overwrite (see writers())")
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--tessera", default=str(cp.REPO / "target" / "release" / "tessera-server"))
    p.add_argument("--tessera-before", default=None)
    p.add_argument("--redis", default="redis-server")
    p.add_argument("--redis-benchmark", default="redis-benchmark")
    args = p.parse_args()
    server_args = argparse.Namespace(tessera=args.tessera, redis=args.redis, tessera_arg=[],
                                     redis_arg=[], tmp_base=None)
    servers = cp.Servers(server_args)
    contenders = [("tessera", args.tessera), ("redis", None)]
    if args.tessera_before:
        contenders.append(("tessera-before", args.tessera_before))
    results: dict[str, list[dict]] = {name: [] for name, _ in contenders}
    try:
        for round_ in range(args.repeat):
            order = contenders if round_ % 2 == 0 else contenders[::-1]
            for name, binary in order:
                r = run_once(args, servers, name, binary)
                results[name].append(r)
                print(f"{name}: before {r['before'] / 2**20:.0f} MB, peak {r['peak'] / 2**20:.0f}"
                      f" MB, ratio {r['ratio']:.2f}, {r['seconds']:.1f} s, serialised "
                      f"{r['serialised']}, copied {r['copied']}", flush=True)
    finally:
        servers.stop_all()
    print(f"\n{args.hashes} hashes x {args.fields} fields, writes spread over {args.spread}; "
          f"medians of {args.repeat}:\n")
    print("| server | PSS before (MB) | peak during (MB) | peak / before | compaction (s) |")
    print("|---|---|---|---|---|")
    for name, runs in results.items():
        m = {k: statistics.median(r[k] for r in runs) for k in ("before", "peak", "ratio", "seconds")}
        print(f"| {name} | {m['before'] / 2**20:.0f} | {m['peak'] / 2**20:.0f} | "
              f"{m['ratio']:.2f} | {m['seconds']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
