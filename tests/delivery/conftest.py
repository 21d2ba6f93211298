"""Fixtures of the delivery tests: local HTTP targets, an endpoint, the owner's handlers."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
from collections.abc import Iterator

import pytest

from delivery import handlers, services
from delivery.models import Endpoint
from tests.delivery.target import PURPOSE, Outcomes, Target


@pytest.fixture(scope="session")
def _target_server() -> Iterator[Target]:
    server = Target("127.0.0.1").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _target_server_v6() -> Iterator[Target]:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    server = Target("::1").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _target_server_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = Target("127.0.0.1", ssl_context=context).start()
    server.certificate = cert
    yield server
    server.stop()


@pytest.fixture
def target(_target_server: Target) -> Target:
    """A real HTTP server on 127.0.0.1, fresh for this test."""
    _target_server.reset()
    return _target_server


@pytest.fixture
def target_v6(_target_server_v6: Target) -> Target:
    """A real HTTP server on ::1, fresh for this test."""
    _target_server_v6.reset()
    return _target_server_v6


@pytest.fixture
def target_tls(_target_server_tls: Target) -> Target:
    """A real HTTPS server on 127.0.0.1 with a self-signed certificate for localhost."""
    _target_server_tls.reset()
    return _target_server_tls


@pytest.fixture
def endpoint(db: None, target: Target) -> Endpoint:
    return services.create_endpoint(url=target.url())[0]


@pytest.fixture
def outcomes() -> Iterator[Outcomes]:
    heard = Outcomes()
    handlers.register(
        PURPOSE,
        on_success=lambda d, reply: heard.successes.append((d.pk, reply)),
        on_failure=lambda d, error: heard.failures.append((d.pk, error)),
    )
    yield heard
    handlers.unregister(PURPOSE)
