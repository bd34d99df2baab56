#!/usr/bin/env python3
"""Pub/sub subscribers for bench/scripts_pubsub.py: S connections in one process that
read their messages as fast as they can and count them.

A helper process, not a benchmark of its own. It opens --subscribers connections to
127.0.0.1:--port, sends each `SUBSCRIBE CHANNEL` (or `PSUBSCRIBE PATTERN` with
--pattern), reads the confirmations, then prints `READY` on stdout. From then on one
thread reads every connection (epoll via `selectors`, `recv` of up to 256 KB) and
counts bytes. Every message is the same frame (one channel, one fixed payload), so the
messages a connection received are its bytes ÷ the frame's length; every chunk is also
compared with the expected frame bytes at its offset (a memcmp), so a wrong or torn
message is counted as a mismatch, not as a delivery.

It stops when every connection has received --expect messages, or, once a line arrives
on stdin (the publisher is done), when nothing has arrived for --idle seconds. Then it
prints one JSON object on stdout:

    {"messages": total messages received over all connections,
     "per_conn_min": ..., "per_conn_max": ...,
     "first": monotonic time of the first byte, "last": of the last byte,
     "closed": connections the server closed, "mismatches": chunks that did not match,
     "partial": connections that stopped inside a frame}

time.monotonic() is CLOCK_MONOTONIC, shared by the processes of the machine.
Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import sys
import time

RECV = 1 << 18


def bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


def command(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args)


def frames(channel: bytes, pattern: bytes | None, payload: bytes) -> tuple[bytes, bytes]:
    """(the subscription confirmation, the frame of one message) as RESP2 sends them."""
    if pattern is None:
        return (b"*3\r\n" + bulk(b"subscribe") + bulk(channel) + b":1\r\n",
                b"*3\r\n" + bulk(b"message") + bulk(channel) + bulk(payload))
    return (b"*3\r\n" + bulk(b"psubscribe") + bulk(pattern) + b":1\r\n",
            b"*4\r\n" + bulk(b"pmessage") + bulk(pattern) + bulk(channel) + bulk(payload))


def read_exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed during the subscription")
        data += chunk
    return data


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--subscribers", type=int, required=True)
    p.add_argument("--channel", required=True)
    p.add_argument("--pattern", default=None, help="PSUBSCRIBE this pattern instead")
    p.add_argument("--payload", required=True)
    p.add_argument("--expect", type=int, required=True, help="messages per connection")
    p.add_argument("--idle", type=float, default=2.0)
    args = p.parse_args()

    channel, payload = args.channel.encode(), args.payload.encode()
    pattern = args.pattern.encode() if args.pattern is not None else None
    confirm, frame = frames(channel, pattern, payload)
    subscribe = command(b"PSUBSCRIBE", pattern) if pattern else command(b"SUBSCRIBE", channel)

    socks = []
    for _ in range(args.subscribers):
        s = socket.create_connection((args.host, args.port), timeout=10)
        s.sendall(subscribe)
        socks.append(s)
    for s in socks:
        got = read_exact(s, len(confirm))
        if got != confirm:
            print(f"unexpected confirmation {got!r}", file=sys.stderr)
            return 2
        s.setblocking(False)
    print("READY", flush=True)

    flen = len(frame)
    rep = frame * (RECV // flen + 2)
    want = args.expect * flen
    got = [0] * len(socks)
    closed = mismatches = 0
    first = last = None
    open_socks = len(socks)
    done = 0
    stdin_done_at = None

    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    sel.register(sys.stdin, selectors.EVENT_READ, -1)

    while open_socks and done < len(socks):
        events = sel.select(timeout=0.2)
        now = time.monotonic()
        if not events:
            if stdin_done_at is not None and now - max(last or 0, stdin_done_at) >= args.idle:
                break
            continue
        for key, _ in events:
            i = key.data
            if i < 0:
                os.read(sys.stdin.fileno(), 4096)
                sel.unregister(sys.stdin)
                stdin_done_at = now
                continue
            s = socks[i]
            try:
                chunk = s.recv(RECV)
            except BlockingIOError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(s)
                closed += 1
                open_socks -= 1
                continue
            if first is None:
                first = now
            last = now
            off = got[i] % flen
            if chunk != rep[off:off + len(chunk)]:
                mismatches += 1
            before = got[i]
            got[i] += len(chunk)
            if before < want <= got[i]:
                done += 1
    messages = [g // flen for g in got]
    print(json.dumps({
        "messages": sum(messages),
        "per_conn_min": min(messages), "per_conn_max": max(messages),
        "first": first, "last": last,
        "closed": closed, "mismatches": mismatches,
        "partial": sum(1 for g in got if g % flen),
    }), flush=True)
    for s in socks:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
