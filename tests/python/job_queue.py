"""A real job queue, RQ, end to end against a running server, with the server killed -9
and restarted mid-run.

Usage: python3 job_queue.py PORT

Driven by a harness (tests/job_queue.rs) over stdin and stdout:
  - phase 1: three `rq worker` processes (the CLI, separate OS processes, RQ's forking
    Worker) on queue "squares"; jobs enqueued, processed, every result read back (one by
    a blocking wait for the result) and checked, with the key each job writes.
  - phase 2: jobs enqueued one after another; the ids whose enqueue() returned are
    the acknowledged ones. Once BEFORE_KILL are acknowledged and FINISHED_BEFORE_KILL
    finished, the script asks for the kill and goes on enqueuing (the enqueues fail
    while the server is down); the harness kills the server with SIGKILL, restarts it
    on the same directory and port (`appendfsync always`) and says so on stdin (the
    protocol of queue_harness.py). Workers that die on the lost connection are
    restarted, as a supervisor would. After the restart: every
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

import os
import sys
import tempfile
import time

try:
    import redis
    from queue_harness import CONNECTION_ERRORS, Failure, Pool, Script, retrying
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
# How RQ words the failures a crash causes (a lost connection, a work horse that died,
# an abandoned execution, a job stuck between the queue and the started registry, a
# command answered -LOADING while the restarted server loads its data: Redis too).
CRASH_FAILURES = (
    "ConnectionError",
    "BusyLoadingError",
    "Work-horse terminated unexpectedly",
    "AbandonedJobError",
    "stuck in intermediate queue",
)


def log(text):
    print(f"job_queue: {text}", flush=True)


def expected(n):
    return {"n": n, "square": n * n}


def connect(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def rq_worker(port):
    """The command line of an RQ worker (the `rq worker` CLI, RQ's forking Worker)."""
    return lambda name: [
        sys.executable,
        "-m",
        "rq.cli",
        "worker",
        "--url",
        f"redis://127.0.0.1:{port}",
        "--path",
        HERE,
        "--name",
        name,
        "--logging_level",
        "INFO",
        QUEUE,
    ]


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


def phase2(r, pool, queue, script):
    started = time.monotonic()
    acknowledged = {}  # job id -> n: enqueue() returned
    unacknowledged = 0  # enqueue() raised: the job may or may not exist
    n = 0
    kill_asked_at = None
    after_restart = 0
    recovered = False
    while after_restart < AFTER_RESTART:
        pool.check()
        if script.restarted.is_set() and not recovered:
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
        if kill_asked_at is not None:
            script.check_restart_deadline(kill_asked_at)
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
                script.ask_for_kill()
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


def main():
    port = int(sys.argv[1])
    r = connect(port)
    r.flushall()
    queue = Queue(QUEUE, connection=r)
    script = Script("job_queue")
    with tempfile.TemporaryDirectory(prefix="job-queue-logs-") as log_dir:
        pool = Pool(WORKERS, rq_worker(port), log_dir, log)
        try:
            pool.start()
            phase1(r, pool, queue)
            phase2(r, pool, queue, script)
        except Exception as e:  # noqa: BLE001 - everything is reported, then exit 1
            script.fail(e, pool)
        pool.stop()
    script.ok()


if __name__ == "__main__":
    main()
