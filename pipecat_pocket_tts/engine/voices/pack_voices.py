"""The voices of one loaded model: what a voice argument means there, its prefilled FlowLM
state (made once per voice and kept), and voices cloned from recordings."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import UnknownVoiceError
from .cloning import AudioSource, clone_voice
from .source import VoiceSource, fetch_hub_voice, parse_voice
from .state_cache import VoiceStateCache
from .voice import WEIGHTS_METADATA_KEY, Voice

if TYPE_CHECKING:
    from ..backends.base import Backend, FlowState
    from ..model.config import ModelConfig
    from ..model.packs import PackFiles

VoiceLike = str | os.PathLike[str] | Voice
"""A pack voice name, a voice-state or recording path, an ``hf://`` hub file, or a Voice."""


class PackVoices:
    """The voices a model speaks with: checked, prefilled once per voice, cloned."""

    def __init__(
        self,
        config: ModelConfig,
        backend: Backend,
        pack: PackFiles,
        *,
        token: str | bool | None = None,
    ) -> None:
        """Serve the voices of ``pack`` on ``backend``.

        Args:
            config: The model's config; a voice file must have been made for it.
            backend: Where voices are prefilled (and recordings cloned).
            pack: The pack's files: its voice names, default voice and weights id.
            token: The hub token for ``hf://`` voice files.
        """
        self._config = config
        self._backend = backend
        self._pack = pack
        self._token = token
        self._states = VoiceStateCache()

    def clone(self, source: AudioSource, *, sample_rate: float | None = None) -> Voice:
        """A ``Voice`` cloned from a recording, stamped with the pack's weights id.

        Args:
            source: A recording's path, or its samples.
            sample_rate: The samples' rate (samples only).

        Returns:
            The cloned voice.
        """
        voice = clone_voice(
            self._backend, source, sample_rate=sample_rate, config_name=self._config.name
        )
        voice.metadata[WEIGHTS_METADATA_KEY] = self._pack.weights_id
        return voice

    def check(self, voice: VoiceLike | None = None) -> VoiceSource:
        """What ``voice`` means for this pack, checked without download, cloning or prefill.

        Args:
            voice: A ``VoiceLike``; None is the pack's default voice.

        Returns:
            The parsed voice source.
        """
        if voice is None:
            voice = self._pack.default_voice
            if voice is None:
                raise UnknownVoiceError(
                    f"pack {self._config.name!r} ships no voice; pass voice= as the path of a "
                    "voice .safetensors file or a Voice"
                )
        source = parse_voice(voice, self._pack)
        if source.voice is not None:
            source.voice.check_compatible(self._config, weights_id=self._pack.weights_id)
        return source

    def state(self, voice: VoiceLike | None = None) -> FlowState:
        """The prefilled FlowLM state of ``voice``, made once per voice.

        Hub files are downloaded (through the HF cache) and recordings cloned on first use.

        Args:
            voice: Anything ``check`` takes.

        Returns:
            The state; synthesis never modifies it.
        """
        source = self.check(voice)
        if source.voice is not None:
            return self._backend.flow_state_from_voice(source.voice.kv)
        config = self._config
        if source.name is not None:
            name = source.name
            return self._prefilled(
                ("pack", name), lambda: Voice.load(self._pack.voice_path(name), config)
            )
        if source.hub is not None:
            hub = source.hub
            path = fetch_hub_voice(hub, token=self._token)
            key = ("hub", hub.repo, hub.path, hub.revision)
        else:
            assert source.path is not None
            path = source.path
            stat = path.stat()
            key = ("file", str(path), stat.st_mtime_ns, stat.st_size)
        if source.is_recording:
            return self._prefilled(("clone", *key), lambda: self.clone(path))
        weights_id = self._pack.weights_id
        return self._prefilled(key, lambda: Voice.load(path, config, weights_id=weights_id))

    def clear(self) -> None:
        """Forget every prefilled state."""
        self._states.clear()

    def _prefilled(self, key: tuple[object, ...], make_voice: Callable[[], Voice]) -> FlowState:
        return self._states.get(key, lambda: self._backend.flow_state_from_voice(make_voice().kv))


__all__ = ["PackVoices", "VoiceLike"]
