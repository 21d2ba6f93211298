from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from agents import presence
from agents.models import Agent
from agents.tokens import agent_for_key


class AgentTokenAuthentication(BaseAuthentication):
    """``Authorization: Token <key>``."""

    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[Agent, None] | None:
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != self.keyword.lower().encode():
            # A key alone, or "Bearer <key>": say what is expected, not only
            # that credentials are missing.
            raise exceptions.AuthenticationFailed(
                "send the key as 'Authorization: Token <key>' (the word Token, a space, the key)"
            )
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization header must be 'Token <key>'")
        try:
            key = header[1].decode()
        except UnicodeError as error:
            raise exceptions.AuthenticationFailed("token is not valid") from error
        agent = agent_for_key(key)
        if agent is None:
            raise exceptions.AuthenticationFailed("token is not valid")
        agent.last_seen_at = presence.seen([agent.pk])  # a sign of life (docs/routing.md)
        return agent, None

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class AgentTokenScheme(OpenApiAuthenticationExtension):
    target_class = "agents.api.auth.AgentTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>`; `manage.py create_agent` prints a key.",
        }
