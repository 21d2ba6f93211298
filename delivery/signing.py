"""Standard Webhooks signatures (https://www.standardwebhooks.com/).

A secret is ``whsec_`` + base64 of 32 random bytes; the HMAC key is the
decoded bytes. ``webhook-signature`` is ``v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">``, one entry per valid secret, space-separated.
docs/signatures.md shows the receiving side.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"  # noqa: S105 (the prefix, not a secret)
SECRET_BYTES = 32


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def new_webhook_id() -> str:
    return "msg_" + secrets.token_hex(12)


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def sign(*, secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<signature>`` entry."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_headers(
    *, secrets: Sequence[str], webhook_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(
            sign(secret=s, webhook_id=webhook_id, timestamp=timestamp, body=body) for s in secrets
        ),
    }
