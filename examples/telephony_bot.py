"""The PocketTTS voice bot on a phone line (Twilio, Telnyx, Plivo or Exotel): 8 kHz out.

The model speaks at 24 kHz; the service resamples to the pipeline's 8 kHz output with its own
soxr stream, flushed at the end of every turn so no sentence loses its last syllable. The input
stays at 16 kHz for VAD and STT.

    pip install -e '.[examples]'          # in a clone of this repository
    export DEEPGRAM_API_KEY=... OPENAI_API_KEY=...   # (or put them in a .env file)
    ngrok http 7860                        # point the Twilio number's webhook at it
    python examples/telephony_bot.py -t twilio -x YOUR.ngrok.io
"""

from __future__ import annotations

import os
import sys

# OpenBLAS keeps idle threads spinning ~0.1 s after each call; with a short timeout the CPU is
# idle within milliseconds of an interruption. It must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

from bot import exit_unless_keys, exit_unless_speakable_pack, run_bot
from pipecat.runner.types import RunnerArguments
from pipecat.runner.utils import create_transport
from runner_transports import PHONE_RATE, transport_params


async def bot(runner_args: RunnerArguments) -> None:
    """Entry point of the Pipecat runner: one call per phone call."""
    transport = await create_transport(runner_args, transport_params())
    await run_bot(transport, runner_args, out_rate=PHONE_RATE)


if __name__ == "__main__":
    exit_unless_keys("examples/telephony_bot.py", sys.argv[1:])
    exit_unless_speakable_pack("examples/telephony_bot.py")
    from pipecat.runner.run import main

    main()
