"""Text rules, once for every app: the length limits by name, and text that
every column can keep.

``delivery`` imports no app, so the rules live here, where the core, the
integration apps and ``delivery`` all reach them.
"""

from __future__ import annotations

import re
from typing import Any

# A client's message (Chat API A2, the widget): longer text is cut, not
# refused (spec, "Limits": message.text up to 1000 characters).
CLIENT_TEXT_LIMIT = 1000
# What the service's own people and bots write: an agent's or a bot's
# message, a note, a canned reply, an offline message, a contact's
# description. Longer is refused with a message saying so.
TEXT_LIMIT = 4000

# json.loads joins surrogate pairs into one character, so any left are lone.
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(value: Any) -> Any:
    """``value`` with every string fit for PostgreSQL text and jsonb.

    JSON allows ``\\u0000`` and lone surrogates (half an emoji cut by a
    client); PostgreSQL text refuses the first and UTF-8 the second. NULs
    go (no reader sees one), lone surrogates become U+FFFD; dicts and lists
    are walked through.
    """
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "")
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value
