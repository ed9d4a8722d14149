"""The CoreML backend: FluidInference's PocketTTS v2.1 CoreML packs through coremltools.

``io_specs`` (model I/O names, shapes and output matching), ``compiled_models`` (loading,
compute units), ``files`` (hub layout, download filter, local packs), ``constants``
(``constants_bin``), ``hub`` (the repository: downloads, cache housekeeping), ``states``
(per-sequence arrays), ``encoder`` (voice cloning), ``backend`` (``CoreMLBackend``, which owns
the pack layout of ``files``), ``cli_options`` (command-line options). coremltools itself is
only imported when a model is loaded.
"""

__all__: list[str] = []
