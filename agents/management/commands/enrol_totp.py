import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents import second_factor
from agents.models import Agent


class Command(BaseCommand):
    help = (
        "Turn on an agent's two-factor sign-in for a scripted set-up; print "
        '{"otpauth_url", "recovery_codes"} (docs/security.md, "Two-factor sign-in").'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--email", required=True)
        parser.add_argument(
            "--replace",
            action="store_true",
            help="replace the agent's second factor if it has one (else: refused)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        agent = Agent.objects.filter(email__iexact=options["email"].strip()).first()
        if agent is None:
            raise CommandError(f"no agent with email {options['email']}")
        try:
            enrolled = second_factor.enrol_for_command(agent=agent, replace=options["replace"])
        except second_factor.SecondFactorRefused as error:
            raise CommandError(f"{error.message}: --replace makes a new one") from error
        made = {"otpauth_url": enrolled.otpauth_url, "recovery_codes": enrolled.recovery_codes}
        self.stdout.write(json.dumps(made))
