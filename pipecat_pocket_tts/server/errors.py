"""The error a server request is refused with: an HTTP status and a one-line reason."""

from __future__ import annotations


class RequestError(Exception):
    """A request the server refuses: its HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


__all__ = ["RequestError"]
