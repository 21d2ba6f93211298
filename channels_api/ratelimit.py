"""A per-channel request rate: a fixed one-second window in the shared cache."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import cache


def over_limit(*, channel_id: int) -> bool:
    limit = settings.CHAT_API_RATE_LIMIT_PER_SECOND
    if limit <= 0:
        return False
    key = f"chat-api-rate:{channel_id}:{int(time.time())}"
    try:
        count = cache.incr(key)  # one round trip for all but a window's first request
    except ValueError:
        if cache.add(key, 1, timeout=5):
            return limit < 1
        count = cache.incr(key)  # another request made the key meanwhile
    return count > limit
