"""The command line's arguments: one parser for every subcommand (``__main__`` runs them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from .devpack import command as devpack_command
from .engine.backends.coreml import cli_options as coreml_cli
from .server import serve_command

PROG = "python -m pipecat_pocket_tts"


def program_name(argv0: str | None = None) -> str:
    """How the user started this CLI: the installed command's name, or ``python -m ...``."""
    name = Path(sys.argv[0] if argv0 is None else argv0).name
    return PROG if name in ("__main__.py", "-c", "-m", "") else name


def non_negative_int(text: str) -> int:
    """argparse type of ``--seed``: an integer ≥ 0 (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer ≥ 0, got {value}")
    return value


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument error as one line and where to look, not the whole usage first."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message}\nsee: {self.prog} --help\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = OneLineErrorParser(
        prog=program_name(),
        description="Kyutai PocketTTS on NumPy or CoreML (no torch): speak text, manage packs.",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log progress (INFO level) on stderr"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    say = commands.add_parser(
        "say",
        help="speak text into a WAV file",
        description="Speak TEXT into a 16-bit PCM mono WAV at 24 kHz (or raw PCM), to a file "
        "or to stdout (-o -).",
    )
    say.add_argument("text", help="the text to speak ('-' reads it from stdin)")
    say.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="where the audio goes: a .wav (or .raw/.pcm) file, '-' for stdout (| aplay), or a "
        "device or FIFO (written through); a symlink keeps pointing at its replaced target",
    )
    say.add_argument(
        "--format",
        choices=("wav", "raw"),
        help="wav (16-bit PCM, the default) or raw (headerless 16-bit little-endian PCM, "
        "24 kHz mono); by default the extension's",
    )
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
    generation.add_argument(
        "--seed", type=non_negative_int, help="random seed ≥ 0 (same seed → same audio)"
    )
    generation.add_argument(
        "--temperature", type=float, help="sampling temperature (default: the model's, 0.3…0.7)"
    )
    generation.add_argument(
        "--eos-threshold",
        type=float,
        help="end-of-speech logit threshold (default: the model's; higher speaks longer)",
    )
    generation.add_argument(
        "--speed",
        type=float,
        help="speaking rate, 0.25-4.0 (pitch kept; default 1.0, the model's pace). Pauses: "
        'write <break time="500ms"/> (up to 10 s) in the text',
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
        "--timestamps",
        type=Path,
        metavar="FILE",
        help="also write the words' start/end times: .json, .srt or .vtt (by extension)",
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
        help="only the packs of this language (a code such as en or pt-BR, a name, a pack name), "
        "or an upstream config (path, https:// URL or hf://owner/repo/file.yaml@rev): its row",
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
        help="a model config name (see 'languages'), a language (en, pt-BR, English), or an "
        "upstream config YAML (path, https:// URL, hf://…@revision)",
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
    commands.add_parser(
        "warmup",
        help="compile the numba kernels into this install's cache (for image builds)",
        description="Compile the numba kernels now and cache them where this install keeps "
        "them (10–30 s once on two cores; later processes load them in well under a second). "
        "Run it in a container image build, after pip install, so no container compiles at "
        "start.",
    )
    serve_command.add_arguments(
        commands.add_parser(
            "serve",
            help="serve one model to every bot process (websocket, OpenAI and upstream HTTP)",
            description=serve_command.DESCRIPTION,
        )
    )
    devpack_command.add_arguments(
        commands.add_parser(
            "devpack",
            help="write a random-weight pack (tests, offline trials)",
            description=devpack_command.DESCRIPTION,
        )
    )
    # Accept -v after the verb too (``say -v``).
    for command in commands.choices.values():
        command.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log progress"
        )
    return parser


def _add_pack_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--language",
        "-l",
        default=None,
        help="model config name or language (en, pt-BR, English; see the 'languages' command), "
        "or an upstream config YAML (path, https:// URL, hf://owner/repo/file.yaml@revision); "
        "default: english, or with --model-dir the config its voices were made for",
    )
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="a local pack folder (model.safetensors, tokenizer, embeddings/); no download",
    )
    parser.add_argument("--revision", help="a hub revision instead of the pinned ones")
