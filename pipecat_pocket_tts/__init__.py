"""Kyutai PocketTTS for Pipecat: a local, streaming, interruptible voice without torch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["PocketTTS", "PocketTTSService", "__version__"]

if TYPE_CHECKING:
    from .engine import PocketTTS
    from .service.service import PocketTTSService


def __getattr__(name: str) -> Any:
    # Lazy: importing the engine must not import Pipecat, and vice versa.
    if name == "PocketTTS":
        from .engine import PocketTTS

        return PocketTTS
    if name == "PocketTTSService":
        from .service.service import PocketTTSService

        return PocketTTSService
    raise AttributeError(name)
