"""Who may use the server: the API key, the bind rule, and the key check of every route.

A server bound anywhere but loopback refuses to start without an API key. The key is a bearer
token (``Authorization: Bearer KEY``) on HTTP and on the websocket handshake, where a browser
may offer it as the subprotocol ``bearer.KEY`` instead (``wire.handshake``) and Gradium's
clients send it as ``x-api-key``; compared in constant time, and never logged
(``wire.handshake.HiddenHeaders``).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping, Sequence

from ...engine.errors import ServerConfigError
from ...wire.handshake import KEY_SUBPROTOCOL_PREFIX

API_KEY_ENV = "POCKET_TTS_API_KEY"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(key: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The key given, else ``POCKET_TTS_API_KEY``; None when neither is set (or blank)."""
    key = key if key is not None else environ.get(API_KEY_ENV)
    return key.strip() or None if key is not None else None


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse a bind beyond loopback without an API key."""
    if api_key is None and not is_loopback(host):
        raise ServerConfigError(
            f"refusing to listen on {host!r} without an API key: anyone who reaches it could "
            f"use it. Pass --api-key KEY or set {API_KEY_ENV}, or bind 127.0.0.1"
        )


class KeyCheck:
    """The server's API key (None: no key, loopback only) and the constant-time check."""

    def __init__(self, api_key: str | None) -> None:
        self._key = api_key.encode() if api_key else None

    @property
    def required(self) -> bool:
        return self._key is not None

    def accepts(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value carries the key (always, with no key)."""
        if self._key is None:
            return True
        scheme, _, token = (authorization or "").partition(" ")
        given = token.strip().encode() if scheme.lower() == "bearer" else b""
        return hmac.compare_digest(given, self._key)

    def accepts_token(self, token: str | None) -> bool:
        """Whether a bare token (Gradium's ``x-api-key`` header) is the key (always, with no
        key); compared in constant time."""
        if self._key is None:
            return True
        return hmac.compare_digest((token or "").strip().encode(), self._key)

    def accepts_subprotocols(self, offers: Sequence[str]) -> bool:
        """Whether a websocket's offered subprotocols carry the key as ``bearer.KEY``
        (always, with no key); each offer is compared in constant time."""
        if self._key is None:
            return True
        found = False
        for offer in offers:
            if offer.startswith(KEY_SUBPROTOCOL_PREFIX):
                given = offer[len(KEY_SUBPROTOCOL_PREFIX) :].encode()
                found |= hmac.compare_digest(given, self._key)
        return found

    def admits_handshake(self, headers: Mapping[str, str], offers: Sequence[str]) -> bool:
        """Whether a websocket handshake carries the key, wherever a dialect's clients put it.

        Args:
            headers: The handshake's headers (lower-case names).
            offers: The subprotocols the client offered.

        Returns:
            True when the bearer header, a ``bearer.KEY`` subprotocol or Gradium's
            ``x-api-key`` header holds the key (always, with no key).
        """
        return (
            self.accepts(headers.get("authorization"))
            or self.accepts_subprotocols(offers)
            or self.accepts_token(headers.get("x-api-key"))
        )


__all__ = [
    "API_KEY_ENV",
    "KeyCheck",
    "check_bind",
    "is_loopback",
    "resolve_api_key",
]
