"""The per-channel request rate of A2: CHAT_API_RATE_LIMIT_PER_SECOND in any
one-second span (``agents.ratelimit``: sliding, exact under concurrency)."""

from __future__ import annotations

from django.conf import settings

from agents.ratelimit import admit


def over_limit(*, channel_id: int) -> bool:
    limit = settings.CHAT_API_RATE_LIMIT_PER_SECOND
    if limit <= 0:
        return False
    return not admit(key=f"chat-api:{channel_id}", limit=limit, window=1.0)
