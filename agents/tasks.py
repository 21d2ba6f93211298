from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents import accounts, audit, events, idempotency, live, mail, presence, ratelimit, services
from agents.models import Chat


@shared_task
def finish_inactive_chats() -> int:
    """Finish open chats with no message for INACTIVE_CHAT_HOURS; returns how many."""
    hours = settings.INACTIVE_CHAT_HOURS
    if hours <= 0:
        return 0
    cutoff = timezone.now() - timedelta(hours=hours)
    idle = (
        Chat.objects.filter(state__in=Chat.OPEN_STATES)
        .annotate(last_activity=Coalesce(Max("messages__created"), "created"))
        .filter(last_activity__lt=cutoff)
    )
    return sum(services.finish_idle_chat(chat=chat, idle_since=cutoff) for chat in idle)


@shared_task
def forget_rate_limit_hits() -> int:
    """Delete rate-limit rows of keys that went quiet (the database store only)."""
    return ratelimit.forget_old_hits()


@shared_task
def forget_idempotency_keys() -> int:
    """Forget inbound ``Idempotency-Key``s older than IDEMPOTENCY_KEY_HOURS; returns how many."""
    return idempotency.forget_old_keys()


@shared_task
def erase_expired_chats() -> dict[str, int]:
    """Erase chats finished more than DATA_RETENTION_DAYS ago, in short
    batches (docs/privacy.md, "Retention"); returns what was erased."""
    return services.erase_expired_chats(days=settings.DATA_RETENTION_DAYS)


@shared_task
def forget_live_events() -> int:
    """Delete live events older than LIVE_REPLAY_MINUTES; returns how many."""
    return live.forget_old_events()


@shared_task
def forget_old_audit_entries() -> int:
    """Delete audit entries older than AUDIT_RETENTION_DAYS; returns how many."""
    return audit.forget_old_entries()


@shared_task
def send_mail(mail_id: int) -> str:
    """Send one mail of the outbox (agents/mail.py)."""
    return mail.send(mail_id)


@shared_task
def mail_password_reset(email: str) -> bool:
    """Queue the reset link for the agent with this address, if there is one
    (agents/accounts.py); says whether a mail was queued."""
    return accounts.mail_password_reset(email=email) is not None


@shared_task
def send_due_mails() -> int:
    """Send the mails that are due: new ones whose hand-over was lost, and
    retries whose pause is over. Returns how many were tried."""
    ids = mail.due_mail_ids()
    for mail_id in ids:
        mail.send(mail_id)
    return len(ids)


@shared_task
def lapse_offer(offer_id: int) -> bool:
    """An offered chat whose time ran out goes to the next agent (docs/routing.md)."""
    return services.lapse_offer(offer_id=offer_id)


@shared_task
def lapse_due_offers() -> int:
    """The beat's sweep behind each offer's own timer; returns how many lapsed."""
    return services.lapse_due_offers()


@shared_task
def offer_waiting_to_free_agents() -> int:
    """The beat's sweep for a chat left waiting while an agent has room
    (docs/routing.md, "Under concurrency"); returns how many agents had room."""
    return services.offer_waiting_to_free_agents()


@shared_task
def close_idle_chats() -> int:
    """Finish the chats idle close makes due (docs/routing.md, "Idle chats
    close"); returns how many."""
    return services.close_idle_chats()


@shared_task
def move_offers_of_away_agents() -> int:
    """Agents silent for AGENT_AWAY_MINUTES lose their pending offers to the
    next agent; returns how many agents."""
    return presence.move_offers_of_away_agents()


def on_chat_offered(event: events.ChatOffered) -> None:
    """Each offer's own timer: the worker moves the chat on when the offer's
    time is up (and the beat's sweep, should the message be lost). A broker
    that is down is logged, not raised (robust): the chat is committed and
    the sweep lapses its offer."""
    transaction.on_commit(
        lambda: lapse_offer.apply_async((event.offer_id,), eta=event.expires_at), robust=True
    )


def connect() -> None:
    events.subscribe(events.ChatOffered, on_chat_offered)
