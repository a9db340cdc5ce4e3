"""A learner's server reports progress to the teacher dashboard over HTTP, with its hub-issued token.

On a hub the learner's server (and every kernel it starts) has
``JUPYTERHUB_API_TOKEN``; the hub configuration also sets ``SAMPAN_PROGRESS_URL``
to the service's event endpoint. Outside a hub :func:`post_event` does nothing.
A report that cannot be delivered never breaks a lesson: it prints one line.

Example:
    >>> from sampan.hub.client import post_event
    >>> post_event("first_model", "passed")  # outside a hub: nothing is sent
    False
"""
from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request

URL_ENV = "SAMPAN_PROGRESS_URL"
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"


def on_hub() -> bool:
    """True inside a learner's server of a Sampan hub (both the service URL and a hub token are set)."""
    return bool(os.environ.get(URL_ENV) and os.environ.get(TOKEN_ENV))


def post_event(lesson: str, status: str, *, exercise: str | None = None, timeout: float = 5.0) -> bool:
    """Sends one progress event; True when the service accepted it.

    Args:
        lesson: the lesson id.
        status: ``"started"``, ``"passed"`` or ``"failed"``.
        exercise: the exercise's name when the event is one exercise's result.
        timeout: seconds to wait for the service.
    """
    if not on_hub():
        return False
    body = json.dumps({"lesson": lesson, "status": status, "exercise": exercise}).encode()
    request = urllib.request.Request(os.environ[URL_ENV], data=body, method="POST", headers={
        "Authorization": f"token {os.environ[TOKEN_ENV]}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return 200 <= response.status < 300
    except urllib.error.HTTPError as exc:  # the service said why: {"error": "..."} (sampan.hub.service)
        print(f"[sampan.hub] progress not sent to the teacher dashboard (HTTP {exc.code}: {_reason(exc)})",
              file=sys.stderr)
        return False
    except (urllib.error.URLError, OSError) as exc:
        print(f"[sampan.hub] progress not sent to the teacher dashboard ({exc})", file=sys.stderr)
        return False


def _reason(exc: urllib.error.HTTPError) -> str:
    """The service's ``{"error": ...}`` of a refused event, else the HTTP reason."""
    try:
        error = json.loads(exc.read(64 << 10) or b"null")
    except (ValueError, OSError):
        error = None
    return str(error["error"]) if isinstance(error, dict) and error.get("error") else str(exc.reason)
