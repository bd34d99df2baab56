"""The Celery app and task of celery_queue.py. Workers load it by name (`celery -A
celery_tasks worker`, with this directory on PYTHONPATH); the server's port comes from
the environment (CELERY_QUEUE_PORT), as both the script and its workers import it.

Broker and result backend are the same server: the broker in db 0 (kombu's Redis
transport: a list per queue, LPUSH to send, BRPOP to receive, the "unacked" hash and
"unacked_index" sorted set for the messages delivered but not yet acknowledged by a
worker), the results in db 1 (`celery-task-meta-<id>` keys, and a PUBLISH on the same
name to wake a client waiting in AsyncResult.get()).
"""

import os
import time

import redis
from celery import Celery
from celery.signals import worker_process_init
from kombu.transport import redis as kombu_redis

from queue_harness import die_with_parent, retrying

PORT = int(os.environ["CELERY_QUEUE_PORT"])
# kombu's Redis transport redelivers a message a worker took but never acknowledged (the
# worker died, or lost its connection to the server, before its ack) only once the
# message has been unacknowledged for the visibility timeout: an hour by default, which
# a test cannot wait. A few seconds is safe here because every task takes milliseconds
# (a task running longer than the timeout would be delivered a second time while it
# runs). kombu runs the restore in each worker only now and then (see celery_queue.py).
VISIBILITY_TIMEOUT = 3

app = Celery(
    "celery_tasks",
    broker=f"redis://127.0.0.1:{PORT}/0",
    backend=f"redis://127.0.0.1:{PORT}/1",
)
app.conf.update(
    # A worker acknowledges a message (removes it from kombu's "unacked" hash) only once
    # the task has run, not when it takes it: a task in flight when the server or a
    # worker dies is delivered again rather than lost.
    task_acks_late=True,
    # With acks_late, a task whose pool process died (killed, or segfaulted) is
    # requeued rather than acknowledged as failed.
    task_reject_on_worker_lost=True,
    # One message reserved per pool process: fewer taken-but-unstarted messages to
    # redeliver after a crash.
    worker_prefetch_multiplier=1,
    broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT},
    broker_connection_retry_on_startup=True,
    # A worker storing a result while the server is down (killed, restarting) retries
    # rather than recording the task as failed with the ConnectionError (the default
    # marks it FAILURE once the server is back).
    result_backend_always_retry=True,
    result_backend_max_retries=100,
    result_backend_max_sleep_between_retries_ms=500,
    result_expires=None,
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
)

# kombu takes a message from the queue with BRPOP and only then records it as delivered
# but unacknowledged (ZADD "unacked_index", HSET "unacked"): when the server dies between
# the two, the message is gone on the client's side although the server did everything
# it acknowledged (the message was popped and delivered). That window is kombu's, so the
# worker says which message it dropped there (a line DROPPED_MARK <task id> in its log),
# and celery_queue.py tells such a loss from one of the server's.
DROPPED_MARK = "celery_tasks: kombu dropped a delivered message:"
_append = kombu_redis.QoS.append


def _append_or_say_dropped(self, message, delivery_tag):
    try:
        return _append(self, message, delivery_tag)
    except Exception:
        os.write(2, f"{DROPPED_MARK} {message.headers.get('id')}\n".encode())
        raise


kombu_redis.QoS.append = _append_or_say_dropped

_client = None


@worker_process_init.connect
def _die_with_worker(**_):
    """A pool process is killed when its worker dies (no orphans after a failed run)."""
    die_with_parent()


@app.task(name="celery_tasks.square")
def square(n):
    """Returns n's square, after a little work (so that tasks are in flight when the
    server is killed), and writes it to `square:N` in db 0 too (idempotent: a task
    delivered twice writes the same value). The write is retried across the server's
    restart, as the task's own connection from before it fails once."""
    global _client
    time.sleep(0.01)
    if _client is None:
        _client = redis.Redis(host="127.0.0.1", port=PORT, socket_timeout=10)
    retrying(lambda: _client.set(f"square:{n}", n * n), deadline=30)
    return {"n": n, "square": n * n}
