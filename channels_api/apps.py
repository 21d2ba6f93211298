from django.apps import AppConfig


class ChannelsApiConfig(AppConfig):
    name = "channels_api"
    verbose_name = "Chat Channel API"

    def ready(self) -> None:
        from agents import demo
        from channels_api import subscribers
        from channels_api.demo import demo_channel, seed_demo_channel

        subscribers.connect()
        demo.register(seed_demo_channel)
        demo.register_channel_kind("chat_api", demo_channel)
