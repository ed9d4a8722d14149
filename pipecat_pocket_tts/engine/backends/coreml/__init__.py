"""The CoreML backend: FluidInference's PocketTTS v2.1 CoreML packs through coremltools.

``contracts`` (model I/O names, shapes and output matching), ``runtime`` (loading, compute
units), ``files`` (hub layout, download filter, local packs), ``constants`` (``constants_bin``),
``hub`` (the repository: downloads, cache housekeeping), ``states`` (per-sequence arrays),
``backend`` (``CoreMLBackend``, which owns the pack layout of ``files``), ``cli``
(command-line options). coremltools itself is only imported when a model is loaded.
"""

__all__: list[str] = []
