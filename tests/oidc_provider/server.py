"""The test provider in a process of its own: a new SQLite file under this
run's VAR_DIR and a new RS256 key each start, a free port, Django's
runserver. Started once per test module (its migrations take seconds)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import TracebackType
from urllib.parse import parse_qs, urljoin, urlsplit

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.conf import settings

from tests.oidc_provider.people import CLIENT_ID, CLIENT_SECRET, PASSWORD, Person
from tests.web.server import free_port
from tests.worker import ROOT

PROVIDER_NAME = "Test provider"


def new_key() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


class Provider:
    def __init__(self, *, redirect_uris: list[str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        name = f"oidc-provider-{uuid.uuid4().hex[:8]}"
        self.database = Path(settings.VAR_DIR) / f"{name}.sqlite3"
        self.log_path = Path(settings.VAR_DIR) / f"{name}.log"
        # Not the service's settings or database: the provider's own.
        inherited = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        self.env = {
            **inherited,
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
            "PROVIDER_DATABASE": str(self.database),
            "PROVIDER_RSA_KEY": new_key(),
            "PROVIDER_REDIRECT_URIS": " ".join(redirect_uris),
        }
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> Provider:
        with self.log_path.open("wb") as log:
            prepare = [sys.executable, "-m", "tests.oidc_provider.prepare"]
            prepared = subprocess.run(prepare, cwd=ROOT, env=self.env, stdout=log, stderr=log)
            if prepared.returncode:
                raise RuntimeError(f"the provider was not prepared:\n{self.log_path.read_text()}")
            command = [
                sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}",
                "--noreload", "--skip-checks",
            ]  # fmt: skip
            self.process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                requests.get(self.endpoint("jwks"), timeout=5).raise_for_status()
                return self
            except (requests.ConnectionError, requests.Timeout):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the provider did not start:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        for path in self.database.parent.glob(f"{self.database.name}*"):
            path.unlink()

    def __enter__(self) -> Provider:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()

    def endpoint(self, which: str) -> str:
        paths = {
            "authorization": "/o/authorize/",
            "token": "/o/token/",
            "user": "/o/userinfo/",
            "jwks": "/o/.well-known/jwks.json",
        }
        return self.url + paths[which]

    def service_settings(self) -> dict[str, str]:
        """The service's OIDC_* settings for this provider (as environment values)."""
        return {
            "OIDC_PROVIDER_NAME": PROVIDER_NAME,
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": self.endpoint("authorization"),
            "OIDC_OP_TOKEN_ENDPOINT": self.endpoint("token"),
            "OIDC_OP_USER_ENDPOINT": self.endpoint("user"),
            "OIDC_OP_JWKS_ENDPOINT": self.endpoint("jwks"),
        }

    def sign_in(self, authorization_url: str, person: Person) -> str:
        """What a browser does at the provider: its sign-in form, then the
        authorization (the client skips consent). Returns where the provider
        sends the browser back: the callback with a code and the state."""
        with requests.Session() as browser:
            form = browser.get(authorization_url, timeout=10)
            form.raise_for_status()
            assert urlsplit(form.url).path == "/accounts/login/", form.url
            signed_in = browser.post(
                form.url,
                data={
                    "username": person.username,
                    "password": PASSWORD,
                    "csrfmiddlewaretoken": browser.cookies["provider_csrftoken"],
                    "next": parse_qs(urlsplit(form.url).query)["next"][0],
                },
                allow_redirects=False,
                timeout=10,
            )
            assert signed_in.status_code == 302, signed_in.text
            authorized = browser.get(
                urljoin(form.url, signed_in.headers["Location"]), allow_redirects=False, timeout=10
            )
            assert authorized.status_code == 302, authorized.text
            return str(authorized.headers["Location"])
