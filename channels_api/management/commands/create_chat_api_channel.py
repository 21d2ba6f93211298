import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import audit
from agents.models import Agent
from channels_api.services import create_chat_api_channel


class Command(BaseCommand):
    help = (
        'Create a Chat API channel; print {"id", "public_id", "endpoint_url", "status_url", '
        '"signing_secret"}.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument("--webhook-url", required=True, help="the integrator's server")
        parser.add_argument("--chunked", action="store_true", help="chunked transfer encoding")
        parser.add_argument(
            "--agent", action="append", default=[], metavar="EMAIL", help="assign an agent"
        )
        parser.add_argument(
            "--unique-message-ids", action="store_true", help="de-duplicate by message.id"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        emails = [email.strip().lower() for email in options["agent"]]
        agents = list(Agent.objects.filter(email__in=emails))
        missing = set(emails) - {agent.email for agent in agents}
        if missing:
            raise CommandError(f"no agent with email {', '.join(sorted(missing))}")
        try:
            chat_api, secret = create_chat_api_channel(
                name=options["name"],
                webhook_url=options["webhook_url"],
                chunked=options["chunked"],
                agents=agents,
                unique_message_ids=options["unique_message_ids"],
                by=audit.COMMAND_LINE,
            )
        except ValidationError as error:
            raise CommandError("; ".join(error.messages)) from error
        self.stdout.write(
            json.dumps(
                {
                    "id": chat_api.channel_id,
                    "public_id": chat_api.channel.public_id,
                    "endpoint_url": chat_api.endpoint_url,
                    "status_url": chat_api.status_url,
                    "signing_secret": secret,
                }
            )
        )
