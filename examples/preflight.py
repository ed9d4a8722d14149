"""Before a bot serves: its PocketTTS pack, language and voice checked, so a missing pack or a
wrong voice is one line at start (naming the bot's own options) and not an error at Connect.

The model is loaded here with ``PocketTTS.load_shared``; the service's own load gets the same
instance, so the first caller hears the bot at once.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

#: The bots' options, by the engine argument they set.
TRY_BOT_FLAGS = {"model_dir": "--model-dir", "voice": "--voice", "language": "--language"}
ENVIRONMENT = {
    "model_dir": "POCKET_TTS_MODEL_DIR",
    "voice": "POCKET_TTS_VOICE",
    "language": "POCKET_TTS_LANGUAGE",
}


def exit_unless_speakable(
    script: str,
    *,
    language: str,
    model_dir: str | Path | None,
    voice: str | None,
    names: Mapping[str, str],
    joiner: str = " ",
) -> None:
    """Load the pack and check the voice; on failure one ``error:`` line and exit status 2."""
    from pipecat_pocket_tts.cli_wording import in_terms_of
    from pipecat_pocket_tts.engine import PocketTTS, PocketTTSError

    try:
        tts = PocketTTS.load_shared(language, model_dir=model_dir)
        tts.check_voice(voice)
    except PocketTTSError as exc:
        message = in_terms_of(str(exc), names, joiner=joiner)
        print(f"error: {script}: {message}", file=sys.stderr)
        raise SystemExit(2) from None
