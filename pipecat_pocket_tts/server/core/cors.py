"""CORS for browsers calling the server from an allowed origin (``--cors-origin``), the official
OpenAI JS SDK included: its preflight asks for its ``x-stainless-*`` headers (SDK and runtime
versions, retry count, timeout), whose list grows with its releases, so the prefix is admitted
beside ``Authorization`` and ``Content-Type``.
"""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp

SDK_HEADER_PREFIX = "x-stainless-"
ALLOWED_HEADERS = ("Authorization", "Content-Type")


class ApiCors(CORSMiddleware):
    """Starlette's CORS for ``origins``, GET and POST, admitting the SDK's header prefix."""

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        super().__init__(
            app,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=list(ALLOWED_HEADERS),
        )

    def preflight_response(self, request_headers: Headers) -> Response:
        """Starlette's answer for the headers it checks; those of the SDK's prefix are
        admitted by name when the rest is."""
        asked = request_headers.get("access-control-request-headers") or ""
        names = [name.strip() for name in asked.split(",") if name.strip()]
        sdk = [name for name in names if name.lower().startswith(SDK_HEADER_PREFIX)]
        others = [name for name in names if name not in sdk]
        checked = request_headers.mutablecopy()
        if others:
            checked["access-control-request-headers"] = ", ".join(others)
        elif "access-control-request-headers" in checked:
            del checked["access-control-request-headers"]
        response = super().preflight_response(Headers(raw=checked.raw))
        if response.status_code == 200 and sdk:
            allowed = response.headers.get("access-control-allow-headers", "")
            response.headers["access-control-allow-headers"] = ", ".join(
                [allowed, *sdk] if allowed else sdk
            )
        return response


__all__ = ["ALLOWED_HEADERS", "SDK_HEADER_PREFIX", "ApiCors"]
