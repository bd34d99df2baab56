"""What the job-queue scripts (job_queue.py for RQ, celery_queue.py for Celery) share: the
protocol with the harness (tests/job_queue.rs), retries across the server's restart, and
a pool of worker processes restarted when they die, as a supervisor would.

The protocol: the script prints "<name>: kill the server now" on stdout; the harness
kills the server with SIGKILL, restarts it on the same directory and port (`appendfsync
always`) and writes "restarted" on the script's stdin. The script ends with "<name>: ok"
(exit 0) or with "<name>: FAILED: ..." and diagnostics (exit 1).
"""

import ctypes
import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time

import redis

RESTARTED_LINE = "restarted"
CONNECTION_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


WATCHDOG_SECONDS = 120


class Failure(Exception):
    """A failed check; `ids` are the jobs it is about (their workers' log lines are
    printed)."""

    def __init__(self, text, ids=()):
        super().__init__(text)
        self.ids = list(ids)[:20]


class Script:
    """The script's name (the prefix of its lines) and the harness's side of the protocol."""

    def __init__(self, name):
        self.name = name
        self.kill_line = f"{name}: kill the server now"
        self.restarted = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self._read_stdin, daemon=True).start()
        # A hang says where it is: every thread's stack on stderr, then exit 1, before
        # the harness's own deadline (150 s) gives up on the script without its stderr.
        faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)

    def _read_stdin(self):
        for line in sys.stdin:
            if line.strip() == RESTARTED_LINE:
                self.restarted.set()
        self.closed.set()

    def log(self, text):
        print(f"{self.name}: {text}", flush=True)

    def ask_for_kill(self):
        print(self.kill_line, flush=True)

    def check_restart_deadline(self, kill_asked_at, limit=30):
        """Raises if the harness has not restarted the server `limit` seconds after the
        kill was asked for."""
        if self.restarted.is_set():
            return
        if self.closed.is_set():
            raise Failure("stdin closed before the harness said the server restarted")
        if time.monotonic() - kill_asked_at > limit:
            raise Failure(f"the harness did not restart the server within {limit} s")

    def fail(self, error, pool):
        """Reports `error` with the workers' exits and logs, kills them, exits 1."""
        print(f"{self.name}: FAILED: {type(error).__name__}: {error}", flush=True)
        print(f"worker exits: {pool.exits}", flush=True)
        ids = getattr(error, "ids", [])
        if ids:
            print(f"worker log lines naming {ids}:\n{pool.log_lines_naming(ids)}", flush=True)
        print(pool.log_tails(), flush=True)
        pool.kill_all()
        sys.exit(1)

    def ok(self):
        print(f"{self.name}: ok", flush=True)


def retrying(what, deadline=15.0):
    """what(), retried on connection errors (a pooled connection from before the
    restart fails once) until `deadline` seconds have passed."""
    end = time.monotonic() + deadline
    while True:
        try:
            return what()
        except CONNECTION_ERRORS:
            if time.monotonic() > end:
                raise
            time.sleep(0.1)


def die_with_parent():
    """SIGKILL when the parent dies (PR_SET_PDEATHSIG), so that no worker outlives a
    failed or killed run. Called in a worker before exec, or in a forked pool process."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _worker_preexec():
    die_with_parent()
    # A process group of its own: the worker's own children (Celery's pool processes)
    # are stopped with it.
    os.setpgid(0, 0)


class Pool:
    """Workers as separate processes (each started by `command(name)`, a job queue's
    worker CLI), restarted when they die (as a supervisor such as systemd or supervisord
    would). `check` is called from the main thread's loops: children die with the thread
    that started them. `stop_signal` asks a worker for a warm shutdown."""

    def __init__(self, count, command, log_dir, log, stop_signal=signal.SIGTERM, env=None):
        self.count = count
        self.command = command
        self.log_dir = log_dir
        self.log = log
        self.stop_signal = stop_signal
        self.env = env
        self.workers = {}  # slot -> (name, Popen, log path)
        self.generation = 0
        self.exits = []  # (name, exit status) of every worker that died unasked
        self.restart_after = {}  # slot -> monotonic time before which not to restart

    def _spawn(self, slot):
        self.generation += 1
        # Names are unique: a queue may refuse a name a live (or not yet expired) worker has.
        name = f"w{slot}-g{self.generation}-{os.getpid()}"
        path = os.path.join(self.log_dir, f"{name}.log")
        out = open(path, "wb")
        process = subprocess.Popen(
            self.command(name),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=_worker_preexec,
            env=self.env,
        )
        out.close()
        self.workers[slot] = (name, process, path)

    def start(self):
        for slot in range(self.count):
            self._spawn(slot)

    def check(self):
        """Restarts the workers that died (after a short pause: while the server is
        down a new worker may die at once)."""
        for slot, (name, process, _) in list(self.workers.items()):
            status = process.poll()
            if status is None:
                continue
            if slot not in self.restart_after:
                self.exits.append((name, status))
                self.log(f"worker {name} exited with status {status}; restarting it")
                self.restart_after[slot] = time.monotonic() + 0.5
            elif time.monotonic() >= self.restart_after[slot]:
                del self.restart_after[slot]
                self._spawn(slot)

    def stop(self):
        """Warm shutdown (the job at hand is finished, then the worker exits); SIGKILL
        for a worker (and its process group) still there after 15 s."""
        for _, process, _ in self.workers.values():
            if process.poll() is None:
                process.send_signal(self.stop_signal)
        end = time.monotonic() + 15
        for name, process, _ in self.workers.values():
            try:
                process.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.log(f"worker {name} ignored its stop signal for 15 s; killing it")
                _kill_group(process)
        self.workers.clear()
        self.restart_after.clear()

    def kill_all(self):
        for _, process, _ in self.workers.values():
            _kill_group(process)

    def log_lines_naming(self, ids):
        out = []
        for path in sorted(os.listdir(self.log_dir)):
            with open(os.path.join(self.log_dir, path), errors="replace") as f:
                out += [f"{path}: {line}" for line in f if any(i in line for i in ids)]
        return "".join(out)

    def log_lines_with(self, mark):
        out = []
        for path in sorted(os.listdir(self.log_dir)):
            with open(os.path.join(self.log_dir, path), errors="replace") as f:
                out += [line for line in f if mark in line]
        return out

    def log_tails(self, lines=15):
        out = []
        for path in sorted(os.listdir(self.log_dir)):
            with open(os.path.join(self.log_dir, path), errors="replace") as f:
                tail = f.readlines()[-lines:]
            out.append(f"--- {path} (last {len(tail)} lines)\n" + "".join(tail))
        return "\n".join(out)


def _kill_group(process):
    """SIGKILL to the worker's process group (the worker is its leader), then reaped."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
