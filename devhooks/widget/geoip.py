"""Where a visitor's address is, when the operator gives a GeoIP2/GeoLite2
City database file (``GEOIP_DATABASE``, docs/widget.md); empty strings
otherwise, as webhooks want them (docs/webhooks.md, ``session.geoip``)."""

from __future__ import annotations

import ipaddress
import logging
from functools import cache
from typing import Any

from django.conf import settings

from devhooks.visitor_data import GEOIP_FIELDS

logger = logging.getLogger(__name__)


@cache
def _reader(path: str) -> Any:
    import maxminddb

    return maxminddb.open_database(path)


def _name(record: Any, key: str) -> str:
    names = record.get(key, {}).get("names", {}) if isinstance(record, dict) else {}
    return str(names.get("en", "")) if isinstance(names, dict) else ""


def _part(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def lookup(ip_addr: str) -> dict[str, str]:
    """The geoip object of ``ip_addr``: every field, ``""`` where unknown."""
    empty = dict.fromkeys(GEOIP_FIELDS, "")
    path = settings.GEOIP_DATABASE
    if not path or not ip_addr:
        return empty
    try:
        ipaddress.ip_address(ip_addr)
        found = _reader(path).get(ip_addr)
    except Exception:  # a bad file or address: the chat goes on without a place
        logger.warning("geoip.lookup_failed", exc_info=True)
        return empty
    if not isinstance(found, dict):
        return empty
    subdivisions = found.get("subdivisions") or [{}]
    region = _part(subdivisions[0] if isinstance(subdivisions, list) else None)
    location, traits, country = (_part(found.get(key)) for key in ("location", "traits", "country"))
    return {
        "region_code": str(region.get("iso_code", "")),
        "country": _name(found, "country"),
        "country_code": str(country.get("iso_code", "")),
        "region": _name({"r": region}, "r"),
        "city": _name(found, "city"),
        "latitude": str(location.get("latitude", "")),
        "longitude": str(location.get("longitude", "")),
        "organization": str(traits.get("organization", "") or traits.get("isp", "")),
    }
