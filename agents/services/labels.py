"""Labels: the list admins keep (``create_label``) and the ones agents put
on a chat (``set_chat_labels``; docs/agent-pages.md, "Labels")."""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.translation import gettext_lazy

from agents import events, selectors
from agents.models import Agent, Chat, Label
from agents.services.errors import NotAllowed, ServiceError
from agents.services.locks import _lock


@transaction.atomic
def create_label(*, name: str, colour: str = "") -> Label:
    """A new label on the list. Names are unique whatever their case
    ("Billing" is "billing"): an existing one is refused, not changed."""
    name = name.strip()
    label = Label(name=name)
    if colour.strip():  # else the model's default
        label.colour = colour.strip().lower()
    try:
        label.full_clean(validate_unique=False)
    except ValidationError as error:
        raise ServiceError(_first_complaint(error)) from None
    if Label.objects.filter(name__iexact=name).exists():
        raise ServiceError(gettext_lazy("a label named %(name)s exists already"), name=name)
    label.save()
    return label


def _first_complaint(error: ValidationError) -> str:
    field, messages = next(iter(error.message_dict.items()))
    return f"{field}: {messages[0]}"


@transaction.atomic
def set_chat_labels(*, chat: Chat, agent: Agent, names: Iterable[str]) -> Chat:
    """Replace ``chat``'s labels with the named ones of the list (none: no
    label). Any agent who sees the chat may, in any state of it: a lead
    labels a finished chat after the fact. A name not on the list refuses
    the whole change, naming it. Publishes ``ChatLabelled`` when the labels
    changed, nothing when they did not."""
    if not selectors.visible_channels(agent).filter(pk=chat.channel_id).exists():
        raise NotAllowed(gettext_lazy("only agents of the chat's channel label it"))
    wanted = list(dict.fromkeys(name.strip() for name in names if name.strip()))
    labels = list(Label.objects.filter(name__in=wanted))
    unknown = sorted(set(wanted) - {label.name for label in labels})
    if unknown:
        raise ServiceError(
            gettext_lazy("not on the list of labels: %(names)s"), names=", ".join(unknown)
        )
    chat = _lock(chat)
    before = set(chat.labels.values_list("pk", flat=True))
    if before == {label.pk for label in labels}:
        return chat
    chat.labels.set(labels)
    names_now = tuple(sorted(label.name for label in labels))
    events.publish(events.ChatLabelled(chat_id=chat.pk, agent_id=agent.pk, labels=names_now))
    return chat
