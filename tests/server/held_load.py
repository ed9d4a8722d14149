"""``python held_load.py FIFO serve ...``: the server's command line, its model load held until
a line is written to ``FIFO`` (a named pipe the test made), so a test can call the real
server while the model loads. Nothing else differs."""

from __future__ import annotations

import sys
from collections.abc import Callable

from pipecat_pocket_tts.__main__ import main
from pipecat_pocket_tts.server.core.state import ServerState


def held(load: Callable[[ServerState], None], fifo: str) -> Callable[[ServerState], None]:
    """``load``, first waiting for a line on ``fifo``."""

    def held_load(self: ServerState) -> None:
        with open(fifo) as pipe:  # blocks until the test opens the pipe, then reads a line
            pipe.readline()
        load(self)

    return held_load


if __name__ == "__main__":
    ServerState.load = held(ServerState.load, sys.argv[1])  # type: ignore[method-assign]
    sys.exit(main(sys.argv[2:]))
