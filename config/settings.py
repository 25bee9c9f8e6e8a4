"""Tollgate settings, all read from the environment (README "Configuration" lists them).

One file for every deployment: production sets variables (or NAME_FILE for Docker secrets);
the embedded default (SQLite + a file-system broker under var/) needs no server at all.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config import queues
from config.environment import TRUE_WORDS, env, envbool, envint, envlist, read_dotenv
from config.openapi import OPENAPI_SETTINGS

BASE_DIR = Path(__file__).resolve().parent.parent
# A local .env (written by `make demo`/`make test` for development); TOLLGATE_ENV_FILE= disables.
_dotenv = os.environ.get("TOLLGATE_ENV_FILE", str(BASE_DIR / ".env"))
if _dotenv:
    read_dotenv(Path(_dotenv))

VAR_DIR = Path(env("TOLLGATE_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = envbool("DEBUG", False)
SECRET_KEY = env("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY (or SECRET_KEY_FILE) is required when DEBUG is off")
    SECRET_KEY = "django-insecure-tollgate-development-only"

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost" if DEBUG else "")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS")
SITE_URL = env("SITE_URL", "http://127.0.0.1:8000")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "gates",
    "worker",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Inside SessionMiddleware, so the session it marks modified is saved on the way out.
    "gates.idle_session.IdleSessionMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Text PostgreSQL cannot store (U+0000) is a 400 naming the field before a page's view.
    "gates.inputs.StorableInputMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it answers a locked-out login with its 429.
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

# --- Database ----------------------------------------------------------------------------
DATABASES = {
    "default": dj_database_url.parse(
        env("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'tollgate.sqlite3'}",
        conn_max_age=envint("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while a worker writes; IMMEDIATE takes the write lock at
    # BEGIN so two writers queue on busy_timeout instead of failing with "database is locked".
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache (shared by every process when CACHE_URL names Redis: throttles, health) ----------
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": env("CACHE_URL"),
            # A dead Redis costs a second, then limits fall back (gates/api/rest/throttling.py).
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
        if env("CACHE_URL")
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# --- Authentication and sessions ---------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Failed logins are counted per user name and client address (django-axes, in the database):
# the AXES_FAILURE_LIMIT-th failure within the cool-off locks that pair out with a 429 until
# it ends; a success resets the count. AxesStandaloneBackend must come first.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("AXES_FAILURE_LIMIT", 11)
AXES_COOLOFF_TIME = timedelta(minutes=envint("AXES_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False  # its start-up banner would reach every manage.py command's stderr
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "gates:engagement-list"
LOGOUT_REDIRECT_URL = "login"
SESSION_ENGINE = "django.contrib.sessions.backends.db"
# An idle timeout: a signed-in request pushes the session's expiry SESSION_COOKIE_AGE seconds
# on, at most once per SESSION_TOUCH_S (gates.idle_session: not a write per request); a session
# left alone that long is signed out (docs/security.md).
SESSION_COOKIE_AGE = envint("SESSION_COOKIE_AGE", 3600)
SESSION_TOUCH_S = envint("SESSION_TOUCH_S", 60)
SESSION_SAVE_EVERY_REQUEST = False
PASSWORD_RESET_TIMEOUT = envint("PASSWORD_RESET_TIMEOUT", 3600)  # seconds a reset link works
SESSION_COOKIE_SAMESITE = "Lax"

# --- Security (python manage.py check --deploy --fail-level WARNING is clean without DEBUG) --
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = envbool("SECURE_HSTS_PRELOAD", not DEBUG)
SESSION_COOKIE_SECURE = envbool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = envbool("CSRF_COOKIE_SECURE", not DEBUG)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if envbool("TRUST_PROXY_SSL_HEADER", False):
    # Only behind a proxy that strips and sets X-Forwarded-Proto itself.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Static files: plotly.js comes from the pinned plotly package, never a CDN -----------
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "config.staticfinders.PlotlyFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if envbool("STATIC_MANIFEST", not DEBUG)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
WHITENOISE_USE_FINDERS = envbool("WHITENOISE_USE_FINDERS", DEBUG)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --- Email ---------------------------------------------------------------------------------


def _email_from_url(url: str) -> dict[str, object]:
    """smtp://user:password@host:port?tls=1 (or smtps:// for implicit TLS)."""
    parts = urlsplit(url)
    if parts.scheme not in ("smtp", "smtps"):
        raise ImproperlyConfigured(f"EMAIL_URL must start with smtp:// or smtps://, not {url!r}")
    query = parse_qs(parts.query)
    return {
        "EMAIL_HOST": parts.hostname or "localhost",
        "EMAIL_PORT": parts.port or (465 if parts.scheme == "smtps" else 25),
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_SSL": parts.scheme == "smtps",
        "EMAIL_USE_TLS": query.get("tls", ["0"])[0].lower() in TRUE_WORDS,
    }


EMAIL_HOST = env("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", 25)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = envbool("EMAIL_USE_SSL", False)
# Lower case: a URL with a password in it is no setting for Django's error pages to show.
if _email_url := env("EMAIL_URL"):
    globals().update(_email_from_url(_email_url))
# Django's default is no timeout at all: a silent SMTP server would hold a worker forever.
EMAIL_TIMEOUT = envint("EMAIL_TIMEOUT", 10)
EMAIL_BACKEND = env(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend"
    if DEBUG and not env("EMAIL_URL")
    else "django.core.mail.backends.smtp.EmailBackend",
)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", "tollgate@localhost")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
TOLLGATE_ONCALL_EMAILS = envlist("TOLLGATE_ONCALL_EMAILS")
# --- Alerts (docs/alerts.md) -----------------------------------------------------------------
# An unacknowledged critical alert is re-sent to a wider list every ESCALATE_AFTER seconds,
# at most ESCALATION_MAX times; the wider list adds these to the engagement's own.
TOLLGATE_ESCALATE_AFTER_S = envint("TOLLGATE_ESCALATE_AFTER_S", 1800)
TOLLGATE_ESCALATION_MAX = envint("TOLLGATE_ESCALATION_MAX", 3)
TOLLGATE_ESCALATION_EMAILS = envlist("TOLLGATE_ESCALATION_EMAILS")
TOLLGATE_ACK_LINK_MAX_AGE_S = envint("TOLLGATE_ACK_LINK_MAX_AGE_S", 7 * 24 * 3600)
# Webhooks go to public HTTPS addresses only; a receiver inside the network needs this on.
TOLLGATE_WEBHOOK_ALLOW_PRIVATE = envbool("TOLLGATE_WEBHOOK_ALLOW_PRIVATE", False)
TOLLGATE_WEBHOOK_TIMEOUT_S = envint("TOLLGATE_WEBHOOK_TIMEOUT_S", 10)
# A CA bundle for receivers behind a private CA (default: the system's).
TOLLGATE_WEBHOOK_CA_FILE = env("TOLLGATE_WEBHOOK_CA_FILE", "")
# The dead-man switch: a heartbeat older than this is stale (healthcheck exits non-zero).
TOLLGATE_WORKER_STALE_S = envint("TOLLGATE_WORKER_STALE_S", 180)
TOLLGATE_BEAT_STALE_S = envint("TOLLGATE_BEAT_STALE_S", 120)
TOLLGATE_RESTART_SHOWN_S = envint("TOLLGATE_RESTART_SHOWN_S", 3600)  # /healthz + banner: restarts
TOLLGATE_BEAT_HEARTBEAT_S = envint("TOLLGATE_BEAT_HEARTBEAT_S", 10)

# --- Secrets at rest -------------------------------------------------------------------------
# Base64 AES-256 keys, newest first: the first encrypts, every key may decrypt (rotation).
TOLLGATE_ENCRYPTION_KEYS = envlist("TOLLGATE_ENCRYPTION_KEYS")
# Ed25519 private key (PEM) that signs evidence bundles; empty: one made on first use, stored
# encrypted with TOLLGATE_ENCRYPTION_KEYS (rotate with `manage.py rotate_evidence_key`).
TOLLGATE_SIGNING_KEY_FILE = env("TOLLGATE_SIGNING_KEY_FILE", "")

# --- Celery ----------------------------------------------------------------------------------
# Longer than any task (hard limit below) plus its wait in the prefetch buffer; otherwise Redis
# hands a still-running task to a second worker.
CELERY_VISIBILITY_TIMEOUT = envint("CELERY_VISIBILITY_TIMEOUT", 2 * 3600)
CELERY_TASK_SOFT_TIME_LIMIT = 150
CELERY_TASK_TIME_LIMIT = 180
CELERY_BROKER_URL = env("CELERY_BROKER_URL") or "filesystem://"
# Our fixes of kombu's Redis and file-system transports (worker/broker.py); others: kombu's.
CELERY_BROKER_TRANSPORT = {
    "redis": "worker.broker:RedisTransport",
    "rediss": "worker.broker:RedisTransport",
    "filesystem": "worker.broker:FilesystemTransport",
}.get(CELERY_BROKER_URL.partition("://")[0])
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("queue", "processed", "control", "incoming", "claimed"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
        "health_check_interval": 30,
        "retry_on_timeout": True,
    }
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT}
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A task running when the broker goes away finishes its work (the database is the truth, not
# the broker); its late ack then fails, logged, and Redis delivers the message again after the
# visibility timeout, which a task survives (safe to run twice). Cancelling it instead cut a
# run's step in two and held its claim until the claim expired.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_WORKER_SOFT_SHUTDOWN_TIMEOUT = 30
CELERY_WORKER_ENABLE_SOFT_SHUTDOWN_ON_IDLE = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 3,
    "interval_start": 0.2,
    "interval_step": 0.5,
    "interval_max": 2,
}
CELERY_TIMEZONE = "UTC"
# Tasks keep their database connection as requests do (config/celery.py says why).
CELERY_DB_REUSE_MAX = envint("CELERY_DB_REUSE_MAX", 1000)
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# Runs: a task drives a run for at most TASK_BUDGET seconds, then hands over to a fresh task.
TOLLGATE_TASK_BUDGET_S = envint("TOLLGATE_TASK_BUDGET_S", 45)
# Each decision's report PDF rendered by the worker as soon as it is recorded (off: on first ask).
TOLLGATE_REPORT_PDF_AT_DECISION = envbool("TOLLGATE_REPORT_PDF_AT_DECISION", True)
# How long a task's claim on a run lasts without renewal: longer than any single blocking
# step (a probe, a file copy), so a live task is never doubled; a killed one frees it then.
TOLLGATE_DRIVER_CLAIM_S = envint("TOLLGATE_DRIVER_CLAIM_S", 120)
# A run nobody poked for this long is poked again (a lost message, a dead worker).
TOLLGATE_REDISPATCH_AFTER_S = envint("TOLLGATE_REDISPATCH_AFTER_S", 60)
# A run whose heartbeat is older than this is reaped as an infrastructure error.
TOLLGATE_RUN_STALE_AFTER_S = envint("TOLLGATE_RUN_STALE_AFTER_S", 300)
# How long a server may take to answer /health when the spec does not say.
TOLLGATE_SERVE_TIMEOUT_S = envint("TOLLGATE_SERVE_TIMEOUT_S", 900)
# How long a run rides out a transient SSH outage (refused, reset, timed out) before it ends
# as infra_error; a host's `transport_retry_window_s` parameter overrides it.
TOLLGATE_TRANSPORT_RETRY_WINDOW_S = envint("TOLLGATE_TRANSPORT_RETRY_WINDOW_S", 180)
_BEAT_EVERY_S = float(envint("TOLLGATE_BEAT_EVERY_S", 30))
# How often each active soak's collector tick reads its host.
TOLLGATE_SOAK_TICK_S = envint("TOLLGATE_SOAK_TICK_S", 30)
# A tick's claim on its soak: longer than a tick's I/O may take (its timeouts bound it), so a
# tick killed with its worker blocks the soak for at most this long.
TOLLGATE_SOAK_TICK_CLAIM_S = envint("TOLLGATE_SOAK_TICK_CLAIM_S", 150)
# The beat sends no second tick for a soak within this long of the first (a lagging queue then
# sheds load); the message expires then, so a lost or stale one is replaced, never doubled.
TOLLGATE_SOAK_POKE_S = envint("TOLLGATE_SOAK_POKE_S", 60)
# How often a running soak's provisional verdict is recomputed when nothing went wrong.
TOLLGATE_SOAK_PROVISIONAL_S = envint("TOLLGATE_SOAK_PROVISIONAL_S", 300)
# A soak whose host cannot be read for this long ends as infra_error, unless the spec's own
# unobserved allowance (max_unobserved_pct of the duration) is longer.
TOLLGATE_SOAK_UNREACHABLE_S = envint("TOLLGATE_SOAK_UNREACHABLE_S", 600)
# The planner page's predicted TTFT bands (one row per set of inputs) older than this many days
# are deleted by the janitor once computed; asked for again, a band is recomputed.
TOLLGATE_PLANNER_BAND_KEEP_DAYS = envint("TOLLGATE_PLANNER_BAND_KEEP_DAYS", 30)
CELERY_BEAT_SCHEDULE = queues.beat_schedule(_BEAT_EVERY_S)
# Each kind of work on its own queue (config/queues.py); docker-compose.yml, a worker per queue.
CELERY_TASK_ROUTES = queues.TASK_ROUTES
CELERY_TASK_DEFAULT_QUEUE = queues.RUNS
# The beat writes its own heartbeat as it ticks (worker.tasks.HeartbeatScheduler).
CELERY_BEAT_SCHEDULER = "worker.tasks:HeartbeatScheduler"

# --- REST API --------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "gates.api.rest.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "gates.api.rest.errors.exception_handler",
    # JSON only (uploads take multipart themselves), within fixed limits: depth, storable
    # strings. A form body would reach JSONField's own json.loads, which has none.
    "DEFAULT_PARSER_CLASSES": ["gates.api.rest.parsers.LimitedJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # Kept in Redis, and per process while Redis is unreachable (gates/api/rest/throttling.py).
    "DEFAULT_THROTTLE_CLASSES": ["gates.api.rest.throttling.UserRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"user": env("API_THROTTLE_RATE", "600/minute")},
    "UNAUTHENTICATED_USER": None,
}
# A JSON body larger than this is a 413 (a G2 spec of 500 prompts of 20,000 characters fits).
TOLLGATE_MAX_JSON_BODY_BYTES = envint("TOLLGATE_MAX_JSON_BODY_BYTES", 32 * 1024 * 1024)
# A page's form body (and a multipart field that is not a file) past this is a 413 page that
# says so (gates.api.rest.errors.bad_request); the API's JSON is read up to the limit above.
DATA_UPLOAD_MAX_MEMORY_SIZE = 2621440  # Django's default, 2.5 MiB, stated
# Failed bearer-token authentications one client address may make per window; then 429s.
TOLLGATE_TOKEN_FAILURES_ALLOWED = envint("TOLLGATE_TOKEN_FAILURES_ALLOWED", 20)
TOLLGATE_TOKEN_FAILURE_WINDOW_S = envint("TOLLGATE_TOKEN_FAILURE_WINDOW_S", 300)
SPECTACULAR_SETTINGS = OPENAPI_SETTINGS  # config/openapi.py

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    # The report's renderers narrate every step at INFO (browser start, layout of each page).
    "loggers": {
        name: {"level": "WARNING"}
        for name in ("paramiko", "choreographer", "kaleido", "logistro", "weasyprint", "fontTools")
    },
}
