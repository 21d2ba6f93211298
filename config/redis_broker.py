"""The Redis broker: kombu's Redis transport, whose worker survives Redis going away.

A worker holds the messages it has taken and not acknowledged: a task with a
countdown (a bot's reply check, a delivery's retry) waits in the worker until
it is due. kombu keeps each such message in Redis's "unacked" hash as well,
and when the worker's connection closes it puts them back on their queue
("Restoring N unacknowledged message(s)"). When the connection closed because
Redis went away, that cannot work, and kombu 5.7 tries it a second time on a
channel whose transport has already been let go: ``_connparams`` reads
``None.hostname``, Celery's consumer lets the ``AttributeError`` through, and
the worker exits for good ("Unrecoverable error: AttributeError("'NoneType'
object has no attribute 'hostname'")", issue 29).

Here a restore that cannot reach Redis is put off instead: the messages' tags
are kept in the process, and the next channel this process opens (the
consumer's, once Redis answers again) puts them back on their queues. The
messages themselves are in Redis's unacked hash, which a Redis with
persistence keeps across its restart (docs/operations.md, "When Redis is
down"); without this they would wait out the visibility timeout (an hour).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kombu.transport import redis

logger = logging.getLogger(__name__)

# Tags of unacknowledged messages a closed channel could not put back.
_put_off: set[str] = set()
_put_off_lock = threading.Lock()


class QoS(redis.QoS):
    def restore_unacked(self, client: Any = None) -> None:
        if self.channel.connection.client is None:  # the transport was let go
            self._put_off(None)
            return
        try:
            super().restore_unacked(client)
        except self.channel.connection.connection_errors as error:
            self._put_off(error)

    def _put_off(self, error: Exception | None) -> None:
        tags = set(self._delivered)
        self._delivered.clear()
        with _put_off_lock:
            _put_off.update(tags)
        logger.warning(
            "broker: %d unacknowledged message(s) go back to their queues when Redis answers (%r)",
            len(tags),
            error or "connection closed",
        )


class Channel(redis.Channel):
    QoS = QoS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # it has reached Redis (PING)
        self._restore_put_off()

    def _restore_put_off(self) -> None:
        with _put_off_lock:
            tags = sorted(_put_off)
            _put_off.clear()
        restored = 0
        try:
            for tag in tags:
                self.qos.restore_by_tag(tag)
                restored += 1
        except self.connection_errors:
            with _put_off_lock:
                _put_off.update(tags[restored:])
        if restored:
            logger.warning("broker: %d unacknowledged message(s) back on their queues", restored)


class Transport(redis.Transport):
    Channel = Channel
