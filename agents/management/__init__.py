"""What the core's management commands share."""

from django.core.management.base import CommandError

from agents.models import Channel, Client


def channel_of(public_id: str) -> Channel:
    """The channel a command's ``--channel`` names, or the command's error."""
    channel = Channel.objects.filter(public_id=public_id).first()
    if channel is None:
        raise CommandError(f"no channel with public id {public_id}")
    return channel


def client_of(channel: Channel, key: str) -> Client:
    """The client a command's ``--client`` names on ``channel``: a widget
    visitor by its visitor number, any other client by the integrator's id
    for them (the Chat API's sender.id). Or the command's error."""
    clients = Client.objects.filter(channel=channel)
    if channel.kind == Channel.Kind.WIDGET:
        found = clients.filter(visitor_number=int(key)).first() if key.isdecimal() else None
    else:
        found = clients.filter(external_id=key).first()
    if found is None:
        raise CommandError(f"no client {key} on channel {channel.public_id}")
    return found
