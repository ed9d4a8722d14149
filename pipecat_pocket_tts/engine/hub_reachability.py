"""Whether the Hugging Face endpoint can be reached at all, decided within a few seconds.

Without a network, huggingface_hub retries each file's first request with backoff (~23 s)
before it looks in the cache: ~45 s of retries for a pack whose gated weights fall back to the
ungated ones. ``go_offline_if_unreachable`` resolves the endpoint's host and opens one TCP
connection to it (``HF_ENDPOINT`` is respected) with a short timeout; when that fails the
process is switched to huggingface_hub's offline mode, so cached files are used and missing
ones fail at once with the usual fixes. Nothing is probed when ``HF_HUB_OFFLINE`` is already
set, or when a proxy is configured (the proxy decides what is reachable).
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlsplit

#: Seconds allowed for name resolution, then again for the TCP connection.
PROBE_TIMEOUT_S = 3.0
_PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
_PROXY_VARIABLES += ("ALL_PROXY", "all_proxy")


def unreachable_reason(timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the hub endpoint cannot be reached (``host:port: reason``), or None if it can."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE or any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return None
    url = urlsplit(constants.ENDPOINT)
    host = url.hostname or ""
    port = url.port or (443 if url.scheme == "https" else 80)
    where = f"{host}:{port}"
    addresses, error = _resolve(host, port, timeout)
    if error is not None:
        return f"{where}: {error}"
    last: OSError | None = None
    for family, kind, proto, _, address in addresses:
        try:
            with socket.socket(family, kind, proto) as sock:
                sock.settimeout(timeout)
                sock.connect(address)
                return None
        except OSError as exc:
            last = exc
    return f"{where}: {_describe(last) if last else 'no address'}"


def go_offline_if_unreachable(timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Switch huggingface_hub to offline mode if the endpoint is unreachable; returns why."""
    reason = unreachable_reason(timeout)
    if reason is not None:
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = True
        os.environ["HF_HUB_OFFLINE"] = "1"  # for child processes too
    return reason


def _resolve(host: str, port: int, timeout: float) -> tuple[list, str | None]:
    """``getaddrinfo`` with a timeout (it has none of its own; a dead resolver can hang)."""
    found: list = []
    errors: list[str] = []

    def resolve() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as exc:
            errors.append(_describe(exc))

    thread = threading.Thread(target=resolve, name="hub-resolve", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return [], f"name resolution took over {timeout:.0f} s"
    return found, (errors[0] if errors else None)


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
