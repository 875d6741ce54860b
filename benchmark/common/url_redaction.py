"""Credentials out of URLs in text that is shown or written: results, provenance, remembered model cards.

Kept apart from `mmbench.common.http_client` (which re-exports these) so that writing a result does not import the
HTTP, TLS and e-mail modules a run from the cache never uses.
"""
from __future__ import annotations

import re
import urllib.parse
from typing import Any

CREDENTIAL_PARAM = re.compile(r"key|token|secret|password|auth|sig|credential", re.IGNORECASE)


def public_url(url: str) -> str:
    """The URL as it may be shown and recorded: no user:password part, no query string, no fragment
    (all of which may carry a credential)."""
    parts = urllib.parse.urlsplit(url.split("?", 1)[0].split("#", 1)[0])
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def _url_without_credentials(url: str) -> str:
    """`url` with no user:password part and `***` for the values of key-like query parameters; the rest
    (a public dataset's query string, say) kept as it was."""
    scheme, rest = url.split("://", 1)
    cut = min([i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    host, tail = rest[:cut].rsplit("@", 1)[-1], rest[cut:]
    tail = re.sub(r"([?&;])([^=&#;]*)=([^&#;]*)",
                  lambda m: m.group(0) if not CREDENTIAL_PARAM.search(m.group(2)) else f"{m.group(1)}{m.group(2)}=***",
                  tail)
    return f"{scheme}://{host}{tail}"


def redact_url_text(text: str) -> str:
    """`text` (a command line, a setting) with the credentials of every URL in it removed."""
    return _URL.sub(lambda m: _url_without_credentials(m.group(0)), text) if "://" in text else text


def redact_urls(value: Any, depth: int = 0) -> Any:
    """A JSON-like value with `redact_url_text` applied to every string in it (keys included), for records
    written to disk: results.json, mmbench.json, remembered model cards."""
    if depth > 64:  # our own records are shallow; anything deeper is not walked further
        return value
    if isinstance(value, str):
        return redact_url_text(value)
    if isinstance(value, dict):
        return {redact_url_text(k) if isinstance(k, str) else k: redact_urls(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_urls(v, depth + 1) for v in value)
    return value
