"""Errors in one shape: every HTTP route's refusal, the router's 404/405 and a server fault.

The shape is OpenAI's, ``{"error": {"message", "type", "param", "code"}}``, which the ``openai``
packages turn into their ``APIStatusError`` subclasses; every route returns it, whatever
dialect it speaks, and so does the drain's 503 (``gate.py``). A wrong type where a field's
value goes is a 400 naming the field, never a server error.
"""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...engine import PocketTTSError, UnknownVoiceError

RETRY_AFTER_S = 2
"""What a 503 (the model still loading) tells a client to wait before it tries again."""


class RequestError(Exception):
    """A request the server refuses: its HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class FieldError(RequestError):
    """A request field the server refuses (OpenAI's ``param``: the field's name)."""

    def __init__(self, status: int, message: str, param: str) -> None:
        super().__init__(status, message)
        self.param = param


_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}
_CODES = {401: "invalid_api_key", 404: "not_found", 405: "method_not_allowed", 413: "too_large",
          503: "service_unavailable"}  # fmt: skip


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """The one error shape as a JSON object.

    Args:
        status: The HTTP status the error goes out with.
        message: The reason, one line, as a client may read it.
        param: The request field at fault, if one is.

    Returns:
        ``{"error": {"message", "type", "param", "code"}}``.
    """
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": _CODES.get(status)}}


def error_response(
    status: int,
    message: str,
    *,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """An error in the one shape; a 503 says when to retry (``Retry-After``).

    Args:
        status: The HTTP status.
        message: The reason, as a client may read it.
        param: The request field at fault, if one is.
        headers: Headers to send with it.

    Returns:
        The JSON response.
    """
    headers = dict(headers or {})
    if status == 503:
        headers.setdefault("Retry-After", str(RETRY_AFTER_S))
    return JSONResponse(error_body(status, message, param), status_code=status, headers=headers)


def status_of(error: Exception) -> int:
    """The HTTP status of an error a request raised.

    Args:
        error: A ``RequestError``, an engine error or a ``ValueError``.

    Returns:
        Its status: the ``RequestError``'s own, 400 for a bad value or an unknown voice, 422 for
        another engine error, else 500.
    """
    if isinstance(error, RequestError):
        return error.status
    if isinstance(error, UnknownVoiceError | ValueError):
        return 400
    if isinstance(error, PocketTTSError):
        return 422
    return 500


def shown(value: Any) -> str:
    """A client's value in a message, short."""
    text = repr(value) if isinstance(value, str) else f"a {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route: 404, a method the route lacks: 405)."""
    assert isinstance(exc, HTTPException)
    path = shown(request.url.path)
    messages = {404: f"no route {path}", 405: f"{request.method} is not served on {path}"}
    message = messages.get(exc.status_code, exc.detail)
    return error_response(exc.status_code, message, headers=exc.headers)


async def _server_error(request: Request, exc: Exception) -> Response:
    return error_response(500, "the server failed on this request (see its log)")


EXCEPTION_HANDLERS = {HTTPException: _http_error, Exception: _server_error}
"""The app's exception handlers: every error a route or the router raises, in the one shape."""

__all__ = [
    "EXCEPTION_HANDLERS",
    "RETRY_AFTER_S",
    "FieldError",
    "RequestError",
    "error_body",
    "error_response",
    "shown",
    "status_of",
]
