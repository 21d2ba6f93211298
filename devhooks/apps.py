from django.apps import AppConfig


class DevhooksConfig(AppConfig):
    name = "devhooks"
    verbose_name = "Developer API"

    def ready(self) -> None:
        from devhooks import subscribers

        subscribers.connect()
