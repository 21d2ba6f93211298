from django.apps import AppConfig


class DevhooksConfig(AppConfig):
    name = "devhooks"
    verbose_name = "Developer API"

    def ready(self) -> None:
        from agents import demo
        from devhooks.webhooks import subscribers
        from devhooks.webhooks.demo import seed_demo_crm, seed_demo_widget

        subscribers.connect()
        demo.register(seed_demo_crm)
        demo.register(seed_demo_widget)
