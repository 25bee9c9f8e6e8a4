"""The idle session timeout without a database write per request: a signed-in session's expiry
is pushed SESSION_COOKIE_AGE seconds on at most once per SESSION_TOUCH_S (docs/security.md)."""

from __future__ import annotations

import time

from django.conf import settings

TOUCHED_AT = "tollgate_touched_at"  # epoch seconds of the last push, kept in the session


class IdleSessionMiddleware:
    """Marks the session modified when its last push is older than SESSION_TOUCH_S, so
    SessionMiddleware (outside this one) saves it with a fresh expiry and cookie. A session
    left alone for SESSION_COOKIE_AGE seconds expires; a page polling every few seconds costs
    one session write a minute, not one per poll."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        session = getattr(request, "session", None)
        # Only a session this request read (a signed-in page, a session API call): a bearer
        # call with a stray cookie neither loads one nor keeps it alive.
        if session is not None and session.accessed and not session.is_empty():
            now = int(time.time())
            touched = session.get(TOUCHED_AT)
            if not isinstance(touched, int) or now - touched >= settings.SESSION_TOUCH_S:
                session[TOUCHED_AT] = now
        return response
