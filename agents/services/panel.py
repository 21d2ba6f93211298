"""The CRM side panel beside a chat: the CRM's answer, what the site said
of the visitor, and the agent's "Assign to CRM card"."""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy

from agents import events
from agents.models import Agent, Chat
from agents.services.chats import post_system_message
from agents.services.clients import update_client_contact
from agents.services.errors import InvalidState
from agents.services.locks import _lock


@transaction.atomic
def set_crm_panel(
    *,
    chat: Chat,
    custom_data: list[dict[str, str]],
    contact_info: Mapping[str, str],
    crm_link: str,
    enable_assign: bool,
    page: Mapping[str, str],
) -> Chat:
    """Show the CRM's answer to the agent (the chat_accepted reply, already
    checked and cleaned by the developer-webhooks app).

    The contact details are saved with the client as if the client had typed
    them, and with the chat for its archive.
    """
    chat = _lock(chat)
    chat.custom_data = list(custom_data)
    chat.contact_info = dict(contact_info)
    chat.crm_link = crm_link
    chat.enable_assign = enable_assign
    chat.crm_page = dict(page)
    chat.save(
        update_fields=["custom_data", "contact_info", "crm_link", "enable_assign", "crm_page"]
    )
    if contact_info:
        update_client_contact(client=chat.client, contact=contact_info, source="crm")
    events.publish(events.CrmPanelChanged(chat_id=chat.pk))
    return chat


def show_visitor_data(*, chat: Chat) -> None:
    """What the site said of the visitor (``setCustomData``, the page) changed:
    the agents' side panel shows it anew."""
    events.publish(events.CrmPanelChanged(chat_id=chat.pk))


@transaction.atomic
def request_crm_assign(*, chat: Chat, agent: Agent) -> Chat:
    """The agent's "Assign to CRM card": the CRM is asked to bind the client
    to the card of the chat's ``crm_link``."""
    chat = _lock(chat)
    if not chat.enable_assign or not chat.crm_link:
        raise InvalidState(gettext_lazy("the CRM did not offer to assign this chat"))
    if chat.state != Chat.State.ACTIVE or not chat.agents.filter(pk=agent.pk).exists():
        raise InvalidState(gettext_lazy("only the agent answering the chat can assign it"))
    if chat.crm_assigned_at is not None:
        return chat  # pressing it twice asks the CRM once
    chat.crm_assigned_at = timezone.now()
    chat.save(update_fields=["crm_assigned_at"])
    events.publish(
        events.CrmAssignRequested(chat_id=chat.pk, agent_id=agent.pk, crm_link=chat.crm_link)
    )
    return chat


@transaction.atomic
def crm_assign_failed(*, chat: Chat, error: str) -> Chat:
    """The CRM refused the assignment, or never answered: the button may be
    pressed again, and the agents see why."""
    chat = _lock(chat)
    if chat.crm_assigned_at is None:
        return chat
    chat.crm_assigned_at = None
    chat.save(update_fields=["crm_assigned_at"])
    post_system_message(chat=chat, text=f"The CRM did not take the assignment: {error}")
    events.publish(events.CrmPanelChanged(chat_id=chat.pk))
    return chat
