from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from django.db.models import Field

        from agents import audit, live, sessions, tasks, transcripts
        from config.lookups import AnyOf

        Field.register_lookup(AnyOf)

        audit.connect()

        live.connect()
        sessions.connect()
        tasks.connect()
        transcripts.connect()
