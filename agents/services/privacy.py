"""A client's data erased on request, and old chats erased by the retention
rule (docs/privacy.md).

Erasure keeps the rows the reports count — the client, its chats with their
timestamps and report facts, its messages with their author, type and time —
and blanks everything a person wrote or was known by: the client's details,
message texts and payloads, files, offline messages, calls' numbers, mails
about the chats, live events, and (through ``ChatsErased`` and
``ClientErased``) the outbox bodies the integration apps sent about them.
Nothing of it can be undone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.files.storage import Storage
from django.db import connection, transaction
from django.db.models import CharField, Exists, OuterRef, Q, Value
from django.db.models.functions import Cast, Concat
from django.utils import timezone
from django.utils.translation import gettext_lazy

from agents import audit, events, live
from agents.models import (
    Agent,
    Attachment,
    BlacklistedClient,
    Call,
    Channel,
    Chat,
    Client,
    ClientAddress,
    LiveEvent,
    Mail,
    Message,
    OfflineMessage,
)
from agents.services.errors import InvalidState
from agents.services.locks import _lock_client

logger = logging.getLogger(__name__)

# What an erased message or offline message says instead of its text.
ERASED = "[erased]"
# Chats (or clients) erased per transaction by the retention rule: each
# batch's locks are held for a moment only.
RETENTION_BATCH = 200
# Between two batches on SQLite, whose one write lock its waiters poll for
# (sleeping up to 0.1 s between polls): a request waiting for it gets it
# here, instead of losing every race to the sweep's next batch until the
# sweep ends. PostgreSQL's row locks need no pause.
SQLITE_BATCH_PAUSE_SECONDS = 0.15


def client_key(client: Client) -> str | int:
    """How commands and exports name a client: a widget visitor by its
    visitor number, any other client by the integrator's id (sender.id)."""
    if client.channel.kind == Channel.Kind.WIDGET:
        return client.visitor_number
    return client.external_id


@dataclass(frozen=True)
class _Erased:
    chats: int
    messages: int
    files: int


def _delete_files_on_commit(names: list[tuple[Storage, str]]) -> None:
    """Files leave the storage only once the rows naming them are gone for
    good: a rolled-back erasure keeps both."""

    def delete() -> None:
        for storage, name in names:
            try:
                storage.delete(name)
            except OSError:
                logger.warning("privacy.file_not_deleted file=%s", name)

    transaction.on_commit(delete)


def _erase_chats(chat_ids: Sequence[int], *, now: datetime) -> _Erased:
    """Blank the chats' texts, payloads and files, in the caller's
    transaction; the rows stay for the reports."""
    if not chat_ids:
        return _Erased(0, 0, 0)
    ids = list(chat_ids)
    messages = Message.objects.filter(chat_id__in=ids).update(
        text=ERASED, payload={}, external_id="", delivery_error=""
    )
    attachments = list(Attachment.objects.filter(chat_id__in=ids))
    stored = [
        (field.storage, field.name)
        for attachment in attachments
        for field in (attachment.file, attachment.thumb)
        if field.name
    ]
    Attachment.objects.filter(pk__in=[a.pk for a in attachments]).delete()
    _delete_files_on_commit(stored)
    # Transcripts: a pending one is not sent any more.
    Mail.objects.filter(chat_id__in=ids).delete()
    Chat.objects.filter(pk__in=ids).update(
        rating_comment="",
        custom_data=[],
        contact_info={},
        crm_link="",
        crm_page={},
        transfer_note="",
        erased_at=now,
    )
    events.publish(events.ChatsErased(chat_ids=tuple(ids)))
    return _Erased(chats=len(ids), messages=messages, files=len(attachments))


def _erase_client_rows(client_ids: Sequence[int]) -> None:
    """Blank the clients' details and what hangs on them but their chats,
    and tell the apps (``ClientErased``), in the caller's transaction."""
    ids = list(client_ids)
    addresses = ClientAddress.objects.filter(client_id__in=ids).values_list("address", flat=True)
    emails = Client.objects.filter(pk__in=ids).values_list("email", flat=True)
    to = {address.lower() for address in [*addresses, *emails] if address}
    if to:
        Mail.objects.filter(to__in=to).delete()  # the address confirmations
    ClientAddress.objects.filter(client_id__in=ids).delete()
    LiveEvent.objects.filter(client_id__in=ids).delete()
    offline = list(OfflineMessage.objects.filter(client_id__in=ids).values_list("pk", "client_id"))
    OfflineMessage.objects.filter(pk__in=[pk for pk, _ in offline]).update(
        name="", email="", phone="", description="", message=ERASED, page_url="", page_title=""
    )
    calls = list(Call.objects.filter(client_id__in=ids).values_list("pk", "client_id"))
    Call.objects.filter(pk__in=[pk for pk, _ in calls]).update(phone="", reason="", record_url="")
    Client.objects.filter(pk__in=ids).update(
        # Unique per channel still, and no id an integrator sends: a
        # returning sender becomes a new client.
        external_id=Concat(Value("erased-"), Cast("pk", CharField())),
        external_id_raw=None,
        name="",
        phone="",
        email="",
        photo_url="",
        url="",
        invite_text="",
        description="",
        user_token="",
        visitor_data={},
        visitor_key_hash=None,
        blacklist_reason="",
        erased_at=timezone.now(),
    )
    _forget_admin_log(ids, [pk for pk, _ in offline])
    for client_id in ids:
        events.publish(
            events.ClientErased(
                client_id=client_id,
                call_ids=tuple(pk for pk, owner in calls if owner == client_id),
                offline_message_ids=tuple(pk for pk, owner in offline if owner == client_id),
            )
        )


def _forget_admin_log(client_ids: list[int], offline_ids: list[int]) -> None:
    """The admin's history names a changed row as it was shown (a client's
    and an offline message's name): the names go, the history stays."""
    kinds = ContentType.objects.get_for_models(
        Client, BlacklistedClient, OfflineMessage, for_concrete_models=False
    )
    named = Q(content_type=kinds[OfflineMessage], object_id__in=[str(pk) for pk in offline_ids])
    for model in (Client, BlacklistedClient):
        named |= Q(content_type=kinds[model], object_id__in=[str(pk) for pk in client_ids])
    LogEntry.objects.filter(named).update(object_repr=ERASED, change_message="")


@transaction.atomic
def erase_client(*, client: Client, by: Agent | str | None = None) -> dict[str, str | int]:
    """Erase what is held about ``client`` (docs/privacy.md): its details,
    its chats' texts, payloads and files, its offline messages, calls'
    numbers, addresses, mails and live events, and what was sent or is to
    be sent about it. Refused while it has an open chat or when it was
    erased before. Returns ``{"client", "chats", "messages", "files"}``."""
    _lock_client(client.pk)
    current = Client.objects.select_related("channel").get(pk=client.pk)
    if current.erased_at is not None:
        raise InvalidState(gettext_lazy("this client's data was erased already"))
    chats = Chat.objects.select_for_update().filter(client=current)
    if chats.filter(state__in=Chat.OPEN_STATES).exists():
        raise InvalidState(
            gettext_lazy("the client has an open chat: finish it before erasing the client")
        )
    key = client_key(current)
    erased = _erase_chats(list(chats.values_list("pk", flat=True)), now=timezone.now())
    _erase_client_rows([current.pk])
    # Its visitor's open streams end now (their token is gone).
    live.access_changed(client_id=current.pk)
    logger.info(
        "privacy.client_erased client=%s chats=%s by=%s",
        current.pk,
        erased.chats,
        by.pk if isinstance(by, Agent) else by,
    )
    audit.record(
        audit.Action.CLIENT_ERASED,
        actor=by,
        target=audit.of_client(current),
        chats=erased.chats,
        messages=erased.messages,
        files=erased.files,
    )
    return {
        "client": key,
        "chats": erased.chats,
        "messages": erased.messages,
        "files": erased.files,
    }


def erase_expired_chats(*, days: int, batch: int = RETENTION_BATCH) -> dict[str, int]:
    """The retention rule (DATA_RETENTION_DAYS; docs/privacy.md): erase the
    chats finished more than ``days`` ago, then the details of each client
    left with no chat that is not erased. Each batch is its own short
    transaction whose rows are taken with SKIP LOCKED, so the sweep never
    waits for a request, nor holds one up for longer than a batch. Returns
    ``{"chats", "messages", "files", "clients"}``."""
    totals = {"chats": 0, "messages": 0, "files": 0, "clients": 0}
    if days <= 0:
        return totals
    cutoff = timezone.now() - timedelta(days=days)
    while erased := _erase_chat_batch(cutoff, batch):
        totals["chats"] += erased.chats
        totals["messages"] += erased.messages
        totals["files"] += erased.files
        _let_waiting_writers_in()
    while count := _erase_client_batch(batch):
        totals["clients"] += count
        _let_waiting_writers_in()
    return totals


def _let_waiting_writers_in() -> None:
    if connection.vendor == "sqlite":
        time.sleep(SQLITE_BATCH_PAUSE_SECONDS)


@transaction.atomic
def _erase_chat_batch(cutoff: datetime, batch: int) -> _Erased | None:
    due = Chat.objects.filter(
        state=Chat.State.FINISHED, finished_at__lt=cutoff, erased_at__isnull=True
    )
    ids = list(
        due.select_for_update(skip_locked=True).order_by("pk").values_list("pk", flat=True)[:batch]
    )
    return _erase_chats(ids, now=timezone.now()) if ids else None


@transaction.atomic
def _erase_client_batch(batch: int) -> int:
    """Erase a batch of clients whose every chat was erased (none open, none
    recent): a client who wrote lately keeps its details."""
    kept = Chat.objects.filter(client=OuterRef("pk"), erased_at__isnull=True)
    erased = Chat.objects.filter(client=OuterRef("pk"), erased_at__isnull=False)
    due = Client.objects.filter(Exists(erased), ~Exists(kept), erased_at__isnull=True)
    ids = list(
        due.select_for_update(skip_locked=True).order_by("pk").values_list("pk", flat=True)[:batch]
    )
    if ids:
        _erase_client_rows(ids)
    return len(ids)
