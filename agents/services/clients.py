"""Clients: found or created by their channel's id, their contact details,
the e-mail address an agent confirms."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils.translation import gettext_lazy

from agents import addresses, events
from agents.models import Agent, Channel, Chat, Client, ClientAddress, Counter
from agents.services.errors import ServiceError
from agents.services.locks import _open_chat_of

CONTACT_FIELDS = ("name", "phone", "email", "photo_url", "url", "invite_text", "description")
VISITOR_COUNTER = "visitor_number"
# Where an address comes from, by who changed the contact data ("client" is
# the visitor unless the caller says it is a signed-in integrator).
ADDRESS_SOURCES = {
    "bot": ClientAddress.Source.BOT,
    "crm": ClientAddress.Source.CRM,
    "agent": ClientAddress.Source.AGENT,
}


def _next_visitor_number() -> int:
    """The next installation-wide visitor number: 1, 2, 3… with no gaps.

    One UPDATE … RETURNING (PostgreSQL, SQLite 3.35+) holds the counter
    row's lock until the caller's transaction ends, so concurrent new
    clients take consecutive numbers, and a rolled back client gives its
    number back.
    """
    quote = connection.ops.quote_name
    table, value, name = quote(Counter._meta.db_table), quote("value"), quote("name")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {value} = {value} + 1 WHERE {name} = %s RETURNING {value}",  # noqa: S608 - names of the model, the counter's a parameter
            [VISITOR_COUNTER],
        )
        taken = cursor.fetchone()
    if taken is None:  # made by a migration; re-made here after a database flush
        Counter.objects.get_or_create(name=VISITOR_COUNTER)
        return _next_visitor_number()
    return int(taken[0])


@transaction.atomic(savepoint=False)
def create_client(
    *,
    channel: Channel,
    external_id: str | int,
    contact: Mapping[str, str] | None = None,
    address_source: str = "",
    **row: Any,
) -> Client:
    """A new client of ``channel`` with the next visitor number, its contact
    details (as ``update_client_contact`` would set them) and ``row``'s
    fields in its one INSERT. ``external_id`` is new to the channel (a
    random one, or looked for first by ``get_or_create_client``)."""
    given = {
        field: value
        for field, value in (contact or {}).items()
        if field in CONTACT_FIELDS and value
    }
    client = Client.objects.create(
        channel=channel,
        external_id=str(external_id),
        external_id_raw=external_id,
        visitor_number=_next_visitor_number(),
        **given,
        **row,
    )
    email = (contact or {}).get("email", "")
    if addresses.is_mailable(email):
        addresses.record_address(
            client=client,
            address=email,
            source=address_source or ClientAddress.Source.VISITOR,
            new_client=True,
        )
    if given:  # as update_client_contact tells it; a new client has no chat yet
        events.publish(
            events.ClientUpdated(
                client_id=client.pk, chat_id=None, fields=tuple(given), source="client"
            )
        )
    return client


# One transaction with the caller's, no savepoint of its own: the inbound
# path of every message runs it (docs/architecture.md, "Inbound requests").
@transaction.atomic(savepoint=False)
def get_or_create_client(
    *,
    channel: Channel,
    external_id: str | int,
    contact: Mapping[str, str] | None = None,
    address_source: str = "",
    lock: bool = False,
) -> Client:
    """The client ``external_id`` of ``channel``, created on first sight.

    New non-empty contact values update the client the agent sees
    (``address_source`` as in ``update_client_contact``). With ``lock`` the
    client's row is read under its lock, held to the transaction's end, for
    a verb that would lock it next (``post_client_message(client_locked=True)``):
    the row is read once.
    """
    return find_or_create_client(
        channel=channel,
        external_id=external_id,
        contact=contact,
        address_source=address_source,
        lock=lock,
    )[0]


@transaction.atomic(savepoint=False)
def find_or_create_client(
    *,
    channel: Channel,
    external_id: str | int,
    contact: Mapping[str, str] | None = None,
    address_source: str = "",
    lock: bool = False,
) -> tuple[Client, bool]:
    """``get_or_create_client``, and whether the client was made now: then
    its INSERT locks it and it has no chat (``post_client_message(new_client=True)``).
    In the caller's transaction, which it needs."""
    clients = Client.objects.select_for_update() if lock else Client.objects
    client = clients.filter(channel=channel, external_id=str(external_id)).first()
    if client is None:
        try:
            # The visitor number is taken inside the savepoint, so a lost race
            # for the same client gives it back.
            with transaction.atomic():
                client = create_client(
                    channel=channel,
                    external_id=external_id,
                    contact=contact,
                    address_source=address_source,
                )
            return client, True
        except IntegrityError:  # made by a concurrent request meanwhile
            client = clients.get(channel=channel, external_id=str(external_id))
    if client.external_id_raw != external_id:
        Client.objects.filter(pk=client.pk).update(external_id_raw=external_id)
        client.external_id_raw = external_id
    client.channel = channel  # found by it: the posting verbs read it without a query
    if contact:
        update_client_contact(client=client, contact=contact, address_source=address_source)
    return client, False


@transaction.atomic(savepoint=False)  # on the inbound path: in the caller's transaction
def update_client_contact(
    *,
    client: Client,
    contact: Mapping[str, str],
    source: str = "client",
    address_source: str = "",
    agent: Agent | None = None,
) -> list[str]:
    """Set the given non-empty contact fields; publish ClientUpdated when any changed.

    ``source`` says who changed them: "client", "bot", "crm" or "agent"
    (``agent``). An e-mail address is recorded with where it came from
    (``address_source``, a ``ClientAddress.Source``; by default what
    ``source`` implies, the visitor for "client"), which decides whether
    transcripts may go to it (agents.addresses).
    """
    if addresses.is_mailable(contact.get("email", "")):
        addresses.record_address(
            client=client,
            address=contact["email"],
            source=address_source or ADDRESS_SOURCES.get(source, ClientAddress.Source.VISITOR),
            agent=agent,
        )
    changed = [
        field
        for field, value in contact.items()
        if field in CONTACT_FIELDS and value and getattr(client, field) != value
    ]
    if not changed:
        return []
    for field in changed:
        setattr(client, field, contact[field])
    client.save(update_fields=changed)
    chat = _open_chat_of(client)
    events.publish(
        events.ClientUpdated(
            client_id=client.pk,
            chat_id=chat.pk if chat else None,
            fields=tuple(changed),
            source=source,
        )
    )
    return changed


@transaction.atomic
def confirm_client_email(*, chat: Chat, agent: Agent, email: str = "") -> Client:
    """An agent enters the client's e-mail address (``email``) or confirms the
    one the client gave: transcripts may go to it (agents.addresses)."""
    client = chat.client
    email = email.strip() or client.email
    if not email:
        raise ServiceError(gettext_lazy("the client gave no e-mail address: type one"))
    if not addresses.is_mailable(email):
        raise ServiceError(gettext_lazy("%(address)s is not an e-mail address"), address=email[:60])
    update_client_contact(client=client, contact={"email": email}, source="agent", agent=agent)
    return client
