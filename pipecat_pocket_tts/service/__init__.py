"""The Pipecat side: ``PocketTTSService`` and what it is made of (turns, loading, settings)."""

from .service import PocketTTSService, PocketTTSSettings

__all__ = ["PocketTTSService", "PocketTTSSettings"]
