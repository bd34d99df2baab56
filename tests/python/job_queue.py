"""A real job queue, RQ, end to end against a running server, with the server killed -9
and restarted mid-run.

Usage: python3 job_queue.py PORT

Driven by a harness (tests/job_queue.rs) over stdin and stdout:
  - phase 1: three `rq worker` processes (the CLI, separate OS processes, RQ's forking
    Worker) on queue "squares"; jobs enqueued, processed, every result read back (one by
    a blocking wait for the result) and checked, with the key each job writes.
  - phase 2: jobs enqueued one after another; the ids whose enqueue() returned are
    the acknowledged ones. Once BEFORE_KILL are acknowledged and FINISHED_BEFORE_KILL
    finished, the script prints KILL_LINE and goes on enqueuing (the enqueues fail
    while the server is down); the harness kills the server with SIGKILL, restarts it
    on the same directory and port (`appendfsync always`) and writes RESTARTED_LINE to
    stdin. Workers that die on the
    lost connection are restarted, as a supervisor would. After the restart: every
    acknowledged job must exist; the operator's recovery runs (below); AFTER_RESTART
    more jobs are enqueued; every acknowledged job must finish with its correct result.

The recovery after the crash uses RQ's own mechanisms, not hand-edited keys. A job a
worker was executing at the kill is RQ's at-least-once problem, not a lost write: its
execution stays in StartedJobRegistry (or, taken from the queue but not yet started, in
the queue's intermediate list) with no worker left to finish it, and RQ itself would
move it to FailedJobRegistry only once its heartbeat expires (a minute and a half) or,
for the intermediate list, after a minute. An operator who knows that no worker is
running does it at once: stop the workers, clean the registries as RQ does, requeue the
jobs that failed because of the crash, start the workers again.

Prints "job_queue: ok" and exits 0 on success; on failure prints what went wrong (job
states, registries, worker exits and the tails of their logs) and exits 1.
"""

import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

try:
    import redis
    from rq import Queue, Worker
    from rq.job import Job, JobStatus
    from rq.registry import FailedJobRegistry, FinishedJobRegistry, StartedJobRegistry
except ImportError as e:
    print(
        f"job_queue: FAILED: {e}: install tests/python/requirements.txt "
        "(scripts/test does when any of them is missing)",
        flush=True,
    )
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
QUEUE = "squares"
WORKERS = 3
PHASE1_JOBS = 40
BEFORE_KILL = 60
FINISHED_BEFORE_KILL = 15
AFTER_RESTART = 30
KILL_LINE = "job_queue: kill the server now"
RESTARTED_LINE = "restarted"
# How RQ words the failures a crash causes (a lost connection, a work horse that died,
# an abandoned execution, a job stuck between the queue and the started registry).
CRASH_FAILURES = (
    "ConnectionError",
    "Work-horse terminated unexpectedly",
    "AbandonedJobError",
    "stuck in intermediate queue",
)
CONNECTION_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class Failure(Exception):
    pass


def log(text):
    print(f"job_queue: {text}", flush=True)


def expected(n):
    return {"n": n, "square": n * n}


def connect(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


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
    """In a worker, before exec: SIGKILL when the script that started it dies, so that
    no worker outlives a failed or killed run."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Pool:
    """RQ workers as separate processes (the `rq worker` CLI), restarted when they die
    (as a supervisor such as systemd or supervisord would). `check` is called from the
    main thread's loops: children die with the thread that started them."""

    def __init__(self, port, log_dir):
        self.port = port
        self.log_dir = log_dir
        self.workers = {}  # slot -> (name, Popen, log path)
        self.generation = 0
        self.exits = []  # (name, exit status) of every worker that died unasked
        self.restart_after = {}  # slot -> monotonic time before which not to restart

    def _spawn(self, slot):
        self.generation += 1
        # Names are unique: RQ refuses a name a live (or not yet expired) worker has.
        name = f"w{slot}-g{self.generation}-{os.getpid()}"
        path = os.path.join(self.log_dir, f"{name}.log")
        out = open(path, "wb")
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rq.cli",
                "worker",
                "--url",
                f"redis://127.0.0.1:{self.port}",
                "--path",
                HERE,
                "--name",
                name,
                "--logging_level",
                "INFO",
                QUEUE,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        out.close()
        self.workers[slot] = (name, process, path)

    def start(self):
        for slot in range(WORKERS):
            self._spawn(slot)

    def check(self):
        """Restarts the workers that died (after a short pause: while the server is
        down a new worker dies at once)."""
        for slot, (name, process, _) in list(self.workers.items()):
            status = process.poll()
            if status is None:
                continue
            if slot not in self.restart_after:
                self.exits.append((name, status))
                log(f"worker {name} exited with status {status}; restarting it")
                self.restart_after[slot] = time.monotonic() + 0.5
            elif time.monotonic() >= self.restart_after[slot]:
                del self.restart_after[slot]
                self._spawn(slot)

    def stop(self):
        """Warm shutdown (SIGTERM: RQ finishes the job at hand, then exits); SIGKILL
        for a worker still there after 15 s."""
        for _, process, _ in self.workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        end = time.monotonic() + 15
        for name, process, _ in self.workers.values():
            try:
                process.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                log(f"worker {name} ignored SIGTERM for 15 s; killing it")
                process.kill()
                process.wait()
        self.workers.clear()
        self.restart_after.clear()

    def kill_all(self):
        for _, process, _ in self.workers.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def log_tails(self, lines=15):
        out = []
        for path in sorted(os.listdir(self.log_dir)):
            with open(os.path.join(self.log_dir, path), errors="replace") as f:
                tail = f.readlines()[-lines:]
            out.append(f"--- {path} (last {len(tail)} lines)\n" + "".join(tail))
        return "\n".join(out)


def job_states(r, ids):
    """{id: (status or None when the job does not exist, return value)}."""
    states = {}
    for i in range(0, len(ids), 200):
        chunk = ids[i : i + 200]
        for job_id, job in zip(chunk, Job.fetch_many(chunk, connection=r)):
            if job is None:
                states[job_id] = (None, None)
                continue
            status = job.get_status(refresh=False)
            value = job.return_value() if status == JobStatus.FINISHED else None
            states[job_id] = (status, value)
    return states


def failure_reason(job):
    result = job.latest_result()
    return (result.exc_string or "") if result is not None else ""


def describe(r, queue, ids_to_n):
    """Where every job that has not finished correctly is, and the registries."""
    lines = []
    states = retrying(lambda: job_states(r, list(ids_to_n)))
    bad = [(i, s) for i, s in states.items() if s != (JobStatus.FINISHED, expected(ids_to_n[i]))]
    by_status = {}
    for _, (status, _) in bad:
        by_status[str(status)] = by_status.get(str(status), 0) + 1
    lines.append(f"{len(bad)} of {len(ids_to_n)} jobs not finished correctly: {by_status}")
    for job_id, (status, value) in bad[:20]:
        detail = f"  {job_id} (n={ids_to_n[job_id]}): status {status}, value {value!r}"
        if status == JobStatus.FAILED:
            job = Job.fetch(job_id, connection=r)
            detail += "\n    " + failure_reason(job).strip().replace("\n", "\n    ")
        lines.append(detail)
    lines.append(f"queue {queue.name}: {queue.count} queued")
    lines.append(f"intermediate list: {queue.intermediate_queue.get_job_ids()}")
    started = StartedJobRegistry(queue=queue).get_job_ids(cleanup=False)
    lines.append(f"started registry: {started}")
    lines.append(f"failed registry: {FailedJobRegistry(queue=queue).get_job_ids(cleanup=False)}")
    lines.append(f"workers registered: {[w.name for w in Worker.all(queue=queue)]}")
    return "\n".join(lines)


def wait_for_jobs(r, pool, queue, ids_to_n, timeout, what):
    """Until every job in ids_to_n has finished with its expected value; restarts dead
    workers meanwhile."""
    end = time.monotonic() + timeout
    pending = list(ids_to_n)
    while pending:
        pool.check()
        states = retrying(lambda: job_states(r, pending))
        wrong = [
            (i, states[i])
            for i in pending
            if states[i][0] == JobStatus.FINISHED and states[i][1] != expected(ids_to_n[i])
        ]
        if wrong:
            raise Failure(f"{what}: wrong results: {wrong[:10]}\n" + describe(r, queue, ids_to_n))
        pending = [i for i in pending if states[i][0] != JobStatus.FINISHED]
        if pending and time.monotonic() > end:
            raise Failure(
                f"{what}: {len(pending)} of {len(ids_to_n)} jobs unfinished after {timeout} s\n"
                + describe(r, queue, ids_to_n)
            )
        time.sleep(0.1)


def phase1(r, pool, queue):
    started = time.monotonic()
    jobs = {}
    for n in range(PHASE1_JOBS):
        job = queue.enqueue("jobs.square", n, job_id=f"p1-{n}")
        jobs[job.id] = n
    # A client waiting for one result (a blocking read of the job's results).
    first = Job.fetch("p1-0", connection=r)
    result = first.latest_result(timeout=20)
    if result is None or result.return_value != expected(0):
        raise Failure(f"phase 1: the blocking wait for p1-0's result returned {result!r}")
    wait_for_jobs(r, pool, queue, jobs, 30, "phase 1")
    for n in jobs.values():
        value = r.get(f"square:{n}")
        if value != str(n * n).encode():
            raise Failure(f"phase 1: square:{n} is {value!r}, expected {n * n}")
    log(f"phase 1: {len(jobs)} jobs done and checked in {time.monotonic() - started:.1f} s")


def requeue_crash_failures(r, queue, ids_to_n):
    """Requeues the acknowledged jobs that failed because of the crash; any other
    failure is a test failure."""
    registry = FailedJobRegistry(queue=queue)
    requeued = 0
    for job_id in registry.get_job_ids(cleanup=False):
        if job_id not in ids_to_n:
            continue
        job = Job.fetch(job_id, connection=r)
        reason = failure_reason(job)
        if not any(mark in reason for mark in CRASH_FAILURES):
            raise Failure(f"job {job_id} failed, not because of the crash:\n{reason}")
        registry.requeue(job_id)
        requeued += 1
    return requeued


def recover(r, pool, queue, ids_to_n):
    """The operator's recovery after the crash (see the module's docstring)."""
    pool.stop()
    # No worker runs now: every execution still in StartedJobRegistry is abandoned.
    # cleanup() moves the executions whose heartbeat has expired by `timestamp` to
    # FailedJobRegistry (AbandonedJobError); a time past every heartbeat takes them all.
    started = StartedJobRegistry(queue=queue)
    abandoned = started.get_job_ids(cleanup=False)
    started.cleanup(timestamp=time.time() + 24 * 3600)
    # Jobs taken from the queue whose execution never started (a job whose execution
    # started is in both, and was just handled): RQ's own clean-up of the intermediate
    # list (IntermediateQueue.cleanup) fails them the same way, after a minute's grace
    # that only matters while workers may still be starting them.
    stuck = []
    worker = Worker([queue], connection=r)
    for job_id in queue.intermediate_queue.get_job_ids():
        job = queue.fetch_job(job_id)
        if job is not None and job_id not in abandoned:
            worker.handle_job_failure(job, queue, exc_string="Job was stuck in intermediate queue.")
            stuck.append(job_id)
        queue.intermediate_queue.remove(job_id)
    requeued = requeue_crash_failures(r, queue, ids_to_n)
    log(
        f"recovery: {len(abandoned)} abandoned executions {abandoned}, "
        f"{len(stuck)} stuck in the intermediate list {stuck}, {requeued} failed jobs requeued"
    )
    pool.start()


def phase2(r, pool, queue, restarted, closed):
    started = time.monotonic()
    acknowledged = {}  # job id -> n: enqueue() returned
    unacknowledged = 0  # enqueue() raised: the job may or may not exist
    n = 0
    kill_asked_at = None
    after_restart = 0
    recovered = False
    while after_restart < AFTER_RESTART:
        pool.check()
        if restarted.is_set() and not recovered:
            # Every job acknowledged before the kill must have survived it.
            ids = list(acknowledged)
            states = retrying(lambda: job_states(r, ids))
            missing = [i for i in ids if states[i][0] is None]
            if missing:
                raise Failure(
                    f"{len(missing)} of {len(ids)} acknowledged jobs lost in the kill: "
                    f"{missing[:20]}"
                )
            log(
                f"restarted after {time.monotonic() - kill_asked_at:.1f} s: all {len(ids)} "
                f"acknowledged jobs exist ({unacknowledged} enqueues failed meanwhile)"
            )
            retrying(lambda: recover(r, pool, queue, acknowledged))
            recovered = True
        if kill_asked_at is not None and not restarted.is_set():
            if closed.is_set():
                raise Failure("stdin closed before the harness said the server restarted")
            if time.monotonic() - kill_asked_at > 30:
                raise Failure("the harness did not restart the server within 30 s")
        job_id = f"p2-{n}"
        try:
            queue.enqueue("jobs.square", n, job_id=job_id)
            acknowledged[job_id] = n
            if recovered:
                after_restart += 1
        except CONNECTION_ERRORS:
            unacknowledged += 1
            time.sleep(0.05)
        n += 1
        if kill_asked_at is None and len(acknowledged) >= BEFORE_KILL:
            # The kill lands mid-run: jobs queued, some running, some finished.
            finished = FinishedJobRegistry(queue=queue).count - PHASE1_JOBS
            if finished >= FINISHED_BEFORE_KILL:
                log(f"{len(acknowledged)} acknowledged, {queue.count} queued, {finished} finished")
                print(KILL_LINE, flush=True)
                kill_asked_at = time.monotonic()
            elif time.monotonic() - started > 30:
                raise Failure(f"phase 2: only {finished} jobs finished in 30 s")
            else:
                time.sleep(0.05)
    log(
        f"phase 2: {len(acknowledged)} jobs acknowledged, {unacknowledged} enqueues failed; "
        f"worker exits: {pool.exits}"
    )
    wait_for_jobs(r, pool, queue, acknowledged, 30, "phase 2")
    for job_id, n in acknowledged.items():
        value = r.get(f"square:{n}")
        if value != str(n * n).encode():
            raise Failure(f"phase 2: square:{n} is {value!r}, expected {n * n}")
    log(
        f"phase 2: all {len(acknowledged)} acknowledged jobs finished with correct results "
        f"in {time.monotonic() - started:.1f} s"
    )


def read_stdin(restarted, closed):
    for line in sys.stdin:
        if line.strip() == RESTARTED_LINE:
            restarted.set()
    closed.set()


def main():
    port = int(sys.argv[1])
    r = connect(port)
    r.flushall()
    queue = Queue(QUEUE, connection=r)
    restarted, closed = threading.Event(), threading.Event()
    threading.Thread(target=read_stdin, args=(restarted, closed), daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="job-queue-logs-") as log_dir:
        pool = Pool(port, log_dir)
        try:
            pool.start()
            phase1(r, pool, queue)
            phase2(r, pool, queue, restarted, closed)
        except Exception as e:  # noqa: BLE001 - everything is reported, then exit 1
            print(f"job_queue: FAILED: {type(e).__name__}: {e}", flush=True)
            print(f"worker exits: {pool.exits}", flush=True)
            print(pool.log_tails(), flush=True)
            pool.kill_all()
            sys.exit(1)
        pool.stop()
    print("job_queue: ok", flush=True)


if __name__ == "__main__":
    main()
