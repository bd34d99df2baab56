"""The job function of job_queue.py. RQ workers import it by name ("jobs.square"), so it
lives in a module of its own, on the workers' import path (`rq worker --path`)."""

import time

from rq import get_current_job


def square(n):
    """Returns n's square, after a little work (so that jobs are in flight when the
    server is killed), and writes it to `square:N` too (idempotent: a job run twice by
    RQ's at-least-once recovery writes the same value)."""
    time.sleep(0.01)
    get_current_job().connection.set(f"square:{n}", n * n)
    return {"n": n, "square": n * n}
