"""JSON in, strictly: what the database and the pages can hold."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from agents.content import scrub
from config.api_errors import not_json


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class Unstorable(ValueError):
    """JSON whose strings no column can keep (a NUL, half a surrogate pair)."""


def loads(raw: bytes | str, *, refuse_unstorable: bool = False) -> Any:
    """Parse a request body; ``ValueError`` for anything that is not plain JSON.

    NaN and Infinity are refused (JSON has neither), so is nesting too deep
    for the parser. Strings are scrubbed of NUL and lone surrogates, or with
    ``refuse_unstorable`` such a string is ``Unstorable``.
    """
    try:
        value = json.loads(raw, parse_constant=_no_constant)
        scrubbed = scrub(value)  # recursive too: deep nesting that parsed may end here
        unstorable = refuse_unstorable and scrubbed != value
    except RecursionError as error:
        raise ValueError("it is nested too deeply") from error
    except UnicodeDecodeError as error:
        raise ValueError("the body is not UTF-8") from error
    if unstorable:
        raise Unstorable("a text holds a NUL character or half of a surrogate pair")
    return value if refuse_unstorable else scrubbed


class StrictJSONParser(JSONParser):
    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return loads(stream.read())
        except ValueError as error:
            raise ParseError(not_json(error)) from error
