"""Credentials carried in URL paths never reach a log.

These URLs carry their credential in the path: a Chat API endpoint
(``/chat-api/<path secret>/<public id>``), a Bot API provider's URL
(``/webhooks/<provider id>/<bot token>``), a visitor's live stream
(``/visitor/<visitor token>/stream``), an agent's file
(``/files/<file token>/<name>``), an agent's password-reset link
(``/agent/password/reset/<uid>/<token>/``) and a visitor's link to confirm an
address (``/mail/confirm/<token>``); the admin's page that shows a new secret
once has a one-time key in its path. ``SECRET_PATHS`` declares them once; a test
walks the URL conf and fails on any route with a secret it does not cover.
Every handler that can print a request path carries ``RedactSecrets``: the
root handler of Django's LOGGING (settings.py), gunicorn's and uvicorn's error
and access logs (``config.web_server.GunicornLogger``).
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
# Every path that carries a secret, declared once: what stands before the
# secret segment, where "*" is one public segment (the provider id). The
# segment after it is the secret, whatever it holds. The admin's
# "/new-secret/<key>/" page is no credential (its key opens nothing without the
# admin's own session) but shows a secret once: its key is not logged either.
SECRET_PATHS = (
    "/chat-api/",
    "/webhooks/*/",
    "/visitor/",
    "/files/",
    "/new-secret/",
    "/agent/password/reset/*/",
    "/mail/confirm/",
)

# Any case: /CHAT-API/<secret>/… is a 404, but its secret is still a secret.
_PATH_SECRETS = re.compile(
    "("
    + "|".join(re.escape(head).replace(r"\*", _SEGMENT) for head in SECRET_PATHS)
    + ")"
    + _SEGMENT,
    re.IGNORECASE,
)


def redact_secrets(text: str) -> str:
    """``text`` with the secret segment of every path in ``SECRET_PATHS``
    replaced: ``/chat-api/…/<public id>``, ``/webhooks/<provider id>/…``,
    ``/visitor/…/stream``, ``/files/…/<name>``."""
    return _PATH_SECRETS.sub(lambda match: match[1] + REDACTED, text)


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
