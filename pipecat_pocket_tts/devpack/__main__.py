"""``python -m pipecat_pocket_tts.devpack OUT [--config tiny]``: write a random-weight pack."""

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
