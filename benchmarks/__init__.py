"""The measurements behind the README's figures, each a module run from the repository's root.

    python -m benchmarks.<kind>.<name> --help

Kinds: ``peers`` (beside upstream pocket-tts, Pipecat's built-in service, the CoreML backend),
``capacity`` (streams, calls and servers one machine carries), ``micro`` (one stage, kernel or
text step), ``soak`` (long runs that count what went wrong) and ``profiles`` (where the event
loop's time and a text's path go). ``benchmarks.common`` holds what they share. The index of
questions, commands and latest figures is ``benchmarks/README.md``. Some benchmarks reuse the
tests' helpers (``tests.pipecat_playback``...), so run them from a checkout, not an install.
"""
