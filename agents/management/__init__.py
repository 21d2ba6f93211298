"""What the core's management commands share."""

from django.core.management.base import CommandError

from agents.models import Channel


def channel_of(public_id: str) -> Channel:
    """The channel a command's ``--channel`` names, or the command's error."""
    channel = Channel.objects.filter(public_id=public_id).first()
    if channel is None:
        raise CommandError(f"no channel with public id {public_id}")
    return channel
