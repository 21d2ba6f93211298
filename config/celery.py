"""The Celery application: tasks live in each app's ``tasks.py``."""

import logging
import os
from typing import Any

import kombu
from celery import Celery, bootsteps
from celery.app.amqp import AMQP
from celery.signals import after_setup_logger, after_setup_task_logger, task_postrun, task_prerun
from celery.worker.consumer import Consumer
from django import db

from config.log_redaction import RedactSecrets

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# While the broker is down a worker tries again this often (kombu's default
# waits 2 s more each time, up to 30 s: a worker came back up to half a
# minute after Redis did).
RECONNECT_SECONDS = 1.0


class BrokerConnection(kombu.Connection):
    def ensure_connection(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) <= 2:  # (errback, max_retries), as Celery's consumer passes them
            kwargs.setdefault("interval_start", RECONNECT_SECONDS / 2)
            kwargs.setdefault("interval_step", RECONNECT_SECONDS / 2)
            kwargs.setdefault("interval_max", RECONNECT_SECONDS)
        return super().ensure_connection(*args, **kwargs)


class SwitchboardAMQP(AMQP):
    Connection = BrokerConnection


app = Celery("switchboard", amqp=SwitchboardAMQP)
app.config_from_object("django.conf:settings", namespace="CELERY")
# Celery's Django fix-up closes every database connection of the thread
# before and after each task unless this is set: every delivery try (three
# tasks a reply, when it waits for the chat's earlier one) opened a new
# PostgreSQL connection. With it, the fix-up closes a thread's connections
# only once in 2 x this many tasks of the process; the handlers below do
# what Django does around a request instead: a connection past
# CONN_MAX_AGE or broken by an error is closed, and CONN_HEALTH_CHECKS
# checks a kept one as the next task first uses it (docs/performance.md).
app.conf.CELERY_DB_REUSE_MAX = 1_000_000
app.autodiscover_tasks()


@task_prerun.connect
@task_postrun.connect
def close_old_connections(sender: Any = None, **kwargs: Any) -> None:
    if sender is not None and getattr(sender.request, "is_eager", False):
        return  # run in its caller's thread and transaction (the tests' eager tasks)
    db.close_old_connections()


class SweepOnReconnect(bootsteps.StartStopStep):
    """A delivery worker that reconnects to the broker sweeps the outbox at
    once: what was committed while the broker was down (its message could
    not be sent, delivery/services.py) goes out now, not at beat's next
    sweep or after DELIVERY_REDISPATCH_AFTER_SECONDS."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Consumer, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.connected_before = False

    def start(self, parent: Consumer) -> None:
        queues = {queue.name for queue in parent.task_consumer.queues}
        if self.connected_before and "delivery" in queues:
            parent.app.send_task("delivery.tasks.sweep", queue="delivery", expires=60)
        self.connected_before = True


app.steps["consumer"].add(SweepOnReconnect)


@after_setup_logger.connect
@after_setup_task_logger.connect
def redact_path_secrets(logger: logging.Logger, **kwargs: Any) -> None:
    """Celery sets up handlers of its own: they redact path secrets too
    (config/log_redaction.py), as the web process's do."""
    for handler in logger.handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
