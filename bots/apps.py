from django.apps import AppConfig


class BotsConfig(AppConfig):
    name = "bots"
    verbose_name = "Bot API"

    def ready(self) -> None:
        from agents import demo, routing
        from bots import subscribers
        from bots.demo import seed_demo_bot
        from bots.selectors import active_attachment_of

        subscribers.connect()
        demo.register(seed_demo_bot)
        routing.set_bot_check(
            lambda channel: active_attachment_of(channel_id=channel.pk) is not None
        )
