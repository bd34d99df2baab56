"""redis-py's client-side caching against a running server: `python3 tracking_client.py <port>`.

Run by tests/tracking.rs against a real Tessera. redis-py 5.2.1 refuses client-side
caching with servers older than 7.4 (a gate on the version HELLO reports, not on a
protocol difference: the tracking protocol is 7.0's); the gate is lifted here, and the
same script passes against Redis 7.0.15. What it checks: a cached GET is answered
without reaching the server, another client's write invalidates it (the next GET sees
the new value), the client's own write too, FLUSHALL empties the cache, and an expiry
invalidates. Exits non-zero, with a traceback, at the first failure; prints "ok" last.
"""

import logging
import sys
import time

import redis
from redis.cache import CacheConfig
from redis.connection import CacheProxyConnection

PORT = int(sys.argv[1])
# Over RESP3, redis-py logs every push frame it reads at INFO.
logging.getLogger("push_response").setLevel(logging.WARNING)
CacheProxyConnection.MIN_ALLOWED_VERSION = "7.0.0"


def commands_processed(admin):
    return int(admin.info("stats")["total_commands_processed"])


def eventually(condition, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.01)


cached = redis.Redis(
    host="127.0.0.1", port=PORT, protocol=3, cache_config=CacheConfig(), socket_timeout=10
)
other = redis.Redis(host="127.0.0.1", port=PORT, socket_timeout=10)
admin = redis.Redis(host="127.0.0.1", port=PORT, socket_timeout=10)
cache = cached.get_cache()

other.set("k", "v1")
assert cached.get("k") == b"v1"
assert cache.size == 1, cache.size

# Served from the cache: the server sees only the INFO calls around it.
before = commands_processed(admin)
for _ in range(5):
    assert cached.get("k") == b"v1"
assert commands_processed(admin) == before + 1, "a cached GET reached the server"

# Another client's write invalidates: the next GET asks the server again.
other.set("k", "v2")
eventually(lambda: cached.get("k") == b"v2", "the invalidation of k")

# The client's own write invalidates its cache too (no NOLOOP).
cached.set("k", "v3")
assert cached.get("k") == b"v3"

# A hash field and a second key, then FLUSHALL: everything cached is dropped.
other.hset("h", "f", "x")
assert cached.hget("h", "f") == b"x"
assert cached.get("k") == b"v3"
other.flushall()
eventually(lambda: cached.get("k") is None and cached.hget("h", "f") is None, "the flush")

# An expiry invalidates.
other.set("e", "soon", px=100)
assert cached.get("e") == b"soon"
eventually(lambda: cached.get("e") is None, "the expiry of e")

print("tracking client: ok")
