"""The project's URLconf plus two API views: one that is not CSRF-exempt, to
see what a failed CSRF check on an API path answers, and one that crashes."""

from django.http import HttpRequest, HttpResponse
from django.urls import path

from config.urls import urlpatterns as project


def protected(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok")


def crash(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug")


urlpatterns = [path("api/csrf-protected", protected), path("api/crash", crash), *project]
