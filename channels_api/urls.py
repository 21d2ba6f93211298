from django.conf import settings
from django.urls import path

from channels_api import views
from channels_api.models import URL_PREFIX

urlpatterns = [
    path(
        f"{URL_PREFIX}/<str:path_secret>/<str:public_id>/status",
        views.status,
        name="chat-api-status",
    ),
    path(
        f"{URL_PREFIX}/<str:path_secret>/<str:public_id>",
        views.user_message,
        name="chat-api-message",
    ),
]

if settings.DEBUG:
    urlpatterns.append(
        path("demo/integrator/<str:public_id>", views.demo_integrator, name="demo-integrator")
    )
