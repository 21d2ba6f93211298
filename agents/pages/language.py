"""The language of the agent pages and the admin (docs/translating.md): the
agent's own choice on the settings page, else what the browser asks for
(``Accept-Language``, Django's LocaleMiddleware rules), else English.

Only the pages people read are concerned: the APIs' wire formats and their
messages stay in English whatever a caller's browser says."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponseBase
from django.urls import reverse
from django.utils import translation
from django.utils.cache import patch_cache_control, patch_vary_headers
from django.views.decorators.cache import cache_page
from django.views.decorators.http import require_GET
from django.views.i18n import JavaScriptCatalog

from agents.models import Agent

PAGES = ("/agent/", "/admin/")
# The scripts' catalogue is kept a year: its address changes with its content.
CATALOGUE_SECONDS = 365 * 24 * 3600


def language_of(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if isinstance(user, Agent) and user.language in dict(settings.LANGUAGES):
        return user.language
    return translation.get_language_from_request(request)


def language_middleware(get_response: Callable[[HttpRequest], Any]) -> Callable[[HttpRequest], Any]:
    """After authentication (the agent's choice needs the agent). The
    language is active for the request alone: a request outside the pages
    served next by the same thread answers in English."""

    def middleware(request: HttpRequest) -> Any:
        if not request.path.startswith(PAGES):
            return get_response(request)
        language = language_of(request)
        with translation.override(language):
            request.LANGUAGE_CODE = language
            response = get_response(request)
        patch_vary_headers(response, ("Accept-Language",))
        response.headers.setdefault("Content-Language", language)
        return response

    return middleware


@functools.cache
def catalogue_version() -> str:
    """A digest of the compiled catalogues: a new translation is a new
    address, so browsers and the cache may keep the old one for good."""
    digest = hashlib.sha256()
    for folder in settings.LOCALE_PATHS:
        for compiled in sorted(folder.glob("*/LC_MESSAGES/*.mo")):
            digest.update(compiled.name.encode() + compiled.read_bytes())
    return digest.hexdigest()[:12]


def catalogue_url() -> str:
    """The active language's catalogue for the pages' scripts."""
    language = translation.get_language() or settings.LANGUAGE_CODE
    return f"{reverse('agent:catalogue', args=[language])}?v={catalogue_version()}"


_javascript_catalogue = cache_page(CATALOGUE_SECONDS, key_prefix="catalogue")(
    JavaScriptCatalog.as_view(domain="djangojs")
)


@require_GET
def catalogue(request: HttpRequest, language: str) -> HttpResponseBase:
    """The strings of static/agent/*.js in ``language`` (Django's
    ``gettext``, ``ngettext`` and ``interpolate``), served here: no CDN."""
    if language not in dict(settings.LANGUAGES):
        raise Http404
    with translation.override(language):
        response = _javascript_catalogue(request)
    patch_cache_control(response, public=True, max_age=CATALOGUE_SECONDS, immutable=True)
    return response
