"""redis-py's Lock (SCRIPT LOAD + EVALSHA under the hood) against a running server.

Usage: python3 lock.py PORT

Checks acquire / release / extend / reacquire, ownership, the lock's expiry, blocking
acquire with a timeout, and mutual exclusion across processes (each worker increments a
counter with a read-modify-write inside the lock; a lost update shows a broken lock).
Prints "lock: ok" and exits 0 on success; any failure raises (exit status 1).
"""

import multiprocessing
import sys
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError

WORKERS = 4
ROUNDS = 25


def client(port):
    return redis.Redis(host="127.0.0.1", port=port, decode_responses=True)


def worker(port, name):
    r = client(port)
    for _ in range(ROUNDS):
        with r.lock("lock:counter", timeout=10, blocking_timeout=30, sleep=0.001):
            value = int(r.get("counter") or 0)
            # Widen the window a broken lock would let another worker into.
            time.sleep(0.001)
            r.set("counter", value + 1)
            r.rpush("holders", name)


def main():
    port = int(sys.argv[1])
    r = client(port)
    r.flushall()

    lock = r.lock("lock:a", timeout=5)
    assert lock.acquire(blocking=False), "a free lock is acquired"
    assert lock.locked() and lock.owned()
    other = r.lock("lock:a", timeout=5)
    assert not other.acquire(blocking=False), "a held lock is not acquired again"
    assert not other.owned()
    # Extending adds to the TTL; reacquiring resets it.
    assert lock.extend(10)
    assert r.pttl("lock:a") > 10_000, r.pttl("lock:a")
    assert lock.reacquire()
    assert 4_000 < r.pttl("lock:a") <= 5_000, r.pttl("lock:a")
    assert lock.extend(3, replace_ttl=True)
    assert r.pttl("lock:a") <= 3_000
    # Only the owner may release or extend.
    try:
        other.release()
        raise AssertionError("releasing a lock one does not hold must fail")
    except LockError:
        pass
    try:
        other.extend(5)
        raise AssertionError("extending a lock one does not hold must fail")
    except LockError:
        pass
    lock.release()
    assert not lock.locked()
    try:
        lock.release()
        raise AssertionError("releasing twice must fail")
    except LockError:
        pass

    # A lock whose timeout passed is free again; its old owner can no longer extend it.
    short = r.lock("lock:b", timeout=0.2)
    assert short.acquire(blocking=False)
    time.sleep(0.4)
    taker = r.lock("lock:b", timeout=5)
    assert taker.acquire(blocking=False), "an expired lock is free"
    try:
        short.extend(1)
        raise AssertionError("extending a lock another took must fail")
    except LockNotOwnedError:
        pass
    taker.release()

    # Blocking acquire gives up after blocking_timeout.
    holder = r.lock("lock:c", timeout=5)
    assert holder.acquire()
    waiter = r.lock("lock:c", timeout=5, blocking_timeout=0.3)
    assert not waiter.acquire(), "a held lock is not acquired within blocking_timeout"
    holder.release()
    assert waiter.acquire(), "released: the waiter gets it"
    waiter.release()

    # Mutual exclusion across processes.
    processes = [
        multiprocessing.Process(target=worker, args=(port, f"w{i}"))
        for i in range(WORKERS)
    ]
    for p in processes:
        p.start()
    for p in processes:
        p.join(120)
        assert p.exitcode == 0, f"worker exit code {p.exitcode}"
    total = int(r.get("counter"))
    assert total == WORKERS * ROUNDS, f"lost updates: {total} != {WORKERS * ROUNDS}"
    assert r.llen("holders") == WORKERS * ROUNDS
    assert not r.exists("lock:counter"), "the lock is free at the end"
    # redis-py loaded its scripts once and ran them by SHA1.
    assert all(r.script_exists(lock.lua_release.sha, lock.lua_extend.sha))

    print("lock: ok")


if __name__ == "__main__":
    main()
