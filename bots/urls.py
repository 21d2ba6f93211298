from django.urls import path

from bots import views
from bots.models import URL_PREFIX

urlpatterns = [
    path(f"{URL_PREFIX}/<str:provider_id>/<str:token>", views.bot_event, name="bot-webhook"),
]
