"""The portable NumPy backend: PocketTTS stages in float32 NumPy, computing what upstream does.

``weights`` (checkpoint keys, shapes, loading), ``layers`` (shared primitives), ``flowlm``
(text embedding, transformer, KV cache), ``sampler`` (flow net and decoders), ``mimi`` (codec),
``backend`` (``NumpyBackend``, the stage interface over all of them).
"""

from .backend import NumpyBackend

__all__ = ["NumpyBackend"]
