from django.apps import AppConfig


class ChannelsApiConfig(AppConfig):
    name = "channels_api"
    verbose_name = "Chat Channel API"
