"""Transfer: my active chat to another online agent or to a department, with
a note (docs/agent-pages.md, "Transfer")."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_POST

from agents import services
from agents.api.parsers import id_from
from agents.models import Agent, Chat, Department
from agents.pages.workspace import _act


def _target(value: str, chat: Chat) -> tuple[Agent | None, Department | None]:
    """``agent:<id>`` or ``department:<id>``, as the transfer form names them."""
    kind, _, number = value.partition(":")
    target_id = id_from(number)
    if target_id is None or kind not in ("agent", "department"):
        raise services.ServiceError(gettext_lazy("choose an agent or a department"))
    if kind == "agent":
        return services.transfer_target(chat=chat, agent_id=target_id)
    return services.transfer_target(chat=chat, department_id=target_id)


@login_required
@require_POST
def transfer(request: HttpRequest, chat_id: int) -> HttpResponse:
    note = request.POST.get("note", "")

    def hand_over(chat: Chat, agent: Agent) -> Chat:
        to_agent, department = _target(request.POST.get("to", ""), chat)
        return services.transfer_chat(
            chat=chat, agent=agent, to_agent=to_agent, department=department, note=note
        )

    return _act(request, chat_id, hand_over)
