"""How a failed request is written down: its category, and a detail with no secret in it.

:func:`fail` is the one place a record's ``error_detail`` is set. Whatever it is given — a server's
error body or error event, an excerpt of a malformed chunk, an exception's text — is masked with
:func:`tokenstorm.workloads.rundir.secrets.redact` against the client's own secrets (:func:`secrets_of`) and
then cut to :data:`MAX_DETAIL` characters: masked first, so a cut cannot leave half a key behind.
"""

from __future__ import annotations

import base64
import binascii
import socket
import ssl
from collections.abc import Iterable

import orjson

from ..rundir.records import ErrorCategory, RequestRecord
from ..rundir.secrets import redact, secret_forms

__all__ = ["MAX_DETAIL", "STALL", "describe", "error_text", "fail", "http_category", "secrets_of"]

#: the longest ``error_detail`` stored
MAX_DETAIL = 300
#: no byte of the response came for the stall timeout (``LlmClient(stall_timeout_s=...)``)
STALL = ErrorCategory.STALL


def secrets_of(
    api_key: str | None,
    credentials: tuple[str, str] | None,
    authorization: str | None,
    extra: Iterable[str] = (),
) -> tuple[str, ...]:
    """Every form in which the client's secrets may come back: :func:`secret_forms` of the key and the
    URL's credentials, the ``Authorization`` value sent, its token, a Basic token's user:password, and
    ``extra`` (the run's other secrets), longest first."""
    forms = set(secret_forms(api_key, credentials)) | {f for f in extra if f}
    if authorization:
        # The token, not the whole value: what comes back keeps its scheme ("Bearer ***", "Basic ***"),
        # which says how the request authenticated.
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        forms.add(token if len(token) >= 4 else authorization)
        if scheme.lower() == "basic" and token:
            try:
                user, sep, password = base64.b64decode(token, validate=True).decode("utf-8").partition(":")
            except (binascii.Error, UnicodeDecodeError):
                sep = ""
            if sep:
                forms.update(secret_forms(None, (user, password)))
    return tuple(sorted(forms, key=len, reverse=True))


def fail(record: RequestRecord, category: str, detail: str, secrets: tuple[str, ...]) -> None:
    """Mark ``record`` failed with ``category`` and ``detail`` (masked, then cut)."""
    record.ok = False
    record.error_category = category
    detail = redact(detail, secrets)
    record.error_detail = detail if len(detail) <= MAX_DETAIL else detail[: MAX_DETAIL - 1] + "…"


def http_category(status: int) -> str:
    """The category of a non-200 answer."""
    if status == 429:
        return ErrorCategory.RATE_LIMITED
    if status >= 500:
        return ErrorCategory.SERVER_ERROR
    return ErrorCategory.CLIENT_ERROR


def error_text(status: int, body: bytes) -> str:
    """``HTTP 503: <the error's message>`` from an error body (OpenAI's ``{"error": {"message"}}`` or
    any text); not cut here: :func:`fail` masks it first."""
    try:
        data = orjson.loads(body)
        err = data.get("error", data) if isinstance(data, dict) else data
        msg = err.get("message", err) if isinstance(err, dict) else err
        text = str(msg)
    except ValueError:
        text = body.decode("utf-8", "replace")
    return f"HTTP {status}: {text}"


def describe(exc: BaseException) -> str:
    """An exception in a few words for a user (not cut or masked here: :func:`fail` does)."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return "host name does not resolve"
    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason}"
    return str(exc) or type(exc).__name__
