"""Voices: voice states (``Voice``), cloning from a recording, and which voice a caller means."""

from .voice import Voice

__all__ = ["Voice"]
