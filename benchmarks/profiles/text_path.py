"""Hands and climbs of a text on its way from ``PocketTTSService.run_tts`` to a TTSAudioRawFrame.

    python -m benchmarks.profiles.text_path [--runs 5]                # this checkout
    PYTHONPATH=<checkout>:$PWD python -P -m benchmarks.profiles.text_path  # another one

Builds a tiny random-weight pack (``devpack``), speaks one sentence (a ``TTSSpeakFrame``)
through a real ``PocketTTSService`` in a Pipecat pipeline (``run_test``, no warm-up), and
profiles every thread (``sys.setprofile`` / ``threading.setprofile``, set before the model
loads) from the call of ``run_tts`` with that sentence to the first ``TTSAudioRawFrame`` made.
Only the package's own code counts; the checkout measured is the one ``pipecat_pocket_tts`` is
imported from (printed first), so the same script measures an older checkout.

- **rooms**: a module of ``engine/``, ``service/``, ``server/`` (``engine.session``,
  ``service.turns``...), or a whole folder below them (``engine.text``, ``engine.timing``,
  ``engine.runtime``): the rooms of DEVELOPERS.md's stage map. Calls inside a room (the text
  normalizer's rules, say) are its own business.
- **hands**: calls that hand the work from one room to another (the caller's innermost
  package frame in another room; a resumed coroutine or generator counts again); also
  given: all entries into package functions. The model's compute below the stage interface
  (``engine/backends/*`` but ``base.py``) is transparent: one hand per call into it.
- **floors**: the import graph of the rooms (a room imports another when one of its modules
  does, every import counted, lazy or for type checking, as ``tests/test_import_graph.py``
  reads them; the graph has no circle): a room that imports no other is on floor 0, any other
  one floor above the highest room it imports.
- **climbs**: per thread, the walk of rooms the flow is in (the room of the innermost package
  frame after each call and each return; other code is transparent); a climb is a step of
  that walk to a room on a higher floor (a return to the caller above, or a call up into a
  room that imports the current one).

Two spans: the whole path (all threads; ticks and waits vary from run to run: the median and
range of ``--runs`` runs), and the engine's preparation of the text (the first
``Session.enqueue`` or ``Session.feed`` call, to its return, on its thread: deterministic),
whose walk of modules is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pipecat_pocket_tts
from tests import test_import_graph as import_graph

TEXT = "Hello there, how are you doing today?"
PACKAGE_DIR = Path(pipecat_pocket_tts.__file__).resolve().parent
BACKEND_COMPUTE = PACKAGE_DIR / "engine" / "backends"


def room(module: str) -> str:
    """``pipecat_pocket_tts.engine.text.chunking`` → ``engine.text``."""
    parts = module.split(".")
    return ".".join(parts[1:3]) or parts[0]


def module_names() -> dict[str, str]:
    """Every module file of the imported package → its dotted name."""
    import_graph.PACKAGE_DIR = PACKAGE_DIR  # the checkout measured (maybe not this one)
    return {str(path): name for name, path in import_graph.module_files().items()}


def floors(names: dict[str, str]) -> dict[str, int]:
    """Each room's floor in the rooms' import graph (0: imports no other room)."""
    modules = {name: Path(path) for path, name in names.items()}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported = {room(m) for m in import_graph.imports_of(name, path, modules)}
        graph.setdefault(room(name), set()).update(imported - {room(name)})
    floor: dict[str, int] = {}

    def of(name: str) -> int:
        if name not in floor:
            floor[name] = 0  # the graph has no circle (tests/test_import_graph.py)
            floor[name] = 1 + max((of(m) for m in graph[name]), default=-1)
        return floor[name]

    for name in graph:
        of(name)
    return floor


class PathTrace:
    """The profile function of every thread, and what it counted."""

    def __init__(self) -> None:
        self.names = module_names()
        self.floor = floors(self.names)
        self.active = False
        self.entries = 0
        self.hands = 0
        self.climbs = 0
        self._at: dict[int, str] = {}  # thread → module the flow is in
        self._compute = {p for p in self.names if Path(p).is_relative_to(BACKEND_COMPUTE)}
        self._compute.discard(str(BACKEND_COMPUTE / "base.py"))
        self.prep_thread: int | None = None
        self.prep_frame: FrameType | None = None
        self.prep_done = False
        self.prep_entries = 0
        self.prep_hands = 0
        self.prep_climbs = 0
        self.prep_walk: list[str] = []

    def _room(self, frame: FrameType | None) -> str | None:
        """The room of the innermost package frame that is not backend compute."""
        while frame is not None:
            path = frame.f_code.co_filename
            if path in self.names and path not in self._compute:
                return room(self.names[path])
            frame = frame.f_back
        return None

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and not self.active:
            self._maybe_start(frame)
        if not self.active or event not in ("call", "return"):
            return
        path = frame.f_code.co_filename
        if path not in self.names:
            return
        thread = threading.get_ident()
        if event == "return" and frame is self.prep_frame:
            self.prep_done = True  # the return to its caller is not the preparation's
        in_prep = thread == self.prep_thread and not self.prep_done
        if event == "call":
            caller = self._room(frame.f_back)
            if path in self._compute:
                if caller is None:
                    return  # compute called by compute
                callee = "backend compute"
            else:
                callee = room(self.names[path])
            handed = caller is not None and caller != callee
            self.entries += 1
            self.hands += handed
            self.prep_entries += in_prep
            self.prep_hands += in_prep and handed
            if self.prep_thread is None and self._is_preparation(frame):
                self.prep_thread, self.prep_frame = thread, frame
                self.prep_walk.append(callee)
                self.prep_entries += 1
                self.prep_hands += handed
        where = self._room(frame if event == "call" else frame.f_back)
        last = self._at.get(thread)
        if where is None or where == last:
            return
        self._at[thread] = where
        if last is not None and self.floor[where] > self.floor[last]:
            self.climbs += 1
            self.prep_climbs += in_prep
        if in_prep:
            self.prep_walk.append(where)

    def _maybe_start(self, frame: FrameType) -> None:
        if frame.f_code.co_name == "run_tts" and frame.f_locals.get("text") == TEXT:
            self.active = True

    def _is_preparation(self, frame: FrameType) -> bool:
        code = frame.f_code
        return code.co_name in ("enqueue", "feed") and code.co_filename == str(
            PACKAGE_DIR / "engine" / "session.py"
        )

    def stop(self) -> None:
        self.active = False


_current: list[PathTrace] = []


def _dispatch(frame: FrameType, event: str, arg: Any) -> None:
    """Every thread's profile function: the current run's trace (pool threads outlive runs)."""
    if _current:
        _current[-1].profile(frame, event, arg)


def run_once(pack: Path) -> PathTrace:
    from pipecat.frames.frames import TTSAudioRawFrame, TTSSpeakFrame
    from pipecat.tests.utils import run_test

    from pipecat_pocket_tts import PocketTTSService

    trace = PathTrace()
    post_init = TTSAudioRawFrame.__post_init__

    def first_audio(frame: TTSAudioRawFrame) -> None:
        trace.stop()
        post_init(frame)

    TTSAudioRawFrame.__post_init__ = first_audio  # type: ignore[method-assign]
    _current.append(trace)
    sys.setprofile(_dispatch)
    threading.setprofile(_dispatch)
    try:
        tts = PocketTTSService(
            model_dir=pack,
            backend="numpy",
            warmup=False,
            settings=PocketTTSService.Settings(seed=7),
        )
        asyncio.run(run_test(tts, frames_to_send=[TTSSpeakFrame(TEXT)], start_timeout=60.0))
    finally:
        trace.stop()
        TTSAudioRawFrame.__post_init__ = post_init  # type: ignore[method-assign]
    return trace


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    print(f"package: {PACKAGE_DIR}")
    with tempfile.TemporaryDirectory() as folder:
        pack = build_pack(Path(folder) / "english", tiny_config_dict("standard"))
        try:
            run_once(pack)  # caches (compiled patterns, memoized forms) warm: not counted
            traces = [run_once(pack) for _ in range(args.runs)]
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    for label, values in (
        ("whole path: hands", [t.hands for t in traces]),
        ("whole path: climbs", [t.climbs for t in traces]),
        ("whole path: entries", [t.entries for t in traces]),
        ("preparation: hands", [t.prep_hands for t in traces]),
        ("preparation: climbs", [t.prep_climbs for t in traces]),
        ("preparation: entries", [t.prep_entries for t in traces]),
    ):
        print(f"{label}: median {statistics.median(values)}, range {min(values)}-{max(values)}")
    print("preparation walk:", " → ".join(traces[-1].prep_walk))


if __name__ == "__main__":
    main()
