"""The TTS server: one loaded model and one scheduler for every bot process that connects.

``python -m pipecat_pocket_tts serve`` (or ``pocket-tts-server``) runs it; ``protocol`` holds
the websocket messages both sides speak; ``client.RemoteTTS`` is what
``PocketTTSService(server_url=...)`` speaks with. The server side imports the engine only.
"""

from __future__ import annotations

from .cli import main

__all__ = ["main"]
