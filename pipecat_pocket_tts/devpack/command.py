"""The devpack command, ``python -m pipecat_pocket_tts.devpack OUT [--config tiny]``: its
options (shared with ``python -m pipecat_pocket_tts devpack``) and its run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..engine.backends.numpy.weights.pack_files import KNOWN_VOICES, select_voices
from ..engine.errors import PocketTTSError
from .configs import tiny_config_dict
from .pack import DEFAULT_VOICES, build_pack

DESCRIPTION = "Write a random-weight PocketTTS pack (for tests, examples and benchmarks)."
_TINY = {"tiny": "standard", "tiny-standard": "standard", "tiny-small": "small"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command's options (also those of ``python -m pipecat_pocket_tts devpack``)."""
    parser.add_argument("out", type=Path, help="output folder")
    parser.add_argument(
        "--config",
        default="tiny",
        help="a registry config name (e.g. english; full size) or tiny / tiny-small (default tiny)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--voices",
        default=",".join(DEFAULT_VOICES),
        help="comma-separated names, 'all' (every voice of the catalogue) or 'none' "
        f"(default: {','.join(DEFAULT_VOICES)})",
    )
    parser.add_argument("--tokenizer-format", choices=("model", "json"), default=None)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--without-cloning", action="store_true", help="omit encoder weights")
    parser.add_argument(
        "--voice-frames",
        type=int,
        default=None,
        help="voice prompt length in 80 ms frames (default: 12 for tiny, 63 ≈ 5 s otherwise)",
    )


def run(args: argparse.Namespace) -> int:
    """Build the pack ``args`` describe.

    Args:
        args: The parsed options of ``add_arguments``.

    Returns:
        The exit code: 0, or 2 for a bad config.
    """
    config: str | dict[str, Any] = (
        tiny_config_dict(_TINY[args.config]) if args.config in _TINY else args.config  # type: ignore[arg-type]
    )
    try:
        folder = build_pack(
            args.out,
            config,
            seed=args.seed,
            voices=KNOWN_VOICES if (names := select_voices(args.voices)) is None else names,
            tokenizer_format=args.tokenizer_format,
            dtype=args.dtype,
            with_cloning=not args.without_cloning,
            voice_frames=args.voice_frames or (12 if args.config in _TINY else 63),
        )
    except PocketTTSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"wrote {folder} ({size / 1e6:.1f} MB)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m pipecat_pocket_tts.devpack``: parse ``argv`` and build the pack.

    Args:
        argv: The arguments (default: the process's).

    Returns:
        The exit code.
    """
    parser = argparse.ArgumentParser(
        prog="python -m pipecat_pocket_tts.devpack", description=DESCRIPTION
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))
