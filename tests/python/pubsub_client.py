"""redis-py's PubSub against a running server: `python3 pubsub_client.py <port>`.

Run by tests/pubsub.rs against a real Tessera. Exercises what applications use:
subscribe / psubscribe / ssubscribe with get_message (and its timeouts), listen(),
run_in_thread() with handlers, PING while subscribed, the introspection helpers,
keyspace notifications, and the same over RESP3. Exits non-zero, with a traceback, at
the first thing that does not work as against Redis; prints "ok" at the end.
"""

import logging
import sys
import threading
import time

import redis

PORT = int(sys.argv[1])
# Over RESP3, redis-py logs every push frame it reads at INFO.
logging.getLogger("push_response").setLevel(logging.WARNING)


def client(**options):
    return redis.Redis(host="127.0.0.1", port=PORT, socket_timeout=10, **options)


def next_message(pubsub, timeout=5.0):
    """The next message (confirmations included), or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            return message
    raise AssertionError("no message within %s s" % timeout)


def wait_until(condition, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.01)


def channels_and_patterns(protocol):
    publisher = client(protocol=protocol)
    pubsub = client(protocol=protocol).pubsub()
    pubsub.subscribe("orders")
    assert next_message(pubsub) == {
        "type": "subscribe",
        "pattern": None,
        "channel": b"orders",
        "data": 1,
    }
    pubsub.psubscribe("events.*")
    confirmation = next_message(pubsub)
    assert confirmation["type"] == "psubscribe" and confirmation["data"] == 2, confirmation
    # get_message with a timeout returns None when nothing comes.
    started = time.monotonic()
    assert pubsub.get_message(timeout=0.3) is None
    assert time.monotonic() - started >= 0.25, "get_message did not wait for its timeout"
    assert publisher.publish("orders", "first") == 1
    assert publisher.publish("events.login", b"\x00\xffbinary") == 1
    assert publisher.publish("nobody", "x") == 0
    assert next_message(pubsub) == {
        "type": "message",
        "pattern": None,
        "channel": b"orders",
        "data": b"first",
    }
    assert next_message(pubsub) == {
        "type": "pmessage",
        "pattern": b"events.*",
        "channel": b"events.login",
        "data": b"\x00\xffbinary",
    }
    # Introspection as an application sees it.
    assert publisher.pubsub_channels() == [b"orders"]
    assert publisher.pubsub_numsub("orders", "nobody") == [(b"orders", 1), (b"nobody", 0)]
    assert publisher.pubsub_numpat() == 1
    # PING while subscribed.
    pubsub.ping()
    pong = next_message(pubsub)
    assert pong["type"] == "pong", pong
    pubsub.unsubscribe("orders")
    assert next_message(pubsub)["type"] == "unsubscribe"
    pubsub.punsubscribe()
    assert next_message(pubsub)["type"] == "punsubscribe"
    assert not pubsub.subscribed
    pubsub.close()
    assert publisher.pubsub_numpat() == 0


def ignore_subscribe_messages_and_listen():
    publisher = client()
    pubsub = client().pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe("jobs")
    # The confirmation is swallowed: get_message gives None until a message comes.
    assert pubsub.get_message(timeout=0.2) is None
    wait_until(lambda: publisher.pubsub_numsub("jobs") == [(b"jobs", 1)], "the subscription")

    def produce():
        for n in range(100):
            publisher.publish("jobs", "job-%d" % n)
        publisher.publish("jobs", "stop")

    producer = threading.Thread(target=produce)
    producer.start()
    received = []
    for message in pubsub.listen():
        if message["type"] != "message":
            continue
        if message["data"] == b"stop":
            break
        received.append(message["data"])
    producer.join()
    assert received == [b"job-%d" % n for n in range(100)], received[:5]
    pubsub.close()


def run_in_thread_with_handlers():
    publisher = client()
    pubsub = client().pubsub()
    got = []
    lock = threading.Lock()

    def handler(message):
        with lock:
            got.append((message["channel"], message["data"]))

    pubsub.subscribe(**{"alerts": handler})
    pubsub.psubscribe(**{"metrics.*": handler})
    worker = pubsub.run_in_thread(sleep_time=0.01, daemon=True)
    try:
        wait_until(
            lambda: publisher.pubsub_numsub("alerts") == [(b"alerts", 1)]
            and publisher.pubsub_numpat() == 1,
            "the handlers' subscriptions",
        )
        for n in range(20):
            publisher.publish("alerts", "a%d" % n)
            publisher.publish("metrics.cpu", "m%d" % n)
        wait_until(lambda: len(got) == 40, "40 messages through the handlers")
    finally:
        worker.stop()
        worker.join(timeout=5)
    assert not worker.is_alive()
    alerts = [data for channel, data in got if channel == b"alerts"]
    metrics = [data for channel, data in got if channel == b"metrics.cpu"]
    assert alerts == [b"a%d" % n for n in range(20)]
    assert metrics == [b"m%d" % n for n in range(20)]
    pubsub.close()


def sharded_channels():
    publisher = client()
    pubsub = client().pubsub()
    pubsub.ssubscribe("shard-1")
    confirmation = next_message(pubsub)
    assert confirmation["type"] == "ssubscribe", confirmation
    assert publisher.execute_command("SPUBLISH", "shard-1", "hello") == 1
    message = next_message(pubsub)
    assert message["type"] == "smessage" and message["data"] == b"hello", message
    assert publisher.execute_command("PUBSUB", "SHARDNUMSUB", "shard-1") == [b"shard-1", 1]
    pubsub.sunsubscribe("shard-1")
    assert next_message(pubsub)["type"] == "sunsubscribe"
    pubsub.close()


def keyspace_notifications():
    admin = client()
    admin.config_set("notify-keyspace-events", "KEA")
    try:
        pubsub = client().pubsub(ignore_subscribe_messages=True)
        pubsub.psubscribe("__keyspace@0__:cart:*")
        wait_until(lambda: admin.pubsub_numpat() == 1, "the pattern subscription")
        admin.hset("cart:7", "apples", 3)
        admin.expire("cart:7", 100)
        admin.delete("cart:7")
        events = []
        while len(events) < 3:
            message = next_message(pubsub)
            if message["type"] == "pmessage":
                events.append((message["channel"], message["data"]))
        assert events == [
            (b"__keyspace@0__:cart:7", b"hset"),
            (b"__keyspace@0__:cart:7", b"expire"),
            (b"__keyspace@0__:cart:7", b"del"),
        ], events
        pubsub.close()
    finally:
        admin.config_set("notify-keyspace-events", "")


def main():
    channels_and_patterns(protocol=2)
    channels_and_patterns(protocol=3)
    ignore_subscribe_messages_and_listen()
    run_in_thread_with_handlers()
    sharded_channels()
    keyspace_notifications()
    print("ok")


if __name__ == "__main__":
    main()
