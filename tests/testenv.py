"""Loaded with `-p tests.testenv` before Django starts: the environment every test run uses.

Real PostgreSQL and Redis, as in CI; values already set in the environment win.
"""

import os

_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_BROKER_DB = 10 + int(_XDIST_WORKER[2:]) if _XDIST_WORKER.startswith("gw") else 9

TEST_ENVIRONMENT = {
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/tollgate",
    # One broker database per xdist worker, so a test's Celery worker never takes another
    # test session's messages (each session has its own test database).
    "CELERY_BROKER_URL": f"redis://127.0.0.1:6379/{_BROKER_DB}",
    "CACHE_URL": "redis://127.0.0.1:6379/15",
    "SECRET_KEY": "tests-only-8f3c1e0b7a6d4c2e9b5a1f0e3d7c6b4a2e8f1d0c9b7a5e3c",
    "TOLLGATE_ENCRYPTION_KEYS": "dGVzdC1rZXktbmV3ZXN0LTAwMDAwMDAwMDAwMDAwMDA=,"
    "dGVzdC1rZXktb2xkZXItMDAwMDAwMDAwMDAwMDAwMDA=",
    "DEBUG": "false",
    "SECURE_SSL_REDIRECT": "false",
    "STATIC_MANIFEST": "false",
    "WHITENOISE_USE_FINDERS": "true",
    "ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
    "EMAIL_BACKEND": "django.core.mail.backends.locmem.EmailBackend",
    # Every test client comes from 127.0.0.1 and the cache outlives a test: the tests of the
    # limits set their own (tests/gates/api/test_rate_limits.py).
    "TOLLGATE_TOKEN_FAILURES_ALLOWED": "1000000",
    # A PDF per decision is seconds of chart export and WeasyPrint on a worker that end-to-end
    # tests share with their runs: rendered on first ask here; the stored-PDF tests turn it on.
    "TOLLGATE_REPORT_PDF_AT_DECISION": "false",
    "TOLLGATE_VAR_DIR": os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test"),
}
for _name, _value in TEST_ENVIRONMENT.items():
    os.environ.setdefault(_name, _value)

# Property tests judge behaviour, never speed: a busy machine (CI shares its cores) must not turn
# a slow example into a failure, so no per-example deadline and no "too slow" health check.
# A test's own @settings still sets its example count; this profile only supplies the defaults.
from hypothesis import HealthCheck, settings  # noqa: E402 (after the environment is set)

settings.register_profile("tollgate", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("tollgate")
