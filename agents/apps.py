from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "agents"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from agents import audit, live, sessions, tasks, transcripts

        audit.connect()

        live.connect()
        sessions.connect()
        tasks.connect()
        transcripts.connect()
