"""Credentials carried in URL paths never reach a log.

Four kinds of URL carry their credential in the path: a Chat API endpoint
(``/chat-api/<path secret>/<public id>``), a Bot API provider's URL
(``/webhooks/<provider id>/<bot token>``), a visitor's live stream
(``/visitor/<visitor token>/stream``) and an agent's password-reset link
(``/agent/password/reset/<uid>/<token>/``). Every handler that can print a
request path carries ``RedactSecrets``: the root handler of Django's LOGGING
(settings.py), gunicorn's and uvicorn's error and access logs
(``config.web_server.GunicornLogger``).
"""

from __future__ import annotations

import logging
import re
from typing import Any

REDACTED = "…"

# A path segment ends at "/", "?", "#", whitespace or a quote (access logs quote
# the request line). Whatever stands in the secret's place is redacted, so a
# wrong or mistyped secret is not printed either.
_SEGMENT = r"[^/?#\s\"']+"
# Any case: /CHAT-API/<secret>/… is a 404, but its secret is still a secret.
_PATH_SECRETS = re.compile(
    rf"(/chat-api/){_SEGMENT}|(/webhooks/{_SEGMENT}/){_SEGMENT}|(/visitor/){_SEGMENT}"
    rf"|(/agent/password/reset/{_SEGMENT}/){_SEGMENT}",
    re.IGNORECASE,
)


def redact_secrets(text: str) -> str:
    """``text`` with the secret of every Chat API path and the token of every
    Bot API path replaced: ``/chat-api/…/<public id>``, ``/webhooks/<provider id>/…``."""
    return _PATH_SECRETS.sub(
        lambda match: (match[1] or match[2] or match[3] or match[4]) + REDACTED, text
    )


def _redacted_arg(value: Any) -> Any:
    if value is None or isinstance(value, int | float):
        return value  # keeps "%d" and friends working
    text = str(value)
    redacted = redact_secrets(text)
    return value if redacted == text else redacted


class RedactSecrets(logging.Filter):
    """Redacts path secrets in a record's message, arguments, traceback and stack.

    It changes the record itself, so every handler after it prints the
    redacted form too; the arguments keep their number and kind, so formatters
    that take them apart (gunicorn's access log atoms) still work.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_secrets(record.msg)
        if isinstance(record.args, dict):
            # In place: gunicorn's access log atoms are a dict subclass that
            # answers "-" for a missing key, which a plain copy would not.
            for key, value in record.args.items():
                record.args[key] = _redacted_arg(value)
        elif isinstance(record.args, tuple):
            record.args = tuple(_redacted_arg(value) for value in record.args)
        if record.exc_info and not record.exc_text:
            # Formatter.format prints exc_text when set: an exception's text may quote the path.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True
