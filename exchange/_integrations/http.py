"""HTTP calls to plant services: one pooled ``requests`` session per runtime.

:meth:`HttpClient.request` returns ``{"status", "headers", "json", "text"}`` for 1xx-3xx answers and
classifies everything else for the step's retry policy:

* connection refused/reset, DNS failure, timeout, a body cut off -> :class:`CommunicationError`
* 408, 429 and 5xx -> :class:`HttpRetryableStatus` (a RetryableError); on 429 and 503 the
  ``Retry-After`` header (seconds or an HTTP date) becomes ``retry_after``, as the server said it:
  the step's retry policy waits exactly that, or gives up when it is longer than the step's
  ``retry_after_max_seconds`` (never retries sooner than asked)
* any other 4xx -> :class:`HttpStatusError` (fatal) with the status and an excerpt of the body
* a TLS certificate that fails verification, a malformed URL or request -> :class:`HttpRequestError`
  (fatal: retrying will not fix them)

Arguments are checked before anything is sent (:func:`check_request`): a method outside
:data:`METHODS`, a URL that is not an absolute http(s) URL with a host, headers that are not a dict
of strings (or hold line breaks), params or form data of the wrong shape, a ``json_body`` that is
not JSON (NaN included), both ``data`` and ``json_body``, a ``timeout_ms`` that is not a finite
number from 1 ms to a day -> :class:`HttpArgumentError`, which is both an
:class:`~exchange.errors.InvalidArgument` and an :class:`HttpRequestError` (never retried). No
connection is opened for them.

Requests that are not GET, HEAD or OPTIONS carry an ``Idempotency-Key`` header (the caller's, or a
random one) so that a server can recognise a retried POST. TLS certificates are verified unless the
config says ``[http] verify_tls = false``. Cookies are never stored: the session is shared by every
workflow run, and one run's cookies must not leak into another's requests.
"""

from __future__ import annotations

import email.utils
import http.cookiejar
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter

from exchange._arguments import shown, unencodable
from exchange._config import Config
from exchange.errors import (
    CommunicationError,
    HttpArgumentError,
    HttpRequestError,
    HttpRetryableStatus,
    HttpStatusError,
)

log = logging.getLogger(__name__)

METHODS = ("GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
IDEMPOTENCY_HEADER = "Idempotency-Key"
RETRY_AFTER_LIMIT_SECONDS = 31_536_000.0  # a year: keeps an absurd header finite; the retry policy caps the wait
EXCERPT_CHARS = 300


CALL = "http.request"
TIMEOUT_MAX_MS = 86_400_000.0  # a day: more is a mistake (and overflows the socket's timeval)
URL_MAX_CHARS = 8192
_SCALARS = (str, int, float)
_USERINFO = re.compile(r"//[^/@?#]*@")


def _bad(message: str) -> HttpArgumentError:
    return HttpArgumentError(f"{CALL}: {message}")


def _check_text(name: str, value: Any, *, header: bool = False) -> str:
    if not isinstance(value, str):
        raise _bad(f"{name} must be a string, got {shown(value)}")
    if any(ch in value for ch in "\r\n\x00"):
        raise _bad(f"{name} holds a line break or NUL byte: {shown(value)}")
    if header:
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise _bad(f"{name} must be Latin-1 text (HTTP headers cannot carry it), got "
                       f"{shown(value)}") from None
    return value


def _check_scalar(name: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(f"{name} must be finite, got {value!r}")
    if isinstance(value, str):
        if unencodable(value) is not None:
            raise _bad(f"{name} holds text UTF-8 cannot encode: {shown(value)}")
    elif value is not None and not isinstance(value, _SCALARS):
        raise _bad(f"{name} must be a string or a number, got {shown(value)}")


def _check_pairs(name: str, value: Any) -> None:
    """A dict of str -> scalar (or a list of scalars), as ``params`` and form ``data`` take."""
    if not isinstance(value, Mapping):
        raise _bad(f"{name} must be a dict, got {shown(value)}")
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise _bad(f"{name} keys must be non-empty strings, got {shown(key)}")
        if isinstance(item, (list, tuple)):
            for element in item:
                _check_scalar(f"{name}[{key!r}]", element)
        else:
            _check_scalar(f"{name}[{key!r}]", item)


def _check_url(url: Any) -> None:
    if not isinstance(url, str):
        raise _bad(f"url must be a string starting with http:// or https://, got {shown(url)}")
    if len(url) > URL_MAX_CHARS:
        raise _bad(f"url is {len(url)} characters long; the limit is {URL_MAX_CHARS}")
    if any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise _bad(f"url holds a space or control character: {_shown(url)}")
    try:
        url.encode("utf-8")
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port out of range
    except (UnicodeEncodeError, ValueError) as exc:
        raise _bad(f"url {_shown(url)} is not a valid URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise _bad(f"url {_shown(url)} must start with http:// or https://")
    if not parts.hostname:
        raise _bad(f"url {_shown(url)} has no host")


def check_request(
    method: Any,
    url: Any,
    headers: Any = None,
    params: Any = None,
    data: Any = None,
    json_body: Any = None,
    timeout_ms: Any = None,
    idempotency_key: Any = None,
) -> str:
    """Check the arguments of :meth:`HttpClient.request` without sending anything; returns the
    method in upper case. Raises :class:`HttpArgumentError` naming the first bad parameter (see the
    module docstring for the rules)."""
    verb = method.upper() if isinstance(method, str) else ""
    if verb not in METHODS:
        raise _bad(f"HTTP method {shown(method)} is not one of {', '.join(METHODS)}")
    _check_url(url)
    if headers is not None:
        if not isinstance(headers, Mapping):
            raise _bad(f"headers must be a dict of strings, got {shown(headers)}")
        for key, value in headers.items():
            _check_text("header names", key, header=True)
            if not key or any(ch in key for ch in " \t:"):
                raise _bad(f"header name {shown(key)} is not a valid HTTP header name")
            _check_text(f"header {key!r}", value, header=True)
    if params is not None:
        _check_pairs("params", params)
    if data is not None and json_body is not None:
        raise _bad(f"{verb} {_shown(url)}: pass data or json_body, not both")
    if data is not None and not isinstance(data, (str, bytes, bytearray)):
        _check_pairs("data", data)
    if json_body is not None:
        try:
            json.dumps(json_body, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _bad(f"json_body is not JSON: {exc}") from None
    if timeout_ms is not None and (
        isinstance(timeout_ms, bool)
        or not isinstance(timeout_ms, (int, float))
        or not (0 < timeout_ms <= TIMEOUT_MAX_MS)  # False for NaN
    ):
        raise _bad(f"timeout_ms must be positive (a finite number of milliseconds, at most a day), "
                   f"got {shown(timeout_ms)}")
    if idempotency_key is not None:
        _check_text("idempotency_key", idempotency_key, header=True)
    return verb


def _shown(url: str) -> str:
    """The URL for messages: no credentials, no query string (it may hold an API key)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:  # not a URL (a broken IPv6 host, a port out of range): cut what may be secret
        return shown(_USERINFO.sub("//", url.split("?", 1)[0].split("#", 1)[0]))
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 3] + "..."


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delay-seconds or HTTP-date, from ``now``); None if
    absent or unreadable. Not shortened (a retry sooner would break the server's word), only kept
    finite (:data:`RETRY_AFTER_LIMIT_SECONDS`): how long is too long is the retry policy's
    ``retry_after_max_seconds``."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return min(float(text), RETRY_AFTER_LIMIT_SECONDS)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return min(max(0.0, when.timestamp() - now), RETRY_AFTER_LIMIT_SECONDS)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _body_json(response: requests.Response) -> Any:
    """The parsed body when it is JSON (by Content-Type, or untyped text that parses), else None."""
    if not response.content:
        return None
    content_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
    if content_type and not (content_type == "application/json" or content_type.endswith("+json")):
        return None
    try:
        return json.loads(response.text, parse_constant=_reject_constant)
    except ValueError:
        return None


class HttpClient:
    """One pooled, thread-safe HTTP session (shared by every run of a runtime)."""

    def __init__(self, verify_tls: bool = True, pool_connections: int = 10, default_timeout_ms: int = 10_000) -> None:
        self.default_timeout_ms = default_timeout_ms
        self._session = requests.Session()
        self.verify_tls = verify_tls
        self._session.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
        size = max(1, pool_connections)
        adapter = HTTPAdapter(pool_connections=size, pool_maxsize=size, max_retries=0)
        self._session.mount("http://", adapter)
        self._session.mount("https://", adapter)

    @classmethod
    def from_config(cls, config: Config) -> HttpClient:
        return cls(config.http.verify_tls, config.http.pool_connections, config.http.default_timeout_ms)

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
        data: Any = None,
        json_body: Any = None,
        timeout_ms: int | None = 10_000,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Send one request (no retries here: the step's policy retries) and return the answer.

        ``data`` is a form dict, text or bytes; ``json_body`` any JSON value (not both).
        ``timeout_ms`` bounds connecting and each wait for data (None: the config default).
        Returns ``{"status": int, "headers": {lower-case name: value}, "json": parsed body or None,
        "text": body text}``. Raises as described in the module docstring; bad arguments
        (:func:`check_request`) raise HttpArgumentError before a connection is opened.
        """
        verb = check_request(method, url, headers, params, data, json_body, timeout_ms, idempotency_key)
        timeout_s = (timeout_ms if timeout_ms is not None else self.default_timeout_ms) / 1000.0
        sent_headers = dict(headers or {})
        if verb not in SAFE_METHODS and not any(k.lower() == IDEMPOTENCY_HEADER.lower() for k in sent_headers):
            sent_headers[IDEMPOTENCY_HEADER] = idempotency_key or str(uuid.uuid4())
        where = f"{verb} {_shown(url)}"
        started = time.monotonic()
        try:
            response = self._session.request(
                verb,
                url,
                headers=sent_headers,
                params=params,
                data=data,
                json=json_body,
                timeout=(timeout_s, timeout_s),
                # per request: a session-level False loses to REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE in the
                # environment, while True still lets those name a site's own CA bundle
                verify=self.verify_tls,
            )
        except requests.exceptions.SSLError as exc:
            raise HttpRequestError(f"{where}: TLS failed: {exc}") from exc
        except requests.exceptions.Timeout as exc:
            raise CommunicationError(f"{where}: timed out after {timeout_s * 1000:.0f} ms") from exc
        except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError) as exc:
            raise CommunicationError(f"{where}: cannot connect: {_reason(exc)}") from exc
        except (
            requests.exceptions.InvalidURL,
            requests.exceptions.InvalidSchema,
            requests.exceptions.MissingSchema,
        ) as exc:
            raise HttpRequestError(f"{where}: invalid URL: {exc}") from exc
        except (requests.exceptions.RequestException, ValueError, TypeError) as exc:
            raise HttpRequestError(f"{where}: invalid request: {exc}") from exc
        log.debug("%s -> %s in %.1f ms", where, response.status_code, (time.monotonic() - started) * 1000)
        return self._outcome(where, response)

    def _outcome(self, where: str, response: requests.Response) -> dict[str, Any]:
        status = response.status_code
        if status in (408, 429) or status >= 500:
            retry_after = parse_retry_after(response.headers.get("Retry-After")) if status in (429, 503) else None
            hint = f", retry after {retry_after:g} s" if retry_after is not None else ""
            raise HttpRetryableStatus(
                f"{where}: HTTP {status} {response.reason or ''}".rstrip() + f"{hint}: {_excerpt(response.text)}",
                status,
                retry_after,
            )
        if 400 <= status < 500:
            raise HttpStatusError(
                f"{where}: HTTP {status} {response.reason or ''}".rstrip() + f": {_excerpt(response.text)}",
                status,
            )
        return {
            "status": status,
            "headers": {k.lower(): v for k, v in response.headers.items()},
            "json": _body_json(response),
            "text": response.text,
        }

    def close(self) -> None:
        self._session.close()


def _reason(exc: BaseException) -> str:
    """The innermost cause's text (urllib3 wraps the socket error several levels deep)."""
    seen = exc
    for _ in range(10):  # bounded: a context chain can loop
        if seen.__context__ is None:
            break
        seen = seen.__context__
    inner = str(seen) or type(seen).__name__
    return inner if len(inner) <= 200 else inner[:197] + "..."
