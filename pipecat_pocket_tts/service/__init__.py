"""The Pipecat side: ``PocketTTSService`` and its steps (``service.py`` lists them)."""

from .service import PocketTTSService, PocketTTSSettings

__all__ = ["PocketTTSService", "PocketTTSSettings"]
