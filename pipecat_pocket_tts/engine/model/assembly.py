"""From a pack name and load options to a model's parts, and the models ``load_shared`` keeps.

``resolve_load`` settles which pack and backend a call means (and which options that backend
takes); ``load_parts`` reads the pack's files into a backend and a tokenizer; ``SharedModels``
hands every caller with the same pack and options the same loaded model.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..backends import concrete_options, find_pack_files, load_backend, resolve_backend_name
from ..backends.base import Backend
from ..text.tokenizer import Tokenizer
from .languages import pack_name
from .options import LoadOptions
from .packs import PackFiles

logger = logging.getLogger(__name__)

Model = TypeVar("Model")


@dataclass(frozen=True)
class ResolvedLoad:
    """Which pack, on which backend, with the options that backend takes."""

    pack_name: str
    """The pack's config name: "english", "french_24l", or a custom pack's."""
    backend_kind: str
    """The concrete backend: "numpy" or "coreml"."""
    options: LoadOptions
    """Concrete: no "auto", only this backend's options."""

    @property
    def shared_key(self) -> tuple[Any, ...]:
        """What makes two loads the same model (``load_shared``)."""
        return (self.pack_name, *self.options.cache_key())


@dataclass(frozen=True)
class ModelParts:
    """What a loaded model is made of."""

    pack: PackFiles
    backend: Backend
    tokenizer: Tokenizer
    options: LoadOptions


def resolve_load(requested: str, options: LoadOptions) -> ResolvedLoad:
    """Settle which pack and backend a load means.

    CoreML options that ``auto`` drops on NumPy are logged.

    Args:
        requested: The caller's ``language=``: a pack name, or a language naming its default
            pack.
        options: The load options as given.

    Returns:
        The pack name, the backend ``options.backend`` picks for it, and the options that
        backend takes.
    """
    name = pack_name(requested, custom=options.model_dir is not None)
    kind = resolve_backend_name(options.backend, pack_name=name, model_dir=options.model_dir)
    concrete = concrete_options(options, kind)
    dropped = options.dropped_for(concrete)
    if dropped:
        logger.info(
            "backend='auto' picked numpy here: ignoring the CoreML options %s", ", ".join(dropped)
        )
    return ResolvedLoad(name, kind, concrete)


def load_parts(resolved: ResolvedLoad) -> ModelParts:
    """Find the pack's files (local folder or hub), load the backend and the tokenizer."""
    options = resolved.options
    pack = find_pack_files(
        resolved.pack_name,
        model_dir=options.model_dir,
        revision=options.revision,
        token=options.token,
        backend_kind=resolved.backend_kind,
    )
    backend = load_backend(pack, options)
    tokenizer = Tokenizer.from_file(
        pack.tokenizer, expected_vocab_size=pack.config.flow_lm.lookup_table.n_bins
    )
    return ModelParts(pack=pack, backend=backend, tokenizer=tokenizer, options=options)


class SharedModels(Generic[Model]):
    """Models by key, each loaded once however many threads ask for it at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Hashable, _Entry[Model]] = {}

    def get(self, key: Hashable, load: Callable[[], Model]) -> Model:
        """The model kept under ``key``, loaded by ``load`` on the first call (other callers of
        the same key wait for it; other keys do not)."""
        with self._lock:
            entry = self._entries.setdefault(key, _Entry())
        with entry.lock:
            if entry.model is None:
                entry.model = load()
            return entry.model

    def forget(self, model: Model) -> None:
        """Drop every key that holds ``model``."""
        with self._lock:
            for key, entry in list(self._entries.items()):
                if entry.model is model:
                    del self._entries[key]

    def clear(self) -> None:
        """Forget every model (each is freed once nobody else holds it)."""
        with self._lock:
            self._entries.clear()


class _Entry(Generic[Model]):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.model: Model | None = None


__all__ = ["ModelParts", "ResolvedLoad", "SharedModels", "load_parts", "resolve_load"]
