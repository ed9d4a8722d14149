"""The CoreML backend: FluidInference's PocketTTS v2.1 CoreML packs through coremltools.

``contracts`` (model I/O names, shapes and output matching), ``runtime`` (loading, compute
units), ``files`` (hub layout, download filter, local packs), ``constants`` (``constants_bin``),
``states`` (per-sequence arrays), ``backend`` (``CoreMLBackend``), ``cli`` (command-line
options). Importing this package registers the "coreml" pack layout with ``engine.packs``;
coremltools itself is only imported when a model is loaded.
"""

from .files import register as _register

_register()

__all__: list[str] = []
