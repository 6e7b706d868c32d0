"""One JSON request to an HTTP model server (an LLM judge, a teacher served by vLLM), standard library only.

:func:`send` returns the reply's body or raises :class:`EndpointError`, whose ``retry`` says whether
another attempt may succeed: timeouts, connection errors, HTTP 429 and 5xx may; other HTTP errors and
an oversized body may not. The API key is read from the environment variable ``api_key_env`` at each
request (sent as a bearer token when set), never kept.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request


class EndpointError(Exception):
    """One request failed: ``reason``, and whether trying again may help (``retry``)."""

    def __init__(self, reason: str, retry: bool):
        super().__init__(reason)
        self.reason, self.retry = reason, retry


def send(url: str, body: bytes | None, *, timeout_s: float, api_key_env: str, max_bytes: int, method: str = "POST") -> bytes:
    """``method`` ``url`` with the JSON ``body``; the reply's body (at most ``max_bytes``), or :class:`EndpointError`."""
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(api_key_env, "")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:
            raw = answer.read(max_bytes + 1)
    except urllib.error.HTTPError as err:
        err.close()
        raise EndpointError(f"HTTP {err.code}", retry=err.code == 429 or err.code >= 500) from None
    except urllib.error.URLError as err:
        if isinstance(err.reason, TimeoutError):
            raise EndpointError(f"timeout after {timeout_s}s", retry=True) from None
        raise EndpointError(f"connection: {err.reason}", retry=True) from None
    except TimeoutError:
        raise EndpointError(f"timeout after {timeout_s}s", retry=True) from None
    except OSError as err:  # reset or closed mid-reply
        raise EndpointError(f"connection: {err}", retry=True) from None
    if len(raw) > max_bytes:
        raise EndpointError(f"reply body over {max_bytes:,} bytes", retry=False)
    return raw
