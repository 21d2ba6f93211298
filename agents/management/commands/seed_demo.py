import json
from typing import Any

from django.core.management.base import BaseCommand

from agents.demo import seed


class Command(BaseCommand):
    help = "Create demo data (admin, two agents, a channel of each kind); print it as JSON."

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps(seed(), indent=2))
