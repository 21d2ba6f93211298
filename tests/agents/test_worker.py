"""A real Celery worker process runs a task through the real broker."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from agents.models import Chat
from agents.tasks import finish_inactive_chats
from tests.factories import ChatFactory, MessageFactory
from tests.worker import Worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_worker_finishes_inactive_chats(celery_worker: Worker, settings) -> None:
    old = timezone.now() - timedelta(hours=settings.INACTIVE_CHAT_HOURS + 1)
    idle = ChatFactory.create(created=old)
    MessageFactory.create(chat=idle, created=old)
    busy = ChatFactory.create(created=old)
    MessageFactory.create(chat=busy)  # written just now

    finish_inactive_chats.delay()

    wait_for(lambda: Chat.objects.get(pk=idle.pk).state == Chat.State.FINISHED, timeout=30)
    assert Chat.objects.get(pk=busy.pk).state == Chat.State.QUEUED
    assert "finish_inactive_chats" in celery_worker.log()


def test_the_worker_mails_a_finished_chats_transcript(celery_worker: Worker, settings) -> None:
    """Without EMAIL_URL each mail is a file under VAR_DIR/mail/ (make run's default)."""
    from agents import services
    from agents.models import Mail
    from tests.factories import ClientFactory, text

    client = ClientFactory.create(name="Wendy", email="wendy@example.com", email_from="integrator")
    chat = services.post_client_message(client=client, content=text("Please mail me this")).chat
    folder = Path(settings.VAR_DIR) / "mail"
    before = set(folder.glob("*")) if folder.exists() else set()

    services.finish_chat(chat=chat)  # the worker gets the mail's id once this commits

    wait_for(lambda: Mail.objects.get(chat=chat).status == Mail.Status.SENT, timeout=30)
    [written] = set(folder.glob("*")) - before
    content = written.read_text()
    assert "To: wendy@example.com" in content and "Please mail me this" in content
    written.unlink()


def test_the_worker_moves_an_unanswered_offer_on_when_its_time_is_up(
    celery_worker: Worker,
) -> None:
    """Each offer's own timer (docs/routing.md): queued with the offer, run
    by the worker at the offer's end, not before."""
    from agents import services
    from agents.models import Channel, ChatOffer
    from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

    ann, bob = (AgentFactory.create(name=n, is_online=True) for n in ("Ann", "Bob"))
    channel = ChannelFactory.create(
        agents=[ann, bob], routing_mode=Channel.RoutingMode.OFFER, offer_seconds=5
    )
    client = ClientFactory.create(channel=channel)
    chat = services.post_client_message(client=client, content=text("anyone?")).chat
    first = ChatOffer.objects.get(chat=chat)

    wait_for(lambda: ChatOffer.objects.filter(chat=chat).count() == 2, timeout=30)

    first.refresh_from_db()
    assert first.outcome == ChatOffer.Outcome.LAPSED
    assert first.ended_at is not None and first.ended_at >= first.expires_at
    second = ChatOffer.objects.get(chat=chat, outcome=ChatOffer.Outcome.PENDING)
    assert second.agent_id != first.agent_id
    assert "lapse_offer" in celery_worker.log()


def test_the_worker_closes_an_idle_chat_the_agent_answered_last(celery_worker: Worker) -> None:
    """The beat's task (docs/routing.md, "Idle chats close") run by the
    worker: the chat the agent answered closes, after the warning; the one
    the client wrote in last stays open."""
    from agents import services
    from agents.models import Message
    from agents.tasks import close_idle_chats
    from tests.factories import AgentFactory, ChannelFactory, ClientFactory, text

    ann = AgentFactory.create(name="Ann", is_online=True)
    channel = ChannelFactory.create(agents=[ann], idle_close_minutes=5, idle_warning="Bye now")
    chats = []
    for _ in range(2):
        client = ClientFactory.create(channel=channel)
        chat = services.post_client_message(client=client, content=text("hi")).chat
        services.accept_chat(chat=chat, agent=ann)
        services.post_agent_message(chat=chat, agent=ann, content=text("Done."))
        chat.messages.update(created=timezone.now() - timedelta(minutes=6))
        chats.append(chat)
    idle, waiting = chats
    services.post_client_message(client=waiting.client, content=text("one more thing"))

    close_idle_chats.delay()

    wait_for(lambda: Chat.objects.get(pk=idle.pk).state == Chat.State.FINISHED, timeout=30)
    assert idle.messages.filter(payload__has_key=Message.IDLE_WARNING, text="Bye now").exists()
    assert Chat.objects.get(pk=waiting.pk).state == Chat.State.ACTIVE
    assert "close_idle_chats" in celery_worker.log()
