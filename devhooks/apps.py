from django.apps import AppConfig


class DevhooksConfig(AppConfig):
    name = "devhooks"
    verbose_name = "Developer API"

    def ready(self) -> None:
        from agents import demo
        from devhooks.webhooks import subscribers
        from devhooks.webhooks.demo import seed_demo_crm
        from devhooks.widget import stream
        from devhooks.widget.demo import seed_demo_widget

        subscribers.connect()
        stream.connect()
        demo.register(seed_demo_crm)
        demo.register(seed_demo_widget)
