"""A real Celery worker process runs a task through the real broker."""

from __future__ import annotations

from datetime import timedelta

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
