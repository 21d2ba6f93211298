"""Every change of chat state, one verb each (docs/decisions.md, "Conversation core").

Each service runs in a transaction and publishes one event from
``agents.events``. Views, the admin, commands, tasks and tests call these;
none of them writes chat state by itself.

One module per subject, every public name re-exported here, so callers say
``from agents import services`` and ``services.post_client_message(...)``:

- ``clients``: a client found or created, its contact details;
- ``chats``: a chat's life and its messages, transfers, blacklisting;
- ``panel``: the CRM side panel;
- ``labels``: the list of labels and a chat's labels;
- ``calls``: callback requests and a call's progress;
- ``offline``: offline messages;
- ``privacy``: a client's data erased on request, old chats by the
  retention rule (docs/privacy.md);
- ``profile``: an agent's online status, settings and maximum of chats;
- ``offers``: routing by offers (docs/routing.md);
- ``availability``: a channel's business hours;
- ``idle``: idle chats close by themselves (docs/routing.md);
- ``errors`` and ``locks``: the errors every verb raises, the row locks
  they share.
"""

from agents.services.availability import set_business_hours
from agents.services.calls import (
    CALLBACK_DISABLED,
    CALLBACK_UNAVAILABLE,
    PHONE,
    CallbackUnavailable,
    callback_unavailable_reason,
    normalise_phone,
    record_call_progress,
    request_callback,
)
from agents.services.chats import (
    NOTE_LIMIT,
    accept_chat,
    blacklist_client,
    finish_chat,
    finish_idle_chat,
    lift_blacklist,
    mark_chat_seen,
    mark_message_delivery,
    open_chat,
    post_agent_message,
    post_bot_message,
    post_client_message,
    post_client_message_once,
    post_note,
    post_system_message,
    queue_chat,
    rate_chat,
    reassign_chat,
    record_consent,
    record_language,
    register_delivery_state_rule,
    retry_message,
    return_chat_to_bot,
    set_agent_typing,
    set_client_typing,
    transfer_chat,
    transfer_target,
)
from agents.services.clients import (
    ADDRESS_SOURCES,
    CONTACT_FIELDS,
    VISITOR_COUNTER,
    confirm_client_email,
    create_client,
    find_or_create_client,
    get_or_create_client,
    update_client_contact,
)
from agents.services.errors import InvalidState, NotAllowed, ServiceError
from agents.services.idle import close_idle_chat, close_idle_chats, due_idle_chats
from agents.services.labels import create_label, set_chat_labels
from agents.services.offers import (
    decline_offer,
    lapse_due_offers,
    lapse_offer,
    offer_waiting_to_free_agents,
    set_routing,
)
from agents.services.offline import (
    OFFLINE_MESSAGE_MAX,
    leave_offline_message,
    mark_offline_message_handled,
)
from agents.services.panel import (
    crm_assign_failed,
    request_crm_assign,
    set_crm_panel,
    show_visitor_data,
)
from agents.services.privacy import ERASED, client_key, erase_client, erase_expired_chats
from agents.services.profile import set_agent_status, set_max_chats, update_agent_profile

__all__ = [
    "ADDRESS_SOURCES",
    "CALLBACK_DISABLED",
    "CALLBACK_UNAVAILABLE",
    "CONTACT_FIELDS",
    "ERASED",
    "NOTE_LIMIT",
    "OFFLINE_MESSAGE_MAX",
    "PHONE",
    "VISITOR_COUNTER",
    "CallbackUnavailable",
    "InvalidState",
    "NotAllowed",
    "ServiceError",
    "accept_chat",
    "blacklist_client",
    "callback_unavailable_reason",
    "client_key",
    "close_idle_chat",
    "close_idle_chats",
    "confirm_client_email",
    "create_client",
    "create_label",
    "crm_assign_failed",
    "decline_offer",
    "due_idle_chats",
    "erase_client",
    "erase_expired_chats",
    "find_or_create_client",
    "finish_chat",
    "finish_idle_chat",
    "get_or_create_client",
    "lapse_due_offers",
    "lapse_offer",
    "leave_offline_message",
    "lift_blacklist",
    "mark_chat_seen",
    "mark_message_delivery",
    "mark_offline_message_handled",
    "normalise_phone",
    "offer_waiting_to_free_agents",
    "open_chat",
    "post_agent_message",
    "post_bot_message",
    "post_client_message",
    "post_client_message_once",
    "post_note",
    "post_system_message",
    "queue_chat",
    "rate_chat",
    "reassign_chat",
    "record_call_progress",
    "record_consent",
    "record_language",
    "register_delivery_state_rule",
    "request_callback",
    "request_crm_assign",
    "retry_message",
    "return_chat_to_bot",
    "set_agent_status",
    "set_agent_typing",
    "set_business_hours",
    "set_chat_labels",
    "set_client_typing",
    "set_crm_panel",
    "set_max_chats",
    "set_routing",
    "show_visitor_data",
    "transfer_chat",
    "transfer_target",
    "update_agent_profile",
    "update_client_contact",
]
