"""JSON and ids in, strictly: what the database and the pages can hold."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import IO, Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from agents.content import scrub
from config.api_errors import not_json


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# No number of ours is that long (ids are at most 19 digits): a longer one is
# refused in our words, before Python's own limit on int() (4300 digits)
# answers with a hint about sys.set_int_max_str_digits.
MAX_NUMBER_CHARS = 100


def _integer(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number is longer than {MAX_NUMBER_CHARS} characters")
    return int(text)


def _decimal(text: str) -> float:
    number = float(text)
    if len(text) > MAX_NUMBER_CHARS or not math.isfinite(number):  # 1e999 is Infinity
        raise ValueError(f"a number is longer than {MAX_NUMBER_CHARS} characters or too large")
    return number


class Unstorable(ValueError):
    """JSON whose strings no column can keep (a NUL, half a surrogate pair)."""


def loads(raw: bytes | str, *, refuse_unstorable: bool = False) -> Any:
    """Parse a request body; ``ValueError`` for anything that is not plain JSON.

    NaN and Infinity are refused (JSON has neither), so are numbers too long
    or too large to be anything of ours, and nesting too deep for the parser.
    Strings are scrubbed of NUL and lone surrogates, or with
    ``refuse_unstorable`` such a string is ``Unstorable``.
    """
    try:
        value = json.loads(
            raw, parse_constant=_no_constant, parse_int=_integer, parse_float=_decimal
        )
        scrubbed = scrub(value)  # recursive too: deep nesting that parsed may end here
        unstorable = refuse_unstorable and scrubbed != value
    except RecursionError as error:
        raise ValueError("it is nested too deeply") from error
    except UnicodeDecodeError as error:
        raise ValueError("the body is not UTF-8") from error
    if unstorable:
        raise Unstorable("a text holds a NUL character or half of a surrogate pair")
    return value if refuse_unstorable else scrubbed


def id_from(text: str) -> int | None:
    """The row id a query parameter or a form value names, or None when it
    names none: digits only, at most 18 of them (a bigint's range), so no
    int() of a visitor's text meets Python's limit or the database's."""
    return int(text) if text.isascii() and text.isdigit() and len(text) < 19 else None


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
