"""Clients: found or created by their channel's id, their contact details,
the e-mail address an agent confirms."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import IntegrityError, transaction
from django.db.models import F
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

    The UPDATE holds the counter row's lock until the caller's transaction
    ends, so concurrent new clients take consecutive numbers, and a rolled
    back client gives its number back.
    """
    if not Counter.objects.filter(name=VISITOR_COUNTER).update(value=F("value") + 1):
        # Made by a migration; re-made here after a database flush.
        Counter.objects.get_or_create(name=VISITOR_COUNTER)
        Counter.objects.filter(name=VISITOR_COUNTER).update(value=F("value") + 1)
    return Counter.objects.get(name=VISITOR_COUNTER).value


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
    clients = Client.objects.select_for_update() if lock else Client.objects
    client = clients.filter(channel=channel, external_id=str(external_id)).first()
    created = False
    if client is None:
        try:
            # The visitor number is taken inside the savepoint, so a lost race
            # for the same client gives it back.
            with transaction.atomic():
                client = Client.objects.create(
                    channel=channel,
                    external_id=str(external_id),
                    external_id_raw=external_id,
                    visitor_number=_next_visitor_number(),
                )
            created = True
        except IntegrityError:  # made by a concurrent request meanwhile
            client = clients.get(channel=channel, external_id=str(external_id))
    if not created and client.external_id_raw != external_id:
        Client.objects.filter(pk=client.pk).update(external_id_raw=external_id)
        client.external_id_raw = external_id
    client.channel = channel  # found by it: the posting verbs read it without a query
    if contact:
        update_client_contact(client=client, contact=contact, address_source=address_source)
    return client


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
