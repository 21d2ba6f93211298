"""The agent pages at /agent/: server-rendered, live through one poll a second.

Every view is for a signed-in agent and shows only chats, calls and offline
messages of the agent's channels; every state change goes through
``agents.services``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.utils.translation import ngettext_lazy
from django.views.decorators.http import require_GET, require_POST

from agents import selectors, services, transcripts
from agents.api.parsers import id_from
from agents.api.serializers import MessageIn
from agents.attachments import KINDS
from agents.models import Agent, Call, Chat, Label, Message, OfflineMessage
from agents.streams import newest_event_id
from config.text import TEXT_LIMIT

MESSAGE_PAGE = 500
LIST_LENGTH = 100


def _agent(request: HttpRequest) -> Agent:
    assert isinstance(request.user, Agent)
    return request.user


def _chat(request: HttpRequest, chat_id: int) -> Chat:
    try:
        return selectors.chat_for_agent(agent=_agent(request), chat_id=chat_id)
    except Chat.DoesNotExist as error:
        raise Http404("no such chat") from error


def _wants_json(request: HttpRequest) -> bool:
    return request.headers.get("X-Requested-With") == "fetch"


def _done(request: HttpRequest, chat: Chat | None = None, fragment: str = "") -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"ok": True})
    if chat is None:
        return redirect("agent:home")
    return redirect(reverse("agent:chat", args=[chat.pk]) + fragment)


def _refused(request: HttpRequest, error: services.ServiceError, chat: Chat) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": {"code": error.code, "message": error.message}}, status=400)
    messages.error(request, error.message)
    return redirect("agent:chat", chat.pk)


def _back(request: HttpRequest) -> str:
    """Where a form of the lists returns to: the page it was on, if on this site."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return reverse("agent:home")


def _lists(agent: Agent, *, chat: Chat | None, back: str) -> dict[str, Any]:
    """The left column: chats, calls and offline messages of my channels.

    ``back`` is the page the column's forms return to when sent without
    JavaScript; ``chat`` is the open chat, marked in the lists.
    """
    calls = list(selectors.calls_for_agent(agent=agent)[:LIST_LENGTH])
    offline = list(selectors.offline_messages_for_agent(agent=agent)[:LIST_LENGTH])
    queue = list(selectors.queue_for_agent(agent=agent)[:LIST_LENGTH])
    active = list(selectors.active_for_agent(agent=agent)[:LIST_LENGTH])
    with_bot = list(selectors.with_bot_for_agent(agent=agent)[:LIST_LENGTH])
    selectors.with_last_messages([*queue, *active, *with_bot])  # one query for the three
    return {
        "queue": queue,
        "active": active,
        "with_bot": with_bot,
        "calls": calls,
        "open_calls": sum(call.is_open for call in calls),
        "offline_messages": offline,
        "unhandled_offline": sum(item.handled_at is None for item in offline),
        "chat": chat,
        "back": back,
        # A list at its length may leave out a chat that a message brings in:
        # the page then asks on every event (static/agent/app.js, elsewhere).
        "cut": LIST_LENGTH in (len(queue), len(active), len(with_bot)),
    }


def _is_mine(agent: Agent, chat: Chat) -> bool:
    return chat.state == Chat.State.ACTIVE and chat.agents.filter(pk=agent.pk).exists()


def _panel_context(agent: Agent, chat: Chat) -> dict[str, Any]:
    """The side panel: the client, the labels, the visitor, the CRM card,
    earlier chats."""
    return {
        "chat": chat,
        "mine": _is_mine(agent, chat),
        "chat_labels": list(chat.labels.all()),
        "all_labels": list(selectors.labels()),
        "earlier": selectors.earlier_chats(chat=chat, agent=agent),
        # The address a transcript would go to (the CRM's for this chat, when
        # it gave one), and whether it may.
        "transcript_email": transcripts.client_email(chat),
        "email_trusted": transcripts.client_email_trusted(chat),
    }


def _chat_context(agent: Agent, chat: Chat) -> dict[str, Any]:
    chat_messages = list(selectors.messages_of(chat=chat).reverse()[:MESSAGE_PAGE])[::-1]
    panel = _panel_context(agent, chat)
    mine = panel["mine"]
    return {
        **panel,
        "transfer_agents": list(selectors.transfer_agents(chat=chat, agent=agent)) if mine else [],
        "attach_limit": settings.AGENT_FILE_MAX_BYTES,
        "attach_accept": ",".join(
            f".{extension}"
            for kind in settings.AGENT_FILE_TYPES
            for extension in KINDS.get(kind, KINDS["txt"]).extensions
        ),
        "departments": list(selectors.departments()) if mine else [],
        "chat_messages": chat_messages,
        "last_message_id": chat_messages[-1].pk if chat_messages else 0,
    }


@login_required
@require_GET
def home(request: HttpRequest, chat_id: int | None = None) -> HttpResponse:
    agent = _agent(request)
    # Read before the page's state: the stream replays what comes after it.
    live_id = newest_event_id()
    chat = _chat(request, chat_id) if chat_id is not None else None
    context: dict[str, Any] = {"live_id": live_id}
    if chat is not None:
        context.update(_chat_context(agent, chat))
        if context["last_message_id"]:
            services.mark_chat_seen(agent=agent, chat=chat, message_id=context["last_message_id"])
    context.update(_lists(agent, chat=chat, back=request.path))
    return render(request, "agents/workspace.html", context)


# A search reaches the newest 1,000 matching chats: counting every chat with
# a common word costs more than the page, and forty pages are more than
# anyone reads; a narrower search finds older ones (docs/agent-pages.md).
SEARCH_REACH = 1000


class SearchPages(Paginator):
    """The pages of a search's first ``cap`` chats; ``capped``: more match."""

    def __init__(self, object_list: QuerySet[Chat], per_page: int, *, cap: int) -> None:
        super().__init__(object_list, per_page)
        self.chats = object_list
        self.cap = cap

    @cached_property
    def found(self) -> int:
        """How many chats match, counted to one past the cap."""
        return self.chats[: self.cap + 1].count()

    @cached_property
    def count(self) -> int:
        return min(self.found, self.cap)

    @property
    def capped(self) -> bool:
        return self.found > self.cap


@login_required
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    search = request.GET.get("q", "").strip()[:200]
    label = request.GET.get("label", "").strip()[: Label.NAME_LENGTH]
    chats = selectors.finished_for_agent(
        agent=_agent(request), search=search, label=label, reach=SEARCH_REACH + 1
    )
    pages = SearchPages(chats, 25, cap=SEARCH_REACH) if search else Paginator(chats, 25)
    page = pages.get_page(request.GET.get("page"))
    query = urlencode({key: value for key, value in (("q", search), ("label", label)) if value})
    context = {
        "page": page,
        "search": search,
        "label": label,
        "labels": selectors.labels(),
        "query": query,
    }
    return render(request, "agents/history.html", context)


def _handed_on(chat: Chat) -> bool:
    """Whether the chat is as its last transfer left it: with the agent it was
    handed to, or waiting in the queue for a department. Once an agent took
    it from the queue (Reply after the transfer) it is simply theirs."""
    if chat.transferred_at is None:
        return False
    return chat.accepted_at is None or chat.transferred_at > chat.accepted_at


def _notice(chat: Chat, agent: Agent) -> dict[str, Any]:
    """What the page's notifications say of a chat of the lists; ``offer``:
    whether a queued chat is offered to this agent (``me``), to another
    (``other``) or to nobody (docs/routing.md)."""
    message = getattr(chat, "last_message", None)
    text = ""
    if message is not None:
        text = message.text or str(message.payload.get("file_name", "")) or message.type
    notice = {
        "id": chat.pk,
        "name": chat.client.display_name,
        "unread": getattr(chat, "unread", 0),
        "last_id": getattr(chat, "last_message_pk", None) or 0,
        "text": text[:120],
        "offer": _offer(chat, agent),
    }
    if _handed_on(chat):  # who handed it on, when, and the note for the taker
        notice["transferred_by"] = chat.transferred_by.name if chat.transferred_by else ""
        notice["transferred_at"] = chat.transferred_at.isoformat() if chat.transferred_at else ""
        notice["transfer_note"] = chat.transfer_note[:300]
    return notice


def _offer(chat: Chat, agent: Agent) -> str:
    if chat.offered_to_id is None:
        return ""
    return "me" if chat.offered_to_id == agent.pk else "other"


def _newest_message_id(chat: Chat) -> int:
    """The page's own "after" is no proof of a message: "seen" never goes past
    the chat's real last one (it does not move back)."""
    return chat.messages.order_by("-pk").values_list("pk", flat=True).first() or 0


@login_required
@require_GET
def live(request: HttpRequest) -> JsonResponse:
    """All that changed for this page, in one answer: lists, new messages of the
    open chat, delivery states, typing. The page asks once a second."""
    agent = _agent(request)
    chat_id = id_from(request.GET.get("chat", ""))
    chat = _chat(request, chat_id) if chat_id is not None else None
    back = reverse("agent:chat", args=[chat.pk]) if chat else reverse("agent:home")
    data: dict[str, Any] = {"online": agent.is_online}
    if chat is not None:
        # A page's last message id; a number no message id can be is no place to start.
        after_id = id_from(request.GET.get("after", "0")) or 0
        new = list(selectors.messages_of(chat=chat).filter(pk__gt=after_id)[:MESSAGE_PAGE])
        if request.GET.get("seen") == "1":  # in sight: what the page has and what it gets now
            shown = new[-1].pk if new else min(after_id, _newest_message_id(chat))
            if shown:
                services.mark_chat_seen(agent=agent, chat=chat, message_id=shown)
        outbound = chat.messages.filter(author=Message.Author.AGENT).exclude(delivery_status="")
        panel = _panel_context(agent, chat)
        data["chat"] = {
            "state": chat.state,
            "mine": panel["mine"],  # a transfer changes it, not the state
            "client_typing": chat.client_typing,
            "messages_html": render_to_string(
                "agents/_messages.html", {"chat_messages": new, "chat": chat}, request=request
            ),
            "last_message_id": new[-1].pk if new else after_id,
            "deliveries": {
                str(m.pk): render_to_string(
                    "agents/_delivery.html", {"m": m, "chat": chat}, request=request
                )
                for m in outbound.order_by("-id")[:100]
            },
            "panel_html": render_to_string("agents/_panel.html", panel, request=request),
        }
    lists = _lists(agent, chat=chat, back=back)
    data["queue_count"] = len(lists["queue"])
    data["lists_html"] = render_to_string("agents/_lists.html", lists, request=request)
    data["notify"] = {
        "queued": [_notice(c, agent) for c in lists["queue"]],
        "mine": [_notice(c, agent) for c in lists["active"]],
    }
    data["server_time"] = timezone.now().isoformat()
    return JsonResponse(data)


@login_required
@require_POST
def status(request: HttpRequest) -> HttpResponse:
    online = request.POST.get("status") == "online"
    services.set_agent_status(agent=_agent(request), online=online)
    if _wants_json(request):
        return JsonResponse({"ok": True, "online": online})
    return redirect(_back(request))


def _act(
    request: HttpRequest,
    chat_id: int,
    change: Callable[[Chat, Agent], object],
    *,
    fragment: str = "",
) -> HttpResponse:
    """Apply one service to one of my chats; a refusal is shown, not raised.
    ``fragment`` is where the chat page opens afterwards (``#reply-box``)."""
    chat = _chat(request, chat_id)
    try:
        change(chat, _agent(request))
    except services.ServiceError as error:
        return _refused(request, error, chat)
    return _done(request, chat, fragment)


@login_required
@require_POST
def accept(request: HttpRequest, chat_id: int) -> HttpResponse:
    """Reply: the chat is mine, and its page opens with the cursor in the reply box."""
    return _act(
        request,
        chat_id,
        lambda chat, agent: services.accept_chat(chat=chat, agent=agent),
        fragment="#reply-box",
    )


@login_required
@require_POST
def decline(request: HttpRequest, chat_id: int) -> HttpResponse:
    """Decline a chat offered to me: it goes to the next agent (docs/routing.md)."""
    return _act(
        request, chat_id, lambda chat, agent: services.decline_offer(chat=chat, agent=agent)
    )


@login_required
@require_POST
def finish(request: HttpRequest, chat_id: int) -> HttpResponse:
    return _act(request, chat_id, lambda chat, agent: services.finish_chat(chat=chat, agent=agent))


@login_required
@require_POST
def send(request: HttpRequest, chat_id: int) -> HttpResponse:
    data = MessageIn(data={"type": "text", "text": request.POST.get("text", "")})
    if not data.is_valid():
        error = services.ServiceError(
            ngettext_lazy(
                "write a message of up to %(limit)d character first",
                "write a message of up to %(limit)d characters first",
                "limit",
            ),
            limit=TEXT_LIMIT,
        )
        return _refused(request, error, _chat(request, chat_id))
    content = data.validated_data["content"]
    if request.POST.get("as") == "note":  # the reply box in note mode, or the note box
        return _act(
            request,
            chat_id,
            lambda chat, agent: services.post_note(chat=chat, agent=agent, text=content.text),
        )
    return _act(
        request,
        chat_id,
        lambda chat, agent: services.post_agent_message(chat=chat, agent=agent, content=content),
    )


@login_required
@require_POST
def typing(request: HttpRequest, chat_id: int) -> HttpResponse:
    on = request.POST.get("typing") == "true"
    return _act(
        request,
        chat_id,
        lambda chat, agent: services.set_agent_typing(chat=chat, agent=agent, typing=on),
    )


@login_required
@require_POST
def retry(request: HttpRequest, chat_id: int, message_id: int) -> HttpResponse:
    def send_again(chat: Chat, agent: Agent) -> None:
        message = chat.messages.filter(pk=message_id).first()
        if message is None:
            raise Http404("no such message")
        services.retry_message(message=message, agent=agent)

    return _act(request, chat_id, send_again)


@login_required
@require_POST
def crm_assign(request: HttpRequest, chat_id: int) -> HttpResponse:
    """The CRM panel's "Assign to CRM card"."""
    return _act(
        request, chat_id, lambda chat, agent: services.request_crm_assign(chat=chat, agent=agent)
    )


def _act_from_lists(request: HttpRequest, change: Callable[[], object]) -> HttpResponse:
    """Apply one service to a call or an offline message of the lists; a refusal
    is shown, not raised, and the agent stays on the page the form was on."""
    try:
        change()
    except services.ServiceError as error:
        if _wants_json(request):
            body = {"error": {"code": error.code, "message": error.message}}
            return JsonResponse(body, status=400)
        messages.error(request, error.message)
    else:
        if _wants_json(request):
            return JsonResponse({"ok": True})
    return redirect(_back(request))


@login_required
@require_POST
def call_progress(request: HttpRequest, call_id: int) -> HttpResponse:
    """An agent records a step of a call: agent or client connected, ended, failed."""
    agent = _agent(request)
    try:
        call = selectors.call_for_agent(agent=agent, call_id=call_id)
    except Call.DoesNotExist as error:
        raise Http404("no such call") from error
    return _act_from_lists(
        request,
        lambda: services.record_call_progress(
            call=call,
            agent=agent,
            status=request.POST.get("status", ""),
            reason=request.POST.get("reason", ""),
            record_url=request.POST.get("record_url", ""),
        ),
    )


@login_required
@require_POST
def offline_handled(request: HttpRequest, offline_message_id: int) -> HttpResponse:
    agent = _agent(request)
    try:
        offline = selectors.offline_message_for_agent(
            agent=agent, offline_message_id=offline_message_id
        )
    except OfflineMessage.DoesNotExist as error:
        raise Http404("no such offline message") from error
    return _act_from_lists(
        request,
        lambda: services.mark_offline_message_handled(offline_message=offline, agent=agent),
    )
