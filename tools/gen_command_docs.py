#!/usr/bin/env python3
"""Regenerates src/commands/command_docs.json, the data behind Tessera's COMMAND DOCS,
and src/acl/commands.json, Redis 7.0's command table as ACL sees it.

redis-cli (and other clients) build argument hints from COMMAND DOCS, so Tessera serves
Redis 7.0's own documentation for the commands it implements. This script asks a real
redis-server 7.0 for it and writes it out as JSON; the JSON is committed, and the server
embeds it at build time (src/commands/server.rs).

Regenerate (from the repository root, with Debian's redis-server 7.0 installed):

    python3 tools/gen_command_docs.py           # rewrites src/commands/command_docs.json
    python3 tools/gen_command_docs.py --check   # exit 1 if the committed file is stale

Run it again whenever a command is added to the table (a `command!("name", ...)` row in
src/commands/*.rs) or a container (CLIENT, CONFIG, COMMAND) gains a subcommand; for the
latter, update SUBCOMMANDS below. tests/command_docs.rs fails when a registered command has
no entry.

What it does:

1. Collects the command names Tessera registers, from the `command!("name", ...)` rows in
   src/commands/*.rs (or --commands a,b,c).
2. Starts `redis-server` on a free loopback port, persistence off, in a temporary dir.
3. Sends HELLO 3 and COMMAND DOCS over a raw socket and parses the RESP3 reply.
4. Keeps the entries for Tessera's commands, trims the subcommands of containers to the
   ones Tessera implements (SUBCOMMANDS), and adds hand-made entries for what Redis 7.0
   lacks (HAND_MADE_SUBCOMMANDS: CLIENT SETINFO is Redis 7.2; HAND_MADE_COMMANDS:
   WAITAOF is Redis 7.2).
5. Writes a JSON object {name: doc map}, sorted by name, each map in Redis's key order
   (subcommands in SUBCOMMANDS' order: Redis's own order changes from run to run).

JSON has no sets and no simple strings, so the server restores them by key, and this
script checks the rule against every reply it reads:

    * the value of a `history`, `flags` or `doc_flags` key is a set (RESP3 `~`);
    * the items of `flags` and `doc_flags` are simple strings (`+optional`);
    * every other string is a bulk string, every map a map, every array an array,
      and the only numbers are integers.

With that rule it re-encodes each entry and compares the bytes with what Redis sends for
`COMMAND DOCS <name>` (and for each kept subcommand, `COMMAND DOCS <container>|<sub>`),
in RESP2 and in RESP3, so the JSON is known to reproduce Redis's reply exactly.

The second file comes from the same redis-server: its `COMMAND` reply (every command and
subcommand Redis 7.0 has, not only Tessera's) reduced to what ACL needs, one command per
line: arity, flags, ACL categories (COMMAND INFO's 7th element, after Redis added the
implicit ones: @write for write commands, @slow for those not @fast, ...), key specs
(which arguments are keys and whether a command reads or writes each), the legacy key
positions (first, last, step; left out when all zero) and tips: all of COMMAND INFO, which
Tessera serves from it for the commands it has. ACL rules name
commands Tessera lacks too (`+@all -xadd`, an aclfile Redis wrote), and ACL GETUSER
describes a user by counting the commands of each category, so the whole table is kept.
Nothing is added for what Redis 7.0 lacks (CLIENT SETINFO): a description naming it
would not load into Redis 7.0; ACL checks CLIENT SETINFO as its container, CLIENT.

Python 3 standard library only.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUTPUT = os.path.join(REPO, "src", "commands", "command_docs.json")
DEFAULT_ACL_OUTPUT = os.path.join(REPO, "src", "acl", "commands.json")
COMMANDS_DIR = os.path.join(REPO, "src", "commands")

# The subcommands Tessera implements, per container (see the `match sub` arms of
# `client` in connection.rs, of `config` / `command_command` in server.rs and of
# `pubsub` in pubsub.rs).
SUBCOMMANDS = {
    "client": [
        "id",
        "setname",
        "getname",
        "setinfo",
        "list",
        "info",
        "tracking",
        "caching",
        "getredir",
        "trackinginfo",
        "kill",
        "pause",
        "unpause",
        "reply",
        "no-evict",
        "unblock",
        "help",
    ],
    "config": ["get", "set", "resetstat", "rewrite", "help"],
    "object": ["encoding", "freq", "idletime", "refcount", "help"],
    "command": ["count", "info", "docs", "list", "getkeys", "getkeysandflags", "help"],
    "cluster": ["addslots", "addslotsrange", "bumpepoch", "count-failure-reports",
                "countkeysinslot", "delslots", "delslotsrange", "failover", "flushslots",
                "forget", "getkeysinslot", "info", "keyslot", "links", "meet", "myid",
                "nodes", "replicas", "replicate", "reset", "saveconfig", "set-config-epoch",
                "setslot", "shards", "slaves", "slots", "help"],
    "module": ["list", "load", "loadex", "unload", "help"],
    "slowlog": ["get", "len", "reset", "help"],
    "latency": ["latest", "history", "reset", "graph", "doctor", "histogram", "help"],
    "memory": ["doctor", "malloc-stats", "purge", "stats", "usage", "help"],
    "pubsub": ["channels", "numpat", "numsub", "shardchannels", "shardnumsub", "help"],
    "script": ["load", "exists", "flush", "kill", "help"],
    "xgroup": ["create", "setid", "destroy", "createconsumer", "delconsumer", "help"],
    "xinfo": ["stream", "groups", "consumers", "help"],
    "function": ["load", "delete", "list", "flush", "dump", "restore", "stats", "kill", "help"],
    "acl": ["cat", "deluser", "dryrun", "genpass", "getuser", "list", "load", "log", "save",
            "setuser", "users", "whoami", "help"],
}

# Entries Redis 7.0 does not have, in the shape Redis replies with. CLIENT SETINFO came in
# Redis 7.2; this is 7.2's entry (src/commands/client-setinfo.json there), with the two
# attributes Tessera accepts.
HAND_MADE_SUBCOMMANDS = {
    "client|setinfo": {
        "summary": "Sets information specific to the client or connection.",
        "since": "7.2.0",
        "group": "connection",
        "complexity": "O(1)",
        "arguments": [
            {
                "name": "attr",
                "type": "oneof",
                "arguments": [
                    {"name": "libname", "type": "string", "token": "lib-name"},
                    {"name": "libver", "type": "string", "token": "lib-ver"},
                ],
            }
        ],
    },
}

# Commands Redis 7.0 does not have, in the shape Redis 7.0 replies with (no
# `display_text`): WAITAOF came in Redis 7.2; this is 7.2's entry (src/commands/waitaof.json
# there). Their COMMAND INFO is Tessera's own (src/commands/command_info.rs), and they are
# not in the ACL table, which is Redis 7.0's.
HAND_MADE_COMMANDS = {
    "waitaof": {
        "summary": "Blocks until all of the preceding write commands sent by the connection "
                   "are written to the append-only file of the master and/or replicas.",
        "since": "7.2.0",
        "group": "generic",
        "complexity": "O(1)",
        "arguments": [
            {"name": "numlocal", "type": "integer"},
            {"name": "numreplicas", "type": "integer"},
            {"name": "timeout", "type": "integer"},
        ],
    },
}

# The typing rule described in the module docstring; server.rs applies the same one.
SET_KEYS = {"history", "flags", "doc_flags"}
STATUS_SET_KEYS = {"flags", "doc_flags"}

COMMAND_ROW = re.compile(r'command!\(\s*"([^"]+)"')


def fail(message):
    sys.exit(f"gen_command_docs: {message}")


def tessera_commands():
    names = []
    # Groups may be directories of their own (src/commands/zsets/).
    for root, _dirs, files in sorted(os.walk(COMMANDS_DIR)):
        for file in sorted(files):
            if file.endswith(".rs"):
                with open(os.path.join(root, file), encoding="utf-8") as f:
                    names.extend(COMMAND_ROW.findall(f.read()))
    if not names:
        fail(f"no command!(\"name\", ...) rows found in {COMMANDS_DIR}")
    return sorted(set(n.lower() for n in names))


# --- RESP ---------------------------------------------------------------------------------


class Simple(str):
    """A RESP simple string (`+`), as opposed to a bulk string (a plain str)."""


class RespSet(list):
    """A RESP3 set (`~`)."""


class RespMap(list):
    """A RESP3 map (`%`): a list of (key, value) pairs, in the order received."""


class RespError(Exception):
    pass


class Connection:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.file = self.sock.makefile("rb")
        self.raw = bytearray()

    def close(self):
        self.file.close()
        self.sock.close()

    def _line(self):
        line = self.file.readline()
        if not line.endswith(b"\r\n"):
            raise RespError("connection closed mid-reply")
        self.raw += line
        return line[:-2]

    def _exact(self, n):
        data = self.file.read(n + 2)
        if len(data) != n + 2:
            raise RespError("connection closed mid-reply")
        self.raw += data
        return data[:-2]

    def read(self):
        line = self._line()
        kind, rest = line[:1], line[1:].decode()
        if kind == b"+":
            return Simple(rest)
        if kind == b"-":
            return RespError(rest)
        if kind == b":":
            return int(rest)
        if kind in (b"$", b"="):
            n = int(rest)
            return None if n < 0 else self._exact(n).decode("utf-8")
        if kind == b"_":
            return None
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None
            items = [self.read() for _ in range(n)]
            return RespSet(items) if kind == b"~" else items
        if kind == b"%":
            return RespMap((self.read(), self.read()) for _ in range(int(rest)))
        raise RespError(f"unexpected RESP type {line[:20]!r}")

    def call(self, *args):
        """Sends a command; returns (parsed reply, the reply's exact bytes)."""
        out = bytearray(b"*%d\r\n" % len(args))
        for arg in args:
            arg = arg.encode() if isinstance(arg, str) else arg
            out += b"$%d\r\n%s\r\n" % (len(arg), arg)
        self.sock.sendall(out)
        self.raw = bytearray()
        reply = self.read()
        if isinstance(reply, RespError):
            raise reply
        return reply, bytes(self.raw)


def to_json(value, key=None, status=False, path="$"):
    """Converts a parsed reply to JSON values, checking the typing rule."""
    if isinstance(value, RespMap):
        out = {}
        for k, v in value:
            if type(k) is not str:
                fail(f"{path}: map key {k!r} is not a bulk string")
            out[k] = to_json(v, key=k, path=f"{path}.{k}")
        return out
    if isinstance(value, RespSet):
        if key not in SET_KEYS:
            fail(f"{path}: a set under key {key!r}; add the key to SET_KEYS (and server.rs)")
        return [
            to_json(v, status=key in STATUS_SET_KEYS, path=f"{path}[{i}]")
            for i, v in enumerate(value)
        ]
    if isinstance(value, list):
        if key in SET_KEYS:
            fail(f"{path}: an array under key {key!r}, which the rule makes a set")
        return [to_json(v, path=f"{path}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Simple):
        if not status:
            fail(f"{path}: simple string {value!r} outside a flags set")
        return str(value)
    if isinstance(value, str):
        if status:
            fail(f"{path}: bulk string {value!r} inside a flags set")
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    fail(f"{path}: unsupported value {value!r}")


def encode(value, resp3, key=None, status=False):
    """Encodes JSON values as Tessera's COMMAND DOCS does (the inverse of to_json)."""
    if isinstance(value, dict):
        out = bytearray(b"%%%d\r\n" % len(value) if resp3 else b"*%d\r\n" % (2 * len(value)))
        for k, v in value.items():
            out += encode(k, resp3) + encode(v, resp3, key=k)
        return bytes(out)
    if isinstance(value, list):
        is_set = key in SET_KEYS
        head = b"~" if is_set and resp3 else b"*"
        out = bytearray(head + b"%d\r\n" % len(value))
        for v in value:
            out += encode(v, resp3, status=key in STATUS_SET_KEYS)
        return bytes(out)
    if isinstance(value, str):
        if status:
            return b"+" + value.encode() + b"\r\n"
        data = value.encode()
        return b"$%d\r\n%s\r\n" % (len(data), data)
    if isinstance(value, int):
        return b":%d\r\n" % value
    raise TypeError(value)


# --- redis-server -------------------------------------------------------------------------


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(binary, workdir):
    for _ in range(10):
        port = free_port()
        proc = subprocess.Popen(
            [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", workdir, "--daemonize", "no",
             "--logfile", os.path.join(workdir, "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.time() + 10
        while time.time() < deadline and proc.poll() is None:
            try:
                conn = Connection(port)
                try:
                    if conn.call("PING")[0] == "PONG":
                        return proc, port
                finally:
                    conn.close()
            except (OSError, RespError):
                time.sleep(0.05)
        proc.kill()
        proc.wait()
    fail(f"could not start {binary}")


# --- ACL command table --------------------------------------------------------------------


def key_spec(spec):
    """A key spec of COMMAND INFO as compact JSON: flags, begin_search, find_keys."""
    spec = dict(spec)
    begin, find = dict(spec["begin_search"]), dict(spec["find_keys"])
    begin_spec, find_spec = dict(begin["spec"]), dict(find["spec"])
    out = {}
    if "notes" in spec:
        out["notes"] = str(spec["notes"])
    out["flags"] = [str(f) for f in spec["flags"]]
    if begin["type"] == "index":
        out["begin_search"] = {"index": begin_spec["index"]}
    elif begin["type"] == "keyword":
        out["begin_search"] = {"keyword": begin_spec["keyword"],
                               "startfrom": begin_spec["startfrom"]}
    elif begin["type"] == "unknown":
        out["begin_search"] = "unknown"  # SORT's BY/GET and STORE: Redis asks its getkeys
    else:
        fail(f"unknown begin_search type {begin['type']!r}")
    if find["type"] == "range":
        out["find_keys"] = {"range": [find_spec["lastkey"], find_spec["keystep"],
                                      find_spec["limit"]]}
    elif find["type"] == "keynum":
        out["find_keys"] = {"keynum": [find_spec["keynumidx"], find_spec["firstkey"],
                                       find_spec["keystep"]]}
    elif find["type"] == "unknown":
        out["find_keys"] = "unknown"
    else:
        fail(f"unknown find_keys type {find['type']!r}")
    return out


def acl_entry(info):
    """One COMMAND reply entry (name, arity, flags, first, last, step, categories, tips,
    key specs, subcommands) as {name: entry}."""
    name, arity, flags = info[0], info[1], info[2]
    entry = {
        "arity": arity,
        "flags": [str(f) for f in flags],
        "acl_categories": [str(c) for c in info[6]],
    }
    if list(info[3:6]) != [0, 0, 0]:
        entry["key_positions"] = list(info[3:6])
    tips = [str(t) for t in info[7]]
    if tips:
        entry["tips"] = tips
    specs = [key_spec(s) for s in info[8]]
    if specs:
        entry["key_specs"] = specs
    subcommands = {}
    for sub in sorted(info[9], key=lambda s: s[0]):
        subcommands.update(acl_entry(sub))
    if subcommands:
        entry["subcommands"] = subcommands
    return {name: entry}


def build_acl_table(port):
    conn = Connection(port)
    try:
        conn.call("HELLO", "3")
        reply, _ = conn.call("COMMAND")
    finally:
        conn.close()
    table = {}
    for info in reply:
        table.update(acl_entry(info))
    return dict(sorted(table.items()))


def acl_table_text(table):
    """One command per line, so that a diff shows which command changed."""
    lines = [f"  {json.dumps(name)}: {json.dumps(entry, ensure_ascii=False)}"
             for name, entry in table.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


# --- main ---------------------------------------------------------------------------------


def build(port, names, any_version):
    conn3 = Connection(port)
    conn2 = Connection(port)
    try:
        hello, _ = conn3.call("HELLO", "3")
        version = dict(hello).get("version", "?")
        if not version.startswith("7.0.") and not any_version:
            fail(f"redis-server is {version}; Tessera serves Redis 7.0's docs "
                 "(pass --any-version to use it anyway)")

        reply, _ = conn3.call("COMMAND", "DOCS", *names)
        docs = {}
        for name, entry in reply:
            docs[name] = to_json(entry, path=name)

        for name in names:
            if name not in docs and name in HAND_MADE_COMMANDS:
                docs[name] = HAND_MADE_COMMANDS[name]
        missing = [n for n in names if n not in docs]
        if missing:
            fail(f"redis-server has no docs for {missing}; add hand-made entries")

        # Every entry must reproduce Redis's reply byte for byte, in both protocols.
        checks = [n for n in names if n not in HAND_MADE_COMMANDS]
        for container, subs in SUBCOMMANDS.items():
            if container in docs:
                checks += [f"{container}|{s}" for s in subs
                           if f"{container}|{s}" in docs[container].get("subcommands", {})]
        for name in checks:
            base, _, sub = name.partition("|")
            entry = docs[base] if not sub else docs[base]["subcommands"][name]
            for conn, resp3 in ((conn2, False), (conn3, True)):
                _, raw = conn.call("COMMAND", "DOCS", name)
                # A container's subcommands come in its dict's order, which a lookup can
                # change between two replies (a step of an incremental rehash): compare
                # in the order of this reply.
                if "subcommands" in entry:
                    def place(sub):
                        found = raw.find(f"${len(sub)}\r\n{sub}\r\n".encode())
                        return found if found >= 0 else len(raw)
                    subs = entry["subcommands"]
                    entry = dict(entry, subcommands={k: subs[k] for k in sorted(subs, key=place)})
                if encode({name: entry}, resp3) != raw:
                    fail(f"re-encoding COMMAND DOCS {name} (RESP{3 if resp3 else 2}) "
                         "does not reproduce Redis's bytes: the typing rule is incomplete")

        for name, entry in docs.items():
            subcommands = entry.get("subcommands")
            if subcommands is None:
                continue
            if name not in SUBCOMMANDS:
                fail(f"{name} has subcommands in Redis; list Tessera's in SUBCOMMANDS")
            # Redis lists subcommands in its dict's order, which changes from run to run
            # (the hash seed is random); SUBCOMMANDS' order keeps the file stable.
            kept = {}
            for sub in SUBCOMMANDS[name]:
                full = f"{name}|{sub}"
                if full in subcommands:
                    kept[full] = subcommands[full]
                elif full in HAND_MADE_SUBCOMMANDS:
                    kept[full] = HAND_MADE_SUBCOMMANDS[full]
                else:
                    fail(f"redis-server has no docs for {full}; add a hand-made entry")
            entry["subcommands"] = kept
        return {name: docs[name] for name in names}
    finally:
        conn2.close()
        conn3.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server",
                        help="redis-server 7.0 binary (default: from PATH)")
    parser.add_argument("--commands",
                        help="comma-separated command names (default: the command!() rows "
                             "in src/commands/*.rs)")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="where to write the JSON")
    parser.add_argument("--acl-output", default=DEFAULT_ACL_OUTPUT,
                        help="where to write the ACL command table")
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the output file differs")
    parser.add_argument("--any-version", action="store_true",
                        help="accept a redis-server other than 7.0")
    args = parser.parse_args()

    if args.commands:
        names = sorted(set(n.strip().lower() for n in args.commands.split(",") if n.strip()))
    else:
        names = tessera_commands()

    workdir = tempfile.mkdtemp(prefix="gen-command-docs-")
    proc = None
    try:
        proc, port = start_redis(args.redis_server, workdir)
        docs = build(port, names, args.any_version)
        acl_table = build_acl_table(port)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)

    outputs = [
        (args.output, json.dumps(docs, indent=2, ensure_ascii=False) + "\n",
         f"{len(docs)} commands"),
        (args.acl_output, acl_table_text(acl_table), f"{len(acl_table)} commands"),
    ]
    if args.check:
        stale = False
        for path, text, what in outputs:
            try:
                with open(path, encoding="utf-8") as f:
                    current = f.read()
            except FileNotFoundError:
                current = None
            if current != text:
                print(f"{path} is stale: run python3 tools/gen_command_docs.py",
                      file=sys.stderr)
                stale = True
            else:
                print(f"{path} is up to date ({what})")
        if stale:
            sys.exit(1)
        return
    for path, text, what in outputs:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {path}: {what}")


if __name__ == "__main__":
    main()
