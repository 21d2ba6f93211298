"""The embedded broker: kombu's filesystem transport, with whole messages.

kombu's own ``_put`` creates a message's file empty and then writes into it;
a worker looking at that moment renames the empty file away, fails to parse
it and stops ("Unrecoverable error: JSONDecodeError"), taking ``make run``
down with it. Here a message is written under a name no queue reads, then
renamed into place in one step: a reader sees a whole message or none.

A queue's messages are read in the order of their file names, which begin
with the message's priority (0 to 9, the lower first, as kombu's Redis
transport hands them out: delivery/services.py's ``PRIORITY_*``), then the
time it was written (in nanoseconds, zero-padded, so that the names sort
in the order written; kombu's own names have milliseconds, in which two
messages often tie and then come out in either order).
"""

from __future__ import annotations

import os
import uuid
from time import monotonic_ns
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

ALIAS = "switchboard-filesystem"


class Channel(filesystem.Channel):
    # kombu's stubs give the two base classes' _put different parameter names.
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]
        priority = self._get_message_priority(payload, reverse=False)
        name = f"{priority}-{monotonic_ns():020d}_{uuid.uuid4()}.{queue}.msg"
        folder = self.data_folder_out
        # ".<uuid>.part" reads as queue "<uuid>.part", which no consumer asks for.
        partial = os.path.join(folder, f".{uuid.uuid4()}.part")
        try:
            with open(partial, "wb") as part:
                part.write(str_to_bytes(dumps(payload)))
            os.replace(partial, os.path.join(folder, name))
        except OSError as error:
            raise ChannelError(f"Cannot add message {name!r} to {folder!r}") from error


class Transport(filesystem.Transport):
    Channel = Channel


TRANSPORT_ALIASES[ALIAS] = "config.broker:Transport"
