"""A real job queue, Celery (Redis broker and Redis result backend), end to end against
a running server, with the server killed -9 and restarted mid-run.

Usage: python3 celery_queue.py PORT

Driven by a harness (tests/job_queue.rs) over stdin and stdout, with the protocol of
queue_harness.py:
  - phase 1: WORKERS `celery worker` processes (the CLI, separate OS processes, each a
    prefork pool of CONCURRENCY processes; the app in celery_tasks.py); tasks sent,
    processed, every result read back with AsyncResult.get() (which waits on the result
    backend's pub/sub channel) and checked, with the key each task writes.
  - phase 2: tasks sent one after another. A task is acknowledged when apply_async()
    returned: the broker answered the LPUSH of its message (and, under `appendfsync
    always`, only once that write was on disk). Once BEFORE_KILL are acknowledged and
    FINISHED_BEFORE_KILL finished, the script asks for the kill and goes on sending
    (sends fail while the server is down); the harness kills the server with SIGKILL
    and restarts it on the same directory and port. Workers reconnect on their own
    (Celery retries its broker connection); a worker that dies is restarted, as a
    supervisor would. After the restart: every acknowledged task must still be
    somewhere (queued, delivered but unacknowledged, or finished); AFTER_RESTART more
    tasks are sent; every acknowledged task must finish with its correct result.

A task a worker had taken (or was running) at the kill is never acknowledged to the
broker (acks_late): its message stays in kombu's "unacked" hash, and a worker puts it
back on the queue once it has been there for the visibility timeout (celery_tasks.py).

Prints "celery_queue: ok" and exits 0 on success; on failure prints what went wrong
(where each unfinished task is, worker exits and the tails of their logs) and exits 1.
"""

import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = int(sys.argv[1]) if len(sys.argv) > 1 else 0
os.environ["CELERY_QUEUE_PORT"] = str(PORT)

try:
    import redis
    from kombu.exceptions import OperationalError

    from celery_tasks import DROPPED_MARK, VISIBILITY_TIMEOUT, app, square
    from queue_harness import CONNECTION_ERRORS, Failure, Pool, Script, retrying
except ImportError as e:
    print(
        f"celery_queue: FAILED: {e}: install tests/python/requirements.txt "
        "(scripts/test does when any of them is missing)",
        flush=True,
    )
    sys.exit(1)

WORKERS = 2
CONCURRENCY = 2
PHASE1_TASKS = 40
BEFORE_KILL = 60
FINISHED_BEFORE_KILL = 15
AFTER_RESTART = 30
QUEUE = "celery"  # Celery's default queue: kombu's list of that name in db 0
SEND_ERRORS = (OperationalError, *CONNECTION_ERRORS)


def log(text):
    print(f"celery_queue: {text}", flush=True)


def expected(n):
    return {"n": n, "square": n * n}


def celery_worker(name):
    """The command line of a Celery worker (the `celery worker` CLI)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "celery_tasks",
        "worker",
        "--hostname",
        f"{name}@%h",
        "--pool",
        "prefork",
        "--concurrency",
        str(CONCURRENCY),
        "--loglevel",
        "INFO",
    ]


def worker_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE + os.pathsep + env.get("PYTHONPATH", "")
    return env


def result_states(ids):
    """{id: (state, result)} from the result backend, read with the backend's own GET of
    each task's meta. Not through AsyncResult objects: each one, once ready, unsubscribes
    from the task's channel on the backend's shared pub/sub connection, also from its
    __del__, and a garbage collection landing inside another such unsubscribe deadlocks
    Celery 5.6's client on that connection's lock."""
    states = {}
    for task_id in ids:
        meta = app.backend.get_task_meta(task_id)
        state = meta["status"]
        # A failed task's result is its exception.
        states[task_id] = (state, meta["result"] if state in ("SUCCESS", "FAILURE") else None)
    return states


def locate(r, ids):
    """{id: where the task is}: "finished" (a result in the backend), "queued" (its
    message in the queue's list), "unacked" (delivered to a worker, not acknowledged) or
    None (nowhere: lost)."""
    where = dict.fromkeys(ids)
    for raw in r.lrange(QUEUE, 0, -1):
        task_id = json.loads(raw)["headers"]["id"]
        if task_id in where:
            where[task_id] = "queued"
    for raw in r.hvals("unacked"):
        task_id = json.loads(raw)[0]["headers"]["id"]
        if task_id in where and where[task_id] is None:
            where[task_id] = "unacked"
    for task_id, (state, _) in result_states(ids).items():
        if state not in ("PENDING", "STARTED"):
            where[task_id] = "finished" if state == "SUCCESS" else state
    return where


def describe(r, ids_to_n):
    states = retrying(lambda: result_states(list(ids_to_n)))
    bad = {i: s for i, s in states.items() if s != ("SUCCESS", expected(ids_to_n[i]))}
    where = retrying(lambda: locate(r, list(bad)))
    lines = [f"{len(bad)} of {len(ids_to_n)} tasks not finished correctly"]
    for task_id, (state, value) in list(bad.items())[:20]:
        lines.append(f"  {task_id}: state {state}, value {value!r}, where {where[task_id]}")
        if state == "FAILURE":
            traceback = app.backend.get_task_meta(task_id).get("traceback") or ""
            lines.append("    " + traceback.strip().replace("\n", "\n    "))
    lines.append(f"queue {QUEUE}: {r.llen(QUEUE)} messages; unacked: {r.hlen('unacked')}")
    return "\n".join(lines)


def restore_unacknowledged():
    """Puts back on the queue the messages delivered but unacknowledged for longer than
    the visibility timeout (a worker's ack lost with its connection at the kill), with
    kombu's own restore. The workers run it too, but only on the first and then every
    tenth of their 10-second ticks (kombu's QoS.restore_visible), so up to ~100 s after
    the kill; the operator runs it at once, as RQ's recovery is run in job_queue.py."""
    with app.connection_for_write() as connection:
        connection.default_channel.qos.restore_visible()


def wait_for_tasks(r, pool, ids_to_n, timeout, what, restore=False):
    """Until every task in ids_to_n has finished with its expected value; restarts dead
    workers meanwhile (and with `restore`, restores unacknowledged messages)."""
    end = time.monotonic() + timeout
    pending = list(ids_to_n)
    next_restore = time.monotonic()
    while pending:
        pool.check()
        if restore and time.monotonic() >= next_restore:
            retrying(restore_unacknowledged)
            next_restore = time.monotonic() + 1
        states = retrying(lambda: result_states(pending))
        wrong = [
            (i, states[i])
            for i in pending
            if states[i][0] != "PENDING" and states[i] != ("SUCCESS", expected(ids_to_n[i]))
        ]
        if wrong:
            raise Failure(
                f"{what}: wrong results: {wrong[:10]}\n" + describe(r, ids_to_n),
                [i for i, _ in wrong],
            )
        pending = [i for i in pending if states[i][0] != "SUCCESS"]
        if pending and time.monotonic() > end:
            raise Failure(
                f"{what}: {len(pending)} of {len(ids_to_n)} tasks unfinished after {timeout} s\n"
                + describe(r, ids_to_n),
                pending,
            )
        time.sleep(0.2)


def check_keys(r, ids_to_n, what):
    for n in ids_to_n.values():
        value = retrying(lambda: r.get(f"square:{n}"))
        if value != str(n * n).encode():
            raise Failure(f"{what}: square:{n} is {value!r}, expected {n * n}")


def phase1(r, pool):
    started = time.monotonic()
    results = [square.apply_async((n,), task_id=f"p1-{n}") for n in range(PHASE1_TASKS)]
    for n, result in enumerate(results):
        # Blocks on the result backend (a SUBSCRIBE to the task's channel, then GET).
        value = result.get(timeout=30)
        if value != expected(n):
            raise Failure(f"phase 1: {result.id} returned {value!r}, expected {expected(n)}")
    check_keys(r, {result.id: n for n, result in enumerate(results)}, "phase 1")
    log(f"phase 1: {len(results)} tasks done and checked in {time.monotonic() - started:.1f} s")


def phase2(r, pool, script):
    started = time.monotonic()
    acknowledged = {}  # task id -> n: apply_async() returned
    unacknowledged = {}  # exception type -> how many sends raised (the task may exist)
    n = 0
    kill_asked_at = None
    restart_seen_at = None
    after_restart = 0
    kombu_dropped = []
    while after_restart < AFTER_RESTART:
        pool.check()
        if script.restarted.is_set() and restart_seen_at is None:
            restart_seen_at = time.monotonic()
            # Every task acknowledged before the kill must have survived it. A message
            # is briefly nowhere while a worker moves it from the queue to "unacked"
            # (BRPOP, then HSET): those are looked up again.
            ids = list(acknowledged)
            where = retrying(lambda: locate(r, ids))
            for _ in range(10):
                missing = [i for i in ids if where[i] is None]
                if not missing:
                    break
                time.sleep(0.1)
                where.update(retrying(lambda: locate(r, missing)))
            # Lost by kombu between its BRPOP and its HSET (celery_tasks.py), not by the
            # server: reported, and not waited for.
            dropped = [
                line.split(DROPPED_MARK)[1].strip() for line in pool.log_lines_with(DROPPED_MARK)
            ]
            for task_id in dropped:
                if task_id in missing:
                    log(f"{task_id} was delivered to a worker and dropped by kombu at the kill")
                    missing.remove(task_id)
                    del acknowledged[task_id]
                    kombu_dropped.append(task_id)
            # Popped by a worker's BRPOP whose reply the kill cut off: the pop was done
            # (and logged) but the worker never got the message, so nothing will run
            # it. kombu's window again (a BRPOP is at most once, with Redis as with
            # Tessera), and provably not a server's loss: the queue is a FIFO (LPUSH at
            # the head, BRPOP at the tail), so a message older than every message still
            # queued was taken by a pop, while a server that lost writes would lose the
            # newest ones. Each worker has one BRPOP outstanding: at most WORKERS such.
            oldest_queued = min(
                (acknowledged[i] for i in ids if where[i] == "queued"), default=float("inf")
            )
            popped = [i for i in missing if acknowledged[i] < oldest_queued]
            if len(popped) <= WORKERS:
                for task_id in popped:
                    log(f"{task_id} was popped by a worker's BRPOP whose reply the kill cut off")
                    missing.remove(task_id)
                    del acknowledged[task_id]
                    kombu_dropped.append(task_id)
            if missing:
                raise Failure(
                    f"{len(missing)} of {len(ids)} acknowledged tasks lost in the kill: "
                    f"{missing[:20]}",
                    missing,
                )
            counts = {}
            for place in (where[i] for i in acknowledged):
                counts[place] = counts.get(place, 0) + 1
            ids = list(acknowledged)
            log(
                f"restarted after {restart_seen_at - kill_asked_at:.1f} s: all {len(ids)} "
                f"acknowledged tasks are there {counts} (failed sends: {unacknowledged})"
            )
        if kill_asked_at is not None:
            script.check_restart_deadline(kill_asked_at)
        if restart_seen_at is not None and time.monotonic() - restart_seen_at > 30:
            raise Failure(
                f"only {after_restart} tasks sent in 30 s after the restart "
                f"(failed sends: {unacknowledged})"
            )
        task_id = f"p2-{n}"
        try:
            square.apply_async((n,), task_id=task_id)
            acknowledged[task_id] = n
            if restart_seen_at is not None:
                after_restart += 1
        except SEND_ERRORS as e:
            name = type(e).__name__
            unacknowledged[name] = unacknowledged.get(name, 0) + 1
            time.sleep(0.05)
        n += 1
        if kill_asked_at is None and len(acknowledged) >= BEFORE_KILL:
            # The kill lands mid-run: tasks queued, some running, some finished.
            states = result_states(list(acknowledged))
            finished = sum(1 for state, _ in states.values() if state == "SUCCESS")
            if finished >= FINISHED_BEFORE_KILL:
                log(
                    f"{len(acknowledged)} acknowledged, {r.llen(QUEUE)} queued, "
                    f"{r.hlen('unacked')} unacked, {finished} finished"
                )
                script.ask_for_kill()
                kill_asked_at = time.monotonic()
            elif time.monotonic() - started > 30:
                raise Failure(f"phase 2: only {finished} tasks finished in 30 s")
            else:
                time.sleep(0.05)
    log(
        f"phase 2: {len(acknowledged)} tasks acknowledged, failed sends: {unacknowledged}; "
        f"worker exits: {pool.exits}"
    )
    # A message whose ack was lost at the kill is redelivered once it has been
    # unacknowledged for the visibility timeout.
    time.sleep(max(0, kill_asked_at + VISIBILITY_TIMEOUT - time.monotonic()))
    wait_for_tasks(r, pool, acknowledged, 30, "phase 2", restore=True)
    check_keys(r, acknowledged, "phase 2")
    log(
        f"phase 2: all {len(acknowledged)} acknowledged tasks finished with correct results "
        f"in {time.monotonic() - started:.1f} s"
        + (f" (and {kombu_dropped} dropped by kombu at the kill)" if kombu_dropped else "")
    )


def main():
    r = redis.Redis(host="127.0.0.1", port=PORT, db=0, socket_timeout=10)
    r.flushall()
    script = Script("celery_queue")
    with tempfile.TemporaryDirectory(prefix="celery-queue-logs-") as log_dir:
        pool = Pool(WORKERS, celery_worker, log_dir, log, env=worker_env())
        try:
            pool.start()
            phase1(r, pool)
            phase2(r, pool, script)
        except Exception as e:  # noqa: BLE001 - everything is reported, then exit 1
            script.fail(e, pool)
        pool.stop()
    script.ok()


if __name__ == "__main__":
    main()
