import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.audit import COMMAND_LINE
from bots.services import BotError, create_bot_provider


class Command(BaseCommand):
    help = 'Create a bot provider; print {"id", "provider_id", "webhook_url_prefix"}.'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)
        parser.add_argument(
            "--endpoint", required=True, help="the provider's URL; events go to <URL>/<token>"
        )
        parser.add_argument("--display-name", default="", help="the name clients see")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            provider = create_bot_provider(
                name=options["name"],
                endpoint_url=options["endpoint"],
                display_name=options["display_name"],
                by=COMMAND_LINE,
            )
        except BotError as error:
            raise CommandError(error.message) from error
        except ValidationError as error:
            raise CommandError("; ".join(error.messages)) from error
        self.stdout.write(
            json.dumps(
                {
                    "id": provider.pk,
                    "provider_id": provider.provider_id,
                    "webhook_url_prefix": provider.webhook_url_prefix,
                }
            )
        )
