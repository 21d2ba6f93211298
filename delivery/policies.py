"""Named retry policies and the rule for what counts as delivered (docs/delivery.md).

A caller picks a policy by name in ``delivery.services.enqueue``. Retry waits
are measured from the *start* of the previous try, so "3 sends 3 s apart with
a 3 s timeout" ends after at most 9 s whether the target refuses at once or
never answers.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from config.text import storable
from delivery.transport import Exchange

# A try in flight holds its row this long past its timeout before the sweep
# takes the worker for dead and tries again. The transport ends every try by
# its timeout (delivery.transport: a hard deadline); the margin covers the
# shut sockets unwinding and the outcome being written.
LEASE_MARGIN_SECONDS = 5.0


@dataclass(frozen=True)
class Policy:
    name: str
    timeout: float  # seconds for one request, name lookup to last byte: a hard deadline
    retry_delays: tuple[float, ...] = ()  # before try 2, 3, …, from the previous start
    jitter: float = 0.0  # each delay is scaled by a random factor in [1 - jitter, 1 + jitter]
    expires_after: float | None = None  # not sent within this many seconds: dropped
    tell_owner_of_failure: bool = True  # call the purpose's on_failure handler
    # A 2xx reply carrying a ``result`` other than "ok" (any case) is a refusal:
    # the developer webhooks' rule (docs/webhooks.md).
    result_must_be_ok: bool = False

    @property
    def max_attempts(self) -> int:
        return 1 + len(self.retry_delays)

    @property
    def lease_seconds(self) -> float:
        # Longer than the try can last: while the lease holds, no second try
        # of the delivery starts (the sweep leaves it alone).
        return self.timeout + LEASE_MARGIN_SECONDS

    def delay_after(self, attempt: int) -> float:
        """Seconds from the start of try ``attempt`` (1-based) to the next one."""
        base = self.retry_delays[attempt - 1]
        if self.jitter:
            base *= random.uniform(1 - self.jitter, 1 + self.jitter)
        return base


POLICIES: dict[str, Policy] = {
    policy.name: policy
    for policy in (
        # Chat Channel API agent message (A3): 3 sends 3 s apart; the agent is
        # told after the third failure, ≤ 9 s after the first send.
        Policy(name="chat_api_message", timeout=3.0, retry_delays=(3.0, 3.0)),
        # Typing notifications: one short try, never late, failures not shown.
        Policy(
            name="chat_api_typing",
            timeout=2.0,
            expires_after=5.0,
            tell_owner_of_failure=False,
        ),
        # Bot API events (B1): 3 s timeout, 2 retries, then the chat goes to agents.
        Policy(name="bot_event", timeout=3.0, retry_delays=(2.0, 2.0)),
        # Developer webhooks (C1): a CRM may be down for a while. 5 s is the
        # spec's wait for a chat_accepted answer; the agent's panel fills when
        # it comes.
        Policy(
            name="devhook",
            timeout=5.0,
            retry_delays=(5.0, 60.0, 600.0, 3600.0, 6 * 3600.0),
            jitter=0.2,
            result_must_be_ok=True,
        ),
    )
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown delivery policy {name!r}; one of {', '.join(sorted(POLICIES))}"
        ) from None


# --- what counts as delivered ----------------------------------------------


@dataclass(frozen=True)
class Verdict:
    delivered: bool
    final: bool  # no further try, whatever the policy would allow
    error: str  # for the owner and the log; "" when delivered
    reply: Any = None  # the parsed reply body
    retry_after: float | None = None  # seconds the target asked us to wait


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # jsonb cannot hold NaN or Infinity


def _finite(text: str) -> float:
    # ``1e999`` is valid JSON that Python reads as Infinity, which jsonb
    # cannot hold either: such a reply is kept as its text, like NaN's.
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is beyond a float's range")
    return value


def parse_reply(body: bytes) -> Any:
    """JSON when the body is JSON, the text when it is not, ``None`` when empty."""
    if not body.strip():
        return None
    text = storable(body.decode("utf-8", errors="replace"))
    try:
        return storable(json.loads(text, parse_constant=_no_constant, parse_float=_finite))
    except (ValueError, RecursionError):
        return text


def error_object_text(reply: Any) -> str | None:
    """``"code: message"`` for a reply ``{"error": {"code", "message"}}``."""
    if not isinstance(reply, dict) or not isinstance(reply.get("error"), dict):
        return None
    error = reply["error"]
    code, message = str(error.get("code") or ""), str(error.get("message") or "")
    if code and message:
        return f"{code}: {message}"
    return code or message or "error"


def retry_after_seconds(value: str | None, *, now: datetime) -> float | None:
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def result_refusal(reply: Any) -> str | None:
    """``"result: FAILURE"`` for a reply whose ``result`` is not "ok" (any case);
    ``None`` when it is ok or the reply has no ``result``."""
    if not isinstance(reply, dict) or "result" not in reply:
        return None
    result = reply["result"]
    if isinstance(result, str) and result.strip().lower() == "ok":
        return None
    text = result if isinstance(result, str) else json.dumps(result)
    return f"result: {text[:500]}"


def judge(exchange: Exchange, *, now: datetime, policy: Policy | None = None) -> Verdict:
    """Success is a 2xx whose body is not an error object (nor, for a policy
    with ``result_must_be_ok``, a ``result`` other than "ok").

    4xx other than 408/429, redirects and such refusals are final; 408, 429,
    5xx, timeouts and connection errors are retried; a refused address is
    final.
    """
    code = exchange.status_code
    if code is None:
        return Verdict(delivered=False, final=not exchange.retryable, error=exchange.error)
    reply = parse_reply(exchange.body)
    refusal = error_object_text(reply)
    if refusal is None and policy is not None and policy.result_must_be_ok:
        refusal = result_refusal(reply)
    if 200 <= code < 300:
        if refusal is not None:
            return Verdict(delivered=False, final=True, error=refusal, reply=reply)
        return Verdict(delivered=True, final=True, error="", reply=reply)
    if 300 <= code < 400:
        location = exchange.headers.get("location", "")
        target = f" to {location}" if location else ""
        return Verdict(
            delivered=False, final=True, error=f"HTTP {code}: redirect{target} not followed"
        )
    error = refusal or f"HTTP {code}"
    if code in (408, 429) or code >= 500:
        wait = retry_after_seconds(exchange.headers.get("retry-after"), now=now)
        return Verdict(delivered=False, final=False, error=error, retry_after=wait)
    return Verdict(delivered=False, final=True, error=error)


def limit_after(limit: int, exchange: Exchange, *, ceiling: int, quick_seconds: float) -> int:
    """An endpoint's in-flight limit after one try: additive increase,
    multiplicative decrease, as TCP's congestion window.

    A 2xx within ``quick_seconds`` raises it by one (up to ``ceiling``); a
    time-out, a connection error, a 408, 429 or 5xx halves it (down to one):
    signs that the receiver has more than it can take. Anything else — a
    slow 2xx, a refusal, an address the guard refused — leaves it as it is.
    """
    code = exchange.status_code
    if (code is None and exchange.retryable) or code in (408, 429) or (code or 0) >= 500:
        return max(1, min(limit, ceiling) // 2)
    if code is not None and 200 <= code < 300 and exchange.duration_ms < quick_seconds * 1000:
        return min(ceiling, limit + 1)
    return max(1, min(limit, ceiling))
