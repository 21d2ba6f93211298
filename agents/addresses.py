"""Which client addresses the service may mail a transcript to
(docs/transcripts.md, "Which addresses get a transcript").

Anyone can type an address into the widget, so a typed address alone would
let a stranger have the service mail their text to anyone. An address is
trusted when an agent entered or confirmed it, when a signed-in integrator
sent it (the Chat API's sender, the CRM's answer), or when the visitor who
typed it opened the link the service mailed to it: a fixed text, sent once
per address and client, and only a few times a day to one address and an
hour from one channel, so the confirmation itself is no relay.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from agents import languages, mail, ratelimit
from agents.models import Agent, ApiToken, Client, ClientAddress

_hash = ApiToken.hash_key  # SHA-256, as every token here is kept

logger = logging.getLogger(__name__)

TRUSTED_SOURCES = (
    ClientAddress.Source.INTEGRATOR,
    ClientAddress.Source.CRM,
    ClientAddress.Source.AGENT,
)
DAY = 24 * 3600
MAX_ADDRESS = 254


class ConfirmationError(Exception):
    """A confirmation link that is unknown, used or expired; ``reason`` is
    said in the language active where the page shows it."""

    def __init__(self, reason: Promise) -> None:
        super().__init__(reason)
        self.reason = reason


NOT_VALID = gettext_lazy("this link is not valid (any more)")
EXPIRED = gettext_lazy("this link has expired")


def is_mailable(address: str) -> bool:
    """A well-formed address SMTP can carry (RFC 5321's path limit: 254)."""
    if not address or len(address) > MAX_ADDRESS:
        return False
    try:
        validate_email(address)
    except ValidationError:
        return False
    return True


def is_trusted(*, client: Client, address: str) -> bool:
    """May the service mail ``client``'s transcripts to ``address``?"""
    key = address.strip().lower()
    return bool(key) and client.addresses.filter(address=key, confirmed_at__isnull=False).exists()


@transaction.atomic(savepoint=False)  # on the inbound path: in the caller's transaction
def record_address(
    *,
    client: Client,
    address: str,
    source: str,
    agent: Agent | None = None,
    new_client: bool = False,
) -> ClientAddress:
    """Note that ``source`` gave ``address`` for ``client``: trusted at once
    from a trusted source; from the visitor or a bot, a link to confirm it
    is mailed to it (once per address and client). ``new_client``: made in
    this transaction, so it has no address yet (one INSERT, no look-up)."""
    trusted = source in TRUSTED_SOURCES
    found = {"client": client, "address": address.strip().lower()}
    # A new address from a trusted source is made trusted (one INSERT).
    made = {
        "source": source,
        "confirmed_at": timezone.now() if trusted else None,
        "confirmed_by": agent if trusted else None,
    }
    if new_client:
        row = ClientAddress.objects.create(**found, **made)
    else:
        row, _created = ClientAddress.objects.select_for_update().get_or_create(
            **found, defaults=made
        )
    if row.trusted:
        return row
    if trusted:
        row.source, row.confirmed_at, row.confirmed_by = source, timezone.now(), agent
        row.token_hash = ""
        row.save(update_fields=["source", "confirmed_at", "confirmed_by", "token_hash"])
    elif row.confirmation_sent_at is None:
        _ask_to_confirm(row)
    return row


def _ask_to_confirm(row: ClientAddress) -> None:
    per_address = settings.ADDRESS_CONFIRMATIONS_PER_ADDRESS_PER_DAY
    per_channel = settings.ADDRESS_CONFIRMATIONS_PER_CHANNEL_PER_HOUR
    admitted = ratelimit.admit(
        key=f"confirm-address:{_hash(row.address)}", limit=per_address, window=DAY
    ) and ratelimit.admit(
        key=f"confirm-address-channel:{row.client.channel_id}", limit=per_channel, window=3600
    )
    if not admitted:
        logger.warning("address.confirmation_limited client=%s", row.client_id)
        return
    token = secrets.token_urlsafe(32)  # 256 bits
    row.token_hash, row.confirmation_sent_at = _hash(token), timezone.now()
    row.save(update_fields=["token_hash", "confirmation_sent_at"])
    # A fixed text: nothing the visitor chose (not even their name) is in it.
    context = {
        "channel": row.client.channel.name,
        "link": f"{settings.PUBLIC_URL}/mail/confirm/{token}",
        "hours": settings.ADDRESS_CONFIRMATION_HOURS,
    }
    with translation.override(languages.of_client(row.client)):
        subject = _("Confirm your e-mail address for %(channel)s") % {"channel": context["channel"]}
        mail.queue_mail(
            to=row.address,
            subject=" ".join(subject.split()),  # one line, whatever the name
            text=render_to_string("agents/mail/confirm_address.txt", context),
        )


def link_sent_since(*, client: Client, address: str, since: datetime) -> bool:
    """Did a link to confirm ``address`` go to it for ``client`` at ``since``
    or later? The widget tells the visitor to look for it."""
    return client.addresses.filter(
        address=address.strip().lower(), confirmed_at__isnull=True, confirmation_sent_at__gte=since
    ).exists()


def address_for_token(token: str) -> ClientAddress:
    """The unconfirmed address whose link carries ``token``; its link still valid."""
    digest = _hash(token)
    row = ClientAddress.objects.select_related("client__channel").filter(token_hash=digest).first()
    # Found by its hash, compared again in constant time: the lookup's timing
    # tells nothing of a token (agents/tokens.py does the same).
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise ConfirmationError(NOT_VALID)
    sent = row.confirmation_sent_at or row.created
    if sent + timedelta(hours=settings.ADDRESS_CONFIRMATION_HOURS) < timezone.now():
        raise ConfirmationError(EXPIRED)
    return row


@transaction.atomic
def confirm_address(*, token: str) -> ClientAddress:
    """The visitor opened the link and confirmed: the address is trusted."""
    row = address_for_token(token)
    row = ClientAddress.objects.select_for_update().get(pk=row.pk)
    if row.token_hash != _hash(token):  # confirmed a moment ago, by another request
        raise ConfirmationError(NOT_VALID)
    row.confirmed_at, row.token_hash = timezone.now(), ""
    row.save(update_fields=["confirmed_at", "token_hash"])
    logger.info("address.confirmed client=%s", row.client_id)
    return row
