"""The remote engine: a TTS server (``python -m pipecat_pocket_tts serve``) used through the
engine contract (``engine.contract``), as a loaded ``PocketTTS`` is.

``RemoteTTS`` (``tts.py``) speaks the wire protocol (``..wire``) over one websocket
(``link.py``: its thread, reconnections and reader); each of its sessions is a
``RemoteSession`` (``session.py``). No Pipecat and no server module here.
"""

from __future__ import annotations

from .session import RemoteSession
from .tts import RemoteTTS

__all__ = ["RemoteSession", "RemoteTTS"]
