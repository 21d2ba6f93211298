import json
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.core.validators import validate_email
from django.db import transaction

from agents import accounts, audit
from agents.models import MAX_CHATS_LIMIT, Agent
from agents.services import set_agent_status
from agents.tokens import issue_token


class Command(BaseCommand):
    help = 'Create an agent; print {"id", "email", "role", "token"}.'

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--email", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--password", help="for the agent pages; none: API only")
        parser.add_argument("--online", action="store_true", help="start online")
        parser.add_argument(
            "--role",
            choices=Agent.Role.values,
            default=Agent.Role.AGENT,
            help="agent (answers chats), supervisor (and the Team view), admin (and the "
            "Django admin, every channel); docs/routing.md",
        )
        parser.add_argument(
            "--max-chats",
            type=int,
            help="chats answered at once (1-100; default: AGENT_MAX_CHATS, docs/routing.md)",
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        email = options["email"].strip().lower()
        try:
            validate_email(email)
        except ValidationError as error:
            raise CommandError(f"not an email address: {email}") from error
        if Agent.objects.filter(email=email).exists():
            raise CommandError(f"an agent with email {email} exists already")
        max_chats = options["max_chats"]
        if max_chats is not None and not 1 <= max_chats <= MAX_CHATS_LIMIT:
            raise CommandError(f"--max-chats is 1 to {MAX_CHATS_LIMIT}")
        agent = Agent.objects.create_user(
            email, name=options["name"], max_chats=max_chats, role=options["role"]
        )
        if options["password"] is not None:
            try:  # the validators know the agent's name and address: it is made first
                accounts.set_password(agent=agent, password=options["password"])
            except accounts.PasswordRefused as error:
                raise CommandError(f"password refused: {error.message}") from error
        if options["online"]:
            set_agent_status(agent=agent, online=True)
        audit.record(
            audit.Action.AGENT_CREATED,
            actor=audit.COMMAND_LINE,
            target=audit.of_agent(agent),
            role=agent.role,
            max_chats=max_chats,
        )
        token = issue_token(agent=agent, by=audit.COMMAND_LINE)
        made = {"id": agent.pk, "email": agent.email, "role": agent.role, "token": token}
        self.stdout.write(json.dumps(made))
