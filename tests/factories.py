from __future__ import annotations

from typing import Any

import factory
from django.test import Client as Browser
from factory.django import DjangoModelFactory

from agents import addresses
from agents.content import Content
from agents.models import Agent, Channel, Chat, Client, Message
from agents.services.clients import _next_visitor_number


class AgentFactory(DjangoModelFactory[Agent]):
    class Meta:
        model = Agent
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"agent{n}@example.com")
    name = factory.Sequence(lambda n: f"Agent {n}")
    password = factory.django.Password("agent-password")


class ChannelFactory(DjangoModelFactory[Channel]):
    class Meta:
        model = Channel
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"Channel {n}")
    kind = Channel.Kind.CHAT_API

    @factory.post_generation
    def agents(self, create: bool, extracted: list[Agent] | None, **kwargs: Any) -> None:
        if create and extracted:
            self.agents.add(*extracted)


class ClientFactory(DjangoModelFactory[Client]):
    class Meta:
        model = Client
        skip_postgeneration_save = True

    channel = factory.SubFactory(ChannelFactory)
    external_id = factory.Sequence(lambda n: f"user-{n}")
    external_id_raw = factory.SelfAttribute("external_id")
    name = factory.Sequence(lambda n: f"Client {n}")
    visitor_number = factory.LazyFunction(_next_visitor_number)

    @factory.post_generation
    def email_from(obj: Client, create: bool, extracted: str | None, **kwargs: object) -> None:
        """``email_from="integrator"``: who gave the client's address
        (a ``ClientAddress.Source``), recorded as the services record it."""
        if create and extracted and obj.email:
            addresses.record_address(client=obj, address=obj.email, source=extracted)


class ChatFactory(DjangoModelFactory[Chat]):
    class Meta:
        model = Chat

    client = factory.SubFactory(ClientFactory)
    channel = factory.SelfAttribute("client.channel")
    state = Chat.State.QUEUED


class MessageFactory(DjangoModelFactory[Message]):
    class Meta:
        model = Message

    chat = factory.SubFactory(ChatFactory)
    author = Message.Author.CLIENT
    type = "text"
    text = factory.Sequence(lambda n: f"message {n}")


def text(value: str) -> Content:
    return Content("text", value, {})


def page_of(agent: Agent) -> Browser:
    """Django's test client, signed in as ``agent`` (the agent pages)."""
    page = Browser()
    page.force_login(agent)
    return page
