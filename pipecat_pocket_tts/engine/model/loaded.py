"""A loaded model: a pack's parts on a backend, how it is loaded and shared, its compute pool
and its end. ``PocketTTS`` (``engine/tts.py``) is this plus the ways to make it speak."""

from __future__ import annotations

import weakref
from typing import Any, Self

from ..backends.base import Backend
from ..errors import SessionClosedError
from ..runtime.lazy_scheduler import LazyScheduler
from ..runtime.scheduler import Scheduler
from ..text.planner import TextPlanner
from ..text.prepare import TextPreparer
from ..text.tokenizer import Tokenizer
from ..timing.heads import Heads, check_heads, heads_for
from ..voices.pack_voices import PackVoices
from .assembly import SharedModels, load_parts, resolve_load
from .config import SAMPLE_RATE, ModelConfig
from .options import LoadOptions
from .packs import PackFiles


class LoadedModel:
    """One loaded model (config, backend, tokenizer, voices), from loading to ``close``."""

    sample_rate: int = SAMPLE_RATE

    def __init__(
        self,
        *,
        config: ModelConfig,
        backend: Backend,
        tokenizer: Tokenizer,
        pack: PackFiles,
        options: LoadOptions | None = None,
    ) -> None:
        """Assemble a model from loaded parts; ``load`` is the usual way in.

        Args:
            config: The model's config.
            backend: The backend that runs its stages, weights loaded.
            tokenizer: The pack's tokenizer.
            pack: The pack's files (voices, weights id).
            options: How it was loaded (default: the backend's name alone).
        """
        #: How the model was loaded (the hub token is also used for ``hf://`` voices).
        self.options = options or LoadOptions(backend=backend.name)
        self.config = config
        self.backend = backend
        self.tokenizer = tokenizer
        self.pack = pack
        # Made on first use and closed when the model is dropped: the pool's threads reference
        # only the scheduler (never this object), so a dropped model is collected, and the
        # finalizer then stops those threads, which frees the backend's weights and files.
        self._pool = LazyScheduler()
        self._closed = False
        weakref.finalize(self, self._pool.close_later)
        self._planner = TextPlanner(config, tokenizer)
        self._timestamp_heads = heads_for(config) if backend.capabilities.attention_probe else None
        self._voices = PackVoices(config, backend, pack, token=self.options.token)

    @property
    def timestamp_heads(self) -> Heads | None:
        """The FlowLM (layer, head) pairs word timestamps read, or None: times are estimated.

        From the checkpoint's head table (``engine/timing/heads.json``); None for a custom
        ``config.json``, an unknown checkpoint or a backend without attention (CoreML). Set it
        for a fine-tuned model whose heads you know; a pair outside the model is refused.
        """
        return self._timestamp_heads

    @timestamp_heads.setter
    def timestamp_heads(self, heads: Heads | None) -> None:
        self._timestamp_heads = check_heads(heads, self.config, self.backend)

    # -- loading ------------------------------------------------------------------------
    @classmethod
    def load(
        cls, language: str = "english", *, options: LoadOptions | None = None, **keywords: Any
    ) -> Self:
        """Load a pack on a backend.

        Without ``model_dir`` the files come from the Hugging Face hub at the pinned revisions
        (or ``revision``), through the HF cache and ``HF_TOKEN``/``token``.

        Args:
            language: A pack name (``config_names()``), or a language code ("en", "pt-BR") or
                name ("English") for that language's default pack.
            options: ``LoadOptions``; its fields may also be given as keywords, which win.
            **keywords: ``LoadOptions`` fields: ``backend`` ("auto", "numpy", "coreml"),
                ``model_dir`` (a local pack folder: nothing is downloaded, and its
                ``config.json``, if any, replaces the registry config), ``revision``,
                ``token``, ``sampler_steps``, ``precision`` (NumPy: "fp32", "bf16" or "int8"
                FlowLM linears, the narrow ones with the ``fast`` extra; CoreML: "fp16" or
                "int8"), ``compute_units``…

        Returns:
            The loaded model.
        """
        parts = load_parts(resolve_load(language, LoadOptions.build(options, **keywords)))
        return cls(
            config=parts.pack.config,
            backend=parts.backend,
            tokenizer=parts.tokenizer,
            pack=parts.pack,
            options=parts.options,
        )

    @classmethod
    def load_shared(
        cls, language: str = "english", *, options: LoadOptions | None = None, **keywords: Any
    ) -> Self:
        """Like ``load``, but calls with the same pack and options share one model.

        For servers: ten calls each opening a session load the weights once. The key is the
        pack and ``LoadOptions.cache_key`` (the concrete backend, model_dir, revision…).

        Args:
            language: As in ``load``.
            options: As in ``load``.
            **keywords: As in ``load``.

        Returns:
            The shared model, loaded by the first such call.
        """
        resolved = resolve_load(language, LoadOptions.build(options, **keywords))
        return _SHARED.get(
            resolved.shared_key, lambda: cls.load(resolved.pack_name, options=resolved.options)
        )

    @staticmethod
    def clear_shared() -> None:
        """Forget the models ``load_shared`` keeps.

        Each is freed (its threads end, its files close) once nobody holds it; services and
        sessions in use keep theirs alive.
        """
        _SHARED.clear()

    # -- life ---------------------------------------------------------------------------
    def close(self) -> None:
        """Stop this model's compute threads now and forget it in the shared cache.

        Sessions still speaking on it are cancelled; later calls that speak raise
        ``SessionClosedError``. Idempotent. A model that is simply dropped frees itself too
        (once nobody holds it); ``close`` is for doing it at a known moment.
        """
        self._closed = True
        _SHARED.forget(self)
        self._pool.close()
        self._voices.clear()

    @property
    def closed(self) -> bool:
        """True once ``close`` was called."""
        return self._closed

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- facts --------------------------------------------------------------------------
    @property
    def pack_name(self) -> str:
        """The pack's name, its config's ("english", "french_24l")."""
        return self.config.name

    @property
    def voices(self) -> list[str]:
        """Names of the voices this pack ships."""
        return list(self.pack.voice_names)

    @property
    def default_voice(self) -> str | None:
        """The voice used when none is given."""
        return self.pack.default_voice

    @property
    def text_preparer(self) -> TextPreparer:
        """The pack's text cleaning, chunking and tokenizing, as every session uses them."""
        return self._planner.preparer

    @property
    def scheduler(self) -> Scheduler:
        """The scheduler every session of this model runs on (made on first use)."""
        self._check_open()
        options = self.options
        return self._pool.get(
            lambda: Scheduler(
                self.backend, threads=options.threads, max_streams=options.max_streams
            )
        )

    @property
    def kernels(self) -> dict[str, str]:
        """Which kernels the loaded backend runs, by part ("flow_lm", "mimi"), as the load log
        says them; empty for a backend that does not say (CoreML)."""
        return self.backend.kernels

    def _check_open(self) -> None:
        if self._closed:
            raise SessionClosedError(f"{self!r} was closed: load the model again to speak")

    def __repr__(self) -> str:
        precision = self.backend.precision
        shown = "" if precision is None else f", precision={precision!r}"
        return (
            f"{type(self).__name__}(pack={self.pack_name!r}, backend={self.backend.name!r}{shown})"
        )


_SHARED: SharedModels[LoadedModel] = SharedModels()


__all__ = ["LoadedModel"]
