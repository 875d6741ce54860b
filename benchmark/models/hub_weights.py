"""Whether a hub model's weights can be had at all, decided in a second, before any data is built or read.

Loading a model whose weights are neither in the Hugging Face cache nor reachable makes `transformers` retry
every file for minutes before it gives up. A run checks first: weights in the cache, or the hub's host
answering a TCP connection, are enough to go on; anything else is one line that says where it looked.
Behind a proxy (HTTPS_PROXY / ALL_PROXY set) a direct connection says nothing, so only the cache is checked
and the load itself decides.
"""
from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
CONNECT_TIMEOUT_S = 3.0


def in_hub_cache(repo_id: str) -> bool:
    """True when the cache holds the repository's config.json (any revision the cache's refs name)."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)


def host_answers(url: str, timeout: float = CONNECT_TIMEOUT_S) -> str | None:
    """None when `url`'s host accepts a TCP connection within `timeout`; else why not, in a few words."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (80 if parts.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        return f"{host}:{port} cannot be reached ({exc.strerror or type(exc).__name__})"
    return None


def hub_weights_problem(repo_id: str) -> str | None:
    """Why the weights of `repo_id` cannot be loaded (not cached and the hub unreachable or switched off),
    or None when the load may go ahead."""
    from huggingface_hub import constants

    if in_hub_cache(repo_id):
        return None
    where = f"{repo_id} is not in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    if constants.HF_HUB_OFFLINE:
        return f"{where} and HF_HUB_OFFLINE is set"
    if any(os.environ.get(v) for v in PROXY_VARIABLES):
        return None
    unreachable = host_answers(constants.ENDPOINT)
    return f"{where} and the hub {unreachable}" if unreachable else None
