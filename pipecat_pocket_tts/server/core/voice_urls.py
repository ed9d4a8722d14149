"""Voice recordings fetched from the URLs a server's operator allows (``--voice-url-host``).

By default the server fetches no URL a client sends. Each allow-list entry names one origin:
``HOST`` or ``HOST:PORT`` (https only), ``https://HOST[:PORT]`` or ``http://HOST[:PORT]`` (plain
http only where the operator wrote it); without a port any port of that host. A ``voice_url``
is fetched when its scheme, host and port match an entry: one GET, no proxy from the
environment, at most ``MAX_REDIRECTS`` redirects and each to an allowed origin too, at most the
upload limit in bytes, within ``FETCH_TIMEOUT_S`` in all. Any other URL is refused before
anything is sent. ``hf://`` URLs (upstream's Hugging Face voices) are refused: this server
downloads nothing a client names from the hub.
"""

from __future__ import annotations

import http.client
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urljoin, urlsplit

from ...engine.errors import ServerConfigError
from .errors import RequestError

VOICE_URL_HOSTS_ENV = "POCKET_TTS_VOICE_URL_HOSTS"
"""Comma-separated allow-list entries, used when no ``--voice-url-host`` is given."""
FETCH_TIMEOUT_S = 10.0
"""The whole fetch of a voice_url (redirects included), connecting and reading."""
MAX_REDIRECTS = 3
_REDIRECTS = (301, 302, 303, 307, 308)
_SCHEMES = ("http", "https")
_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class AllowedOrigin:
    """One allow-list entry: a scheme, a host and a port (None: any port)."""

    scheme: str
    host: str
    port: int | None = None

    @classmethod
    def parse(cls, entry: str) -> AllowedOrigin:
        """``HOST``, ``HOST:PORT`` or ``http[s]://HOST[:PORT]``; ``ServerConfigError`` else."""
        text = entry.strip()
        parts = urlsplit(text if "://" in text else f"https://{text}")
        try:
            port = parts.port
        except ValueError:
            port = -1
        if (
            parts.scheme not in _SCHEMES
            or not parts.hostname
            or port == -1
            or parts.username is not None
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
        ):
            raise ServerConfigError(
                f"--voice-url-host {entry!r}: expected HOST, HOST:PORT or "
                "http[s]://HOST[:PORT] (no path)"
            )
        return cls(parts.scheme, parts.hostname, port)

    def allows(self, url: SplitResult) -> bool:
        return (
            url.scheme == self.scheme
            and url.hostname == self.host
            and (self.port is None or url.port == self.port)
        )

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}" + ("" if self.port is None else f":{self.port}")


def resolve_voice_url_hosts(
    given: Sequence[str] | None, environ: Mapping[str, str] = os.environ
) -> tuple[str, ...]:
    """The ``--voice-url-host`` entries given, else ``POCKET_TTS_VOICE_URL_HOSTS``'s."""
    if given:
        return tuple(given)
    listed = environ.get(VOICE_URL_HOSTS_ENV, "")
    return tuple(entry.strip() for entry in listed.split(",") if entry.strip())


class VoiceUrls:
    """Which voice URLs the server fetches, and the fetch."""

    def __init__(self, entries: Sequence[str] = (), timeout: float = FETCH_TIMEOUT_S) -> None:
        self.origins = tuple(AllowedOrigin.parse(entry) for entry in entries)
        self.timeout = timeout

    def check(self, url: str) -> SplitResult:
        """``url`` split, if the server may fetch it; ``RequestError`` (400, 403) if not."""
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme == "hf":
            raise RequestError(
                400,
                "hf:// voice URLs are not fetched by this server (it downloads nothing a client "
                "names from the hub); use a voice name (GET /v1/voices) or upload voice_wav",
            )
        if scheme not in _SCHEMES:
            raise RequestError(400, "voice_url takes a voice name of this server or an http(s) URL")
        try:
            port = parts.port
        except ValueError:
            raise RequestError(400, "voice_url has an invalid port") from None
        if not parts.hostname:
            raise RequestError(400, "voice_url names no host")
        if parts.username is not None or parts.password is not None:
            raise RequestError(400, "voice_url may not carry credentials")
        if not self.origins:
            raise RequestError(
                403,
                "this server fetches no voice URL (its operator allows none: --voice-url-host); "
                "use a voice name (GET /v1/voices) or upload voice_wav",
            )
        if not any(origin.allows(parts) for origin in self.origins):
            where = f"{scheme}://{parts.hostname}" + (f":{port}" if port else "")
            raise RequestError(
                403, f"voice_url: {where} is not among the origins this server fetches from"
            )
        return parts

    def fetch(self, url: str, limit: int) -> bytes:
        """The body of ``url`` (blocking: call it off the event loop), at most ``limit`` bytes;
        redirects followed only to allowed origins. ``RequestError`` when refused or failed."""
        deadline = time.monotonic() + self.timeout
        for _ in range(MAX_REDIRECTS + 1):
            parts = self.check(url)
            status, location, body = _get(parts, limit, deadline)
            if status == 200:
                return body
            if status not in _REDIRECTS:
                raise RequestError(502, f"voice_url answered HTTP {status}")
            if not location:
                raise RequestError(502, f"voice_url answered HTTP {status} with no Location")
            url = urljoin(url, location)
        raise RequestError(502, f"voice_url redirected more than {MAX_REDIRECTS} times")


def _get(parts: SplitResult, limit: int, deadline: float) -> tuple[int, str | None, bytes]:
    """One GET of ``parts`` → (status, Location, body: read only for 200)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise RequestError(504, "fetching voice_url took too long")
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=remaining)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.connect()
        # The response reads through the socket after the connection lets go of it.
        sock = connection.sock
        connection.request("GET", target, headers={"User-Agent": "pocket-tts-server"})
        response = connection.getresponse()
        if response.status != 200:
            return response.status, response.getheader("Location"), b""
        declared = response.getheader("Content-Length", "")
        if declared.isdigit() and int(declared) > limit:
            raise RequestError(413, f"voice_url is over {limit} bytes")
        body = bytearray()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RequestError(504, "fetching voice_url took too long")
            sock.settimeout(remaining)
            # What one receive brings, so a drip is timed.
            chunk = response.read1(_CHUNK_BYTES)
            if not chunk:
                return 200, None, bytes(body)
            body += chunk
            if len(body) > limit:
                raise RequestError(413, f"voice_url is over {limit} bytes")
    except TimeoutError:
        raise RequestError(504, "fetching voice_url took too long") from None
    except (OSError, http.client.HTTPException) as e:
        raise RequestError(502, f"could not fetch voice_url: {e}") from None
    finally:
        connection.close()


__all__ = [
    "FETCH_TIMEOUT_S",
    "MAX_REDIRECTS",
    "VOICE_URL_HOSTS_ENV",
    "AllowedOrigin",
    "VoiceUrls",
    "resolve_voice_url_hosts",
]
