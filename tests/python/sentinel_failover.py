"""A redis-py client behind Sentinel, through a failover: writes acknowledged with WAIT,
the master killed -9, the client carried over to the promoted replica by Sentinel.

Usage: python3 sentinel_failover.py SENTINEL_PORT[,SENTINEL_PORT...] MASTER_NAME

Driven by a harness (tests/sentinel.rs) over stdout:
  - the client is redis-py's `Sentinel(...).master_for(MASTER_NAME)`: it asks the
    sentinels for the master's address on each new connection, and drops its
    connections when a write is refused with -READONLY (a master turned replica).
  - each write is one `SET w:<n> <n>` and `RPUSH log <n>`, then `WAIT 1 <timeout>`; a
    write is acknowledged only when WAIT answers at least 1 (one replica has it). Writes
    that fail (the master is gone, no master yet, a replica's -READONLY) or whose WAIT
    answers 0 are not acknowledged, and the next write tries again with a new number.
  - once BEFORE_KILL writes are acknowledged the script prints
    "sentinel_failover: kill the master now" and goes on writing; the harness kills the
    master with SIGKILL. The sentinels promote a replica; the script goes on until the
    sentinels name another master and AFTER_FAILOVER writes were acknowledged there.
  - then every acknowledged write must be on the new master: `w:<n>` holds n and `log`
    holds n, in the order written.

Prints "sentinel_failover: new master HOST:PORT", a summary, and "sentinel_failover: ok"
(exit 0) on success; on failure prints what is missing and exits 1.
"""

import sys
import time

try:
    import redis
    from redis.sentinel import Sentinel
except ImportError as e:
    print(
        f"sentinel_failover: FAILED: {e}: install tests/python/requirements.txt "
        "(scripts/test does when it is missing)",
        flush=True,
    )
    sys.exit(1)

BEFORE_KILL = 300
AFTER_FAILOVER = 200
WAIT_TIMEOUT_MS = 1000
# The whole run; the harness's deadline is longer.
DEADLINE_SECONDS = 90
NAME = "sentinel_failover"


def say(text):
    print(f"{NAME}: {text}", flush=True)


def fail(text):
    say(f"FAILED: {text}")
    sys.exit(1)


def main():
    ports = [int(p) for p in sys.argv[1].split(",")]
    service = sys.argv[2]
    sentinel = Sentinel(
        [("127.0.0.1", port) for port in ports],
        socket_timeout=2.0,
        sentinel_kwargs={"socket_timeout": 2.0},
    )
    client = sentinel.master_for(
        service, socket_timeout=2.0, socket_connect_timeout=2.0, decode_responses=True
    )
    first_master = sentinel.discover_master(service)
    say(f"first master {first_master[0]}:{first_master[1]}")

    started = time.monotonic()
    acknowledged = []
    # How many replicas WAIT counted, per acknowledged write.
    acknowledged_by = {}
    not_acknowledged = 0
    errors = {}
    kill_asked = False
    new_master = None
    acknowledged_on_new_master = 0
    number = 0
    while True:
        if time.monotonic() - started > DEADLINE_SECONDS:
            fail(
                f"no failover seen in {DEADLINE_SECONDS} s: {len(acknowledged)} "
                f"acknowledged, errors {errors}, master {sentinel.discover_master(service)}"
            )
        number += 1
        try:
            pipe = client.pipeline(transaction=False)
            pipe.set(f"w:{number}", number)
            pipe.rpush("log", number)
            pipe.execute()
            replicas = client.execute_command("WAIT", 1, WAIT_TIMEOUT_MS)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                redis.exceptions.ReadOnlyError, redis.exceptions.ResponseError) as e:
            # ConnectionError covers MasterNotFoundError (no master known yet).
            kind = type(e).__name__
            errors[kind] = errors.get(kind, 0) + 1
            not_acknowledged += 1
            time.sleep(0.05)
            continue
        if replicas < 1:
            not_acknowledged += 1
            continue
        acknowledged.append(number)
        acknowledged_by[number] = replicas
        if not kill_asked and len(acknowledged) >= BEFORE_KILL:
            say("kill the master now")
            kill_asked = True
        if kill_asked:
            if new_master is None:
                try:
                    address = sentinel.discover_master(service)
                except redis.exceptions.ConnectionError:
                    address = first_master
                if address != first_master:
                    new_master = address
            else:
                acknowledged_on_new_master += 1
                if acknowledged_on_new_master >= AFTER_FAILOVER:
                    break

    say(f"new master {new_master[0]}:{new_master[1]}")
    say(
        f"{len(acknowledged)} writes acknowledged, {not_acknowledged} not "
        f"(errors {errors}), in {time.monotonic() - started:.1f} s"
    )
    check = redis.Redis(host=new_master[0], port=new_master[1], decode_responses=True)
    log = [int(n) for n in check.lrange("log", 0, -1)]
    positions = {n: i for i, n in enumerate(log)}
    missing = []
    for n in acknowledged:
        if check.get(f"w:{n}") != str(n) or n not in positions:
            missing.append(n)
    if missing:
        counts = sorted({acknowledged_by[n] for n in missing})
        fail(
            f"{len(missing)} acknowledged writes missing on the new master: {missing[:20]} "
            f"(WAIT counted {counts} replicas for them)"
        )
    order = [positions[n] for n in acknowledged]
    if order != sorted(order):
        fail("the log holds the acknowledged writes out of order")
    say("ok")


if __name__ == "__main__":
    main()
