"""What the benchmarks share: the packs they measure, their child processes and their meters.

- Packs: ``build_files(work)`` writes (once) the full-size random ``english`` pack the
  side-by-side benchmarks share and a config upstream pocket-tts loads the very same files from;
  ``never_eos_pack`` a random pack whose EOS never fires (every reply runs to its frame limits),
  ``endless_pack`` the same at full size with a shipped voice's length;
  ``registry_pack`` a full-size random pack of any registry config; ``upstream_config`` the
  upstream config of a pack's files.
- Child processes: ``cap_blas_threads`` (before NumPy is imported), ``module_command`` and
  ``tree_env`` to run a benchmark module on this checkout's code or another's.
- Meters: ``proc_status`` (``/proc/<pid>/status`` in MB), ``cpu_seconds``, ``free_port``,
  ``percentile``, ``stalls`` and ``wait_until_ready`` (a pipeline's TTS service loaded).

Nothing here imports NumPy or the package at import time: a benchmark caps BLAS's threads
after importing this module and before NumPy loads.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
UPSTREAM_PYTHON = Path("/tmp/refvenv/bin/python")  # torch + upstream pocket-tts (reference)
VOICE_FRAMES = 125  # a typical shipped voice prompt (10 s)
EOS_NEVER = -30.0  # a constant EOS logit below every threshold: replies run to their limits
FRAME_SECONDS = 0.08
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


# -- packs --------------------------------------------------------------------------------------


def pack_files(work: Path) -> tuple[Path, Path]:
    """Where the full-size pack and its upstream config (JSON, which YAML loaders read) are.

    Args:
        work: The folder the pack lives in.

    Returns:
        The pack folder and the upstream config's path.
    """
    return work / "english", work / "upstream_english.yaml"


def build_files(work: Path) -> tuple[Path, Path]:
    """The full-size random ``english`` pack and an upstream config of its files, built once.

    Args:
        work: The folder to write them in.

    Returns:
        The pack folder and the upstream config's path.
    """
    from pipecat_pocket_tts.devpack import build_pack

    pack, config_path = pack_files(work)
    if not (pack / "model.safetensors").exists():
        print(f"writing a full-size random English pack to {pack} ...", flush=True)
        build_pack(pack, "english", voices=("alba",), voice_frames=VOICE_FRAMES)
    upstream_config(pack, "english", config_path)
    return pack, config_path


def never_eos_pack(pack_dir: Path, config: str) -> Path:
    """A random-weight pack whose EOS never fires, built once.

    Args:
        pack_dir: The folder the pack goes in (as ``pack_dir / config``).
        config: A registry config name, or ``"tiny"`` for the tiny test shapes.

    Returns:
        The pack folder.
    """
    folder = pack_dir / config
    if (folder / "model.safetensors").exists():
        return folder
    from pipecat_pocket_tts.devpack import build_pack, tiny_config_dict

    print(f"building the {config} pack in {folder} (once)...", flush=True)
    source: Any = tiny_config_dict("standard") if config == "tiny" else config
    build_pack(folder, source, eos_logit=EOS_NEVER, voices=("alba",))
    return folder


def endless_pack(work: Path) -> Path:
    """The full-size random ``english`` pack with an EOS head that never fires, built once.

    Every chunk runs to its frame limit, so a reply lasts about as long as real speech of its
    text would (random weights would otherwise stop after a few frames and no two calls would
    overlap).

    Args:
        work: The folder the pack goes in (as ``work / "english-endless"``).

    Returns:
        The pack folder.
    """
    from pipecat_pocket_tts.devpack import build_pack

    pack = work / "english-endless"
    if not (pack / "model.safetensors").exists():
        print(f"writing a full-size random English pack (no EOS) to {pack} ...", flush=True)
        build_pack(
            pack, "english", voices=("alba",), voice_frames=VOICE_FRAMES, eos_logit=EOS_NEVER
        )
    return pack


def registry_pack(work: Path, name: str) -> Path:
    """A full-size random pack of a registry config, written by the devpack once.

    Args:
        work: The folder the pack goes in (as ``work / name``).
        name: The registry config (``english``, ``german_24l``, ...).

    Returns:
        The pack folder.
    """
    import subprocess

    folder = work / name
    if not (folder / "model.safetensors").exists():
        print(f"building {name} in {folder} …", flush=True)
        module = "pipecat_pocket_tts.devpack"
        cmd = [sys.executable, "-m", module, str(folder), "--config", name, "--voices", "alba"]
        subprocess.run(cmd, check=True, env=tree_env())
    return folder


def upstream_config(pack: Path, config: str, path: Path | None = None) -> Path:
    """Upstream's config for a pack's files (JSON is YAML; upstream reads it as such).

    Args:
        pack: The pack folder (its ``config.json`` is used when it has one).
        config: The registry config the pack was built from, when it has no ``config.json``.
        path: Where to write the config; ``pack / "upstream.yaml"`` by default.

    Returns:
        The written config's path.
    """
    from pipecat_pocket_tts.engine.model.config_registry import raw_configs

    local = pack / "config.json"
    raw = json.loads(local.read_text()) if local.exists() else copy.deepcopy(raw_configs()[config])
    raw.pop("weights_path_without_voice_cloning", None)
    raw["weights_path"] = str(pack / "model.safetensors")
    table = raw["flow_lm"]["lookup_table"]
    if (pack / "tokenizer.model").exists():
        table["tokenizer"], table["tokenizer_path"] = "sentencepiece", str(pack / "tokenizer.model")
    else:
        table["tokenizer"], table["tokenizer_path"] = "tokenizers", str(pack / "tokenizer.json")
    path = path or pack / "upstream.yaml"
    path.write_text(json.dumps(raw, indent=1))
    return path


# -- child processes ----------------------------------------------------------------------------


def cap_blas_threads(threads: int, env: dict[str, str] | None = None) -> dict[str, str]:
    """Caps BLAS's threads in ``env`` (this process's environment by default).

    Args:
        threads: The thread count; in this process it takes effect only before NumPy loads.
        env: The environment of a child process to cap instead of this one's.

    Returns:
        The capped environment.
    """
    target: Any = os.environ if env is None else env
    for variable in BLAS_THREAD_VARIABLES:
        target[variable] = str(threads)
    return target


def module_command(module: str, *args: str, python: str | Path = sys.executable) -> list[str]:
    """The command that runs a benchmark module in a child process.

    ``-P`` keeps the working folder off ``sys.path``, so the child imports the package and the
    benchmarks from its ``PYTHONPATH`` alone (``tree_env``).

    Args:
        module: The module, as ``benchmarks.<kind>.<name>``.
        *args: Its arguments.
        python: The interpreter.

    Returns:
        The command line.
    """
    return [str(python), "-P", "-m", module, *args]


def tree_env(tree: Path = REPO, **extra: str) -> dict[str, str]:
    """This environment with ``tree``'s code first on the path, then this checkout's benchmarks.

    A tree without a ``benchmarks`` package (an older checkout, whose scripts sat in one
    folder) lends its ``pipecat_pocket_tts`` only; one with it runs its own benchmarks.

    Args:
        tree: The checkout whose ``pipecat_pocket_tts`` the child imports.
        **extra: More variables to set.

    Returns:
        The child's environment.
    """
    paths = dict.fromkeys([str(tree), str(REPO)])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), **extra}


def has_module(tree: Path, module: str) -> bool:
    """Whether a checkout has a benchmark module (older ones had flat scripts)."""
    return (tree / Path(*module.split("."))).with_suffix(".py").exists()


# -- meters -------------------------------------------------------------------------------------


def proc_status(keys: Iterable[str] = ("VmRSS",), pid: int | str = "self") -> dict[str, float]:
    """Memory figures of ``/proc/<pid>/status`` in MB.

    Args:
        keys: The fields (``VmRSS``, ``VmHWM``, ``RssAnon``, ``RssFile``...).
        pid: The process; this one by default.

    Returns:
        The fields found, in MB.
    """
    wanted, out = set(keys), {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in wanted:
                out[key] = int(value.split()[0]) / 1024
    return out


def cpu_seconds(pid: int | str = "self") -> float:
    """User plus system CPU seconds of a process, from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0..1) of non-empty ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def stalls(arrivals: list[float], buffer: float) -> bool:
    """Whether a stream played from its first frame after ``buffer`` seconds ever ran dry.

    Args:
        arrivals: Each 80 ms frame's arrival time, in seconds.
        buffer: The seconds the playback waits after the first frame.

    Returns:
        True when a frame came after its turn to play; a stream that never spoke stalled.
    """
    if not arrivals:
        return True
    first = arrivals[0]
    return any(t > first + buffer + i * FRAME_SECONDS for i, t in enumerate(arrivals))


def wait_until_ready(worker: Any, service: Any) -> Any:
    """An ``asyncio.Event`` set once a pipeline's TTS service can speak.

    Ours loads its model in the background (``on_model_loaded``); any other service has loaded
    by the time the pipeline starts.

    Args:
        worker: The ``PipelineWorker`` running the pipeline.
        service: The TTS service in it.

    Returns:
        The event.
    """
    import asyncio

    from pipecat_pocket_tts import PocketTTSService

    ready = asyncio.Event()

    async def _ready(*_args: Any) -> None:
        ready.set()

    if isinstance(service, PocketTTSService):
        service.event_handler("on_model_loaded")(_ready)
    else:
        worker.event_handler("on_pipeline_started")(_ready)
    return ready
