"""The Developer API's verbs: the webhook settings, sending events, and
reading the CRM's chat_accepted answer (docs/webhooks.md).

Verbs raise ``DevhookError`` for what cannot be done; they know no HTTP.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents import audit
from agents import services as chats
from agents.models import Agent, Chat
from delivery import services as delivery
from delivery.models import Delivery
from devhooks.models import EVENTS, IntegrationSettings, WebhookDelivery
from devhooks.visitor_data import clean_custom_data, drop_foreign_links, limited, safe_link

PURPOSE = "devhook"
POLICY = "devhook"

logger = logging.getLogger(__name__)

LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
DOMAIN = re.compile(rf"(?=.{{1,253}}$)({LABEL}\.)*{LABEL}")
# What a CRM answer may hold, at most: contact fields as the client's columns.
CONTACT_LIMITS = {"name": 255, "phone": 100, "email": 255}


class DevhookError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- settings ---------------------------------------------------------------


def _clean_events(names: Iterable[str] | None) -> list[str]:
    chosen = list(dict.fromkeys(names or []))
    unknown = [name for name in chosen if name not in EVENTS]
    if unknown:
        raise DevhookError(f"unknown event {unknown[0]!r}; one of {', '.join(EVENTS)}")
    return [] if set(chosen) == set(EVENTS) else chosen


def _clean_domains(domains: Iterable[str] | None) -> list[str]:
    cleaned = []
    for domain in domains or []:
        name = domain.strip().lower().rstrip(".")
        if not DOMAIN.fullmatch(name):
            raise DevhookError(f"{domain!r} is not a domain name (example.com)")
        cleaned.append(name)
    return list(dict.fromkeys(cleaned))


def validate_settings(
    *, url: str, events: Iterable[str] | None, safe_url_domains: Iterable[str] | None
) -> tuple[str, list[str], list[str]]:
    """The URL, events and domains as they will be saved, or ``DevhookError``."""
    url = url.strip()
    if not url:
        raise DevhookError("give the webhook URL")
    try:
        delivery.validate_endpoint_url(url)
    except ValidationError as error:
        raise DevhookError(" ".join(error.messages)) from None
    return url, _clean_events(events), _clean_domains(safe_url_domains)


@transaction.atomic
def set_developer_webhook(
    *,
    url: str,
    events: Iterable[str] | None = None,
    safe_url_domains: Iterable[str] | None = None,
    safe_url: bool | None = None,
    rotate_secret: bool = False,
    active: bool = True,
    by: Agent | str | None = None,
) -> tuple[IntegrationSettings, str | None]:
    """Point the developer webhooks at ``url``. Returns the settings and the
    signing secret when one was made (first time, or ``rotate_secret``);
    ``None`` when the existing secret stays.

    ``events`` empty or all of them: every event. Safe URL is on when domains
    are given, unless ``safe_url`` says otherwise. ``active`` off keeps the
    settings and sends nothing.
    """
    url, chosen, domains = validate_settings(
        url=url, events=events, safe_url_domains=safe_url_domains
    )
    current = IntegrationSettings.objects.select_for_update().filter(
        pk=IntegrationSettings.SINGLETON
    ).first() or IntegrationSettings(pk=IntegrationSettings.SINGLETON)
    secret: str | None = None
    if current.endpoint is None:
        current.endpoint, secret = delivery.create_endpoint(url=url)
        if not active:
            delivery.update_endpoint(endpoint=current.endpoint, active=False)
    else:
        delivery.update_endpoint(endpoint=current.endpoint, url=url, active=active)
        if rotate_secret:
            secret = delivery.rotate_secret(endpoint=current.endpoint)
    current.events = chosen
    current.safe_url_domains = domains
    current.safe_url = bool(domains) if safe_url is None else safe_url
    current.updated = timezone.now()
    current.save()
    # Not the URL: one may carry a credential in its path or query.
    audit.record(
        audit.Action.WEBHOOK_CHANGED,
        actor=by,
        target="developer webhook",
        active=active,
        events=",".join(chosen) or "all",
        secret_rotated=rotate_secret and secret is not None,
    )
    logger.info("devhooks.settings_changed events=%s", ",".join(chosen) or "all")
    return current, secret


# --- sending ----------------------------------------------------------------


def send(
    event_name: str,
    body: dict[str, Any],
    *,
    ordering_key: str = "",
    subject: str = "",
    chat: Chat | None = None,
) -> Delivery | None:
    """Enqueue one event in the caller's transaction, when it is to be sent;
    an event of ``chat`` is linked to it (``WebhookDelivery``)."""
    config = IntegrationSettings.load()
    if config.endpoint is None or not config.sends(event_name):
        return None
    sent = delivery.enqueue(
        endpoint=config.endpoint,
        purpose=PURPOSE,
        event=event_name,
        body=body,
        policy=POLICY,
        ordering_key=ordering_key,
        subject=subject,
    )
    if chat is not None:
        WebhookDelivery.objects.create(delivery=sent, chat=chat)
    return sent


def chat_of(item: Delivery) -> Chat | None:
    """The chat a webhook delivery is about, None for a call's or an offline message's."""
    link = WebhookDelivery.objects.select_related("chat__client").filter(delivery=item).first()
    return link.chat if link is not None else None


# --- the chat_accepted answer, through Safe URL --------------------------------


def read_accept_reply(chat: Chat, reply: Any) -> bool:
    """Show the CRM's chat_accepted answer to the agent when its ``result``
    is "ok" (any case) and the chat is still open; anything else shows
    nothing. True when shown."""
    if not isinstance(reply, dict) or not chat.is_open:
        return False  # a late answer (a retry, a replay) leaves a finished chat alone
    result = reply.get("result")
    if not isinstance(result, str) or result.strip().lower() != "ok":
        return False
    config = IntegrationSettings.load()
    contact = reply.get("contact_info")
    contact = contact if isinstance(contact, Mapping) else {}
    page = reply.get("page")
    page = page if isinstance(page, Mapping) else {}
    chats.set_crm_panel(
        chat=chat,
        custom_data=clean_custom_data(reply.get("custom_data"), config),
        contact_info={
            field: value
            for field, limit in CONTACT_LIMITS.items()
            if (value := drop_foreign_links(limited(contact.get(field), limit), config).strip())
        },
        crm_link=safe_link(reply.get("crm_link"), config),
        enable_assign=reply.get("enable_assign") is True,
        page={
            "url": safe_link(page.get("url"), config),
            "title": drop_foreign_links(limited(page.get("title")), config),
        },
    )
    return True
