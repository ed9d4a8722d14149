"""Command line: speak text into a WAV file, list languages and voices, prefetch packs.

    python -m pipecat_pocket_tts say "Hello there." -o hello.wav [--language french --voice estelle]
    python -m pipecat_pocket_tts say "Hi." -o a.wav --clone-voice me.wav --save-voice me.safetensors
    python -m pipecat_pocket_tts say "Hi again." -o b.wav --voice me.safetensors
    python -m pipecat_pocket_tts voices [--language english | --model-dir DIR]
    python -m pipecat_pocket_tts languages
    python -m pipecat_pocket_tts download english [--voices all|alba,jean]
    python -m pipecat_pocket_tts warmup      # compile the numba kernels now (image builds)
    python -m pipecat_pocket_tts serve [--host 127.0.0.1 --port 8000 --precision int8]
    python -m pipecat_pocket_tts devpack OUT [--config tiny]   # a random-weight pack

Exit codes: 0 success; 2 a usage error or a PocketTTS error (its message says what to do),
including a missing or invalid input file (voice, recording, pack); 1 an output file that cannot
be written (or another I/O failure of the system); 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .cli_wording import in_terms_of

EXIT_OK = 0
EXIT_IO = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# -- commands ------------------------------------------------------------------------------


def cmd_say(args: argparse.Namespace) -> int:
    from .engine import PocketTTS
    from .engine.audio.output_file import audio_format, check_output
    from .engine.audio.wav import write_wav
    from .engine.backends.coreml.cli_options import backend_options
    from .engine.timing.subtitles import timestamps_text, write_timestamps

    if args.save_voice is not None and args.clone_voice is None:
        raise ValueError("--save-voice saves a cloned voice: use it with --clone-voice AUDIO")
    # Every output checked before any synthesis (and no folder is created).
    output = check_output(args.output)
    chosen_format = audio_format(output, args.format)
    if args.save_voice is not None:
        check_output(args.save_voice)
    if args.timestamps is not None:
        # A wrong extension fails here, before any synthesis.
        timestamps_text([], args.timestamps.suffix)
        check_output(args.timestamps)
    text = sys.stdin.read() if args.text == "-" else args.text
    started = time.perf_counter()
    tts = PocketTTS.load(
        args.language,
        backend=args.backend,
        model_dir=args.model_dir,
        revision=args.revision,
        **backend_options(args),
    )
    voice: Any = args.voice
    if args.clone_voice is not None:
        voice = tts.clone_voice(args.clone_voice)
        if args.save_voice is not None:
            print(f"saved voice {voice.save(args.save_voice)}", file=sys.stderr)
    loaded = time.perf_counter()
    options: dict[str, Any] = {
        "voice": voice,
        "seed": args.seed,
        "temperature": args.temperature,
        "eos_threshold": args.eos_threshold,
        "speed": args.speed,
        "max_frames": args.max_frames,
        "normalize": args.normalize,
        "post_process": args.post_process,
    }
    if args.timestamps is not None:
        audio, words = tts.synthesize(text, timestamps=True, **options)
        print(f"wrote {write_timestamps(words, args.timestamps)}", file=sys.stderr)
    else:
        audio = tts.synthesize(text, **options)
    spoke = time.perf_counter()
    write_wav(args.output, audio, tts.sample_rate, audio_format=chosen_format)
    seconds = audio.shape[0] / tts.sample_rate
    print(
        f"wrote {output.name} ({seconds:.2f} s of audio; load {loaded - started:.2f} s, "
        f"synthesis {spoke - loaded:.2f} s, {tts.backend.name} backend)",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_voices(args: argparse.Namespace) -> int:
    from .engine.backends import find_pack_files
    from .engine.backends.numpy.weights import pack_files as files
    from .engine.model.config import get_config
    from .engine.model.config_reference import is_config_reference
    from .engine.model.languages import find_language, pack_name

    if args.model_dir is not None or is_config_reference(args.language):
        pack = find_pack_files(args.language, model_dir=args.model_dir)
        for name in pack.voice_names:
            print(_voice_line(name, default=name == pack.default_voice))
        if not pack.voice_names:
            print(f"no voices in {args.model_dir / files.VOICES_FOLDER}", file=sys.stderr)
        print(_voices_legend(find_language(args.language)), file=sys.stderr)
        return EXIT_OK

    # An unknown language raises UnknownLanguageError, which lists the choices.
    config = get_config(pack_name(args.language))
    info = find_language(config.name)
    default = info.default_voice if info is not None else None
    for name in files.KNOWN_VOICES:
        hub = files.voice_hub_file(config, name, revision=args.revision)
        cached = _in_hf_cache(hub.repo, hub.path, hub.revision)
        print(_voice_line(name, default=name == default, cached=cached))
    print(_voices_legend(info), file=sys.stderr)
    print(
        f"(the hub catalogue: which voices exist for {config.name} is checked on first use)",
        file=sys.stderr,
    )
    return EXIT_OK


def _voice_line(name: str, *, default: bool, cached: bool = False) -> str:
    """``name  (marks)``: the language it was recorded in, the pack's default, cached."""
    from .engine.model.languages import native_language

    marks = []
    recorded_in = native_language(name)
    if recorded_in is not None and recorded_in.code == "en":
        marks.append("English-trained")
    elif recorded_in is not None:
        unverified = "" if recorded_in.natives_published else ", unverified"
        marks.append(f"native {recorded_in.name}{unverified}")
    if default:
        marks.append("default")
    if cached:
        marks.append("cached")
    return name + (f"  ({', '.join(marks)})" if marks else "")


def _voices_legend(info: Any) -> str:
    """What the marks of ``voices`` mean, first for the listed language (``LanguageInfo``)."""
    from .engine.model.languages import LITERARY_VOICES

    own = ""
    if info is not None and info.code != "en" and info.native_voices:
        which = ", ".join(info.native_voices)
        why = f"the most idiomatic for {info.name} text"
        why = why if info.natives_published else "upstream's list, unverified"
        own = f"{which}: recorded in {info.name} ({why}). "
    return (
        f"{own}Marks: English-trained = one of the {len(LITERARY_VOICES)} literary voices, "
        "recorded in English; native X = recorded in X; default = used when no voice is named. "
        "Each pack holds every name, with embeddings of its own language (the published voice "
        "catalogue; daan's Dutch is in upstream's list only)."
    )


def _in_hf_cache(repo: str, path: str, revision: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo, path, revision=revision)
    except Exception:
        # An odd cache must not break a listing.
        return False
    return isinstance(found, str)


SAMPLER_LEGEND = (
    "SAMPLER: how each frame's latent is drawn from the model's output: lsd and flow_matching "
    "run the flow net sampler_steps times (1 by default), drifting and pointwise once. "
    "DEFAULT: the pack a language's name or code (en, German) loads."
)


def cmd_languages(args: argparse.Namespace) -> int:
    from .engine.model.config import get_config
    from .engine.model.config_reference import is_config_reference
    from .engine.model.config_registry import config_names
    from .engine.model.languages import find_language, pack_name
    from .engine.model.upstream_config import read_config

    # An upstream config: its own row; else the packs of a language, or every pack.
    if is_config_reference(args.language):
        configs = [read_config(args.language)]
    else:
        names = config_names()
        if args.language is not None:
            wanted = get_config(pack_name(args.language)).language
            names = [name for name in names if get_config(name).language == wanted]
        configs = [get_config(name) for name in names]
    rows = [("PACK", "LANGUAGE", "SIZE", "SAMPLER", "DEFAULT")]
    for config in configs:
        name = config.name
        tr = config.flow_lm.transformer
        info = find_language(config.language)
        default = info is not None and info.default_pack == name
        rows.append(
            (
                name,
                config.language,
                f"{tr.num_layers} layers × {tr.d_model}",
                config.flow_lm.sampler.type,
                "default" if default else "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[4]]).rstrip())
    print(SAMPLER_LEGEND, file=sys.stderr)
    return EXIT_OK


def cmd_download(args: argparse.Namespace) -> int:
    from .engine.backends import find_pack_files
    from .engine.backends.numpy.weights.pack_files import download_pack, select_voices
    from .engine.model.config_reference import is_config_reference
    from .engine.model.languages import pack_name

    language = pack_name(args.language)
    voices = select_voices(args.voices)
    # An upstream config names its own weights and tokenizer.
    if is_config_reference(language):
        pack = find_pack_files(language, voice_cloning=False if args.without_cloning else None)
        print(f"weights ({_cloning(pack.has_voice_cloning)}): {pack.weights}")
        print(f"tokenizer: {pack.tokenizer}")
        return EXIT_OK
    if args.backend == "coreml":
        from .engine.backends.coreml.files import download_coreml_pack

        coreml_pack, fetched_paths = download_coreml_pack(
            language,
            precision=args.precision,
            voices=voices,
            revision=args.revision,
            cloning=not args.without_cloning,
        )
        print(f"CoreML pack ({args.precision}): {coreml_pack.root}")
        print(f"voices ({len(fetched_paths)}): {', '.join(fetched_paths) or 'none'}")
        return EXIT_OK
    pack, fetched = download_pack(
        language,
        voices=voices,
        revision=args.revision,
        voice_cloning=False if args.without_cloning else None,
    )
    print(f"weights ({_cloning(pack.has_voice_cloning)}): {pack.weights}")
    print(f"tokenizer: {pack.tokenizer}")
    print(f"voices ({len(fetched)}): {', '.join(fetched) or 'none'}")
    return EXIT_OK


def _cloning(has_voice_cloning: bool) -> str:
    return "with voice cloning" if has_voice_cloning else "without voice cloning"


def cmd_warmup(args: argparse.Namespace) -> int:
    from .engine.backends.numpy.kernels import (
        arithmetic,
        compiled,
    )
    from .engine.backends.numpy.kernels import (
        cache as kernel_cache,
    )

    if not compiled.numba_installed():
        print(
            "numba is not installed: nothing to compile (NumPy runs fp32; the 'fast' extra "
            "adds the compiled kernels and the bf16/int8 precisions)",
            file=sys.stderr,
        )
        return EXIT_OK
    kernel_cache.announce_first_compile(ahead=True)
    compiled.required()
    # Also compile the kernels of the wider arithmetic this CPU has (bf16, and int16 with the
    # int8 kernel on the paths a load chooses).
    arithmetic.bf16_kernels()
    if arithmetic.int16_kernels() is not None:
        arithmetic.choose_int16_kernel()
        arithmetic.choose_int8_kernel()
    folder = kernel_cache.cache_folder()
    print(f"numba kernels compiled and cached in {folder or 'numba’s cache'}", file=sys.stderr)
    return EXIT_OK


def _serve(args: argparse.Namespace) -> int:
    from .server import serve_command

    return serve_command.run(args)


def _devpack(args: argparse.Namespace) -> int:
    from .devpack import command as devpack_command

    return devpack_command.run(args)


COMMANDS = {
    "say": cmd_say,
    "voices": cmd_voices,
    "languages": cmd_languages,
    "download": cmd_download,
    "warmup": cmd_warmup,
    "devpack": lambda args: _devpack(args),
    "serve": lambda args: _serve(args),
}


# -- errors in the terms of this command line ------------------------------------------------

# Engine messages name API arguments; here they are flags.
_FLAG_OF_ARGUMENT = {
    "model_dir": "--model-dir",
    "backend": "--backend",
    "voice": "--voice",
    "revision": "--revision",
    "compute_units": "--compute-units",
    "precision": "--precision",
    "temperature": "--temperature",
    "eos_threshold": "--eos-threshold",
    "max_frames": "--max-frames",
    "seed": "--seed",
    "speed": "--speed",
    "audio_format": "--format",
}


def shell_wording(message: str, args: argparse.Namespace) -> str:
    """An engine error message as a shell user needs it: flags, and fixes that fit the command.

    ``download`` itself is the prefetch step: its errors do not suggest running it again,
    and name ``--model-dir`` as an option of ``say``.
    """
    from .engine.model.packs import PREFETCH_FIX

    if args.command == "download":
        message = message.replace(f"; or {PREFETCH_FIX}", "")
    elif isinstance(getattr(args, "language", None), str):
        message = message.replace("download <language>`", f"download {args.language}`")
    message = in_terms_of(message, _FLAG_OF_ARGUMENT)
    # The download command has no --model-dir.
    if args.command == "download":
        message = message.replace("pass --model-dir", "run `say` with --model-dir")
    return message


def _configure_logging(verbose: bool) -> None:
    """Log lines on stderr, each once.

    huggingface_hub prints its records with a handler of its own (added at import); they must
    not also reach the root handler configured here, or every retry line shows twice.
    """
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s: %(message)s",
    )
    logging.getLogger("huggingface_hub").propagate = False


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings as ``warning: message`` lines (no source file, line number or code)."""
    print(f"warning: {message}", file=sys.stderr if file is None else file)


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``languages | head -1``): stop quietly, no error."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    # The final flush at exit must not fail again.
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Ctrl-C at any moment, imports included, prints one line and exits with status 130.

    Args:
        argv: The arguments (default: the process's).

    Returns:
        The exit code (see the module's docstring).
    """
    try:
        return _run(argv)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _pack_language(model_dir: Path | None) -> str:
    """Without --language: the config a --model-dir pack's voices record, else english."""
    if model_dir is not None:
        from .engine.backends.numpy.weights.pack_files import VOICES_FOLDER
        from .engine.voices.voice import recorded_config

        found = recorded_config(model_dir / VOICES_FOLDER)
        if found is not None:
            return found
    return "english"


def _run(argv: Sequence[str] | None) -> int:
    from .cli_arguments import build_parser

    args = build_parser().parse_args(argv)
    if args.command in ("say", "voices") and args.language is None:
        args.language = _pack_language(args.model_dir)
    _configure_logging(args.verbose)
    warnings.showwarning = _one_line_warning
    from .engine.errors import PocketTTSError

    try:
        code = COMMANDS[args.command](args)
        # Flush here, where a closed pipe is caught, not at interpreter exit.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except PocketTTSError as exc:
        print(f"error: {shell_wording(str(exc), args)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, NotImplementedError) as exc:
        # Invalid option values are usage errors too.
        print(f"error: {shell_wording(str(exc), args)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"error: {shell_wording(str(exc), args)}", file=sys.stderr)
        return EXIT_IO


if __name__ == "__main__":
    sys.exit(main())
