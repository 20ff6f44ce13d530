"""Credentials: taken out of URLs at the edge, and masked in anything a server sends back.

A URL's ``user:password@`` is split off where the URL enters (``--host``, ``--targets``, the web UI
form): the request carries it as Basic auth and every place that stores or shows the URL gets the URL
without it (:func:`split_credentials`, :func:`display_url`). Text a server sends back (an error body, an
error event) is stored and shown only after :func:`redact`: the run's own secrets and any
``Authorization`` / ``api-key`` header value it echoes are masked.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["MASK", "authorization_header", "display_url", "redact", "secret_forms", "split_credentials"]

#: what a secret is replaced with
MASK = "***"

# Header-shaped echoes: "Authorization: Bearer X", '"authorization": "Basic X"', "api-key=X", "x-api-key: X".
# Without a scheme, a value must look like a token (a digit or one of + / = _ . -): "Authorization: required"
# is a sentence, not an echo.
_TOKENISH = r"(?=[^\s\"',;}]*[0-9+/=_.-])"
_HEADER_ECHO = re.compile(
    r"""(?ix)
    ( (?:proxy-)?authorization | x-api-key | api[-_]key )   # the header (or JSON key) name
    ( ["']? \s* [:=] \s* ["']? )                              # its separator, quoted or not
    (?: ( (?:bearer|basic|token)\s+ ) | """
    + _TOKENISH
    + r""" )  # an auth scheme, or a token-like value
    ( [^\s"',;}]+ )                                           # the value
    """
)
_SCHEME_VALUE = re.compile(r"(?i)\b(bearer|basic)\s+" + _TOKENISH + r"([A-Za-z0-9._~+/=-]{4,})")
# user:password@ (or user@) in any URL in the text
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")


def split_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """``http://u:p@h:8000/v1`` -> ``("http://h:8000/v1", ("u", "p"))``; a URL without them: ``(url, None)``.
    The user name and password are percent-decoded (as a browser sends them)."""
    if "@" not in url:
        return url, None
    parts = urlsplit(url if "://" in url else f"//{url}")  # "u:p@h:8000" (no scheme) too
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    clean = urlunsplit(parts._replace(netloc=hostport))
    return (clean if "://" in url else clean.removeprefix("//")), (unquote(user), unquote(password))


def display_url(url: str) -> str:
    """``url`` as it may be printed or stored: without any ``user:password@``."""
    return split_credentials(url)[0] if url else url


def authorization_header(api_key: str | None, credentials: tuple[str, str] | None) -> str | None:
    """The ``Authorization`` value: ``Bearer KEY`` (vLLM's ``--api-key``), else Basic auth from a URL's
    credentials, else ``None``."""
    if api_key:
        return f"Bearer {api_key}"
    if credentials is not None:
        token = base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")
        return f"Basic {token}"
    return None


def secret_forms(api_key: str | None = None, credentials: tuple[str, str] | None = None) -> tuple[str, ...]:
    """Every form in which the secrets may come back: the key, the password, ``user:password``, its base64."""
    forms: list[str] = []
    if api_key:
        forms.append(api_key)
    if credentials is not None:
        user, password = credentials
        pair = f"{user}:{password}"
        forms += [pair, base64.b64encode(pair.encode()).decode("ascii")]
        if len(password) >= 4:
            forms.append(password)
    # longest first: a key that contains another is masked whole
    return tuple(sorted({f for f in forms if f}, key=len, reverse=True))


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with each of ``secrets`` and every echoed credential masked: an ``Authorization`` /
    ``api-key`` header value (with or without its scheme), a bearer or basic token, a URL's user:password."""
    if not text:
        return text
    for secret in secrets:
        if secret and secret in text:
            text = text.replace(secret, MASK)
    text = _HEADER_ECHO.sub(lambda m: f"{m[1]}{m[2]}{m[3] or ''}{MASK}", text)
    text = _SCHEME_VALUE.sub(lambda m: f"{m[1]} {MASK}", text)
    return _URL_USERINFO.sub(lambda m: f"{m[1]}{MASK}@", text)
