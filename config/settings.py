"""Settings, all from the environment (docs/operations.md).

With no ``DATABASE_URL`` the database is a SQLite file under ``var/``; with no
``REDIS_URL`` Celery uses kombu's filesystem transport and the cache is a file
cache, so ``make run`` needs no server besides Python.
"""

import contextlib
import hashlib
import os
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import django_stubs_ext
import environ
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

# Lets admin.ModelAdmin[Model] and friends be subscripted at run time.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

VAR_DIR = Path(env.str("VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env.bool("DEBUG", default=True)
SECRET_KEY = env.str(
    "SECRET_KEY",
    default="dev-only-insecure-key-9f2c1d7e5b3a4c6d8e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b",
)
if not DEBUG and SECRET_KEY.startswith("dev-only-"):
    raise ImproperlyConfigured("set SECRET_KEY: the development key is public")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["*"] if DEBUG else [])
PUBLIC_URL = env.str("PUBLIC_URL", default="http://127.0.0.1:8000").rstrip("/")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[PUBLIC_URL])

# --- web security (docs/operations.md, "Production settings") -------------
# With an https PUBLIC_URL the service is served over TLS, usually behind a
# proxy that says so in X-Forwarded-Proto (it must set or strip that header).
PUBLIC_URL_IS_HTTPS = PUBLIC_URL.startswith("https://")
if PUBLIC_URL_IS_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = PUBLIC_URL_IS_HTTPS
# Plain-http requests are redirected to https. A health check that reaches the
# web process over http without X-Forwarded-Proto needs its path (a regex,
# e.g. ^health$) in SECURE_REDIRECT_EXEMPT, or SECURE_SSL_REDIRECT=false
# when the proxy already redirects.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=PUBLIC_URL_IS_HTTPS)
SECURE_REDIRECT_EXEMPT = env.list("SECURE_REDIRECT_EXEMPT", default=[])
# HSTS is sent on https responses only; a year, this host and its subdomains.
SECURE_HSTS_SECONDS = env.int(
    "SECURE_HSTS_SECONDS", default=365 * 24 * 3600 if PUBLIC_URL_IS_HTTPS else 0
)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=True)
# Asking browsers to preload HSTS binds the whole registered domain, which is
# the domain owner's call, not this service's: off unless set, and check
# --deploy's reminder about it (security.W021) is silenced.
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SILENCED_SYSTEM_CHECKS = ["security.W021"]
X_FRAME_OPTIONS = "DENY"
# A failed CSRF check on an API path is the JSON error body (config/errors.py).
CSRF_FAILURE_VIEW = "config.errors.csrf_failure"

# Outbound webhooks to loopback/private addresses are allowed only in the
# embedded (development) default; production refuses them (delivery/ssrf.py).
WEBHOOK_ALLOW_PRIVATE_NETWORKS = env.bool("WEBHOOK_ALLOW_PRIVATE_NETWORKS", default=DEBUG)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    # Two-factor sign-in (agents/second_factor.py): TOTP apps and recovery codes.
    "django_otp",
    "django_otp.plugins.otp_totp",
    "django_otp.plugins.otp_static",
    "agents",
    "delivery",
    "channels_api",
    "bots",
    "devhooks",
]

MIDDLEWARE = [
    # First: whatever answers an API path with an error answers in the error body.
    "config.errors.ApiErrorBodies",
    # A view that cannot reach the database answers 503 with Retry-After
    # (config/database_down.py; a middleware's such failure: errors.handler500).
    "config.database_down.DatabaseUnavailable",
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    # After the CSRF check (a forged form is refused as forged), before any view.
    "config.form_fields.RefuseNulCharacters",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # request.user.is_verified(): the session passed the second factor.
    "django_otp.middleware.OTPMiddleware",
    # A session owing its second factor reaches only the step that asks for it.
    "agents.pages.second_factor.second_factor_middleware",
    # The client's address for the audit log (agents/audit.py).
    "agents.audit.address_middleware",
    # An agent's page request is a sign of life (docs/routing.md, "Presence").
    "agents.presence.seen_middleware",
    # A signed-in session's last sign of life (agents/sessions.py).
    "agents.sessions.seen_middleware",
    # The agent pages' and the admin's language: the agent's choice, else the
    # browser's (agents/pages/language.py, docs/translating.md).
    "agents.pages.language.language_middleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a refused sign-in into the locked page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'switchboard.sqlite3'}")
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and beat are separate processes sharing one file: WAL lets
    # readers run beside a writer, IMMEDIATE takes the write lock up front so
    # two writers queue instead of deadlocking on a lock upgrade.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # The file holds password hashes, API keys and channel secrets: it is made
    # owner-only (0600) before SQLite first opens it, whichever command comes
    # first (migrate included); SQLite gives its -wal and -shm files the same mode.
    _sqlite_file = str(DATABASES["default"]["NAME"])
    if _sqlite_file != ":memory:" and not _sqlite_file.startswith("file:"):
        # A missing folder is left for SQLite to name in its own error.
        with contextlib.suppress(FileExistsError, FileNotFoundError):
            os.close(os.open(_sqlite_file, os.O_CREAT | os.O_EXCL, 0o600))
    # A file, not memory, so a worker process in the integration tests sees it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-switchboard.sqlite3")}
else:
    if env.bool("DATABASE_POOL", default=False):
        # The web process (config/asgi.py sets DATABASE_POOL): under ASGI Django
        # runs each request in a thread of its own, where a persistent connection
        # would never be used again. Requests borrow from a pool per process
        # instead: at most DATABASE_POOL_SIZE connections, and a request waits
        # for one when all are busy.
        # While PostgreSQL refuses connections a request waits at most
        # DATABASE_OUTAGE_SECONDS for one, then is answered 503 (config/
        # postgresql/base.py, config/database_down.py): nobody hangs, and a
        # request that waited is never committed after its client gave up;
        # while it is up and every connection is lent, a request waits up to
        # DATABASE_POOL_TIMEOUT_SECONDS. A failed reconnect is retried with a
        # back-off that gives up after DATABASE_RECONNECT_SECONDS, so the next
        # request starts a fresh attempt at once: after an outage the pool is
        # back within about that long, not after psycopg_pool's back-off
        # (doubling up to 5 minutes) ran out.
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "max_size": env.int("DATABASE_POOL_SIZE", default=10),
            "timeout": env.float("DATABASE_POOL_TIMEOUT_SECONDS", default=30.0),
            "outage_timeout": env.float("DATABASE_OUTAGE_SECONDS", default=0.5),
            "reconnect_timeout": env.float("DATABASE_RECONNECT_SECONDS", default=2.0),
        }
    else:
        # Celery workers and commands: a thread keeps its connection this long.
        DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # Django's backend with the pool above (config/postgresql/base.py).
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"]["ENGINE"] = "config.postgresql"
    # A server that does not answer (a host gone, packets dropped) fails a
    # connect after this many seconds (libpq's least), not after the OS's minutes.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env.int("DATABASE_CONNECT_TIMEOUT_SECONDS", default=2)
    )
    # A server that goes silent under an open connection (a host that
    # vanished, a network that drops packets, no reset ever coming): a query
    # sent to it fails once its bytes are unacknowledged this long, and an
    # idle connection is found dead by TCP keepalives after about 10 + 3 * 5
    # seconds, not after the OS's 15 minutes of retransmissions or its 2 hours
    # of idle. A slow query is not cut: the server acknowledges what it reads.
    DATABASES["default"]["OPTIONS"].update(
        {
            "keepalives": 1,
            "keepalives_idle": 10,
            "keepalives_interval": 5,
            "keepalives_count": 3,
            "tcp_user_timeout": 1000 * env.int("DATABASE_TCP_USER_TIMEOUT_SECONDS", default=10),
        }
    )

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "agents.Agent"
LOGIN_URL = "/agent/login/"
LOGIN_REDIRECT_URL = "/agent/"
LOGOUT_REDIRECT_URL = "/agent/login/"

# Every password an agent or admin sets (the admin, create_agent, the
# settings page, a reset) passes Django's four validators (docs/agent-pages.md,
# "Passwords"); the similarity check compares with the agent's own name and e-mail.
AUTH_PASSWORD_VALIDATORS = [
    {
        "NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
        "OPTIONS": {"user_attributes": ("email", "name")},
    },
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 10},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# A reset link works for this long, and only until it is used (the password's
# hash is part of the token) or the agent signs in.
PASSWORD_RESET_TIMEOUT = env.int("PASSWORD_RESET_MINUTES", default=60) * 60
# "Forgot password?" requests per hour for one e-mail address and from one
# network address (then the page says to try later), so the form can neither
# flood an inbox nor probe many addresses quickly.
PASSWORD_RESETS_PER_ADDRESS_PER_HOUR = env.int("PASSWORD_RESETS_PER_ADDRESS_PER_HOUR", default=3)
PASSWORD_RESETS_PER_IP_PER_HOUR = env.int("PASSWORD_RESETS_PER_IP_PER_HOUR", default=20)

# --- sign-in throttling (django-axes; config/signin.py) -------------------
# After SIGNIN_FAILURE_LIMIT failures for one account OR from one address,
# sign-in there is refused for SIGNIN_COOLOFF_MINUTES, on the agent pages and
# in the admin. authenticate() must be given the request.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env.int("SIGNIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("SIGNIN_COOLOFF_MINUTES", default=15))
# By account and by address; a single sign-on, which names no account, by address.
AXES_LOCKOUT_PARAMETERS = "config.signin.lockout_parameters"
# The sign-in forms' field and authenticate()'s keyword (the email address).
AXES_USERNAME_FORM_FIELD = "username"
# The lock runs from the failure that set it; attempts while locked are not
# checked against the password, so they need not prolong it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "config.signin.locked_out"
AXES_CLIENT_IP_CALLABLE = "config.signin.client_address"
# Proxies in front of the web process that append to X-Forwarded-For (0: the
# web process faces the clients). Decides the address a sign-in comes from.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
# Failures are kept (and shown in the admin, where deleting one unlocks);
# successful sign-ins are not logged: nothing would ever prune that table.
AXES_DISABLE_ACCESS_LOG = True

# --- two-factor sign-in (agents/second_factor.py; docs/security.md) --------
# Who must have a second factor: "off" (nobody; anyone may set one up),
# "admins", or "everyone". Someone who must and has none is sent to set it up.
REQUIRE_2FA = env.str("REQUIRE_2FA", default="off")
if REQUIRE_2FA not in ("off", "admins", "everyone"):
    raise ImproperlyConfigured(f"REQUIRE_2FA must be off, admins or everyone, not {REQUIRE_2FA!r}")
# The name authenticator apps show beside the agent's address.
OTP_TOTP_ISSUER = "Switchboard"

# --- single sign-on (OpenID Connect; agents/sso.py, docs/security.md) ------
# Off unless OIDC_RP_CLIENT_ID is set. Then the sign-in pages offer "Sign in
# with OIDC_PROVIDER_NAME", and an agent whose address the provider says it
# verified is signed in. The endpoints are the ones the provider's discovery
# document lists (<issuer>/.well-known/openid-configuration).
OIDC_RP_CLIENT_ID = env.str("OIDC_RP_CLIENT_ID", default="")
SSO_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="SSO")
OIDC_RP_CLIENT_SECRET = env.str("OIDC_RP_CLIENT_SECRET", default="")
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_OP_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_OP_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OIDC_OP_USER_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_OP_JWKS_ENDPOINT", default="")
OIDC_RP_SIGN_ALGO = env.str("OIDC_RP_SIGN_ALGO", default="RS256")
# An unknown address is refused unless this is true: then it becomes an agent
# (role "agent", no password) at its first sign-in.
OIDC_CREATE_AGENTS = env.bool("OIDC_CREATE_AGENTS", default=False)
OIDC_RP_SCOPES = "openid email profile"  # profile: the name a created agent gets
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10  # seconds for each request to the provider
OIDC_AUTHENTICATION_CALLBACK_URL = "agent:sso-callback"
LOGIN_REDIRECT_URL_FAILURE = LOGIN_URL
if SSO_ENABLED:
    _sso_endpoints = {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": OIDC_OP_AUTHORIZATION_ENDPOINT,
        "OIDC_OP_TOKEN_ENDPOINT": OIDC_OP_TOKEN_ENDPOINT,
        "OIDC_OP_USER_ENDPOINT": OIDC_OP_USER_ENDPOINT,
        "OIDC_OP_JWKS_ENDPOINT": OIDC_OP_JWKS_ENDPOINT,
    }
    _sso_missing = [name for name, value in _sso_endpoints.items() if not value]
    if not OIDC_RP_CLIENT_SECRET:
        _sso_missing.append("OIDC_RP_CLIENT_SECRET")
    if _sso_missing:
        raise ImproperlyConfigured(f"single sign-on needs {', '.join(_sso_missing)}")
    # The tokens and the agent's address come over these: in production only
    # over TLS. A private address is allowed (an in-house provider often has
    # one): the operator sets these, no user does.
    _sso_plain = [name for name, url in _sso_endpoints.items() if not url.startswith("https://")]
    if _sso_plain and not DEBUG:
        raise ImproperlyConfigured(f"single sign-on needs https:// in {', '.join(_sso_plain)}")
    # After the password's: django-axes' backend stays first (it refuses a
    # locked address before any backend signs anyone in).
    AUTHENTICATION_BACKENDS.append("agents.sso.AgentBackend")

# --- Content-Security-Policy (django-csp) ----------------------------------
# Every page: scripts and styles from this origin only, never inline. Chat
# media (clients' photos, files, audio, video) come from anywhere on the web.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:", "https:", "http:"],
        "media-src": [SELF, "https:", "http:"],
        "connect-src": [SELF],
        "font-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

# --- broker and cache -----------------------------------------------------
# The broker and the cache never share a Redis database: clearing a cache is
# FLUSHDB on Redis, and on the broker's database it would wipe queued work.
# REDIS_URL is the broker; the cache takes the next database number unless
# REDIS_CACHE_URL names one (docs/operations.md).


def redis_database(url: str) -> tuple[str, int, int]:
    """Server (host or socket path), port and database number that ``url``
    points at, as redis-py reads it (a ``?db=`` beats the path)."""
    from redis.connection import parse_url

    options = parse_url(url)
    server = str(options.get("path") or options.get("host") or "localhost")
    if server == "localhost":
        server = "127.0.0.1"
    return server, int(options.get("port") or 6379), int(options.get("db") or 0)


def redis_database_after(url: str) -> str:
    """``url`` with its database number (the path, ``/0`` when absent) plus one."""
    parts = urlsplit(url)
    number = parts.path.strip("/") or "0"
    if "db=" in parts.query or not number.isdigit() or int(number) >= 15:
        raise ImproperlyConfigured(
            f"set REDIS_CACHE_URL: no database after the broker's in REDIS_URL ({parts.path!r})"
        )
    return urlunsplit(parts._replace(path=f"/{int(number) + 1}"))


REDIS_URL = env.str("REDIS_URL", default="")
if REDIS_URL:
    REDIS_CACHE_URL = env.str("REDIS_CACHE_URL", default="") or redis_database_after(REDIS_URL)
    if redis_database(REDIS_CACHE_URL) == redis_database(REDIS_URL):
        raise ImproperlyConfigured("REDIS_CACHE_URL must not be the broker's database")
    CELERY_BROKER_URL = REDIS_URL
    # kombu's Redis transport, with a worker that survives Redis going away
    # (config/redis_broker.py).
    CELERY_BROKER_TRANSPORT = "config.redis_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_CACHE_URL,
            "KEY_PREFIX": "switchboard",
        }
    }
else:
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    # kombu's filesystem transport, writing each message whole (config/broker.py).
    from config.broker import ALIAS as _BROKER_ALIAS

    # "localhost": a host of no meaning here; without one kombu warns at every connection.
    CELERY_BROKER_URL = f"{_BROKER_ALIAS}://localhost//"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
        # How often a worker looks for new messages (kombu's default is 1 s,
        # which an agent would see as the delay of every reply under make run).
        "polling_interval": 0.1,
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    "finish-inactive-chats": {"task": "agents.tasks.finish_inactive_chats", "schedule": 600.0},
    "forget-rate-limit-hits": {"task": "agents.tasks.forget_rate_limit_hits", "schedule": 3600.0},
    "forget-idempotency-keys": {
        "task": "agents.tasks.forget_idempotency_keys",
        "schedule": 3600.0,
    },
}


def _every(task: str, seconds: float) -> dict[str, Any]:
    """A beat entry run every ``seconds``; a run the worker did not start
    within that time is dropped (the next one does its work)."""
    return {"task": task, "schedule": seconds, "options": {"expires": seconds}}


CELERY_BEAT_SCHEDULE["send-due-mails"] = _every("agents.tasks.send_due_mails", 10.0)
# Offers whose time ran out and whose own timer was lost, chats left waiting
# while an agent has room, and the offers of agents who turned away
# (docs/routing.md).
CELERY_BEAT_SCHEDULE["move-offers-of-away-agents"] = _every(
    "agents.tasks.move_offers_of_away_agents", 30.0
)
CELERY_BEAT_SCHEDULE["lapse-due-offers"] = _every("agents.tasks.lapse_due_offers", 5.0)
CELERY_BEAT_SCHEDULE["offer-waiting-to-free-agents"] = _every(
    "agents.tasks.offer_waiting_to_free_agents", 10.0
)
# The audit log keeps AUDIT_RETENTION_DAYS (0: for ever; docs/security.md).
AUDIT_RETENTION_DAYS = env.int("AUDIT_RETENTION_DAYS", default=365)
CELERY_BEAT_SCHEDULE["forget-old-audit-entries"] = _every(
    "agents.tasks.forget_old_audit_entries", 3600.0
)
# Idle chats close by themselves, per channel (docs/routing.md, "Idle chats close").
CELERY_BEAT_SCHEDULE["close-idle-chats"] = _every("agents.tasks.close_idle_chats", 60.0)
# The retention rule (docs/privacy.md, "Retention"); nothing while DATA_RETENTION_DAYS is 0.
CELERY_BEAT_SCHEDULE["erase-expired-chats"] = _every("agents.tasks.erase_expired_chats", 3600.0)
CELERY_BEAT_SCHEDULE["hand-over-silent-bot-chats"] = _every(
    "bots.tasks.hand_over_silent_chats", 5.0
)
CELERY_TIMEZONE = "UTC"

# --- e-mail (chat transcripts, agents/mail.py) -----------------------------
# EMAIL_URL in django-environ's form (smtp+tls://user:pass@host:587, smtps://…);
# without it each mail is written as a file under var/mail/, so a developer
# sees what would be sent without a mail server.
EMAIL_FILE_PATH = str(VAR_DIR / "mail")
if env.str("EMAIL_URL", default=""):
    vars().update(env.email_url("EMAIL_URL"))
else:
    EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
EMAIL_TIMEOUT = env.int("EMAIL_TIMEOUT_SECONDS", default=10)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Switchboard <switchboard@localhost>")
# A copy of every transcript goes here too, when set (an archive mailbox).
TRANSCRIPT_ARCHIVE_EMAIL = env.str("TRANSCRIPT_ARCHIVE_EMAIL", default="")
# Transcripts one agent may mail to addresses they type, per hour (the service
# is no open relay for whoever holds an agent's login or token).
TRANSCRIPTS_TO_TYPED_ADDRESSES_PER_HOUR = env.int(
    "TRANSCRIPTS_TO_TYPED_ADDRESSES_PER_HOUR", default=20
)
# A visitor-typed address gets transcripts once the visitor opened the link
# mailed to it (docs/transcripts.md): the link's life, and how often such a
# mail may go to one address (a day) and from one channel (an hour).
ADDRESS_CONFIRMATION_HOURS = env.int("ADDRESS_CONFIRMATION_HOURS", default=48)
ADDRESS_CONFIRMATIONS_PER_ADDRESS_PER_DAY = env.int(
    "ADDRESS_CONFIRMATIONS_PER_ADDRESS_PER_DAY", default=3
)
ADDRESS_CONFIRMATIONS_PER_CHANNEL_PER_HOUR = env.int(
    "ADDRESS_CONFIRMATIONS_PER_CHANNEL_PER_HOUR", default=100
)
# Sends a mail may take before it is marked failed, and the first pause
# between them (doubled after each failure).
MAIL_MAX_ATTEMPTS = env.int("MAIL_MAX_ATTEMPTS", default=5)
MAIL_RETRY_SECONDS = env.float("MAIL_RETRY_SECONDS", default=30.0)

# --- chat behaviour -------------------------------------------------------
# A "typing…" state expires by itself, so a lost typeout cannot leave it on.
TYPING_TTL_SECONDS = env.int("TYPING_TTL_SECONDS", default=10)
# Routing (docs/routing.md): how many chats an agent answers at once unless
# their own maximum says otherwise.
AGENT_MAX_CHATS = env.int("AGENT_MAX_CHATS", default=5)
# An online agent whose pages, API and stream are silent this long is away:
# offered nothing, their pending offers moved on (agents/presence.py).
AGENT_AWAY_MINUTES = env.int("AGENT_AWAY_MINUTES", default=5)
# Open chats with no message for this long are finished by a periodic task (0: never).
INACTIVE_CHAT_HOURS = env.int("INACTIVE_CHAT_HOURS", default=24)
# Chats finished more than this many days ago are erased by the beat
# (docs/privacy.md, "Retention"); 0 keeps them forever.
DATA_RETENTION_DAYS = env.int("DATA_RETENTION_DAYS", default=0)

# --- Chat Channel API ------------------------------------------------------
# Requests per second one channel may make before it is answered 429; one
# channel carries all of an integrator's customers, so the default is generous.
CHAT_API_RATE_LIMIT_PER_SECOND = env.int("CHAT_API_RATE_LIMIT_PER_SECOND", default=1000)
CHAT_API_MAX_BODY_BYTES = env.int("CHAT_API_MAX_BODY_BYTES", default=64 * 1024)
# How long a retry with the same Idempotency-Key (A2, B2) is answered as the first time.
IDEMPOTENCY_KEY_HOURS = env.int("IDEMPOTENCY_KEY_HOURS", default=24)

# --- Bot API ---------------------------------------------------------------
# A provider that acknowledged a CLIENT_MESSAGE and then neither answers nor
# invites an agent within this many seconds loses the chat to the agents.
BOT_REPLY_TIMEOUT_SECONDS = env.int("BOT_REPLY_TIMEOUT_SECONDS", default=30)
# B2 requests one provider may make in any one second (0: no limit).
BOT_API_RATE_LIMIT_PER_SECOND = env.int("BOT_API_RATE_LIMIT_PER_SECOND", default=200)
BOT_API_MAX_BODY_BYTES = env.int("BOT_API_MAX_BODY_BYTES", default=64 * 1024)
# The envelope's site_id: digits naming this installation to bot providers.
# By default derived from SECRET_KEY (a hash: it reveals nothing of the key).
INSTALLATION_ID = env.str(
    "INSTALLATION_ID",
    default=str(int(hashlib.sha256(f"installation:{SECRET_KEY}".encode()).hexdigest(), 16) % 10**9),
)
if not INSTALLATION_ID.isascii() or not INSTALLATION_ID.isdigit():
    raise ImproperlyConfigured("INSTALLATION_ID must be a string of digits")

# --- i18n, static ---------------------------------------------------------
LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
# The languages of the agent pages (docs/translating.md), each named in itself:
# the agent picks theirs from this list on the settings page.
LANGUAGES = [
    ("en", "English"),
    ("ru", "Русский"),
    ("de", "Deutsch"),
    ("es", "Español"),
    ("fr", "Français"),
    ("pt-br", "Português (Brasil)"),
    ("ar", "العربية"),
]
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Files agents send (agents/attachments.py) go through Django's storage API: the
# file system under VAR_DIR/media by default, an S3-compatible bucket through
# django-storages when FILE_STORAGE_BUCKET is set (docs/operations.md, "Files").
MEDIA_ROOT = VAR_DIR / "media"
FILE_STORAGE_BUCKET = env.str("FILE_STORAGE_BUCKET", default="")
_default_storage: dict[str, Any] = {
    "BACKEND": "django.core.files.storage.FileSystemStorage",
    "OPTIONS": {"location": str(MEDIA_ROOT)},
}
if FILE_STORAGE_BUCKET:
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": FILE_STORAGE_BUCKET,
            "endpoint_url": env.str("FILE_STORAGE_ENDPOINT_URL", default="") or None,
            "region_name": env.str("FILE_STORAGE_REGION", default="") or None,
            "access_key": env.str("FILE_STORAGE_ACCESS_KEY", default="") or None,
            "secret_key": env.str("FILE_STORAGE_SECRET_KEY", default="") or None,
            "default_acl": "private",
            "querystring_auth": True,
            "file_overwrite": False,
        },
    }
STORAGES = {
    "default": _default_storage,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# What an agent may attach from the reply box: its size, and its kinds (by
# what the file is, not by its name): images become photo messages, the rest
# documents.
AGENT_FILE_MAX_BYTES = env.int("AGENT_FILE_MAX_BYTES", default=10 * 1024 * 1024)
# An image's pixels are decoded in the web process for its thumbnail (about 4
# bytes each): a few-KB file can claim gigapixels. 50 MP holds any phone photo.
AGENT_IMAGE_MAX_PIXELS = env.int("AGENT_IMAGE_MAX_PIXELS", default=50_000_000)
# An animation is re-encoded frame by frame to drop its metadata: its frames
# count towards the pixels above, and their number is bounded too (a GIF of
# 1x1 frames costs Pillow time per frame, not per pixel).
AGENT_IMAGE_MAX_FRAMES = env.int("AGENT_IMAGE_MAX_FRAMES", default=1000)
AGENT_FILE_TYPES = env.list(
    "AGENT_FILE_TYPES",
    default=["png", "jpeg", "gif", "webp", "pdf", "txt", "csv", "zip", "docx", "xlsx"],
)
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --- REST API -------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["agents.api.auth.AgentTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["agents.api.parsers.StrictJSONParser"],
    "EXCEPTION_HANDLER": "agents.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Switchboard APIs",
    "DESCRIPTION": "The agent API (`/api/agent/v1/`: status, chats, messages, accept, reply, "
    "typing, notes, transfer, finish; the supervisors' team and reports; authenticate with "
    "`Authorization: Token <key>`), the "
    "Chat Channel API (A1 and A2, which your chat front end calls at the channel's endpoint "
    "URL, and A3, which the service sends to your endpoint), the Bot API's B2 (which a bot "
    "provider calls at its webhook URL) and the widget's visitor API (which the widget's "
    'script calls). Every refusal is `{"error": {"code", "message"}}`.',
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "channels_api.openapi.add_chat_channel_api",
        "bots.openapi.add_bot_api",
        "devhooks.widget.openapi.add_widget_api",
        "config.openapi.add_error_responses",
    ],
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- logging --------------------------------------------------------------
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Request paths may carry a credential (the Chat API path secret, a bot
    # token): the one handler redacts them (config/log_redaction.py).
    "filters": {"redact_secrets": {"()": "config.log_redaction.RedactSecrets"}},
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["redact_secrets"],
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # A reply cut off at its deadline mid-headers makes urllib3 warn with a
        # traceback; the delivery log already records the try as timed out.
        "urllib3.connection": {"level": "ERROR"},
        # Without handlers of their own, Django's loggers ("Not Found: <path>",
        # tracebacks) reach the console above only, not Django's default
        # console and admin mail handlers, which print paths unredacted.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.server": {"handlers": [], "level": "INFO", "propagate": True},
        # A line per task received and per task done (the delivery sweep runs
        # every 5 s) buries everything else; failures are still logged.
        "celery.worker.strategy": {"level": "WARNING"},
        "celery.app.trace": {"level": "WARNING"},
    },
}

# --- delivery ---------------------------------------------------------------
# Outbound webhooks (delivery/, docs/delivery.md). Appended by the delivery app.
# A rotated signing secret keeps signing beside the new one this long.
DELIVERY_SECRET_GRACE_SECONDS = env.int("DELIVERY_SECRET_GRACE_SECONDS", default=24 * 3600)
# Switch an endpoint off after this many consecutive failed deliveries (0: never).
DELIVERY_AUTO_DISABLE_AFTER = env.int("DELIVERY_AUTO_DISABLE_AFTER", default=0)
# How often beat runs the sweep that re-sends overdue deliveries.
DELIVERY_SWEEP_SECONDS = env.float("DELIVERY_SWEEP_SECONDS", default=5.0)
# Rows the sweep re-sends per run.
DELIVERY_SWEEP_BATCH = 500
# A Celery message due this long ago without its try having started counts as lost.
DELIVERY_REDISPATCH_AFTER_SECONDS = 30
# Retry waits up to this long are Celery countdowns (well under the broker's
# visibility timeout); longer ones wait in the database for the sweep.
DELIVERY_MAX_COUNTDOWN_SECONDS = 60
# The policies' retry spacing (delivery/policies.py) is multiplied by this.
# 1 in production; the test suite runs with 0.2 so that a failing send's tries
# do not hold each test for seconds, and one test keeps the real spacing
# (docs/testing.md).
DELIVERY_RETRY_SCALE = env.float("DELIVERY_RETRY_SCALE", default=1.0)
# A Retry-After header is honoured up to this many seconds.
DELIVERY_MAX_RETRY_AFTER_SECONDS = 3600
# Tries in flight to one endpoint at once, across every worker process, are
# limited by the endpoint's own limit (``Endpoint.in_flight_limit``): it starts
# at 2, grows by one with each success answered within
# DELIVERY_QUICK_REPLY_SECONDS and halves on a time-out, a connection error, a
# 408, 429 or 5xx. Its other due deliveries wait their turn. A healthy receiver
# thus gets up to this many in flight, and a slow or dead one one or two
# (docs/delivery.md, "Many in flight").
DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT = env.int("DELIVERY_MAX_IN_FLIGHT_PER_ENDPOINT", default=256)
DELIVERY_QUICK_REPLY_SECONDS = env.float("DELIVERY_QUICK_REPLY_SECONDS", default=1.0)
CELERY_TASK_ROUTES = {"delivery.tasks.*": {"queue": "delivery"}}
CELERY_BEAT_SCHEDULE["delivery-sweep"] = {
    "task": "delivery.tasks.sweep",
    "schedule": DELIVERY_SWEEP_SECONDS,
    # A sweep that waited longer than its interval is replaced by the next one.
    "options": {"queue": "delivery", "expires": DELIVERY_SWEEP_SECONDS * 2},
}
# Ended deliveries (and their tries) are deleted this many days after they
# were made (delivery/retention.py; 0: kept for ever), hourly.
DELIVERY_LOG_RETENTION_DAYS = env.int("DELIVERY_LOG_RETENTION_DAYS", default=30)
CELERY_BEAT_SCHEDULE["forget-old-deliveries"] = _every(
    "delivery.tasks.forget_old_deliveries", 3600.0
)

# --- live streams (docs/live.md) -------------------------------------------
# How long events are kept for a reconnecting stream (Last-Event-ID).
LIVE_REPLAY_MINUTES = env.int("LIVE_REPLAY_MINUTES", default=10)
# Without Redis, each web process reads new events this often.
LIVE_POLL_SECONDS = env.float("LIVE_POLL_SECONDS", default=0.5)
# A comment line this often keeps proxies from closing an idle stream.
LIVE_HEARTBEAT_SECONDS = env.float("LIVE_HEARTBEAT_SECONDS", default=15.0)
# The browser's wait before it reconnects a dropped stream.
LIVE_RETRY_MILLISECONDS = env.int("LIVE_RETRY_MILLISECONDS", default=2000)
# Rows this young are read again: a transaction may commit after a later id.
LIVE_LATE_COMMIT_SECONDS = 3.0
CELERY_BEAT_SCHEDULE["forget-live-events"] = {
    "task": "agents.tasks.forget_live_events",
    "schedule": 60.0,
    "options": {"expires": 60.0},
}
# The Redis pub/sub channel of live events; empty: one derived from the
# database and REDIS_URL, so installations sharing a Redis server stay apart.
LIVE_REDIS_CHANNEL = env.str("LIVE_REDIS_CHANNEL", default="")
# An agent's open streams follow changes of its channels this often.
LIVE_MEMBERSHIP_SECONDS = env.float("LIVE_MEMBERSHIP_SECONDS", default=2.0)
# An open stream's credential (token, session, visitor) is read again this
# often; an access change told by an event ends its streams at once.
LIVE_ACCESS_SECONDS = env.float("LIVE_ACCESS_SECONDS", default=10.0)
# Visitor streams open at once per visitor token, and per address (an IPv6
# /64) whatever visitors it has; one more is answered 429.
LIVE_STREAMS_PER_VISITOR = env.int("LIVE_STREAMS_PER_VISITOR", default=3)
LIVE_STREAMS_PER_ADDRESS = env.int("LIVE_STREAMS_PER_ADDRESS", default=100)

# --- the website widget (docs/widget.md) -------------------------------------
# A GeoIP2 / GeoLite2 City database file (.mmdb): fills session.geoip of the
# developer webhooks; empty strings without one.
GEOIP_DATABASE = env.str("GEOIP_DATABASE", default="")
# Requests one visitor's browser may make in WIDGET_RATE_WINDOW seconds.
WIDGET_RATE_LIMIT = env.int("WIDGET_RATE_LIMIT", default=60)
WIDGET_RATE_WINDOW = env.float("WIDGET_RATE_WINDOW", default=60.0)
# Requests one address (an IPv6 /64) may make in WIDGET_RATE_WINDOW seconds,
# whatever visitors it has: an office behind one address has many.
WIDGET_ADDRESS_RATE_LIMIT = env.int("WIDGET_ADDRESS_RATE_LIMIT", default=1200)
# New visitors one address may start per WIDGET_RATE_WINDOW.
WIDGET_NEW_VISITORS_PER_ADDRESS = env.int("WIDGET_NEW_VISITORS_PER_ADDRESS", default=30)
# How often a waiting visitor's widget asks its place in the queue: this
# many seconds per place, at most a minute (docs/widget.md, "Your place in the queue").
WIDGET_QUEUE_REFRESH_SECONDS = env.int("WIDGET_QUEUE_REFRESH_SECONDS", default=10)
