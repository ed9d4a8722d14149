"""Command line: speak text into a WAV file, list languages and voices, prefetch packs.

    python -m pipecat_pocket_tts say "Hello there." -o hello.wav [--language french --voice estelle]
    python -m pipecat_pocket_tts say "Hi." -o a.wav --clone-voice me.wav --save-voice me.safetensors
    python -m pipecat_pocket_tts say "Hi again." -o b.wav --voice me.safetensors
    python -m pipecat_pocket_tts voices [--language english | --model-dir DIR]
    python -m pipecat_pocket_tts languages
    python -m pipecat_pocket_tts download english [--voices all|alba,jean]

Exit codes: 0 success; 2 a usage error or a PocketTTS error (its message says what to do);
1 an I/O failure (e.g. the output file cannot be written); 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .devpack import cli as devpack_cli
from .engine.backends.coreml import cli as coreml_cli

EXIT_OK = 0
EXIT_IO = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

PROG = "python -m pipecat_pocket_tts"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Kyutai PocketTTS on NumPy or CoreML (no torch): speak text, manage packs.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress (INFO level) on stderr"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    say = commands.add_parser(
        "say",
        help="speak text into a WAV file",
        description="Speak TEXT into a 16-bit PCM mono WAV at 24 kHz.",
    )
    say.add_argument("text", help="the text to speak ('-' reads it from stdin)")
    say.add_argument("-o", "--output", type=Path, required=True, help="WAV file to write")
    _add_pack_options(say)
    say.add_argument("--backend", default="auto", help="numpy, coreml or auto (default: auto)")
    coreml_cli.add_arguments(say)
    voice = say.add_argument_group("voice")
    choice = voice.add_mutually_exclusive_group()
    choice.add_argument(
        "--voice",
        help="a voice of the pack (see the 'voices' command) or a voice-state .safetensors file "
        "(default: the language's default voice)",
    )
    choice.add_argument(
        "--clone-voice",
        type=Path,
        metavar="AUDIO",
        help="speak with the voice of this recording (WAV; FLAC/OGG/MP3 with the audio extra; "
        "needs the weights with voice "
        "cloning: accept the terms at https://huggingface.co/kyutai/pocket-tts, set HF_TOKEN). "
        "Clone only voices you have consent to use.",
    )
    voice.add_argument(
        "--save-voice",
        type=Path,
        metavar="FILE",
        help="with --clone-voice: also save the cloned voice as a .safetensors file, to reuse "
        "with --voice FILE",
    )
    generation = say.add_argument_group("generation")
    generation.add_argument("--seed", type=int, help="random seed (same seed → same audio)")
    generation.add_argument(
        "--temperature", type=float, help="sampling temperature (default: the model's, 0.3…0.7)"
    )
    generation.add_argument(
        "--eos-threshold",
        type=float,
        help="end-of-speech logit threshold (default: the model's; higher speaks longer)",
    )
    generation.add_argument(
        "--max-frames", type=int, help="cap on generated 80 ms frames per text chunk"
    )
    generation.add_argument(
        "--no-normalize",
        dest="normalize",
        action="store_false",
        help="speak the text as written (no spoken forms for numbers, symbols …)",
    )
    generation.add_argument(
        "--post-process",
        action="store_true",
        help="80 Hz high-pass and a gentle 6 kHz shelf on the result",
    )

    voices = commands.add_parser(
        "voices",
        help="list the voices of a pack",
        description="List the voices of a pack: the hub catalogue (cached ones marked) or "
        "the voices in --model-dir/embeddings.",
    )
    _add_pack_options(voices)

    languages = commands.add_parser(
        "languages",
        help="list the model configs (languages)",
        description="List every model config name --language accepts (besides language codes "
        "such as en or pt-BR and names such as English, which mean the language's default pack).",
    )
    languages.add_argument(
        "language",
        nargs="?",
        help="only the packs of this language (a code such as en or pt-BR, a name, a pack name)",
    )

    download = commands.add_parser(
        "download",
        help="prefetch a pack from Hugging Face",
        description="Download a pack's weights, tokenizer and voices into the Hugging Face "
        "cache, so later runs work offline (HF_HUB_OFFLINE=1). Uses HF_TOKEN when set: with "
        "access to the gated kyutai/pocket-tts repository, the weights with voice cloning.",
    )
    download.add_argument(
        "language",
        help="a model config name (see 'languages'), or a language (en, pt-BR, English)",
    )
    download.add_argument(
        "--voices",
        default="all",
        help="'all' (default), 'none', or comma-separated voice names",
    )
    download.add_argument("--revision", help="a hub revision instead of the pinned ones")
    download.add_argument(
        "--without-cloning",
        action="store_true",
        help="take the ungated weights (no voice cloning) without trying the gated ones",
    )
    download.add_argument(
        "--backend",
        choices=("numpy", "coreml"),
        default="numpy",
        help="which pack: the upstream weights (numpy, default) or the CoreML v2.1 pack",
    )
    download.add_argument(
        "--precision",
        choices=("fp16", "int8"),
        default="fp16",
        help="with --backend coreml: the FlowLM variant to fetch",
    )
    devpack_cli.add_arguments(
        commands.add_parser(
            "devpack",
            help="write a random-weight pack (tests, offline trials)",
            description=devpack_cli.DESCRIPTION,
        )
    )

    return parser


def _add_pack_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--language",
        "-l",
        default="english",
        help="model config name or language (en, pt-BR, English; default: english; see the "
        "'languages' command)",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="a local pack folder (model.safetensors, tokenizer, embeddings/); no download",
    )
    parser.add_argument("--revision", help="a hub revision instead of the pinned ones")


# -- commands ------------------------------------------------------------------------------


def cmd_say(args: argparse.Namespace) -> int:
    from .engine import PocketTTS

    if args.save_voice is not None and args.clone_voice is None:
        raise ValueError("--save-voice saves a cloned voice: use it with --clone-voice AUDIO")
    text = sys.stdin.read() if args.text == "-" else args.text
    started = time.perf_counter()
    tts = PocketTTS.load(
        args.language,
        backend=args.backend,
        model_dir=args.model_dir,
        revision=args.revision,
        **coreml_cli.backend_options(args),
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
        "max_frames": args.max_frames,
        "normalize": args.normalize,
        "post_process": args.post_process,
    }
    audio = tts.synthesize(text, **options)
    spoke = time.perf_counter()
    from .engine.audio import write_wav

    path = write_wav(args.output, audio, tts.sample_rate)
    seconds = audio.shape[0] / tts.sample_rate
    print(
        f"wrote {path} ({seconds:.2f} s of audio; load {loaded - started:.2f} s, "
        f"synthesis {spoke - loaded:.2f} s, {tts.backend.name} backend)",
        file=sys.stderr,
    )
    return EXIT_OK


def cmd_voices(args: argparse.Namespace) -> int:
    from .engine.backends import resolve_pack
    from .engine.backends.numpy import files
    from .engine.config import get_config, resolve_config_name
    from .engine.languages import find_language

    if args.model_dir is not None:
        pack = resolve_pack(args.language, model_dir=args.model_dir)
        for name in pack.voice_names:
            print(f"{name}{'  (default)' if name == pack.default_voice else ''}")
        if not pack.voice_names:
            print(f"no voices in {args.model_dir / files.VOICES_FOLDER}", file=sys.stderr)
        return EXIT_OK

    config = get_config(resolve_config_name(args.language))  # UnknownLanguageError: choices
    info = find_language(config.name)
    default = info.default_voice if info is not None else None
    for name in files.KNOWN_VOICES:
        hub = files.voice_hub_file(config, name, revision=args.revision)
        marks = []
        if name == default:
            marks.append("default")
        if _in_hf_cache(hub.repo, hub.path, hub.revision):
            marks.append("cached")
        print(name + (f"  ({', '.join(marks)})" if marks else ""))
    print(
        f"(the hub catalogue: which voices exist for {config.name} is checked on first use)",
        file=sys.stderr,
    )
    return EXIT_OK


def _in_hf_cache(repo: str, path: str, revision: str | None) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo, path, revision=revision)
    except Exception:  # an odd cache must not break a listing
        return False
    return isinstance(found, str)


def cmd_languages(args: argparse.Namespace) -> int:
    from .engine.config import config_names, get_config, resolve_config_name

    names = config_names()
    if args.language is not None:  # the packs speaking that language
        wanted = get_config(resolve_config_name(args.language)).language
        names = [name for name in names if get_config(name).language == wanted]
    rows = []
    for name in names:
        config = get_config(name)
        tr = config.flow_lm.transformer
        rows.append(
            (
                name,
                config.language,
                f"{tr.num_layers} layers × {tr.d_model}",
                config.flow_lm.sampler.type,
            )
        )
    width = max(len(row[0]) for row in rows)
    for name, language, size, sampler in rows:
        print(f"{name:<{width}}  {language:<10}  {size:<16}  {sampler}")
    return EXIT_OK


def cmd_download(args: argparse.Namespace) -> int:
    from .engine.backends.numpy.files import download_pack
    from .engine.config import resolve_config_name

    language = resolve_config_name(args.language)
    choice = args.voices.strip()
    voices: list[str] | None
    if choice == "all":
        voices = None
    elif choice in ("", "none"):
        voices = []
    else:
        voices = [v.strip() for v in choice.split(",") if v.strip()]
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
    cloning = "with voice cloning" if pack.has_voice_cloning else "without voice cloning"
    print(f"weights ({cloning}): {pack.weights}")
    print(f"tokenizer: {pack.tokenizer}")
    print(f"voices ({len(fetched)}): {', '.join(fetched) or 'none'}")
    return EXIT_OK


COMMANDS = {
    "say": cmd_say,
    "voices": cmd_voices,
    "languages": cmd_languages,
    "download": cmd_download,
    "devpack": devpack_cli.run,
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
}
# `backend='numpy'`, `model_dir=<a folder>`, `voice=` (not inside a word or a path).
_ASSIGNMENT = re.compile(
    r"(?<![\w/.-])(" + "|".join(_FLAG_OF_ARGUMENT) + r")=(?:'([^']*)'|(<[^>]*>))?"
)
# Bare argument names that are no English word: `model_dir /x does not exist`.
_BARE_ARGUMENT = re.compile(
    r"(?<![\w/.-])(model_dir|compute_units|eos_threshold|max_frames)(?![\w/])"
)
# The command line has no token option: HF_TOKEN is the way.
_TOKEN_ARGUMENT = re.compile(r" \(or pass token=\)| / token=")


def shell_wording(message: str, args: argparse.Namespace) -> str:
    """An engine error message as a shell user needs it: flags, and fixes that fit the command.

    ``download`` itself is the prefetch step: its errors do not suggest running it again,
    and name ``--model-dir`` as an option of ``say``.
    """
    from .engine.packs import PREFETCH_FIX

    if args.command == "download":
        message = message.replace(f"; or {PREFETCH_FIX}", "")
    elif isinstance(getattr(args, "language", None), str):
        message = message.replace("download <language>`", f"download {args.language}`")
    message = _TOKEN_ARGUMENT.sub("", message)
    message = _ASSIGNMENT.sub(_as_flag, message)
    message = _BARE_ARGUMENT.sub(lambda m: _FLAG_OF_ARGUMENT[m.group(1)], message)
    if args.command == "download":  # which has no --model-dir
        message = message.replace("pass --model-dir", "run `say` with --model-dir")
    return message


def _as_flag(match: re.Match[str]) -> str:
    flag = _FLAG_OF_ARGUMENT[match.group(1)]
    value = match.group(2) if match.group(2) is not None else match.group(3)
    return flag if value is None else f"{flag} {value}"


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    from .engine.errors import PocketTTSError

    try:
        return COMMANDS[args.command](args)
    except PocketTTSError as exc:
        print(f"error: {shell_wording(str(exc), args)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, NotImplementedError) as exc:  # invalid option values
        print(f"error: {shell_wording(str(exc), args)}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"error: {shell_wording(str(exc), args)}", file=sys.stderr)
        return EXIT_IO
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
