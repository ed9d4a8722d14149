"""Whether the Hugging Face endpoint can be reached at all, decided within a few seconds.

Without a network, huggingface_hub retries each file's first request with backoff (~23 s)
before it looks in the cache: ~45 s of retries for a pack whose gated weights fall back to the
ungated ones. ``unreachable_reason`` resolves the endpoint's host, opens one TCP connection
to it (``HF_ENDPOINT`` is respected) and sends one ``HEAD /``, each with a short timeout: an
endpoint that accepts connections and never answers (a captive network, a dead proxy port)
would otherwise hold huggingface_hub's requests for minutes (60 s timeouts, five retries).
The engine's downloads ask ``hub_unreachable()`` before their first hub request: one probe
per process and endpoint (cached, thread-safe); when it fails they read the cache only
(``local_files_only``), so cached files are used and missing ones fail at once. Nothing is
probed when
``HF_HUB_OFFLINE`` is set (the cache is all there is), or when a proxy is configured (the
proxy decides what is reachable). The process's offline mode is left alone: other users of
huggingface_hub decide for themselves.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
from urllib.parse import urlsplit

#: Seconds allowed for name resolution, then again for the TCP connection, then for the
#: first byte of the endpoint's answer.
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
                unanswered = _unanswered(sock, url.scheme, host, timeout)
                return None if unanswered is None else f"{where}: {unanswered}"
        except OSError as exc:
            last = exc
    return f"{where}: {_describe(last) if last else 'no address'}"


class _ProcessProbe:
    """The probes of this process, one per endpoint: run by the first caller, answers kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: dict[str, str | None] = {}
        # How many probes were run; tests count them.
        self.probes = 0

    def reason(self) -> str | None:
        """Why the hub is unreachable (probing on the first call), or None if it is not."""
        from huggingface_hub import constants

        # Offline by choice: no probe, nothing to remember.
        if constants.HF_HUB_OFFLINE:
            return None
        endpoint = constants.ENDPOINT
        # Concurrent first loads wait for the one probe.
        with self._lock:
            if endpoint not in self._reasons:
                self.probes += 1
                self._reasons[endpoint] = unreachable_reason()
            return self._reasons[endpoint]


_PROBE = _ProcessProbe()


def hub_unreachable() -> str | None:
    """Why the hub cannot be reached (``host:port: reason``), probed once per process; None
    when it can, when a proxy is set, or when ``HF_HUB_OFFLINE`` is (nothing is probed)."""
    return _PROBE.reason()


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


def _unanswered(sock: socket.socket, scheme: str, host: str, timeout: float) -> str | None:
    """Why one ``HEAD /`` on the connected ``sock`` got no answer (None: some answer came)."""
    try:
        if scheme == "https":
            context = ssl.create_default_context()
            sock = context.wrap_socket(sock, server_hostname=host or None)
        request = f"HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        sock.sendall(request.encode("ascii", "replace"))
        if not sock.recv(1):
            return "the connection was closed without an answer"
    except TimeoutError:
        return f"no answer within {timeout:g} s (PROBE_TIMEOUT_S)"
    except OSError as exc:
        # This includes ssl.SSLError.
        return _describe(exc)
    return None


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
