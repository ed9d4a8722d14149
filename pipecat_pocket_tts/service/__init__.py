"""The Pipecat side: ``PocketTTSService`` and what it is made of (turns, loading, settings)."""

from .service import WARMUP_FRAMES, WARMUP_TEXT, PocketTTSService, PocketTTSSettings

__all__ = ["WARMUP_FRAMES", "WARMUP_TEXT", "PocketTTSService", "PocketTTSSettings"]
