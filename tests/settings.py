"""The settings the test suite runs on (docs/testing.md): production's, but for
the password hash, the flush of PostgreSQL and the retry spacing.

pytest-django loads this module (pyproject.toml), and the web server and Celery
worker processes the tests start inherit it through DJANGO_SETTINGS_MODULE.
"""

import os

from django.conf import global_settings

from config.settings import *  # noqa: F403

# PBKDF2 spends a quarter of a second of CPU on every hash, and the suite makes
# one for nearly every agent it creates and signs in: minutes of a CI run. New
# hashes are MD5 here; production's hashers stay in the list, so a hash they
# made is still checked (tests/agents/test_passwords.py keeps one at real cost).
PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *global_settings.PASSWORD_HASHERS,
]

# On PostgreSQL a transactional test's flush deletes rows instead of
# truncating tables (tests/postgresql/base.py): the same server and schema,
# 0.2 s less per test that commits.
if DATABASES["default"]["ENGINE"] == "config.postgresql":  # noqa: F405
    DATABASES["default"]["ENGINE"] = "tests.postgresql"  # noqa: F405

# A failing send's retries come five times sooner than production spaces them
# (3 s apart: 0.6 s), so a test that waits for a failure to be told waits less;
# tests/delivery/test_policies.py measures the real spacing in a worker started
# with DELIVERY_RETRY_SCALE=1. The variable, when set, wins.
if "DELIVERY_RETRY_SCALE" not in os.environ:
    DELIVERY_RETRY_SCALE = 0.2

# The slot tests (tests/delivery/test_slots.py, test_in_flight.py, ...) pin how
# tries wait their turn at two in flight, the limit a new endpoint starts at;
# tests/delivery/test_limit.py raises it to see the limit grow. The variable,
# when set, wins.
if "DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT" not in os.environ:
    DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = 2
